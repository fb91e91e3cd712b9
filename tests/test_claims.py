"""`pipebench claims` on the CPU: every judge on hand-built rows with known numbers, the experiments
that can run without a GPU at tiny sizes, the runner's skipped / error rows, the Trainer's gradient
accumulation and the CLI end to end (claims.csv -> CLAIMS.md, --report-only, latest run only)."""
from __future__ import annotations

import dataclasses
import datetime as dt
import math
import os
import types
import warnings

import pandas as pd
import pytest
import torch

from bench import claims, cli, results
from bench.claims import row
from bench.cli import claims as claims_command
from bench.measuring import harness
from pipelines.config import PipelineConfig

VALID = ("holds", "does not hold")


def frame(rows: list[dict], claim: str | None = None) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    if claim is not None:
        df["claim"], df["status"], df["error"] = claim, "ok", ""
    return df


@pytest.fixture
def ctx(synthetic_root):
    config = PipelineConfig(data_root=str(synthetic_root), source="synthetic", device="cpu", num_workers=1)
    return claims.Context(torch.device("cpu"), config, claims.Scale.tiny())


def scaled(ctx: claims.Context, **changes) -> claims.Context:
    return dataclasses.replace(ctx, scale=dataclasses.replace(ctx.scale, **changes))


# --- combine and select ---------------------------------------------------------------------------

def test_combine():
    assert claims.combine({}, "size") == "not measured"
    assert claims.combine({1.5: True, 96.0: True}, "size") == "holds"
    assert claims.combine({1.5: False, 96.0: False}, "size") == "does not hold"
    assert claims.combine({1.5: True, 96.0: False}, "size") == "depends on size"
    assert claims.combine({"a": False, "b": True}, "the accumulation factor") == "depends on the accumulation factor"


def test_select_by_number_and_name_in_the_order_given():
    assert len(claims.CLAIMS) == 10 and len(set(claims.KEYS)) == 10
    assert [c.key for c in claims.select(["6", "amp", "1", "9"])] == \
        ["workers-vs-cores", "amp", "pageable-blocks", "oom-fixes"]
    assert claims.select(claims.KEYS) == claims.CLAIMS
    assert claims.select([str(i) for i in range(1, 11)]) == claims.CLAIMS
    assert claims.select([]) == []


@pytest.mark.parametrize("bad", ["0", "11", "-1", "amps", "", "1.0", "Pageable-Blocks"])
def test_select_rejects_bad_names_naming_the_value(bad):
    with pytest.raises(ValueError, match=f"claim {bad!r}"):
        claims.select(["1", bad])


def test_row_and_median():
    r = row("s", "m", True, "flag", 2, 1.5, "n")
    assert r == {"setting": "s", "level": 1.5, "metric": "m", "value": 1.0, "unit": "flag", "repeat": 2, "note": "n"}
    df = frame([row("s", "m", v, "ms", i, lvl) for i, (v, lvl) in enumerate([(1, 1.0), (3, 1.0), (100, 2.0), (2, 1.0)])])
    assert claims.median(df, "s", "m", 1.0) == 2.0
    assert claims.median(df, "s", "m") == 2.5
    assert math.isnan(claims.median(df, "s", "other"))


# --- judges on hand-built rows ----------------------------------------------------------------------

def pageable_rows(times: dict[float, tuple[float, float]]) -> list[dict]:
    """copy size -> (call_ms, copy_ms), three repeats each (done = copy + 0.1)."""
    return [row(claims.PAGEABLE_TO, m, t, "ms", r, mb)
            for mb, (call, copy) in times.items() for r in range(3)
            for m, t in zip(claims.COPY_METRICS, (call, copy, copy + 0.1))]


def test_judge_pageable_blocks():
    judge = claims.judge_pageable_blocks
    v = judge(frame(pageable_rows({1.5: (0.2, 0.2), 96.0: (10.0, 10.2)})))
    assert v.verdict == "holds"
    assert "1.5 MB: the call took 0.2 ms, the copy 0.2 ms on the device" in v.detail
    assert "96 MB: the call took 10 ms, the copy 10.2 ms on the device" in v.detail
    v = judge(frame(pageable_rows({1.5: (0.02, 0.2), 96.0: (10.0, 10.2)})))
    assert v.verdict == "depends on size" and "1.5 MB: the call took 0.02 ms, the copy 0.2 ms" in v.detail
    assert judge(frame(pageable_rows({1.5: (0.02, 0.2), 96.0: (1.0, 10.2)}))).verdict == "does not hold"
    # the threshold: a call lasting 96% of the copy blocks, 90% does not
    assert judge(frame(pageable_rows({6.0: (9.6, 10.0)}))).verdict == "holds"
    assert judge(frame(pageable_rows({6.0: (9.0, 10.0)}))).verdict == "does not hold"
    # medians over repeats, not the first repeat: one outlier call does not flip the size
    rows = pageable_rows({6.0: (2.0, 2.0)})
    rows[0]["value"] = 0.001
    assert judge(frame(rows)).verdict == "holds"


def non_blocking_rows(facts: dict[float, dict[str, tuple[float, float, float, float, float]]]) -> list[dict]:
    """size -> kind -> (call_ms, copy_ms, done_ms, work_ms, with_work_ms)."""
    rows = []
    for mb, kinds in facts.items():
        for kind, values in kinds.items():
            for r in range(2):
                rows += [row(f"{kind}, non_blocking=True", m, t, "ms", r, mb)
                         for m, t in zip((*claims.COPY_METRICS, "work_ms", "with_work_ms"), values)]
    return rows


