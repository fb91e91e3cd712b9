"""The epoch plan every pipeline shares, so all of them have the same semantics: the batches'
sample order (`epoch_batches`, sharded by rank: `shard_order`), the augmentation draws
(`epoch_draws`: crop offsets and flips per sample, from per-rank seeds) and `Uploader`, which puts
an epoch's order and draws on the device without a host synchronization.
"""
from __future__ import annotations

import math
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
import torch

from .config import FLIP_P, PipelineConfig

def shard_order(order: np.ndarray, config: PipelineConfig) -> np.ndarray:
    """This rank's share of an epoch's sample order, every rank the same length (so DDP ranks run
    the same number of steps), as `DistributedSampler` does: sample k of the order goes to rank
    k % world_size after the order is cut (last_batch="drop": the last n % world_size samples
    skipped this epoch) or padded (last_batch="partial": its first (-n) % world_size samples
    repeated) to a multiple of world_size. Worked on 7 samples and 2 ranks: drop gives ranks
    [o0, o2, o4] and [o1, o3, o5]; partial gives [o0, o2, o4, o6] and [o1, o3, o5, o0]."""
    world = config.world_size
    if world > 1:
        n = len(order)
        order = order[: n - n % world] if config.last_batch == "drop" else np.resize(order, shard_size(n, config) * world)
    return order[config.rank::world]


def shard_size(n: int, config: PipelineConfig) -> int:
    """Samples per rank and epoch under `shard_order`."""
    world = config.world_size
    return n // world if config.last_batch == "drop" else -(-n // world)


def epoch_batches(n: int, config: PipelineConfig, epoch: int) -> list[np.ndarray]:
    """Sample indices of each batch of `epoch` for this rank (shuffle, shard, last-batch policy).
    The shuffle depends on (seed, epoch) only, so every rank shards the same order."""
    order = (np.random.default_rng([config.seed, epoch]).permutation(n) if config.shuffle
             else np.arange(n))
    mine = shard_order(order, config)
    bs = config.batch_size
    if config.last_batch == "drop":
        mine = mine[: len(mine) // bs * bs]
    return [mine[i:i + bs] for i in range(0, len(mine), bs)]


def batch_count(n: int, config: PipelineConfig) -> int:
    mine = shard_size(n, config)
    return mine // config.batch_size if config.last_batch == "drop" else -(-mine // config.batch_size)


class Uploader:
    """Per-epoch host arrays (an epoch's sample order, its augmentation draws, their crop grid) put
    on the device without a host wait and without any allocation per epoch: a page-locked host
    allocation or a device allocation (cudaMalloc) is a point where the CUDA runtime waits for
    every stream, so an epoch restart that allocates stalls a training loop that runs ahead of the
    GPU. Each kind of array has two pinned buffers, used in turn (before one is refilled, the copy
    out of it two epochs ago is awaited: long done), and one device buffer, allocated once (grown
    for a larger epoch) and rewritten in stream order: every reader of the previous epoch's contents
    runs on the stream that uploads the next (the current stream when called). Without CUDA the
    arrays are used as they are."""

    def __init__(self, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.pinned: dict[str, deque] = {}
        self.buffers: dict[str, torch.Tensor] = {}

    def _buffer(self, kind: str, shape: tuple[int, ...], dtype=torch.int64) -> torch.Tensor:
        """A view of shape `shape` of this kind's device buffer (allocated once, grown if needed)."""
        n = math.prod(shape)
        if kind not in self.buffers or self.buffers[kind].numel() < n:
            self.buffers[kind] = torch.empty(n, dtype=dtype, device=self.device)
        return self.buffers[kind][:n].view(shape)

    def __call__(self, kind: str, array: np.ndarray) -> torch.Tensor:
        tensor = torch.from_numpy(np.ascontiguousarray(array, dtype=np.int64))
        if not self.cuda:
            return tensor
        turns = self.pinned.setdefault(kind, deque([(None, None), (None, None)]))
        buffer, copied = turns.popleft()
        if copied is not None:
            copied.synchronize()
        if buffer is None or buffer.numel() < tensor.numel():
            buffer = torch.empty(tensor.numel(), dtype=torch.int64, pin_memory=True)
        staged = buffer[:tensor.numel()].view(tensor.shape)
        staged.copy_(tensor)
        out = self._buffer(kind, tuple(tensor.shape)).copy_(staged, non_blocking=True)
        turns.append((buffer, torch.cuda.current_stream(self.device).record_event()))
        return out

    def order(self, batches: list[np.ndarray]) -> torch.Tensor:
        """An epoch's sample order (its batches back to back) on the device."""
        return self("order", np.concatenate(batches) if batches else np.empty(0, np.int64))

    def draws(self, draws: tuple[torch.Tensor, ...] | None) -> tuple[torch.Tensor, ...] | None:
        """An epoch's augmentation draws (`epoch_draws`: crop offsets dy, dx and flips, in plan
        order) on the device, as int64 views sliced per batch by position; None without
        augmentation."""
        if draws is None:
            return None
        return tuple(self("draws", torch.stack([draws[0], draws[1], draws[2].long()]).numpy()))


def rank_seeds(config: PipelineConfig, *keys: int, count: int = 1) -> np.ndarray:
    """`count` seeds for this rank derived from the one config.seed and `keys`: ranks draw
    independent augmentations. With world_size 1 the rank is left out, so single-process runs
    draw what they drew before sharding existed."""
    rank = [config.rank] if config.world_size > 1 else []
    return np.random.SeedSequence([config.seed, *keys, *rank]).generate_state(count)


def draw_augmentation(n: int, pad: int, generator: torch.Generator, device: torch.device | str = "cpu"):
    """Per-sample crop offsets (dy, dx in 0..2*pad, in padded coordinates) and flips."""
    offsets = torch.randint(0, 2 * pad + 1, (2, n), generator=generator, device=device)
    flip = torch.rand(n, generator=generator, device=device) < FLIP_P
    return offsets[0], offsets[1], flip


def epoch_draws(config: PipelineConfig, epoch: int, n: int) -> tuple[torch.Tensor, ...] | None:
    """The crop offsets and flips (CPU tensors, `draw_augmentation`) of an epoch's `n` samples in
    plan order, None without augmentation: one random stream per (seed, epoch, rank), drawn at once
    (about a millisecond for 50,000 samples) and shared by every pipeline, so sample k of an epoch is
    cropped and flipped alike whichever pipeline loads it."""
    if not config.augment:
        return None
    generator = torch.Generator().manual_seed(int(rank_seeds(config, epoch, 1)[0]))
    return draw_augmentation(n, config.pad, generator)


@dataclass
class EpochPlan:
    """An epoch as planned on the host: its number, its sample indices batch by batch
    (`epoch_batches`) and their augmentation draws (`epoch_draws`)."""
    epoch: int
    batches: list[np.ndarray]
    draws: tuple[torch.Tensor, ...] | None


def planned_ahead(future: Future | None, epoch: int | None) -> EpochPlan | None:
    """The plan `future` made in advance if it is epoch `epoch`'s, else None: nothing planned,
    the planning failed (its error is met again when the epoch is planned anew) or another epoch
    was planned. Waits for the future."""
    if future is None or future.exception() is not None:
        return None
    plan = future.result()
    return plan if plan.epoch == epoch else None
