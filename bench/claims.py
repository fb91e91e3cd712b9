"""`pipebench claims`: the common advice on feeding a GPU, each claim settled by one small experiment.

A `Claim` holds the advice as commonly stated, where it is stated, what the experiment does, a
`measure` function that returns tidy rows (setting, level, metric, value, unit, repeat) and a
`judge` that turns those rows into a verdict (holds / does not hold / depends on X) quoting the
numbers it rests on. Verdicts are generated from the rows alone, so CLAIMS.md can be rebuilt from
claims.csv. Claims about CUDA behaviour are skipped on a machine without a GPU, with the reason.

Timers (each claim's `experiment` text repeats what its timer includes):
  - copies: host clock around the call (`call_ms`), CUDA events around it (`copy_ms`, the device
    time of what it queued) and host clock until a synchronize after it returns (`done_ms`), the
    device idle before each repeat; warm-up calls first;
  - loops (DataLoader, collate, pipelines, training): the harness's synchronized windows
    (`harness.time_window`) after untimed warm-up steps; peak memory is the caching allocator's
    peak within the window (`max_memory_allocated` / `max_memory_reserved`).
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd
import torch

import pipelines
from pipelines.config import PipelineConfig

from . import harness
from .results import ENV_COLUMNS

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


# ---------------------------------------------------------------------------------------------
# 1. pageable .to() blocks

PAGEABLE_TO = "pageable .to(device)"
COPY_METRICS = ("call_ms", "copy_ms", "done_ms")   # _call_and_done's three times


def measure_pageable_blocks(ctx: Context) -> list[dict]:
    rows = []
    for mb in ctx.scale.copy_mb:
        src = _host_buffer(mb, pinned=False)
        for _ in range(ctx.scale.warmup):
            src.to(ctx.device)
        for r in range(ctx.scale.copy_repeats):
            times = _call_and_done(lambda: src.to(ctx.device), ctx.device)
            rows += [row(PAGEABLE_TO, m, t, "ms", r, mb) for m, t in zip(COPY_METRICS, times)]
    return rows


def judge_pageable_blocks(df: pd.DataFrame) -> Verdict:
    blocks, parts = {}, []
    for mb in sorted(df.level.dropna().unique()):
        call, copy = median(df, PAGEABLE_TO, "call_ms", mb), median(df, PAGEABLE_TO, "copy_ms", mb)
        blocks[mb] = call >= 0.95 * copy
        parts.append(f"{_mb(mb)}: the call took {call:.3g} ms, the copy {copy:.3g} ms on the device")
    return Verdict(combine(blocks, "size"), "counted as blocking where the call lasts ≥ 95% of the copy's "
                   "device time; " + "; ".join(parts) + ".")


# ---------------------------------------------------------------------------------------------
# 2. non_blocking: no overlap from pageable memory, overlap from pinned

NB_SOURCES = {"pageable": False, "pinned": True}


def measure_non_blocking(ctx: Context) -> list[dict]:
    rows = []
    for mb in ctx.scale.copy_mb:
        for kind, pinned in NB_SOURCES.items():
            setting = f"{kind}, non_blocking=True"
            src = _host_buffer(mb, pinned)
            copy = lambda: src.to(ctx.device, non_blocking=True)   # noqa: E731
            for _ in range(ctx.scale.warmup):
                copy()
            copy_ms = []
            for r in range(ctx.scale.copy_repeats):
                times = _call_and_done(copy, ctx.device)
                copy_ms.append(times[1])
                rows += [row(setting, m, t, "ms", r, mb) for m, t in zip(COPY_METRICS, times)]
            work = float(pd.Series(copy_ms).median())   # as much CPU work as the copy's device time
            for r in range(ctx.scale.copy_repeats):
                *_, total = _call_and_done(lambda: (copy(), spin(work)), ctx.device)
                rows += [row(setting, "work_ms", work, "ms", r, mb), row(setting, "with_work_ms", total, "ms", r, mb)]
    return rows


def hidden_fraction(df: pd.DataFrame, setting: str, mb: float) -> float:
    """Share of the copy that CPU work of the copy's length hid: (copy alone + work - both) / copy
    alone, each until the synchronize."""
    done, work, both = (median(df, setting, m, mb) for m in ("done_ms", "work_ms", "with_work_ms"))
    return min(1.0, max(0.0, (done + work - both) / done))


def judge_non_blocking(df: pd.DataFrame) -> Verdict:
    holds, parts = {}, []
    for mb in sorted(df.level.dropna().unique()):
        facts = {}
        for kind in NB_SOURCES:
            setting = f"{kind}, non_blocking=True"
            call, copy = median(df, setting, "call_ms", mb), median(df, setting, "copy_ms", mb)
            facts[kind] = (call / copy, hidden_fraction(df, setting, mb))
        (pg_call, pg_hidden), (pn_call, pn_hidden) = facts["pageable"], facts["pinned"]
        holds[mb] = pg_hidden < 0.25 and pn_hidden > 0.75
        parts.append(f"{_mb(mb)}: the pageable call lasted {pg_call:.0%} of the copy's device time and CPU work "
                     f"hid {pg_hidden:.0%} of the copy; pinned {pn_call:.0%} and {pn_hidden:.0%}")
    return Verdict(combine(holds, "size"), "counted as holding where CPU work as long as the copy hides "
                   "< 25% of a pageable copy and > 75% of a pinned one; " + "; ".join(parts) + ".")


# ---------------------------------------------------------------------------------------------
# 3. pin_memory() on the fly is slower than a plain .to()

PIN_VARIANTS = {
    "pageable .to(device)": (False, lambda t, d: t.to(d)),
    "t.pin_memory().to(device, non_blocking=True)": (False, lambda t, d: t.pin_memory().to(d, non_blocking=True)),
    "already pinned .to(device, non_blocking=True)": (True, lambda t, d: t.to(d, non_blocking=True)),
}


def measure_pin_on_the_fly(ctx: Context) -> list[dict]:
    rows = []
    torch.ones(1).to(ctx.device)   # CUDA context and first-copy set-up stay out of every first call
    for mb in ctx.scale.copy_mb:
        for setting, (pinned, copy) in PIN_VARIANTS.items():
            src = _host_buffer(mb, pinned)
            *_, first = _call_and_done(lambda: copy(src, ctx.device), ctx.device)   # nothing cached yet
            rows.append(row(setting, "first_done_ms", first, "ms", 0, mb))
            for _ in range(ctx.scale.warmup):
                copy(src, ctx.device)
            for r in range(ctx.scale.copy_repeats):
                *_, done = _call_and_done(lambda: copy(src, ctx.device), ctx.device)
                rows.append(row(setting, "done_ms", done, "ms", r, mb))
    return rows


def judge_pin_on_the_fly(df: pd.DataFrame) -> Verdict:
    plain, on_the_fly, pinned = PIN_VARIANTS
    repeated, first, parts = {}, {}, []
    for mb in sorted(df.level.dropna().unique()):
        a, b, c = (median(df, s, "done_ms", mb) for s in (plain, on_the_fly, pinned))
        a1, b1 = (median(df, s, "first_done_ms", mb) for s in (plain, on_the_fly))
        repeated[mb] = b > 1.05 * a
        if not math.isnan(b1 / a1):
            first[mb] = b1 > 1.05 * a1
        parts.append(f"{_mb(mb)}: repeated calls {b / a:.2f}× the plain copy's time ({b:.3g} vs {a:.3g} ms; "
                     f"from memory pinned ahead {c:.3g} ms)"
                     + ("" if math.isnan(b1 / a1) else f", first call {b1 / a1:.2f}× ({b1:.3g} vs {a1:.3g} ms)"))
    verdict = combine(repeated, "size")
    if first and combine(first, "size") != verdict:
        verdict = (f"depends on the pinned-memory cache (first call: {combine(first, 'size')}; "
                   f"repeated calls: {verdict})")
    return Verdict(verdict, "slower counted as > 5% more time to completion; " + "; ".join(parts) + ".")


# ---------------------------------------------------------------------------------------------
# 4. GPU -> CPU non_blocking without a synchronize

D2H_STATES = {"busy stream": True, "idle stream": False}


def measure_d2h_without_sync(ctx: Context) -> list[dict]:
    """A device tensor is filled with a new value each trial and copied to the host with
    non_blocking=True; the host reads it at once and again after a stream synchronize (the fix).
    'busy stream': a ~10 ms sleep kernel is queued first, as unfinished training work would be."""
    device, rows = ctx.device, []
    x = torch.empty(int(ctx.scale.d2h_mb * 2**20) // 4, device=device)
    for setting, busy in D2H_STATES.items():
        for t in range(ctx.scale.d2h_trials):
            value = float(t + 1) + 0.5 * busy   # differs from whatever the reused host block holds
            harness.sync(device)
            if busy:
                torch.cuda._sleep(20_000_000)   # clock cycles, ~10 ms
            x.fill_(value)
            out = x.to("cpu", non_blocking=True)
            before = (out == value).float().mean().item()   # racing the copy: safe to read, maybe stale
            torch.cuda.current_stream(device).synchronize()
            after = (out == value).float().mean().item()
            rows += [row(setting, "correct_before_sync", before, "fraction", t, ctx.scale.d2h_mb),
                     row(setting, "correct_after_sync", after, "fraction", t, ctx.scale.d2h_mb),
                     row(setting, "pinned_output", out.is_pinned(), "flag", t, ctx.scale.d2h_mb)]
    return rows


def judge_d2h_without_sync(df: pd.DataFrame) -> Verdict:
    def values(setting, metric):
        return df[(df.setting == setting) & (df.metric == metric)].value.astype(float)

    stale, parts = {}, []
    for setting in D2H_STATES:
        before, after = values(setting, "correct_before_sync"), values(setting, "correct_after_sync")
        if before.empty:
            continue
        stale[setting] = bool((before < 1).any())
        parts.append(f"{setting}: {int((before < 1).sum())} of {len(before)} reads before the synchronize "
                     f"were incomplete (median {before.median():.0%} of elements right), "
                     f"{int((after == 1).sum())} of {len(after)} complete after it")
    fixed = bool((df[df.metric == "correct_after_sync"].value.astype(float) == 1).all())
    pinned = df[df.metric == "pinned_output"].value.astype(float)
    verdict = combine(stale, "whether the stream is busy")
    fix = ("Fix: synchronize the stream (or an event recorded after the copy) before reading" if fixed else
           "Reads after the synchronize were wrong too: something other than the missing synchronize is broken")
    return Verdict(verdict, "; ".join(parts) + f"; the returned tensor was pinned in {pinned.mean():.0%} of "
                   f"trials. {fix}.")


# ---------------------------------------------------------------------------------------------
# 5. The DataLoader(pin_memory=True) exchange

# Quoted, not measured: the epoch times reported in the PyTorch forum thread the claim comes from.
EXCHANGE_QUOTED = {False: (6.57, 5.72), True: (7.03, 5.48)}   # pin_memory -> (case A, case B) seconds


def exchange_setting(batch: int, workers: int, cpu_work: bool, pin: bool, cpu_work_s: float) -> str:
    copy = ".to(device, non_blocking=True)" if cpu_work else ".to(device)"
    work = f", {cpu_work_s:g} s CPU work per step" if cpu_work else ""
    return f"bs {batch}, {workers} workers, {copy}{work}; pin_memory={pin}"


def measure_pin_memory_exchange(ctx: Context) -> list[dict]:
    """One epoch's worth of steps of a DataLoader with ToTensor + Normalize per sample (no
    augmentation, no model), float32 batches copied to the device; case B adds CPU work per step."""
    s, rows = ctx.scale, []
    for case, (batch, workers) in enumerate(s.exchange):
        cpu_work = case == 1
        for pin in (False, True):
            config = ctx.config.replace(batch_size=batch, num_workers=workers, pin_memory=pin,
                                        non_blocking=cpu_work, augment=False, dtype="float32",
                                        channels_last=False, last_batch="partial", max_samples=s.exchange_samples)
            setting = exchange_setting(batch, workers, cpu_work, pin, s.cpu_work_s)
            step = (lambda x, y: spin(s.cpu_work_s * 1e3)) if cpu_work else (lambda x, y: None)
            with pipelines.build("dataloader", config) as pipeline:
                batches = harness.endless(pipeline)
                for _ in range(s.warmup):
                    next(batches)
                for r in range(s.repeats):
                    w = harness.time_window(batches, step, len(pipeline), ctx.device)
                    rows += [row(setting, "epoch_s", w.seconds, "s", r, batch),
                             row(setting, "img_per_s", w.images / w.seconds, "img/s", r, batch)]
    return rows


def judge_pin_memory_exchange(df: pd.DataFrame) -> Verdict:
    cases = df[df.metric == "epoch_s"].setting.str.rsplit("; pin_memory=", n=1).str[0].unique()
    effects, parts = [], []
    for case, quoted in zip(cases, zip(*EXCHANGE_QUOTED.values())):
        plain, pinned = (median(df, f"{case}; pin_memory={p}", "epoch_s") for p in (False, True))
        change = pinned / plain - 1
        effects.append(change)
        parts.append(f"{case}: {plain:.2f} s → {pinned:.2f} s with pin_memory ({change:+.1%}; "
                     f"quoted {quoted[0]:.2f} → {quoted[1]:.2f} s, {quoted[1] / quoted[0] - 1:+.1%})")
    if len(effects) != 2:
        return Verdict("not measured", "; ".join(parts))
    slower_naive, faster_overlapped = effects[0] > 0.02, effects[1] < -0.02
    verdict = {(True, True): "holds", (False, False): "does not hold"}.get(
        (slower_naive, faster_overlapped), "holds in part")
    return Verdict(verdict, "a change counts beyond ±2% of the epoch time; " + "; ".join(parts) + ".")


# ---------------------------------------------------------------------------------------------
# 6. More workers than cores stops helping

WORKERS = "dataloader loader-only"


def worker_counts(cores: int) -> list[int]:
    return sorted({1, 2, max(1, cores // 4), max(1, cores // 2), max(1, cores - 1), cores,
                   cores + cores // 2, 2 * cores})


def measure_workers_vs_cores(ctx: Context) -> list[dict]:
    """The dataloader pipeline loader-only (PIL transforms per sample in the workers). Warm-up covers
    the workers' initial prefetch (2 batches each) so windows time the steady state."""
    s, cores = ctx.scale, os.cpu_count() or 1
    rows = [row("machine", "cpu_count", cores, "cores")]
    for workers in s.workers or worker_counts(cores):
        config = ctx.config.replace(num_workers=workers, batch_size=s.loader_batch,
                                    pin_memory=ctx.device.type == "cuda")
        spec = harness.RunSpec("dataloader", "loader", "none", config, steps=max(s.loader_steps, 4 * workers),
                               warmup=s.warmup + 2 * workers, repeats=s.repeats)
        with warnings.catch_warnings():   # DataLoader warns above the core count: that is the experiment
            warnings.filterwarnings("ignore", "This DataLoader will create", UserWarning)
            for r, (_, w) in enumerate(harness.run(spec)):
                rows.append(row(WORKERS, "img_per_s", w.images / w.seconds, "img/s", r, workers))
    return rows


