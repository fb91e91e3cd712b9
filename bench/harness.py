"""The one trainer harness: every pipeline is timed the same way, never branched on by name.

Modes (what each timer includes):
  - loader: iterate the pipeline and touch each batch on the device (two tiny kernels reading the
    last element of images and of labels on the consumer's stream), no model. Input ceiling.
  - model:  the same training step as e2e on one synthetic batch already on the device, no
    pipeline. Compute ceiling.
  - e2e:    the training step (forward, cross-entropy, backward, SGD) on the pipeline's batches.
  - stage:  one stage of the pipeline alone (`Pipeline.stages()`), batch after batch:
      host          the pipeline's host-side producer (its workers / threads), no copy;
      pin           copying one batch's payload into freshly pinned memory (`Tensor.pin_memory`),
                    measured only for pipelines that do this per batch;
      h2d-pageable  `.to(device)` of the batch's payload from pageable memory (blocking);
      h2d-pinned    `.to(device, non_blocking=True)` of it from pinned memory, back to back;
      device        the device-side work (convert / decode / augment / normalize) on one
                    fixed batch. The model step's ceiling is model mode.
    A stage a pipeline does not have becomes a `not-applicable` row (NotApplicable).
Each config runs `warmup` untimed steps, then `repeats` timed windows of `steps` steps each
(continuing across epoch boundaries, `set_epoch` called at every new epoch). A window starts and
ends with a device synchronize and is timed with the host clock; `seconds` covers exactly the
window's steps. Per step, `wait` is the host time spent in `next()` (blocked on the input),
and the step time is the interval between CUDA events recorded at step ends (host clock on CPU).
`wait` includes whatever `next()` waits for: the input, and device synchronizations inside the
pipeline that wait for the model's queued work too; the steps that began a new epoch (new
iterator, worker start, shuffle) are also recorded apart as `restart_ms`.
Pipeline construction (`setup_s`, including a resident upload) is outside every window.
`RunSpec.min_seconds` > 0 with `steps=None` sizes every window from an untimed calibration window
to the fewest whole epochs (model mode: blocks of 50 steps) that last at least that long.

The training step (`RunSpec.step`, `Trainer(step=...)`), as fast models are trained today:
  - eager:   the step as written, one kernel launch at a time from Python;
  - graph:   forward, loss, backward and the optimizer step captured once into one CUDA graph
             (`torch.cuda.graph`) and replayed; each batch is copied into the graph's static input;
  - compile: `torch.compile` of the model (default mode), then the same whole-step capture.
The first training step of model and e2e configs runs alone, synchronized, before the warm-up and is
recorded as `compile_s`: for graph / compile it includes the side-stream warm-up steps, compilation
and capture; for eager it is one step with cuDNN autotuning.

Several GPUs (`RunSpec.parallel`): "ddp" = one process per GPU under torchrun (`bench.distributed`),
each rank timing its own windows, all starting after a barrier, its pipeline sharded by rank and
the model in DistributedDataParallel (so the e2e step includes the gradient all-reduce); the
caller combines the ranks' windows (images summed, seconds the slowest rank's). "dp" = one
process, `torch.nn.DataParallel` over every visible GPU, fed the whole batch on the first; its
windows also record the other GPUs' peak memory.
"""
from __future__ import annotations

import contextlib
import gc
import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import pipelines
from pipelines.base import shard_size
from pipelines.config import CHANNELS, NUM_CLASSES, PipelineConfig

from . import distributed
from .models import build_model

MODES = ("loader", "model", "e2e", "stage")
STAGES = ("host", "pin", "h2d-pageable", "h2d-pinned", "device")
PRECISIONS = ("float32", "bfloat16", "float16")   # Trainer: no autocast, or autocast to this dtype
PARALLEL = ("none", "ddp", "dp")   # RunSpec: one GPU, DistributedDataParallel, DataParallel
STEPS = ("eager", "graph", "compile")   # Trainer: how the training step runs (module docstring)
WARMUP_BEFORE_CAPTURE = 3   # eager steps on a side stream before capture (cuDNN autotuning, optimizer state)
MODEL_BLOCK = 50   # model mode, min_seconds: windows are whole blocks of this many steps
WINDOW_MARGIN = 1.2   # min_seconds: size windows for 20% more, so run-to-run jitter stays above it