def test_judge_non_blocking():
    judge = claims.judge_non_blocking
    pageable = (10.0, 10.0, 10.0, 10.0, 20.0)   # blocks, nothing hidden
    pinned = (0.1, 10.0, 10.0, 10.0, 10.5)      # returns at once, 95% hidden
    half = (0.1, 10.0, 10.0, 10.0, 15.0)        # 50% hidden
    v = judge(frame(non_blocking_rows({1.5: {"pageable": pageable, "pinned": pinned},
                                       96.0: {"pageable": pageable, "pinned": pinned}})))
    assert v.verdict == "holds"
    assert ("1.5 MB: the pageable call lasted 100% of the copy's device time and CPU work hid 0% of the copy; "
            "pinned 1% and 95%") in v.detail
    v = judge(frame(non_blocking_rows({1.5: {"pageable": pageable, "pinned": half},
                                       96.0: {"pageable": pageable, "pinned": pinned}})))
    assert v.verdict == "depends on size" and "1.5 MB: " in v.detail and "pinned 1% and 50%" in v.detail
    # pageable memory overlapping as well as pinned: the claim's first half fails
    v = judge(frame(non_blocking_rows({1.5: {"pageable": pinned, "pinned": pinned}})))
    assert v.verdict == "does not hold" and "CPU work hid 95% of the copy" in v.detail
    assert claims.hidden_fraction(frame(non_blocking_rows({1.0: {"pinned": half}})), "pinned, non_blocking=True", 1.0) == 0.5


def pin_rows(times: dict[float, tuple[float, float, float]], first=(1.0, 1.0, 1.0)) -> list[dict]:
    """size -> done_ms of (plain, pinned on the fly, pinned ahead), three repeats; the first
    (uncached) call of each takes `first` times as long."""
    rows = []
    for mb, values in times.items():
        rows += [row(setting, "first_done_ms", t * f, "ms", 0, mb)
                 for setting, t, f in zip(claims.PIN_VARIANTS, values, first)]
        rows += [row(setting, "done_ms", t, "ms", r, mb) for r in range(3) for setting, t in zip(claims.PIN_VARIANTS, values)]
    return rows


def test_judge_pin_on_the_fly():
    judge = claims.judge_pin_on_the_fly
    v = judge(frame(pin_rows({1.5: (2.0, 3.0, 1.0), 96.0: (20.0, 30.0, 10.0)}, first=(4, 4, 2))))
    assert v.verdict == "holds"
    assert ("1.5 MB: repeated calls 1.50× the plain copy's time (3 vs 2 ms; from memory pinned ahead 1 ms), "
            "first call 1.50× (12 vs 8 ms)") in v.detail
    assert ("96 MB: repeated calls 1.50× the plain copy's time (30 vs 20 ms; from memory pinned ahead 10 ms), "
            "first call 1.50× (120 vs 80 ms)") in v.detail
    v = judge(frame(pin_rows({1.5: (2.0, 3.0, 1.0), 96.0: (20.0, 20.5, 10.0)})))
    assert v.verdict == "depends on size" and "96 MB: repeated calls 1.02×" in v.detail
    assert judge(frame(pin_rows({1.5: (2.0, 2.0, 1.0), 96.0: (20.0, 19.0, 10.0)}))).verdict == "does not hold"
    assert judge(frame(pin_rows({6.0: (10.0, 10.6, 5.0)}))).verdict == "holds"          # > 5% slower
    assert judge(frame(pin_rows({6.0: (10.0, 10.4, 5.0)}))).verdict == "does not hold"  # within 5%
    # pinning on the fly is slower only on the first call (nothing cached yet for that size)
    v = judge(frame(pin_rows({6.0: (10.0, 10.0, 5.0)}, first=(1, 3, 1))))
    assert v.verdict == "depends on the pinned-memory cache (first call: holds; repeated calls: does not hold)"
    assert "first call 3.00× (30 vs 10 ms)" in v.detail
    # rows without first calls: the repeated calls decide
    df = frame(pin_rows({6.0: (10.0, 10.0, 5.0)}, first=(1, 3, 1)))
    assert judge(df[df.metric == "done_ms"]).verdict == "does not hold"


def d2h_rows(before: dict[str, list[float]], after: float = 1.0) -> list[dict]:
    rows = []
    for setting, values in before.items():
        for t, b in enumerate(values):
            rows += [row(setting, "correct_before_sync", b, "fraction", t, 1.0),
                     row(setting, "correct_after_sync", after, "fraction", t, 1.0),
                     row(setting, "pinned_output", True, "flag", t, 1.0)]
    return rows


def test_judge_d2h_without_sync():
    judge = claims.judge_d2h_without_sync
    v = judge(frame(d2h_rows({"busy stream": [0.0, 0.0, 0.25], "idle stream": [1.0, 0.5, 1.0]})))
    assert v.verdict == "holds"
    assert ("busy stream: 3 of 3 reads before the synchronize were incomplete (median 0% of elements right), "
            "3 of 3 complete after it") in v.detail
    assert "idle stream: 1 of 3 reads before the synchronize were incomplete" in v.detail
    assert "pinned in 100% of trials" in v.detail and "synchronize the stream" in v.detail
    v = judge(frame(d2h_rows({"busy stream": [0.0, 0.0, 0.0], "idle stream": [1.0, 1.0, 1.0]})))
    assert v.verdict == "depends on whether the stream is busy"
    assert "idle stream: 0 of 3 reads" in v.detail
    v = judge(frame(d2h_rows({"busy stream": [1.0] * 3, "idle stream": [1.0] * 3})))
    assert v.verdict == "does not hold" and "busy stream: 0 of 3 reads" in v.detail
    empty = pd.DataFrame(columns=["setting", "level", "metric", "value", "unit", "repeat", "note"])
    assert judge(empty).verdict == "not measured"