def judge_workers_vs_cores(df: pd.DataFrame) -> Verdict:
    cores = median(df, "machine", "cpu_count")
    speed = df[(df.setting == WORKERS) & (df.metric == "img_per_s")].groupby("level").value.median()
    if speed.empty or math.isnan(cores):
        return Verdict("not measured", "")
    knee = int(speed.index[speed >= 0.95 * speed.max()].min())
    within, beyond = speed[speed.index <= cores], speed[speed.index > cores]
    curve = ", ".join(f"{int(w)}: {v:,.0f}" for w, v in speed.items())
    detail = (f"{cores:.0f} cores; img/s by workers {curve}; 95% of the best reached at {knee} workers")
    if within.empty or beyond.empty:
        return Verdict("not measured", detail + " (needs counts on both sides of the core count)")
    gain = beyond.max() / within.max() - 1
    detail += f"; best beyond the core count {gain:+.1%} over the best within it"
    return Verdict("holds" if gain <= 0.05 else "does not hold", detail + ".")


# ---------------------------------------------------------------------------------------------
# 7. collate_fn that moves the batch to the GPU

def _collate_to(device: torch.device, samples):
    return [t.to(device) for t in torch.utils.data.default_collate(samples)]


COLLATE_ZERO = "collate_fn .to(device), 0 workers"


