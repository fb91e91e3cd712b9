"""`ffcv` (pipelines/ffcv.py): FFCV on photographs as its ImageNet example runs it -- the contract's
batches, the split's labels, epochs that `set_epoch` selects, eval's centre crops, the `.beton`
written once and again when the photographs change, an abandoned epoch that stops at once. Skips
where FFCV is not installed (it builds against system libraries: see the module's `missing`)."""
from __future__ import annotations

import re
import threading

import numpy as np
import pytest
import torch
from PIL import Image

import pipelines
from pipelines import PipelineConfig
from pipelines import ffcv as ffcv_pipeline
from pipelines.sources import open_split

needs_ffcv = pytest.mark.skipif(pipelines.available()["ffcv"] is not None,
                                reason=f"FFCV unavailable: {pipelines.available()['ffcv']}")
# FFCV warns on the CPU that a torch transform (the normalization) is slow there: the CPU runs are tests
pytestmark = [pytest.mark.filterwarnings("ignore:Using a pytorch transform on the CPU:ResourceWarning"),
              # numba, collecting a dispatcher of a closed Loader, misses one of its own entries: harmless
              pytest.mark.filterwarnings("ignore:Exception ignored in. <finalize object:pytest.PytestUnraisableExceptionWarning")]
SIZES = [(260, 230), (300, 260), (340, 290), (640, 520)]   # (width, height); the last is over FFCV's 500 px


def jpeg(path, size, seed) -> None:
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(small).resize(size, Image.Resampling.BICUBIC).save(path, format="JPEG", quality=90)


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """Three classes of 4, 3 and 5 JPEGs of assorted sizes: 12 photographs."""
    root = tmp_path_factory.mktemp("ffcv") / "mine"
    for label, (name, count) in enumerate([("cat", 4), ("dog", 3), ("fox", 5)]):
        for k in range(count):
            jpeg(root / name / f"{k}.jpg", SIZES[(k + label) % len(SIZES)], seed=10 * label + k)
    return root


def config_of(photos, tmp_path, **changes) -> PipelineConfig:
    values = dict(source=f"imagefolder:{photos}", cache_root=str(tmp_path / "cache"), image_size=64, batch_size=5,
                  device="cpu", num_workers=2, last_batch="partial")
    return PipelineConfig(**{**values, **changes})


def test_cifar_sources_and_several_processes_are_refused_in_one_line(tmp_path):
    config = PipelineConfig(data_root=str(tmp_path), device="cpu")
    refusal = "ffcv: reads photographs only (source='imagefolder:PATH'), not CIFAR-like images"
    assert pipelines.source_refusal("ffcv", config) == refusal
    assert pipelines.source_refusal("ffcv", config.replace(source="imagefolder:/x")) == ""
    assert "ffcv" in pipelines.photo_readers()
    if pipelines.available()["ffcv"] is None:
        with pytest.raises(ValueError, match=rf"^{re.escape(refusal)}$"):
            pipelines.build("ffcv", config)
        with pytest.raises(ValueError, match=r"^ffcv: one process reads the whole split \(world_size=1\)"):
            pipelines.build("ffcv", config.replace(source="imagefolder:/x", world_size=2))


@needs_ffcv
@pytest.mark.parametrize("changes,sizes", [
    ({"dtype": "bfloat16", "channels_last": True, "batch_size": 11}, [11, 1]),   # a last batch of one
    ({"dtype": "float32", "channels_last": False, "last_batch": "drop"}, [5, 5]),
])
def test_batches_follow_the_contract(photos, tmp_path, changes, sizes):
    config = config_of(photos, tmp_path, **changes)
    layout = torch.channels_last if config.channels_last else torch.contiguous_format
    with pipelines.build("ffcv", config) as p:
        assert len(p) == len(sizes) and p.queue_capacity == ffcv_pipeline.BATCHES_AHEAD + 1 and not p.next_syncs
        for epoch in (0, 1):
            p.set_epoch(epoch)
            batches = list(p)
            assert [len(labels) for _, labels in batches] == sizes
            for images, labels in batches:
                assert images.shape == (len(labels), 3, 64, 64) and images.dtype == getattr(torch, config.dtype)
                assert images.is_contiguous(memory_format=layout) and images.device.type == "cpu"
                assert labels.dtype == torch.int64 and labels.shape == (len(labels),)
                assert images.float().abs().max() < 3   # normalized: (x/255 - mean)/std
        stages = p.stages()
        assert stages.payload[0].shape == (sizes[0], 64, 64, 3) and stages.payload[0].dtype == torch.uint8
        assert [len(labels) for _, labels in stages.host()] == sizes
        assert stages.device().shape == (sizes[0], 3, 64, 64)


