"""The claims framework: what a claim is, its rows, its verdict, and running claims.

A `Claim` holds the advice as commonly stated, where it is stated, what the experiment does, a
`measure` function that returns tidy rows (setting, level, metric, value, unit, repeat) and a
`judge` that turns those rows into a verdict (holds / does not hold / depends on X) quoting the
numbers it rests on. `run` measures claims and turns a failure into a row. Shared timing helpers
for the copy experiments live here too.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import pandas as pd
import torch

from pipelines.config import PipelineConfig

from ..measuring import harness, machine
from ..results import ENV_COLUMNS


COLUMNS = ["run_id", "timestamp", "claim", "setting", "level", "metric", "value", "unit", "repeat",
           "note", "status", "error", "device", *ENV_COLUMNS]


@dataclass(frozen=True)
class Scale:
    """How big each experiment is. The defaults are the reference (GPU) sizes; `tiny()` runs every
    experiment in seconds on a CPU (tests, smoke runs) with numbers that mean little."""
    copy_mb: tuple[float, ...] = (1.5, 6.0, 96.0, 384.0)   # a bs-512 uint8 / float32 CIFAR batch, larger
    copy_repeats: int = 20
    d2h_mb: float = 16.0
    d2h_trials: int = 20
    exchange: tuple[tuple[int, int], ...] = ((64, 0), (1024, 6))   # (batch, workers) of claim 5
    cpu_work_s: float = 0.1
    exchange_samples: int | None = None    # None: the whole train split (one epoch per window)
    workers: tuple[int, ...] | None = None  # None: 1 .. 2 x cores
    loader_batch: int = 512
    loader_steps: int = 40
    model: str = "resnet18"
    train_batch: int = 512
    oom_batch: int = 1024
    accumulate: tuple[int, ...] = (2, 4)
    train_steps: int = 30
    warmup: int = 10
    repeats: int = 3
    fast_model: str = "resnet9-w0.25"   # claim 10: a model whose captured step is fast
    fast_pipelines: tuple[str, ...] = ("dataloader", "dali", "dali-raw", "prefetch", "resident")
    fast_steps: int = 100

    @classmethod
    def tiny(cls) -> "Scale":
        return cls(copy_mb=(0.25, 1.0), copy_repeats=3, d2h_mb=1.0, d2h_trials=3,
                   exchange=((16, 0), (64, 2)), cpu_work_s=0.002, exchange_samples=256,
                   workers=(1, 2, 3), loader_batch=32, loader_steps=3, model="resnet9-w0.25",
                   train_batch=16, oom_batch=16, train_steps=2, warmup=1, repeats=2,
                   fast_pipelines=("dataloader", "resident"), fast_steps=2)


@dataclass(frozen=True)
class Context:
    device: torch.device
    config: PipelineConfig   # data source and seed; experiments replace what they vary
    scale: Scale


@dataclass(frozen=True)
class Verdict:
    verdict: str   # holds / does not hold / depends on ... / not measured
    detail: str    # the numbers it rests on


@dataclass(frozen=True)
class Claim:
    key: str
    statement: str
    source: str
    experiment: str
    needs_cuda: bool
    measure: Callable[[Context], list[dict]]
    judge: Callable[[pd.DataFrame], Verdict]


def row(setting: str, metric: str, value: float, unit: str, repeat: int = 0, level: float | None = None,
        note: str = "") -> dict:
    return {"setting": setting, "level": level, "metric": metric, "value": float(value), "unit": unit,
            "repeat": repeat, "note": note}


def median(df: pd.DataFrame, setting: str, metric: str, level: float | None = None) -> float:
    pick = (df.setting == setting) & (df.metric == metric)
    if level is not None:
        pick &= df.level == level
    values = pd.to_numeric(df[pick].value, errors="coerce").dropna()
    return float(values.median()) if len(values) else math.nan


def combine(results: dict[str, bool], knob: str) -> str:
    """One verdict from the claim's truth at each level of `knob`."""
    if not results:
        return "not measured"
    if all(results.values()):
        return "holds"
    if not any(results.values()):
        return "does not hold"
    return f"depends on {knob}"


def explaining(results: dict[tuple, bool], names: tuple[str, ...]) -> str:
    """The name of the first key part that alone decides `results` (keys are tuples with one part
    per name), or all the names joined."""
    for i, name in enumerate(names):
        truth: dict = {}
        if all(truth.setdefault(key[i], value) == value for key, value in results.items()):
            return name
    return ", ".join(names)


def _call_and_done(fn: Callable[[], object], device: torch.device) -> tuple[float, float, float]:
    """From an idle device: (ms until `fn()` returned on the host, ms the device spent on what it
    queued (CUDA events around the call), ms until a synchronize after it returned)."""
    harness.sync(device)
    start_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start = time.perf_counter()
    start_event.record()
    fn()
    returned = time.perf_counter()
    end_event.record()
    harness.sync(device)
    done = time.perf_counter()
    return (returned - start) * 1e3, start_event.elapsed_time(end_event), (done - start) * 1e3


def spin(ms: float) -> None:
    """CPU work that holds the interpreter for `ms` (a busy loop, as Python-side work does)."""
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def _host_buffer(mb: float, pinned: bool) -> torch.Tensor:
    """Random bytes (never zeros) in pageable or pinned host memory."""
    t = torch.randint(0, 256, (int(mb * 2**20),), dtype=torch.uint8)
    return t.pin_memory() if pinned else t


def _mb(level: float) -> str:
    return f"{level:g} MB"


def run(claims: list[Claim], ctx: Context, write: Callable[[dict], None], progress=None) -> None:
    """Measure each claim, passing its rows to `write` as soon as it finishes; a claim that fails
    or cannot run here becomes one row with its status and reason, and the others go on."""
    for claim in claims:
        if progress is not None:
            progress.set_description(claim.key)
        base = {"claim": claim.key, "device": str(ctx.device)}
        if claim.needs_cuda and ctx.device.type != "cuda":
            write({**base, "status": "skipped", "error": "needs a CUDA device"})
        else:
            try:
                for r in claim.measure(ctx):
                    write({**base, **r, "status": "ok", "error": ""})
            except Exception as e:
                write({**base, "status": "error", "error": f"{type(e).__name__}: {e}"})
            finally:
                machine.release(ctx.device)
        if progress is not None:
            progress.update(1)