def measure_collate_to_gpu(ctx: Context) -> list[dict]:
    """The dataloader pipeline's samples (PIL transforms) with a collate_fn that moves each batch to
    the device: first with the configured workers (does it work?), then timed loader-only with 0
    workers next to the dataloader and prefetch pipelines with their workers."""
    s, device = ctx.scale, ctx.device
    config = ctx.config.replace(batch_size=s.loader_batch, pin_memory=device.type == "cuda",
                                non_blocking=device.type == "cuda")
    workers, method = config.num_workers, torch.multiprocessing.get_start_method()
    collate = functools.partial(_collate_to, device)
    rows = []
    with pipelines.build("dataloader", config) as pipeline:
        try:
            next(iter(pipeline.make_loader(pin_memory=False, collate_fn=collate, persistent_workers=False)))
            works, note = 1, ""
        except Exception as e:   # the error users meet: the message's last line says why
            works, note = 0, str(e).strip().splitlines()[-1]
        rows.append(row(f"collate_fn .to(device), {workers} workers ({method})", "works", works, "flag", note=note))
        loader = pipeline.make_loader(pin_memory=False, collate_fn=collate, num_workers=0)
        batches = harness.endless(pipeline, lambda: iter(loader))
        for _ in range(s.warmup):
            next(batches)
        touch = harness.Touch(device)
        for r in range(s.repeats):
            w = harness.time_window(batches, touch, s.loader_steps, device)
            rows.append(row(COLLATE_ZERO, "img_per_s", w.images / w.seconds, "img/s", r))
    for name, label in (("dataloader", f"dataloader pipeline, {workers} workers, pin_memory, non_blocking"),
                        ("prefetch", f"prefetch pipeline, {workers} threads")):
        spec = harness.RunSpec(name, "loader", "none", config, steps=s.loader_steps, warmup=s.warmup, repeats=s.repeats)
        rows += [row(label, "img_per_s", w.images / w.seconds, "img/s", r) for r, (_, w) in enumerate(harness.run(spec))]
    return rows


