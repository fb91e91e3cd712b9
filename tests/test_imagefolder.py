"""Your own photographs (`source="imagefolder:PATH"`): read with one-line errors, cut with ImageNet's
crops by the pipelines that read photographs, refused by the others, and compared end to end."""
from __future__ import annotations

import io
import re
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from torchvision import transforms

import pipelines
import pipelines.crops
from bench import cli
from pipelines import PipelineConfig
from pipelines.config import MEAN, STD
from pipelines.sources import imagefolder, open_split


def jpeg(path, size=(300, 200), seed=0) -> None:
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(small).resize(size, Image.Resampling.BICUBIC).save(path, format="JPEG", quality=90)


def bomb(path, side=20000) -> None:
    """A small JPEG whose header claims side x side pixels."""
    jpeg(path, size=(16, 16))
    data = bytearray(path.read_bytes())
    start = data.find(b"\xff\xc0") + 5   # baseline SOF: length, precision, then height and width
    data[start:start + 4] = side.to_bytes(2, "big") * 2
    path.write_bytes(bytes(data))


@pytest.fixture
def folder(tmp_path):
    """Three classes of 4, 3 and 5 JPEGs of assorted sizes."""
    root = tmp_path / "mine"
    for label, (name, count) in enumerate([("cat", 4), ("dog", 3), ("fox", 5)]):
        for k in range(count):
            jpeg(root / name / f"{k}.jpg", size=(260 + 40 * k, 230 + 30 * label), seed=10 * label + k)
    return root


def test_a_folder_of_classes_is_read_in_class_interleaved_order(folder):
    data, labels, heights, widths, classes = imagefolder.read_imagefolder(folder, "train")
    assert classes == ["cat", "dog", "fox"] and len(data) == len(labels) == 12
    assert labels[:6].tolist() == [0, 1, 2, 0, 1, 2] and np.bincount(labels).tolist() == [4, 3, 5]
    assert (heights[0], widths[0]) == (230, 260) and (heights[1], widths[1]) == (260, 260)
    with Image.open(io.BytesIO(data[2].tobytes())) as image:   # fox/0.jpg, as stored
        assert image.size == (260, 290)
    assert imagefolder.read_imagefolder(folder, "train", max_samples=3)[1].tolist() == [0, 1, 2]


@pytest.mark.parametrize("make,message", [
    (lambda root: root.mkdir(), "no class folders in it"),
    (lambda root: (root / "cat").mkdir(parents=True), "cat: an empty class"),
    (lambda root: (jpeg(root / "cat" / "a.jpg"), (root / "cat" / "b.png").write_bytes(b"\x89PNG....")),
     r"b\.png: not a JPEG file"),
    (lambda root: (root / "cat").mkdir(parents=True) or (root / "cat" / "a.jpg").write_bytes(b"\xff\xd8\xffjunk"),
     r"a\.jpg: an unreadable JPEG"),
    (lambda root: bomb(root / "cat" / "big.jpg"),
     r"/cat/big\.jpg: its header says 20000 x 20000 px, over PIL's decompression-bomb bound of \d+ pixels: remove it"),
    (lambda root: [jpeg(root / f"c{k:02d}" / "a.jpg") for k in range(11)], "11 classes; the models here have 10"),
    (lambda root: (jpeg(root / "cat" / "a.jpg"), open(os.fsencode(root / "cat") + b"/bad\xff.jpg", "wb").close()),
     r"/cat/bad\\xff\.jpg: a name that is not UTF-8: rename it$"),
    (lambda root: jpeg(Path(os.fsdecode(os.fsencode(root) + b"/c\xe9t")) / "a.jpg"),
     r"/bad/c\\xe9t: a name that is not"),
])
def test_what_cannot_be_read_is_one_line_naming_it(tmp_path, make, message):
    root = tmp_path / "bad"
    make(root)
    with pytest.raises(ValueError, match=message):
        imagefolder.read_imagefolder(root, "train")


