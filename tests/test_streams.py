"""`prefetch` on CUDA: batches consumed with no per-batch host synchronization must be exactly the
batches a synchronized consumer sees, whichever stream is behind. These fail if the consumer's
`wait_event` on the copy / normalize event or the `record_stream` of the outputs is removed."""
from __future__ import annotations

import pytest
import torch

import pipelines
import pipelines.prefetch as prefetch
from pipelines.config import PipelineConfig

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
SLEEP = 20_000_000   # GPU cycles of torch.cuda._sleep: ~10 ms, far longer than one small batch's work


def checksums(config: PipelineConfig, behind: str = "", monkeypatch=None) -> torch.Tensor:
    """Per-batch sums of one epoch, computed on the device. behind="consumer": a long kernel runs on
    the consumer's stream before each batch is read (its memory must not be reused meanwhile);
    behind="producer": a long kernel runs on the side stream before each normalize (the consumer
    must wait for it). behind="": a host synchronize after every batch (the reference)."""
    if behind == "producer":
        normalize = prefetch.normalize
        monkeypatch.setattr(prefetch, "normalize", lambda x, c: (torch.cuda._sleep(SLEEP), normalize(x, c))[1])
    sums = []
    with pipelines.build("prefetch", config) as p:
        for images, labels in p:
            if behind == "consumer":
                torch.cuda._sleep(SLEEP)
            sums.append(images.float().sum() + labels.sum())
            if not behind:
                torch.cuda.synchronize()
            del images, labels
    return torch.stack(sums).cpu()


@pytest.mark.parametrize("behind", ["consumer", "producer"])
def test_prefetch_batches_are_right_without_host_syncs(behind, synthetic_root, monkeypatch):
    config = PipelineConfig(data_root=str(synthetic_root), device="cuda", batch_size=256, max_samples=4096,
                            prefetch_depth=2, num_workers=2)
    reference = checksums(config)
    assert torch.equal(checksums(config, behind, monkeypatch), reference)