def judge_collate_to_gpu(df: pd.DataFrame) -> Verdict:
    attempt = df[df.metric == "works"]
    zero = median(df, COLLATE_ZERO, "img_per_s")
    others = {s: median(df, s, "img_per_s") for s in df[df.metric == "img_per_s"].setting.unique() if s != COLLATE_ZERO}
    if attempt.empty or math.isnan(zero):
        return Verdict("not measured", "")
    a = attempt.iloc[0]
    outcome = f"{a.setting}: " + ("works" if a.value == 1 else f"fails with {a.note}")
    speeds = "; ".join(f"{s}: {v:,.0f} img/s ({zero / v:.2f}× of it with 0 workers)" for s, v in others.items())
    faster = all(zero > v for v in others.values())
    verdict = "holds" if a.value == 1 and faster else "does not hold"
    return Verdict(verdict, f"{outcome}. {COLLATE_ZERO}: {zero:,.0f} img/s; {speeds}.")


# ---------------------------------------------------------------------------------------------
# 8. AMP: about 50% less memory and 20% faster

AMP_SETTINGS = {   # label -> (autocast dtype, TF32 for matmul + cuDNN; None leaves PyTorch's defaults)
    "float32, TF32 off": ("float32", False),
    "float32, TF32 on": ("float32", True),
    "bfloat16 autocast": ("bfloat16", None),
    "float16 autocast + GradScaler": ("float16", None),
}
FORMATS = {"NCHW": False, "channels_last": True}


@contextlib.contextmanager
def tf32(enabled: bool | None):
    """TF32 for matmuls and cuDNN convolutions on or off inside the block (None: unchanged).
    PyTorch's defaults: on for cuDNN convolutions, off for matmuls."""
    flags = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = [f.allow_tf32 for f in flags]
    try:
        if enabled is not None:
            for f in flags:
                f.allow_tf32 = enabled
        yield
    finally:
        for f, value in zip(flags, saved):
            f.allow_tf32 = value



def _train_windows(ctx: Context, trainer: harness.Trainer, batch: int, channels_last: bool, step=None):
    """Synchronized windows of `trainer` on one synthetic float32 batch: yields (Window, peak reserved MB)."""
    s, device = ctx.scale, ctx.device
    config = ctx.config.replace(batch_size=batch, dtype="float32", channels_last=channels_last)
    batches = harness.synthetic_batches(config, device)
    step = step or trainer
    for _ in range(s.warmup):
        step(*next(batches))
    for _ in range(s.repeats):
        w = harness.time_window(batches, step, s.train_steps, device)
        yield w, torch.cuda.max_memory_reserved(device) / 2**20 if device.type == "cuda" else math.nan


def measure_amp(ctx: Context) -> list[dict]:
    """Model-only training steps (forward, loss, backward, SGD) on a float32 batch on the device."""
    rows = []
    for fmt, channels_last in FORMATS.items():
        for label, (precision, tf) in AMP_SETTINGS.items():
            setting = f"{label}; {fmt}"
            with tf32(tf):
                trainer = harness.Trainer(ctx.scale.model, ctx.device, precision, channels_last)
                for r, (w, _) in enumerate(_train_windows(ctx, trainer, ctx.scale.train_batch, channels_last)):
                    rows += [row(setting, "img_per_s", w.images / w.seconds, "img/s", r),
                             row(setting, "peak_mem_mb", w.peak_gpu_mem_mb, "MB", r)]
            del trainer
            harness.release(ctx.device)
    return rows