@pytest.mark.parametrize("make,message", [
    (lambda cls: open(os.fsencode(cls) + b"/bad\xff.jpg", "wb").close(),
     "{cls}/bad\\xff.jpg: a name that is not UTF-8: rename it"),
    (lambda cls: (cls / "b.png").write_bytes(b"\x89PNG...."),
     "{cls}/b.png: not a JPEG file (the pipelines here decode JPEG only)"),
    (lambda cls: (cls / "c.jpg").write_bytes(b"\xff\xd8\xffjunk"), "{cls}/c.jpg: an unreadable JPEG"),
])
def test_a_file_that_cannot_be_read_is_refused_once_before_anything_runs(folder, tmp_path, capsys, make, message):
    """A file of the folder that no pipeline can read (a name that is not UTF-8, a .png, a JPEG
    whose header does not read): `compare` says so once, naming it, before any configuration runs
    (each configuration failed on it in turn, the same line five times), and writes no results.csv."""
    make(folder / "dog")
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as stop:
        cli.main(["compare", "--source", f"imagefolder:{folder}", "--pipelines", "dataloader,tvjpeg", "--image-size",
                  "64", "--batch-size", "4", "--modes", "loader,model,e2e", "--steps", "1", "--warmup", "1",
                  "--repeats", "1", "--processes", "1", "--no-isolate", "--workers", "0", "--out", str(out)])
    assert str(stop.value.code).startswith("pipebench compare: " + message.format(cls=folder / "dog"))
    assert "\n" not in str(stop.value.code) and not (out / "results.csv").exists()
    assert "Traceback" not in capsys.readouterr().err


def test_prepare_checks_your_photographs_and_makes_nothing(folder, tmp_path, capsys):
    """A fault campaign: `prepare --source imagefolder:/nonexistent` exited 0 having made the synthetic
    CIFAR set (236 MB) and never looked at the folder. It checks every photograph as `compare` does, a
    folder that cannot be used in one line, and writes nothing under --data-root."""
    data = tmp_path / "data"
    assert cli.main(["prepare", "--source", f"imagefolder:{folder}", "--data-root", str(data)]) == 0
    assert capsys.readouterr().out == (f"imagefolder: {folder} (every photograph of its train split checked; read as "
                                       "they are: no JPEG copy to make)\n")
    jpeg(tmp_path / "both" / "train" / "cat" / "a.jpg")
    jpeg(tmp_path / "both" / "val" / "cat" / "b.jpg")
    assert cli.main(["prepare", "--source", f"imagefolder:{tmp_path / 'both'}", "--data-root", str(data)]) == 0
    assert "every photograph of its train and test splits checked" in capsys.readouterr().out
    (folder / "dog" / "b.png").write_bytes(b"\x89PNG....")
    for source, said in [(tmp_path / "nowhere", f"imagefolder {tmp_path / 'nowhere'}: no such folder"),
                         (folder, f"{folder}/dog/b.png: not a JPEG file (the pipelines here decode JPEG only)")]:
        with pytest.raises(SystemExit) as stop:
            cli.main(["prepare", "--source", f"imagefolder:{source}", "--data-root", str(data)])
        assert stop.value.code == f"pipebench prepare: {said}"
    assert not data.exists()


def test_stability_refuses_photographs_that_no_pipeline_asked_for_reads(folder, tmp_path):
    """A review of the fault campaign's mends: `stability --source imagefolder:P --pipelines resident` wrote
    its COMMAND.txt, then failed in `build`; with `dataloader,resident` dataloader's epochs were thrown away."""
    out = tmp_path / "stability"
    with pytest.raises(SystemExit) as stop:
        cli.main(["stability", "--device", "cpu", "--source", f"imagefolder:{folder}", "--pipelines", "resident",
                  "--out", str(out)])
    assert stop.value.code.startswith("pipebench stability: nothing asked for can run here: resident: reads CIFAR-like "
                                      "images of one size, not photographs (those: ")
    assert not out.exists()


