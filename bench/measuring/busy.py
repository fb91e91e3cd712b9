"""The synthetic training step of loader mode (the headspace method): a fixed amount of work that
loads the GPU the way a training step does and lasts a known time per batch on an idle GPU; every
window measures how much longer it ran beside the pipeline.

On CUDA one *unit* of work is a bf16 matrix product (2048 x 1024 by 1024 x 2048: 8.6 GFLOP, tiles
for every SM) and a copy of 16 MiB (32 MiB of memory traffic); consecutive units copy different
buffers of a ring larger than the L2 cache, so every copy reads and writes HBM whatever else runs
(a copy that stays in L2 made the calibration faster than the same step beside a pipeline that
moves data). A step of t ms is k units captured in a CUDA graph and replayed per batch on the
consumer's stream, so every SM is busy, memory moves, and a pipeline's side-stream kernels and
copies meet a loaded GPU, as they do in training. The graph holds two timing events around its
units (`torch.cuda.Event(external=True)`), so the step's own GPU time is read with no host time in
it; RING copies of the graph, replayed in turn, let every replay be read (a copy's events are read
before it is replayed again), and `measured_ms` is the mean over all replays since the last read:
the window's mean step, not a sample of it.

Calibration (`unit_ms`) runs once per process and device, before any pipeline exists: a graph of
CALIBRATION_UNITS units with the events inside, replayed for WARM_S first so the clocks settle
where sustained work holds them, then timed: the GPU never waits for the host between the two
events, so a host stall (another thread holding the GIL) cannot count as busy time.
k = round(t / unit_ms), sized once and never again: the step is a fixed amount of work, `units`,
whose time on an idle GPU is `idle_ms` = k x unit_ms (t, to within one unit). A training step does
not shrink when a pipeline shares the GPU with it: it runs longer, and the pipeline's side-stream
work gets less of the GPU. So beside the running pipeline the busy step keeps its work too, and
its measured mean step over a window (`measured_ms`) divided by `idle_ms` is the window's
*stretch*: the pipeline's contention cost, recorded per window with the units (clocks that drop
while a starved GPU idles between steps lengthen it too, as they do a real step). An earlier design
re-sized k beside the running pipeline until the step lasted its label again: a step refit that
way yields to the pipeline (beside memory-bound side work it lost most of its units), so GPU-side
pipelines met a lighter GPU than a real training step gives them and their loader ceilings were
overstated. A one-thread sleep kernel (`torch.cuda._sleep`) timed by events around its launch, the
design before that, busied one SM of 132, moved no memory and counted host stalls as sleep.
How far the stand-in's contention is from a real captured training step's: `bench.studies.standin`.

The step has a stretch of its own, too: replayed once per batch by the harness's loop (a graph
launch, the consumer's tiny kernel, the event reads) it takes a little longer per batch than its
units back to back (3-4.5 % on an H100 beside pipelines that do no GPU work of their own). So each
level is also timed beside a *null pipeline* (`beside_null`: the same loop and consumer on one
batch already on the device, no pipeline) before the pipeline exists: `null_ms`, host clock per
batch, is what the step alone allows in that loop, batch / null_ms, and the report reads a
pipeline's share of that, so a pipeline that never holds the step back reads about 100 %.

A stretched step is data, not a fault. The harness rejects only a window that delivered more than
its step allows (batch / measured step time, TOLERANCE above): such a window is a row with status
`rejected` and the reason, never averaged in.

Without CUDA the step is a host sleep of t ms, measured with the host clock: it has no units
(`units` is nan) and its idle time is t.
"""
from __future__ import annotations

import math
import time
from typing import Callable

import torch

TOLERANCE = 0.05          # a window that delivered more than this above what its step allows is rejected
GEMM = (2048, 1024, 2048)  # one unit's matrix product, m x k by k x n, bf16
COPY_BYTES = 16 * 2**20   # one unit's copy
COPY_RING = 8             # buffers the units copy in turn: 128 MiB read, 128 MiB written, above any L2
CALIBRATION_UNITS = 200   # units timed by the calibration graph (about 5 ms on an H100)
WARM_S = 0.5              # seconds of calibration replays before the timed ones
RING = 16                 # copies of a step's graph: the host runs at most this many steps ahead
NULL_S = 0.25             # seconds the step is timed beside a null pipeline per level (`beside_null`)
NULL_STEPS = 24           # ... and at least this many steps

_WORK: dict[torch.device, "_Work"] = {}