def judge_amp(df: pd.DataFrame) -> Verdict:
    """Memory 'about 50%': a cut of 35-65%; speed 'about 20%': at least +10% (more is noted)."""
    labels = list(AMP_SETTINGS)
    memory_ok, speed_ok, parts = {}, {}, []
    for fmt in FORMATS:
        for base in labels[:2]:
            b_ips, b_mem = median(df, f"{base}; {fmt}", "img_per_s"), median(df, f"{base}; {fmt}", "peak_mem_mb")
            if math.isnan(b_ips):
                continue
            for amp in labels[2:]:
                ips, mem = median(df, f"{amp}; {fmt}", "img_per_s"), median(df, f"{amp}; {fmt}", "peak_mem_mb")
                cut, speedup = 1 - mem / b_mem, ips / b_ips - 1
                key = (fmt, base, amp)
                memory_ok[key], speed_ok[key] = 0.35 <= cut <= 0.65, speedup >= 0.10
                parts.append(f"{amp.split()[0]} vs {base} ({fmt}): memory {-cut:+.0%}, speed {speedup:+.0%}")
    if not parts or all(math.isnan(v) for v in df[df.metric == "peak_mem_mb"].value.astype(float)):
        return Verdict("not measured", "needs a CUDA device for peak memory; " + "; ".join(parts))
    knobs = ("the memory format", "the baseline", "the autocast dtype")   # the parts of each key
    memory, speed = (combine(ok, explaining(ok, knobs)) for ok in (memory_ok, speed_ok))
    return Verdict(f"memory: {memory}; speed: {speed}", "memory counted as 'about 50%' for a 35–65% cut of "
                   "peak training memory, speed as 'about 20%' for ≥ +10% img/s; " + "; ".join(parts) + ".")


# ---------------------------------------------------------------------------------------------
# 9. Gradient accumulation and empty_cache() against out-of-memory

def oom_settings(scale: Scale) -> dict[str, tuple[int, bool]]:
    """label -> (accumulation factor, empty_cache after every step), all with the same batch."""
    b = scale.oom_batch
    return {f"batch {b}": (1, False), f"batch {b} + empty_cache() every step": (1, True),
            **{f"{k} × {b // k} accumulated": (k, False) for k in scale.accumulate}}


def measure_oom_fixes(ctx: Context) -> list[dict]:
    """Model-only float32 training (PyTorch's default TF32 settings, NCHW) of one batch size, plain,
    with empty_cache() after each step, and split into k accumulated micro-batches. On CUDA, then
    under a memory cap halfway between the peak allocated memory of the plain batch and of the
    first accumulation factor: does each setting still run? (The cap bounds what the caching
    allocator may reserve; it frees cached blocks and retries before it raises out-of-memory, so
    allocated, not reserved, memory decides.)"""
    s, device, rows = ctx.scale, ctx.device, []
    settings, allocated = oom_settings(s), {}

    def trainer_and_step(k, clear):
        trainer = harness.Trainer(s.model, device, "float32", channels_last=False, accumulate=k)
        if not clear:
            return trainer, trainer
        return trainer, lambda x, y: (trainer(x, y), torch.cuda.empty_cache() if device.type == "cuda" else None)

    for setting, (k, clear) in settings.items():
        trainer, step = trainer_and_step(k, clear)
        peaks = []
        for r, (w, peak_reserved) in enumerate(_train_windows(ctx, trainer, s.oom_batch, False, step)):
            peaks.append(w.peak_gpu_mem_mb)
            rows += [row(setting, "img_per_s", w.images / w.seconds, "img/s", r, k),
                     row(setting, "peak_allocated_mb", w.peak_gpu_mem_mb, "MB", r, k),
                     row(setting, "peak_reserved_mb", peak_reserved, "MB", r, k)]
        allocated[setting] = max(peaks)
        del trainer, step
        harness.release(device)
    if device.type != "cuda" or len(settings) < 3:   # the cap needs a CUDA device and an accumulation
        return rows
    plain, first_k = list(settings)[0], list(settings)[2]
    cap = (allocated[plain] + allocated[first_k]) / 2
    index = device.index if device.index is not None else torch.cuda.current_device()
    total = torch.cuda.get_device_properties(index).total_memory / 2**20
    torch.cuda.set_per_process_memory_fraction(cap / total, index)
    try:
        for setting, (k, clear) in settings.items():
            try:
                trainer, step = trainer_and_step(k, clear)
                list(_train_windows(ctx, trainer, s.oom_batch, False, step))
                fits, note = 1, f"cap {cap:,.0f} MB"
            except torch.OutOfMemoryError:
                fits, note = 0, f"cap {cap:,.0f} MB: out of memory"
            trainer = step = None
            harness.release(device)
            rows.append(row(setting, "fits_under_cap", fits, "flag", level=k, note=note))
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, index)
    return rows