@needs_ffcv
def test_labels_are_the_split_s_and_set_epoch_selects_the_order(photos, tmp_path):
    config = config_of(photos, tmp_path, augment=False)   # centre crops: each sample's images are fixed
    split = open_split(config)
    with pipelines.build("ffcv", config.replace(shuffle=False)) as p:
        assert torch.cat([labels for _, labels in p]).tolist() == split.labels.tolist()
    with pipelines.build("ffcv", config) as p:
        def epoch(e):
            p.set_epoch(e)
            images, labels = zip(*p)
            return torch.cat(images), torch.cat(labels)
        first, other, again = epoch(0), epoch(1), epoch(0)
    assert sorted(first[1].tolist()) == sorted(split.labels.tolist())
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert not torch.equal(first[0], other[0])


@needs_ffcv
@pytest.mark.parametrize("share", [0.0, 1.0])   # every photograph stored as raw pixels / re-encoded as JPEG
def test_eval_images_are_the_centre_crops_the_other_pipelines_cut(photos, tmp_path, share):
    config = config_of(photos, tmp_path, augment=False, shuffle=False, ffcv_jpeg_share=share)
    with pipelines.build("dataloader", config.replace(num_workers=0)) as reference, \
            pipelines.build("ffcv", config) as p:
        for (want, want_labels), (got, labels) in zip(reference, p, strict=True):
            assert torch.equal(labels, want_labels)
            assert (got - want).abs().mean() < 0.05   # a resampling's rounding (and a JPEG generation)


@needs_ffcv
def test_the_beton_is_written_once_and_again_when_the_photographs_or_settings_change(tmp_path, capsys):
    photos = tmp_path / "mine"
    for k in range(3):
        jpeg(photos / "cat" / f"{k}.jpg", SIZES[k], seed=k)
    config = config_of(photos, tmp_path)

    def written(c):
        path = ffcv_pipeline.prepare_beton(c, open_split(c))
        return path, path.stat().st_ino, capsys.readouterr().err

    path, inode, _ = written(config)
    assert path.parent.parent.parent == tmp_path / "cache" and path.parent.name == "train-3"
    assert written(config)[1:] == (inode, "")   # reused, nothing said
    jpeg(photos / "cat" / "1.jpg", SIZES[1], seed=99)   # the same name, other pixels
    again, new_inode, said = written(config)
    assert again == path and new_inode != inode and "made from other files than the current ones" in said
    assert written(config.replace(ffcv_jpeg_share=1.0))[1] != new_inode
    with pipelines.build("ffcv", config.replace(ffcv_jpeg_share=1.0)) as p:
        assert p.path == path   # the pipeline reads the file written


@needs_ffcv
def test_an_epoch_left_near_its_end_stops_at_once(photos, tmp_path):
    """FFCV's thread puts its end-of-epoch mark without a timeout: an epoch left when its queue is full
    (the build's first batch, then an epoch left after one batch) must still end, or the next one
    would wait for it forever. Run on a thread, so that a hang fails the test instead."""
    config = config_of(photos, tmp_path, batch_size=3)   # 4 batches: one taken, 3 fill FFCV's queue
    ended = []

    def epochs():
        with pipelines.build("ffcv", config) as p:
            older = iter(p)
            next(older)
            ended.append(len(list(iter(p))))
            with pytest.raises(RuntimeError, match="superseded"):
                next(older)
            ended.append("superseded")

    thread = threading.Thread(target=epochs, daemon=True)
    thread.start()
    thread.join(timeout=180)
    assert ended == [4, "superseded"]


@needs_ffcv
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_batches_are_the_cpu_ones_while_the_consumer_s_stream_lags(photos, tmp_path):
    """On the GPU FFCV copies and normalizes (CuPy's kernel) on its own streams into buffers it
    reuses: the eval batches match the CPU's, also when the consumer's stream runs far behind."""
    config = config_of(photos, tmp_path, augment=False, shuffle=False, batch_size=2)

    def sums(device: str) -> torch.Tensor:
        """Per image: the sum of its pixels, and its label, over two epochs, kept on the device."""
        found = []
        with pipelines.build("ffcv", config.replace(device=device)) as p:
            for epoch in range(2):
                p.set_epoch(epoch)
                for images, labels in p:
                    if device == "cuda":
                        torch.cuda._sleep(20_000_000)   # ~10 ms of the consumer's stream before each batch
                    found.append(torch.stack([images.float().flatten(1).sum(1), labels.float()]))
        return torch.cat(found, dim=1).cpu()

    assert torch.allclose(sums("cuda"), sums("cpu"), rtol=1e-4, atol=1e-2)
