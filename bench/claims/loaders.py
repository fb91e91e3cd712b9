"""Claims 5-7: DataLoader advice (`pin_memory`, workers vs cores, `collate_fn` to the GPU), each
claim next to its experiment and judge. Loops are timed with the harness's synchronized windows
(`harness.time_window`) after untimed warm-up steps.
"""
from __future__ import annotations

import functools
import math
import os
import warnings

import pandas as pd
import torch

import pipelines

from ..measuring import harness, workloads
from ..measuring.spec import RunSpec
from .framework import Claim, Context, Verdict, median, row, spin


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
                batches = workloads.endless(pipeline)
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


PIN_MEMORY_EXCHANGE = Claim(
    "pin-memory-exchange", "`DataLoader(pin_memory=True)` alone can make a naive loop slower (bs 64, no "
    "workers, `.cuda()`: 6.57 s → 7.03 s); with workers, `non_blocking=True` and CPU work to overlap it gets "
    "faster (bs 1024, 6 workers, 0.1 s CPU work per step: 5.72 s → 5.48 s).",
    "PyTorch forums, “When to set pin_memory to true?” (discuss.pytorch.org/t/19723), CIFAR-10, one GPU",
    "Our reconstruction (the thread gives times, not code): one epoch's worth of steps of the dataloader "
    "pipeline with ToTensor + Normalize per sample, no augmentation, no model; float32 batches copied with "
    "`.to(device)` (case B: `non_blocking=True`, then a busy CPU loop per step). Synchronized windows after "
    "warm-up steps; persistent workers, so worker start-up is outside the windows.",
    True, measure_pin_memory_exchange, judge_pin_memory_exchange)


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
        spec = RunSpec("dataloader", "loader", "none", config, requested_steps=max(s.loader_steps, 4 * workers),
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


WORKERS_VS_CORES = Claim(
    "workers-vs-cores", "More DataLoader workers than CPU cores stops helping.",
    "common advice (e.g. PyTorch forums: set num_workers to the number of cores)",
    "The dataloader pipeline loader-only (PIL crop/flip/ToTensor/Normalize per sample in the workers, "
    "pin_memory on a GPU) over a sweep of worker counts up to twice the cores; windows after a warm-up "
    "that drains the workers' initial prefetch.",
    False, measure_workers_vs_cores, judge_workers_vs_cores)


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
            next(iter(pipeline.make_loader(pin_memory=False, collate_fn=collate, persistent_workers=False,
                                           multiprocessing_context=None)))   # the platform's default
            works, note = 1, ""
        except Exception as e:   # the error users meet: the message's last line says why
            works, note = 0, str(e).strip().splitlines()[-1]
        rows.append(row(f"collate_fn .to(device), {workers} workers ({method})", "works", works, "flag", note=note))
        loader = pipeline.make_loader(pin_memory=False, collate_fn=collate, num_workers=0)
        batches = workloads.endless(pipeline, lambda: iter(loader))
        for _ in range(s.warmup):
            next(batches)
        touch = harness.Touch(device)
        for r in range(s.repeats):
            w = harness.time_window(batches, touch, s.loader_steps, device)
            rows.append(row(COLLATE_ZERO, "img_per_s", w.images / w.seconds, "img/s", r))
    for name, label in (("dataloader", f"dataloader pipeline, {workers} workers, pin_memory, non_blocking"),
                        ("prefetch", f"prefetch pipeline, {workers} threads")):
        spec = RunSpec(name, "loader", "none", config, requested_steps=s.loader_steps, warmup=s.warmup,
                       repeats=s.repeats)
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


COLLATE_TO_GPU = Claim(
    "collate-to-gpu", "Moving the batch to the GPU inside `collate_fn` is a free speed-up.",
    "common advice in forum answers and blog posts",
    "The dataloader pipeline's samples with a `collate_fn` that calls `.to(device)`: first with the "
    "configured workers (start method as the platform defaults), then loader-only with 0 workers, next to "
    "the dataloader pipeline (workers, pin_memory, non_blocking) and the prefetch pipeline.",
    True, measure_collate_to_gpu, judge_collate_to_gpu)


CLAIMS = [PIN_MEMORY_EXCHANGE, WORKERS_VS_CORES, COLLATE_TO_GPU]
