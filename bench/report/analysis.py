"""Numbers from result rows: reading them (`load`, `runs`, `label_variants`), cells (`cells`),
loader ceilings (`ceilings`, `loader_at`) and each e2e cell's situation (`situations`), judged by the
one verdict rule (`bench.report.verdicts`). RULES states how, as every REPORT.md does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

import pipelines

from .. import results
from ..results import settings
from .formatting import per_gpu, rate, shown
from .verdicts import FED, thin, verdict

RULES = """\
How numbers are read (`cells`): a configuration ran in one or more independent processes, each
timing one or more windows. A model-only or e2e window shorter than the run's minimum is left out
alone (its cell keeps the others). A rate is the median over all windows, shown with the range of
the per-process medians, "median [lowest process - highest process] n=windows/processes"; with a
single process the range is its windows' min-max. Windows whose rate drifted by more than DRIFT
within one process are listed.

Verdicts (`verdict`), per pipeline, model, step kind, loss reads, image size and CPU budget, on
medians, each from at least MIN_PROCESSES processes of at least MIN_WINDOWS windows each, e2e and
model-only (else "too few measurements", and the table names the pipeline thin, with what it had):
  - inconclusive (e2e above model-only): e2e's lowest process above model-only's highest by more than
    ABOVE_BY: the two timings disagree beyond both their spreads, and nothing is called fed (a pipeline
    as fast as model-only, its processes among model-only's or above them by at most ABOVE_BY, is fed:
    where model-only's processes agree to within 0.1 %, a step fed in the same processes can read a
    few tenths of a percent faster, which says nothing against it being fed);
  - inconclusive (noisy): the windows of one process, e2e or model-only, moved by more than DRIFT
    (last against first), and e2e's share is within that move of FED (between FED / (1 + move) and
    FED x (1 + move)): the rates are not steady enough to put it on either side;
  - fed: e2e is at least FED of model-only, and its lowest process at least FLOOR of it;
  - inconclusive: below that, but the e2e and model-only process ranges overlap, or e2e is above
    what the pipeline delivered loader-only at the model's step time (`loader_at`; then the loader
    rows cannot name the cause);
  - input-bound: not fed, the pipeline fell behind loader-only at the model's step time, and e2e is
    within what it delivered there (its range between processes, less AT below);
  - slower than both: not fed and e2e below that (the pipeline's work slows the step, or loader-only
    kept up there);
  - not fed, cause not measured: no loader rows at the model's step time (on a GPU, rows of an idle
    GPU alone do not say what the pipeline delivers beside the step).