def step_refusal(step: str, device: torch.device, precision: str = "bfloat16", parallel: str = "none",
                 last_batch: str = "drop") -> str | None:
    """Why `step` cannot train here (None if it can): a captured step needs CUDA, one process per
    GPU without DataParallel / DDP, no GradScaler and one batch shape."""
    if step not in STEPS:
        return f"step={step!r}: expected one of {STEPS}"
    if step == "eager":
        return None
    if device.type != "cuda":
        return f"step={step!r} captures the training step in a CUDA graph: needs a CUDA device"
    if parallel != "none":
        return (f"step={step!r} with parallel={parallel!r}: the captured step runs one model on one GPU; "
                "DataParallel and DistributedDataParallel are refused (use step='eager')")
    if precision == "float16":
        return (f"step={step!r} with float16: the GradScaler's inf check reads back to the host, which a "
                "CUDA graph cannot capture (use bfloat16 or step='eager')")
    if last_batch == "partial":
        return (f"step={step!r} with last_batch='partial': a captured step has one batch shape "
                "(use last_batch='drop' or step='eager')")
    return None


class NotApplicable(Exception):
    """The measured pipeline has no such stage (or this machine cannot run it)."""


@dataclass(frozen=True)
class RunSpec:
    """One measured configuration: a pipeline (or none, for model-only) in one mode (and stage)."""
    pipeline: str
    mode: str
    model: str
    config: PipelineConfig = field(default_factory=PipelineConfig)
    steps: int | None = None   # timed steps per repeat; None = one epoch
    warmup: int = 10
    repeats: int = 3
    stage: str = ""            # stage mode only: one of STAGES
    parallel: str = "none"     # model replicas: none, ddp (one process per GPU), dp (DataParallel)
    step: str = "eager"        # model and e2e: the training step's kind, one of STEPS
    min_seconds: float = 0.0   # steps=None: windows of whole epochs (blocks) lasting at least this

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode!r}: expected one of {MODES}")
        if (self.mode in ("loader", "stage")) != (self.model == "none"):
            raise ValueError(f"mode={self.mode!r} with model={self.model!r}: loader and stage modes run "
                             "model 'none', the other modes need a model")
        if (self.mode == "stage") != (self.stage in STAGES):
            raise ValueError(f"mode={self.mode!r} with stage={self.stage!r}: stage mode needs one of "
                             f"{STAGES}, the other modes none")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"steps={self.steps!r}: expected None (one epoch) or >= 1")
        if self.parallel not in PARALLEL:
            raise ValueError(f"parallel={self.parallel!r}: expected one of {PARALLEL}")
        if self.parallel != "none" and self.mode not in ("model", "e2e"):
            raise ValueError(f"parallel={self.parallel!r} with mode={self.mode!r}: only model and e2e train replicas")
        if self.mode in ("model", "e2e") and (self.parallel == "ddp") != (self.config.world_size > 1):
            raise ValueError(f"parallel={self.parallel!r} with world_size={self.config.world_size}: "
                             "ddp is the mode of a torchrun job of more than one process")
        if self.step not in STEPS:
            raise ValueError(f"step={self.step!r}: expected one of {STEPS}")
        if self.step != "eager" and self.mode not in ("model", "e2e"):
            raise ValueError(f"step={self.step!r} with mode={self.mode!r}: only model and e2e train")
        if self.step != "eager" and self.mode == "e2e" and self.config.last_batch == "partial":
            raise ValueError(step_refusal(self.step, torch.device("cuda"), last_batch="partial"))
        if self.min_seconds < 0 or (self.min_seconds and self.steps is not None):
            raise ValueError(f"min_seconds={self.min_seconds!r}: expected >= 0, and only with steps=None")
        if self.warmup < 0 or self.repeats < 1:
            raise ValueError(f"warmup={self.warmup!r}, repeats={self.repeats!r}: expected >= 0 and >= 1")


@dataclass
class Window:
    """What one timed window measured."""
    images: int
    seconds: float
    wait_ms: np.ndarray
    step_ms: np.ndarray
    peak_gpu_mem_mb: float
    peak_gpu_mem_mb_others: float = math.nan   # DataParallel: the largest peak among the other GPUs
    restart_ms: np.ndarray = field(default_factory=lambda: np.empty(0))   # wait of the steps that began an epoch


