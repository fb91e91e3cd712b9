"""The report on hand-built rows with known numbers: how rates and ranges are read, verdicts on
medians, the loader ceiling and its invariant, answers, runs never pooled, escaping, determinism."""
from __future__ import annotations

import errno
import math
import os
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from bench import cli, report, results
from bench.report import formatting, hosts, scaling, summary as report_summary
from bench.report.answers import fed_only_restart_free

RUN = {"run_id": "run@1", "git_commit": "abc123", "boot_id": "boot-1", "gpu": "Test GPU", "batch_size": 512,
       "dtype": "bfloat16", "image_size": 32, "cpus": 16, "num_workers": 15, "status": "ok", "error": "",
       "torch": "2.x", "seconds": 1.0, "steps": 100, "wait_frac": 0.1}


def row(mode, pipeline, rate, model="none", step="", busy=0.0, process=0, repeat=0, **extra) -> dict:
    return {**RUN, "mode": mode, "pipeline": pipeline, "model": model, "step": step, "busy_ms": busy,
            "process": process, "repeat": repeat, "img_per_s": rate, "images": rate, **extra}


def processes(mode, pipeline, rates, **extra) -> list[dict]:
    """One row per (process, window): rates[p][w]."""
    return [row(mode, pipeline, r, process=p, repeat=w, **extra) for p, windows in enumerate(rates)
            for w, r in enumerate(windows)]


def windows(*medians) -> list[list[float]]:
    """Rates for `processes` enough for a verdict: one process of two windows per median given."""
    return [[m, m] for m in medians]


def write(tmp_path, rows, name="run") -> str:
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    path = folder / "results.csv"
    pd.DataFrame(rows).reindex(columns=results.all_columns()).to_csv(path, index=False)
    return str(path)


def load_cells(tmp_path, rows) -> pd.DataFrame:
    return report.cells(report.load([write(tmp_path, rows)]))


def test_a_rate_is_the_median_of_windows_with_the_range_of_process_medians(tmp_path):
    c = load_cells(tmp_path, processes("loader", "p", [[100, 110, 120], [200, 210, 220]]))
    (cell,) = c.itertuples()
    assert (cell.img_per_s, cell.lo, cell.hi, cell.n, cell.p) == (160, 110, 210, 6, 2)
    one = load_cells(tmp_path, processes("loader", "p", [[100, 110, 120]]))
    assert (one.lo.iloc[0], one.hi.iloc[0], one.p.iloc[0]) == (100, 120, 1)   # one process: its windows' range


def r(median, lo=None, hi=None, p=3, w=2, w_hi=None, kept_up=False, drift=0.0):
    """A cell (or what loader-only delivered at a step time: `kept_up`) with known numbers: p processes
    of w (to w_hi) windows each, the largest move of one process's windows `drift`."""
    return SimpleNamespace(img_per_s=median, lo=median if lo is None else lo, hi=median if hi is None else hi, p=p,
                           w=w, w_hi=w if w_hi is None else w_hi, dropped=0, kept_up=kept_up, step_ms=1.0, drift=drift)


@pytest.mark.parametrize("e2e,model,loader,label", [
    (r(49_000), r(50_000), r(100_000, kept_up=True), "fed"),
    (r(47_500), r(50_000), r(100_000, kept_up=True), "fed"),                 # exactly 95 %
    (r(47_380, 46_000, 49_000), r(50_000, 48_500, 51_000), None, "inconclusive"),   # 94.76 %, ranges overlap: never fed
    (r(41_000, 40_000, 42_000), r(50_000, 49_000, 51_000), r(1e6, kept_up=True), "slower than both"),   # 82 %, apart
    (r(9_800), r(50_000), r(10_000), "input-bound"),                         # at what loader-only delivered, behind
    (r(12_700), r(50_000), r(10_000, 8_000, 13_000), "input-bound"),        # within its range
    (r(13_500), r(50_000), r(10_000, 8_000, 13_000), "inconclusive"),       # above it: two-sided, never input-bound
    (r(20_000), r(50_000), r(80_000, kept_up=True), "slower than both"),
    (r(20_000), r(50_000), None, "not fed, cause not measured"),
    (r(52_000, 51_500, 52_500), r(50_000, 49_800, 50_200), None, "inconclusive (e2e above model-only)"),   # never fed
    (r(50_900, 50_800, 51_000), r(50_000, 49_800, 50_200), None, "inconclusive (e2e above model-only)"),   # every process above, by over 1%
    (r(50_300, 50_201, 50_400), r(50_000, 49_800, 50_200), None, "fed"),    # every process above, by at most 1%
    (r(50_400, 50_000, 51_000), r(50_000, 49_800, 50_200), None, "fed"),    # one process above, the others among
    (r(50_007, 50_002, 50_009), r(50_000, 49_995, 50_004), None, "fed"),    # as fast as model-only (x4-32px's vit-s4)
    (r(49_900, 49_000, 50_300), r(50_000, 49_800, 50_200), None, "fed"),    # above its top, not every process
    (r(49_900, 49_000, 50_200), r(50_000, 49_800, 50_200), None, "fed"),    # at its top, not above
    (r(49_000, drift=0.06), r(50_000), None, "inconclusive (noisy)"),       # a process's windows moved 6 %
    (r(40_000, drift=-0.42), r(50_000), None, "inconclusive (noisy)"),      # 80 %: within the move of 95 %
    (r(20_000, drift=-0.42), r(50_000), None, "not fed, cause not measured"),   # 40 %: far below, whatever the move
    (r(49_000), r(50_000, drift=0.92), None, "inconclusive (noisy)"),       # model-only's windows moved
    (r(49_000, drift=0.05), r(50_000, drift=-0.05), None, "fed"),           # 5 %: within the margin
    (r(48_000, 46_000, 49_000), r(50_000, 49_000, 50_500), None, "inconclusive"),   # median 96 %, lowest process 92 %
    (r(48_000, 46_500, 49_000), r(50_000, 49_000, 50_500), None, "fed"),    # lowest process exactly 93 %
    (r(49_000, p=1), r(50_000), None, report.TOO_FEW),                      # one process: no verdict
    (r(49_000, p=2), r(50_000), None, report.TOO_FEW),                      # two processes: no verdict either
    (r(49_000), r(50_000, p=2), None, report.TOO_FEW),                      # nor two of model-only
    (r(49_000, w=1), r(50_000), None, report.TOO_FEW),                      # a process of one window
    (r(49_000), r(50_000, w=1, w_hi=3), None, report.TOO_FEW),              # in model-only too
])
def test_verdicts_rest_on_medians_and_refuse_the_impossible(e2e, model, loader, label):
    assert report.verdict(e2e, model, loader)[0] == label


def test_a_thin_verdict_says_what_the_cells_had():
    assert report.verdict(r(49_000, p=2, w=1), r(50_000, p=2, w=1), None)[1].startswith(
        "thin: 2 processes, 1 window per process; a verdict needs 3 processes of 2 windows each")
    assert report.verdict(r(49_000, p=2), r(50_000, w=1, w_hi=2), None)[1].startswith(
        "thin: e2e 2 processes, model-only a process of 1 window;")


def test_a_short_window_is_left_out_alone_and_its_cell_keeps_its_verdict(tmp_path):
    """A window under the run's minimum is dropped, not its cell (it used to make the whole cell "too
    few measurements"); the reason says so; a cell it leaves thin says so."""
    rows = [*processes("model", "none", windows(50_000, 50_000, 50_000), model="m", step="eager", min_window_s=0.5),
            *processes("e2e", "p", windows(49_000, 49_000, 49_000), model="m", step="eager", min_window_s=0.5),
            row("e2e", "p", 90_000, model="m", step="eager", process=2, repeat=2, seconds=0.1, min_window_s=0.5)]
    c = report.cells(report.load([write(tmp_path, rows)]))
    e2e = c[c["mode"] == "e2e"].iloc[0]
    assert (e2e.img_per_s, e2e.n, e2e.p, e2e.w, e2e.dropped) == (49_000, 6, 3, 2, 1)
    (s,) = report.situations(c).itertuples()
    assert s.verdict == "fed" and s.why.endswith("(1 window shorter than the run's minimum left out)")
    rows[-3]["seconds"] = 0.2   # process 2 left with one window of e2e: thin, and named so
    (s,) = report.situations(report.cells(report.load([write(tmp_path, rows)]))).itertuples()
    assert s.verdict == report.TOO_FEW and s.why.startswith("thin: e2e a process of 1 window;")


def test_the_table_names_a_thin_dataloader_never_calls_it_absent(tmp_path):
    """The cell said "(no `dataloader` here)" for a `dataloader` that ran in too few processes."""
    rows = [*processes("model", "none", windows(50_000, 50_000, 50_000), model="m", step="compile"),
            *processes("e2e", "resident", windows(49_500, 49_500, 49_500), model="m", step="compile"),
            *processes("e2e", "dataloader", windows(10_000, 10_000), model="m", step="compile")]
    report.write([write(tmp_path, rows)], tmp_path / "out")
    text = (tmp_path / "out" / "SUMMARY.md").read_text()
    (line,) = [line for line in text.splitlines() if line.startswith("| `m`")]
    assert line.split("|")[2].strip() == "`resident` (`dataloader` thin: e2e 2 processes)"
    assert "no `dataloader` here" not in text and "thin: too few processes or windows for a verdict" in text
    rows = [r for r in rows if r["pipeline"] != "resident"]   # every pipeline thin: the cell says why, once
    report.write([write(tmp_path, rows)], tmp_path / "out")
    text = (tmp_path / "out" / "SUMMARY.md").read_text()
    assert "| `m` compile (50k)          | thin: e2e 2 processes |" in text


def test_every_plan_times_enough_processes_and_windows_for_a_verdict():
    """Each grid of bench/plans/ that runs e2e (beside model-only: a verdict) gives every cell
    MIN_PROCESSES processes of MIN_WINDOWS windows (the reference plans ran one window per process:
    no drift seen)."""
    from bench.results import settings
    from bench.running import plan
    parser = cli.build_parser()
    plans = sorted((Path(__file__).resolve().parents[1] / "bench" / "plans").glob("*.json"))
    assert len(plans) >= 10
    for path in plans:
        for tokens in cli.config_grids(path, parser):
            o = parser.parse_args(["sweep", *tokens])
            if "e2e" in (o.mode or []):
                assert (o.processes or settings.declared()["processes"].on("cuda")) >= plan.MIN_PROCESSES, path.name
                assert (o.repeats or 3) >= plan.MIN_WINDOWS, path.name


def test_the_loader_ceiling_is_where_the_pipeline_falls_behind_and_e2e_above_loader_only_is_flagged(tmp_path):
    rows = [*processes("loader", "p", [[80_000], [82_000]], busy=0.0),     # idle GPU
            *processes("loader", "p", [[95_000], [97_000]], busy=1.0),     # behind a 1-ms step (512k)
            *processes("loader", "p", [[93_000], [94_000]], busy=2.0),     # behind a 2-ms step (256k)
            *processes("loader", "p", [[62_000], [63_000]], busy=8.0),     # kept up with an 8-ms step (64k)
            *processes("model", "none", windows(300_000, 300_000, 300_000), model="m", step="compile"),
            *processes("e2e", "p", windows(99_000, 100_000, 99_500), model="m", step="compile"),
            *processes("loader", "q", [[90_000], [92_000]]),                # idle GPU
            *processes("loader", "q", [[63_500], [63_600]], busy=8.0),      # kept up at its only level
            *processes("e2e", "q", windows(60_000, 61_000, 60_500), model="m", step="compile")]
    c = report.cells(report.load([write(tmp_path, rows)]))
    cap = report.ceilings(c).set_index("pipeline")
    # the share of batch / t crosses 95 % between 2 ms (0.365) and 8 ms (0.977), log-linear in log t
    f = math.log(0.95 / (93_500 / 256_000)) / math.log((62_500 / 64_000) / (93_500 / 256_000))
    assert cap.loc["p"].img_per_s == pytest.approx(0.95 * 512 / (2e-3 * 4 ** f))
    assert (cap.loc["p"].lo, cap.loc["p"].hi, cap.loc["p"].bound) == (62_000, 94_000, "")
    assert cap.loc["p"].levels == "crosses 95% between 2 and 8 ms" and cap.loc["p"].idle == 81_000
    assert cap.loc["q"].img_per_s == 63_550 and cap.loc["q"].bound == "≥ "   # a lower bound: kept up everywhere
    s = report.situations(c).set_index("pipeline")
    # the model's step (1.71 ms) lies between p's 1- and 2-ms levels, where p delivered at most ~94.7k
    assert s.loc["p"].above_loader and s.loc["p"].verdict == "inconclusive"
    # q: between the idle GPU and 8 ms (linear in t) it delivered ~85k and fell behind; e2e far below
    assert not s.loc["q"].above_loader and s.loc["q"].verdict == "slower than both"
    text = report.write([tmp_path / "run" / "results.csv"], tmp_path / "out").read_text()
    assert "Loader-only does not hold here" in text and "`p` e2e 99,500 > loader-only" in text
    assert "≥ 63,550" in text


def ladder(tmp_path, name, shares: dict, batch=256, idle=33_500) -> pd.Series:
    """One pipeline's ceiling from busy levels {ms: share of batch / ms delivered}, two processes."""
    rows = processes("loader", "p", [[idle], [idle]], batch_size=batch)
    for ms, share in shares.items():
        rate = share * batch / (ms / 1e3)
        rows += processes("loader", "p", [[rate], [rate]], busy=ms, batch_size=batch)
    return report.ceilings(report.cells(report.load([write(tmp_path, rows, name)]))).iloc[0]


def test_the_loader_ceiling_has_no_cliff():
    """Two points of share at one level move the ceiling by about as much, never 5x (the 224-px case
    of the reference run: 78.1 % of a 32-ms step's rate at 16 cores, 80.6 % at 4)."""
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        below = ladder(tmp, "a", {16.0: 0.40, 32.0: 0.781})
        above = ladder(tmp, "b", {16.0: 0.40, 32.0: 0.806})
        assert below.img_per_s == pytest.approx(0.781 * 8_000) and above.img_per_s == pytest.approx(0.806 * 8_000)
        for level in (1.0, 2.0, 4.0):   # the share at one level crossing 95 % moves the ceiling a little
            fell = ladder(tmp, f"c{level}", {1.0: 0.2, 2.0: 0.5, 4.0: 0.9, 8.0: 1.0} | {level: 0.94})
            kept = ladder(tmp, f"d{level}", {1.0: 0.2, 2.0: 0.5, 4.0: 0.9, 8.0: 1.0} | {level: 0.96})
            assert 0.9 < kept.img_per_s / fell.img_per_s < 1.15, level


def test_a_busy_level_is_read_at_its_idle_time_and_its_stretch_is_shown(tmp_path):
    """The headspace curve's x is the step's time on an idle GPU: the share of batch / t includes the
    stretch beside the pipeline (the contention), which the headspace table shows. Rows from before
    the step kept its work read its measured time (to which it was refit)."""
    rows = [*processes("loader", "p", [[100_000], [100_000]], busy=2.0, busy_step_ms=2.5, busy_idle_ms=2.02,
                       busy_stretch=1.25, busy_units=80),
            *processes("loader", "old", [[100_000], [100_000]], busy=2.0, busy_step_ms=2.1),
            *processes("loader", "p", [[900_000], [900_000]])]   # the idle GPU: a headspace table has two levels
    c = report.cells(report.load([write(tmp_path, rows)]))
    new, old = (next(report.levels(c[c.pipeline == p]).itertuples()) for p in ("p", "old"))
    assert new.t == 2.02 and new.cap == pytest.approx(512 / 2.02e-3) and old.t == 2.1
    assert "step ×1.25" in report.write([write(tmp_path, rows)], tmp_path / "out").read_text()