def test_a_folder_whose_path_is_not_utf8_is_measured_and_recorded_escaped(folder, tmp_path, monkeypatch):
    renamed = os.fsdecode(os.fsencode(tmp_path) + b"/m\xffne")
    os.rename(folder, renamed)
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(io.BytesIO(), errors="backslashreplace"))   # Python's own
    out = tmp_path / "run"
    cli.main(["compare", "--source", f"imagefolder:{renamed}", "--pipelines", "dataloader", "--image-size", "64",
              "--batch-size", "4", "--modes", "loader", "--steps", "1", "--warmup", "1", "--repeats", "1",
              "--processes", "1", "--no-isolate", "--workers", "0", "--out", str(out)])
    assert pd.read_csv(out / "results.csv").status.tolist() == ["ok"]
    assert f"'imagefolder:{tmp_path}/m\\udcffne'" in (out / "COMMAND.txt").read_text()


def test_a_test_split_needs_train_and_val_folders(folder, tmp_path):
    with pytest.raises(ValueError, match="one folder of classes is the train split only"):
        imagefolder.read_imagefolder(folder, "test")
    jpeg(tmp_path / "both" / "train" / "cat" / "a.jpg")
    jpeg(tmp_path / "both" / "val" / "cat" / "b.jpg", size=(400, 300))
    assert imagefolder.read_imagefolder(tmp_path / "both", "test")[3].tolist() == [400]


def test_dataloader_cuts_the_same_crops_with_any_number_of_workers(folder):
    config = PipelineConfig(source=f"imagefolder:{folder}", image_size=64, batch_size=4, device="cpu",
                            worker_start="fork", last_batch="partial")
    outputs = []
    for workers in (0, 2):
        with pipelines.build("dataloader", config.replace(num_workers=workers)) as loader:
            outputs.append([(x.clone(), y.clone()) for x, y in loader])
    assert [x.shape for x, _ in outputs[0]] == [(4, 3, 64, 64)] * 3
    assert all(torch.equal(a, b) and torch.equal(c, d) for (a, c), (b, d) in zip(*outputs))
    with pipelines.build("dataloader", config.replace(num_workers=0)) as loader:
        loader.set_epoch(1)
        assert not torch.equal(next(iter(loader))[0], outputs[0][0][0])   # another epoch, other crops


def test_eval_batches_are_resize_256_then_centre_crop_224(folder):
    config = PipelineConfig(source=f"imagefolder:{folder}", image_size=224, batch_size=12, device="cpu",
                            num_workers=0, augment=False, shuffle=False, split="train", last_batch="partial")
    with pipelines.build("dataloader", config) as loader:
        images, labels = next(iter(loader))
    data = open_split(config)
    reference = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
                                    transforms.Normalize(MEAN, STD)])
    for k in range(len(labels)):
        with Image.open(io.BytesIO(data.jpeg[k].tobytes())) as image:
            expected = reference(image.convert("RGB"))
        assert (images[k] - expected).abs().mean() < 0.05   # within one resampling's rounding


def test_pipelines_of_one_image_size_refuse_photographs_in_one_line(folder):
    config = PipelineConfig(source=f"imagefolder:{folder}", image_size=64, batch_size=4, device="cpu")
    assert "dataloader" in pipelines.photo_readers()
    for name in ("prefetch", "resident"):   # the one refusal: a sweep's skipped row, build's error
        refusal = pipelines.source_refusal(name, config)
        assert refusal.startswith(f"{name}: reads CIFAR-like images of one size, not photographs (those: dataloader")
        with pytest.raises(ValueError, match=rf"^{re.escape(refusal)}$"):
            pipelines.build(name, config)
    assert pipelines.source_refusal("dataloader", config) == ""
    with pytest.raises(ValueError, match="'imagefolder:PATH'"):
        PipelineConfig(source="imagefolder:")


def test_compare_runs_on_your_own_photographs(folder, tmp_path, capsys):
    out = tmp_path / "run"
    cli.main(["compare", "--source", f"imagefolder:{folder}", "--pipelines", "dataloader,prefetch", "--image-size",
              "64", "--batch-size", "4", "--modes", "loader,model,e2e", "--steps", "2", "--warmup", "1",
              "--repeats", "1", "--processes", "1", "--no-isolate", "--workers", "1", "--out", str(out)])
    df = pd.read_csv(out / "results.csv")
    ok = df[df.status == "ok"]
    assert set(zip(ok.pipeline, ok["mode"])) == {("dataloader", "loader"), ("none", "model"), ("dataloader", "e2e")}
    assert set(df[df.pipeline == "prefetch"].status) == {"skipped"}
    assert (ok[ok.pipeline == "dataloader"].data_source == "imagefolder").all()
    capsys.readouterr()