def exchange_rows(a: tuple[float, float] | None, b: tuple[float, float] | None) -> list[dict]:
    """epoch seconds (pin_memory False, True) of case A (bs 64, 0 workers) and B (bs 1024, 6 workers, CPU work)."""
    rows = []
    for (batch, workers, cpu_work), times in (((64, 0, False), a), ((1024, 6, True), b)):
        if times is None:
            continue
        for pin, seconds in zip((False, True), times):
            setting = claims.exchange_setting(batch, workers, cpu_work, pin, 0.1)
            for r in range(3):
                rows += [row(setting, "epoch_s", seconds * (1 + 0.001 * (r - 1)), "s", r, batch),
                         row(setting, "img_per_s", 50_000 / seconds, "img/s", r, batch)]
    return rows


def test_judge_pin_memory_exchange():
    judge = claims.judge_pin_memory_exchange
    v = judge(frame(exchange_rows((10.0, 11.0), (8.0, 7.0))))
    assert v.verdict == "holds"
    assert ("bs 64, 0 workers, .to(device): 10.00 s → 11.00 s with pin_memory (+10.0%; "
            "quoted 6.57 → 7.03 s, +7.0%)") in v.detail
    assert ("bs 1024, 6 workers, .to(device, non_blocking=True), 0.1 s CPU work per step: 8.00 s → 7.00 s "
            "with pin_memory (-12.5%; quoted 5.72 → 5.48 s, -4.2%)") in v.detail
    assert judge(frame(exchange_rows((10.0, 10.1), (8.0, 8.1)))).verdict == "does not hold"
    assert judge(frame(exchange_rows((10.0, 11.0), (8.0, 8.0)))).verdict == "holds in part"
    assert judge(frame(exchange_rows((10.0, 10.0), (8.0, 7.0)))).verdict == "holds in part"
    assert judge(frame(exchange_rows((10.0, 10.15), (8.0, 7.88)))).verdict == "does not hold"   # within ±2%
    assert judge(frame(exchange_rows((10.0, 10.25), (8.0, 7.8)))).verdict == "holds"            # beyond it
    v = judge(frame(exchange_rows((10.0, 11.0), None)))
    assert v.verdict == "not measured" and "10.00 s → 11.00 s" in v.detail


def workers_rows(speeds: dict[int, float], cores: int = 4) -> list[dict]:
    rows = [row("machine", "cpu_count", cores, "cores")]
    for w, ips in speeds.items():
        rows += [row(claims.WORKERS, "img_per_s", ips * f, "img/s", r, w) for r, f in enumerate((0.99, 1.0, 1.01))]
    return rows


def test_judge_workers_vs_cores():
    judge = claims.judge_workers_vs_cores
    v = judge(frame(workers_rows({1: 1000, 2: 1900, 4: 3600, 6: 3650, 8: 3500})))
    assert v.verdict == "holds"
    assert "4 cores; img/s by workers 1: 1,000, 2: 1,900, 4: 3,600, 6: 3,650, 8: 3,500" in v.detail
    assert "95% of the best reached at 4 workers" in v.detail
    assert "best beyond the core count +1.4% over the best within it" in v.detail
    v = judge(frame(workers_rows({1: 1000, 2: 1900, 4: 3600, 6: 4320, 8: 4000})))
    assert v.verdict == "does not hold"
    assert "95% of the best reached at 6 workers" in v.detail and "+20.0%" in v.detail
    v = judge(frame(workers_rows({1: 1000, 2: 1900, 4: 3600})))
    assert v.verdict == "not measured" and "needs counts on both sides of the core count" in v.detail
    assert "95% of the best reached at 4 workers" in v.detail
    assert judge(frame([row("machine", "cpu_count", 4, "cores")])).verdict == "not measured"
    assert judge(frame(workers_rows({2: 1900, 4: 3600, 8: 3744}))).verdict == "holds"           # +4%
    assert judge(frame(workers_rows({2: 1900, 4: 3600, 8: 3816}))).verdict == "does not hold"   # +6%
    assert claims.worker_counts(2) == [1, 2, 3, 4]
    assert claims.worker_counts(16) == [1, 2, 4, 8, 15, 16, 24, 32]
    assert claims.worker_counts(1) == [1, 2]


def collate_rows(works: bool, zero: float, others: tuple[float, float], note: str = "") -> list[dict]:
    rows = [row("collate_fn .to(device), 4 workers (fork)", "works", works, "flag", note=note)]
    for setting, ips in ((claims.COLLATE_ZERO, zero),
                         ("dataloader pipeline, 4 workers, pin_memory, non_blocking", others[0]),
                         ("prefetch pipeline, 4 threads", others[1])):
        rows += [row(setting, "img_per_s", ips, "img/s", r) for r in range(2)]
    return rows


def test_judge_collate_to_gpu():
    judge = claims.judge_collate_to_gpu
    v = judge(frame(collate_rows(True, 3000, (2000, 2500))))
    assert v.verdict == "holds"
    assert "collate_fn .to(device), 4 workers (fork): works" in v.detail
    assert "collate_fn .to(device), 0 workers: 3,000 img/s" in v.detail
    assert "dataloader pipeline, 4 workers, pin_memory, non_blocking: 2,000 img/s (1.50× of it with 0 workers)" in v.detail
    assert "prefetch pipeline, 4 threads: 2,500 img/s (1.20×" in v.detail
    v = judge(frame(collate_rows(True, 1000, (2000, 20000))))
    assert v.verdict == "does not hold" and "(0.05× of it with 0 workers)" in v.detail
    assert judge(frame(collate_rows(True, 3000, (2000, 3500)))).verdict == "does not hold"   # beats only one
    error = "RuntimeError: Cannot re-initialize CUDA in forked subprocess."
    v = judge(frame(collate_rows(False, 3000, (2000, 2500), note=error)))
    assert v.verdict == "does not hold" and f"4 workers (fork): fails with {error}" in v.detail
    assert judge(frame(collate_rows(True, 3000, (2000, 2500))[1:])).verdict == "not measured"