def test_a_level_is_read_against_the_step_beside_a_null_pipeline_where_that_was_recorded(tmp_path):
    """The busy step stretches in the harness's loop beside no pipeline at all (3-4.5 % on an H100):
    timed beside a null pipeline (`busy_null_ms`), that is what the step allows, so a pipeline that
    delivers it reads 100 % and is never the limit, where against its idle time it would read 96 %;
    the headspace table shows the step alone as its last row."""
    null_ms = 2.0 * 1.04
    rows = [*processes("loader", "p", [[512 / null_ms * 1e3], [512 / null_ms * 1e3]], busy=2.0, busy_step_ms=2.1,
                       busy_idle_ms=2.0, busy_null_ms=null_ms, busy_stretch=1.05, busy_units=80),
            *processes("loader", "p", [[900_000], [900_000]])]
    c = report.cells(report.load([write(tmp_path, rows)]))
    level = next(report.levels(c[c.pipeline == "p"]).itertuples())
    assert level.t == null_ms and level.share == pytest.approx(1.0)
    text = report.write([write(tmp_path, rows)], tmp_path / "out").read_text()
    assert re.search(r"\| \(the step alone, beside a null pipeline\) +\| — +\| 246,154, step ×1\.04 +\|", text)


def test_ties_are_within_the_between_process_range():
    a, b = r(100, 95, 105), r(108, 106, 110)
    assert report.ties(a, b) and not report.ties(r(100, 99, 101), r(108, 107, 109))


def situation(tmp_path, e2e: dict, loaders: dict, model=50_000) -> str:
    """The answer for one model and its pipelines, each measured loader-only beside a busy step as
    long as the model's (what names a cause on a GPU)."""
    rows = [*processes("model", "none", windows(model, model, model), model="m", step="eager")]
    for name, rate in e2e.items():
        rows += processes("e2e", name, windows(rate, rate, rate), model="m", step="eager")
        rows += processes("loader", name, [[loaders[name]], [loaders[name]]], busy=RUN["batch_size"] / model * 1e3)
    c = report.cells(report.load([write(tmp_path, rows)]))
    return report.answers(c)[0]


def test_the_answer_names_no_winner_when_the_model_is_the_limit(tmp_path):
    text = situation(tmp_path, {"dataloader": 49_000, "prefetch": 49_500, "resident": 49_800},
                     {"dataloader": 60_000, "prefetch": 600_000, "resident": 2e6})
    assert "the model is the limit" in text and "use `" not in text


def test_the_answer_recommends_a_fed_pipeline_with_its_speed_up(tmp_path):
    text = situation(tmp_path, {"dataloader": 10_000, "prefetch": 49_000, "timm": 30_000},
                     {"dataloader": 10_000, "prefetch": 600_000, "timm": 31_000})
    assert text.startswith("With 16 cores per GPU, `m` at 32 px (eager step) trains at 50,000 img/s alone")
    assert "`dataloader` delivers 10,000 (input-bound, 20.0%)" in text
    assert "`prefetch` keeps it fed: use `prefetch` (4.9× faster than `dataloader`)" in text


def test_the_answer_names_every_pipeline_within_noise_of_the_fastest_and_no_single_winner(tmp_path):
    rows = [*processes("model", "none", windows(50_000, 50_000, 50_000), model="m", step="eager"),
            *processes("e2e", "dataloader", windows(10_000, 10_000, 10_000), model="m", step="eager"),
            *processes("e2e", "prefetch", windows(48_000, 49_500, 48_750), model="m", step="eager"),
            *processes("e2e", "resident", windows(49_000, 49_500, 49_250), model="m", step="eager")]
    text = report.answers(report.cells(report.load([write(tmp_path, rows)])))[0]
    assert "use `resident` or `prefetch` (within noise of each other)" in text


def test_a_dataloader_variant_is_the_baseline_when_the_plain_one_is_absent(tmp_path):
    rows = [*processes("model", "none", windows(50_000, 50_000, 50_000), model="m", step="eager")]
    for pipeline, encoding, rate in (("dataloader", "jpeg", 5_000), ("dataloader", "raw", 8_000), ("dali", "jpeg", 49_000)):
        rows += processes("e2e", pipeline, windows(rate, rate, rate), model="m", step="eager", encoding=encoding)
    text = report.answers(report.cells(report.label_variants(report.load([write(tmp_path, rows)]))))[0]
    assert "`dataloader (encoding=raw)` delivers 8,000" in text and "(6.1× faster than `dataloader`)" in text


def test_the_plain_dataloader_is_the_baseline_beside_its_pinned_variant(tmp_path):
    """Both variants named by their knobs ("pin_memory=False" is the longer label): the baseline is the
    one at the knobs' defaults, not the shortest label."""
    rows = [*processes("model", "none", windows(50_000, 50_000, 50_000), model="m", step="eager")]
    for pinned, rate in ((False, 5_000), (True, 6_000)):
        rows += processes("e2e", "dataloader", windows(rate, rate, rate), model="m", step="eager",
                          pin_memory=pinned, non_blocking=pinned)
    rows += processes("e2e", "dali", windows(30_000, 30_000, 30_000), model="m", step="eager")
    text = report.answers(report.cells(report.label_variants(report.load([write(tmp_path, rows)]))))[0]
    assert "`dataloader (pin_memory=False, non_blocking=False)` delivers 5,000" in text
    assert "6.0× `dataloader`" in text


def test_the_summary_s_short_labels_name_a_switch_that_is_on_and_drop_one_that_is_off():
    from bench.report.summary import short
    assert short("prefetch (prefetch_augment=host)") == "prefetch (host)"
    assert short("dataloader (pin_memory=True, non_blocking=True)") == "dataloader (pin_memory, non_blocking)"
    assert short("dataloader (pin_memory=False, non_blocking=False)") == "dataloader"
    assert short("dali (dali_decoder=cpu, dali_threads=4)") == "dali (cpu, 4)" and short("timm") == "timm"


def test_two_commits_in_one_file_are_two_runs_and_never_pooled(tmp_path):
    old = [dict(x, git_commit="old", run_id="run@0") for x in processes("loader", "p", [[1_000]])]
    new = processes("loader", "p", [[2_000]])
    df = report.load([write(tmp_path, [*old, *new])])
    runs = report.runs(df)
    assert len(runs) == 2 and [len(g) for _, g in runs] == [1, 1]
    start, end = report.marks("summary", "out")
    (tmp_path / "README.md").write_text(f"{start}\n{end}\n")
    with pytest.raises(ValueError, match="a summary, answer or several-GPU block takes one run; these rows hold 2"):
        report.write([tmp_path / "run" / "results.csv"], tmp_path / "out", readme=tmp_path / "README.md")


def test_cell_text_from_a_csv_cannot_break_the_report(tmp_path):
    hostile = "=cmd|' /C calc'!A0 <script>alert(1)</script> [x](http://e) | a\nb `tick`"
    rows = [*processes("loader", "p", [[1_000]]), row("loader", "q", float("nan"), status="error", error=hostile)]
    text = report.write([write(tmp_path, rows)], tmp_path / "out").read_text()
    line = next(line for line in text.splitlines() if "cmd" in line)
    assert "<script>" not in text and "&lt;script&gt;" in line   # no HTML
    assert "`[x](http://e)`" in line and "\\|" in line   # a URL in a code span: no link (an autolink neither), no table break
    assert "[x](http" not in re.sub(r"`[^`\n]*`", "", text.replace("\\`", ""))   # outside code spans


def test_the_report_is_reproducible_and_refuses_files_that_are_not_pipebench_s(tmp_path):
    path = write(tmp_path, [*processes("loader", "p", [[1_000, 1_100]]),
                            *processes("model", "none", [[500]], model="m", step="eager"),
                            *processes("e2e", "p", [[450]], model="m", step="eager")])
    first = report.write([path], tmp_path / "a").read_bytes()
    assert report.write([path], tmp_path / "b").read_bytes() == first
    (tmp_path / "foreign.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="is not a pipebench results file"):
        report.load([tmp_path / "foreign.csv"])


def test_drift_within_a_process_is_listed(tmp_path):
    rows = processes("loader", "p", [[100_000, 80_000, 70_000]])
    text = report.write([write(tmp_path, rows)], tmp_path / "out").read_text()
    assert "drifted more than 5%" in text and "-30.0% from first to last window" in text


def test_time_to_accuracy_lists_every_run_and_compares_pipelines_with_seeds(tmp_path):
    rows = [row("train", name, 300_000, model="m", step="compile", seconds=secs, test_accuracy=acc, seed=seed,
                train_epochs=10, data_source="synthetic-seed0")
            for name, secs, seed, acc in (("resident", 2.0, 0, 0.930), ("resident", 2.1, 1, 0.9359),
                                          ("dataloader", 15.0, 0, 0.932))]
    text = report.write([write(tmp_path, rows)], tmp_path / "out").read_text()
    assert ("**Time to accuracy** (10 epochs of `m`, compile step, 16 cores; median wall time of the epochs, "
            "restarts included): `resident` 2.0 s, `dataloader` 15.0 s; test accuracy on the synthetic data's "
            "test split 93.0–93.5% over all 3 runs") in text
    assert "one pipeline's runs with other seeds span up to 0.59 points (`resident`)" in text


def test_percentages_round_down():
    assert [report.pct(x) for x in (0.9476, 0.95, 0.9999)] == ["94.7%", "95.0%", "99.9%"]


def reference_rows() -> list[dict]:
    """A run like the reference one: copies, model speeds, loader ceilings at two budgets, e2e,
    train, a 224-px part."""
    rows = []
    for payload, stage, rate in (("uint8", "h2d-pinned", 15e6), ("uint8", "h2d-pageable", 4e6), ("float32", "h2d-pinned", 4e6)):
        rows += processes("copy", "none", [[rate]], payload=payload, stage=stage, batch_bytes=512 * 3072)
    rows += processes("copy", "none", [[3e5]], payload="uint8", stage="h2d-pinned", image_size=224)
    for model, speed in (("resnet9-w0.25", 330_000), ("resnet18", 73_000)):
        rows += processes("model", "none", windows(speed, speed, speed), model=model, step="compile")
    for cpus, scale in ((16, 1.0), (4, 0.4)):
        for name, rate in (("dataloader", 33_000), ("prefetch", 1.5e6), ("resident", 3e6), ("timm", 200_000)):
            rows += processes("loader", name, [[rate * scale], [rate * scale]], cpus=cpus, cpu_s_per_kimg=0.1)
    for name, rate in (("dataloader", 33_000), ("resident", 72_000)):
        rows += processes("e2e", name, windows(rate, rate, rate), model="resnet18", step="compile")
    rows += processes("model", "none", [[4_000]], model="torchvision:resnet50", step="eager", image_size=224, batch_size=256)
    for name, rate in (("dali", 40_000), ("dataloader", 3_000)):
        rows += processes("loader", name, [[rate]], image_size=224, batch_size=256, encoding="jpeg")
    rows += [row("train", name, 300_000, model="resnet9-w0.25", step="compile", seconds=secs, test_accuracy=0.93)
             for name, secs in (("resident", 2.0), ("dataloader", 15.0))]
    return rows


def test_the_summary_is_short_has_every_part_and_nothing_not_measured(tmp_path):
    path = write(tmp_path, reference_rows())
    readme = tmp_path / "README.md"
    start, end = report.marks("summary", "out")
    readme.write_text(f"# x\n\n{start}\nold\n{end}\n\nrest\n")
    report.write([path], tmp_path / "out", readme=readme)
    block = readme.read_text().split(start)[1].split(end)[0].strip().splitlines()
    text = "\n".join(block)
    assert len(block) <= 25 and "not measured" not in text
    assert "**Host transfer**" in text and "(copies timed alone" in text
    row = next(line for line in block if line.startswith("| `resnet18`"))
    assert "measured end to end at 32 px" in text and [c.strip() for c in row.split("|")[1:-1]] == [
        "`resnet18` compile (73k)", "`resident` ×2.2"]
    assert "**224-px images**" in text and "**Time to accuracy**" in text and "![loader ceiling by CPU cores" in text
    assert "(out/REPORT.md)" in text   # links made relative to the README
    again = readme.read_text()
    report.write([path], tmp_path / "out", readme=readme)
    assert readme.read_text() == again   # regenerating gives the same bytes
    answer = (tmp_path / "out" / "ANSWER.md").read_text()   # the answers of the printed summary, from the rows
    assert answer.startswith("# Which pipeline keeps the model fed\n\nFrom `run` ([REPORT.md](REPORT.md) for the whole")
    assert "- With 16 cores per GPU, `resnet18` at 32 px (compile step) trains at 73,000 img/s alone" in answer


def test_a_readme_quotes_one_run_s_summary_and_another_run_s_answer(tmp_path):
    """Two generated blocks, each from its own run's report folder; rewriting one leaves the other as it
    was; a README holding no block of the report's folder is refused before anything is written."""
    path = write(tmp_path, reference_rows())
    readme = tmp_path / "README.md"
    (start, end), (answer_start, answer_end) = report.marks("summary", "other"), report.marks("answer", "out")
    readme.write_text(f"# x\n{start}\nold\n{end}\nmid\n{answer_start}\nold answer\n{answer_end}\nrest\n")
    report.write([path], tmp_path / "out", readme=readme)
    text = readme.read_text()
    block = text.split(answer_start)[1].split(answer_end)[0]
    assert block.startswith("\nFrom `run` ([full report](out/REPORT.md); epoch length not recorded):\n\n"
                            "- With 16 cores per GPU, `resnet18`")
    assert "\nold\n" in text and "old answer" not in text and text.endswith("rest\n")
    readme.write_text(f"{start}\n{end}\n")   # no block of "fresh": refused before writing
    with pytest.raises(ValueError, match="holds no block made from fresh"):
        report.write([path], tmp_path / "fresh", readme=readme)
    assert not (tmp_path / "fresh").exists()


def test_one_readme_flag_fills_every_block_of_the_report_the_readme_holds(tmp_path):
    """`--readme`: the summary, answer and several-GPU blocks of the report's folder, each filled; a
    block the README lacks is left out."""
    path = write(tmp_path, reference_rows())
    readme = tmp_path / "README.md"
    marks = [report.marks(kind, "out") for kind in ("summary", "answer", "hosts")]
    readme.write_text("".join(f"{start}\nold\n{end}\n" for start, end in marks))
    assert cli.main(["report", str(Path(path).parent), "--out", str(tmp_path / "out"), "--readme", str(readme)]) == 0
    blocks = [readme.read_text().split(start)[1].split(end)[0] for start, end in marks]
    assert "old" not in "".join(blocks)
    assert blocks[0].startswith("\nFrom one run, `run`") and blocks[1].startswith("\nFrom `run` ([full report]")
    assert blocks[2].startswith("\nFrom `run`: no several-GPU answer: it ran on one GPU only")
    readme.write_text("".join(f"{start}\nold\n{end}\n" for start, end in marks[1:]))   # no summary block
    assert cli.main(["report", str(Path(path).parent), "--out", str(tmp_path / "out"), "--readme", str(readme)]) == 0
    assert "From one run" not in readme.read_text() and "\nold\n" not in readme.read_text()


def test_cli_report_takes_a_run_folder(tmp_path, capsys):
    write(tmp_path, processes("loader", "p", [[1_000]]))
    for _ in range(2):   # a report made again into the same folder records its command once
        assert cli.main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "REPORT.md").is_file()
    assert (tmp_path / "out" / "COMMAND.txt").read_text() == f"pipebench report {tmp_path / 'run'} --out {tmp_path / 'out'}\n"


