"""What one measurement is and what one window of it measured, apart from the harness that runs it.

`RunSpec` is one measured configuration (a pipeline in a mode, on a model, with its settings), checked
when it is made; `Window` is what one timed window measured; `MODES`, `STAGES`, `COPIES`, `PAYLOADS`,
`PARALLEL` and `BUSY_MS` are the values they take. The harness (`bench.measuring.harness`, which says what each
mode times), what a window iterates (`bench.measuring.workloads`), the results' rows (`bench.results`), the plans
and the command line all read these; they live in a module of their own so that none of those imports
another only for them (the harness and its workloads once imported each other for `RunSpec`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from pipelines.config import PipelineConfig

from .training import STEPS, step_refusal

MODES = ("loader", "model", "e2e", "train", "stage", "copy")
STAGES = ("host", "pin", "h2d-pageable", "h2d-pinned", "device")
COPIES = ("h2d-pinned", "h2d-pageable")   # copy mode: from pinned or pageable memory
PAYLOADS = ("uint8", "float32")           # copy mode: what one image is copied as
BUSY_MS = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0)  # loader mode on CUDA: the headspace curve's step times (ms per batch)
PARALLEL = ("none", "ddp", "dp")   # RunSpec: one GPU, DistributedDataParallel, DataParallel


@dataclass(frozen=True)
class RunSpec:
    """One measured configuration: a pipeline (or none, for model-only and copy) in one mode."""
    pipeline: str
    mode: str
    model: str
    config: PipelineConfig = field(default_factory=PipelineConfig)
    requested_steps: int | None = None   # timed steps per window; None = one epoch (or sized by min_window_s)
    warmup: int = 10
    repeats: int = 3
    stage: str = ""            # stage mode: one of STAGES; copy mode: one of COPIES
    parallel: str = "none"     # model replicas: none, ddp (one process per GPU), dp (DataParallel)
    step: str = "eager"        # model, e2e, train: the training step's kind, one of STEPS
    min_window_s: float = 0.0   # requested_steps=None: windows lasting at least this (`bench.measuring.harness`'s docstring)
    busy_levels: tuple[float, ...] = (0.0,)   # loader mode: the consumer's synthetic step per batch, per window
    cpus: int | None = None    # CPU cores the configuration runs on (None: all this process may use)
    payload: str = ""          # copy mode: one of PAYLOADS
    train_epochs: int = 0      # train mode: epochs trained
    sync_every: int = 0        # model, e2e: read the loss on the host every N steps (0: never)
    process: int = 0           # which of the configuration's independent processes (not its identity)
    more: tuple = ()           # (name, value) of the declared settings no field holds (`bench.results.settings.carried`)
    share: bool = field(default=False, compare=False)   # model, e2e, copy: may share a process with the rest
                                                         # of its cell (`Shared`); not its identity

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode!r}: expected one of {MODES}")
        plain = self.mode in ("loader", "stage", "copy")
        if plain != (self.model == "none"):
            raise ValueError(f"mode={self.mode!r} with model={self.model!r}: loader, stage and copy modes run "
                             "model 'none', the other modes need a model")
        if (self.mode in ("model", "copy")) != (self.pipeline == "none"):
            raise ValueError(f"mode={self.mode!r} with pipeline={self.pipeline!r}: model and copy modes run "
                             "pipeline 'none', the other modes need a pipeline")
        stages = STAGES if self.mode == "stage" else COPIES if self.mode == "copy" else ("",)
        if self.stage not in stages:
            raise ValueError(f"mode={self.mode!r} with stage={self.stage!r}: expected one of {stages}")
        if (self.mode == "copy") != (self.payload in PAYLOADS):
            raise ValueError(f"mode={self.mode!r} with payload={self.payload!r}: copy mode needs one of "
                             f"{PAYLOADS}, the other modes none")
        if (self.mode == "train") != (self.train_epochs >= 1):
            raise ValueError(f"mode={self.mode!r} with train_epochs={self.train_epochs!r}: train mode needs "
                             "train_epochs >= 1, the other modes none")
        if self.mode == "train" and (self.repeats != 1 or self.parallel != "none"):
            raise ValueError("train mode runs once per process (repeats=1) on one device (parallel='none')")
        if (not self.busy_levels or any(not math.isfinite(b) or b < 0 for b in self.busy_levels)
                or (self.mode != "loader" and self.busy_levels != (0.0,))):
            raise ValueError(f"busy_levels={self.busy_levels!r}: loader mode takes finite ms >= 0 per batch, the other "
                             "modes (0.0,)")
        if self.requested_steps is not None and self.requested_steps < 1:
            raise ValueError(f"requested_steps={self.requested_steps!r}: expected None (one epoch) or >= 1")
        if self.parallel not in PARALLEL:
            raise ValueError(f"parallel={self.parallel!r}: expected one of {PARALLEL}")
        if self.parallel != "none" and self.mode not in ("model", "e2e"):
            raise ValueError(f"parallel={self.parallel!r} with mode={self.mode!r}: only model and e2e train replicas")
        if self.mode in ("model", "e2e") and (self.parallel == "ddp") != (self.config.world_size > 1):
            raise ValueError(f"parallel={self.parallel!r} with world_size={self.config.world_size}: "
                             "ddp is the mode of a torchrun job of more than one process")
        if self.step not in STEPS:
            raise ValueError(f"step={self.step!r}: expected one of {STEPS}")
        if self.step != "eager" and self.mode not in ("model", "e2e", "train"):
            raise ValueError(f"step={self.step!r} with mode={self.mode!r}: only model, e2e and train train")
        if self.step != "eager" and self.mode in ("e2e", "train") and self.config.last_batch == "partial":
            raise ValueError(step_refusal(self.step, torch.device("cuda"), last_batch="partial"))
        if (not math.isfinite(self.min_window_s) or self.min_window_s < 0
                or (self.min_window_s and self.requested_steps is not None)):
            raise ValueError(f"min_window_s={self.min_window_s!r}: expected >= 0, and only with requested_steps=None")
        if self.warmup < 0 or self.repeats < 1:
            raise ValueError(f"warmup={self.warmup!r}, repeats={self.repeats!r}: expected >= 0 and >= 1")
        if self.sync_every < 0 or (self.sync_every and self.mode not in ("model", "e2e")):
            raise ValueError(f"sync_every={self.sync_every!r}: model and e2e take N >= 0 (read the loss every N "
                             "steps), the other modes 0")
        if self.share and (self.mode not in ("model", "e2e", "copy") or self.parallel == "dp"):
            raise ValueError(f"share=True with mode={self.mode!r}, parallel={self.parallel!r}: only model-only, e2e "
                             "and copy configurations of one GPU or of DDP ranks share a process")
        if self.cpus is not None and self.cpus < 1 or self.process < 0:
            raise ValueError(f"cpus={self.cpus!r}, process={self.process!r}: expected None or >= 1, and >= 0")


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
    steady_img_per_s: float = math.nan   # the rate without the steps that began an epoch (GPU timeline)
    cpu_s: float = math.nan      # CPU seconds the process tree burned during the window
    train_cpu_s: float = math.nan   # the training thread's (the one that ran the window), to the ns
    next_cpu_s: float = math.nan    # of those, the part spent inside next(): booked to the pipeline
    gpu: dict = field(default_factory=dict)   # NVML readings at the window's end (GpuMonitor.sample)
    busy_ms: float = 0.0         # loader mode: the consumer's synthetic step per batch (its label)
    busy_units: float = math.nan     # loader mode: that step's work units, the same in every window (nan: a host sleep)
    busy_idle_ms: float = math.nan   # loader mode: their time on an idle GPU (the label on a host sleep)
    busy_null_ms: float = math.nan   # loader mode: its time per batch beside a null pipeline (host clock, `busy.beside_null`)
    busy_step_ms: float = math.nan   # loader mode: that step's measured time beside the pipeline (mean over the window)
    busy_stretch: float = math.nan   # loader mode: busy_step_ms / busy_idle_ms, the pipeline's contention cost
    rejected: str = ""           # why the window cannot count ('' if it can): `bench.measuring.busy.rejection`
    drain_steps: int = 0         # batches the drain before it took (`bench.measuring.drain.drain`)
    drain_s: float = 0.0         # the drain's seconds (untimed: outside the window)
    drain_handover_ms: float = math.nan   # the drain's quickest next(): a ready batch's handover
    ready_at_start: float = math.nan   # batches ready when it began (`bench.measuring.drain.ready_at_start`); nan: not drained
    test_accuracy: float = math.nan   # train mode