AMP_LABELS = list(claims.AMP_SETTINGS)


def amp_rows(values: dict[str, tuple[float, float]], formats=tuple(claims.FORMATS)) -> list[dict]:
    """precision label -> (img/s, peak MB), the same for every format."""
    return [row(f"{label}; {fmt}", m, v, u, r) for fmt in formats for label, (ips, mem) in values.items()
            for r in range(2) for m, v, u in (("img_per_s", ips, "img/s"), ("peak_mem_mb", mem, "MB"))]


def test_judge_amp():
    judge = claims.judge_amp
    base, amp = (1000.0, 1000.0), (1300.0, 500.0)
    v = judge(frame(amp_rows(dict(zip(AMP_LABELS, (base, base, amp, amp))))))
    assert v.verdict == "memory: holds; speed: holds"
    assert "bfloat16 vs float32, TF32 off (NCHW): memory -50%, speed +30%" in v.detail
    assert "float16 vs float32, TF32 on (channels_last): memory -50%, speed +30%" in v.detail
    assert v.detail.count("vs float32") == 8   # 2 AMP x 2 baselines x 2 formats
    v = judge(frame(amp_rows(dict(zip(AMP_LABELS, (base, base, (1050.0, 800.0), (1050.0, 800.0)))))))
    assert v.verdict == "memory: does not hold; speed: does not hold"
    assert "memory -20%, speed +5%" in v.detail
    # TF32 on is as fast as AMP: the speed-up holds only against TF32 off
    v = judge(frame(amp_rows(dict(zip(AMP_LABELS, (base, (1300.0, 1000.0), amp, amp))))))
    assert v.verdict == "memory: holds; speed: depends on the baseline"
    assert "bfloat16 vs float32, TF32 on (NCHW): memory -50%, speed +0%" in v.detail
    # 'about 50%': a cut of 35-65%; 'about 20%': at least +10%
    v = judge(frame(amp_rows(dict(zip(AMP_LABELS, (base, base, (1120.0, 300.0), (1120.0, 300.0)))))))
    assert v.verdict == "memory: does not hold; speed: holds" and "memory -70%, speed +12%" in v.detail
    v = judge(frame(amp_rows(dict(zip(AMP_LABELS, (base, base, (1080.0, 600.0), (1080.0, 600.0)))))))
    assert v.verdict == "memory: holds; speed: does not hold" and "memory -40%, speed +8%" in v.detail
    nan = dict(zip(AMP_LABELS, ((1000.0, math.nan), (1000.0, math.nan), (1300.0, math.nan), (1300.0, math.nan))))
    v = judge(frame(amp_rows(nan, formats=("NCHW",))))
    assert v.verdict == "not measured" and "needs a CUDA device for peak memory" in v.detail


def test_judge_amp_names_what_the_outcome_depends_on():
    """bfloat16 halves memory, float16 does not, against every baseline and in both formats: the
    outcome depends on the autocast dtype, so the verdict must not blame the baseline and format."""
    base = (1000.0, 1000.0)
    v = claims.judge_amp(frame(amp_rows(dict(zip(AMP_LABELS, (base, base, (1300.0, 500.0), (1300.0, 900.0)))))))
    assert v.verdict == "memory: depends on the autocast dtype; speed: holds", v.verdict
    assert "baseline and format" not in v.verdict, v.verdict


def oom_rows(alloc: dict[str, float], fits: dict[str, int] | None, cap: float = 900.0) -> list[dict]:
    """setting -> peak allocated MB (reserved = 1.2 x allocated, img/s = 1000 - allocated / 10)."""
    rows = []
    for setting, mb in alloc.items():
        k = int(setting.split()[0]) if "accumulated" in setting else 1
        for r in range(2):
            rows += [row(setting, "img_per_s", 1000 - mb / 10, "img/s", r, k),
                     row(setting, "peak_allocated_mb", mb, "MB", r, k),
                     row(setting, "peak_reserved_mb", 1.2 * mb, "MB", r, k)]
    for setting, fit in (fits or {}).items():
        k = int(setting.split()[0]) if "accumulated" in setting else 1
        note = f"cap {cap:,.0f} MB" + ("" if fit else ": out of memory")
        rows.append(row(setting, "fits_under_cap", fit, "flag", level=k, note=note))
    return rows


OOM = list(claims.oom_settings(dataclasses.replace(claims.Scale(), oom_batch=1024)))


