"""Claims 8-10: the training step (AMP, out-of-memory fixes, torch.compile / CUDA graphs), each
claim next to its experiment and judge. Loops are timed with the harness's synchronized windows
after untimed warm-up steps; peak memory is the caching allocator's peak within the window
(`max_memory_allocated` / `max_memory_reserved`).
"""
from __future__ import annotations

import contextlib
import math

import pandas as pd
import torch

import pipelines

from ..measuring import harness, machine, workloads
from ..measuring.spec import RunSpec
from .framework import Claim, Context, Scale, Verdict, combine, explaining, median, row


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
    """Synchronized windows of `trainer` on one real float32 batch: yields (Window, peak reserved MB)."""
    s, device = ctx.scale, ctx.device
    config = ctx.config.replace(batch_size=batch, dtype="float32", channels_last=channels_last)
    batches = workloads.real_batches(config, device, count=1)
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
            machine.release(ctx.device)
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


AMP = Claim(
    "amp", "AMP cuts memory by about 50% and speeds training up by about 20%.",
    "common summary of mixed precision in blog posts and talks",
    "Model-only training steps on one float32 batch on the device (forward, cross-entropy, backward, SGD), "
    "fp32 with TF32 off and on, bf16 autocast, fp16 autocast + GradScaler; NCHW and channels_last; "
    "synchronized windows; peak memory = max allocated within the window (model, optimizer, activations).",
    True, measure_amp, judge_amp)


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
        machine.release(device)
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
            machine.release(device)
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


OOM_FIXES = Claim(
    "oom-fixes", "Gradient accumulation and `torch.cuda.empty_cache()` fix out-of-memory errors.",
    "common advice in forum answers",
    "Model-only fp32 training of one batch size: plain, with `empty_cache()` after every step, and as k "
    "accumulated micro-batches (same effective batch): peak allocated and reserved memory and img/s; then "
    "each under a memory cap (`set_per_process_memory_fraction`) halfway between the peak allocated memory "
    "of the plain batch and of the first accumulation factor.",
    True, measure_oom_fixes, judge_oom_fixes)


# 10. torch.compile / CUDA graphs make the input pipeline the bottleneck

FAST_STEPS = ("eager", "compile")


def measure_fast_step(ctx: Context) -> list[dict]:
    """Per pipeline: loader-only once, then model-only and e2e with the eager and the compiled
    (torch.compile + whole-step CUDA graph) training step of a small model; pipelines that cannot
    run here are left out."""
    s, rows = ctx.scale, []
    config = ctx.config.replace(batch_size=s.train_batch, dtype="bfloat16", channels_last=True, last_batch="drop")
    unavailable = pipelines.available(s.fast_pipelines)
    timing = dict(requested_steps=s.fast_steps, warmup=s.warmup, repeats=s.repeats)
    specs = [RunSpec(p, "loader", "none", config, **timing)
             for p in s.fast_pipelines if not unavailable.get(p)]
    for step in FAST_STEPS:
        specs.append(RunSpec("none", "model", s.fast_model, config, step=step, **timing))
        specs += [RunSpec(p, "e2e", s.fast_model, config, step=step, **timing)
                  for p in s.fast_pipelines if not unavailable.get(p)]
    for spec in specs:
        setting = spec.pipeline if spec.mode == "loader" else f"{spec.pipeline}; {spec.step}"
        for r, (_, w) in enumerate(harness.run(spec)):
            rows.append(row(setting, f"{spec.mode}_img_per_s", w.images / w.seconds, "img/s", r))
        machine.release(ctx.device)
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


COMPILE_MAKES_INPUT_THE_BOTTLENECK = Claim(
    "compile-makes-input-the-bottleneck", "`torch.compile` / CUDA graphs make the input pipeline the bottleneck.",
    "common observation about fast training loops; the CIFAR-10 speed records (airbench, hlb-CIFAR10) "
    "keep the whole set on the GPU and never use a DataLoader",
    "A small model (ResNet-9, width × 0.25, bf16 autocast, channels_last) trained model-only on one "
    "real batches (already on the GPU) and e2e from each pipeline, with the eager step and with `torch.compile` plus the "
    "whole step captured in one CUDA graph (`--step compile`); each pipeline loader-only once. Harness "
    "windows after warm-up; compilation and capture happen before them.",
    True, measure_fast_step, judge_fast_step)


CLAIMS = [AMP, OOM_FIXES, COMPILE_MAKES_INPUT_THE_BOTTLENECK]