def judge_oom_fixes(df: pd.DataFrame) -> Verdict:
    settings = list(dict.fromkeys(df.setting))
    if len(settings) < 3:
        return Verdict("not measured", "")
    plain, cleared, accumulated = settings[0], settings[1], settings[2:]
    alloc = {s: median(df, s, "peak_allocated_mb") for s in settings}
    reserved = {s: median(df, s, "peak_reserved_mb") for s in settings}
    ips = {s: median(df, s, "img_per_s") for s in settings}
    fits = {s: median(df, s, "fits_under_cap") for s in settings}
    if math.isnan(alloc[plain]):
        return Verdict("not measured", "needs a CUDA device for peak memory")

    def facts(s):
        fit = "" if math.isnan(fits[s]) else ("; runs under the cap" if fits[s] == 1 else "; out of memory under the cap")
        return (f"{s}: peak allocated {alloc[s] / alloc[plain] - 1:+.0%}, reserved {reserved[s] / reserved[plain] - 1:+.0%}, "
                f"img/s {ips[s] / ips[plain] - 1:+.0%}{fit}")

    capped = fits[plain] == 0   # the cap reproduced the out-of-memory error (NaN: no cap run)

    def fixes(s, threshold):
        return 1 - alloc[s] / alloc[plain] > threshold and (not capped or fits[s] == 1)

    accumulation = combine({s: fixes(s, 0.2) for s in accumulated}, "the accumulation factor")
    empty_cache = "holds" if fixes(cleared, 0.05) else "does not hold"
    cap = df[df.metric == "fits_under_cap"].note.str.split(":").str[0]
    rule = ("a fix counts where it cuts peak allocated memory (> 20% for accumulation, > 5% for empty_cache)"
            + (" and runs under the cap the plain batch ran out of memory under" if capped else
               "; the plain batch did not run out of memory under the cap, so only the cut counts" if len(cap) else ""))
    return Verdict(f"accumulation: {accumulation}; empty_cache: {empty_cache}",
                   f"{rule}. Against {plain} ({alloc[plain]:,.0f} MB peak allocated, {reserved[plain]:,.0f} MB reserved, "
                   f"{ips[plain]:,.0f} img/s" + (f"; {cap.iloc[0]}" if len(cap) else "") + "): "
                   + "; ".join(facts(s) for s in settings[1:]) + ".")


# ---------------------------------------------------------------------------------------------
# 10. torch.compile / CUDA graphs make the input pipeline the bottleneck

FAST_STEPS = ("eager", "compile")


def measure_fast_step(ctx: Context) -> list[dict]:
    """Per pipeline: loader-only once, then model-only and e2e with the eager and the compiled
    (torch.compile + whole-step CUDA graph) training step of a small model; pipelines that cannot
    run here are left out."""
    s, rows = ctx.scale, []
    config = ctx.config.replace(batch_size=s.train_batch, dtype="bfloat16", channels_last=True, last_batch="drop")
    unavailable = pipelines.available()
    timing = dict(steps=s.fast_steps, warmup=s.warmup, repeats=s.repeats)
    specs = [harness.RunSpec(p, "loader", "none", config, **timing)
             for p in s.fast_pipelines if not unavailable.get(p)]
    for step in FAST_STEPS:
        specs.append(harness.RunSpec("none", "model", s.fast_model, config, step=step, **timing))
        specs += [harness.RunSpec(p, "e2e", s.fast_model, config, step=step, **timing)
                  for p in s.fast_pipelines if not unavailable.get(p)]
    for spec in specs:
        setting = spec.pipeline if spec.mode == "loader" else f"{spec.pipeline}; {spec.step}"
        for r, (_, w) in enumerate(harness.run(spec)):
            rows.append(row(setting, f"{spec.mode}_img_per_s", w.images / w.seconds, "img/s", r))
        harness.release(ctx.device)
    return rows


def judge_fast_step(df: pd.DataFrame) -> Verdict:
    """Per pipeline: the input is the bottleneck with a step when e2e stays below 95% of that
    step's model-only rate and the loader alone is slower than the model alone. The claim holds
    for a pipeline that is the bottleneck with the compiled step but not with the eager one."""
    fed = 0.95
    model = {step: median(df, f"none; {step}", "model_img_per_s") for step in FAST_STEPS}
    if any(math.isnan(v) for v in model.values()):
        return Verdict("not measured", "needs model-only rows of both steps")
    truth, parts = {}, [f"model-only {' → '.join(f'{model[k]:,.0f}' for k in FAST_STEPS)} img/s "
                        f"({' → '.join(FAST_STEPS)})"]
    for pipeline in sorted(set(df[df.metric == "loader_img_per_s"].setting)):
        loader = median(df, pipeline, "loader_img_per_s")
        e2e = {step: median(df, f"{pipeline}; {step}", "e2e_img_per_s") for step in FAST_STEPS}
        if any(math.isnan(v) for v in e2e.values()):
            continue
        bound = {step: e2e[step] < fed * model[step] and loader < model[step] for step in FAST_STEPS}
        truth[pipeline] = bound["compile"] and not bound["eager"]
        shares = ", ".join(f"{step} {e2e[step]:,.0f} ({e2e[step] / model[step]:.0%})" for step in FAST_STEPS)
        why = ("becomes the bottleneck" if truth[pipeline] else
               "was already the bottleneck with the eager step" if bound["eager"] else
               "keeps up with the compiled step" if e2e["compile"] >= fed * model["compile"] else
               "is not the bottleneck: its loader-only rate is above the model's, e2e is lower for another reason")
        parts.append(f"`{pipeline}` (loader-only {loader:,.0f}): e2e {shares} of model-only — {why}")
    if not truth:
        return Verdict("not measured", "; ".join(parts))
    return Verdict(combine(truth, "the pipeline"),
                   f"the input counted as the bottleneck of a step when e2e < {fed:.0%} of that step's "
                   "model-only rate and loader-only < model-only; " + "; ".join(parts) + ".")