def test_judge_oom_fixes():
    judge = claims.judge_oom_fixes
    assert OOM == ["batch 1024", "batch 1024 + empty_cache() every step", "2 × 512 accumulated", "4 × 256 accumulated"]
    alloc = dict(zip(OOM, (1000.0, 1000.0, 600.0, 400.0)))
    v = judge(frame(oom_rows(alloc, dict(zip(OOM, (0, 0, 1, 1))))))
    assert v.verdict == "accumulation: holds; empty_cache: does not hold"
    assert "runs under the cap the plain batch ran out of memory under" in v.detail
    assert "Against batch 1024 (1,000 MB peak allocated, 1,200 MB reserved, 900 img/s; cap 900 MB): " in v.detail
    assert "batch 1024 + empty_cache() every step: peak allocated +0%, reserved +0%, img/s +0%; out of memory under the cap" in v.detail
    assert "2 × 512 accumulated: peak allocated -40%, reserved -40%, img/s +4%; runs under the cap" in v.detail
    assert "4 × 256 accumulated: peak allocated -60%" in v.detail
    # accumulation by 2 cuts too little to fit; by 4 fits
    v = judge(frame(oom_rows(alloc, dict(zip(OOM, (0, 0, 0, 1))))))
    assert v.verdict == "accumulation: depends on the accumulation factor; empty_cache: does not hold"
    # a memory cut that does not fit where the plain batch did not fit either is no fix
    v = judge(frame(oom_rows(dict(zip(OOM, (1000.0, 900.0, 600.0, 400.0))), dict(zip(OOM, (0, 0, 1, 1))))))
    assert v.verdict == "accumulation: holds; empty_cache: does not hold"
    # the plain batch runs under the cap too (the cap did not reproduce the error): only the cut counts
    v = judge(frame(oom_rows(alloc, dict(zip(OOM, (1, 1, 1, 1))))))
    assert v.verdict == "accumulation: holds; empty_cache: does not hold"
    assert "the plain batch did not run out of memory under the cap, so only the cut counts" in v.detail
    # without the cap experiment the memory cut alone decides
    v = judge(frame(oom_rows(dict(zip(OOM, (1000.0, 900.0, 600.0, 900.0))), None)))
    assert v.verdict == "accumulation: depends on the accumulation factor; empty_cache: holds"
    assert "Against batch 1024 (1,000 MB peak allocated, 1,200 MB reserved, 900 img/s): " in v.detail
    assert "cap" not in v.detail
    # a cut must exceed 20% for accumulation and 5% for empty_cache
    v = judge(frame(oom_rows(dict(zip(OOM, (1000.0, 960.0, 820.0, 780.0))), None)))
    assert v.verdict == "accumulation: depends on the accumulation factor; empty_cache: does not hold"
    v = judge(frame(oom_rows(dict(zip(OOM, (math.nan,) * 4)), None)))
    assert v.verdict == "not measured" and "needs a CUDA device" in v.detail
    assert judge(frame(oom_rows(dict(zip(OOM[:2], (1000.0, 1000.0))), None))).verdict == "not measured"


def test_verdicts_from_a_frame_of_several_claims():
    df = pd.concat([frame(pin_rows({1.5: (2.0, 3.0, 1.0)}), "pin-on-the-fly"),
                    frame(workers_rows({1: 1000, 2: 1900, 4: 3600, 6: 3650}), "workers-vs-cores"),
                    pd.DataFrame([{"claim": "amp", "status": "skipped", "error": "needs a CUDA device"},
                                  {"claim": "oom-fixes", "status": "error", "error": "RuntimeError: boom"}])])
    # a failed row of a claim that also has ok rows does not reach the judge
    df = pd.concat([df, pd.DataFrame([{"claim": "pin-on-the-fly", "status": "error", "error": "x",
                                       "setting": "", "metric": "done_ms"}])])
    found = claims.verdicts(df)
    assert list(found) == claims.KEYS
    assert found["pin-on-the-fly"].verdict == "holds" and "1.50×" in found["pin-on-the-fly"].detail
    assert found["workers-vs-cores"].verdict == "holds"
    assert found["amp"] == claims.Verdict("not measured", "needs a CUDA device")
    assert found["oom-fixes"] == claims.Verdict("not measured", "RuntimeError: boom")
    assert found["pageable-blocks"] == claims.Verdict("not measured", "not run")


# --- the experiments that run on a CPU --------------------------------------------------------------

def test_measure_pin_memory_exchange(ctx):
    ctx = scaled(ctx, cpu_work_s=0.01, repeats=2)
    df = frame(claims.measure_pin_memory_exchange(ctx))
    samples = ctx.scale.exchange_samples
    settings = list(dict.fromkeys(df.setting))
    expected = [claims.exchange_setting(b, w, case == 1, pin, 0.01)
                for case, (b, w) in enumerate(ctx.scale.exchange) for pin in (False, True)]
    assert settings == expected and len(settings) == 4
    for setting in settings:
        mine = df[df.setting == setting]
        epoch, ips = mine[mine.metric == "epoch_s"], mine[mine.metric == "img_per_s"]
        assert epoch.repeat.tolist() == ips.repeat.tolist() == [0, 1]
        assert (epoch.value > 0).all() and (epoch.unit == "s").all()
        # one epoch's worth of images per window
        assert (epoch.value.to_numpy() * ips.value.to_numpy()) == pytest.approx([samples] * 2, rel=1e-6)
    batch, _ = ctx.scale.exchange[1]
    steps = math.ceil(samples / batch)
    worked = df[df.setting.str.contains("CPU work") & (df.metric == "epoch_s")]
    assert len(worked) == 4 and (worked.value >= steps * 0.01).all()
    assert set(df[df.setting.str.contains("CPU work")].level) == {batch}
    v = claims.judge_pin_memory_exchange(df)
    assert v.verdict in ("holds", "does not hold", "holds in part") and "quoted 6.57 → 7.03 s" in v.detail


def test_measure_workers_vs_cores(ctx):
    df = frame(claims.measure_workers_vs_cores(ctx))
    cores = os.cpu_count()
    machine = df[df.setting == "machine"]
    assert machine.metric.tolist() == ["cpu_count"] and machine.value.tolist() == [cores]
    speed = df[df.setting == claims.WORKERS]
    assert (speed.metric == "img_per_s").all() and (speed.value > 0).all()
    assert speed.groupby("level")["repeat"].apply(list).to_dict() == {w: [0, 1] for w in ctx.scale.workers}
    v = claims.judge_workers_vs_cores(df)
    assert v.verdict in (VALID if cores < max(ctx.scale.workers) else ("not measured",))
    assert f"{cores} cores; img/s by workers 1: " in v.detail