def test_several_gpus_get_a_scaling_section_and_a_summary_line_saying_where_the_bus_binds(tmp_path):
    """Copies with 1, 2 and 4 GPUs of one host at once (rank 0's rows carry the job's rate): per-GPU
    rates against one GPU's in the report, and in the summary the fewest GPUs at which a copy falls
    below the fastest model step at its size (none here; pageable uint8 at 4 GPUs once made slower)."""
    rows = [*processes("model", "none", [[330_000], [330_000]], model="m", step="compile")]
    for stage, one in (("h2d-pinned", 14e6), ("h2d-pageable", 2e6)):
        for gpus, share in ((1, 1.0), (2, 0.9), (4, 0.6)):
            job = one * gpus * share
            rows += [row("copy", "none", job / gpus, payload="uint8", stage=stage, world_size=gpus, rank=r,
                         world_img_per_s=job, parallel="none" if gpus == 1 else "ddp", repeat=w,
                         peak_gpu_mem_mb=100 + 10 * r)
                     for r in range(gpus) for w in range(2)]
    text = report.write([write(tmp_path, rows)], tmp_path / "out").read_text()
    section = text.split("### Several GPUs")[1]
    pinned4 = next(line for line in section.splitlines() if "h2d-pinned" in line and "|      4 |" in line)
    assert "33,600,000" in pinned4 and "8,400,000" in pinned4 and "60%" in pinned4   # job, per GPU, vs 1 GPU
    assert pinned4.rstrip(" |").endswith("130")   # the largest peak memory of any rank
    assert "- 4 GPUs: per-GPU rate from 60% (copy uint8 h2d-pageable at 32 px, 16 cores per GPU)" in section
    summary = (tmp_path / "out" / "SUMMARY.md").read_text()
    assert ("**Several GPUs of one host** copying at once, per GPU (img/s): uint8 pageable 32 px 2M (1 GPU), "
            "1.8M (2 GPUs), 1.2M (4 GPUs); uint8 pinned 32 px 14M (1 GPU), 12.6M (2 GPUs), 8.4M (4 GPUs) — "
            "every per-GPU copy rate stays above the fastest model step at its size (copies timed alone).") in summary
    slow = [dict(r, world_img_per_s=r["world_img_per_s"] / 10) if r.get("stage") == "h2d-pageable" and r.get("world_size") == 4
            else r for r in rows]   # pageable at 4 GPUs: 120k per GPU, below the 330k step
    report.write([write(tmp_path, slow, name="slow")], tmp_path / "out2")
    assert "it binds for uint8 pageable at 32 px from 4 GPUs." in (tmp_path / "out2" / "SUMMARY.md").read_text()


def test_the_scaling_table_keeps_a_pipeline_s_variants_and_models_apart(tmp_path):
    """DALI with each decoder feeding two models at 1 and 2 GPUs: a line per decoder, model and GPU
    count, each its own rate and named by both, not one line pooling decoders' or models' windows."""
    rows = []
    for model, speed in (("m", 1), ("n", 10)):
        for decoder, one in (("mixed", 4_000), ("cpu", 5_000)):
            for gpus, share in ((1, 1.0), (2, 0.8)):
                rows += [row("e2e", "dali", one * share * speed, model=model, step="compile", dali_decoder=decoder,
                             world_size=gpus, rank=r, world_img_per_s=one * share * speed * gpus,
                             parallel="none" if gpus == 1 else "ddp", repeat=w)
                         for r in range(gpus) for w in range(2)]
    view, said = scaling.scaling(report.load([write(tmp_path, rows)]))
    got = {(r["what"], r["GPUs"]): (r["per GPU"], r["vs 1 GPU"]) for r in view.to_dict("records")}
    cpu, mixed = "`dali (dali_decoder=cpu)` feeding", "`dali (dali_decoder=mixed)` feeding"
    assert got == {(f"{cpu} `m`", 1): ("5,000", "100%"), (f"{cpu} `m`", 2): ("4,000", "80%"),
                   (f"{mixed} `m`", 1): ("4,000", "100%"), (f"{mixed} `m`", 2): ("3,200", "80%"),
                   (f"{cpu} `n`", 1): ("50,000", "100%"), (f"{cpu} `n`", 2): ("40,000", "80%"),
                   (f"{mixed} `n`", 1): ("40,000", "100%"), (f"{mixed} `n`", 2): ("32,000", "80%")}
    assert said == ["- 2 GPUs: per-GPU rate from 80% (e2e dali (dali_decoder=cpu) feeding m at 32 px, 16 cores per GPU) to 80% of "
                    "one GPU's."]


def test_the_scaling_table_compares_loader_only_on_an_idle_gpu_at_every_gpu_count(tmp_path):
    """Loader-only on one GPU idle (100k) and beside a 5-ms busy step (60k), on two GPUs idle only
    (90k each): both GPU counts in the table, each at its idle rate, 90% of one GPU's."""
    rows = [row("loader", "p", 100_000, busy_ms=0), row("loader", "p", 60_000, busy_ms=5, repeat=1)]
    rows += [row("loader", "p", 90_000, busy_ms=0, world_size=2, rank=r, world_img_per_s=180_000) for r in range(2)]
    view = scaling.scaling(report.load([write(tmp_path, rows)]))[0]
    got = {r["GPUs"]: (r["per GPU"], r["vs 1 GPU"]) for r in view.to_dict("records")}
    assert got == {1: ("100,000", "100%"), 2: ("90,000", "90%")}


def prediction_rows(four_gpus=40_000) -> list[dict]:
    """A 32-core host: the step at 300k img/s on one GPU, 200k per GPU on two (all-reduce); the
    pipeline at 100k / 50k / 25k img/s on 16 / 8 / 4 cores of one GPU, e2e 90k there (efficiency
    0.9); two GPUs measured at 80k each (one process), four at `four_gpus` each (processes at
    0.95 and 1.05 of it), the two ranks loader-only at once at 85k each."""
    host = dict(cpu_count=32, dtype="bfloat16", image_size=32, batch_size=512)

    def job(mode, pipeline, per_gpu, gpus, cpus, **extra):
        return [row(mode, pipeline, per_gpu, world_size=gpus, rank=r, world_img_per_s=per_gpu * gpus, cpus=cpus,
                    parallel="ddp" if gpus > 1 and mode != "loader" else "none", **host, **extra) for r in range(gpus)]
    trained = dict(model="m", step="compile")
    rows = [*job("model", "none", 300_000, 1, 16, **trained), *job("model", "none", 200_000, 2, 16, **trained),
            *job("e2e", "p", 90_000, 1, 16, **trained), *job("e2e", "p", 80_000, 2, 16, **trained),
            *job("e2e", "p", four_gpus * 0.95, 4, 8, **trained), *job("e2e", "p", four_gpus * 1.05, 4, 8, process=1, **trained)]
    for cpus, rate in ((16, 100_000), (8, 50_000), (4, 25_000)):
        rows += job("loader", "p", rate, 1, cpus)
    return rows + job("loader", "p", 85_000, 2, 16)


def test_more_gpus_per_host_are_predicted_from_one_gpu_rows_with_the_error_where_measured(tmp_path):
    """The step is its one-GPU rate at every GPU count (the all-reduce left out); the prediction the
    efficiency times the lower of it and the loader at the host's share; the error where measured."""
    rows = prediction_rows()
    view, said = hosts.prediction(report.load([write(tmp_path, rows)]))
    got = {r["GPUs / host"]: r for r in view.to_dict("records")}
    assert {r["model per GPU (1 GPU, no all-reduce)"] for r in got.values()} == {"300,000"}   # not the 2-GPU 200k
    assert got[2]["predicted per GPU"] == "90,000" and got[2]["measured job"] == "160,000"
    assert got[2]["error"] == "+12%" and got[2]["beyond spread"] == "yes" and got[2]["binds"] == "input"
    assert got[4]["cores / GPU"] == 8 and got[4]["predicted per GPU"] == "45,000" and got[4]["error"] == "+12%"
    assert got[4]["beyond spread"] == "yes" and got[8]["measured job"] == "—" and got[8]["beyond spread"] == "—"
    assert got[8]["predicted job"] == "180,000"
    assert "  - `p` with `m`: input-bound already at 2 GPUs per host, the fewest predicted (100,000 img/s per GPU " \
           "on 16 cores, the step 300,000)." in said
    errors = said.index("- Error on the GPU counts measured (predicted / measured - 1, per-GPU e2e medians; beyond "
                        "the spread of the processes' medians unless marked):")
    # the step measured at 2 GPUs only (200k): input-bound, so the same error with it
    assert said[errors + 1] == "  - `p` with `m`: 2 GPUs +12%, 4 GPUs +12%; with the step measured there: 2 GPUs +12%."
    assert said[errors - 1] == ("- The step under DDP, model-only per GPU over one GPU's (the prediction takes 100%): "
                                "`m` 67% at 2 GPUs.")
    assert said[said.index("- 8 GPUs per host, predicted, with the error seen at the most GPUs measured:") + 1] == (
        "  - `p` with `m`: 22,500 img/s per GPU (job 180,000), input binds; at 4 GPUs, the most measured, its error "
        "was +12% (beyond the spread of its processes).")
    assert said[-3].startswith("- Where the input binds, the measured job fell short of the prediction beyond the "
                               "spread of its processes;")
    assert said[-2] == ("  - Below what the same ranks delivered loader-only at once (a DDP step waits for every "
                        "rank's batch): `p` at 2 GPUs: e2e 80,000 per GPU, loader-only 85,000 per GPU with its ranks "
                        "at once, 100,000 alone.")
    assert said[-1] == ("  - Whether the step or the ranks beside each other hold it back is not measured (no "
                        "loader-only rows at that GPU count): `p` at 4 GPUs.")
    crowded = [r for r in rows if not (r["mode"] == "loader" and r["world_size"] == 2)] + [
        dict(r, images=70_000, img_per_s=70_000, world_img_per_s=140_000) for r in rows
        if r["mode"] == "loader" and r["world_size"] == 2]
    said = hosts.prediction(report.load([write(tmp_path, crowded, name="crowded")]))[1]
    assert said[-2:] == ["  - Not below what its ranks delivered loader-only at once (the ranks slowed each other "
                         "without a step): `p` at 2 GPUs: e2e 80,000 per GPU, loader-only 70,000 per GPU with its "
                         "ranks at once, 100,000 alone.",
                         "  - Whether the step or the ranks beside each other hold it back is not measured (no "
                         "loader-only rows at that GPU count): `p` at 4 GPUs."]
    within = prediction_rows(four_gpus=44_000)   # processes at 41,800 and 46,200 about 45,000
    view, said = hosts.prediction(report.load([write(tmp_path, within, name="within")]))
    assert view.set_index("GPUs / host").loc[4, ["error", "beyond spread"]].tolist() == ["+2%", "no"]
    assert "4 GPUs +2% (within the spread);" in said[said.index(next(s for s in said if s.startswith("- Error on"))) + 1]
    even = prediction_rows(four_gpus=45_020)
    view = hosts.prediction(report.load([write(tmp_path, even, name="even")]))[0]
    assert view.set_index("GPUs / host").loc[4, "error"] == "±0%"   # -0.04%: no sign to read into


def test_a_model_under_two_step_kinds_gets_a_prediction_line_per_step_kind(tmp_path):
    """The same pipeline and model, compiled and eager, on 1 and 2 GPUs: the step, the errors and the
    8-GPU prediction each say which step kind they are of, never one line pooling both."""
    compiled = prediction_rows()
    eager = [dict(r, step="eager", images=r["images"] / 10, img_per_s=r["img_per_s"] / 10,
                  world_img_per_s=r["world_img_per_s"] / 10) for r in compiled if r["mode"] in ("model", "e2e")]
    said = hosts.prediction(report.load([write(tmp_path, compiled + eager)]))[1]
    named = {kind: f"`m` ({kind} step, 32 px, batch 512, bfloat16, e2e on 16 cores)" for kind in ("compile", "eager")}
    assert ("- The step under DDP, model-only per GPU over one GPU's (the prediction takes 100%): `m` (compile step, "
            "32 px, batch 512, bfloat16, 16 cores per GPU) 67% at 2 GPUs; `m` (eager step, 32 px, batch 512, bfloat16, "
            "16 cores per GPU) 67% at 2 GPUs.") in said
    # eager: the step 30k alone, 20k at 2 GPUs; e2e 9k alone (efficiency 0.3: the step binds), 8k at 2 GPUs:
    # predicted 9k (+12%), with the step measured 0.3 x 20k = 6k (-25%); 4 GPUs at 8 cores: 0.3 x 30k over 4k (+125%)
    assert f"  - `p` with {named['eager']}: 2 GPUs +12%, 4 GPUs +125%; with the step measured there: 2 GPUs -25%." in said
    assert f"  - `p` with {named['compile']}: 2 GPUs +12%, 4 GPUs +12%; with the step measured there: 2 GPUs +12%." in said
    assert sum(line.startswith("  - `p` with `m`") for line in said) == 6   # bounds, errors, 8 GPUs: two each
    short = next(line for line in said if line.startswith("  - Below what the same ranks"))
    assert f"`p` with {named['compile']} at 2 GPUs: e2e 80,000 per GPU" in short and "`p` at" not in short
    one_gpu_compiled = [r for r in compiled if r["world_size"] == 1 or r["mode"] == "loader"]   # compiled: 1 GPU only
    said = hosts.prediction(report.load([write(tmp_path, one_gpu_compiled + eager, name="one")]))[1]
    assert f"  - `p` with {named['eager']}: 2 GPUs +12%, 4 GPUs +125%; with the step measured there: 2 GPUs -25%." in said
    assert not any(line.startswith("  - `p` with `m`:") for line in said)   # every line of a group under one name


def test_an_error_with_the_step_measured_is_marked_where_it_lies_within_the_spread(tmp_path):
    """The step at 2 GPUs measured at 88,889 per GPU and e2e there in two processes (78k, 82k): the
    prediction made with the step (0.9 x 88,889 = 80,000) lies inside their range and says so; the
    prediction without it (90,000, +12%) beyond."""
    def at(r, rate, **extra):
        return dict(r, images=rate, img_per_s=rate, world_img_per_s=2 * rate, **extra)
    rows = []
    for r in prediction_rows():
        if r["world_size"] == 2 and r["mode"] == "model":
            rows.append(at(r, 88_889))
        elif r["world_size"] == 2 and r["mode"] == "e2e":
            rows += [at(r, 78_000), at(r, 82_000, process=1)]
        else:
            rows.append(r)
    said = hosts.prediction(report.load([write(tmp_path, rows)]))[1]
    assert "  - `p` with `m`: 2 GPUs +12%, 4 GPUs +12%; with the step measured there: 2 GPUs ±0% (within the spread)." in said