# ---------------------------------------------------------------------------------------------

TUTORIAL = ("PyTorch tutorial “A guide on good usage of non_blocking and pin_memory() in PyTorch” "
            "(pytorch.org/tutorials/intermediate/pinmem_nonblock.html)")
CLAIMS = [
    Claim("pageable-blocks", "`t.to(\"cuda\")` from pageable memory blocks the host until the copy is done.",
          TUTORIAL,
          "Random uint8 host tensors of each size in pageable memory; host time of the `.to(device)` call "
          "(`call_ms`) vs the copy's device time (`copy_ms`, CUDA events around the call) and the time until "
          "a synchronize after it returns (`done_ms`); device idle before each call, warm-up calls first.",
          True, measure_pageable_blocks, judge_pageable_blocks),
    Claim("non-blocking-overlap", "`non_blocking=True` from pageable memory gives no overlap; from pinned memory "
          "the call returns at once and CPU work overlaps the copy.", TUTORIAL,
          "`.to(device, non_blocking=True)` from pageable and from pinned memory: call time vs the copy's device "
          "time and the time to completion (as in claim 1), then the same call followed by a busy CPU loop as "
          "long as the copy (`work_ms`) before the synchronize (`with_work_ms`); share of the copy hidden = "
          "(copy alone + work − both) / copy alone, each until the synchronize.",
          True, measure_non_blocking, judge_non_blocking),
    Claim("pin-on-the-fly", "`t.pin_memory().to(dev, non_blocking=True)` on the fly is slower than a plain `.to(dev)`.",
          TUTORIAL, "Time to completion (synchronized) of a plain `.to(device)` and of pinning on the fly then "
          "copying, both from the same pageable tensor, and of a copy from memory pinned ahead of time for "
          "reference: the first call of each (`first_done_ms`, nothing cached yet for that size), then repeated "
          "calls after warm-up (`done_ms`).",
          True, measure_pin_on_the_fly, judge_pin_on_the_fly),
    Claim("d2h-without-sync", "GPU→CPU `non_blocking=True` without a synchronize can hand back data that is not there yet.",
          TUTORIAL, "A float32 device tensor gets a new value each trial and is copied to the host with "
          "`non_blocking=True`; the host reads it at once and again after `current_stream().synchronize()`. "
          "'busy stream' queues a ~10 ms kernel first (as unfinished training work would); 'idle stream' does not. "
          "Reading the not-yet-written pinned buffer is safe: only its contents are wrong.",
          True, measure_d2h_without_sync, judge_d2h_without_sync),
    Claim("pin-memory-exchange", "`DataLoader(pin_memory=True)` alone can make a naive loop slower (bs 64, no "
          "workers, `.cuda()`: 6.57 s → 7.03 s); with workers, `non_blocking=True` and CPU work to overlap it gets "
          "faster (bs 1024, 6 workers, 0.1 s CPU work per step: 5.72 s → 5.48 s).",
          "PyTorch forums, “When to set pin_memory to true?” (discuss.pytorch.org/t/19723), CIFAR-10, one GPU",
          "Our reconstruction (the thread gives times, not code): one epoch's worth of steps of the dataloader "
          "pipeline with ToTensor + Normalize per sample, no augmentation, no model; float32 batches copied with "
          "`.to(device)` (case B: `non_blocking=True`, then a busy CPU loop per step). Synchronized windows after "
          "warm-up steps; persistent workers, so worker start-up is outside the windows.",
          True, measure_pin_memory_exchange, judge_pin_memory_exchange),
    Claim("workers-vs-cores", "More DataLoader workers than CPU cores stops helping.",
          "common advice (e.g. PyTorch forums: set num_workers to the number of cores)",
          "The dataloader pipeline loader-only (PIL crop/flip/ToTensor/Normalize per sample in the workers, "
          "pin_memory on a GPU) over a sweep of worker counts up to twice the cores; windows after a warm-up "
          "that drains the workers' initial prefetch.",
          False, measure_workers_vs_cores, judge_workers_vs_cores),
    Claim("collate-to-gpu", "Moving the batch to the GPU inside `collate_fn` is a free speed-up.",
          "common advice in forum answers and blog posts",
          "The dataloader pipeline's samples with a `collate_fn` that calls `.to(device)`: first with the "
          "configured workers (start method as the platform defaults), then loader-only with 0 workers, next to "
          "the dataloader pipeline (workers, pin_memory, non_blocking) and the prefetch pipeline.",
          True, measure_collate_to_gpu, judge_collate_to_gpu),
    Claim("amp", "AMP cuts memory by about 50% and speeds training up by about 20%.",
          "common summary of mixed precision in blog posts and talks",
          "Model-only training steps on one float32 batch on the device (forward, cross-entropy, backward, SGD), "
          "fp32 with TF32 off and on, bf16 autocast, fp16 autocast + GradScaler; NCHW and channels_last; "
          "synchronized windows; peak memory = max allocated within the window (model, optimizer, activations).",
          True, measure_amp, judge_amp),
    Claim("oom-fixes", "Gradient accumulation and `torch.cuda.empty_cache()` fix out-of-memory errors.",
          "common advice in forum answers",
          "Model-only fp32 training of one batch size: plain, with `empty_cache()` after every step, and as k "
          "accumulated micro-batches (same effective batch): peak allocated and reserved memory and img/s; then "
          "each under a memory cap (`set_per_process_memory_fraction`) halfway between the peak allocated memory "
          "of the plain batch and of the first accumulation factor.",
          True, measure_oom_fixes, judge_oom_fixes),
    Claim("compile-makes-input-the-bottleneck", "`torch.compile` / CUDA graphs make the input pipeline the bottleneck.",
          "common observation about fast training loops; the CIFAR-10 speed records (airbench, hlb-CIFAR10) "
          "keep the whole set on the GPU and never use a DataLoader",
          "A small model (ResNet-9, width × 0.25, bf16 autocast, channels_last) trained model-only on one "
          "synthetic batch and e2e from each pipeline, with the eager step and with `torch.compile` plus the "
          "whole step captured in one CUDA graph (`--step compile`); each pipeline loader-only once. Harness "
          "windows after warm-up; compilation and capture happen before them.",
          True, measure_fast_step, judge_fast_step),
]
KEYS = [c.key for c in CLAIMS]


