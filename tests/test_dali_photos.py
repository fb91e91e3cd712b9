"""`dali` on photographs (`source="imagefolder:PATH"`): DALI decodes each box, resizes, mirrors and
normalizes into the contract's dtype and layout itself, one training batch per DALI batch, and
`dali_cpu_share` splits every batch between a CPU-decoding and an nvJPEG pipeline, or
(`dali_split="batches"`, `dali_gpu_pipelines`) deals whole batches out to several pipelines, with the
same images in the same order. CPU-only DALI here (both halves of a split then decode on the CPU); the
tests whose reason names CUDA compare the GPU decoders with the CPU's on a GPU machine.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import pipelines
from pipelines import PipelineConfig, dali_options, dali_photos, dali_sources, dali_split, sources
from pipelines.config import MEAN, STD
from pipelines.kernels import normalize

from test_corrupt_jpeg import _assert_names, _corrupt
from test_imagefolder import jpeg

if pipelines.available()["dali"]:
    pytest.skip(pipelines.available()["dali"], allow_module_level=True)

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
BF16_ULP = 2.0 ** -6   # one bfloat16 rounding of a normalized value (below 4 in size)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Three classes, 12 JPEGs of assorted sizes and aspects."""
    root = tmp_path_factory.mktemp("photos")
    for k in range(12):
        jpeg(root / f"c{k % 3}" / f"{k}.jpg", size=(250 + 23 * k, 220 + 37 * (k % 4)), seed=k)
    return root


def photos_config(folder, **changes) -> PipelineConfig:
    return PipelineConfig(**{**dict(source=f"imagefolder:{folder}", image_size=64, batch_size=5, num_workers=1,
                                    device="cpu", last_batch="partial", dali_queue_depth=2), **changes})


def epochs(name: str, config: PipelineConfig, count: int = 2) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
    with pipelines.build(name, config) as p:
        out = []
        for e in range(count):
            p.set_epoch(e)
            out.append([(x.clone(), y.clone()) for x, y in p])
        return out


def pixels(images: torch.Tensor) -> torch.Tensor:
    """float32 contract images -> the uint8 N x H x W x C images they normalize, where they are such."""
    mean, std = (torch.tensor(v).view(1, 3, 1, 1) for v in (MEAN, STD))
    return (images * std + mean).mul(255).round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1)


def test_photographs_come_out_as_the_contract_normalizes_dalis_resized_crops_of_dataloaders_boxes(folder):
    """float32: each batch is `kernels.normalize` of uint8 images (DALI resized to uint8 and then
    normalized), and those are dataloader's (PIL's) crops of the same boxes and flips within a
    resampling's rounding; bfloat16 channels_last: the same batches as `normalize` makes them, within
    one bfloat16 rounding, in its dtype and memory format."""
    config = photos_config(folder)
    plain, reference = epochs("dali", config), epochs("dataloader", config)
    fast = epochs("dali", config.replace(dtype="bfloat16", channels_last=True))
    low = config.replace(dtype="bfloat16", channels_last=True)
    assert [len(e) for e in plain] == [len(e) for e in reference] == [3, 3]
    for (a, la), (b, lb), (c, lc) in zip(sum(plain, []), sum(reference, []), sum(fast, [])):
        assert torch.equal(la, lb) and torch.equal(la, lc)
        assert a.shape == b.shape == c.shape == (len(la), 3, 64, 64)
        assert a.dtype == torch.float32 and a.is_contiguous()
        u = pixels(a)
        assert (normalize(u, config) - a).abs().max() < 1e-5   # DALI's normalize is the contract's
        assert (a - b).abs().mean() < 0.05   # PIL's resampling rounds otherwise; the same boxes and flips
        assert c.dtype == torch.bfloat16 and c.is_contiguous(memory_format=torch.channels_last)
        assert (c.float() - normalize(u, low).float()).abs().max() <= BF16_ULP


def test_photographs_run_one_training_batch_per_dali_batch():
    """`dali_batch_multiple` is CIFAR's: photographs resolve it to 1, so DALI's queue holds batches."""
    photos = pipelines.resolve_config("dali", PipelineConfig(source="imagefolder:/x", device="cpu"))
    assert photos.dali_batch_multiple == 1
    assert pipelines.resolve_config("dali", PipelineConfig(device="cpu")).dali_batch_multiple == 4