def test_epoch_restarts_weigh_n_times_more_per_step_when_each_rank_runs_1_nth_of_the_epoch(tmp_path):
    """One GPU: 100 steps of 512 an epoch at 90k img/s e2e, 100k restart-free: the restarts cost
    512 x 100 / 90k - 512 x 100 / 100k = 0.0569 s an epoch. At 4 GPUs each rank runs 25 steps, so
    the prediction is 25 steps at 0.9 x 50k (the loader on 8 cores) plus those 0.0569 s; without the
    restart-free rate (or steps) it is 0.9 x 50k, as before."""
    rows = [dict(r, steady_img_per_s=100_000, steps_per_epoch=100) if r["mode"] == "e2e" and r["world_size"] == 1
            else r for r in prediction_rows()]
    got = {r["GPUs / host"]: r for r in hosts.prediction(report.load([write(tmp_path, rows)]))[0].to_dict("records")}
    restart = 512 * 100 / 90_000 - 512 * 100 / 100_000
    rate = 1.0 * 50_000   # efficiency 100k / min(300k, 100k) = 1
    assert got[4]["restarts s / epoch"] == f"{restart:.2f}" and got[4]["e2e efficiency"] == "100%"
    assert got[4]["predicted per GPU"] == f"{512 * 25 / (512 * 25 / rate + restart):,.0f}"
    assert got[2]["predicted per GPU"] == f"{512 * 50 / (512 * 50 / 100_000 + restart):,.0f}"   # 16 cores: 100k
    plain = {r["GPUs / host"]: r for r in hosts.prediction(report.load([write(tmp_path, prediction_rows(), name="plain")]))[0]
             .to_dict("records")}
    assert plain[4]["predicted per GPU"] == "45,000" and plain[4]["restarts s / epoch"] == "0.00"


def test_the_one_gpu_step_is_read_at_the_e2e_s_cores_and_the_loader_at_once_at_its_batch(tmp_path):
    """One GPU's model-only at 16 cores (300k) and at 8 (200k): the prediction for the 16-core e2e reads
    300k, not their median; loader-only at once at another batch size is not the e2e's."""
    rows = prediction_rows()
    rows += [dict(r, cpus=8, images=200_000, img_per_s=200_000, world_img_per_s=200_000)
             for r in rows if r["mode"] == "model" and r["world_size"] == 1]
    rows = [dict(r, batch_size=256) if r["mode"] == "loader" and r["world_size"] == 2 else r for r in rows]
    view, said = hosts.prediction(report.load([write(tmp_path, rows)]))
    assert set(view["model per GPU (1 GPU, no all-reduce)"]) == {"300,000"}
    assert not any("with its ranks at once" in line for line in said)   # no loader-only at once at batch 512


def test_on_a_host_with_cores_to_spare_each_rank_is_predicted_on_the_one_gpu_e2e_s_cores(tmp_path):
    """A 64-core host whose ranks each ran on 16 cores (the one-GPU e2e's): 2 and 4 GPUs are predicted
    and checked at 16 cores per GPU, not at 32 for two; 8 GPUs at the host's even share, 8."""
    rows = [dict(r, cpu_count=64) for r in prediction_rows()]
    rows = [dict(r, cpus=16) if r["world_size"] == 4 else r for r in rows]
    got = {r["GPUs / host"]: r for r in hosts.prediction(report.load([write(tmp_path, rows)]))[0].to_dict("records")}
    assert {n: got[n]["cores / GPU"] for n in (2, 4, 8)} == {2: 16, 4: 16, 8: 8}
    assert got[2]["predicted per GPU"] == got[4]["predicted per GPU"] == "90,000"
    assert got[2]["error"] == "+12%" and got[4]["error"] == "+125%" and got[8]["predicted per GPU"] == "45,000"


def test_prediction_only_writes_prediction_md_from_the_one_gpu_rows_alone_and_the_report_links_it(tmp_path):
    """`report --prediction-only`: PREDICTION.md from the run's one-GPU rows, the same bytes whatever its
    rows of several GPUs hold (poisoned here: rates x10, another host size, another pipeline); the
    report made later links it and holds the same predictions, and says so when it differs."""
    rows = prediction_rows()
    poisoned = [dict(r, img_per_s=r["img_per_s"] * 10, world_img_per_s=r["world_img_per_s"] * 10, cpu_count=128)
                if r["world_size"] > 1 else r for r in rows]
    poisoned += [dict(r, pipeline="q") for r in poisoned if r["world_size"] > 1]
    written = {}
    for name, found in (("clean", rows), ("poisoned", poisoned)):
        (tmp_path / name).mkdir()
        folder = Path(write(tmp_path / name, found)).parent
        assert cli.main(["report", str(folder), "--out", str(folder), "--prediction-only"]) == 0
        written[name] = (folder / "PREDICTION.md").read_text()
        assert sorted(p.name for p in folder.iterdir()) == ["COMMAND.txt", "PREDICTION.md", "results.csv"]
    assert written["clean"] == written["poisoned"]
    text = written["clean"]
    assert ("From `run`, written by `pipebench report --prediction-only` before its rows of several GPUs were read, "
            "from its one-GPU rows alone: 5 rows (rank 0, ok: model-only, e2e and idle loader-only) of commit abc123, "
            "1 invocation (`run@1`).") in text
    assert "all-reduce, so it is left out: an upper bound" in text and "measured job" not in text
    folder = tmp_path / "clean" / "run"
    report_text = report.write([folder / "results.csv"], folder).read_text()
    section = report_text.split("### More GPUs per host, predicted")[1]
    assert ("The run's folder holds [PREDICTION.md](PREDICTION.md), written by `pipebench report --prediction-only` "
            "from its one-GPU rows before its rows of several GPUs were read; the same one-GPU rows give it today") in section

    def predicted(markdown):
        return re.findall(r"^\| `p` .*?\|\s+(\d+) \|\s+(\d+) \|.*?\|\s+([\d,]+) \|\s+([\d,]+) \|", markdown, re.M)
    assert len(predicted(text)) == 3 and predicted(text) == predicted(section)
    moved = folder.rename(tmp_path / "clean" / "2026-01-01-run")   # committed under results/ after the sweep
    section = report.write([moved / "results.csv"], moved).read_text().split("### More GPUs per host, predicted")[1]
    assert "the same one-GPU rows give it today" in section
    folder = moved.rename(folder)
    (folder / "PREDICTION.md").write_text(text.replace("22,500", "22,501"))
    again = report.write([folder / "results.csv"], tmp_path / "elsewhere").read_text()
    assert "holds [PREDICTION.md](../clean/run/PREDICTION.md)" in again and "it differs from what" in again
    with pytest.raises(SystemExit, match="no --readme"):
        cli.main(["report", str(folder), "--out", str(folder), "--prediction-only", "--readme", "README.md"])


def test_the_report_s_error_column_is_predicted_over_measured_minus_one(tmp_path):
    """REPORT.md's prediction table: at every GPU count measured, the error is its predicted per-GPU
    rate over the measured one, minus 1 (the job's columns over the GPU count)."""
    text = report.write([write(tmp_path, prediction_rows(four_gpus=37_000))], tmp_path / "out").read_text()
    lines = text.split("### More GPUs per host, predicted")[1].split("\n| pipeline")[1].splitlines()
    head = [c.strip() for c in ("| pipeline" + lines[0]).strip("|").split("|")]
    cells = [dict(zip(head, (c.strip() for c in line.strip("|").split("|")))) for line in lines[2:] if line.startswith("|")]
    checked = [c for c in cells if c["measured job"] != "—"]
    assert [c["GPUs / host"] for c in checked] == ["2", "4"]
    for c in checked:
        predicted, measured = (float(c[k].replace(",", "")) for k in ("predicted job", "measured job"))
        assert c["error"] == f"{predicted / measured - 1:+.0%}"
    assert checked[1]["error"] == "+22%"   # 45,000 over 37,000
    assert [c["beyond spread"] for c in checked] == ["yes", "yes"]   # 4 GPUs: processes at 35,150 and 38,850


def test_the_readme_s_several_gpu_block_says_what_each_gpu_count_measured_and_predicts_more(tmp_path):
    """The hosts block (`--readme`): per-GPU model-only and e2e at 1 and 2 GPUs, which pipelines
    the step sets the pace of at 2 GPUs, then the prediction: the step under DDP, the errors with and
    without it; a one-GPU run has no such answer."""
    def job(mode, pipeline, per_gpu, gpus, cpus=16, processes=3, **extra):
        return [row(mode, pipeline, per_gpu, world_size=gpus, rank=r, world_img_per_s=per_gpu * gpus, cpus=cpus,
                    cpu_count=32, gpu="H", parallel="ddp" if gpus > 1 and mode != "loader" else "none", process=p,
                    repeat=w, **extra) for p in range(processes) for r in range(gpus) for w in range(2)]
    trained = dict(model="m", step="compile")
    rows = [*job("model", "none", 300_000, 1, **trained), *job("model", "none", 200_000, 2, **trained),
            *job("e2e", "lone", 299_000, 1, **trained), *job("e2e", "lone", 199_000, 2, processes=1, **trained),
            *job("e2e", "fast", 299_000, 1, **trained), *job("e2e", "fast", 195_000, 2, **trained),
            *job("e2e", "near", 290_000, 1, **trained), *job("e2e", "near", 184_000, 2, **trained),   # 92%
            *job("e2e", "fast", 100_000, 2, sync_every=1, **trained),   # reading the loss: another situation
            *job("e2e", "slow", 90_000, 1, **trained), *job("e2e", "slow", 80_000, 2, **trained)]
    for cpus in (16, 8, 4):
        rows += job("loader", "fast", 1e6, 1, cpus) + job("loader", "slow", 100_000 * cpus / 16, 1, cpus)
    readme = tmp_path / "README.md"
    start, end = report.marks("hosts", "out")
    readme.write_text(f"# x\n{start}\nold\n{end}\nrest\n")
    assert cli.main(["report", str(Path(write(tmp_path, rows)).parent), "--out", str(tmp_path / "out"),
                     "--readme", str(readme)]) == 0
    block = readme.read_text().split(start)[1].split(end)[0].strip().splitlines()
    assert block[0] == "From `run` ([full report](out/REPORT.md)), 2 × H of one host of 32 cores:"
    assert block[2] == ("- With 16 cores per GPU, `m` (compile step, 32 px, batch 512) per GPU at 1 / 2 GPUs (img/s, "
                        "medians): model-only 300,000 / 200,000; `fast` 299,000 / 195,000; `lone` 299,000 / 199,000; "
                        "`near` 290,000 / 184,000; `slow` 90,000 / 80,000. At 2 GPUs the step sets the pace of `fast` "
                        "(fed: e2e at least 95% of model-only, every process at least 93%); the input holds back "
                        "`near`, `slow`; no verdict for `lone` (too few measurements: thin: e2e 1 process).")
    assert ("- The step under DDP, model-only per GPU over one GPU's (the prediction takes 100%): `m` 67% at 2 GPUs."
            in block)
    # `fast`: predicted 299,000 per GPU (its one-GPU e2e), measured 195,000; with the step measured at 2 GPUs,
    # 299/300 x 200,000 = 199,333: the error left is the input's
    assert "  - `fast` with `m`: 2 GPUs +53%; with the step measured there: 2 GPUs +2%." in block
    assert ("  - `fast` with `m`: 299,000 img/s per GPU (job 2,392,000), step binds; at 2 GPUs, the most measured, its "
            "error was +53% (beyond the spread of its processes); with the step as model-only measured at 2 GPUs, "
            "199,333 img/s per GPU (its error there +2%).") in block
    assert not any(line.startswith("- Host of") for line in block)   # the per-pipeline bounds: in the report only
    assert readme.read_text().endswith(f"{end}\nrest\n")
    one = [r for r in rows if r["world_size"] == 1]
    report.write([write(tmp_path, one, name="one")], tmp_path / "out", readme=readme)
    assert "From `one`: no several-GPU answer: it ran on one GPU only" in readme.read_text()
    dp = [dict(r, parallel="dp", gpus=2) for r in one if r["mode"] != "loader"]   # DataParallel: 2 GPUs, one process
    report.write([write(tmp_path, dp, name="dp")], tmp_path / "out", readme=readme)
    assert "From `dp`: no several-GPU answer: no model-only and e2e rows" in readme.read_text()
    readme.write_text("no block\n")
    with pytest.raises(ValueError, match="holds no block made from fresh"):
        report.write([write(tmp_path, one, name="one")], tmp_path / "fresh", readme=readme)
    assert not (tmp_path / "fresh").exists()


def test_the_several_gpu_block_says_what_photographs_reach_per_cores_per_gpu_at_the_most_gpus(tmp_path):
    """Photographs (224-px e2e rows of an `imagefolder:` source) on 1 and 4 GPUs: at 4 GPUs the best
    pipeline's per-GPU e2e over model-only's there, at each cores per GPU measured (one value: what
    it reaches, and whether that keeps the model fed); 224-px e2e rows of another source and the
    32-px lines are no photo line."""
    def job(mode, pipeline, per_gpu, gpus, cpus=16, **extra):
        return [row(mode, pipeline, per_gpu, world_size=gpus, rank=r, world_img_per_s=per_gpu * gpus, cpus=cpus,
                    cpu_count=64, gpu="H", parallel="ddp" if gpus > 1 and mode != "loader" else "none", process=p,
                    repeat=w, **extra) for p in range(3) for r in range(gpus) for w in range(2)]
    photo = dict(model="resnet50", step="compile", image_size=224, batch_size=256, source="imagefolder:/photos")
    rows = [*job("model", "none", 3_000, 1, **photo), *job("model", "none", 2_800, 4, **photo)]
    for pipeline, one, four in (("gpu-dec", 2_990, 2_700), ("cpu-dec", 2_500, 1_400), ("dataloader", 900, 500)):
        rows += job("e2e", pipeline, one, 1, **photo) + job("e2e", pipeline, four, 4, **photo)
    rows += job("e2e", "synthetic", 2_999, 4, **dict(photo, source="synthetic-seed0"))   # not photographs
    trained = dict(model="m", step="compile")
    rows += [*job("model", "none", 300_000, 1, **trained), *job("model", "none", 200_000, 4, **trained),
             *job("e2e", "fast", 299_000, 1, **trained), *job("e2e", "fast", 195_000, 4, **trained)]
    readme = tmp_path / "README.md"

    def block(found, name):
        readme.write_text("\n".join(report.marks("hosts", f"{name}/out")) + "\n")
        report.write([write(tmp_path, found, name=name)], tmp_path / name / "out", readme=readme)
        return readme.read_text().splitlines()
    lines = block(rows, "one")
    assert ("- Photographs, `resnet50` (compile step, 224 px, batch 256), 4 GPUs sharing the host (per-GPU e2e medians "
            "over model-only's at 4 GPUs): at 16 cores per GPU the best pipeline, `gpu-dec`, reaches 96.4% of "
            "model-only: fed (at least 95%, every process at least 93%).") in lines
    assert sum("Photographs" in line for line in lines) == 1   # the synthetic 224-px rows make none
    assert any(line.endswith("At 4 GPUs the step sets the pace of `gpu-dec` (fed: e2e at least 95% of model-only, "
                             "every process at least 93%); the input holds back `cpu-dec`, `dataloader`.") for line in lines)
    unfed = block([r for r in rows if r["pipeline"] != "gpu-dec"], "unfed")   # no pipeline near the step: none named
    assert any(line.endswith("at 16 cores per GPU the best pipeline, `cpu-dec`, reaches 50.0% of model-only: not fed, "
                             "cause not measured; no core count measured at 4 GPUs is shown to keep the model fed.")
               for line in unfed)
    assert any(line.endswith("At 4 GPUs the input holds back `cpu-dec`, `dataloader` (e2e below 95% of model-only).")
               for line in unfed)
    assert any(line.startswith("- With 16 cores per GPU, `m` (compile step, 32 px, batch 512) per GPU at 1 / 4 GPUs")
               for line in lines)
    fewer = [dict(r, cpus=8, world_img_per_s=r["world_img_per_s"] * (0.9 if r["pipeline"] == "cpu-dec" else 0.3))
             for r in rows if r["world_size"] == 4 and r["pipeline"] in ("gpu-dec", "cpu-dec")]
    lines = block(rows + fewer, "two")
    assert ("- Photographs, `resnet50` (compile step, 224 px, batch 256), 4 GPUs sharing the host (per-GPU e2e medians "
            "over model-only's at 4 GPUs): the best pipeline at 8 cores per GPU `cpu-dec` 45.0% (not fed, cause not "
            "measured); at 16 cores per GPU `gpu-dec` 96.4% (fed); it needs 16 cores per GPU of those measured to keep "
            "the model fed.") in lines
    assert not any("Photographs" in line for line in block([r for r in rows if r["image_size"] == 32], "none"))


