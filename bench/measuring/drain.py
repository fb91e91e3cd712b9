"""The drain before a timed window and the batches ready at its start, apart from the harness
(`bench.measuring.harness`) that runs them: what a pipeline queued while nothing consumed it is taken off
before the window (`drain`: a window counts what the pipeline makes, not a queue filled beforehand),
and the window's leading steps that found a batch ready are counted (`ready_at_start`), as are those
after each epoch restart (`restart_bursts`); `sync`, the device synchronize they rest on, is here
with them.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Iterator

import numpy as np
import torch

from . import distributed
from .spec import RunSpec

DRAIN_WAIT_MS = 1.0   # drain: a next() that waited this long (beyond twice the quickest) found the queue empty


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def drains(spec: RunSpec) -> bool:
    """Whether `spec`'s windows begin with a drain (`drain`): loader and e2e windows, DDP's too (the
    drain runs no step, so no collective; every rank takes as many batches)."""
    return spec.mode in ("loader", "e2e")


def drain(batches: Iterator, capacity: int, device: torch.device,
          synchronize: Callable[[torch.device], None] = sync) -> tuple[int, float]:
    """Take off what the pipeline queued while nothing consumed it; returns the batches taken and
    the handover of a ready batch (ms: the drain's quickest `next()`, which `ready_at_start` reads).
    `synchronize(device)` first, so the device is idle; then batches taken with `next()` and
    dropped, no step (a step's device work would let the pipeline refill while the device catches
    up), each followed by `synchronize(device)` (work `next()` launched), until two `next()` calls in
    a row waited DRAIN_WAIT_MS beyond twice the drain's quickest one (the queue is empty and stays
    so: from here the pipeline is the one that waits; a pool of workers whose batches land together
    refills it between two waits, and one wait alone left windows that began with up to 23 of 24
    batches ready, issue 67; the quickest is the handover of a ready batch, a copy for some), or
    2 x (`capacity` + 1) were taken (the pipeline's `queue_capacity`: a pipeline that refills faster
    than batches are taken keeps ahead of its consumer, in the window too). Under torch.distributed
    every rank then takes as many as the rank that took most, so their epochs restart together."""
    synchronize(device)
    taken, quickest, waits = 0, math.inf, 0
    while taken < 2 * (capacity + 1):
        waited = _take(batches, device, synchronize)
        taken += 1
        if waited * 1e3 >= DRAIN_WAIT_MS + 2 * quickest:
            waits += 1
            if waits == 2:
                break
            continue
        waits = 0
        quickest = min(quickest, waited * 1e3)
    most = max(distributed.gather(taken))
    for _ in range(most - taken):
        _take(batches, device, synchronize)
    return most, quickest


def _take(batches: Iterator, device: torch.device, synchronize: Callable[[torch.device], None]) -> float:
    """One batch off `batches`, dropped, and the device synchronized: the seconds `next()` took."""
    t0 = time.perf_counter()
    next(batches)
    waited = time.perf_counter() - t0
    synchronize(device)
    return waited


def ready_at_start(wait_ms: np.ndarray, capacity: int, handover_ms: float = 0.0) -> int:
    """Batches ready when a window began: its leading steps whose `next()` returned within
    DRAIN_WAIT_MS beyond twice `handover_ms` (a batch already made, by the drain's own rule: the
    handover of a ready batch, a copy for some, is the drain's quickest `next()`), at most
    `capacity` + 1 (a pipeline that keeps ahead of its consumer has every batch ready). A `next()`
    that also waits for the model's queued work (`next_syncs`) can read as not ready."""
    slow = np.flatnonzero(wait_ms[:capacity + 1] >= DRAIN_WAIT_MS + 2 * handover_ms)
    return int(slow[0]) if len(slow) else min(len(wait_ms), capacity + 1)


def restart_bursts(restarts: np.ndarray, wait_ms: np.ndarray, capacity: int, handover_ms: float) -> np.ndarray:
    """The steps of a window that an epoch restart decides: each step that began an epoch and, after
    it, the leading steps whose batches were ready (`ready_at_start`'s rule, at most `capacity` + 1):
    the burst a worker pool made while the restart held the consumer, which a rate without restarts
    must leave out too (counted in, it overstated that rate by 4-31 %, issue 67)."""
    decided = restarts.copy()
    if capacity > 0:
        handover = 0.0 if math.isnan(handover_ms) else handover_ms
        for i in np.flatnonzero(restarts):
            decided[i + 1:i + 1 + ready_at_start(wait_ms[i + 1:], capacity, handover)] = True
    return decided
