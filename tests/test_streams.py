"""The pipelines that work on a side CUDA stream (`prefetch`, both augmentation variants, `resident`,
and `tvjpeg` / `torchcodec` / `nvimgcodec` on their producer thread, on CIFAR's JPEG copy and on photographs):
batches consumed with no per-batch host synchronization must be exactly the batches a synchronized
consumer sees, whichever stream is behind. These fail if the consumer's `wait_event` on the ready
event or the `record_stream` of the outputs is removed (and, for the decoders, the producer's wait
for its previous batch before nvJPEG reuses its memory)."""
from __future__ import annotations

import importlib

import pytest
import torch

import pipelines
from conftest import write_photographs
from pipelines.config import PipelineConfig

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
SLEEP = 20_000_000   # GPU cycles of torch.cuda._sleep: ~10 ms, far longer than one small batch's work
VARIANTS = [("prefetch", "device"), ("prefetch", "host"), ("resident", "device")]


def checksums(name: str, config: PipelineConfig, behind: str = "", monkeypatch=None, kernels_of: str = "") -> torch.Tensor:
    """Per-sample sums of one epoch, computed on the device. behind="consumer": a long kernel runs on
    the consumer's stream before each batch is read (its memory must not be reused meanwhile);
    behind="producer": a long kernel runs on the side stream before each normalize or
    crop + normalize (the consumer must wait for it), those of module `kernels_of` if given.
    behind="": a host synchronize after every batch (the reference)."""
    if behind == "producer":   # the side stream's last kernel before the ready event starts late
        module = importlib.import_module(f"pipelines.{kernels_of or name}")
        for kernel in ("normalize", "crop_normalize"):
            if hasattr(module, kernel):
                monkeypatch.setattr(module, kernel, lambda *a, f=getattr(module, kernel): (torch.cuda._sleep(SLEEP), f(*a))[1])
    sums = []
    with pipelines.build(name, config) as p:
        for epoch in range(2):   # the second epoch reuses what the first one freed
            p.set_epoch(epoch)
            for images, labels in p:
                if behind == "consumer":
                    torch.cuda._sleep(SLEEP)
                sums.append(images.float().sum(dim=(1, 2, 3)) + labels)
                if not behind:
                    torch.cuda.synchronize()
                del images, labels
    return torch.cat(sums).cpu()


@pytest.mark.parametrize("behind", ["consumer", "producer"])
@pytest.mark.parametrize("name,augment", VARIANTS, ids=[f"{n}-{a}" for n, a in VARIANTS])
def test_side_stream_batches_are_right_without_host_syncs(name, augment, behind, synthetic_root, monkeypatch):
    config = PipelineConfig(data_root=str(synthetic_root), device="cuda", batch_size=256, max_samples=4096,
                            prefetch_depth=2, num_workers=2, prefetch_augment=augment)
    reference = checksums(name, config)
    assert torch.equal(checksums(name, config, behind, monkeypatch), reference)


@pytest.fixture
def photo_folder(tmp_path):
    """96 JPEG photographs of assorted sizes, in two classes."""
    return write_photographs(tmp_path / "photos", 96)


@pytest.mark.parametrize("behind", ["consumer", "producer"])
@pytest.mark.parametrize("photos", [False, True], ids=["cifar", "photographs"])
@pytest.mark.parametrize("name", ["tvjpeg", "torchcodec", "nvimgcodec"])
def test_decoders_on_their_producer_thread_give_the_same_batches_without_host_syncs(name, photos, behind, synthetic_root,
                                                                                    photo_folder, monkeypatch):
    """Within float rounding: the batched resize's matrix products (cuBLAS) need not round alike
    run to run; a batch read before it is made, or overwritten, is off by far more."""
    reason = pipelines.available()[name]
    if reason:
        pytest.skip(reason)
    source = dict(source=f"imagefolder:{photo_folder}", image_size=224, batch_size=16) if photos else \
        dict(data_root=str(synthetic_root), batch_size=256, max_samples=4096)
    config = PipelineConfig(device="cuda", num_workers=2, **source)
    reference = checksums(name, config)
    got = checksums(name, config, behind, monkeypatch, kernels_of="tvjpeg")
    assert torch.allclose(got, reference, rtol=1e-5, atol=1e-3), (got - reference).abs().max()