def test_the_large_image_line_shows_lower_bounds_and_calls_none_short_on_one():
    """A "≥" ceiling (no busy level slowed the pipeline) below the model proves no shortfall: it is
    shown with its sign and named undecided; a measured ceiling below the model is short."""
    model = pd.DataFrame([dict(mode="model", image_size=224, img_per_s=4_000, model="m", step="eager")])
    cap = pd.DataFrame([dict(image_size=224, cpus=16, pipeline=p, img_per_s=rate, bound=bound)
                        for p, rate, bound in (("fast", 8_000, ""), ("low", 3_000, "≥ "), ("slow", 3_000, ""))])
    text = report_summary.jpeg_sentence(model, cap)
    assert "`low` ≥ 3k" in text and text.endswith(
        "— by their ceilings all others would keep it fed except `slow` with 16 cores (75.0%); undecided (a lower "
        "bound below the model): `low` with 16 cores.")
    judged = pd.DataFrame([dict(image_size=224, model="m", step="eager", cpus=16, pipeline=p, verdict=v)
                           for p, v in (("fast", "inconclusive"), ("slow", "not fed, cause not measured"))])
    assert report_summary.jpeg_sentence(model, cap, judged).endswith(   # measured end to end: its verdicts, not ceilings
        "— end to end, with 16 cores none of those measured was shown to keep it fed.")
    judged.loc[0, "verdict"] = "fed"
    assert report_summary.jpeg_sentence(model, cap, judged).endswith("— end to end, with 16 cores `fast` kept it fed.")
    text = report_summary.jpeg_sentence(model, cap[cap.pipeline != "slow"])
    assert text.endswith("— by their ceilings all others would keep it fed; undecided (a lower bound below the model): "
                         "`low` with 16 cores.")
    assert report_summary.jpeg_sentence(model, cap[cap.pipeline == "fast"]).endswith("— by their ceilings all would keep "
                                                                                      "it fed.")


def test_the_bus_verdict_names_the_image_sizes_no_model_ran_at():
    def copies(*sizes):
        return [dict(mode="copy", image_size=s, payload="uint8", stage="h2d-pinned", img_per_s=1e6) for s in sizes]
    step = [dict(mode="model", image_size=32, img_per_s=300_000, model="m", step="compile")]
    text = report_summary.bus_sentence(pd.DataFrame(copies(32, 224) + step))
    assert text.endswith("— every copy is faster than every model step at its size "
                         "(copies timed alone; no model step ran at 224 px to compare with).")
    assert report_summary.bus_sentence(pd.DataFrame(copies(32) + step)).endswith("model step at its size (copies timed alone).")
    text = report_summary.bus_sentence(pd.DataFrame(copies(224) + step))
    assert text.endswith(" — no model step ran at 224 px to compare with.")


def test_the_prediction_needs_one_gpu_rows_and_takes_the_step_from_them_alone(tmp_path):
    host = dict(cpu_count=32, image_size=32, batch_size=512, dtype="bfloat16", model="m", step="compile")

    def job(mode, pipeline, per_gpu, gpus, cpus=16):
        return [row(mode, pipeline, per_gpu, world_size=gpus, rank=r, world_img_per_s=per_gpu * gpus, cpus=cpus,
                    parallel="ddp" if gpus > 1 else "none", **host) for r in range(gpus)]
    two_only = [*job("model", "none", 200_000, 2), *job("e2e", "p", 80_000, 2)]   # a `--ranks 2` run
    assert hosts.prediction(report.load([write(tmp_path, two_only)]))[0].empty
    four = [*job("model", "none", 300_000, 1), *job("model", "none", 150_000, 4), *job("e2e", "p", 90_000, 1)]
    four += [row("loader", "p", rate, world_size=1, rank=0, world_img_per_s=rate, cpus=cpus, cpu_count=32,
                 image_size=32, batch_size=512, dtype="bfloat16") for cpus, rate in ((16, 1e6), (8, 1e6), (4, 1e6))]
    view = hosts.prediction(report.load([write(tmp_path, four, name="four")]))[0]
    assert view.set_index("GPUs / host")["model per GPU (1 GPU, no all-reduce)"].to_dict() == {
        2: "300,000", 4: "300,000", 8: "300,000"}   # the 4-GPU model-only rows not read


def test_the_summary_table_is_measured_end_to_end_and_every_cell_holds_against_its_rows(tmp_path):
    """Two models x two CPU budgets of e2e rows (3 processes of 2 windows each); every cell recomputed
    from the rows: a pipeline named is at least 95% of model-only, "any" only where every pipeline
    is, ×N is the fastest named pipeline's e2e over `dataloader`'s, "none" names the fastest's share,
    a pipeline of too few processes is named thin, never left out unsaid."""
    e2e = {("big", 16): {"dataloader": 97_000, "prefetch": 99_000, "dali": 90_000},   # dataloader fed, dali not
           ("big", 4): {"dataloader": 50_000, "prefetch": 94_000, "dali": 99_500, "resident": 96_000},  # prefetch: 94%
           ("mid", 16): {"dataloader": 49_800, "resident": 49_900, "timm": 49_950},   # timm: one process
           ("mid", 4): {"resident": 49_900},
           ("small", 16): {"dataloader": 9_900, "resident": 9_950},                    # all fed: any
           ("small", 4): {"dataloader": 4_000, "resident": 8_000}}                     # none fed
    speed = {"big": 100_000, "mid": 50_000, "small": 10_000}
    cost = {"dataloader": 0.2, "timm": 0.15, "dali": 0.1, "prefetch": 0.01, "resident": 0.001}
    thin = {"timm"}   # measured in one process: too few measurements, named thin, never fed, never "any"
    rows = []
    for (model, cpus), rates in e2e.items():
        rows += processes("model", "none", windows(*[speed[model]] * 3), model=model, step="compile", cpus=cpus)
        for name, rate in rates.items():
            rows += processes("e2e", name, windows(*[rate] * (1 if name in thin else 3)), model=model, step="compile",
                              cpus=cpus, cpu_s_per_kimg=cost[name], pipeline_cpu_s_per_kimg=cost[name])
    rows += processes("model", "none", windows(*[200_000] * 3), model="alone", step="compile", cpus=16)
    rows += processes("e2e", "resident", windows(*[199_000] * 3), model="alone", step="compile", cpus=16)
    report.write([write(tmp_path, rows)], tmp_path / "out")
    text = (tmp_path / "out" / "SUMMARY.md").read_text()
    table = [line for line in text.splitlines() if line.startswith("| `")]
    assert [line.split("|")[1].strip() for line in table] == [
        "`alone` compile (200k)", "`big` compile (100k)", "`mid` compile (50k)", "`small` compile (10k)"]
    cells = {(line.split("|")[1].split("`")[1], cpus): cell.strip()
             for line in table for cpus, cell in zip((16, 4), line.split("|")[2:4])}
    assert cells[("alone", 4)] == "—"   # never run with 4 cores
    for (model, cpus), rates in e2e.items():   # the independent recomputation
        cell = cells[(model, cpus)]
        share = {name: rate / speed[model] for name, rate in rates.items()}
        fed = [name for name in sorted(rates, key=cost.get) if share[name] >= 0.95 and name not in thin]
        if cell == "any (`dataloader` too)":
            assert min(share.values()) >= 0.95 and not thin & set(rates)
        elif cell.startswith("none"):
            best = max(rates, key=rates.get)
            assert not fed and cell == f"none (fastest `{best}` {share[best]:.1%})"
        else:
            aside = " (`timm` thin: e2e 1 process)" if thin & set(rates) else ""
            assert cell.endswith(aside)
            names, _, gain = cell.removesuffix(aside).removesuffix(" (no `dataloader` here)").partition(" ×")
            assert names.split(", ") == [f"`{name}`" for name in fed]
            assert min(share.values()) < 0.95 or thin & set(rates) or "dataloader" not in rates
            if gain:
                assert share["dataloader"] < 0.95
                assert float(gain) == round(max(rates[name] for name in fed) / rates["dataloader"], 1)
    assert cells[("big", 16)] == "`prefetch`, `dataloader`" and cells[("big", 4)] == "`resident`, `dali` ×2.0"
    assert cells[("mid", 16)] == "`resident`, `dataloader` (`timm` thin: e2e 1 process)"
    assert cells[("mid", 4)] == "`resident` (no `dataloader` here)"


def test_the_summary_table_has_a_row_for_each_step_kind_of_a_model(tmp_path):
    """The 224-px ladder: one model eager and compiled is two rungs, each against its own model-only."""
    rows = []
    for step, speed, rate in (("eager", 4_000, 3_900), ("compile", 6_000, 4_500)):
        rows += processes("model", "none", windows(*[speed] * 3), model="m", step=step, image_size=224, batch_size=256)
        rows += processes("e2e", "dali", windows(*[rate] * 3), model="m", step=step, image_size=224, batch_size=256)
    report.write([write(tmp_path, rows)], tmp_path / "out")
    table = [line for line in (tmp_path / "out" / "SUMMARY.md").read_text().splitlines() if line.startswith("| `")]
    assert [[c.strip() for c in line.split("|")[1:-1]] for line in table] == [
        ["`m` compile (6k)", "none (fastest `dali` 75.0%)"], ["`m` eager (4k)", "`dali` (no `dataloader` here)"]]


def test_without_e2e_rows_the_summary_table_is_predicted_from_loader_ceilings_and_says_so(tmp_path):
    rows = [*processes("model", "none", [[330_000], [330_000]], model="m", step="compile")]
    for name, rate in (("dataloader", 33_000), ("resident", 3e6)):
        rows += processes("loader", name, [[rate], [rate]], cpu_s_per_kimg=0.1)
    report.write([write(tmp_path, rows)], tmp_path / "out")
    text = (tmp_path / "out" / "SUMMARY.md").read_text()
    assert "predicted from loader ceilings (no e2e row with the loss never read here)" in text and "| 500k img/s" in text
    assert "measured end to end" not in text


@pytest.mark.parametrize("model,dataloader,expected", [
    (640, 5_600, [10_000, 5_000, 2_500, 1_000]),      # the model is the limit: at least four rows, upwards
    (330_000, 38_000, [500_000, 250_000, 100_000, 50_000, 25_000]),   # down to where dataloader feeds
    (330_000, 900, [500_000, 250_000, 100_000, 50_000, 25_000, 10_000, 5_000]),   # at most seven
])
def test_the_summary_table_spans_the_measured_model_down_to_where_dataloader_feeds(model, dataloader, expected):
    cap = pd.DataFrame([{"pipeline": "dataloader", "cpus": 16, "img_per_s": dataloader},
                        {"pipeline": "resident", "cpus": 16, "img_per_s": 3e6}])
    assert report.speeds(cap, pd.DataFrame({"img_per_s": [model]})) == expected


def test_answers_come_largest_cpu_budget_first(tmp_path):
    rows = []
    for cpus in (4, 16, 2):   # as text, "16" sorts between "2" and "4"
        rows += processes("model", "none", [[50_000]], model="m", step="eager", cpus=cpus)
        rows += processes("e2e", "resident", [[49_000]], model="m", step="eager", cpus=cpus)
    said = report.answers(report.cells(report.load([write(tmp_path, rows)])))
    assert [line.split(" per GPU")[0] for line in said] == ["With 16 cores", "With 4 cores", "With 2 cores"]


def test_a_run_of_several_batch_sizes_answers_each_apart_and_its_summary_names_those_its_table_leaves_out(tmp_path):
    """`--batch-size 16,32` gave one answer that called `resident` both fed and set aside: the
    answers grouped the two settings' cells as one situation. Each setting is its own answer now,
    named, and the summary's table (of one setting) says which others the run measured."""
    rows = []
    for batch, rate in ((16, 49_000), (32, 20_000)):   # fed at batch 16, input-bound at 32
        rows += processes("model", "none", windows(50_000, 50_000, 50_000), model="m", step="eager", batch_size=batch)
        rows += processes("e2e", "resident", windows(rate, rate, rate), model="m", step="eager", batch_size=batch)
    path = write(tmp_path, rows)
    said = report.answers(report.cells(report.load([path])))
    assert [line.split(" trains at")[0] for line in said] == [
        "With 16 cores per GPU, `m` at 32 px, batch 16, bfloat16 (eager step)",
        "With 16 cores per GPU, `m` at 32 px, batch 32, bfloat16 (eager step)"]
    assert "`resident` keeps it fed" in said[0] and "no pipeline keeps it fed" in said[1]
    summary = report.write([path], tmp_path / "out").parent.joinpath("SUMMARY.md").read_text()
    assert ("The table above is batch 16, bfloat16; this run also measured batch 32, bfloat16 at 32 px: their "
            "answers and every number are in the [full report](REPORT.md).") in summary


def needs_line(tmp_path, shares: dict[int, dict[str, float]]) -> str:
    rows = []
    for cpus, fed in shares.items():
        rows += processes("model", "none", windows(5_000, 5_000, 5_000), model="m", step="compile", cpus=cpus,
                          image_size=224)
        for name, share in fed.items():
            rate = 5_000 * share
            rows += processes("e2e", name, windows(rate, rate, rate), model="m", step="compile", cpus=cpus,
                              image_size=224)
    said = report.answers(report.cells(report.load([write(tmp_path, rows)])))
    assert len(said) == len(shares) + 1   # one answer per budget, then the cores the model needs
    return said[-1]


def test_the_answers_say_how_many_cores_per_gpu_a_model_needs_to_be_kept_fed(tmp_path):
    """Per model measured at several budgets: the fewest cores with a fed pipeline (the fastest fed
    there), the closest pipeline at each budget below; or that none is fed at any."""
    text = needs_line(tmp_path, {16: {"a": 0.98, "b": 0.85}, 8: {"a": 0.97, "b": 0.90}, 4: {"a": 0.40, "b": 0.84}})
    assert text == ("`m` at 224 px (compile step) needs 8 cores per GPU of those measured to be kept fed, with `a` "
                    "(97.0%); fewer fall short (closest — 4 cores: `b` 84.0%).")
    text = needs_line(tmp_path, {16: {"a": 0.80}, 4: {"a": 0.50}})
    assert text == "`m` at 224 px (compile step): no pipeline keeps it fed with any core count measured (closest — 4 cores: `a` 50.0%; 16 cores: `a` 80.0%)."
    assert needs_line(tmp_path, {16: {"a": 0.99}, 4: {"a": 0.99}}).endswith("needs 4 cores per GPU of those measured to be kept fed, with `a` (99.0%).")