class _Work:
    """The tensors of one device's units (random values: zeros can run faster than data)."""

    def __init__(self, device: torch.device):
        g = torch.Generator(device=device).manual_seed(0)
        m, k, n = GEMM
        self.a = torch.randn(m, k, device=device, dtype=torch.bfloat16, generator=g)
        self.b = torch.randn(k, n, device=device, dtype=torch.bfloat16, generator=g)
        self.c = torch.empty(m, n, device=device, dtype=torch.bfloat16)
        self.src = torch.randn(COPY_RING, COPY_BYTES // 2, device=device, dtype=torch.bfloat16, generator=g)
        self.dst = torch.empty_like(self.src)
        self.unit_ms = float("nan")

    def units(self, k: int) -> None:
        for i in range(k):
            torch.mm(self.a, self.b, out=self.c)
            self.dst[i % COPY_RING].copy_(self.src[(i + 1) % COPY_RING])

    def capture(self, k: int) -> tuple[torch.cuda.CUDAGraph, torch.cuda.Event, torch.cuda.Event]:
        """A graph of k units between two timing events recorded inside it, replayed once."""
        start, end = (torch.cuda.Event(enable_timing=True, external=True) for _ in range(2))
        self.units(1)   # cuBLAS picks its kernel and workspace outside the capture
        torch.cuda.synchronize(self.a.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            start.record()
            self.units(k)
            end.record()
        graph.replay()   # a graph's first replay runs long (it is uploaded): never one that counts
        torch.cuda.synchronize(self.a.device)
        return graph, start, end


def work(device: torch.device) -> _Work:
    """The device's units, calibrated once per process (module docstring)."""
    if device not in _WORK:
        found = _Work(device)
        with torch.cuda.device(device):
            graph, start, end = found.capture(CALIBRATION_UNITS)
            warm = time.perf_counter() + WARM_S
            while time.perf_counter() < warm:   # sustained work: the clocks a step meets in a window
                for _ in range(10):
                    graph.replay()
                end.synchronize()
            times = []
            for _ in range(5):
                graph.replay()
                end.synchronize()
                times.append(start.elapsed_time(end) / CALIBRATION_UNITS)
            found.unit_ms = sorted(times)[2]   # the median
        _WORK[device] = found
    return _WORK[device]


class BusyStep:
    """`ms` of GPU work per call on an idle GPU, sized once (module docstring): `units` of work
    (nan on a host sleep), `idle_ms` their time on an idle GPU (`ms` on a host sleep);
    `measured_ms()`: the mean time the calls since the last reading took on the device (the host
    clock without CUDA)."""

    def __init__(self, device: torch.device, ms: float):
        self.ms = ms
        self.cuda = device.type == "cuda"
        self.calls = 0
        self.total_ms = 0.0      # the calls' times read so far
        self.read = 0            # how many of the calls have been read
        self.units, self.idle_ms = math.nan, ms
        self.null_ms = math.nan  # its time per batch beside a null pipeline (`beside_null`)
        if self.cuda and ms:
            self.work = work(device)
            self.units = max(1, round(ms / self.work.unit_ms))
            self.idle_ms = self.units * self.work.unit_ms
            self.ring = [self.work.capture(self.units) for _ in range(RING)]

    def __call__(self) -> None:
        if not self.ms:
            return
        if self.cuda:
            if self.calls - self.read == RING:   # this copy's previous replay: read before it is replayed again
                self._read_oldest()
            self.ring[self.calls % RING][0].replay()
        else:
            t0 = time.perf_counter()
            time.sleep(self.ms / 1e3)
            self.total_ms += (time.perf_counter() - t0) * 1e3
            self.read += 1
        self.calls += 1

    def _read_oldest(self) -> None:
        _, start, end = self.ring[self.read % RING]
        end.synchronize()
        self.total_ms += start.elapsed_time(end)
        self.read += 1

    def measured_ms(self) -> float:
        """The mean time (ms) of the calls since the last reading (nan if none); waits for them on CUDA."""
        while self.read < self.calls:
            self._read_oldest()
        mean = self.total_ms / self.read if self.read else float("nan")
        self.calls = self.read = 0
        self.total_ms = 0.0
        return mean


def beside_null(consume: Callable[[torch.Tensor, torch.Tensor], None], busy: BusyStep,
                device: torch.device) -> float:
    """The busy step's time per batch (ms, host clock) in the harness's loop beside a null pipeline
    (module docstring): `consume` (the loader consumer that calls `busy`) on one batch already on the
    device, RING untimed calls, then at least NULL_S seconds and NULL_STEPS calls between two
    synchronizations; the step's counters are left read."""
    images, labels = torch.zeros(1, 1, 1, 1, device=device), torch.zeros(1, device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda _device: None)
    for _ in range(RING):
        consume(images, labels)
    busy.measured_ms()
    steps = max(NULL_STEPS, math.ceil(NULL_S * 1e3 / busy.idle_ms))
    sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        consume(images, labels)
    sync(device)
    null_ms = (time.perf_counter() - t0) * 1e3 / steps
    busy.measured_ms()
    return null_ms


def rejection(step_ms: float, images: int, steps: int, seconds: float) -> str:
    """Why a busy window cannot count ('' if it can): it delivered more images than `steps` steps of
    `step_ms` (its measured mean step) allow, TOLERANCE above. A step that ran longer than its
    label is no reason: that stretch is the pipeline's contention cost (module docstring)."""
    most = images / (steps * step_ms / 1e3)   # the rate if every step took exactly the busy time
    if images / seconds > most * (1 + TOLERANCE):
        return (f"delivered {images / seconds:,.0f} img/s, more than the busy step allows "
                f"({most:,.0f}: batch / {step_ms:.3g} ms)")
    return ""


class Touch:
    """Loader-only consumer: one tiny kernel per batch that reads its images and labels; then the
    synthetic training step `busy` (`bench.measuring.busy.BusyStep`), if any: the headspace method."""

    def __init__(self, device: torch.device, busy: BusyStep | None = None):
        self.acc = torch.zeros(1, device=device)
        self.busy = busy

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        torch.add(images[-1, -1, -1, -1:], labels[-1:], out=self.acc)
        if self.busy is not None:
            self.busy()
