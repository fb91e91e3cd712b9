"""Claims 1-4: host-device copies (pageable `.to()`, `non_blocking`, pinning on the fly, GPU->CPU
without a synchronize), each claim next to its experiment and judge.

Timers: host clock around the call (`call_ms`), CUDA events around it (`copy_ms`, the device time
of what it queued) and host clock until a synchronize after it returns (`done_ms`), the device idle
before each repeat; warm-up calls first.
"""
from __future__ import annotations

import math

import pandas as pd
import torch

from ..measuring import harness
from .framework import Claim, Context, Verdict, _call_and_done, _host_buffer, _mb, combine, median, row, spin


TUTORIAL = ("PyTorch tutorial “A guide on good usage of non_blocking and pin_memory() in PyTorch” "
            "(pytorch.org/tutorials/intermediate/pinmem_nonblock.html)")


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


PAGEABLE_BLOCKS = Claim(
    "pageable-blocks", "`t.to(\"cuda\")` from pageable memory blocks the host until the copy is done.",
    TUTORIAL,
    "Random uint8 host tensors of each size in pageable memory; host time of the `.to(device)` call "
    "(`call_ms`) vs the copy's device time (`copy_ms`, CUDA events around the call) and the time until "
    "a synchronize after it returns (`done_ms`); device idle before each call, warm-up calls first.",
    True, measure_pageable_blocks, judge_pageable_blocks)


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


NON_BLOCKING_OVERLAP = Claim(
    "non-blocking-overlap", "`non_blocking=True` from pageable memory gives no overlap; from pinned memory "
    "the call returns at once and CPU work overlaps the copy.", TUTORIAL,
    "`.to(device, non_blocking=True)` from pageable and from pinned memory: call time vs the copy's device "
    "time and the time to completion (as in claim 1), then the same call followed by a busy CPU loop as "
    "long as the copy (`work_ms`) before the synchronize (`with_work_ms`); share of the copy hidden = "
    "(copy alone + work − both) / copy alone, each until the synchronize.",
    True, measure_non_blocking, judge_non_blocking)


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


PIN_ON_THE_FLY = Claim(
    "pin-on-the-fly", "`t.pin_memory().to(dev, non_blocking=True)` on the fly is slower than a plain `.to(dev)`.",
    TUTORIAL, "Time to completion (synchronized) of a plain `.to(device)` and of pinning on the fly then "
    "copying, both from the same pageable tensor, and of a copy from memory pinned ahead of time for "
    "reference: the first call of each (`first_done_ms`, nothing cached yet for that size), then repeated "
    "calls after warm-up (`done_ms`).",
    True, measure_pin_on_the_fly, judge_pin_on_the_fly)


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


D2H_WITHOUT_SYNC = Claim(
    "d2h-without-sync", "GPU→CPU `non_blocking=True` without a synchronize can hand back data that is not there yet.",
    TUTORIAL, "A float32 device tensor gets a new value each trial and is copied to the host with "
    "`non_blocking=True`; the host reads it at once and again after `current_stream().synchronize()`. "
    "'busy stream' queues a ~10 ms kernel first (as unfinished training work would); 'idle stream' does not. "
    "Reading the not-yet-written pinned buffer is safe: only its contents are wrong.",
    True, measure_d2h_without_sync, judge_d2h_without_sync)


CLAIMS = [PAGEABLE_BLOCKS, NON_BLOCKING_OVERLAP, PIN_ON_THE_FLY, D2H_WITHOUT_SYNC]