def test_files_are_runs_of_their_own_even_in_folders_of_one_name_and_a_file_given_twice_counts_once(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    first, second = write(tmp_path / "a", processes("loader", "p", [[1_000]])), write(tmp_path / "b", processes("loader", "p", [[2_000]]))
    assert [name for name, _ in report.runs(report.load([first, second]))] == ["run", "run (2)"]
    (name, group), = report.runs(report.load([first, first]))
    assert len(group) == 1


def test_a_report_without_ok_rows_is_written_and_a_readme_it_cannot_update_is_refused_first(tmp_path):
    path = write(tmp_path, [row("loader", "p", float("nan"), status="error", error="boom")])
    assert "boom" in report.write([path], tmp_path / "out").read_text()
    (tmp_path / "out" / "ANSWER.md").write_text("an older answer")
    report.write([path], tmp_path / "out")
    assert not (tmp_path / "out" / "ANSWER.md").exists()   # no situation measured: none left beside it
    readme = tmp_path / "README.md"
    start, end = report.marks("summary", "fresh")
    readme.write_text(f"{end}\n{start}\n")   # the markers in the wrong order
    with pytest.raises(ValueError, match="needs the line"):
        report.write([path], tmp_path / "fresh", readme=readme)
    assert not (tmp_path / "fresh").exists()


def test_with_one_pipeline_the_answer_names_no_speed_up_over_itself(tmp_path):
    rows = [*processes("model", "none", windows(50_000, 50_000, 50_000), model="m", step="eager"),
            *processes("e2e", "dataloader", windows(10_000, 10_000, 10_000), model="m", step="eager")]
    (text,) = report.answers(report.cells(report.load([write(tmp_path, rows)])))
    assert text.endswith("no pipeline keeps it fed: the fastest, `dataloader`, reaches 20.0% of model-only.")


def test_no_verdict_tie_or_fastest_rests_on_one_process(tmp_path):
    """A cell of one process is left out of every comparison (the 2-core CPU case: 145 against 144
    img/s named `dataloader` the fastest), and the answer says so."""
    rows = [*processes("model", "none", windows(200, 210, 205), model="m", step="eager"),
            *processes("e2e", "dataloader", [[145, 150]], model="m", step="eager"),
            *processes("e2e", "prefetch", [[144, 146]], model="m", step="eager")]
    (text,) = report.answers(report.cells(report.load([write(tmp_path, rows)])))
    assert text.endswith("too few measurements to compare pipelines (thin: e2e 1 process; a verdict needs 3 "
                         "processes of 2 windows each per cell).")
    assert "fastest" not in text and "delivers" not in text
    rows += processes("e2e", "resident", windows(190, 195, 192), model="m", step="eager")
    (text,) = report.answers(report.cells(report.load([write(tmp_path, rows)])))
    assert "the fastest, `resident`" in text and "(too few measurements to compare: `dataloader`, `prefetch`)" in text


def test_e2e_above_model_only_is_never_fed_and_the_answer_names_only_the_fed(tmp_path):
    """The 2-core CPU case: e2e rows at 119-158 % of model-only were called fed."""
    rows = [*processes("model", "none", windows(100, 102, 101), model="m", step="eager"),
            *processes("e2e", "dataloader", windows(120, 125, 122), model="m", step="eager"),
            *processes("e2e", "resident", windows(99, 101, 100), model="m", step="eager")]
    c = report.cells(report.load([write(tmp_path, rows)]))
    s = report.situations(c).set_index("pipeline")
    assert s.loc["dataloader"].verdict == "inconclusive (e2e above model-only)" and s.loc["resident"].verdict == "fed"
    (text,) = report.answers(c)
    assert "`resident` keeps it fed" in text and "`dataloader` keep" not in text
    assert "(not compared, e2e above model-only: `dataloader`)" in text
    rows = [r for r in rows if r["pipeline"] != "resident"]   # every pipeline above model-only: no pipeline named
    (text,) = report.answers(report.cells(report.load([write(tmp_path, rows)])))
    assert text.endswith("e2e ran faster than model-only (120.7%–120.7% of it) for `dataloader`: the two timings "
                         "disagree, so this run names no pipeline (longer windows, --min-window-s, or an idle machine "
                         "may settle it).")


def test_seeds_are_processes_of_their_own_and_options_every_pipeline_reads_name_variants(tmp_path):
    rows = [*processes("loader", "resident", [[1_000]], seed=0), *processes("loader", "resident", [[3_000]], seed=1)]
    (cell,) = report.cells(report.load([write(tmp_path, rows)])).itertuples()
    assert (cell.p, cell.lo, cell.hi) == (2, 1_000, 3_000)   # two seeds: a range between them, not one process
    rows = [*processes("loader", "resident", [[1_000]], channels_last=True),
            *processes("loader", "resident", [[900]], channels_last=False)]
    labels = report.label_variants(report.load([write(tmp_path, rows, name="cl")])).pipeline
    assert sorted(set(labels)) == ["resident (channels_last=False)", "resident (channels_last=True)"]


def test_a_loader_window_far_shorter_than_the_minimum_is_a_drain_rejected_and_listed(tmp_path):
    """The 2-core DALI case of the photo run: a 0.027-s window under a 0.5-s minimum handed over batches
    queued before it (75k img/s beside its sibling's 3.3k) and made a 39k ceiling; half the minimum counts."""
    rows = [row("loader", "p", 75_234, seconds=0.027, min_window_s=0.5),
            row("loader", "p", 3_281, repeat=1, seconds=0.62, min_window_s=0.5),
            row("loader", "q", 2_000, seconds=0.25, min_window_s=0.5)]
    c = report.cells(report.load([write(tmp_path, rows)])).set_index("pipeline")
    assert (c.loc["p"].img_per_s, c.loc["p"].n) == (3_281, 1) and c.loc["q"].n == 1
    assert report.ceilings(c.reset_index()).set_index("pipeline").loc["p"].img_per_s == 3_281
    text = report.write([tmp_path / "run" / "results.csv"], tmp_path / "out").read_text()
    assert "75,234" not in text and "### Rejected windows (1 of 3 loader windows)" in text
    assert ("- `p` 16 cores, 0 ms, process 0, window 0: lasted 0.027 s, under half the run's 0.5 s minimum window: "
            "batches queued before the window were handed over (a drain, not a rate)") in text


def test_a_whole_number_read_back_as_a_float_is_labelled_as_an_integer(tmp_path):
    rows = [*processes("loader", "dali", [[1_000]], dali_hw_decoder_load=0.65, dali_threads=15.0),
            *processes("loader", "dali", [[2_000]], dali_hw_decoder_load=0.99, dali_threads=2.0),
            *processes("loader", "p", [[3_000]])]   # no dali_threads: the column holds floats
    labels = report.label_variants(report.load([write(tmp_path, rows)])).pipeline
    assert sorted(set(labels) - {"p"}) == ["dali (dali_hw_decoder_load=0.65, dali_threads=15)",
                                           "dali (dali_hw_decoder_load=0.99, dali_threads=2)"]


@pytest.mark.parametrize("folder", ["results/2026-11-26-h100-instrument-2", "results/2026-11-26-cpu-first-command",
                                    "results/2026-11-27-h100-ladder",
                                    "results/2026-11-27-h100-photos-ladder", "results/2026-11-27-h100-photos-epochs",
                                    "results/2026-11-27-h100-photos-epochs-2", "results/2026-11-27-h100-photos-best",
                                    "results/2026-12-05-cpu-first-command"])
def test_committed_reports_regenerate_byte_identical(tmp_path, monkeypatch, folder):
    """The committed report of a run, made again from its committed rows by the code of today: the
    same bytes (a refactoring of the report changes no word and no number). Plots are left out:
    their bytes follow the matplotlib version."""
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)   # the report names its sources as given: the path the committed one was made from
    assert cli.main(["report", folder, "--out", str(tmp_path)]) == 0
    for name in ("REPORT.md", "SUMMARY.md", "ANSWER.md"):
        assert (tmp_path / name).read_bytes() == (root / folder / name).read_bytes(), name
    for picture in re.findall(r"\]\(([\w.-]+\.png)\)", (root / folder / "REPORT.md").read_text()):
        assert (tmp_path / picture).exists() and (root / folder / picture).exists(), picture   # committed beside it


def test_the_reference_report_draws_the_share_of_model_only_by_model_speed_per_core_budget(tmp_path, monkeypatch):
    """The mission's question as a picture: `report` on the committed reference run writes it next to
    REPORT.md and links it from the report and the summary; one panel per CPU budget, one line per
    pipeline, each point a model's e2e median over its model-only median at that model's speed."""
    from bench.report import plots
    drawn = []
    real = plots.share_plot
    monkeypatch.setattr("bench.report.sections.share_plot", lambda s, *a: drawn.append(s) or real(s, *a))
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    assert cli.main(["report", "results/2026-11-27-h100-ladder", "--out", str(tmp_path)]) == 0
    picture = tmp_path / "share-run1-32px.png"
    assert picture.read_bytes().startswith(b"\x89PNG")
    assert "![share of model-only](share-run1-32px.png)" in (tmp_path / "REPORT.md").read_text()
    assert "(share-run1-32px.png)" in (tmp_path / "SUMMARY.md").read_text()
    (s,) = drawn
    df = pd.read_csv("results/2026-11-27-h100-ladder/results.csv")
    assert sorted(s.cpus.unique()) == [2, 4, 16] and set(s.pipeline) == set(df.pipeline) - {"none"}
    ok = df[(df.status == "ok") & (df.seconds >= df.min_window_s)]   # a short window left out alone
    point = s[(s.cpus == 4) & (s.model == "resnet18") & (s.pipeline == "dataloader")].iloc[0]
    here = ok[(ok.cpus == 4) & (ok.model == "resnet18")]
    assert point.model_rate == here[here["mode"] == "model"].img_per_s.median()
    assert point.share == here[here.pipeline == "dataloader"].img_per_s.median() / point.model_rate


def test_cpu_seconds_per_1000_images_show_floating_point_residue_as_0():
    """The pipeline's share is a difference of two counters: its subtraction residue is no cost."""
    from bench.report.sections import seconds
    assert seconds(1.9e-16) == "0" and seconds(-2e-17) == "0" and seconds(6.4e-05) == "6.4e-05" and seconds(5.94) == "5.9"


ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^<!-- \w+ of (\S+): generated by pipebench report --readme -->$", re.M)
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]


def blocks() -> list[tuple[str, str]]:
    """Every (page, report folder relative to the root) of a generated block in the README and docs/."""
    found = [(page, os.path.normpath(Path(page).parent / folder)) for page in PAGES
             for folder in BLOCK.findall((ROOT / page).read_text())]
    return sorted(set(found))


def sources(folder: str) -> list[str]:
    """The runs the report in `folder` was made from: the arguments of its COMMAND.txt's last
    `pipebench report ... --readme` line before its first option."""
    import shlex
    line = [ln for ln in (ROOT / folder / "COMMAND.txt").read_text().splitlines()
            if ln.startswith("pipebench report ") and " --readme " in ln][-1]
    words = shlex.split(line)[2:]
    return words[:next(i for i, w in enumerate(words) if w.startswith("--"))]


def test_every_generated_block_of_the_pages_is_found():
    assert len(blocks()) >= 7 and ("README.md", "results/2026-12-03-h200-ladder-v2") in blocks()


