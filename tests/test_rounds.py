"""Rounds of launches (`pipelines.rounds`), shared by `prefetch` and `resident`: how many batches a
round makes, and the hand-over of a round to the consumer's stream, checked here without a GPU on a
stand-in stream (tests/test_streams.py checks the batches on a real one)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from pipelines import PipelineConfig
from pipelines.rounds import ROUND_BYTES, hand_over, round_batches


def test_a_round_of_launches_has_at_most_batches_per_launch_batches_and_round_bytes():
    per_launch = PipelineConfig.default("batches_per_launch")
    assert round_batches(PipelineConfig(batch_size=512)) == per_launch   # 1.5 MiB a batch
    assert round_batches(PipelineConfig(batch_size=512, batches_per_launch=2)) == 2
    assert round_batches(PipelineConfig(batch_size=512, image_size=64)) == ROUND_BYTES // (512 * 64 * 64 * 3)
    assert round_batches(PipelineConfig(batch_size=256, image_size=224)) == 1   # 38 MB a batch: one per round


class Recorded:
    """A round's tensor that notes each `record_stream` in `calls`."""

    def __init__(self, name: str, tensor: torch.Tensor, calls: list):
        self.name, self.tensor, self.calls = name, tensor, calls

    def record_stream(self, stream) -> None:
        self.calls.append(("record", self.name, stream))

    def __getitem__(self, key):
        return self.tensor[key]


def test_the_consumer_waits_for_the_round_and_holds_its_tensors_before_its_first_batch():
    calls = []
    consumer = SimpleNamespace(wait_event=lambda event: calls.append(("wait", event)))
    images, labels = Recorded("images", torch.arange(5) * 10, calls), Recorded("labels", torch.arange(5), calls)
    batches = hand_over(images, labels, "ready", consumer, [np.array([7, 3]), np.array([1, 0, 9])])
    first = next(batches)
    assert calls == [("wait", "ready"), ("record", "images", consumer), ("record", "labels", consumer)]
    rest = list(batches)
    assert [(i.tolist(), l.tolist()) for i, l in [first, *rest]] == [([0, 10], [0, 1]), ([20, 30, 40], [2, 3, 4])]
    assert len(calls) == 3   # once per round, not per batch


def test_without_cuda_a_round_is_cut_into_views_of_its_batches():
    images, labels = torch.arange(6), torch.arange(6) + 100
    batches = list(hand_over(images, labels, None, None, [np.arange(4), np.arange(2)]))
    assert [len(i) for i, _ in batches] == [4, 2]
    assert all(i._base is images and l._base is labels for i, l in batches)   # views: no copy