@pytest.mark.parametrize("dtype,channels_last", [("float32", False), ("bfloat16", True)])
def test_a_split_between_the_decoders_gives_the_same_images_in_the_same_order(folder, dtype, channels_last):
    """11 photographs in batches of 5: 5, 5 and 1 (a batch of one goes to both pipelines, the
    second copy left over), two epochs; CPU-only both halves decode with libjpeg-turbo, so the
    images are the very same."""
    config = photos_config(folder, max_samples=11, dtype=dtype, channels_last=channels_last)
    whole = epochs("dali", config)
    split = epochs("dali", config.replace(dali_cpu_share=0.5))
    assert [[len(y) for _, y in e] for e in split] == [[5, 5, 1]] * 2
    for (a, la), (b, lb) in zip(sum(whole, []), sum(split, [])):
        assert torch.equal(la, lb) and torch.equal(a, b)
        assert b.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def test_a_split_runs_two_pipelines_sharing_the_threads_and_its_stages(folder):
    """Two DALI pipelines, nvJPEG's a quarter of `dali_threads`, the CPU decoder's the rest (at least 1
    each, whatever the share); `stages()` runs
    both on one fixed batch, its payload one part per decoder; `close()` shuts both down."""
    config = photos_config(folder, dali_threads=4, dali_cpu_share=0.25)
    with pipelines.build("dali", config) as p:
        assert p.decoders == ["cpu", "mixed"] and [pipe.num_threads for pipe in p.pipes] == [3, 1]
        first = next(iter(p))[0]
        stages = p.stages()
        assert torch.equal(stages.device(), first) and len(stages.payload) == 2
        assert len(p.fixed_pipes) == 2 and p.queue_capacity == config.dali_queue_depth
    assert p.pipes == p.fixed_pipes == []
    assert [dali_sources.cpu_count(n, 0.5) for n in (1, 2, 5, 256)] == [1, 1, 2, 128]   # round half to even
    assert [dali_sources.cpu_count(8, share) for share in (0.01, 0.99)] == [1, 7]   # never an empty part


def test_nvjpeg_is_set_up_as_nvidias_resnet50_example_sets_it_up(folder):
    """The mixed decoder's arguments: the example's memory padding, the hardware decoder's buffers
    preallocated for the set's largest photograph, DALI's share for the hardware decoder."""
    with pipelines.build("dali", photos_config(folder)) as p:
        args = dali_photos.decoder_args(p.config, p.data.sizes, mixed=True)
        heights, widths = p.data.sizes[:, 0], p.data.sizes[:, 1]
    assert args == dict(device="mixed", hw_decoder_load=dali_options.PHOTO_HW_DECODER_LOAD, device_memory_padding=211025920,
                        host_memory_padding=140544512, preallocate_width_hint=widths.max(),
                        preallocate_height_hint=heights.max())
    assert widths.max() != heights.max()   # a swap of the two hints shows


def test_the_file_reader_reads_the_photographs_themselves_with_dalis_own_crops(folder):
    """`dali_reader="file"` (NVIDIA's example): no file-tree copy; each epoch, the first too, every
    photograph once with its own label, shuffled (12 in batches of 5: 5, 5, 2), DALI's random crops normalized into the contract (so
    two epochs differ), and `stages()` runs its graph; eval (no shuffle, no augmentation): the files in
    order, the centre crop the external source cuts within a resampling's rounding."""
    config = photos_config(folder, dali_reader="file")
    assert "jpeg-tree" not in pipelines.copies("dali", pipelines.resolve_config("dali", config))
    data = sources.open_split(pipelines.resolve_config("dali", config))
    train = epochs("dali", config)
    assert [[len(y) for _, y in e] for e in train] == [[5, 5, 2]] * 2
    for e in train:
        assert sorted(torch.cat([y for _, y in e]).tolist()) == sorted(data.labels.tolist())
        for x, _ in e:
            assert x.shape[1:] == (3, 64, 64) and (normalize(pixels(x), config) - x).abs().max() < 1e-5
    assert not torch.equal(train[0][0][0], train[1][0][0])
    assert torch.cat([y for _, y in train[0]]).tolist() != data.labels.tolist()   # the first epoch shuffled too
    with pipelines.build("dali", config) as p:   # stages(): DALI's reader runs inside, its graph on fixed files
        stages = p.stages()
        assert stages.host is None and stages.device().shape == (5, 3, 64, 64)
    plain = dict(augment=False, shuffle=False)
    (file_reader,), (external,) = epochs("dali", config.replace(**plain), 1), epochs(
        "dali", photos_config(folder, **plain), 1)
    for (a, la), (b, lb) in zip(file_reader, external):
        assert torch.equal(la, lb) and (a - b).abs().mean() < 0.1


