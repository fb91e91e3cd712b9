"""Rounds of launches, what `prefetch` and `resident` share: both make their batches a round at a
time on a side CUDA stream (one crop + normalize kernel over the round's images, the labels' gather,
an event; `prefetch` copies the round's pixels first) and hand each round over to the consumer.

`round_batches`: the batches of one round, from the `batches_per_launch` knob both read, fewer where
their uint8 images would pass ROUND_BYTES (at least one batch) -- rounds share launch costs that
matter for small images only.

`hand_over`: a round made on the side stream, handed to the consumer's stream: that stream waits on
the round's ready event (no host synchronization), the round's images and labels are
`record_stream`-ed to it, so the caching allocator never reuses them while the consumer may read
them, and the round is cut into its batches as views. Without CUDA there is nothing to hand over:
the round was made in order on the CPU.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as np
import torch

from .config import CHANNELS, PipelineConfig

ROUND_BYTES = 32 * 2**20   # a round of launches makes at most this many bytes of uint8 images


def round_batches(config: PipelineConfig) -> int:
    """Batches made by one round of launches (`batches_per_launch`, fewer past ROUND_BYTES)."""
    batch_bytes = config.batch_size * config.image_size ** 2 * CHANNELS
    return max(1, min(config.batches_per_launch, ROUND_BYTES // batch_bytes))


def on_stream(stream: torch.cuda.Stream | None):
    """The context that queues work on the side `stream` (None, without CUDA: the work runs here, in order)."""
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def consumer_stream(device: torch.device) -> torch.cuda.Stream | None:
    """The stream the consumer's work goes on now, which rounds are handed over to (None without CUDA)."""
    return torch.cuda.current_stream(device) if device.type == "cuda" else None


def hand_over(images: torch.Tensor, labels: torch.Tensor, ready: torch.cuda.Event | None,
              consumer: torch.cuda.Stream | None,
              batches: list[np.ndarray]) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """One round's batches for the consumer (`batches`: their sample indices, in the round's order),
    after `consumer` waits on `ready` and holds the round's tensors (module docstring)."""
    if consumer is not None:
        consumer.wait_event(ready)
        images.record_stream(consumer)
        labels.record_stream(consumer)
    at = 0
    for index in batches:
        yield images[at:at + len(index)], labels[at:at + len(index)]
        at += len(index)