A pipeline's headspace curve is its delivered rate against the busy step's time t per batch
(loader mode, `busy_ms`: a fixed amount of work): its time per batch in the harness's loop beside a
null pipeline (`busy_null_ms`, `bench.measuring.busy.beside_null`), so the step's own stretch is not
counted against the pipeline; rows from before that was recorded read its idle time `busy_idle_ms`,
and rows from before the step kept its work its measured time, to which it was refit. The step alone
allows batch / t, and the share of it delivered includes the contention: beside the pipeline the
step runs longer (its stretch, `busy_stretch`), as a training step would. What it delivers at a model's step
time is read from the curve between the two levels around it (log-linear in t; below the fastest
level, linear from the idle-GPU rate). Its loader ceiling (`ceilings`) is the rate at which it stops
keeping up: where its share of batch / t crosses FED between the slowest level at which it fell
behind and the next (interpolated, so a point more or less at one level moves it a little, never
past another level); "≥" the rate at the fastest level where it kept up at every level; where it
fell behind at the slowest, its rate there. On a CPU run (no busy level) the idle rate is read.
Two pipelines tie when their medians differ by less than the larger of their between-process ranges."""

DRAIN = 0.5   # a loader window shorter than this share of the run's minimum window is rejected
READY = 0.1   # windows that began with at least this share of their steps' batches ready are listed
SETTING = ["image_size", "batch_size", "dtype"]
STEP_ORDER = ["eager", "graph", "compile"]
NUMERIC = {"process": 0, "busy_ms": 0.0, "busy_step_ms": math.nan, "busy_idle_ms": math.nan, "busy_stretch": math.nan,
           "busy_null_ms": math.nan,
           "sync_every": 0, "min_window_s": 0.0,
           "pipeline_cpu_s_per_kimg": math.nan, "train_cpu_s": math.nan, "next_cpu_s": math.nan, "cpu_s": math.nan,
           "cpus": math.nan,
           "steady_img_per_s": math.nan, "cpu_s_per_kimg": math.nan,
           "test_accuracy": math.nan, "compile_s": math.nan, "restart_ms": math.nan, "image_size": 32, "world_size": 1,
           "rank": 0, "gpus": math.nan, "peak_gpu_mem_mb": math.nan, "peak_gpu_mem_mb_others": math.nan, "world_img_per_s": math.nan,
           "batch_bytes": math.nan, "sm_mhz": math.nan, "wait_frac": math.nan, "train_epochs": math.nan, "seed": 0,
           "slot": math.nan, "ready_at_start": math.nan}
# Columns read as numbers: a cell of text there is damage (`numbers`)
NUMBERS = [*NUMERIC, "img_per_s", "images", "seconds", "epochs", "batch_size", "samples", "steps_per_epoch", "steps",
           "repeat", "cpu_count", "requested_steps", "max_samples", "warmup", "data_seed", "busy_units",
           "step_ms_p50", "step_ms_p95", "wait_ms_p50", "wait_ms_p95", "host_calibration_ms",
           "drain_steps", "drain_s", "queue_capacity", "setup_s", "upload_s", "first_batch_s", "warmup_s"]
RATES = ["img_per_s", "world_img_per_s", "steady_img_per_s"]   # img/s a window delivered: finite, >= 0
TEXT = {"stage": "", "step": "", "payload": "", "copy": "", "device": "", "parallel": "none", "git_commit": "", "boot_id": "",
        "hostname": "", "run_id": "", "error": "", "gpu": "", "cpu_model": "", "peers": "", "dali": "",
        "next_syncs": ""}


def key() -> list[str]:
    """A cell's key: the settings the report groups cells by (`bench.results.settings.report_key`: mode,
    stage, payload, pipeline, model, step kind, loss reads, image size, batch, dtype, CPU budget),
    then the busy level."""
    return [*settings.report_key(), "busy_ms"]


def variant_options() -> tuple[list[str], list[str]]:
    """The options that name a variant: those named wherever their values differ within one
    pipeline's rows, and those (`Option.within`: worker and queue counts, which a sweep sets per CPU
    budget) named only where they differ at one CPU budget and image size."""
    knobs = pipelines.declared_options().values()
    return (settings.variants() + [o.name for o in knobs if not o.within], [o.name for o in knobs if o.within])


def load(paths: list[str | Path]) -> pd.DataFrame:
    """Result CSVs (a torn last line left out), with `results_file` (the run's name), `results_folder`
    (the folder holding it) and defaults for the columns an older version did not write, drained
    loader windows rejected (`reject_drains`); one-line ValueError for a file that is not pipebench's or
    is damaged, naming it (and the line and column: `results.read_rows`, `numbers`). A run's name keeps
    the bytes of its folder's name that are not UTF-8 as `\\xff` (`shown`): every report file can hold it."""
    frames, names = [], {}
    for p in dict.fromkeys(Path(p).resolve() for p in paths):   # the same file given twice: read once
        lines: list[int] = []
        frame = results.read_rows(p, lines=lines, keep_default_na=False, na_values=[""], dtype={c: str for c in TEXT})
        missing = {"pipeline", "mode", "status", "img_per_s"} - set(frame.columns)
        if frame.empty or missing:
            raise ValueError(f"{p}: no pipebench rows in it" + (f" (no column {', '.join(sorted(missing))})"
                                                               if len(frame.columns) and missing else ""))
        name = shown(p.parent.name or str(p))   # a run is named by its folder; two files of one name told apart
        names[name] = names.get(name, 0) + 1
        frames.append(numbers(frame, p, lines).assign(results_file=name if names[name] == 1 else f"{name} ({names[name]})",
                                                      results_folder=str(p.parent)))
    df = pd.concat(frames, ignore_index=True)
    for column, value in {**NUMERIC, **TEXT}.items():
        df[column] = df[column].fillna(value) if column in df else value
    df["cpus"] = df.cpus.fillna(df.get("cpu_count", math.nan))
    df["world_img_per_s"] = df.world_img_per_s.fillna(df.img_per_s)
    df.loc[df["mode"].isin(["model", "e2e"]) & (df.step == ""), "step"] = "eager"   # before --step existed
    df["image_size"] = df.image_size.astype(int)
    df["machine"] = df.boot_id.where(df.boot_id != "", df.hostname)
    # one block per dtype (`copy` consolidates): the columns above were set one by one, each a block of
    # its own (~100 float columns in a file of every column), and every row filter of the report copied
    # each block (pandas >= 3 keeps each text column a block of its own still)
    return reject_drains(df).copy()


def numbers(frame: pd.DataFrame, path: Path, lines: list[int]) -> pd.DataFrame:
    """`frame` (the rows of the file `path`, each row's line in `lines`) with its NUMBERS columns as
    numbers; a cell that holds none, or a rate (RATES) below 0 or infinite, is a damaged file: one line
    naming the file, line, column and cell."""
    def refuse(column: str, bad, what: str):
        line = f", line {lines[bad[0]]:,}" if len(lines) == len(frame) else ""
        raise ValueError(f"{path}{line}: {column} holds {str(frame[column].iloc[bad[0]])!r}, {what}: a damaged "
                         "results file")
    for column in [c for c in NUMBERS if c in frame and not pd.api.types.is_numeric_dtype(frame[c])]:
        values = pd.to_numeric(frame[column], errors="coerce")
        text = frame[column].astype(str).str.strip().str.lower()
        bad = np.flatnonzero(values.isna() & frame[column].notna() & ~text.isin(["nan", "+nan", "-nan"]))
        if len(bad):
            refuse(column, bad, "not a number")
        frame[column] = values
    for column in [c for c in RATES if c in frame]:
        bad = np.flatnonzero((frame[column] < 0) | np.isinf(frame[column]))
        if len(bad):
            refuse(column, bad, "not a rate (img/s: finite, at least 0)")
    return frame


def reject_drains(df: pd.DataFrame) -> pd.DataFrame:
    """Loader windows (ok) that lasted under DRAIN of their run's minimum window made "rejected" with
    the reason: the pipeline handed over batches it had queued before the window, a drain, not a rate."""
    minimum = pd.to_numeric(df.min_window_s, errors="coerce")
    drained = (df["mode"] == "loader") & (df.status == "ok") & (df.seconds < DRAIN * minimum)
    df.loc[drained, "status"] = "rejected"
    df.loc[drained, "error"] = [f"lasted {s:.2g} s, under half the run's {m:g} s minimum window: batches queued "
                                "before the window were handed over (a drain, not a rate)"
                                for s, m in zip(df.seconds[drained], minimum[drained])]
    return df


def runs(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The runs in the rows (results file x commit x machine), named by their results file (with the
    commit and machine where one file holds several)."""
    found = []
    for file, rows in df.groupby("results_file", sort=True):
        parts = list(rows.groupby(["git_commit", "machine"], sort=True))
        for (commit, machine), part in parts:
            name = file if len(parts) == 1 else f"{file} (commit {commit or '?'}, machine {machine[:8] or '?'})"
            found.append((name, part))
    return found


def label_variants(df: pd.DataFrame) -> pd.DataFrame:
    """`pipeline` renamed to include its variant options (`variant_options`): of the pipelines' own
    knobs the ones it reads (`pipelines.reads`; a pipeline not registered now: all)."""
    df = df.copy()
    always, within = variant_options()
    for name, rows in df[df.pipeline != "none"].groupby("pipeline"):
        listed = pipelines.reads(name) if name in pipelines.names() else list(pipelines.declared_options())
        reads = [c for c in always + within if c in settings.variants() or c in listed]
        varying = [c for c in always if c in reads and c in rows and rows[c].nunique(dropna=False) > 1]
        varying += [c for c in within if c in reads and c in rows and
                    rows.groupby(["cpus", "image_size"])[c].nunique(dropna=False).max() > 1]
        if varying:   # the varying columns' values row by row (`iterrows` made a Series of every column per row)
            df.loc[rows.index, "pipeline"] = [f"{name} ({', '.join(f'{c}={knob(v)}' for c, v in zip(varying, values))})"
                                              for values in zip(*(rows[c].tolist() for c in varying))]
    return df


def knob(value: object) -> object:
    """An option's value as a label shows it: a whole float (a count read back from the CSV as one) as an int."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _drift(windows: pd.DataFrame) -> float:
    """Last window's rate over the first's, minus 1, in one process (0 for one window)."""
    rates = windows.sort_values("repeat").img_per_s.to_numpy()
    return rates[-1] / rates[0] - 1 if len(rates) > 1 else 0.0


# the medians a cell takes of its rows: the cell's column -> the rows' column
MEDIANS = {"img_per_s": "img_per_s", "steady": "steady_img_per_s", "restart": "restart_ms", "cpu": "cpu_s_per_kimg",
           "cpu_pipe": "pipe_cpu_kimg", "cpu_train": "train_cpu_kimg", "busy_step": "busy_step_ms",
           "busy_idle": "busy_idle_ms", "busy_null": "busy_null_ms", "stretch": "busy_stretch", "wait": "wait_frac",
           "seconds": "seconds", "compile": "compile_first", "accuracy": "test_accuracy", "sm_mhz": "sm_mhz",
           "bytes_per_image": "bytes_per_image", "ready": "ready_at_start", "steps": "steps"}
# a cell's columns from its rows, in the order the tables have always had them
CELL_COLUMNS = ["img_per_s", "wlo", "whi", "n", "steady", "restart", "cpu", "cpu_pipe", "cpu_train", "busy_step",
                "busy_idle", "busy_null", "stretch", "wait", "syncs", "seconds", "device", "compile", "accuracy", "sm_mhz",
                "bytes_per_image", "copy", "ready", "steps"]


def process_of(rows: pd.DataFrame) -> pd.Series:
    """Each row's configuration process: its run, process index and seed."""
    return rows.run_id + "#" + rows.process.astype(str) + "#" + rows.seed.astype(str)


def cells(df: pd.DataFrame) -> pd.DataFrame:
    """One row per measured cell (`key`) of ok rows: median img/s over its windows, lo/hi (the range of
    its per-process medians; its windows' range with one process), n windows, p processes, w / w_hi
    the fewest / most windows of one process, `dropped` its model-only or e2e windows shorter than the
    run's minimum (left out alone: `short_windows`), and the medians of the other measurements."""
    ok, dropped = short_windows(df[(df.status == "ok") & df.img_per_s.notna()])
    ok = ok.copy().assign(   # one block: the rows' columns were added one by one
        bytes_per_image=lambda d: d.batch_bytes * d.steps / d.images,
        proc=process_of,
        # CPU booked as `bench.measuring.harness` says: rows from before `next_cpu_s` cannot split it (NaN: all threads shown)
        pipe_cpu_kimg=lambda d: d.pipeline_cpu_s_per_kimg.where(d.next_cpu_s.notna()),
        train_cpu_kimg=lambda d: 1e3 * (d.train_cpu_s - d.next_cpu_s) / d.images,
        syncs=lambda d: d.next_syncs == "True",
        # a configuration that shared a process compiled only where it ran first (`harness.Shared`)
        compile_first=lambda d: d.compile_s.where(d.slot.isna() | (d.slot == 0)))
    if ok.empty:
        return pd.DataFrame(columns=[*key(), "img_per_s", "lo", "hi", "n", "p", "w", "w_hi", "dropped", "drift", "steady",
                                     "ready", "steps",
                                     "restart", "cpu", "cpu_pipe", "cpu_train", "busy_step", "busy_idle", "busy_null", "stretch",
                                     "wait", "syncs", "seconds", "compile", "accuracy", "sm_mhz", "bytes_per_image",
                                     "copy", "device"])
    by_process = ok.groupby([*key(), "proc"], sort=True)
    process = by_process.agg(rate=("img_per_s", "median"), accuracy=("test_accuracy", "median"),
                             windows=("img_per_s", "count")).reset_index()
    drift = by_process[["repeat", "img_per_s"]].apply(_drift).rename("drift").reset_index()
    spans = process.groupby(key()).agg(p=("proc", "nunique"), plo=("rate", "min"), phi=("rate", "max"),
                                     acc_lo=("accuracy", "min"), acc_hi=("accuracy", "max"),
                                     w=("windows", "min"), w_hi=("windows", "max"))
    drifts = drift.groupby(key()).drift.agg(lambda d: d.loc[d.abs().idxmax()])
    cell = ok.groupby(key(), sort=True)
    # the medians in one pass over the groups (one named aggregation each took a pass of its own)
    medians = cell[list(MEDIANS.values())].median().rename(columns={v: k for k, v in MEDIANS.items()})
    table = cell.agg(wlo=("img_per_s", "min"), whi=("img_per_s", "max"), n=("img_per_s", "count"),
                     syncs=("syncs", "any"), device=("device", "first"), copy=("copy", "first"))
    table = medians.join(table)[CELL_COLUMNS].join(spans).join(drifts)
    table["dropped"] = dropped.reindex(table.index, fill_value=0)
    several = table.p > 1
    table["lo"] = table.plo.where(several, table.wlo)
    table["hi"] = table.phi.where(several, table.whi)
    return table.reset_index()


def short_windows(ok: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """The ok rows without model-only and e2e windows shorter than the run's minimum (each left out
    alone, its cell keeps the others; loader windows have their own rule, `reject_drains`), and how
    many each cell (`key`) lost."""
    short = ok["mode"].isin(["model", "e2e"]) & (ok.seconds < ok.min_window_s)
    return ok[~short], ok[short].groupby(key()).size()


def at_setting(frame: pd.DataFrame, setting: tuple) -> pd.DataFrame:
    """The rows of `frame` at one setting (SETTING values)."""
    return frame[(frame[SETTING] == pd.Series(dict(zip(SETTING, setting)))).all(axis=1)]


def ties(a, b) -> bool:
    """Whether two cells' medians differ by less than the larger of their between-process ranges."""
    return abs(a.img_per_s - b.img_per_s) <= max(a.hi - a.lo, b.hi - b.lo)


def levels(group: pd.DataFrame) -> pd.DataFrame:
    """One pipeline's busy headspace levels (one setting and budget), by the step's time `t` beside a
    null pipeline (module docstring: in older rows its idle time, its refit time, else its label), with
    what the step alone allows (`cap`, batch / t) and the share of it delivered."""
    busy = group[group.busy_ms > 0].copy()
    busy["t"] = busy.busy_null.fillna(busy.busy_idle).fillna(busy.busy_step).fillna(busy.busy_ms)
    busy["cap"] = busy.batch_size / (busy.t / 1e3)
    busy["share"] = busy.img_per_s / busy.cap
    return busy.sort_values("t")


def step_alone(loader: pd.DataFrame) -> pd.DataFrame:
    """Per busy level where it was recorded: what the busy step allows beside a null pipeline
    (`img_per_s`, batch / its time per batch in the loop) and that time over its idle time (`stretch`)."""
    timed = loader[loader.busy_null.notna() & (loader.busy_ms > 0)]
    return timed.groupby("busy_ms").apply(lambda g: pd.Series({
        "img_per_s": g.batch_size.iloc[0] / (g.busy_null.median() / 1e3),
        "stretch": g.busy_null.median() / g.busy_idle.median()}), include_groups=False)


def ceiling_of(group: pd.DataFrame) -> pd.Series:
    """One pipeline's loader ceiling (module docstring) from its loader cells of one setting and
    budget: the cell's columns, `img_per_s` / `lo` / `hi` / `cpu*` / `restart` from the levels it
    rests on, `bound` ("≥" where it is a lower bound), `levels` (which, as text), `idle`."""
    busy, idle = levels(group), group[group.busy_ms == 0]
    behind = np.flatnonzero((busy.share < FED).to_numpy())   # the levels it fell behind at
    if busy.empty:
        used, text, value = idle, "idle GPU only" if per_gpu(group.device) else "no GPU: the idle rate", None
    elif not len(behind):
        used, text, value = busy.iloc[:1], f"kept up at every level from {busy.busy_ms.iloc[0]:g} ms", None
    elif behind[-1] == len(busy) - 1:
        used, text, value = busy.iloc[-1:], f"behind at the slowest level, {busy.busy_ms.iloc[-1]:g} ms", None
    else:   # between the slowest level it fell behind at and the next, where it kept up (and at every slower one)
        j = int(behind[-1]) + 1
        a, b = busy.iloc[j - 1], busy.iloc[j]
        f = math.log(FED / a.share) / math.log(b.share / a.share)   # the share, log-linear in log t, crosses FED
        t = math.exp(math.log(a.t) + f * (math.log(b.t) - math.log(a.t)))
        used, text, value = busy.iloc[j - 1:j + 1], f"crosses {FED:.0%} between {a.busy_ms:g} and {b.busy_ms:g} ms", \
            FED * a.batch_size / (t / 1e3)
    row = used.iloc[0].copy()
    row["img_per_s"] = used.img_per_s.median() if value is None else value
    row["lo"], row["hi"] = min(used.lo.min(), row.img_per_s), max(used.hi.max(), row.img_per_s)
    row["n"], row["p"] = int(used.n.sum()), int(used.p.min())
    for column in ("cpu", "cpu_pipe", "cpu_train", "restart"):
        row[column] = used[column].median()
    row["bound"] = "≥ " if len(busy) and not len(behind) else ""
    row["levels"] = text
    row["idle"] = idle.img_per_s.iloc[0] if len(idle) else math.nan
    return row


def ceilings(c: pd.DataFrame) -> pd.DataFrame:
    """Per pipeline, setting and CPU budget: the loader ceiling (`ceiling_of`)."""
    loader = c[c["mode"] == "loader"]
    if loader.empty:
        return loader.assign(idle=[], levels=[], bound=[])
    return pd.DataFrame([ceiling_of(group) for _, group in loader.groupby(["pipeline", *SETTING, "cpus"], sort=True)]
                        ).reset_index(drop=True)


def ceiling_text(row) -> str:
    return row.bound + rate(row)


def loader_at(group: pd.DataFrame, step_ms: float) -> SimpleNamespace | None:
    """What a pipeline delivered loader-only (its cells of one setting and budget) at a step of
    `step_ms` per batch, read from its headspace curve (module docstring): img_per_s, lo, hi and
    `kept_up` (at least FED of batch / step_ms); None where the levels do not reach that step time."""
    busy, idle = levels(group), group[group.busy_ms == 0]
    batch = group.batch_size.iloc[0]
    if busy.empty:   # no busy level: on a CPU run the rate alone; on a GPU, not beside a step: not measured
        if idle.empty or per_gpu(group.device):
            return None
        a = idle.iloc[0]
        return SimpleNamespace(img_per_s=a.img_per_s, lo=a.lo, hi=a.hi, step_ms=math.nan,
                               kept_up=a.img_per_s >= FED * batch / (step_ms / 1e3))
    ts = busy.t.to_numpy()
    if step_ms > ts[-1]:   # slower than every level: known only if the pipeline kept up at the slowest
        last = busy.iloc[-1]
        if last.share < FED:
            return None
        return SimpleNamespace(img_per_s=last.img_per_s, lo=last.lo, hi=last.hi, kept_up=True, step_ms=step_ms)
    if step_ms < ts[0]:    # faster than every level: between the idle GPU (t = 0) and the fastest level
        if idle.empty:
            return None
        a, b, f = idle.iloc[0], busy.iloc[0], step_ms / ts[0]
        mix = lambda x, y: x + f * (y - x)
    else:
        j = min(int(np.searchsorted(ts, step_ms)), len(ts) - 1)
        a, b = busy.iloc[max(j - 1, 0)], busy.iloc[j]
        f = 0.0 if a.t == b.t else (math.log(step_ms) - math.log(a.t)) / (math.log(b.t) - math.log(a.t))
        mix = lambda x, y: math.exp(math.log(x) + f * (math.log(y) - math.log(x)))
    value = mix(a.img_per_s, b.img_per_s)
    return SimpleNamespace(img_per_s=value, lo=mix(a.lo, b.lo), hi=mix(a.hi, b.hi), step_ms=step_ms,
                           kept_up=value >= FED * batch / (step_ms / 1e3))


def situations(c: pd.DataFrame) -> pd.DataFrame:
    """Per e2e cell: its model-only cell (same setting, step kind, loss reads, CPU budget), what the
    pipeline delivered loader-only at the model's step time, verdict and reason."""
    models = c[c["mode"] == "model"].set_index(["model", "step", "sync_every", *SETTING, "cpus"])
    loaders = {key: group for key, group in c[c["mode"] == "loader"].groupby(["pipeline", *SETTING, "cpus"])}
    rows = []
    for e in c[c["mode"] == "e2e"].itertuples():
        at = (e.image_size, e.batch_size, e.dtype, e.cpus)
        if (e.model, e.step, e.sync_every, *at) not in models.index:
            continue
        m = models.loc[(e.model, e.step, e.sync_every, *at)]
        group = loaders.get((e.pipeline, *at))
        loader = loader_at(group, e.batch_size / m.img_per_s * 1e3) if group is not None else None
        label, why = verdict(e, m, loader)
        above = loader is not None and e.img_per_s > loader.hi
        rows.append({**e._asdict(), "model_rate": m.img_per_s, "model_text": rate(m),
                     "model_lo": m.lo, "model_hi": m.hi, "model_p": m.p, "share": e.img_per_s / m.img_per_s,
                     "loader_text": "not measured" if loader is None else
                     f"{loader.img_per_s:,.0f} [{loader.lo:,.0f}–{loader.hi:,.0f}] "
                     + ("alone" if math.isnan(loader.step_ms) else f"at {loader.step_ms:.3g} ms"),
                     "above_loader": above, "verdict": label, "why": why, "thin": thin(e, m), "e2e_text": rate(e),
                     "e2e": e})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class RunView:
    """What the tables, the summary and the answers of one run read, made once: its one-GPU rows
    (a run under torchrun alone: rank 0's) with variant labels, their cells, loader ceilings and
    situations."""
    rows: pd.DataFrame
    cells: pd.DataFrame
    ceilings: pd.DataFrame
    situations: pd.DataFrame


def view_of(group: pd.DataFrame) -> RunView:
    single = group[(group.world_size == 1) & (group.parallel == "none")]
    rows = label_variants(single if len(single) else group[group["rank"] == 0])
    c = cells(rows)
    cap = ceilings(c)
    return RunView(rows, c, cap, situations(c))
