"""The one trainer harness: every pipeline is timed the same way, never branched on by name.

Modes (what each timer includes):
  - loader: iterate the pipeline with no model. The consumer reads each batch on the device (one
    tiny kernel) and then, for each level of `busy_ms`, gives the device a fixed amount of work per
    batch that loads it like a training step and lasts that many ms on an idle GPU (`bench.measuring.busy`:
    matrix products and memory traffic on every SM, sized once by a calibration before the pipeline
    exists; a host sleep without CUDA): the "headspace" method. Beside the pipeline that work is
    never re-sized: it runs longer where the pipeline contends for the GPU, as a training step
    does, and each window records its work units (`busy_units`), their idle time (`busy_idle_ms`),
    its time per batch in this loop beside a null pipeline (`busy_null_ms`, timed before the pipeline
    exists: what the step allows), the measured mean step over the window's steps (`busy_step_ms`; the drain runs no step) and the ratio
    of the two (`busy_stretch`): the pipeline's contention cost. (A step refit beside the pipeline
    to last its label yields to the pipeline and overstates GPU-side pipelines' ceilings.) Level 0
    is the bare loop on an idle GPU;
    the busy levels measure the pipeline under the conditions of training, and the rates against
    the levels are the pipeline's headspace curve: the crossover for a model of any step time. A
    busy window that delivered more than batch / measured step allows is rejected
    (`Window.rejected`); a stretched one counts. The report derives the pipeline's loader ceiling
    from the levels (`bench.report.ceilings`).
  - model:  the same training step as e2e on real batches already on the device (`real_batches`:
    the split's images normalized into the contract's dtype and memory format, as e2e gets them),
    no pipeline. Compute ceiling.
  - e2e:    the training step (forward, cross-entropy, backward, SGD) on the pipeline's batches.
  - train:  `epochs` whole epochs of e2e as one window (epoch restarts included), then the test
    split through the same pipeline (no augmentation) for `test_accuracy`: time to accuracy.
  - stage:  one stage of the pipeline alone (`Pipeline.stages()`), batch after batch:
      host          the pipeline's host-side producer (its workers / threads), no copy;
      pin           copying one batch's payload into freshly pinned memory (`Tensor.pin_memory`),
                    measured only for pipelines that do this per batch;
      h2d-pageable  `.to(device)` of the batch's payload from pageable memory (blocking);
      h2d-pinned    `.to(device, non_blocking=True)` of it from pinned memory, back to back;
      device        the device-side work (convert / decode / augment / normalize) on one
                    fixed batch. The model step's ceiling is model mode.
    A stage a pipeline does not have becomes a `not-applicable` row (`workloads.NotApplicable`).
  - copy:   the bus alone, no pipeline: one batch of `payload` (uint8 or float32, batch x 3 x S x S)
    copied host-to-device into a preallocated tensor, from pinned memory (`h2d-pinned`,
    `non_blocking`) or pageable memory (`h2d-pageable`), back to back. Under torchrun every rank
    copies at once (windows start after a barrier): what several GPUs of one host get together.

Each configuration runs under its CPU budget (`RunSpec.cpus`, `bench.measuring.machine.cpu_budget`), then
`warmup` untimed steps, then `repeats` timed windows (loader: one per busy level each time). A
window starts and ends with a device synchronize and is timed with the host clock; `seconds`
covers exactly the window's steps; its CUDA events are created before it starts. Window length:
`requested_steps` if given, else sized from an untimed run that also warms the pipeline up until its
rate is steady (`calibrate`: two chunks in a row within STEADY, at most STEADY_MOST_S or STEADY_WINDOWS
minimum windows; rows record
`warmup_s` and `warmup_steady`) to last at least
`min_window_s` (x WINDOW_MARGIN): whole epochs for e2e and stage rows (model-only: blocks of
MODEL_BLOCK steps), so every pipeline pays its epoch restarts alike; loader windows are whole epochs
too unless an epoch lasts more than LONG_EPOCH times that (then a number of steps, at least
MIN_LOADER_STEPS, that covers it). Right before a loader or e2e window (after the ranks' barrier;
under DDP too, `drains`) the drain takes off what the pipeline queued while nothing consumed it (the
barrier's wait, a slower busy level, the calibration's synchronizations): on an idle device (a
synchronize first), batches taken with `next()` and no step, a synchronize after each, until two in
a row wait (a burst of a worker pool's batches between them is taken too) or twice the pipeline's
declared queue capacity (`Pipeline.queue_capacity`) + 1 were taken; every rank takes as many
(`bench.measuring.drain`). The window then starts on an idle device with nothing queued (unless
the pipeline refills faster than batches are taken: then it keeps ahead in the window too), so no
window counts batches made before it began as delivered in it; each records its drain's batches
(`drain_steps`) and how many batches were ready when it began (`ready_at_start`: its leading
steps whose `next()` did not wait beyond the drain's own rule, DRAIN_WAIT_MS past twice a ready
batch's handover). A queue already empty when the drain begins costs capacity + 1 takes at the
pipeline's own pace (untimed, twice): a steady wait cannot be told from a slow handover.
Per step, `wait` is the host time spent in `next()` (blocked on the input), and the step time is
the interval between CUDA events recorded at step ends (host clock on CPU). `wait` includes
whatever `next()` waits for, also device synchronizations inside the pipeline that wait for the
model's queued work: a pipeline whose `next()` does (a blocking `.to(device)`, as `dataloader`'s
unless it pins and copies with `non_blocking`) declares it (`Pipeline.next_syncs`) and its loader,
e2e and train rows say so (`next_syncs`): their `wait_frac` is input wait plus the copy's device
sync. The steps that began a new epoch (new iterator, worker start, shuffle) are recorded apart
(`restart_ms`), and `steady_img_per_s` leaves them out, with the burst of batches made during each
restart that the steps after it take ready (`drain.restart_bursts`): the images of the other steps
over the time between their CUDA events (the GPU's timeline, so the queue a restart drains is not
counted as free time).

CPU: each window records the CPU seconds the process tree burned (`cpu_s`, from /proc in clock
ticks), those of the training thread (`train_cpu_s`, its own clock) and the part of these it spent
inside `next()` (`next_cpu_s`: what a pipeline computes on the calling thread, e.g. DALI's
iterator, `dataloader`'s copies). The pipeline's CPU is `cpu_s - train_cpu_s +
next_cpu_s` (its threads, workers and processes, and its work inside `next()`); the training
step's is `train_cpu_s - next_cpu_s` (launching work and running ahead of the GPU, which CUDA's
blocking waits, `machine.blocking_waits`, do not make free). The two counters are read apart and
the process tree's in whole ticks, so the pipeline's share can read up to a tick per reading off,
below 0 where it spent nothing; nothing clamps it.

On CUDA with NVML each window also records the SM / memory clocks, PCIe link, temperature, power
draw and the reasons the clocks are held down (`machine.GpuMonitor`) read before its final
synchronize. Outside every window, and recorded: pipeline construction (`setup_s`, including a
resident upload), the first batch (`first_batch_s`: a worker pool's start), the first training call
(`compile_s`), the warm-up (`warmup_s`) and each window's drain (`drain_s`). A child process of a
sweep starts its DataLoader workers' forkserver as it starts (`bench.running.children`), so that the
forkserver's imports overlap the pipeline's construction and the model's compilation; nothing is
timed before it is ready (`pipelines.workers.forkserver_ready`: after the first training call, and
before loader mode's busy steps are sized). `sync_every` = N reads the loss on the host every N steps (`loss.item()`, as training loops
that log do), which drains the GPU's queue each time; 0 never does.

The training step and its kinds (eager, graph, compile): `bench.measuring.training`.
The configuration a run measures (`RunSpec`), what a window measured (`Window`) and the modes' names:
`bench.measuring.spec`.

Several configurations of one process (`Shared`, `--share-process`): model-only and e2e
configurations of one cell (model, step kind, loss reads, setting, CPU budget, GPUs) may run one
after another in one process (one per rank under DDP) and share its trainer, built and compiled (or captured) once; each still
builds, warms up, sizes and times its own pipeline and windows, and the pipeline before it is
closed and its memory released first (`machine.release`: Python's garbage, DALI's pools, torch's CUDA and
pinned-memory caches); `bench.running.plan.shared` sets the order. Its first training call (`compile_s`) then only runs a step
(the report reads compilation from slot 0 and rows that ran alone). The rows say which
configurations shared a process and in which order (`slot`).

Several GPUs (`RunSpec.parallel`): "ddp" = one process per GPU under torchrun (`bench.measuring.distributed`),
each rank timing its own windows, all starting after a barrier, its pipeline sharded by rank and
the model in DistributedDataParallel (so the e2e step includes the gradient all-reduce); the
caller combines the ranks' windows (images summed, seconds the slowest rank's). "dp" = one
process, `torch.nn.DataParallel` over every visible GPU, fed the whole batch on the first; its
windows also record the other GPUs' peak memory.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Iterator

import numpy as np
import torch

import pipelines
from pipelines.contract import resolve_device
from pipelines.epochs import shard_size
from pipelines.workers import forkserver_ready

from . import distributed, machine
from .busy import BusyStep, Touch, beside_null, rejection
from .drain import drain, drains, ready_at_start, restart_bursts, sync
from .spec import RunSpec, Window
from .training import Trainer, evaluate, reading
from .workloads import copy_workload, endless, real_batches, stage_workload

MODEL_BLOCK = 50   # model mode, min_window_s: windows are whole blocks of this many steps
WINDOW_MARGIN = 1.2   # min_window_s: size windows for 20% more, so run-to-run jitter stays above it
STEADY_CHUNK_S = 0.5   # min_window_s: the warm-up's chunks last at least this (`calibrate`)
CHUNK_MARGIN = 1.1     # a short chunk's successor is sized for this much more than STEADY_CHUNK_S
CHUNK_GROWTH = 16      # and is at most this many times as long
STEADY = 0.1           # two chunks in a row within this of each other's rate: steady
STEADY_MOST_S = 20.0   # the warm-up's longest: a pipeline not steady by then is timed, and its rows say so
STEADY_WINDOWS = 4     # and at most this many of the run's minimum windows (a CPU run's 0.5 s: 2 s)
MIN_LOADER_STEPS = 8   # a loader window shorter than an epoch has at least this many steps
LONG_EPOCH = 5   # min_window_s: a loader window is whole epochs unless one lasts more than this x the window


def time_window(batches: Iterator, step: Callable, steps: int, device: torch.device,
                others: tuple[torch.device, ...] = (), monitor: machine.GpuMonitor | None = None,
                settle: Callable[[], tuple[int, float]] | None = None, capacity: int = 0) -> Window:
    """Run `steps` steps as one synchronized window (see the module docstring for what it
    includes); under torch.distributed every rank starts it after a barrier, then `settle()` (the
    drain, untimed, returning its batches: `drain_steps`) and a second barrier. `others`: further
    GPUs whose peak memory the window records (DataParallel); `monitor`: NVML readings; `capacity`:
    the pipeline's queue capacity, the most batches a restart's burst can hold (`restart_bursts`)."""
    cuda = device.type == "cuda"
    marks = _step_marks(steps, device, others) if cuda else []
    distributed.barrier()
    drained, handover, drain_s = 0, math.nan, 0.0
    if settle is not None:
        t0 = time.perf_counter()
        drained, handover = settle()
        drain_s = time.perf_counter() - t0
        distributed.barrier()
    host_marks = np.empty(steps + 1)
    wait = np.empty(steps)
    sizes = np.empty(steps, dtype=np.int64)
    restarts = np.zeros(steps, dtype=bool)
    track = isinstance(batches, endless)
    next_cpu = 0.0   # the training thread's CPU seconds inside next(): the pipeline's work (module docstring)
    sync(device)
    cpu, train_cpu = machine.cpu_seconds(), time.thread_time()
    start = time.perf_counter()
    host_marks[0] = start
    if cuda:
        marks[0].record()
    for i in range(steps):
        epoch = batches.epoch if track else None
        c0 = time.thread_time()
        t0 = time.perf_counter()
        x, y = next(batches)
        wait[i] = time.perf_counter() - t0
        next_cpu += time.thread_time() - c0
        if track:
            restarts[i] = batches.epoch != epoch
        step(x, y)
        sizes[i] = len(y)
        if cuda:
            marks[i + 1].record()
        host_marks[i + 1] = time.perf_counter()
    gpu = monitor.sample() if monitor is not None else {}
    sync(device)
    seconds = time.perf_counter() - start
    train_cpu = time.thread_time() - train_cpu
    cpu = machine.cpu_seconds() - cpu
    images = int(sizes.sum())
    step_ms, peak, other = _step_times(marks, host_marks, device, others)
    decided = restart_bursts(restarts, wait * 1e3, capacity, handover)   # each restart and the burst after it
    steady = sizes[~decided].sum() / (step_ms[~decided].sum() / 1e3) if restarts.any() and not decided.all() \
        else images / seconds   # the steps no epoch restart decides, on the GPU's timeline (module docstring)
    return Window(images, seconds, wait * 1e3, step_ms, peak, other, wait[restarts] * 1e3, float(steady), cpu,
                  train_cpu, next_cpu, gpu, drain_steps=drained, drain_handover_ms=handover, drain_s=drain_s)


def _step_marks(steps: int, device: torch.device, others: tuple[torch.device, ...]) -> list:
    """A window's CUDA events, one before its first step and one after each, each recorded once here
    (CUDA creates an event at its first record: here, not inside the window); the devices' peak
    memory counters reset."""
    for d in (device, *others):
        torch.cuda.reset_peak_memory_stats(d)
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    for mark in marks:
        mark.record()
    return marks


def _step_times(marks: list, host_marks: np.ndarray, device: torch.device,
                others: tuple[torch.device, ...]) -> tuple[np.ndarray, float, float]:
    """Each step's ms (between the CUDA events `marks`, else the host's clock), and the peak memory
    (MiB) of `device` and of the most of `others` (NaN without CUDA)."""
    if marks:
        step_ms = np.array([marks[i].elapsed_time(marks[i + 1]) for i in range(len(marks) - 1)])
        peak = torch.cuda.max_memory_allocated(device) / 2**20
    else:
        step_ms = np.diff(host_marks) * 1e3
        peak = math.nan
    other = max((torch.cuda.max_memory_allocated(d) / 2**20 for d in others), default=math.nan)
    return step_ms, peak, other


def calibrate(batches: Iterator, step: Callable, device: torch.device,
              most_s: float = STEADY_MOST_S) -> tuple[float, bool, float]:
    """Warm up until steady, and size the windows: untimed steps in synchronized chunks (so a host
    that runs ahead of the device never queues much), from 1 step on, each short one followed by one
    sized at its rate to last STEADY_CHUNK_S (with CHUNK_MARGIN; growing at least by one step, at
    most CHUNK_GROWTH times), until one lasts STEADY_CHUNK_S, then chunks of that size until two in
    a row run within STEADY of each other's rate (a pipeline's first batches can run far slower than
    its later ones: DALI grows its buffers, a worker pool fills its queue) or `most_s` have passed;
    every rank decides together (the fastest rank's rate sizes the next chunk), so all run the same
    steps. Returns the last chunk's seconds per step, whether it was steady, and the seconds it all
    took (rows: `warmup_steady`, `warmup_s`)."""
    chunk, last = 1, math.nan
    sync(device)
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        for _ in range(chunk):
            step(*next(batches))
        sync(device)
        per_step = (time.perf_counter() - t0) / chunk
        fastest = min(distributed.gather(per_step))
        if fastest * chunk < STEADY_CHUNK_S:
            sized = math.ceil(CHUNK_MARGIN * STEADY_CHUNK_S / fastest) if fastest > 0 else CHUNK_GROWTH * chunk
            chunk = min(max(sized, chunk + 1), CHUNK_GROWTH * chunk)
            continue
        steady = abs(per_step / last - 1) <= STEADY
        elapsed = time.perf_counter() - start
        if all(distributed.gather(steady or elapsed >= most_s)):
            return max(distributed.gather(per_step)), steady, elapsed
        last = per_step


def window_steps(spec: RunSpec, unit: int, step_s: float, busy_ms: float = 0.0) -> int:
    """Steps of one timed window (module docstring): `spec.requested_steps`, one unit (epoch or block) without
    `min_window_s`, else sized from `step_s` seconds per step (and the busy level's floor)."""
    if spec.requested_steps:
        return spec.requested_steps
    if not spec.min_window_s:
        return unit
    per_step = max(step_s, busy_ms / 1e3)
    target = WINDOW_MARGIN * spec.min_window_s
    if spec.mode == "loader" and unit * per_step > LONG_EPOCH * target:   # an epoch is much longer than the window
        return max(MIN_LOADER_STEPS, math.ceil(target / per_step))
    return unit * max(1, math.ceil(target / (unit * per_step)))


class Shared:
    """What the configurations run in one process share (module docstring): their trainers, one per
    model, step kind, precision, memory format, parallel mode and device, and how many configurations
    ran before the next."""

    def __init__(self):
        self.trainers: dict[tuple, Trainer] = {}
        self.ran = 0

    def trainer(self, spec: RunSpec, device: torch.device) -> Trainer:
        key = (spec.model, spec.step, spec.config.dtype, spec.config.channels_last, spec.parallel, str(device))
        if key not in self.trainers:
            self.trainers[key] = Trainer(spec.model, device, spec.config.dtype, spec.config.channels_last,
                                         parallel=spec.parallel, step=spec.step)
        return self.trainers[key]


def run(spec: RunSpec, shared: Shared | None = None) -> Iterator[tuple[dict, Window]]:
    """Measure one spec, yielding (facts about the run, Window) after each window so the caller
    can persist rows as they come. The pipeline is closed however the generator ends. `shared`: the
    process runs several configurations that share a trainer (module docstring)."""
    with machine.cpu_budget(spec.cpus, distributed.from_env().local_rank) as cores:
        yield from _run(spec, cores, shared)


def _run(spec: RunSpec, cores: list[int], shared: Shared | None) -> Iterator[tuple[dict, Window]]:
    config = spec.config
    device = resolve_device(config.device)
    facts: dict[str, object] = {"device": str(device), "cpus": len(cores), "cpu_set": machine.cores_text(cores),
                                "blocking_waits": machine.blocking_waits(device)}
    if shared is not None:
        facts["slot"] = shared.ran
        shared.ran += 1
    monitor = machine.GpuMonitor(device)
    if spec.mode == "loader":
        forkserver_ready()   # a forkserver started early (`bench.running.children`) has imported its modules
    # loader mode's consumers, one per busy level, calibrated before the pipeline and its threads exist
    consumers = {b: Touch(device, BusyStep(device, b) if b else None) for b in spec.busy_levels} \
        if spec.mode == "loader" else {}
    for consumer in consumers.values():   # what each step allows in this loop, beside a null pipeline
        if consumer.busy is not None:
            consumer.busy.null_ms = beside_null(consumer, consumer.busy, device)
    pipeline, batches = None, None
    try:
        if spec.mode == "model":
            batches = real_batches(config, device)
            facts["data_source"] = "real-batches"
            unit = MODEL_BLOCK if spec.min_window_s else 100
        elif spec.mode == "copy":
            unit = MODEL_BLOCK if spec.min_window_s else 100
        else:
            t0 = time.perf_counter()
            pipeline = pipelines.build(spec.pipeline, config)
            facts["setup_s"] = time.perf_counter() - t0
            _pipeline_facts(spec, pipeline, facts)
            batches = endless(pipeline)
            unit = len(pipeline)
        batches, step, trainer = _workload(spec, pipeline, batches, device, shared, facts)
        forkserver_ready()   # nothing timed shares the CPU with an early forkserver's imports
        if spec.mode == "train":
            yield facts, _train(spec, pipeline, trainer, batches, device, monitor)
            return
        yield from _windows(spec, batches, step, consumers, trainer, pipeline, unit, monitor, facts)
    finally:
        if pipeline is not None:
            pipeline.close()


def _pipeline_facts(spec: RunSpec, pipeline: pipelines.Pipeline, facts: dict) -> None:
    """What the built pipeline says of itself, into `facts`; a batch larger than an epoch's samples
    refused under last_batch='drop', else recorded as the batch that ran."""
    config = spec.config
    samples = shard_size(len(pipeline.data), config)
    if config.batch_size > samples:   # a batch no step could have: refuse, or record what ran
        if config.last_batch == "drop":
            raise ValueError(f"batch_size={config.batch_size} is larger than the {samples} samples per epoch "
                             "with last_batch='drop': no step would run (use a smaller batch or 'partial')")
        facts["batch_size"] = samples
    facts.update(data_source=pipeline.data.source, steps_per_epoch=len(pipeline), samples=samples,
                 queue_capacity=pipeline.queue_capacity, **pipeline.info)
    if spec.mode != "stage":   # stage rows time the stages, not next()
        facts["next_syncs"] = pipeline.next_syncs


def _workload(spec: RunSpec, pipeline, batches, device: torch.device, shared: Shared | None,
              facts: dict) -> tuple[Iterator, Callable, Trainer | None]:
    """The mode's batches, what a window runs per batch, and the trainer (None without a model); a
    trainer's first step (compilation, warm-up, capture) runs here, outside every window."""
    if spec.mode == "stage":
        batches, step, stage_facts = stage_workload(spec, pipeline, device)
        facts.update(stage_facts)
        return batches, step, None
    if spec.mode == "copy":
        batches, step, copy_facts = copy_workload(spec, device)
        facts.update(copy_facts)
        return batches, step, None
    if spec.mode == "loader":
        return batches, Touch(device), None
    trainer = (shared or Shared()).trainer(spec, device)
    t0 = time.perf_counter()
    batch = next(batches)   # a worker pool's start, a first epoch's plan
    sync(device)
    facts["first_batch_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    trainer(*batch)   # compilation, warm-up and capture happen here, outside every window
    sync(device)
    facts["compile_s"] = time.perf_counter() - t0
    return batches, reading(trainer, spec.sync_every), trainer


def _windows(spec: RunSpec, batches: Iterator, step: Callable, consumers: dict, trainer: Trainer | None,
             pipeline, unit: int, monitor: machine.GpuMonitor, facts: dict) -> Iterator[tuple[dict, Window]]:
    """The warm-up, the run that sizes the windows, then `spec.repeats` rounds of windows (one per busy
    level in loader mode), each yielded with `facts` as it ends."""
    device = resolve_device(spec.config.device)
    others = tuple(trainer.devices[1:]) if spec.parallel == "dp" else ()
    facts["gpus"] = (1 + len(others)) * spec.config.world_size if device.type == "cuda" else 0
    for _ in range(spec.warmup):
        step(*next(batches))
    step_s = 0.0
    if spec.requested_steps is None and spec.min_window_s:   # warmed up until steady, the windows sized
        step_s, facts["warmup_steady"], facts["warmup_s"] = calibrate(
            batches, step, device, min(STEADY_MOST_S, STEADY_WINDOWS * spec.min_window_s))
    for _ in range(spec.repeats):
        for busy, consumer in (consumers or {0.0: step}).items():
            steps = window_steps(spec, unit, step_s, busy)
            settle = (lambda: drain(batches, pipeline.queue_capacity, device)) if drains(spec) else None
            window = time_window(batches, consumer, steps, device, others, monitor, settle,
                                 pipeline.queue_capacity if settle is not None else 0)
            if settle is not None:
                window.ready_at_start = ready_at_start(window.wait_ms, pipeline.queue_capacity,
                                                       window.drain_handover_ms)
            window.busy_ms = busy
            if spec.mode == "loader" and consumer.busy is not None:
                record_busy(window, consumer.busy)
            yield facts, window


def record_busy(window: Window, busy: BusyStep) -> None:
    """A busy window's step (module docstring): its work, its idle and measured times, their ratio,
    and whether the window can count (`bench.measuring.busy.rejection`)."""
    window.busy_units, window.busy_idle_ms, window.busy_null_ms = busy.units, busy.idle_ms, busy.null_ms
    window.busy_step_ms = busy.measured_ms()
    window.busy_stretch = window.busy_step_ms / window.busy_idle_ms
    window.rejected = rejection(window.busy_step_ms, window.images, len(window.step_ms), window.seconds)


def _train(spec: RunSpec, pipeline: pipelines.Pipeline, trainer: Trainer, batches: Iterator,
           device: torch.device, monitor: machine.GpuMonitor) -> Window:
    """`spec.train_epochs` epochs as one window (the first step, timed as compile_s, before it), then the
    test split through the same pipeline without augmentation."""
    window = time_window(batches, trainer, spec.train_epochs * len(pipeline) - 1, device, monitor=monitor)
    c = pipeline.config
    test = c.replace(split="test", augment=False, shuffle=False, last_batch="partial", rank=0, world_size=1)
    with pipelines.build(spec.pipeline, test) as evaluation:
        window.test_accuracy = evaluate(trainer.model, evaluation, c.dtype)
    return window