def test_training_batches_are_random_resized_crops_of_each_photograph(folder):
    from torchvision.transforms import functional as TF
    config = PipelineConfig(source=f"imagefolder:{folder}", image_size=64, batch_size=12, device="cpu", num_workers=0,
                            shuffle=False, last_batch="partial")
    with pipelines.build("dataloader", config) as loader:
        y, x, h, w, flip = (t.numpy() for t in loader.draws(loader.batches()))
        images, _ = next(iter(loader))
    data = loader.data
    centre = pipelines.crops.center_boxes(data.sizes[:, 0], data.sizes[:, 1])
    assert not np.array_equal(h, centre[2]) and len(set(zip(h.tolist(), w.tolist()))) > 6   # boxes vary
    for k in range(12):
        with Image.open(io.BytesIO(data.jpeg[k].tobytes())) as image:
            crop = TF.resized_crop(image.convert("RGB"), int(y[k]), int(x[k]), int(h[k]), int(w[k]), [64, 64],
                                   antialias=True)
        expected = TF.normalize(TF.to_tensor(TF.hflip(crop) if flip[k] else crop), MEAN, STD)
        assert torch.allclose(images[k], expected)


@pytest.mark.parametrize("augment", [True, False])
def test_timm_cuts_the_same_crops_as_dataloader_with_any_number_of_workers(folder, augment):
    """timm's transform (PIL, bilinear, antialiased as PIL always is) of the same boxes and flips as
    `dataloader`'s PIL path: the same pixels, up to float32 rounding (timm normalizes uint8 values
    by 255 x mean and 255 x std, dataloader scales by 1/255 first), with 0 and 2 workers alike."""
    reason = pipelines.available()["timm"]
    if reason:
        pytest.skip(reason)
    config = PipelineConfig(source=f"imagefolder:{folder}", image_size=64, batch_size=5, device="cpu",
                            worker_start="fork", last_batch="partial", augment=augment)
    with pipelines.build("dataloader", config.replace(num_workers=0)) as loader:
        expected = [(x.clone(), y.clone()) for x, y in loader]
    for workers in (0, 2):
        with pipelines.build("timm", config.replace(num_workers=workers)) as timm:
            batches = [(x.clone(), y.clone()) for x, y in timm]
        assert [(x.shape, x.dtype) for x, _ in batches] == [((5, 3, 64, 64), torch.float32)] * 2 + [
            ((2, 3, 64, 64), torch.float32)]
        for (a, la), (b, lb) in zip(expected, batches):
            assert torch.equal(la, lb) and (a - b).abs().max() < 1e-5


def test_timm_stages_photographs_as_uint8_crops_and_normalizes_them_in_the_contract_dtype(folder):
    reason = pipelines.available()["timm"]
    if reason:
        pytest.skip(reason)
    config = PipelineConfig(source=f"imagefolder:{folder}", image_size=64, batch_size=4, device="cpu",
                            worker_start="fork", num_workers=2, dtype="bfloat16")
    with pipelines.build("timm", config) as timm:
        first, _ = next(iter(timm))
        assert timm.queue_capacity == 2 * 2 + 1   # 2 workers x prefetch_factor 2, and PrefetchLoader's one
        stages = timm.stages()
        images, labels = stages.payload
        assert images.shape == (4, 3, 64, 64) and images.dtype == torch.uint8 and labels.shape == (4,)
        assert first.dtype == torch.bfloat16 and torch.equal(stages.device(), first)
    assert timm.loader is None   # released: its persistent workers shut down