def test_a_photograph_that_does_not_decode_in_a_split_is_named_in_one_line(folder):
    """A file cut short, in the half of a batch either pipeline of a split decodes: named in one line
    (before DALI sees it: `jpeg_errors.refuse_unframed`)."""
    config = photos_config(folder, batch_size=4, dali_cpu_share=0.5)
    data = sources.open_split(pipelines.resolve_config("dali", config))
    with pipelines.build("dali", config, data=data) as p:
        bad = int(p.batches(1)[1][2])   # the second batch's third file: nvJPEG's half
    files = [bytes(data.jpeg[i]) for i in range(len(data))]
    files[bad] = _corrupt(files[bad], "truncated")
    offsets = np.concatenate([[0], np.cumsum([len(f) for f in files])])
    jpeg_set = sources.JpegSet(np.frombuffer(b"".join(files), np.uint8).copy(), offsets, data.jpeg.quality)
    with pytest.raises(ValueError) as caught:
        with pipelines.build("dali", config, data=dataclasses.replace(data, jpeg=jpeg_set)) as p:
            p.set_epoch(1)
            for _ in p:
                pass
    _assert_names(str(caught.value), bad)


@pytest.mark.parametrize("changes,message", [
    (dict(source="auto", encoding="jpeg"), r"^dali: dali_cpu_share=0\.5 divides photographs' batches .*'auto'"),
    (dict(dali_reader="parallel"), r"^dali: dali_cpu_share=0\.5 runs with dali_reader='external' only, not "
                                   r"'parallel'$"),
    (dict(dali_decoder="cpu"), r"^dali: dali_cpu_share=0\.5 with dali_decoder='cpu': .* use dali_decoder='mixed'"),
    (dict(dali_gpu_pipelines=2), r"^dali: dali_gpu_pipelines=2 decode whole batches in turn: with "
                                 r"dali_cpu_share=0\.5 use dali_split='batches'$"),
    (dict(dali_cpu_share=0.0, dali_gpu_pipelines=2, source="auto", encoding="jpeg"),
     r"^dali: dali_gpu_pipelines=2 divides photographs' batches .*'auto'"),
])
def test_a_split_it_cannot_run_is_refused_in_one_line(folder, changes, message):
    with pytest.raises(ValueError, match=message):
        pipelines.build("dali", photos_config(folder, dali_cpu_share=0.5).replace(**changes))


@pytest.mark.parametrize("share,gpus", [(0.25, 1), (0.3, 1), (0.0, 2), (0.0, 3), (0.4, 2), (0.5, 3)])
def test_whole_batches_are_dealt_out_evenly_and_each_lane_finds_its_own(share, gpus):
    """`Lanes`: the CPU decoder takes `share` of the batches, spread evenly (never two more than one
    apart from the share over any run of batches), the nvJPEG pipelines the rest in turn; `count` and
    `nth` agree with `lane` batch by batch, which is how each pipeline's source finds its batches."""
    lanes = dali_split.Lanes(share, gpus)
    order = [lanes.lane(g) for g in range(400)]
    assert lanes.decoders == ["cpu"] * (share > 0) + ["mixed"] * gpus
    for lane in range(len(lanes.decoders)):
        mine = [g for g, other in enumerate(order) if other == lane]
        assert [lanes.nth(lane, j) for j in range(len(mine))] == mine
        assert all(lanes.count(lane, g) == sum(1 for m in mine if m < g) for g in range(0, 401, 7))
    if share:
        cpu = np.cumsum([lane == 0 for lane in order])
        assert np.abs(cpu - share * np.arange(1, 401)).max() < 1
    gpu = [lane for lane in order if lane >= (share > 0)]
    assert gpu == [(share > 0) + k % gpus for k in range(len(gpu))]   # in turn


def test_the_threads_go_a_quarter_to_nvjpeg_at_least_one_each():
    counts = dali_split.thread_counts
    assert counts(["cpu", "mixed"], 4) == [3, 1] and counts(["cpu", "mixed"], 8) == [6, 2]
    assert counts(["cpu", "mixed", "mixed"], 8) == [6, 1, 1] and counts(["cpu", "mixed", "mixed"], 2) == [1, 1, 1]
    assert counts(["mixed", "mixed"], 5) == [3, 2] and counts(["mixed"], 7) == [7]


