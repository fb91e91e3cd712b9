"""The training step the harness times (`Trainer`): forward, cross-entropy, backward and SGD,
one model on one GPU, or replicated (DDP, DataParallel).

The training step (`RunSpec.step`, `Trainer(step=...)`), as fast models are trained today:
  - eager:   the step as written, one kernel launch at a time from Python;
  - graph:   forward, loss, backward and the optimizer step captured once into one CUDA graph
             (`torch.cuda.graph`) and replayed; each batch is copied into the graph's static input;
  - compile: `torch.compile` of the model (default mode, compiled in this process: no pool of
             compile worker processes, which would take cores inside the timed windows), then the
             same whole-step capture.
Under DistributedDataParallel the captured steps hold the gradient all-reduce too (NCCL captures its
collectives), as PyTorch's CUDA graphs notes prescribe for a full capture: DDP built on a side
stream, 11 eager DDP steps on it before the capture and the capture on it too; compiled, the DDP model is compiled (dynamo's
DDP optimizer splits the graph at the gradient buckets, so the all-reduce overlaps backward).
The first training step of model, e2e and train configs runs alone, synchronized, before the
warm-up and is recorded as `compile_s`: for graph / compile it includes the side-stream warm-up
steps, compilation and capture; for eager it is one step with cuDNN autotuning.
"""
from __future__ import annotations

import contextlib
import itertools
from typing import Callable

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import pipelines
from pipelines.kernels import compile_in_process

from .models import build_model

PRECISIONS = ("float32", "bfloat16", "float16")   # Trainer: no autocast, or autocast to this dtype
STEPS = ("eager", "graph", "compile")   # Trainer: how the training step runs (module docstring)
WARMUP_BEFORE_CAPTURE = 3   # eager steps on a side stream before capture (cuDNN autotuning, optimizer state)
DDP_WARMUP_BEFORE_CAPTURE = 11   # under DDP: PyTorch's CUDA graphs notes ask for 11 eager DDP steps first


def step_refusal(step: str, device: torch.device, precision: str = "bfloat16", parallel: str = "none",
                 last_batch: str = "drop") -> str | None:
    """Why `step` cannot train here (None if it can): a captured step needs CUDA, one process per GPU
    (alone or under DDP, not DataParallel), no GradScaler and one batch shape."""
    if step not in STEPS:
        return f"step={step!r}: expected one of {STEPS}"
    if step == "eager":
        return None
    if device.type != "cuda":
        return f"step={step!r} captures the training step in a CUDA graph: needs a CUDA device"
    if parallel == "dp":
        return (f"step={step!r} with parallel='dp': a captured step runs one model per process; DataParallel "
                "replicates it in threads every step (use DDP under torchrun, or step='eager')")
    if precision == "float16":
        return (f"step={step!r} with float16: the GradScaler's inf check reads back to the host, which a "
                "CUDA graph cannot capture (use bfloat16 or step='eager')")
    if last_batch == "partial":
        return (f"step={step!r} with last_batch='partial': a captured step has one batch shape "
                "(use last_batch='drop' or step='eager')")
    return None


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
    step refuses: no CUDA, DataParallel, float16's GradScaler. Under DDP the capture holds the
    all-reduce (module docstring).
    `parallel`: "ddp" wraps the model in DistributedDataParallel (a torchrun job, one process per
    device), "dp" in DataParallel (one process, the batch scattered over all visible GPUs).
    `precision`: float32 (no autocast), bfloat16 or float16 autocast (float16 with a GradScaler,
    as its underflowing gradients need). `accumulate` = k splits each batch into k micro-batches,
    back-propagates each with loss / k and takes one optimizer step: the gradient of the whole
    batch (exactly, for a model without batch statistics), at about 1/k of its activation memory.
    On CUDA it turns on cuDNN autotuning (`cudnn.benchmark`), as most training scripts do, except
    under DataParallel: its replicas run in new threads every step and cuDNN's autotuning cache is
    per thread, so every step autotuned again, many times slower
    (results/2026-11-22-h200-multi-gpu/x2/dp-probe.txt). `loss` holds the last step's loss (a device tensor)."""

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
        self.side = None   # under DDP with a captured step: the stream DDP is built on and the warm-up runs on
        if parallel == "ddp":   # gradients all-reduced across the torchrun job's processes
            self.side = torch.cuda.Stream(device) if step != "eager" else None
            with torch.cuda.stream(self.side) if self.side is not None else contextlib.nullcontext():
                self.model = DistributedDataParallel(self.model,
                                                     device_ids=[device.index] if device.type == "cuda" else None)
        elif parallel == "dp":   # one process scatters each batch over every visible GPU
            if device.type != "cuda":
                raise ValueError("parallel='dp' (DataParallel) needs CUDA devices")
            main = device.index if device.index is not None else torch.cuda.current_device()
            ids = [main, *(i for i in range(torch.cuda.device_count()) if i != main)]
            self.model = torch.nn.DataParallel(self.model, device_ids=ids)
            self.devices = [torch.device("cuda", i) for i in ids]
        self.forward = compile_in_process(self.model) if step == "compile" else self.model
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
        side = self.side if self.side is not None else torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        ddp = isinstance(self.model, DistributedDataParallel)
        with torch.cuda.stream(side):
            for _ in range(DDP_WARMUP_BEFORE_CAPTURE if ddp else WARMUP_BEFORE_CAPTURE):
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
        # under DDP the capture runs on the stream DDP was built on: its reducer keeps the gradient
        # accumulators of that stream, and a capture on torch.cuda.graph's own stream trained other
        # weights than eager DDP (tests/test_distributed.py, 2 H100s, torch 2.11)
        with torch.cuda.graph(self.graph, stream=self.side, capture_error_mode="thread_local"):
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


def evaluate(model: torch.nn.Module, pipeline: pipelines.Pipeline, precision: str) -> float:
    """Top-1 accuracy of `model` (eval mode, no gradient, autocast to `precision`) on one epoch."""
    device = pipeline.device
    autocast = torch.autocast(device.type, dtype=getattr(torch, precision), enabled=precision != "float32")
    correct = total = 0
    model.eval()
    with torch.no_grad(), autocast:
        for images, labels in pipeline:
            correct += (model(images).argmax(1) == labels).sum()
            total += len(labels)
    model.train()
    return float(correct) / total


def reading(trainer: Trainer, every: int) -> Callable:
    """The training step that also reads the loss on the host every `every` steps (0: never), as a
    loop that logs its loss does: each read waits for the GPU's queue to drain."""
    if not every:
        return trainer
    count = itertools.count(1)

    def step(images: torch.Tensor, labels: torch.Tensor) -> None:
        trainer(images, labels)
        if next(count) % every == 0:
            trainer.loss.item()
    return step