@pytest.mark.parametrize("name", ["dataloader", "timm", "tvjpeg", "torchcodec", "nvimgcodec", "dali", "ffcv"])
def test_a_photograph_that_does_not_decode_is_named_by_its_file_to_remove_or_re_encode(folder, name):
    """Your own file, named, and what to do with it: never "the JPEG copy" or `pipebench prepare`."""
    reason = pipelines.available()[name]
    if reason:
        pytest.skip(reason)
    path = folder / "fox" / "0.jpg"   # sample 2: the classes interleave
    path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])   # cut short: its header still reads
    config = PipelineConfig(source=f"imagefolder:{folder}", image_size=64, batch_size=4, device="cpu",
                            num_workers=0, last_batch="partial")
    with pytest.raises(ValueError) as caught, pipelines.build(name, config) as loader:
        for _ in loader:
            pass
    said = str(caught.value)
    assert said.startswith(f"{path}: cannot be decoded (") and "sample 2 of the train split" in said
    assert said.endswith("): remove it, or re-encode it from its original") and "\n" not in said


GPU = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))


@pytest.mark.parametrize("device", ["cpu", GPU])
@pytest.mark.parametrize("name", ["tvjpeg", "torchcodec", "nvimgcodec", "dali"])
@pytest.mark.parametrize("augment", [True, False])
def test_gpu_decoding_pipelines_cut_the_same_crops_as_dataloader(folder, name, augment, device):
    """The same boxes and flips; resampled by the pipeline's decoder (tvjpeg, torchcodec: torch's
    antialiased bilinear; DALI: its antialiased linear resize after decoding the box alone) instead
    of by PIL: within a rounding's difference on average."""
    reason = pipelines.available()[name]
    if reason:
        pytest.skip(reason)
    config = PipelineConfig(source=f"imagefolder:{folder}", image_size=64, batch_size=6, num_workers=0,
                            augment=augment, last_batch="partial")
    with pipelines.build("dataloader", config.replace(device="cpu")) as loader, \
            pipelines.build(name, config.replace(device=device)) as other:
        for (a, la), (b, lb) in zip(loader, other):
            assert torch.equal(la, lb.cpu()) and a.shape == b.shape == (len(la), 3, 64, 64)
            assert (a - b.cpu().float()).abs().mean() < 0.05


@pytest.mark.parametrize("augment", [True, False])
def test_dataloader_decoding_to_tensors_cuts_the_same_crops_as_with_pil(folder, augment):
    config = PipelineConfig(source=f"imagefolder:{folder}", image_size=64, batch_size=6, num_workers=0, device="cpu",
                            augment=augment, last_batch="partial")
    with pipelines.build("dataloader", config) as pil, \
            pipelines.build("dataloader", config.replace(dataloader_decoder="tensor")) as tensors:
        for (a, la), (b, lb) in zip(pil, tensors):
            assert torch.equal(la, lb) and a.shape == b.shape == (len(la), 3, 64, 64)
            assert (a - b).abs().mean() < 0.05


def test_dali_gives_photographs_the_hardware_decoder_unless_told():
    """DALI's own default share on photographs; 0 on CIFAR's files (tuned); a set value kept."""
    from pipelines.dali_options import PHOTO_HW_DECODER_LOAD
    photos = pipelines.resolve_config("dali", PipelineConfig(source="imagefolder:/x", device="cpu"))
    assert photos.dali_hw_decoder_load == PHOTO_HW_DECODER_LOAD
    assert pipelines.resolve_config("dali", PipelineConfig(device="cpu")).dali_hw_decoder_load == 0.0
    told = PipelineConfig(source="imagefolder:/x", device="cpu", dali_hw_decoder_load=0.2)
    assert pipelines.resolve_config("dali", told).dali_hw_decoder_load == 0.2


def test_a_file_larger_than_any_photograph_is_named_and_never_read(tmp_path):
    """A sparse 40 GB `x.jpg` gave a MemoryError traceback: the folder check read every file whole."""
    from pipelines.sources import imagefolder
    folder = tmp_path / "mine" / "cat"
    folder.mkdir(parents=True)
    Image.new("RGB", (64, 48)).save(folder / "a.jpg")
    with open(folder / "x.jpg", "wb") as f:
        f.truncate(40 << 30)
    with pytest.raises(ValueError, match=r"x\.jpg: 40\.0 GiB, larger than any photograph \(at most 256 MiB a file "
                                         r"here\): remove it$"):
        imagefolder.check_imagefolder(tmp_path / "mine", "train")