class Trainer:
    """A plain training step: forward under optional autocast, cross-entropy, backward, SGD.

    `step` (see STEPS): "eager" runs it as written; "graph" captures the whole step (forward, loss,
    backward, optimizer step) into one CUDA graph on the first call and replays it on every call,
    copying each batch into the graph's static inputs; "compile" does the same around
    `torch.compile(model)`. Before capture, WARMUP_BEFORE_CAPTURE eager steps run on a side stream
    (cuDNN autotuning, optimizer state, compilation), then the weights, buffers and momentum are
    put back as they were, so a captured step trains exactly as many steps as an eager one. The
    capture uses `capture_error_mode="thread_local"` (pipeline threads keep running) and autocast
    without its weight cache (`cache_enabled=False`, as capture requires). Every later batch must
    have the first one's shape and dtype (ValueError otherwise). `step_refusal` says what a captured
    step refuses: no CUDA, DataParallel / DDP, float16's GradScaler.
    `parallel`: "ddp" wraps the model in DistributedDataParallel (a torchrun job, one process per
    device), "dp" in DataParallel (one process, the batch scattered over all visible GPUs).
    `precision`: float32 (no autocast), bfloat16 or float16 autocast (float16 with a GradScaler,
    as its underflowing gradients need). `accumulate` = k splits each batch into k micro-batches,
    back-propagates each with loss / k and takes one optimizer step: the gradient of the whole
    batch (exactly, for a model without batch statistics), at about 1/k of its activation memory.
    On CUDA it turns on cuDNN autotuning (`cudnn.benchmark`), as most training scripts do, except
    under DataParallel: its replicas run in new threads every step and cuDNN's autotuning cache is
    per thread, so every step autotuned again (ResNet-18, 2 x H200, 2026-11-22: 1.3k img/s with
    benchmark on, 16.5k off). `loss` holds the last step's loss (a device tensor)."""

    def __init__(self, model: str, device: torch.device, precision: str, channels_last: bool,
                 accumulate: int = 1, parallel: str = "none", step: str = "eager"):
        if precision not in PRECISIONS:
            raise ValueError(f"precision={precision!r}: expected one of {PRECISIONS}")
        if accumulate < 1:
            raise ValueError(f"accumulate={accumulate!r}: expected >= 1")
        refusal = step_refusal(step, device, precision, parallel)
        if refusal:
            raise ValueError(refusal)
        torch.backends.cudnn.benchmark = device.type == "cuda" and parallel != "dp"
        self.model = build_model(model).to(device)
        if channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.devices = [device]   # every device the step runs on, `device` first
        if parallel == "ddp":   # gradients all-reduced across the torchrun job's processes
            self.model = DistributedDataParallel(self.model, device_ids=[device.index] if device.type == "cuda" else None)
        elif parallel == "dp":   # one process scatters each batch over every visible GPU
            if device.type != "cuda":
                raise ValueError("parallel='dp' (DataParallel) needs CUDA devices")
            main = device.index if device.index is not None else torch.cuda.current_device()
            ids = [main, *(i for i in range(torch.cuda.device_count()) if i != main)]
            self.model = torch.nn.DataParallel(self.model, device_ids=ids)
            self.devices = [torch.device("cuda", i) for i in ids]
        self.forward = torch.compile(self.model) if step == "compile" else self.model
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9,
                                         nesterov=True, weight_decay=5e-4)
        self.autocast = torch.autocast(device.type, dtype=getattr(torch, precision),
                                       enabled=precision != "float32", cache_enabled=step == "eager")
        self.scaler = torch.amp.GradScaler(device.type, enabled=precision == "float16")
        self.accumulate = accumulate
        self.step = step
        self.device = device
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static: tuple[torch.Tensor, torch.Tensor] | None = None
        self.loss: torch.Tensor | None = None

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        if self.step == "eager":
            self.optimizer.zero_grad(set_to_none=True)
            self._update(images, labels)
            return
        if self.graph is None:
            self._capture(images, labels)
        static_images, static_labels = self.static
        if images.shape != static_images.shape or images.dtype != static_images.dtype \
                or labels.shape != static_labels.shape:
            raise ValueError(f"step={self.step!r}: a batch of {tuple(images.shape)} {images.dtype}, but the "
                             f"step was captured for {tuple(static_images.shape)} {static_images.dtype} "
                             "(a captured step needs one batch shape: last_batch='drop')")
        static_images.copy_(images, non_blocking=True)
        static_labels.copy_(labels, non_blocking=True)
        self.graph.replay()

    def _capture(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        """Warm up on a side stream, restore the state, capture one whole step (module docstring)."""
        self.static = (images.clone(), labels.clone())   # clone keeps the memory format
        saved = {k: v.clone() for k, v in self.model.state_dict().items()}
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP_BEFORE_CAPTURE):
                self.optimizer.zero_grad(set_to_none=True)
                self._update(*self.static)
        torch.cuda.current_stream(self.device).wait_stream(side)
        with torch.no_grad():   # undo the warm-up: same weights, buffers, and momentum as at the start
            for k, v in self.model.state_dict().items():
                v.copy_(saved[k])
            for state in self.optimizer.state.values():
                state["momentum_buffer"].zero_()   # SGD's first step sets it to the gradient: same as zero
        self.optimizer.zero_grad(set_to_none=True)   # backward in the graph writes fresh gradients
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            self._update(*self.static)

    def _update(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        """Backward of the batch (micro-batch by micro-batch) and one optimizer step; gradients
        start empty (zeroed by the caller)."""
        if self.accumulate == 1:
            self._backward(images, labels, 1.0)
        else:
            chunks = list(zip(images.chunk(self.accumulate), labels.chunk(self.accumulate)))
            for i, (x, y) in enumerate(chunks):
                last = i == len(chunks) - 1   # DDP: all-reduce the summed gradients once, at the end
                with self.model.no_sync() if isinstance(self.model, DistributedDataParallel) and not last \
                        else contextlib.nullcontext():
                    self._backward(x, y, len(y) / len(labels))
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def _backward(self, images: torch.Tensor, labels: torch.Tensor, weight: float) -> None:
        with self.autocast:
            loss = F.cross_entropy(self.forward(images), labels)
        self.scaler.scale(loss if weight == 1.0 else loss * weight).backward()
        self.loss = loss.detach()


class Touch:
    """Loader-only consumer: two tiny kernels per batch that depend on the batch's data."""

    def __init__(self, device: torch.device):
        self.acc = torch.zeros((), device=device)

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        self.acc.add_(images[-1, -1, -1, -1])
        self.acc.add_(labels[-1])


class endless:
    """The pipeline's batches (or what `one_epoch()` yields) epoch after epoch, calling
    `set_epoch` before each; `epoch` is the epoch of the last batch handed out, so a timer can
    tell the steps that restarted an epoch (a new iterator: workers, shuffle, first batch)."""

    def __init__(self, pipeline: pipelines.Pipeline, one_epoch: Callable[[], Iterator] | None = None):
        self.pipeline, self.one_epoch = pipeline, one_epoch or pipeline.__iter__
        self.epoch, self.current, self.count = -1, None, 0

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            if self.current is None:
                self.epoch += 1
                self.pipeline.set_epoch(self.epoch)
                self.current, self.count = iter(self.one_epoch()), 0
            try:
                batch = next(self.current)
            except StopIteration:
                if self.count == 0:
                    raise ValueError("the pipeline yields no batch: batch_size is larger than the samples "
                                     "with last_batch='drop'") from None
                self.current = None
                continue
            self.count += 1
            return batch


def synthetic_batches(config: PipelineConfig, device: torch.device):
    """The same on-device batch forever (model-only mode)."""
    g = torch.Generator(device="cpu").manual_seed(config.seed)
    images = torch.randn(config.batch_size, CHANNELS, config.image_size, config.image_size, generator=g)
    labels = torch.randint(0, NUM_CLASSES, (config.batch_size,), generator=g)
    fmt = torch.channels_last if config.channels_last else torch.contiguous_format
    images = images.to(device, getattr(torch, config.dtype)).contiguous(memory_format=fmt)
    labels = labels.to(device)
    while True:
        yield images, labels


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def release(device: torch.device) -> None:
    """Free what dropped objects still hold: Python garbage, then the CUDA caching allocator's cache."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def time_window(batches: Iterator, step: Callable, steps: int, device: torch.device,
                others: tuple[torch.device, ...] = ()) -> Window:
    """Run `steps` steps as one synchronized window (see the module docstring for what it
    includes); under torch.distributed every rank starts it after a barrier. `others`: further
    GPUs whose peak memory the window records (DataParallel)."""
    cuda = device.type == "cuda"
    if cuda:
        for d in (device, *others):
            torch.cuda.reset_peak_memory_stats(d)
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    distributed.barrier()
    host_marks = np.empty(steps + 1)
    wait = np.empty(steps)
    restarts = np.zeros(steps, dtype=bool)
    images = 0
    sync(device)
    start = time.perf_counter()
    host_marks[0] = start
    if cuda:
        marks[0].record()
    for i in range(steps):
        epoch = getattr(batches, "epoch", None)
        t0 = time.perf_counter()
        x, y = next(batches)
        wait[i] = time.perf_counter() - t0
        restarts[i] = epoch is not None and batches.epoch != epoch
        step(x, y)
        images += len(y)
        if cuda:
            marks[i + 1].record()
        host_marks[i + 1] = time.perf_counter()
    sync(device)
    seconds = time.perf_counter() - start
    if cuda:
        step_ms = np.array([marks[i].elapsed_time(marks[i + 1]) for i in range(steps)])
        peak = torch.cuda.max_memory_allocated(device) / 2**20
    else:
        step_ms = np.diff(host_marks) * 1e3
        peak = math.nan
    other = max((torch.cuda.max_memory_allocated(d) / 2**20 for d in others), default=math.nan)
    return Window(images, seconds, wait * 1e3, step_ms, peak, other, wait[restarts] * 1e3)


def stage_workload(spec: RunSpec, pipeline: pipelines.Pipeline, device: torch.device):
    """(batches, step, facts) that run one stage of `pipeline` alone; see the module docstring."""
    stages = pipeline.stages()
    payload = stages.payload
    facts = {"copy": stages.copy, "batch_bytes": sum(t.nbytes for t in payload)}
    n = len(pipeline.batches()[0])
    fixed = itertools.repeat((None, range(n)))   # time_window counts len(labels) images per step
    name = spec.stage
    if name == "host":
        if stages.host is None:
            raise NotApplicable(f"{spec.pipeline}: no host-side work per step")
        return endless(pipeline, stages.host), lambda x, y: None, facts
    if name == "device":
        return fixed, lambda x, y: stages.device(), facts
    if device.type != "cuda" or not payload:
        raise NotApplicable(f"{spec.pipeline}: no host-to-device copy per step" if device.type == "cuda"
                            else "no CUDA device: nothing is copied or pinned")
    if name == "pin":
        if not stages.pins:
            raise NotApplicable(f"{spec.pipeline}: does not pin each batch")
        return fixed, lambda x, y: [t.pin_memory() for t in payload], facts
    if name == "h2d-pageable":
        pageable = [torch.empty(t.shape, dtype=t.dtype).copy_(t) for t in payload]
        return fixed, lambda x, y: [t.to(device) for t in pageable], facts
    pinned = [t.pin_memory() for t in payload]
    return fixed, lambda x, y: [t.to(device, non_blocking=True) for t in pinned], facts


def run(spec: RunSpec) -> Iterator[tuple[dict, Window]]:
    """Measure one spec, yielding (facts about the run, Window) after each repeat so the caller
    can persist rows as they come. The pipeline is closed however the generator ends."""
    config = spec.config
    device = pipelines.base.resolve_device(config.device)
    facts: dict[str, object] = {"device": str(device)}
    pipeline = None
    try:
        if spec.mode == "model":
            batches = synthetic_batches(config, device)
            facts["data_source"] = "synthetic-batch"
            unit = MODEL_BLOCK if spec.min_seconds else 100
        else:
            t0 = time.perf_counter()
            pipeline = pipelines.build(spec.pipeline, config)
            facts["setup_s"] = time.perf_counter() - t0
            samples = shard_size(len(pipeline.data), config)
            if config.batch_size > samples:   # a batch no step could have: refuse, or record what ran
                if config.last_batch == "drop":
                    raise ValueError(f"batch_size={config.batch_size} is larger than the {samples} samples per epoch "
                                     "with last_batch='drop': no step would run (use a smaller batch or 'partial')")
                facts["batch_size"] = samples
            facts.update(data_source=pipeline.data.source, steps_per_epoch=len(pipeline), samples=samples,
                         **pipeline.info)
            batches = endless(pipeline)
            unit = len(pipeline)
        if spec.mode == "stage":
            batches, step, stage_facts = stage_workload(spec, pipeline, device)
            facts.update(stage_facts)
        elif spec.mode == "loader":
            step = Touch(device)
        else:
            step = Trainer(spec.model, device, config.dtype, config.channels_last, parallel=spec.parallel,
                           step=spec.step)
            batch = next(batches)
            sync(device)
            t0 = time.perf_counter()
            step(*batch)   # compilation, warm-up and capture happen here, outside every window
            sync(device)
            facts["compile_s"] = time.perf_counter() - t0
        others = tuple(step.devices[1:]) if spec.parallel == "dp" else ()
        facts["gpus"] = (1 + len(others)) * config.world_size if device.type == "cuda" else 0
        for _ in range(spec.warmup):
            step(*next(batches))
        steps = spec.steps or unit
        if spec.steps is None and spec.min_seconds:   # an untimed window sizes the timed ones
            probe = time_window(batches, step, unit, device, others).seconds
            longest = distributed.gather(probe)   # every rank must run the same number of steps
            steps = unit * max(1, math.ceil(WINDOW_MARGIN * spec.min_seconds / max(longest)))
        for _ in range(spec.repeats):
            yield facts, time_window(batches, step, steps, device, others)
    finally:
        if pipeline is not None:
            pipeline.close()