def test_measure_collate_to_gpu(ctx):
    df = frame(claims.measure_collate_to_gpu(ctx))
    works = df[df.metric == "works"]
    method = torch.multiprocessing.get_start_method()
    assert works.setting.tolist() == [f"collate_fn .to(device), 1 workers ({method})"]
    assert works.value.tolist() == [1.0] and works.note.tolist() == [""]
    speed = df[df.metric == "img_per_s"]
    assert list(dict.fromkeys(speed.setting)) == [claims.COLLATE_ZERO,
                                                  "dataloader pipeline, 1 workers, pin_memory, non_blocking",
                                                  "prefetch pipeline, 1 threads"]
    assert (speed.groupby("setting").size() == ctx.scale.repeats).all() and (speed.value > 0).all()
    v = claims.judge_collate_to_gpu(df)
    assert v.verdict in VALID and f"1 workers ({method}): works" in v.detail


def test_measure_amp_on_cpu(ctx):
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    ctx = scaled(ctx, train_batch=4, train_steps=1, warmup=0, repeats=1)
    df = frame(claims.measure_amp(ctx))
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == saved
    expected = {f"{label}; {fmt}" for label in claims.AMP_SETTINGS for fmt in claims.FORMATS}
    assert set(df.setting) == expected and len(expected) == 8
    assert df.groupby(["setting", "metric"]).size().eq(1).all() and len(df) == 16
    ips, mem = df[df.metric == "img_per_s"], df[df.metric == "peak_mem_mb"]
    assert (ips.value > 0).all() and mem.value.isna().all()   # no peak memory without CUDA
    v = claims.judge_amp(df)
    assert v.verdict == "not measured" and "needs a CUDA device for peak memory" in v.detail


def test_measure_oom_fixes_on_cpu(ctx):
    ctx = scaled(ctx, oom_batch=8, accumulate=(2, 4), train_steps=1, warmup=0, repeats=1)
    df = frame(claims.measure_oom_fixes(ctx))
    assert "fits_under_cap" not in set(df.metric)
    assert list(dict.fromkeys(df.setting)) == ["batch 8", "batch 8 + empty_cache() every step",
                                               "2 × 4 accumulated", "4 × 2 accumulated"]
    assert df.groupby("setting", sort=False)["level"].first().tolist() == [1, 1, 2, 4]
    assert set(df.metric) == {"img_per_s", "peak_allocated_mb", "peak_reserved_mb"}
    assert (df[df.metric == "img_per_s"].value > 0).all()
    assert df[df.metric != "img_per_s"].value.isna().all()
    assert claims.judge_oom_fixes(df) == claims.Verdict("not measured", "needs a CUDA device for peak memory")


# --- Trainer: gradient accumulation -----------------------------------------------------------------

def trained(accumulate: int, batch: int, eval_mode: bool = True, precision: str = "float32") -> tuple[dict, dict]:
    """(initial, after one step) parameters of a small model trained one step on a fixed batch."""
    torch.manual_seed(0)
    trainer = harness.Trainer("resnet9-w0.25", torch.device("cpu"), precision, channels_last=False,
                              accumulate=accumulate)
    if eval_mode:
        trainer.model.eval()   # BatchNorm on running stats: the micro-batches see the same function
    g = torch.Generator().manual_seed(1)
    images, labels = torch.randn(batch, 3, 32, 32, generator=g), torch.randint(0, 10, (batch,), generator=g)
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer(images, labels)
    return before, {k: v.detach().clone() for k, v in trainer.model.named_parameters()}


@pytest.mark.parametrize("accumulate,batch", [(4, 16), (4, 10), (3, 10)])   # 10 in 4: chunks 3, 3, 3, 1
def test_accumulation_gives_the_whole_batch_gradient(accumulate, batch):
    start, whole = trained(1, batch)
    start_k, accumulated = trained(accumulate, batch)
    assert all(torch.equal(start[k], start_k[k]) for k in start)   # the same initial weights
    moved = max((whole[k] - start[k]).abs().max().item() for k in start)
    assert moved > 1e-3   # the step changed the weights: equality below is not trivial
    for k in start:
        assert torch.allclose(accumulated[k], whole[k], rtol=1e-4, atol=1e-6), k


def test_accumulation_really_splits_the_batch():
    """In train mode BatchNorm normalizes each micro-batch by its own statistics: a different step."""
    _, whole = trained(1, 16, eval_mode=False)
    _, accumulated = trained(4, 16, eval_mode=False)
    assert max((whole[k] - accumulated[k]).abs().max().item() for k in whole) > 1e-5


def test_trainer_half_precisions_step_on_cpu():
    start, after = trained(2, 8, precision="bfloat16")
    assert all(torch.isfinite(v).all() for v in after.values())
    assert any(not torch.equal(start[k], after[k]) for k in start)


@pytest.mark.parametrize("options,message", [
    (dict(precision="fp16"), "precision='fp16'"), (dict(precision="float64"), "precision='float64'"),
    (dict(accumulate=0), "accumulate=0"), (dict(accumulate=-2), "accumulate=-2")])
def test_trainer_rejects_bad_options(options, message):
    kwargs = dict(precision="float32", accumulate=1) | options
    with pytest.raises(ValueError, match=message):
        harness.Trainer("resnet9-w0.25", torch.device("cpu"), kwargs["precision"], False, kwargs["accumulate"])


# --- claims.run ---------------------------------------------------------------------------------------

class Progress:
    def __init__(self):
        self.described, self.done = [], 0

    def set_description(self, text):
        self.described.append(text)

    def update(self, n):
        self.done += n