@pytest.mark.parametrize("changes", [dict(dali_cpu_share=0.4, dali_split="batches"), dict(dali_gpu_pipelines=2),
                                     dict(dali_cpu_share=0.3, dali_split="batches", dali_gpu_pipelines=2)])
def test_whole_batches_dealt_to_several_pipelines_give_the_same_images_in_the_same_order(folder, changes):
    """Batches of 2 (6 an epoch), three epochs: the first run whole, the second left after one batch
    (the rest run out), a jump back to the first; every batch the one-pipeline batch, from the pipeline
    whose turn it is, each with its share of the threads; `stages()` runs them all."""
    config = photos_config(folder, batch_size=2, dali_threads=4)
    whole = epochs("dali", config)
    with pipelines.build("dali", config.replace(**changes)) as p:
        lanes = dali_split.Lanes(p.config.dali_cpu_share, p.config.dali_gpu_pipelines)
        assert p.decoders == lanes.decoders and len(p.pipes) == len(lanes.decoders) > 1
        assert [pipe.num_threads for pipe in p.pipes] == dali_split.thread_counts(lanes.decoders, 4)
        assert p.queue_capacity == config.dali_queue_depth * len(p.pipes)
        p.set_epoch(0)
        split = [[(x.clone(), y.clone()) for x, y in p]]
        p.set_epoch(1)
        next(iter(p))   # left after one batch
        for e in (1, 0):
            p.set_epoch(e)
            split.append([(x.clone(), y.clone()) for x, y in p])
        assert torch.equal(p.stages().device(), split[0][0][0])
    assert [len(e) for e in split] == [6, 6, 6]
    for (a, la), (b, lb) in zip(sum(whole + whole[:1], []), sum(split, [])):
        assert torch.equal(la, lb) and torch.equal(a, b)


@CUDA
@pytest.mark.parametrize("changes", [dict(dali_decoder="mixed"), dict(dali_decoder="mixed", dali_cpu_share=0.5),
                                     dict(dali_decoder="mixed", dali_cpu_share=0.5, dtype="bfloat16",
                                          channels_last=True),
                                     dict(dali_decoder="mixed", dali_cpu_share=0.4, dali_split="batches",
                                          dali_gpu_pipelines=2)])
def test_on_cuda_nvjpeg_and_the_split_give_the_cpu_decoders_images(folder, changes):
    """nvJPEG (with NVIDIA's memory padding, the hardware decoder's share) and a split give, on the
    GPU, the CPU decoder's images within a decoder's rounding, in the contract's dtype and layout."""
    config = photos_config(folder, device="cuda", **{k: v for k, v in changes.items() if k.startswith("dali")})
    layout = dict(dtype=changes.get("dtype", "float32"), channels_last=changes.get("channels_last", False))
    cpu = epochs("dali", config.replace(dali_decoder="cpu", dali_cpu_share=0.0, dali_gpu_pipelines=1, **layout), 1)[0]
    gpu = epochs("dali", config.replace(**layout), 1)[0]
    assert len(cpu) == len(gpu) == 3
    memory = torch.channels_last if layout["channels_last"] else torch.contiguous_format
    for (a, la), (b, lb) in zip(cpu, gpu):
        assert a.device.type == b.device.type == "cuda" and torch.equal(la, lb)
        assert b.dtype == getattr(torch, layout["dtype"]) and b.is_contiguous(memory_format=memory)
        assert (a.float() - b.float()).abs().mean() < 0.05   # IDCTs and upsampling round differently


@CUDA
def test_on_cuda_the_file_reader_as_nvidia_sets_it_up_runs_nvjpeg_in_the_contracts_layout(folder):
    """`dali_reader="file"` with nvJPEG: eval's centre crops are the CPU decoder's within a decoder's
    rounding; training batches come out bfloat16 channels_last on the device with every label."""
    config = photos_config(folder, device="cuda", dali_reader="file", dtype="bfloat16", channels_last=True)
    plain = config.replace(augment=False, shuffle=False)
    cpu, gpu = epochs("dali", plain.replace(dali_decoder="cpu"), 1)[0], epochs("dali", plain, 1)[0]
    for (a, la), (b, lb) in zip(cpu, gpu):
        assert torch.equal(la, lb) and (a.float() - b.float()).abs().mean() < 0.05
    train = epochs("dali", config, 1)[0]
    assert [len(y) for _, y in train] == [5, 5, 2]
    for x, _ in train:
        assert x.is_cuda and x.dtype == torch.bfloat16 and x.is_contiguous(memory_format=torch.channels_last)