def select(names: Iterable[str]) -> list[Claim]:
    """Claims by key or by number (1-based), in the order given."""
    chosen = []
    for name in names:
        if name.isdigit() and 1 <= int(name) <= len(CLAIMS):
            chosen.append(CLAIMS[int(name) - 1])
        elif name in KEYS:
            chosen.append(CLAIMS[KEYS.index(name)])
        else:
            raise ValueError(f"claim {name!r}: expected a number 1-{len(CLAIMS)} or one of {KEYS}")
    return chosen


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
                harness.release(ctx.device)
        if progress is not None:
            progress.update(1)


def read(csv: Path) -> pd.DataFrame:
    """claims.csv, with only each claim's latest run (rows of other runs are history)."""
    df = pd.read_csv(csv, keep_default_na=False, na_values=[""], dtype={"setting": str, "note": str, "error": str})
    df = df.fillna({"note": "", "error": "", "setting": ""})
    latest = df.groupby("claim").run_id.last()
    return df[df.run_id == df.claim.map(latest)]


def verdicts(df: pd.DataFrame) -> dict[str, Verdict]:
    """Claim key -> verdict from its rows (not measured, with the reason, where it did not run)."""
    out = {}
    for claim in CLAIMS:
        mine = df[df.claim == claim.key]
        ok = mine[mine.status == "ok"]
        if ok.empty:
            reason = "; ".join(sorted(set(mine.error))) or "not run"
            out[claim.key] = Verdict("not measured", reason)
        else:
            out[claim.key] = claim.judge(ok)
    return out


def _environment(df: pd.DataFrame) -> str:
    first = df.iloc[0].fillna("")
    commits = ", ".join(dict.fromkeys(df.git_commit.fillna("").astype(str)))
    gpu = first.gpu or "no GPU"
    dates = sorted(df.timestamp.str[:10].unique())
    return (f"{gpu}, {first.cpu_count} CPU cores, torch {first.torch}, torchvision {first.torchvision}, "
            f"CUDA {first.cuda or '-'}, driver {first.driver or '-'}, host `{first.hostname}`, "
            f"commit {commits}; measured {' to '.join(dict.fromkeys([dates[0], dates[-1]]))}")


def _table(rows: pd.DataFrame) -> str:
    ok = rows.copy()
    ok["value"] = pd.to_numeric(ok.value, errors="coerce")
    keys = ["setting", "level", "metric", "unit"]
    ok["level"] = ok.level.map(lambda v: "" if pd.isna(v) else f"{v:g}")
    table = ok.groupby(keys, sort=False).value.agg(["median", "min", "max", "count"]).reset_index()
    for c in ("median", "min", "max"):
        table[c] = table[c].map(lambda v: f"{v:.4g}")
    notes = ok[ok.note != ""].groupby(keys, sort=False).note.first()
    if len(notes):
        table = table.merge(notes.reset_index(), on=keys, how="left").fillna({"note": ""})
    return table.rename(columns={"count": "n"}).to_markdown(index=False)


def write_report(csv: Path, out: Path) -> Path:
    """CLAIMS.md in `out` from claims.csv: the verdict table, then each claim's experiment and numbers."""
    df = read(csv)
    found = verdicts(df)
    lines = ["# Claims: the common advice on feeding a GPU, measured", "",
             f"Generated by `pipebench claims` from `{csv.name}` (commands in COMMAND.txt). "
             f"Environment: {_environment(df)}.", "",
             "Each verdict is computed from the rows below it by the claim's `judge` in `bench/claims.py`; "
             "the thresholds it uses are stated with it. Tables: median [min, max] over n repeats; "
             "`level` is the copy size in MB, the batch size, the worker count or the accumulation factor.", "",
             "| # | claim | verdict |", "|---|---|---|"]
    lines += [f"| {i} | {c.statement} | **{found[c.key].verdict}** |" for i, c in enumerate(CLAIMS, 1)]
    for i, c in enumerate(CLAIMS, 1):
        v, rows = found[c.key], df[(df.claim == c.key) & (df.status == "ok")]
        lines += ["", f"## {i}. `{c.key}`", "", f"**Claim.** {c.statement} *Source:* {c.source}.", "",
                  f"**Experiment.** {c.experiment}", "", f"**Verdict: {v.verdict}.** {v.detail}"]
        if len(rows):
            lines += ["", _table(rows)]
    path = out / "CLAIMS.md"
    path.write_text("\n".join(lines) + "\n")
    return path