@pytest.mark.parametrize("page,folder", blocks())
def test_the_pages_blocks_are_their_committed_runs(tmp_path, monkeypatch, page, folder):
    """Each generated block of the README (the tables, the photo answers) and of docs/ (several GPUs)
    regenerates byte for byte from the committed runs its folder's COMMAND.txt names, and so do the
    folder's committed report, summary and answer (a gathered ladder's among them)."""
    copy = tmp_path / page
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text((ROOT / page).read_text())
    for run in sources(folder):   # the runs where the committed report found them (it links files beside them)
        shutil.copytree(ROOT / run, tmp_path / run, dirs_exist_ok=True)
    (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    for name in ("REPORT.md", "SUMMARY.md", "ANSWER.md"):   # made again, not copied
        (tmp_path / folder / name).unlink(missing_ok=True)
    monkeypatch.chdir(tmp_path)   # the report names its sources as given: the paths the committed one was made from
    report.write([Path(run) / "results.csv" for run in sources(folder)], Path(folder), readme=copy)
    assert copy.read_text() == (ROOT / page).read_text()
    for name in ("REPORT.md", "SUMMARY.md", "ANSWER.md"):
        assert (tmp_path / folder / name).exists() == (ROOT / folder / name).exists(), name
        if (ROOT / folder / name).exists():
            assert (tmp_path / folder / name).read_bytes() == (ROOT / folder / name).read_bytes(), name


KNOBS = ["pin_memory", "non_blocking", "dali_decoder", "dali_cpu_share", "dali_hw_decoder_load"]   # as labels list them


def short_labels(df: pd.DataFrame) -> pd.Series:
    """The labels a table names pipelines by: each pipeline with the values of the knobs (`KNOBS`) that
    differ among its rows, a switch by its name where on and left out where off, e.g. `dali (cpu, 0)`,
    `dataloader (pin_memory, non_blocking)`, plain `dataloader`; a pipeline run one way by its name alone."""
    def text(k, v) -> str | None:
        return k if str(v) == "True" else None if str(v) == "False" else f"{v:g}" if isinstance(v, float) else str(v)
    varied = {p: [k for k in KNOBS if rows[k].astype(str).nunique() > 1] for p, rows in df.groupby("pipeline")}

    def label(r) -> str:
        values = [t for k in varied[r.pipeline] if (t := text(k, r[k])) is not None]
        return f"{r.pipeline} ({', '.join(values)})" if values else r.pipeline
    return df.apply(label, axis=1)


def ladder_cell(rows: pd.DataFrame) -> dict[str, dict]:
    """One (model, cores) of a ladder part, recomputed from its rows (their `label`: `short_labels`, "none"
    model-only) as `bench.report.verdicts` states the rule, without its code: per label its windows'
    median rate, its processes' medians (lowest, highest), the largest move of one process's windows
    (last over first), its share of model-only, its restart-free share and its verdict: "noisy" where a
    move over 5% could carry the share across 95%, "above" where its lowest process is above model-only's
    highest by over 1%, else "fed" (share at least 95%, lowest process at least 93%) or "compared"."""
    ok = rows[(rows.status == "ok") & (rows.seconds >= rows.min_window_s)]
    found = {}
    for label, g in ok.groupby("label"):
        per = g.groupby("process")
        moves = per.apply(lambda w: w.sort_values("repeat").img_per_s.iloc[-1] / w.sort_values("repeat").img_per_s.iloc[0] - 1,
                          include_groups=False)
        found[label] = dict(rate=g.img_per_s.median(), steady=g.steady_img_per_s.median(), lo=per.img_per_s.median().min(),
                            hi=per.img_per_s.median().max(), move=moves.loc[moves.abs().idxmax()],
                            processes=per.ngroups, windows=per.size().min())
    model = found["none"]
    for label, c in found.items():
        c["share"], c["free"] = c["rate"] / model["rate"], c["steady"] / model["rate"]
        move = max(abs(c["move"]), abs(model["move"]))
        c["verdict"] = ("above" if c["lo"] > 1.01 * model["hi"] else
                        "noisy" if move > 0.05 and 0.95 / (1 + move) <= c["share"] <= 0.95 * (1 + move) else
                        "fed" if c["share"] >= 0.95 and c["lo"] / model["rate"] >= 0.93 else "compared")
    return found


def down(share: float) -> str:
    """A share as the report writes it: rounded down to 0.1%."""
    return f"{math.floor(1000 * share + 1e-9) / 10:.1f}%"


# the README's tables gathered from a ladder's parts: its parts and models; the photo ladder's parts so far
TABLES = {"results/2026-12-03-h200-ladder-v2": (7, 5), "results/2026-12-04-h200-photos-ladder": (4, 2)}


@pytest.mark.parametrize("folder", TABLES)
def test_every_cell_of_a_readme_table_holds_against_its_parts_rows(folder):
    """An independent recomputation of a README table gathered from a ladder's parts (the 32-px ladder's
    and the photo ladder's on the H200) from each part's committed rows: every cell from exactly one
    part, named by its letter, the letter's commit and times the part's rows'; 3 processes of 2 windows
    in every cell, no e2e median above model-only by 1% or more (issue 70); each cell names only fed
    pipelines, all of them (up to 3, then "+N"), ×N the fastest fed one's median over plain
    `dataloader`'s (naming it where the cell has two), or where none is fed the fastest with its share
    and its restart-free share, every pipeline set aside as noisy named so with its move, and
    "restart-free also" the pipelines below 95% only with epoch restarts; each model's speed its
    model-only median at the most cores; every cell measured, or "—" where no part has its rows yet."""
    want_parts, want_models = TABLES[folder]
    start, end = report.marks("table", folder)
    text = (ROOT / "README.md").read_text().split(start)[1].split(end)[0]
    letters = dict(re.findall(r"^- <sup>(\w)</sup> `(\w+)`", text, re.M))
    parts = {Path(run).name: pd.read_csv(ROOT / run / "results.csv") for run in sources(folder)}
    assert sorted(letters.values()) == sorted(parts) and len(parts) == want_parts
    for letter, name in letters.items():
        t = pd.to_datetime(parts[name].timestamp, utc=True, format="ISO8601")
        (commit,) = parts[name].git_commit.unique()
        assert f"<sup>{letter}</sup> `{name}`: commit {commit[:12]}, {t.min():%Y-%m-%d %H:%M}–{t.max():%H:%M} UTC" in text
    header = next(line for line in text.splitlines() if line.startswith("| model"))
    cores = [int(c.split()[0]) for c in header.split("|")[2:-1]]
    lines = [line for line in text.splitlines() if line.startswith("| `")]
    rows = pd.concat([r.assign(part=n) for n, r in parts.items()], ignore_index=True)
    rows["label"] = short_labels(rows).where(rows["mode"] != "model", "none")
    assert sorted(cores, reverse=True) == cores == sorted(rows.cpus.unique(), reverse=True)
    assert len(lines) == rows.model.nunique() == want_models
    for line in lines:
        head, *cells = [c.strip() for c in line.split("|")[1:-1]]
        name = head.split("`")[1]
        most = rows[(rows.model == name) & (rows["mode"] == "model") & (rows.status == "ok")]
        most = most[(most.cpus == most.cpus.max()) & (most.seconds >= most.min_window_s)]
        assert head.endswith(f"({report_summary.speed_text(most.img_per_s.median())})"), head
        for cpus, cell in zip(cores, cells):
            here = rows[(rows.model == name) & (rows.cpus == cpus)]
            if cell == "—":   # a cell of a ladder still being measured: no part has its rows
                assert here.empty, (name, cpus)
                continue
            (part,) = here.part.unique()   # one part
            assert cell.endswith(f"<sup>{next(k for k, v in letters.items() if v == part)}</sup>"), (name, cpus, cell)
            found = ladder_cell(here)
            model = found.pop("none")
            assert model["processes"] >= 3 and model["windows"] >= 2
            assert all(c["processes"] >= 3 and c["windows"] >= 2 for c in found.values()), (name, cpus)
            assert all(c["share"] < 1.01 for c in found.values()), (name, cpus)
            fed = {p for p, c in found.items() if c["verdict"] == "fed"}
            if fed:
                names, _, rest = cell.partition(" ×")
                more = re.search(r" \+(\d+)$", names)
                shown = {n.strip(" `") for n in re.split(r"`, `", names[:more.start() if more else None])}
                assert shown <= fed and len(shown) + (int(more.group(1)) if more else 0) == len(fed), (name, cpus, cell)
                assert len(shown) == min(3, len(fed))
                gain = max(found[p]["rate"] for p in fed) / found["dataloader"]["rate"]
                over = " over `dataloader`" if sum(p.startswith("dataloader") for p in found) > 1 else ""
                assert re.match(rf"{gain:.1f}{over}( |$)", rest), (name, cpus, cell, gain)
            else:
                best = max((p for p, c in found.items() if c["verdict"] == "compared"), key=lambda p: found[p]["rate"])
                c = found[best]
                assert cell.startswith(f"none (fastest `{best}` {down(c['share'])}, {down(c['free'])} restart-free)"), cell
            noisy = {p: c for p, c in found.items() if c["verdict"] == "noisy"}
            assert set(re.findall(r"`([^`]+)` noisy", cell)) == set(noisy), (name, cpus, cell)
            for p, c in noisy.items():
                assert f"`{p}` noisy: e2e's windows moved {c['move']:+.0%} within a process" in cell
            held = {p for p, c in found.items() if c["verdict"] == "compared" and c["share"] < 0.95 <= c["free"]}
            note = re.search(r"\(restart-free also ((?:`[^`]+`(?:, )?)+)\)", cell)
            assert set(re.findall(r"`([^`]+)`", note.group(1)) if note else []) == held, (name, cpus, cell)
            assert "above" not in {c["verdict"] for c in found.values()}


def test_a_model_without_e2e_beside_it_still_gets_its_model_only_rate(tmp_path):
    rows = (processes("model", "none", [[300_000, 310_000]], model="small", step="compile", compile_s=28.0)
            + processes("model", "none", [[9_000, 9_100]], model="big", step="compile")
            + processes("model", "none", [[50_000]], model="fed", step="compile")
            + processes("e2e", "p", [[49_000]], model="fed", step="compile"))
    text = report.write([write(tmp_path, rows)], tmp_path / "out").read_text()
    section = text[text.index("### Model-only steps"):]
    section = section[:section.index("\n### ")] if "\n### " in section else section
    assert section.index("`small`") < section.index("`big`")        # fastest first
    assert "305,000" in section and "| 28 " in section                  # its median and compile seconds
    assert "`fed`" not in section                                       # shown beside its e2e row instead
    shared = [row("model", "none", 20_000, model="shared", step="compile", process=p, compile_s=c, slot=p)
              for p, c in enumerate([31.0, 0.01, 0.02])]   # compiled where it ran first, then a step each
    text = report.write([write(tmp_path, shared)], tmp_path / "out").read_text()
    assert "`shared`" in text and text.rstrip().endswith("|          31 |")


def test_every_e2e_share_has_its_restart_free_share_beside_it_from_steady_img_per_s(tmp_path):
    """The restart-free share: the median of the windows' `steady_img_per_s` (the steps that began no
    epoch) over model-only's median, beside every e2e share in the situation table, the answer and
    the summary table; the verdicts stay on the rate with restarts."""
    rows = []
    for model, e2e in (("m", {"dataloader": (50_000, [60_000] * 3), "p": (94_000, [96_000, 97_000, 98_000]),
                              "q": (99_000, [99_500] * 3)}),
                       ("n", {"dataloader": (40_000, [41_000] * 3), "p": (80_000, [90_000] * 3)})):
        rows += processes("model", "none", [[100_000] * 2] * 3, model=model, step="compile")
        rows += [row("e2e", name, rate, model=model, step="compile", process=p, repeat=w, steady_img_per_s=steady)
                 for name, (rate, per_process) in e2e.items() for p, steady in enumerate(per_process) for w in range(2)]
    report.write([write(tmp_path, rows)], tmp_path / "out")
    text = (tmp_path / "out" / "REPORT.md").read_text()
    shown = {(section[:1], line.split("|")[1].strip()): [c.strip() for c in line.split("|")[4:-1]]
             for section in text.split("\n`")[1:] for line in section.splitlines() if line.startswith("| ")
             and "restart-free)" in line}
    assert {key: cells[0] for key, cells in shown.items()} == {
        ("m", "q"): "99.0% (99.5% restart-free)", ("m", "p"): "94.0% (97.0% restart-free)",
        ("m", "dataloader"): "50.0% (60.0% restart-free)", ("n", "p"): "80.0% (90.0% restart-free)",
        ("n", "dataloader"): "40.0% (41.0% restart-free)"}
    assert shown[("m", "p")][-2] != "fed" and shown[("m", "q")][-2] == "fed"   # the verdict: with restarts
    m, n = sorted(line for line in (tmp_path / "out" / "ANSWER.md").read_text().splitlines() if line.startswith("- "))
    assert "`dataloader` delivers 50,000 (" in m and ", 50.0%; 60.0% restart-free)" in m
    assert m.endswith("use `q` (2.0× faster than `dataloader`); below 95% only with epoch restarts: "
                      "`p` 94.0% (97.0% restart-free).")
    assert n.endswith("the fastest, `p`, reaches 80.0% of model-only (90.0% restart-free), 2.0× `dataloader`.")
    table = [line for line in (tmp_path / "out" / "SUMMARY.md").read_text().splitlines() if line.startswith("| `")]
    assert [[c.strip() for c in line.split("|")[1:-1]] for line in table] == [
        ["`m` compile (100k)", "`q` ×2.0 (restart-free also `p`)"],
        ["`n` compile (100k)", "none (fastest `p` 80.0%, 90.0% restart-free)"]]


def test_every_report_names_its_epoch_length(tmp_path):
    """REPORT.md's provenance, the summary's first line and ANSWER.md's header name each epoch length
    of the run's pipeline rows (`samples`, `steps_per_epoch`); per rank where several ranks split it."""
    rows = (processes("model", "none", [[100_000]] * 2, model="m", step="compile")
            + processes("e2e", "p", [[99_000]] * 2, model="m", step="compile", steps_per_epoch=48, samples=25_000)
            + processes("loader", "p", [[9_000]] * 2, image_size=224, batch_size=256, steps_per_epoch=9, samples=2_500))
    report.write([write(tmp_path, rows)], tmp_path / "out")
    epochs = "an epoch: 25,000 samples in 48 steps of 512 or 2,500 samples in 9 steps of 256"
    assert "\n- An epoch: 25,000 samples in 48 steps of 512 or 2,500 samples in 9 steps of 256.\n" in (
        tmp_path / "out" / "REPORT.md").read_text()
    assert (tmp_path / "out" / "SUMMARY.md").read_text().splitlines()[2].startswith(
        f"From one run, `run` (commit abc123; Test GPU; {epochs}); every number")
    assert f"From `run` ([REPORT.md](REPORT.md) for the whole report; {epochs})." in (
        tmp_path / "out" / "ANSWER.md").read_text()
    ranks = pd.DataFrame([{"status": "ok", "pipeline": "p", "samples": 25_000.0, "world_size": 2, "steps_per_epoch": 48.0,
                           "batch_size": 512}])
    assert formatting.epoch_text(ranks) == "an epoch: 25,000 samples per rank in 48 steps of 512"
    assert formatting.epoch_text(ranks.drop(columns=["samples", "steps_per_epoch"])) == "epoch length not recorded"
    assert formatting.epoch_text(ranks.assign(pipeline="none")) is None   # model-only alone: no epochs


def test_the_pipeline_s_cpu_includes_what_it_ran_inside_next_and_old_rows_show_all_threads(tmp_path):
    """A pipeline whose decode runs inside `next()` on the training thread pays for it; rows written
    before `next_cpu_s` cannot split the training thread's seconds and show the whole process's."""
    rows = [*processes("model", "none", [[10_000] * 2] * 3, model="m", step="eager"),
            *processes("e2e", "decoding", [[9_900] * 2] * 3, model="m", step="eager", images=1_000, cpu_s=1.0,
                       train_cpu_s=0.9, next_cpu_s=0.6, pipeline_cpu_s_per_kimg=0.7, next_syncs=False),
            *processes("e2e", "workers", [[9_900] * 2] * 3, model="m", step="eager", images=1_000, cpu_s=0.8,
                       train_cpu_s=0.3, next_cpu_s=0.0, pipeline_cpu_s_per_kimg=0.5, next_syncs=True),
            *processes("e2e", "old", [[9_900] * 2] * 3, model="m", step="eager", images=1_000, cpu_s=0.9,
                       cpu_s_per_kimg=0.9, train_cpu_s=0.9, pipeline_cpu_s_per_kimg=0.0)]
    c = report.cells(report.load([write(tmp_path, rows)])).set_index("pipeline")
    assert c.loc["decoding"].cpu_train == pytest.approx(0.3) and c.loc["decoding"].cpu_pipe == 0.7
    assert math.isnan(c.loc["old"].cpu_pipe) and math.isnan(c.loc["old"].cpu_train)
    text = report.write([tmp_path / "run" / "results.csv"], tmp_path / "out").read_text()
    line = {name: next(x for x in text.splitlines() if x.startswith(f"| {name} "))
            for name in ("decoding", "workers", "old")}
    assert "0.7 + 0.3" in line["decoding"] and "0.5 + 0.3" in line["workers"] and "0.9 (all threads)" in line["old"]
    assert "(with the copy's device sync)" in line["workers"] and "device sync" not in line["decoding"]
    summary = (tmp_path / "out" / "SUMMARY.md").read_text()
    assert "`workers`, `decoding`, `old`" in summary and "of all threads where" in summary   # "old" cannot split


BLOCK_KINDS = [k for k in report.KINDS if k != "table"]   # a table gathers several runs: tests/test_gathered.py


def readme_with_block(path: Path, kind: str, folder: str) -> Path:
    """A README holding an old `kind` block of the report in `folder`."""
    start, end = report.marks(kind, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# x\n{start}\nold\n{end}\nrest\n")
    return path


@pytest.mark.parametrize("kind", BLOCK_KINDS)
def test_a_readme_writer_keeps_the_file_s_mode(tmp_path, kind):
    path = write(tmp_path, reference_rows())
    readme = readme_with_block(tmp_path / "README.md", kind, "out")
    readme.chmod(0o444)
    assert cli.main(["report", path, "--out", str(tmp_path / "out"), "--readme", str(readme)]) == 0
    assert "\nold\n" not in readme.read_text() and readme.stat().st_mode & 0o777 == 0o444


@pytest.mark.parametrize("kind", BLOCK_KINDS)
def test_a_readme_writer_writes_through_a_symlink_with_links_relative_to_its_target(tmp_path, kind):
    """The link stays a link; its target gets the block (named by the report's folder relative to the
    target's folder), its links relative to the target's folder."""
    path = write(tmp_path, reference_rows())
    target = readme_with_block(tmp_path / "docs" / "deep" / "README.md", kind, "../../out")
    start, end = report.marks(kind, "../../out")
    link = tmp_path / "README.md"
    link.symlink_to(Path("docs") / "deep" / "README.md")
    assert cli.main(["report", path, "--out", str(tmp_path / "out"), "--readme", str(link)]) == 0
    assert link.is_symlink() and "\nold\n" not in target.read_text()
    block = target.read_text().split(start)[1].split(end)[0]
    assert "](../../out/REPORT.md)" in block and "](out/REPORT.md)" not in block
    assert not [p for p in tmp_path.rglob(".*") if p.name.endswith(".new")]


def test_a_full_disk_while_writing_through_a_readme_symlink_leaves_link_and_target_whole(tmp_path, monkeypatch):
    """Written beside the target and renamed over it: the error names the target, left as it was."""
    path = write(tmp_path, reference_rows())
    target = readme_with_block(tmp_path / "docs" / "README.md", "summary", "../out")
    link = tmp_path / "README.md"
    link.symlink_to(Path("docs") / "README.md")
    before = target.read_bytes()
    real = results._write_all

    def full(fd, data):   # only the README's write fails
        if b"rest\n" in data:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data)
    monkeypatch.setattr(results, "_write_all", full)
    with pytest.raises(SystemExit) as exit:
        cli.main(["report", path, "--out", str(tmp_path / "out"), "--readme", str(link)])
    err = str(exit.value.code)
    assert link.is_symlink() and target.read_bytes() == before
    assert not [p for p in tmp_path.rglob(".*") if p.name.endswith(".new")]
    assert f"cannot write {target} (No space left on device): {target} is left as it was" in err
    assert "--out" not in err
    link.unlink()   # a README that is no link is named as given
    readme_with_block(link, "summary", "out")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit:
        cli.main(["report", path, "--out", "out", "--readme", "README.md"])
    assert str(exit.value.code).endswith("cannot write README.md (No space left on device): README.md is left as it was")


HOSTILE = {"pipeline": "p\nq<script>alert(1)</script>", "other": "javascript:alert(3)](javascript:alert(4))",
           "model": "=HYPERLINK(\"javascript:alert(1)\",\"x\")](javascript:alert(2))`x`", "step": "eager\n<b>x</b>|y"}


def test_names_from_the_rows_cannot_break_a_table_or_make_html_or_a_link(tmp_path):
    """Pipeline, model and step names holding a newline, `|`, HTML, backticks and `](` in every file
    the report writes: outside code spans no tag and no link from the data, every table row whole."""
    model, step = HOSTILE["model"], HOSTILE["step"]
    rows = [*processes("model", "none", windows(50_000, 50_000, 50_000), model=model, step=step),
            *processes("model", "none", windows(9_000, 9_000, 9_000), model="alone", step=step)]   # no e2e beside
    for name, rate_ in ((HOSTILE["pipeline"], 49_000), (HOSTILE["other"], 30_000)):
        rows += [*processes("e2e", name, windows(rate_, rate_, rate_), model=model, step=step),
                 *processes("loader", name, windows(rate_ * 2, rate_ * 2, rate_ * 2)),
                 *processes("loader", name, windows(rate_, rate_, rate_), busy=5.0),
                 row("train", name, 1000, model=model, step=step, seconds=2.0, test_accuracy=0.9, seed=0)]
    out = tmp_path / "out"
    report.write([write(tmp_path, rows)], out)
    for name in ("REPORT.md", "SUMMARY.md", "ANSWER.md"):
        text = (out / name).read_text()
        outside = re.sub(r"`[^`\n]*`", "", text.replace("\\`", ""))   # code spans left out
        assert "<script" not in outside and "<b>" not in outside, name
        assert not re.search(r"(?<!\\)\]\(javascript", outside), name   # `\](` is no link
        assert not re.search(r"^(q<|q&lt;|<b>|&lt;b)", text, re.M), name   # no name split over two lines
        for block in text.split("\n\n"):
            lines = [line for line in block.splitlines() if line.startswith("|")]
            borders = {len(re.findall(r"(?<!\\)\|", line)) for line in lines}
            assert len(borders) <= 1, block   # every row of a table has as many cell borders


def cpu_rows() -> list[dict]:
    """A CPU run (no GPU): model-only's processes disagree (110, 146 and 131 img/s); `fast` e2e is
    above model-only's highest process, `slow` below it."""
    cpu = {"gpu": math.nan, "device": "cpu", "cpus": 2, "num_workers": 1}
    return [*processes("model", "none", [[110, 110], [146, 146], [131, 131]], model="m", step="eager", **cpu),
            *processes("e2e", "fast", windows(150, 150, 150), model="m", step="eager", **cpu),
            *processes("e2e", "slow", windows(100, 100, 100), model="m", step="eager", **cpu),
            *processes("loader", "fast", windows(5000, 5000, 5000), **cpu),
            *processes("loader", "slow", windows(3000, 3000, 3000), **cpu)]


def test_a_cpu_run_s_report_speaks_of_cores_and_img_per_s_not_gpus(tmp_path):
    out = tmp_path / "out"
    report.write([write(tmp_path, cpu_rows())], out)
    for name in ("REPORT.md", "SUMMARY.md"):
        text = (out / name).read_text()
        sections = text.split("What each timer includes")[0] + text.split("## Run ")[-1]   # the rules are general
        assert "per GPU" not in sections and "idle GPU" not in sections and "0.131k" not in sections, name
        assert "`m` eager (131)" in sections, name


def test_e2e_a_few_tenths_above_model_only_s_highest_process_is_fed_and_beyond_one_percent_it_is_set_aside(tmp_path):
    """Model-only's processes agree to 0.1 %: an e2e cell whose processes all read 0.5 % above its highest
    is fed (a step fed in the same processes reading a little faster says nothing against it); one 2 %
    above is "e2e above model-only" (part2of7 of the H200 ladder: `vit-s4`'s four best-fed pipelines
    were set aside at +0.05 to +0.09 %)."""
    rows = [*processes("model", "none", [[1000, 1000], [1001, 1001], [999, 999]], model="m", step="compile"),
            *processes("e2e", "near", windows(1005, 1006, 1007), model="m", step="compile"),
            *processes("e2e", "far", windows(1020, 1021, 1022), model="m", step="compile")]
    s = report.view_of(report.load([write(tmp_path, rows)])).situations.set_index("pipeline")
    assert s.loc["near", "verdict"] == "fed", s.loc["near", "why"]
    assert s.loc["far", "verdict"] == "inconclusive (e2e above model-only)"
    assert "by more than 1%" in s.loc["far", "why"]


def test_an_answer_setting_pipelines_aside_as_above_model_only_says_model_only_s_processes_disagreed(tmp_path):
    found = report.view_of(report.load([write(tmp_path, cpu_rows())]))
    (said,) = report.answers(found.cells, found.situations)
    assert ("(not compared, e2e above model-only, whose processes read 110 to 146 img/s: the machine was noisy: "
            "`fast`)") in said
    report.write([write(tmp_path, cpu_rows())], tmp_path / "out")
    summary_text = (tmp_path / "out" / "SUMMARY.md").read_text()
    assert "(`fast` e2e above model-only, whose processes read 110 to 146 img/s: the machine was noisy)" in summary_text


def test_the_printed_copies_name_their_payload_and_size_and_point_at_the_several_gpu_rows(tmp_path):
    """Copies differing only in payload and image size print one line each, told apart; the rows of
    several GPUs are not in the one-GPU table, and the print says where they are."""
    from bench.cli import measure
    rows = [row("copy", "none", rate / gpus, payload=payload, stage="h2d-pinned", image_size=px, world_size=gpus,
                rank=r, world_img_per_s=rate, parallel="none" if gpus == 1 else "ddp", repeat=w)
            for payload, px, rate in (("uint8", 32, 14e6), ("float32", 32, 4e6), ("uint8", 224, 3.5e5))
            for gpus in (1, 2, 4) for r in range(gpus) for w in range(2)]
    write(tmp_path, rows)
    printed = measure.summary(tmp_path / "run").splitlines()
    header = next(line for line in printed if line.startswith("mode"))
    assert " px " in header
    copies = [line.split() for line in printed if line.startswith("copy")]
    assert sorted((c[1], c[2], c[5]) for c in copies) == [   # mode, stage, pipeline, model, (no step), px
        ("float32", "h2d-pinned", "32"), ("uint8", "h2d-pinned", "224"), ("uint8", "h2d-pinned", "32")]
    assert f"(one GPU's cells; per GPU and per job at 2 and 4 GPUs: `pipebench report {tmp_path / 'run'} --out " in (
        "\n".join(printed))
    several = [r for r in rows if r["world_size"] > 1]
    one = [r for r in rows if r["world_size"] == 1]
    dp = one + [dict(r, parallel="dp", gpus=2, pipeline="dataparallel") for r in one]
    failed = [dict(several[0], status="error", world_size=8)]
    for kept, said in ((several, "(rank 0's cells (no row used one GPU); per GPU and per job at 2 and 4 GPUs"),
                       (dp + failed, "(one GPU's cells; per GPU and per job at 2 GPUs:")):   # DataParallel's devices; failed rows not
        write(tmp_path, kept)
        assert said in measure.summary(tmp_path / "run"), kept[0]


def test_the_printed_rates_show_only_columns_that_hold_something_and_say_what_reads_means(tmp_path):
    from bench.cli import measure
    write(tmp_path, cpu_rows())
    printed = measure.summary(tmp_path / "run")
    header = next(line for line in printed.splitlines() if line.startswith("mode"))
    assert "stage" not in header and "reads" not in header and "busy ms" not in header and "cores" in header
    assert " px " not in header and "Several GPUs" not in printed   # one size, one GPU
    write(tmp_path, [*cpu_rows(), *processes("loader", "slow", windows(900, 900, 900), busy=5.0),
                     *processes("model", "none", windows(90, 90, 90), model="m", step="eager", sync_every=1)])
    printed = measure.summary(tmp_path / "run")
    header = next(line for line in printed.splitlines() if line.startswith("mode"))
    assert "reads" in header and "busy ms" in header and "stage" not in header
    assert "reads: the step reads the loss every N steps (0: never)" in printed


def test_a_cell_not_fed_only_by_its_floor_is_never_called_below_95_only_with_restarts(tmp_path):
    """The CIFAR newcomer's answer said "below 95% only with epoch restarts: `resident` 115.2%" of a
    cell whose median was above 95% but one process under the floor: only a share under FED whose
    restart-free share reaches it is named so."""
    rows = [*processes("model", "none", windows(100, 101, 102), model="m", step="eager"),
            *processes("e2e", "floor", [[99, 99], [100, 100], [80, 80]], model="m", step="eager",
                       steady_img_per_s=110),
            *processes("e2e", "restarts", windows(90, 90, 90), model="m", step="eager", steady_img_per_s=99)]
    s = report.situations(report.cells(report.load([write(tmp_path, rows)])))
    named = fed_only_restart_free(s)
    assert list(named.pipeline) == ["restarts"]
    (text,) = report.answers(report.cells(report.load([write(tmp_path, rows)])))
    assert "below 95% only with epoch restarts: `restarts`" in text and "`floor` 9" not in text.split("restarts:")[-1]


def test_on_a_gpu_loader_rows_of_an_idle_gpu_alone_name_no_cause(tmp_path):
    """Idle-GPU loader rows do not say what a pipeline delivers beside the step (the suite's own
    timeline contradicted "the pipeline's work slows the step" named from them): cause not measured;
    on a CPU run the idle rate is what there is."""
    rows = [*processes("model", "none", windows(50_000, 50_000, 50_000), model="m", step="eager"),
            *processes("e2e", "p", windows(20_000, 20_000, 20_000), model="m", step="eager"),
            *processes("loader", "p", [[80_000], [80_000]])]
    s = report.situations(report.cells(report.load([write(tmp_path, rows)]))).set_index("pipeline")
    assert s.loc["p"].verdict == "not fed, cause not measured"
    on_cpu = [dict(r, device="cpu") for r in rows]
    s = report.situations(report.cells(report.load([write(tmp_path, on_cpu)]))).set_index("pipeline")
    assert s.loc["p"].verdict == "slower than both"


def test_an_answer_never_says_none_is_fed_beside_a_share_above_95_without_why(tmp_path):
    """The photo newcomer's answer said "no pipeline keeps it fed", then that the fastest "reach
    101.3% of model-only": a share at or above FED with no verdict says which rule held it back."""
    rows = [*processes("model", "none", windows(100, 101, 102), model="m", step="eager"),
            *processes("e2e", "dataloader", [[101, 101], [104, 104], [80, 80]], model="m", step="eager")]
    (text,) = report.answers(report.cells(report.load([write(tmp_path, rows)])))
    assert "no pipeline is shown to keep it fed: the fastest, `dataloader`, reaches 100.0% of model-only, but " \
           "inconclusive: its lowest process 79.2%, under 93%" in text


def test_windows_that_began_with_batches_ready_are_listed(tmp_path):
    """The drain stops when a burst lands: windows then begin with batches made before them
    (`ready_at_start`), which no report read; a cell whose windows began with at least READY of
    their steps' batches ready is listed, one that began with none is not."""
    rows = [*processes("loader", "burst", windows(100, 100, 100), ready_at_start=30),
            *processes("loader", "steady", windows(100, 100, 100), ready_at_start=1)]
    report.write([write(tmp_path, rows)], tmp_path / "out")
    text = (tmp_path / "out" / "REPORT.md").read_text()
    section = text.split("### Windows that began with batches ready (10% of their steps or more)")[1].split("###")[0]
    assert "- loader `burst` at 32 px, 16 cores: 30 of 100 steps' batches ready at the start" in section
    assert "`steady`" not in section


def test_a_several_gpu_run_from_before_the_cpu_columns_is_reported(tmp_path):
    """A results.csv written before `cpu_s` existed (results/2026-11-22-h200-multi-gpu/x2): the
    scaling table is made without the CPU share it cannot know, not an AttributeError."""
    rows = [row("e2e", "p", 4_000 * share, model="m", world_size=gpus, rank=r, world_img_per_s=4_000 * share * gpus,
                parallel="none" if gpus == 1 else "ddp", repeat=w, cpu_count=32)
            for gpus, share in ((1, 1.0), (2, 0.8)) for r in range(gpus) for w in range(2)]
    path = tmp_path / "old" / "results.csv"
    path.parent.mkdir()
    old = pd.read_csv(Path(__file__).parents[1] / "results/2026-11-22-h200-multi-gpu/x2/results.csv", nrows=0).columns
    assert "cpu_s" not in old
    pd.DataFrame(rows).reindex(columns=old).to_csv(path, index=False)
    view = scaling.scaling(report.load([str(path)]))[0]
    assert {r["GPUs"]: r["vs 1 GPU"] for r in view.to_dict("records")} == {1: "100%", 2: "80%"}
    assert "### Several GPUs" in report.write([str(path)], tmp_path / "out").read_text()


def test_a_cpu_run_with_a_skipped_pipeline_still_speaks_of_cores_not_cores_per_gpu():
    """Issue 69: a CPU run's skipped rows (no device) made its report say "CPU cores per GPU"
    (results/2026-12-02-cpu-first-command, `ffcv` skipped)."""
    assert formatting.per_gpu(["cpu", "", float("nan")]) == ""
    assert formatting.per_gpu(["cuda:0", "cpu"]) == " per GPU" and formatting.per_gpu(["", float("nan")]) == " per GPU"


def test_a_cpu_run_s_report_says_once_that_its_timers_ran_without_a_gpu(tmp_path):
    """Issue 69: a CPU run's report spoke of an idle or busy GPU, with no word that none was there."""
    rows = [*processes("model", "none", windows(100, 100, 100), model="m", device="cpu"),
            *processes("e2e", "p", windows(99, 99, 99), model="m", device="cpu")]
    assert report.write([write(tmp_path, rows, "cpu")], tmp_path / "a").read_text().count(report.files.NO_GPU) == 1
    gpu = [dict(r, device="cuda:0") for r in rows]
    assert report.files.NO_GPU not in report.write([write(tmp_path, gpu, "gpu")], tmp_path / "b").read_text()


def test_two_pipelines_within_noise_of_each_other_reach_up_to_the_faster_ones_share(tmp_path):
    """Neither fed, the two within noise: the share said is the faster one's, so 'up to' it."""
    rows = [*processes("model", "none", windows(50_000, 50_000, 50_000), model="m", step="eager"),
            *processes("e2e", "prefetch", windows(41_000, 39_000, 40_000), model="m", step="eager"),
            *processes("e2e", "resident", windows(40_500, 39_500, 39_800), model="m", step="eager")]
    (text,) = report.answers(report.cells(report.load([write(tmp_path, rows)])))
    assert text.endswith("the fastest, `prefetch` or `resident` (within noise of each other), reach up to 80.0% of "
                         "model-only.")
