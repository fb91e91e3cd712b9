"""The pipelines that work on a side CUDA stream (`prefetch`, both augmentation variants, and
`resident`): batches consumed with no per-batch host synchronization must be exactly the batches a
synchronized consumer sees, whichever stream is behind. These fail if the consumer's `wait_event`
on the ready event or the `record_stream` of the outputs is removed."""
from __future__ import annotations

import importlib

import pytest
import torch

import pipelines
from pipelines.config import PipelineConfig

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
SLEEP = 20_000_000   # GPU cycles of torch.cuda._sleep: ~10 ms, far longer than one small batch's work
VARIANTS = [("prefetch", "device"), ("prefetch", "host"), ("resident", "device")]


def checksums(name: str, config: PipelineConfig, behind: str = "", monkeypatch=None) -> torch.Tensor:
    """Per-batch sums of one epoch, computed on the device. behind="consumer": a long kernel runs on
    the consumer's stream before each batch is read (its memory must not be reused meanwhile);
    behind="producer": a long kernel runs on the side stream before each normalize or
    crop + normalize (the consumer must wait for it). behind="": a host synchronize after every batch (the reference)."""
    if behind == "producer":   # the side stream's last kernel before the ready event starts late
        module = importlib.import_module(f"pipelines.{name}")
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
                sums.append(images.float().sum() + labels.sum())
                if not behind:
                    torch.cuda.synchronize()
                del images, labels
    return torch.stack(sums).cpu()


@pytest.mark.parametrize("behind", ["consumer", "producer"])
@pytest.mark.parametrize("name,augment", VARIANTS, ids=[f"{n}-{a}" for n, a in VARIANTS])
def test_side_stream_batches_are_right_without_host_syncs(name, augment, behind, synthetic_root, monkeypatch):
    config = PipelineConfig(data_root=str(synthetic_root), device="cuda", batch_size=256, max_samples=4096,
                            prefetch_depth=2, num_workers=2, prefetch_augment=augment)
    reference = checksums(name, config)
    assert torch.equal(checksums(name, config, behind, monkeypatch), reference)