def test_run_skips_cuda_claims_and_turns_a_failure_into_an_error_row():
    def boom(ctx):
        raise RuntimeError("boom")

    ok_rows = [row("machine", "cpu_count", 4, "cores"), row(claims.WORKERS, "img_per_s", 100, "img/s", 0, 2)]
    failing = dataclasses.replace(claims.CLAIMS[7], needs_cuda=False, measure=boom)   # key "amp"
    fine = dataclasses.replace(claims.CLAIMS[5], measure=lambda ctx: ok_rows)
    ctx = claims.Context(torch.device("cpu"), PipelineConfig(device="cpu"), claims.Scale.tiny())
    written, progress = [], Progress()
    claims.run([claims.CLAIMS[0], failing, fine, claims.CLAIMS[8]], ctx, written.append, progress)
    assert progress.described == ["pageable-blocks", "amp", "workers-vs-cores", "oom-fixes"] and progress.done == 4
    assert written[0] == {"claim": "pageable-blocks", "device": "cpu", "status": "skipped", "error": "needs a CUDA device"}
    assert written[1] == {"claim": "amp", "device": "cpu", "status": "error", "error": "RuntimeError: boom"}
    assert written[2:4] == [{"claim": "workers-vs-cores", "device": "cpu", **r, "status": "ok", "error": ""} for r in ok_rows]
    assert written[4] == {"claim": "oom-fixes", "device": "cpu", "status": "skipped", "error": "needs a CUDA device"}
    assert len(written) == 5
    found = claims.verdicts(pd.DataFrame(written))
    assert found["amp"] == claims.Verdict("not measured", "RuntimeError: boom")
    assert found["pageable-blocks"] == claims.Verdict("not measured", "needs a CUDA device")
    assert found["workers-vs-cores"].verdict == "not measured"   # 2 workers, 4 cores: nothing beyond


def test_every_cuda_claim_is_skipped_on_cpu():
    ctx = claims.Context(torch.device("cpu"), PipelineConfig(device="cpu"), claims.Scale.tiny())
    cuda_only = [c for c in claims.CLAIMS if c.needs_cuda]
    assert [c.key for c in claims.CLAIMS if not c.needs_cuda] == ["workers-vs-cores"]
    written = []
    claims.run(cuda_only, ctx, written.append)
    assert [(w["claim"], w["status"], w["error"]) for w in written] == \
        [(c.key, "skipped", "needs a CUDA device") for c in cuda_only]


# --- the CLI end to end -----------------------------------------------------------------------------

def claims_cli(out, root, *extra):
    return cli.main(["claims", *extra, "--quick", "--device", "cpu", "--out", str(out),
                     "--data-root", str(root), "--source", "synthetic"])


def test_cli_claims_end_to_end(tmp_path, synthetic_root):
    out = tmp_path / "claims"
    assert claims_cli(out, synthetic_root, "--claims", "6") == 0
    csv, md = out / "claims.csv", out / "CLAIMS.md"
    assert (out / "COMMAND.txt").read_text().startswith("pipebench claims --claims 6 --quick --device cpu")
    assert (out / "environment.json").is_file()
    raw = pd.read_csv(csv)
    assert list(raw.columns) == claims.COLUMNS
    assert set(raw.claim) == {"workers-vs-cores"} and (raw.status == "ok").all() and raw.run_id.nunique() == 1
    assert (raw.device == "cpu").all() and (raw.torch == torch.__version__).all()
    assert len(raw) == 1 + len(claims.Scale.tiny().workers) * claims.Scale.tiny().repeats

    text = md.read_text()
    found = claims.verdicts(claims.read(csv))
    table = [line for line in text.splitlines() if line.startswith("| ") and line.split("|")[1].strip().isdigit()]
    assert len(table) == len(claims.CLAIMS) == 10
    for i, (c, line) in enumerate(zip(claims.CLAIMS, table), 1):
        assert line == f"| {i} | {c.statement} | **{found[c.key].verdict}** |"
        assert f"## {i}. `{c.key}`" in text
    assert [found[k].verdict for k in claims.KEYS].count("not measured") >= 8
    if os.cpu_count() < max(claims.Scale.tiny().workers):
        assert found["workers-vs-cores"].verdict in VALID
    assert f"**Verdict: {found['workers-vs-cores'].verdict}.** {found['workers-vs-cores'].detail}" in text
    assert "**Verdict: not measured.** not run" in text
    assert "| dataloader loader-only" in text and "cpu_count" in text
    assert "no GPU" in text and f"torch {torch.__version__}" in text

    # --report-only rebuilds the same CLAIMS.md from the CSV, measuring nothing
    md.unlink()
    assert cli.main(["claims", "--report-only", "--out", str(out)]) == 0
    assert md.read_text() == text
    assert pd.read_csv(csv).equals(raw)

    # a second run of the claim (and a skipped one) into the same folder: only the latest rows count
    assert claims_cli(out, synthetic_root, "--claims", "6,1") == 0
    raw2 = pd.read_csv(csv)
    assert raw2.run_id.nunique() == 2 and len(raw2) == 2 * len(raw) + 1
    latest = claims.read(csv)
    assert latest.run_id.nunique() == 1 and latest.run_id.iloc[0] == raw2.run_id.iloc[-1]
    assert len(latest[latest.claim == "workers-vs-cores"]) == len(raw)
    assert latest[latest.claim == "pageable-blocks"].error.tolist() == ["needs a CUDA device"]
    text2 = md.read_text()
    assert "**Verdict: not measured.** needs a CUDA device" in text2
    speed = [line for line in text2.splitlines() if line.startswith("| dataloader loader-only")]
    assert len(speed) == len(claims.Scale.tiny().workers)
    assert [line.split("|")[-2].strip() for line in speed] == [str(claims.Scale.tiny().repeats)] * len(speed)   # n
    commands = (out / "COMMAND.txt").read_text().splitlines()
    assert [c.split()[:4] for c in commands] == [["pipebench", "claims", "--claims", "6"],
                                                ["pipebench", "claims", "--report-only", "--out"],
                                                ["pipebench", "claims", "--claims", "6,1"]]


def test_cli_claims_second_run_in_the_same_second_replaces_the_first(tmp_path, synthetic_root, monkeypatch):
    """Two runs of a claim into one folder: CLAIMS.md uses only the latest, even when both started
    within the same second (a skipped claim runs in milliseconds)."""
    class Frozen(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=tz)

    monkeypatch.setattr(claims_command, "dt", types.SimpleNamespace(datetime=Frozen, timezone=dt.timezone))
    out = tmp_path / "claims"
    for _ in range(2):
        claims_cli(out, synthetic_root, "--claims", "1")
    assert len(pd.read_csv(out / "claims.csv")) == 2
    assert len(claims.read(out / "claims.csv")) == 1


def test_claims_csv_holds_no_cell_a_spreadsheet_reads_as_a_formula(tmp_path, synthetic_root, monkeypatch):
    """Issue 69: claims.csv was written unguarded (a host named `=cmd|...` became a formula there)."""
    name = "=cmd|' /C calc'!A0"
    environment = results.environment
    monkeypatch.setattr(claims_command.results, "environment", lambda: {**environment(), "hostname": name})
    out = tmp_path / "claims"
    assert claims_cli(out, synthetic_root, "--claims", "1") == 0
    assert pd.read_csv(out / "claims.csv").hostname.tolist() == ["'" + name]
    assert claims.read(out / "claims.csv").hostname.tolist() == [name]


def test_cli_report_only_needs_claims_csv(tmp_path):
    with pytest.raises(SystemExit, match="needs --out DIR holding claims.csv"):
        cli.main(["claims", "--report-only", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="needs --out DIR holding claims.csv"):
        cli.main(["claims", "--report-only"])
    assert not (tmp_path / "CLAIMS.md").exists()


@pytest.mark.parametrize("text, said", [("", "is empty: not a pipebench results file"),
                                        ("a,b\n1,2\n", "is not a pipebench results file (no column run_id, "),
                                        (",".join(claims.COLUMNS) + "\n", "holds no row: no claim was measured")])
def test_cli_report_only_refuses_a_claims_csv_it_cannot_read(tmp_path, text, said):
    """Fault campaign: an empty claims.csv (EmptyDataError), one that is not a claims file (KeyError 'claim'), one
    of a header alone (IndexError) ended in tracebacks; each is one line, and nothing is written."""
    csv = tmp_path / "claims.csv"
    csv.write_text(text)
    with pytest.raises(SystemExit) as e:
        cli.main(["claims", "--report-only", "--out", str(tmp_path)])
    assert e.value.code.startswith(f"pipebench claims: {csv} {said}") and "\n" not in e.value.code
    assert sorted(p.name for p in tmp_path.iterdir()) == ["claims.csv"]


def test_cli_report_only_leaves_out_a_torn_last_line(tmp_path):
    """Fault campaign: a claims.csv whose last row was cut mid-write (no newline) was read as a row, and its claim's
    latest run became that fragment; it is left out with a warning, as results.csv's is."""
    writer = results.CsvWriter(tmp_path / "claims.csv", results.environment(), "run-1", columns=claims.COLUMNS)
    ctx = claims.Context(torch.device("cpu"), PipelineConfig(device="cpu"), claims.Scale.tiny())
    claims.run(claims.select(["1", "2"]), ctx, writer.write)
    with open(tmp_path / "claims.csv", "a") as f:
        f.write("run-2,2026-12-06T18:19:35+00:00,pageable-blocks,")
    with pytest.warns(UserWarning, match=r"claims.csv: its last line is torn \(48 bytes without a newline\); left out"):
        assert cli.main(["claims", "--report-only", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "CLAIMS.md").read_text().count("**Verdict: not measured.** needs a CUDA device") == 2


@pytest.mark.parametrize("bad", ["0", "11", "6,nope", "pinned"])
def test_cli_rejects_a_bad_claims_value(bad, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["claims", "--claims", bad, "--device", "cpu", "--out", str(tmp_path / "x")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--claims" in err and repr(bad.split(",")[-1]) in err
    assert not (tmp_path / "x").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cli_claims_on_cuda_without_a_gpu_exits_with_the_reason(tmp_path):
    with pytest.raises(SystemExit, match="CUDA is not available"):
        cli.main(["claims", "--claims", "1", "--device", "cuda", "--out", str(tmp_path / "x")])
    assert not (tmp_path / "x").exists()


def test_read_a_csv_of_skipped_rows_only(tmp_path):
    """`--claims 1` on a CPU: claims.csv holds only skipped rows, every measurement column empty.
    Reading it must not depend on pandas filling text into an all-NaN float column (deprecated:
    pandas says it will raise)."""
    writer = results.CsvWriter(tmp_path / "claims.csv", results.environment(), "run-1", columns=claims.COLUMNS)
    ctx = claims.Context(torch.device("cpu"), PipelineConfig(device="cpu"), claims.Scale.tiny())
    claims.run(claims.select(["1", "2"]), ctx, writer.write)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        df = claims.read(tmp_path / "claims.csv")
    assert df.setting.tolist() == ["", ""] and df.error.tolist() == ["needs a CUDA device"] * 2
    text = claims.write_report(tmp_path / "claims.csv", tmp_path).read_text()
    assert text.count("**Verdict: not measured.** needs a CUDA device") == 2
