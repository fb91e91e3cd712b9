"""Turn result CSVs into REPORT.md, SUMMARY.md and plots, reproducibly (same CSVs -> same bytes); every
file it writes (the README's block too) is replaced whole (`results.replace_file`): a full disk or
Ctrl-C leaves the previous one as it was.

What a report never does: pool runs. A run is one results file, one commit and one machine (its
boot id; the host name for rows that have none). Each run gets its own sections, and the summary
(and the README block made from it) comes from exactly one run.

How numbers are read (`cells`): a configuration ran in one or more independent processes, each
timing one or more windows. A rate is the median over all windows, shown with the range of the
per-process medians, "median [lowest process - highest process] n=windows/processes"; with a
single process the range is its windows' min-max. Windows whose rate drifted by more than DRIFT
within one process are listed.

Verdicts (`verdict`), per pipeline, model, step kind, loss reads, image size and CPU budget, on
medians, each from at least MIN_PROCESSES processes per cell and windows no shorter than the run's
minimum (else "too few measurements"):
  - inconclusive (e2e above model-only): e2e's whole range lies above model-only's: the two timings
    disagree, and nothing is called fed;
  - fed: e2e is at least FED of model-only;
  - inconclusive: below that, but the e2e and model-only process ranges overlap, or e2e is above
    what the pipeline delivered loader-only at the model's step time (`loader_at`; then the loader
    rows cannot name the cause);
  - input-bound: not fed, the pipeline fell behind loader-only at the model's step time, and e2e is
    within what it delivered there (its range between processes, less AT below);
  - slower than both: not fed and e2e below that (the pipeline's work slows the step, or loader-only
    kept up there);
  - not fed, cause not measured: no loader rows at the model's step time.
A pipeline's headspace curve is its delivered rate against the busy step's measured time t per
batch (loader mode, `busy_ms`); the step alone allows batch / t. What it delivers at a model's step
time is read from the curve between the two levels around it (log-linear in t; below the fastest
level, linear from the idle-GPU rate). Its loader ceiling (`ceilings`) is the rate at which it stops
keeping up: where its share of batch / t crosses FED between the slowest level at which it fell
behind and the next (interpolated, so a point more or less at one level moves it a little, never
past another level); "≥" the rate at the fastest level where it kept up at every level; where it
fell behind at the slowest, its rate there. Rows with no busy level (a CPU run) read the idle rate.
Two pipelines tie when their medians differ by less than the larger of their between-process
ranges.
"""
from __future__ import annotations

import io
import math
import os
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from . import results  # noqa: E402
from .plan import MIN_PROCESSES, READS, SPECIFIC  # noqa: E402

FED = 0.95    # e2e / model-only at or above this: the model is kept fed
AT = 0.95     # e2e at least this share of what loader-only delivered (its range's low end): e2e is at it
DRIFT = 0.05  # a process whose windows moved more than this (last vs first) is listed
TOO_FEW = "too few measurements"
ABOVE = "inconclusive (e2e above model-only)"
KEY = ["mode", "stage", "payload", "pipeline", "model", "step", "sync_every", "image_size", "batch_size", "dtype", "cpus",
       "busy_ms"]
SETTING = ["image_size", "batch_size", "dtype"]
STEP_ORDER = ["eager", "graph", "compile"]
# Options whose values make two rows of one pipeline different variants (named in its label): the
# first always when they vary in a run, the second only when they vary at one CPU budget and size
# (with --cpus, workers and DALI threads follow the budget).
VARIANT_ALWAYS = ["encoding", "augment", "channels_last", "pin_memory", "non_blocking", "prefetch_augment",
                  "worker_start", "dali_reader", "dali_decoder", "dali_hw_decoder_load"]
VARIANT_WITHIN = ["num_workers", "dali_threads", "prefetch_depth", "dali_queue_depth", "dali_batch_multiple"]
NUMERIC = {"process": 0, "busy_ms": 0.0, "busy_step_ms": math.nan, "sync_every": 0, "min_window_s": 0.0,
           "pipeline_cpu_s_per_kimg": math.nan, "train_cpu_s": math.nan, "cpus": math.nan, "steady_img_per_s": math.nan, "cpu_s_per_kimg": math.nan,
           "test_accuracy": math.nan, "compile_s": math.nan, "restart_ms": math.nan, "image_size": 32, "world_size": 1,
           "rank": 0, "gpus": math.nan, "peak_gpu_mem_mb_others": math.nan, "world_img_per_s": math.nan,
           "batch_bytes": math.nan, "sm_mhz": math.nan, "wait_frac": math.nan, "train_epochs": math.nan, "seed": 0}
TEXT = {"stage": "", "step": "", "payload": "", "copy": "", "device": "", "parallel": "none", "git_commit": "", "boot_id": "",
        "hostname": "", "run_id": "", "error": "", "gpu": "", "cpu_model": "", "peers": "", "dali": ""}

TIMERS = """\
What each timer includes (`bench/harness.py`): every window starts and ends with a device
synchronize and covers exactly its steps; warm-up, the run that sizes the windows and pipeline
construction (including a resident upload) are outside. **loader**: iterate the pipeline with no
model; the consumer reads each batch (one tiny kernel) and, at a headspace level of t ms, keeps the
GPU busy t ms per batch with bf16 matrix products and memory copies on every SM (`bench/busy.py`,
calibrated before the pipeline exists; a window whose step ran more than 5% off t, or delivered
more than batch / t allows, is rejected and listed): level 0 is an idle GPU; the **loader ceiling**
is the rate at which the pipeline stops keeping up with a busy GPU (the rule above). **model**: the
training step on real batches already on the device (the split's images, normalized as e2e gets
them). **e2e**: the training step on the pipeline's batches, windows of whole epochs (epoch
restarts included); "loss read every N" rows call `loss.item()` every N steps. **restart**: median
host wait of the steps that began an epoch. **CPU s / 1k img**: user + system CPU seconds per
1,000 images of the pipeline (the process tree without the training thread: its threads, workers
and processes) and, apart, of the training thread (which also runs what a pipeline does inside
`next()`); CUDA waits block, so waiting costs none. **stage**: one stage of
a pipeline alone. **copy**: one batch copied host-to-device, back to back. **train**: whole epochs
timed as one window (the first step, which compiles, before it), then the test split's accuracy."""

SCALING = """\
DDP: one process per GPU under torchrun, each with its 1/N shard of every epoch, its own workers
and its own CPU cores (`--cpus`), gradients all-reduced in the step; img/s is the job's (all ranks'
images over the slowest rank's window) and per GPU. "vs 1 GPU": per-GPU img/s over the same
configuration's one-GPU img/s in the same run. Copy rows: every rank copies at once."""


# --- reading -----------------------------------------------------------------------------------

def load(paths: list[str | Path]) -> pd.DataFrame:
    """Result CSVs (a torn last line left out), with `results_file` and defaults for the columns an
    older version did not write; one-line ValueError for a file that is not pipebench's."""
    frames, names = [], {}
    for p in dict.fromkeys(Path(p).resolve() for p in paths):   # the same file given twice: read once
        frame = results.read_rows(p, keep_default_na=False, na_values=[""], dtype={c: str for c in TEXT})
        missing = {"pipeline", "mode", "status", "img_per_s"} - set(frame.columns)
        if frame.empty or missing:
            raise ValueError(f"{p}: no pipebench rows in it" + (f" (no column {', '.join(sorted(missing))})"
                                                               if len(frame.columns) and missing else ""))
        name = p.parent.name or str(p)   # a run is named by its folder; two files of one name told apart
        names[name] = names.get(name, 0) + 1
        frames.append(frame.assign(results_file=name if names[name] == 1 else f"{name} ({names[name]})"))
    df = pd.concat(frames, ignore_index=True)
    for column in ("img_per_s", "images", "seconds"):   # numbers, or the file is damaged: one line, not a traceback
        values = pd.to_numeric(df[column], errors="coerce") if column in df else None
        if values is not None:
            bad = df[values.isna() & df[column].notna()]
            if len(bad):
                raise ValueError(f"{bad.results_file.iloc[0]}: a row's {column} holds {str(bad[column].iloc[0])!r}, "
                                 "not a number: a damaged results file")
            df[column] = values
    for column, value in {**NUMERIC, **TEXT}.items():
        df[column] = df[column].fillna(value) if column in df else value
    df["cpus"] = df.cpus.fillna(df.get("cpu_count", math.nan))
    df["world_img_per_s"] = df.world_img_per_s.fillna(df.img_per_s)
    df.loc[df["mode"].isin(["model", "e2e"]) & (df.step == ""), "step"] = "eager"   # before --step existed
    df["image_size"] = df.image_size.astype(int)
    df["machine"] = df.boot_id.where(df.boot_id != "", df.hostname)
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
    """`pipeline` renamed to include its variant options (VARIANT_ALWAYS, VARIANT_WITHIN): those every
    pipeline reads, and of those only some read (`plan.SPECIFIC`) the ones this pipeline reads
    (`plan.READS`; a pipeline it does not list: all)."""
    df = df.copy()
    for name, rows in df[df.pipeline != "none"].groupby("pipeline"):
        listed = READS.get(name, SPECIFIC)
        reads = [c for c in VARIANT_ALWAYS + VARIANT_WITHIN if c not in SPECIFIC or c in listed]
        varying = [c for c in VARIANT_ALWAYS if c in reads and c in rows and rows[c].nunique(dropna=False) > 1]
        varying += [c for c in VARIANT_WITHIN if c in reads and c in rows and
                    rows.groupby(["cpus", "image_size"])[c].nunique(dropna=False).max() > 1]
        if varying:
            df.loc[rows.index, "pipeline"] = [f"{name} ({', '.join(f'{c}={r[c]}' for c in varying)})"
                                              for _, r in rows.iterrows()]
    return df


def _drift(windows: pd.DataFrame) -> float:
    """Last window's rate over the first's, minus 1, in one process (0 for one window)."""
    rates = windows.sort_values("repeat").img_per_s.to_numpy()
    return rates[-1] / rates[0] - 1 if len(rates) > 1 else 0.0


def cells(df: pd.DataFrame) -> pd.DataFrame:
    """One row per measured cell (KEY) of ok rows: median img/s over its windows, lo/hi (the range of
    its per-process medians; its windows' range with one process), n windows, p processes, and the
    medians of the other measurements."""
    ok = df[(df.status == "ok") & df.img_per_s.notna()].assign(
        bytes_per_image=lambda d: d.batch_bytes * d.steps / d.images,
        proc=lambda d: d.run_id + "#" + d.process.astype(str) + "#" + d.seed.astype(str),
        train_cpu_kimg=lambda d: 1e3 * d.train_cpu_s / d.images, short=lambda d: d.seconds < d.min_window_s)
    if ok.empty:
        return pd.DataFrame(columns=[*KEY, "img_per_s", "lo", "hi", "n", "p", "drift", "steady", "restart", "cpu",
                                     "cpu_pipe", "cpu_train", "busy_step", "short", "wait", "seconds", "compile",
                                     "accuracy", "sm_mhz", "bytes_per_image", "copy", "device"])
    by_process = ok.groupby([*KEY, "proc"], sort=True)
    process = by_process.agg(rate=("img_per_s", "median"), accuracy=("test_accuracy", "median")).reset_index()
    drift = by_process[["repeat", "img_per_s"]].apply(_drift).rename("drift").reset_index()
    spans = process.groupby(KEY).agg(p=("proc", "nunique"), plo=("rate", "min"), phi=("rate", "max"),
                                     acc_lo=("accuracy", "min"), acc_hi=("accuracy", "max"))
    drifts = drift.groupby(KEY).drift.agg(lambda d: d.loc[d.abs().idxmax()])
    table = ok.groupby(KEY, sort=True).agg(
        img_per_s=("img_per_s", "median"), wlo=("img_per_s", "min"), whi=("img_per_s", "max"),
        n=("img_per_s", "count"), steady=("steady_img_per_s", "median"), restart=("restart_ms", "median"),
        cpu=("cpu_s_per_kimg", "median"), cpu_pipe=("pipeline_cpu_s_per_kimg", "median"),
        cpu_train=("train_cpu_kimg", "median"), busy_step=("busy_step_ms", "median"), short=("short", "any"),
        wait=("wait_frac", "median"), seconds=("seconds", "median"), device=("device", "first"),
        compile=("compile_s", "median"), accuracy=("test_accuracy", "median"), sm_mhz=("sm_mhz", "median"),
        bytes_per_image=("bytes_per_image", "median"), copy=("copy", "first")).join(spans).join(drifts)
    several = table.p > 1
    table["lo"] = table.plo.where(several, table.wlo)
    table["hi"] = table.phi.where(several, table.whi)
    return table.reset_index()


# --- numbers as text ---------------------------------------------------------------------------

def pct(share: float) -> str:
    """A share as a percentage rounded down to 0.1, so it never shows a threshold it misses."""
    return f"{math.floor(share * 1000 + 1e-9) / 10:.1f}%"


def rate(row) -> str:
    return f"{row.img_per_s:,.0f} [{row.lo:,.0f}–{row.hi:,.0f}] n={row.n}/{row.p}"


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def escape(text: object) -> str:
    """Text from a CSV cell made safe inside a Markdown table: no table breaks, no HTML, no links or
    formatting read from the data, one line."""
    text = " ".join(str(text).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`*_\[\]|#!])", r"\\\1", text)


def code(name: object) -> str:
    """A pipeline or model name from the data as inline code (backticks removed from it)."""
    return "`" + " ".join(str(name).replace("`", "'").split()) + "`"


def table(frame: pd.DataFrame) -> str:
    """A Markdown table; a `|` in a cell (code spans too, where a backslash does not escape it outside
    a table) is escaped, so every row keeps its columns."""
    cells = frame.map(lambda v: re.sub(r"(?<!\\)\|", r"\\|", v) if isinstance(v, str) else v)
    return cells.to_markdown(index=False) if len(frame) else ""


# --- verdicts ----------------------------------------------------------------------------------

def overlaps(a, b) -> bool:
    return a.lo <= b.hi and b.lo <= a.hi


def at_setting(frame: pd.DataFrame, setting: tuple) -> pd.DataFrame:
    """The rows of `frame` at one setting (SETTING values)."""
    return frame[(frame[SETTING] == pd.Series(dict(zip(SETTING, setting)))).all(axis=1)]


def ties(a, b) -> bool:
    """Whether two cells' medians differ by less than the larger of their between-process ranges."""
    return abs(a.img_per_s - b.img_per_s) <= max(a.hi - a.lo, b.hi - b.lo)


def levels(group: pd.DataFrame) -> pd.DataFrame:
    """One pipeline's busy headspace levels (one setting and budget), by the step's measured time
    `t` (its label where not measured), with what the step alone allows (`cap`, batch / t) and the
    share of it delivered."""
    busy = group[group.busy_ms > 0].copy()
    busy["t"] = busy.busy_step.where(busy.busy_step.notna(), busy.busy_ms)
    busy["cap"] = busy.batch_size / (busy.t / 1e3)
    busy["share"] = busy.img_per_s / busy.cap
    return busy.sort_values("t")


def ceiling_of(group: pd.DataFrame) -> pd.Series:
    """One pipeline's loader ceiling (module docstring) from its loader cells of one setting and
    budget: the cell's columns, `img_per_s` / `lo` / `hi` / `cpu*` / `restart` from the levels it
    rests on, `bound` ("≥" where it is a lower bound), `levels` (which, as text), `idle`."""
    busy, idle = levels(group), group[group.busy_ms == 0]
    behind = np.flatnonzero((busy.share < FED).to_numpy())   # the levels it fell behind at
    if busy.empty:
        used, text, value = idle, "idle GPU only", None
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
    if busy.empty:   # no busy level (a CPU run): the rate alone
        if idle.empty:
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


def verdict(e2e, model, loader) -> tuple[str, str]:
    """(label, reason) for one pipeline and model (module docstring); `loader`: `loader_at` the
    model's step time, None where not measured."""
    share = e2e.img_per_s / model.img_per_s
    if min(e2e.p, model.p) < MIN_PROCESSES or e2e.short or model.short:
        return TOO_FEW, (f"e2e ran in {plural(int(e2e.p), 'process', 'processes')}, model-only in {int(model.p)}"
                         f" (a verdict needs {MIN_PROCESSES} each)" if min(e2e.p, model.p) < MIN_PROCESSES
                         else "a window shorter than the run's minimum")
    if e2e.lo > model.hi:
        return ABOVE, f"e2e is {pct(share)} of model-only, its whole range above model-only's: the two timings disagree"
    if share >= FED:
        return "fed", f"e2e is {pct(share)} of model-only"
    if overlaps(e2e, model):
        return "inconclusive", f"e2e is {pct(share)} of model-only, but their process ranges overlap"
    if loader is None:
        return "not fed, cause not measured", (f"e2e is {pct(share)} of model-only; loader-only not measured at its "
                                               "step time")
    at = (f"what loader-only delivered alone ({loader.img_per_s:,.0f})" if math.isnan(loader.step_ms) else
          f"what loader-only delivered at the model's step time ({loader.step_ms:.3g} ms: {loader.img_per_s:,.0f})")
    if e2e.img_per_s > loader.hi:
        return "inconclusive", f"e2e ({e2e.img_per_s:,.0f}) is above {at}: the loader-only rows do not hold"
    if not loader.kept_up and e2e.img_per_s >= AT * loader.lo:
        return "input-bound", f"e2e ({e2e.img_per_s:,.0f}) is at {at}, below model-only ({model.img_per_s:,.0f})"
    return "slower than both", (f"e2e ({e2e.img_per_s:,.0f}) is below {at} and model-only ({model.img_per_s:,.0f}): "
                                "the pipeline's work slows the step")


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
        rows.append({**e._asdict(), "model_rate": m.img_per_s, "model_text": rate(m), "share": e.img_per_s / m.img_per_s,
                     "loader_text": "not measured" if loader is None else
                     f"{loader.img_per_s:,.0f} [{loader.lo:,.0f}–{loader.hi:,.0f}] "
                     + ("alone" if math.isnan(loader.step_ms) else f"at {loader.step_ms:.3g} ms"),
                     "above_loader": above, "verdict": label, "why": why, "e2e_text": rate(e), "e2e": e})
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


def base_name(pipeline: str) -> str:
    return pipeline.split(" (", 1)[0]


def baseline(rows: pd.DataFrame):
    """The `dataloader` row among one situation's rows: the plain variant if measured, else the one
    with the fewest options named; None if none."""
    found = rows[rows.pipeline.map(base_name) == "dataloader"]
    if found.empty:
        return None
    return found.loc[found.pipeline.str.len().idxmin()]


def reads_text(every: int) -> str:
    """How often a situation's step reads the loss, for its heading ('' for never)."""
    return "" if not every else ", loss read every step" if every == 1 else f", loss read every {int(every)} steps"


def answer(rows: pd.DataFrame) -> str:
    """One situation's answer (one model, step kind, loss reads, setting, CPU budget), as a sentence.
    It names a pipeline to use only where one is fed and the others within noise of it are named
    with it; cells with too few measurements are left out of every comparison, and said so."""
    first = rows.iloc[0]
    per_gpu = "" if str(first.device).startswith("cpu") else " per GPU"   # no GPU: the cores are the machine's
    head = (f"With {plural(int(first.cpus), 'core')}{per_gpu}, {code(first.model)} at {first.image_size} px "
            f"({first.step} step{reads_text(first.sync_every)}) trains at {first.model_rate:,.0f} img/s alone")
    thin = rows[rows.verdict == TOO_FEW]
    above = rows[rows.verdict == ABOVE]
    rows = rows[~rows.verdict.isin([TOO_FEW, ABOVE])]
    left = "".join(f" ({what}: {', '.join(code(p) for p in out.pipeline)})" for what, out in (
        ("too few measurements to compare", thin), ("not compared, e2e above model-only", above)) if len(out))
    if rows.empty and len(above):
        return head + (f"; e2e ran faster than model-only ({pct(above.share.min())}–{pct(above.share.max())} of it) "
                       f"for {', '.join(code(p) for p in above.pipeline)}: the two timings disagree, so this run names "
                       "no pipeline (longer windows, --min-window-s, or an idle machine may settle it).")
    if rows.empty:
        return head + f"; too few measurements to compare pipelines (a verdict needs {MIN_PROCESSES} processes per cell)."
    base = baseline(rows)
    parts = [head]
    if base is not None:
        parts.append(f"{code(base.pipeline)} delivers {base.img_per_s:,.0f} ({base.verdict}, {pct(base.share)})")
    fed = rows[rows.verdict == "fed"].sort_values("img_per_s", ascending=False)
    keep = ", ".join(code(p) for p in fed.pipeline)
    verb = "keeps" if len(fed) == 1 else "keep"
    if base is not None and base.verdict == "fed":
        return "; ".join(parts) + f": the model is the limit; {keep} {verb} it fed{left}."
    pool = fed if len(fed) else rows.sort_values("img_per_s", ascending=False)
    best = pool.iloc[0]
    tied = [best.pipeline] + [r.pipeline for r in pool.iloc[1:].itertuples() if ties(r.e2e, best.e2e)]
    names = " or ".join(code(p) for p in tied) if len(tied) < 3 else ", ".join(code(p) for p in tied[:-1]) + f" or {code(tied[-1])}"
    other = base is not None and best.pipeline != base.pipeline   # a speed-up over dataloader, not over itself
    speed = f", {best.img_per_s / base.img_per_s:.1f}× `dataloader`" if other else ""
    within = " (within noise of each other)" if len(tied) > 1 else ""
    if fed.empty:
        return "; ".join(parts) + (f"; no pipeline keeps it fed: the fastest, {names}{within}, "
                                   f"reach{'' if len(tied) > 1 else 'es'} {pct(best.share)} of model-only{speed}{left}.")
    faster = f" ({best.img_per_s / base.img_per_s:.1f}× faster than `dataloader`)" if other else ""
    return "; ".join(parts) + f"; {keep} {verb} it fed: use {names}{within}{faster}{left}."


def answers(c: pd.DataFrame, s: pd.DataFrame | None = None) -> list[str]:
    """The answer for every measured situation (`s`: `situations(c)` if already made), largest CPU
    budget first."""
    s = situations(c) if s is None else s
    if s.empty:
        return []
    order = s.assign(step_rank=s.step.map({k: i for i, k in enumerate(STEP_ORDER)}).fillna(9))
    found = [((-cpus, size, model, rank, every), answer(rows))
             for (size, model, rank, every, cpus), rows in order.groupby(["image_size", "model", "step_rank",
                                                                          "sync_every", "cpus"], sort=True)]
    return [line for _, line in sorted(found, key=lambda item: item[0])]


# --- sections ----------------------------------------------------------------------------------

def provenance(group: pd.DataFrame) -> list[str]:
    """What a run holds: invocations, commit, machine, versions, window lengths; said, never hidden."""
    def values(column: str) -> list[str]:
        found = group[column].dropna() if column in group else []
        return sorted({f"{v:g}" if isinstance(v, float) else str(v) for v in found if str(v) != ""})

    ok = group[group.status == "ok"]
    ids = values("run_id")
    lines = [f"- {plural(len(ids), 'invocation')} ({', '.join(f'`{escape(r)}`' for r in ids)}); commit "
             f"{', '.join(values('git_commit')) or 'unknown'}; machine: {escape(', '.join(values('gpu')) or 'CPU')}, "
             f"{escape(', '.join(values('cpu_model')) or 'CPU model not recorded')}, "
             f"{', '.join(values('cpu_count')) or '?'} cores, host-speed figure "
             f"{', '.join(values('host_calibration_ms')) or 'not recorded'} ms (lower is faster)."]
    versions = [f"{c} {escape(' / '.join(values(c)))}" for c in ("torch", "torchvision", "dali", "peers", "driver", "cuda")
                if values(c)]
    lines.append("- Versions: " + "; ".join(versions) + ".")
    if len(ok):
        lines.append(f"- Windows: {ok.seconds.min():.2f}–{ok.seconds.max():.2f} s, {ok.steps.min():.0f}–"
                     f"{ok.steps.max():.0f} steps; {plural(int(ok.groupby(['run_id', 'process']).ngroups), 'process', 'processes')}.")
    mixed = [f"{c} {' / '.join(values(c))}" for c in ("warmup", "max_samples", "seed", "last_batch", "torch", "dali",
                                                      "peers") if len(values(c)) > 1]
    if mixed:
        lines.append("- **Mixed settings in this run:** " + "; ".join(escape(m) for m in mixed) + ".")
    return lines + [""]


def bus_table(c: pd.DataFrame) -> pd.DataFrame:
    copies = c[c["mode"] == "copy"]
    rows = [{"px": r.image_size, "payload": r.payload, "copy": r.stage.removeprefix("h2d-"), "batch": r.batch_size,
             "img/s": rate(r), "GB/s": f"{r.img_per_s * r.bytes_per_image / 1e9:.1f}"}
            for r in copies.sort_values(["image_size", "payload", "stage"]).itertuples()]
    return pd.DataFrame(rows)


def by_cores(cap: pd.DataFrame, text) -> pd.DataFrame:
    """Pipeline x CPU budget of loader ceilings (one setting's), each cell `text(ceiling)`."""
    if cap.empty:
        return pd.DataFrame()
    view = cap.assign(text=[text(r) for r in cap.itertuples()]).pivot(index="pipeline", columns="cpus", values="text")
    view = view[sorted(view.columns, reverse=True)].fillna("—")
    view.columns = [f"{int(k)} cores" for k in view.columns]
    return view.reset_index()


def cpu_text(r) -> str:
    """CPU seconds per 1,000 images: the pipeline's and, after "+", the training thread's; the whole
    process tree's for rows from before the two were told apart."""
    if pd.isna(r.cpu_pipe):
        return "—" if pd.isna(r.cpu) else f"{r.cpu:.2g} (all threads)"
    return f"{r.cpu_pipe:.2g} + {r.cpu_train:.2g}"


def cost_text(r) -> str:
    """A ceiling's CPU seconds per 1,000 images and epoch restart (medians over its levels), and the
    levels it rests on."""
    return f"{cpu_text(r)} s, {'—' if pd.isna(r.restart) else f'{r.restart:,.0f} ms'} ({r.levels})"


def colour(i: int):
    """The i-th pipeline's colour: 20 apart before one repeats (matplotlib's default cycle has 10),
    the strong shades first."""
    return plt.get_cmap("tab20")((2 * i) % 20 + (i // 10) % 2)


def plain_rates(ax) -> None:
    """Rates on a log axis as plain numbers (12,000, not 1.2×10⁴), the minor ticks unlabelled."""
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def save_plot(fig, path: Path) -> None:
    """A figure as PNG, the same bytes from the same data, written whole or not at all."""
    data = io.BytesIO()
    fig.savefig(data, format="png", metadata={"Software": None}, bbox_inches="tight")   # the legend beside it too
    plt.close(fig)
    results.replace_file(path, data.getvalue())


def cores_plot(cap: pd.DataFrame, models: pd.DataFrame, path: Path, title: str) -> bool:
    """Loader ceiling against CPU cores per GPU (one setting's), one line per pipeline; the model-only
    rates as horizontal lines."""
    if cap.cpus.nunique() < 2:
        return False
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    for i, (name, rows) in enumerate(cap.groupby("pipeline")):
        rows = rows.sort_values("cpus")
        ax.errorbar(rows.cpus, rows.img_per_s, yerr=[rows.img_per_s - rows.lo, rows.hi - rows.img_per_s],
                    fmt="o-", color=colour(i), ms=4, capsize=2, label=name)
    for j, ((model, step), rows) in enumerate(models.groupby(["model", "step"])):
        speed = rows.img_per_s.max()
        ax.axhline(speed, color="black", linestyle=[":", "--", "-."][j % 3], lw=0.8)
        ax.annotate(f"{model} {step} ({speed:,.0f})", (cap.cpus.min(), speed), fontsize=7, va="bottom")
    ax.set(xscale="log", yscale="log", xlabel="CPU cores per GPU", ylabel="loader ceiling, img/s")
    ax.set_xticks(sorted(cap.cpus.unique()), [f"{int(k)}" for k in sorted(cap.cpus.unique())])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())   # cores as plain numbers, no "3×10⁰"
    plain_rates(ax)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))   # beside the data, never over it
    fig.tight_layout()
    save_plot(fig, path)
    return True


def headspace_table(loader: pd.DataFrame) -> pd.DataFrame:
    view = loader.assign(text=[rate(r) for r in loader.itertuples()]).pivot(index="pipeline", columns="busy_ms", values="text")
    view = view[sorted(view.columns)].fillna("—")
    view.columns = ["idle GPU" if k == 0 else f"{k:g} ms" for k in view.columns]
    return view.reset_index()


def headspace_plot(loader: pd.DataFrame, batch: int, models: pd.DataFrame, path: Path, title: str) -> None:
    """Delivered img/s against the synthetic step time per batch, one line per pipeline; the line a
    pipeline that is never the limit would follow (batch / step time); models' step times."""
    busy = sorted(b for b in loader.busy_ms.unique() if b > 0)
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    if busy:
        xs = [busy[0] / 1.5, busy[-1] * 1.5]
        ax.plot(xs, [batch / (x / 1e3) for x in xs], color="grey", lw=3, alpha=0.3, label="the step is the limit")
    for i, (name, rows) in enumerate(loader.groupby("pipeline")):
        rows = rows[rows.busy_ms > 0].sort_values("busy_ms")
        ax.plot(rows.busy_ms, rows.img_per_s, "o-", ms=4, color=colour(i), label=name)
    for (model, step), rows in models.groupby(["model", "step"]):
        at = batch / rows.img_per_s.max() * 1e3
        ax.axvline(at, color="black", lw=0.6, linestyle=":")
        ax.annotate(f"{model} {step}", (at, ax.get_ylim()[0] if busy else 1), rotation=90, fontsize=6, va="bottom")
    ax.set(xscale="log", yscale="log", xlabel=f"synthetic training step, ms per batch of {batch}",
           ylabel="delivered img/s")
    if busy:
        ax.set_xticks(busy, [f"{b:g}" for b in busy])   # the levels, as plain numbers
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    plain_rates(ax)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    save_plot(fig, path)


def situation_table(s: pd.DataFrame) -> pd.DataFrame:
    rows = [{"pipeline": r.pipeline, "loader-only at the model's step": r.loader_text, "e2e img/s": r.e2e_text,
             "e2e / model": pct(r.share), "host wait": pct(r.wait) if not pd.isna(r.wait) else "—",
             "CPU s / 1k img (pipeline + training thread)": cpu_text(r),
             "verdict": r.verdict, "because": escape(r.why)}
            for r in s.sort_values("img_per_s", ascending=False).itertuples()]
    return pd.DataFrame(rows)


def stage_table(c: pd.DataFrame) -> pd.DataFrame:
    stages = c[c["mode"] == "stage"]
    rows = []
    for (pipeline, cpus), group in stages.groupby(["pipeline", "cpus"]):
        by_stage = group.set_index("stage")
        row = {"pipeline": pipeline, "cores": int(cpus), "copy": escape(group["copy"].iloc[0]),
               "bytes / image": f"{group.bytes_per_image.max():,.0f}"}
        for stage in ("host", "pin", "h2d-pageable", "h2d-pinned", "device"):
            row[stage] = rate(by_stage.loc[stage]) if stage in by_stage.index else "—"
        rows.append(row)
    return pd.DataFrame(rows)


def trained(df: pd.DataFrame) -> pd.DataFrame:
    """Train rows (one per training run: pipeline, seed, process), fastest first."""
    ok = df[(df.status == "ok") & (df["mode"] == "train")]
    return ok.sort_values(["seconds", "pipeline", "seed"], kind="stable")


def accuracy_table(df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per training run, and a sentence comparing the spread across pipelines with the
    spread of one pipeline's runs (seeds)."""
    runs = trained(df)
    if runs.empty:
        return pd.DataFrame(), ""
    view = pd.DataFrame({"pipeline": runs.pipeline, "model": runs.model, "step": runs.step,
                         "cores": runs.cpus.astype(int), "seed": runs.seed.astype(int),
                         "epochs": runs.train_epochs.map(lambda e: "—" if pd.isna(e) else f"{e:.0f}"),
                         "wall s": runs.seconds.map("{:.2f}".format),
                         "img/s": runs.img_per_s.map("{:,.0f}".format),
                         "test accuracy": runs.test_accuracy.map(lambda a: f"{100 * a:.2f}%")})
    by = runs.groupby("pipeline").test_accuracy
    spread = runs.test_accuracy.max() - runs.test_accuracy.min()
    seeds = (by.max() - by.min())[by.count() > 1]
    note = (f"Test accuracy spans {100 * runs.test_accuracy.min():.2f}–{100 * runs.test_accuracy.max():.2f}% over every "
            f"run ({100 * spread:.2f} points)" + (", and one pipeline's runs with other seeds span up to "
                                                   f"{100 * seeds.max():.2f} points ({', '.join(code(p) for p in seeds.index)})"
                                                   if len(seeds) else "") + ".")
    return view, note


def drift_lines(c: pd.DataFrame) -> list[str]:
    moved = c[c.drift.abs() > DRIFT]
    what = [r["pipeline"] if r["pipeline"] != "none" else f"{r['payload']} {r['stage']}".strip() or r["model"]
            for _, r in moved.iterrows()]
    return [f"- {r['mode']} {code(name)}{f' {code(r.model)}' if r.model != 'none' and r['pipeline'] != 'none' else ''}"
            f" at {r.image_size} px, {int(r.cpus)} cores{f', {r.busy_ms:g} ms busy' if r['mode'] == 'loader' else ''}: "
            f"{r.drift:+.1%} from first to last window"
            for name, (_, r) in zip(what, moved.iterrows())]


def run_sections(name: str, group: pd.DataFrame, view: "RunView", out: Path, slug: str,
                 plots: dict[str, str]) -> list[str]:
    """The sections of one run; `plots` gets the file name of its main plot ("cores")."""
    single, c = view.rows, view.cells
    parts = [f"## Run {escape(name)}", "", *provenance(group)]
    bus = bus_table(c)
    if len(bus):
        parts += ["### Host-to-device copies (the bus alone)", "", table(bus), ""]
    settings = sorted({tuple(r) for r in c[SETTING].itertuples(index=False)})
    for setting in settings:
        size, batch, dtype = setting
        at, cap = at_setting(c, setting), at_setting(view.ceilings, setting)
        here = f"{size} px, batch {batch}, {dtype}"
        models = at[at["mode"] == "model"]
        if len(cap):
            parts += [f"### Loader ceilings by CPU cores per GPU — {here}", "",
                      "The loader ceiling (img/s; the rule above), per pipeline and CPU budget:", "",
                      table(by_cores(cap, ceiling_text)), "",
                      "CPU seconds per 1,000 images (the pipeline's + the training thread's) and epoch restart, "
                      "medians over the levels the ceiling rests on (in brackets):",
                      "", table(by_cores(cap, cost_text)), ""]
            plot = out / f"cores-{slug}-{size}px.png"
            if cores_plot(cap, models, plot, f"{name}: loader ceiling by CPU cores, {here}"):
                parts += [f"![loader ceiling by cores]({plot.name})", ""]
                plots.setdefault("cores", plot.name)
        for cpus in sorted(at[at["mode"] == "loader"].cpus.unique(), reverse=True):
            loader = at[(at["mode"] == "loader") & (at.cpus == cpus)]
            if loader.busy_ms.nunique() < 2:
                continue
            plot = out / f"headspace-{slug}-{size}px-{int(cpus)}cores.png"
            headspace_plot(loader, batch, models[models.cpus == cpus], plot, f"{name}: headspace, {here}, {int(cpus)} cores")
            parts += [f"### Headspace curves — {here}, {plural(int(cpus), 'core')}", "",
                      "Delivered img/s while the GPU is kept busy the given ms per batch:", "",
                      table(headspace_table(loader)), "", f"![headspace]({plot.name})", ""]
        s = at_setting(view.situations, setting) if len(view.situations) else view.situations
        for (step, every, cpus), rows in (s.groupby(["step", "sync_every", "cpus"], sort=False) if len(s) else []):
            parts += [f"### {step.capitalize()} step{reads_text(every)} — {here}, {plural(int(cpus), 'core')}", ""]
            for model, by_model in rows.groupby("model", sort=True):
                parts += [f"{code(model)}: model-only {by_model.model_text.iloc[0]}.", "",
                          table(situation_table(by_model)), "", answer(by_model), ""]
                above = by_model[by_model.above_loader]
                if len(above):
                    parts += ["**Loader-only does not hold here:** " + "; ".join(
                        f"{code(r.pipeline)} e2e {r.img_per_s:,.0f} > loader-only {r.loader_text}" for r in above.itertuples())
                        + ".", ""]
        stages = stage_table(at)
        if len(stages):
            parts += [f"### Stage ceilings (img/s) — {here}", "", table(stages), ""]
    accuracy, note = accuracy_table(single)
    if len(accuracy):
        parts += ["### Time to accuracy", "", table(accuracy), "", note, ""]
    drift = drift_lines(c)
    if drift:
        parts += [f"### Windows that drifted more than {DRIFT:.0%} within a process", "", *drift, ""]
    rejected = group[group.status == "rejected"]
    if len(rejected):
        busy = group[(group["mode"] == "loader") & (group.busy_ms > 0) & group.status.isin(["ok", "rejected"])]
        parts += [f"### Rejected windows ({len(rejected)} of {len(busy)} busy windows)", "",
                  "Windows left out of every number above because their busy step ran off its label or they "
                  "delivered more than it allows:", ""] + [
            f"- {code(r.pipeline)} {int(r.cpus)} cores, {r.busy_ms:g} ms, process {int(r.process)}, window "
            f"{int(r.repeat)}: {escape(r.error)}" for r in rejected.itertuples()] + [""]
    failed = group[~group.status.isin(["ok", "not-applicable", "rejected"])].drop_duplicates(
        ["pipeline", "mode", "stage", "model", "status", "error"])
    if len(failed):
        parts += ["### Not measured", ""] + [
            f"- {code(r.pipeline)} {r.stage or r.mode} {escape(r.model)}: {r.status} — {escape(r.error)}"
            for r in failed.itertuples()] + [""]
    table_, sentences = scaling(group)
    if len(table_):
        parts += ["### Several GPUs", "", SCALING, "", table(table_), "", *sentences, ""]
    return parts


# --- several GPUs --------------------------------------------------------------------------------

SCALE_KEY = ["mode", "stage", "payload", "pipeline", "model", "step", "image_size", "batch_size", "dtype"]


def scaling(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Copies, loader-only, model-only and e2e over several GPUs of one run: per configuration and
    GPU count the job's img/s, per GPU, against one GPU, and the largest peak GPU memory of any rank;
    one sentence per GPU count."""
    ok = df[(df.status == "ok") & df["mode"].isin(["copy", "loader", "model", "e2e"]) & (df.busy_ms == df.groupby(
        ["mode", "pipeline"]).busy_ms.transform("max"))].copy()
    ok["gpus_used"] = ok.gpus.where(ok.parallel == "dp", ok.world_size).fillna(1).astype(int)
    if ok.empty or ok.gpus_used.max() <= 1:
        return pd.DataFrame(), []
    keys = [*SCALE_KEY, "parallel", "gpus_used"]
    lead = ok[ok["rank"] == 0].groupby(keys).agg(
        job=("world_img_per_s", "median"), lo=("world_img_per_s", "min"), hi=("world_img_per_s", "max"),
        cores=("cpus", "first")).reset_index()
    lead = lead.merge(ok.groupby(keys).peak_gpu_mem_mb.max().rename("memory").reset_index(), on=keys, how="left")
    lead["per_gpu"] = lead.job / lead.gpus_used
    one = lead[lead.gpus_used == 1].set_index(SCALE_KEY).per_gpu
    lead["vs_one"] = [r.per_gpu / one.get(tuple(getattr(r, k) for k in SCALE_KEY), math.nan) for r in lead.itertuples()]
    view = pd.DataFrame({
        "mode": lead["mode"], "what": [code(r.pipeline) if r.pipeline != "none" else (f"{r.payload} {r.stage}" if r.payload
                                                                                    else code(r.model)) for r in lead.itertuples()],
        "px": lead.image_size, "GPUs": lead.gpus_used, "cores / GPU": lead.cores.fillna(0).astype(int),
        "job img/s": [f"{r.job:,.0f} [{r.lo:,.0f}–{r.hi:,.0f}]" for r in lead.itertuples()],
        "per GPU": lead.per_gpu.map("{:,.0f}".format),
        "vs 1 GPU": lead.vs_one.map(lambda v: "—" if pd.isna(v) else f"{v:.0%}"),
        "peak MB / GPU": lead.memory.map(lambda v: "—" if pd.isna(v) else f"{v:,.0f}")})
    sentences = []
    for n, rows in lead[lead.gpus_used > 1].groupby("gpus_used"):
        rows = rows.dropna(subset=["vs_one"]).sort_values("vs_one")
        if len(rows):
            worst = rows.iloc[0]
            sentences.append(f"- {n} GPUs: per-GPU rate from {worst.vs_one:.0%} ({worst['mode']} "
                             f"{worst.pipeline if worst.pipeline != 'none' else worst.payload or worst.model}) to "
                             f"{rows.vs_one.max():.0%} of one GPU's.")
    return view.sort_values(["mode", "what", "px", "GPUs"]), sentences


# --- summary ---------------------------------------------------------------------------------

LADDER = (2_000_000, 1_000_000, 500_000, 250_000, 100_000, 50_000, 25_000, 10_000, 5_000, 2_500, 1_000, 500, 250,
          100)   # model step speeds (img/s) the summary's table may be keyed by
ROWS = (4, 7)    # the fewest and most rows of that table
SHOWN = 3   # pipelines named per cell of the summary's table (the cheapest in CPU time first)


def speed_text(v: float) -> str:
    """A rate in three significant digits: 14.1M, 332k, 3.96k."""
    return f"{v / 1e6:.3g}M" if v >= 1e6 else f"{v / 1e3:.3g}k"


def short(label: str) -> str:
    """A pipeline label with option values only: "prefetch (prefetch_augment=host)" -> "prefetch (host)"."""
    name, _, options = label.partition(" (")
    if not options:
        return label
    return f"{name} ({', '.join(part.split('=', 1)[-1] for part in options.rstrip(')').split(', '))})"


def bus_sentence(c: pd.DataFrame) -> str | None:
    """Where host transfer binds: the measured copy rates by image size and payload against the
    fastest model step measured at that size."""
    copies = c[c["mode"] == "copy"]
    models = c[c["mode"] == "model"]
    if copies.empty or models.empty:
        return None
    parts, binds = [], []
    for size, rows in copies.groupby("image_size"):
        rates = ", ".join(f"{r.payload} {speed_text(r.img_per_s)} ({r.stage.removeprefix('h2d-')})"
                          for r in rows.sort_values(["payload", "stage"], ascending=[False, False]).itertuples())
        fast = models[models.image_size == size]
        if fast.empty:
            parts.append(f"{size} px: {rates} img/s")
            continue
        top = fast.loc[fast.img_per_s.idxmax()]
        slower = rows[rows.img_per_s < top.img_per_s]
        binds += [f"{r.payload} {r.stage.removeprefix('h2d-')} at {size} px" for r in slower.itertuples()]
        parts.append(f"{size} px: {rates} img/s, against the fastest step measured there, {code(top.model)} "
                     f"{top.step} at {speed_text(top.img_per_s)} img/s")
    verdict = ("it binds only for " + ", ".join(binds) if binds else
               "it binds nowhere measured: every copy is faster than every model step at its size")
    return ("**Host transfer**: one GPU's host-to-device copies (the bus alone) move " + "; ".join(parts)
            + f" — {verdict}.")


def gpus_sentence(group: pd.DataFrame, c: pd.DataFrame) -> str | None:
    """Where the host's bus binds with several GPUs copying at once: per payload, copy kind and image
    size, the per-GPU copy rate at each GPU count (the job's rate over its GPUs, median of windows),
    and the fewest GPUs at which it falls below the fastest model step measured at that size."""
    copies = group[(group.status == "ok") & (group["mode"] == "copy") & (group["rank"] == 0)]
    if copies.empty or copies.world_size.max() <= 1:
        return None
    copies = copies.assign(per_gpu=copies.world_img_per_s / copies.world_size)   # load(): the rank's rate alone
    models = c[c["mode"] == "model"]
    parts, binds = [], []
    for (size, payload, stage), rows in copies.groupby(["image_size", "payload", "stage"], sort=True):
        per = rows.groupby("world_size").per_gpu.median()
        parts.append(f"{payload} {stage.removeprefix('h2d-')} {size} px "
                     + ", ".join(f"{speed_text(v)} ({plural(int(n), 'GPU')})" for n, v in per.items()))
        fast = models[models.image_size == size]
        if len(fast):
            top = fast.img_per_s.max()
            short_of = per[per < top]
            if len(short_of):
                binds.append(f"{payload} {stage.removeprefix('h2d-')} at {size} px from {plural(int(short_of.index[0]), 'GPU')}")
    verdict = ("it binds for " + ", ".join(binds) if binds else
               "it binds nowhere measured: every per-GPU copy rate stays above the fastest model step at its size")
    return ("**Several GPUs of one host** copying at once, per GPU (img/s): " + "; ".join(parts)
            + f" — {verdict}.")


def fed_at(cap: pd.DataFrame, speed: float) -> pd.DataFrame:
    """The pipelines whose loader ceiling keeps a model of `speed` img/s fed (at least FED of it)."""
    return cap[cap.img_per_s >= FED * speed]


def speeds(cap: pd.DataFrame, models: pd.DataFrame) -> list[float]:
    """The table's rows: LADDER speeds from one step above the fastest model measured down to the
    first speed `dataloader` keeps fed at every CPU budget, at least ROWS[0] (extended upwards), at
    most ROWS[1]."""
    top = models.img_per_s.max() if len(models) else cap.img_per_s.max()
    start = max([i for i, v in enumerate(LADDER) if v > top] or [0])
    bases = [baseline(here) for _, here in cap.groupby("cpus")]
    end = start
    while end < len(LADDER) - 1 and not all(b is not None and b.img_per_s >= FED * LADDER[end] for b in bases):
        end += 1
    end = min(end, start + ROWS[1] - 1)
    start = max(0, min(start, end - ROWS[0] + 1))
    return list(LADDER[start:end + 1])


def which_table(cap: pd.DataFrame, models: pd.DataFrame) -> pd.DataFrame:
    """Model step speed x CPU cores per GPU (one setting's ceilings and model-only cells): the
    pipelines whose loader ceiling keeps that speed fed, the cheapest in CPU time first, and their
    speed-up over `dataloader` at that speed."""
    rows = []
    for speed in speeds(cap, models):
        row = {"model trains at": f"{speed_text(speed)} img/s"}
        for cpus in sorted(cap.cpus.unique(), reverse=True):
            here = cap[cap.cpus == cpus]
            fed = fed_at(here, speed).assign(cost=lambda d: d.cpu_pipe.fillna(d.cpu)).sort_values("cost")
            base = baseline(here)
            if base is not None and base.img_per_s >= FED * speed:
                cell = "any (`dataloader` too)"
            elif fed.empty:
                best = here.loc[here.img_per_s.idxmax()]
                cell = f"none ({code(short(best.pipeline))} {pct(best.img_per_s / speed)})"
            else:
                names = (", ".join(code(short(p)) for p in fed.pipeline[:SHOWN])
                         + (f" +{len(fed) - SHOWN}" if len(fed) > SHOWN else ""))
                gain = f" ×{speed / base.img_per_s:.1f}" if base is not None else ""
                cell = names + gain
            row[f"{int(cpus)} cores"] = cell
        rows.append(row)
    return pd.DataFrame(rows)


def jpeg_sentence(c: pd.DataFrame, cap: pd.DataFrame) -> str | None:
    """The loader ceilings (`cap`) at the largest image size measured (JPEG decoders and raw pixels)
    against the model measured there."""
    large = cap[cap.image_size > 32]
    models = c[(c["mode"] == "model") & (c.image_size > 32)]
    if large.empty or models.empty:
        return None
    size = int(large.image_size.max())
    model = models[models.image_size == size]
    if model.empty:
        return None
    m = model.loc[model.img_per_s.idxmax()]
    large = large[large.image_size == size]
    parts = []
    for cpus in sorted(large.cpus.unique(), reverse=True):
        here = large[large.cpus == cpus].sort_values("img_per_s", ascending=False)
        parts.append(f"with {int(cpus)} cores " + ", ".join(f"{code(short(r.pipeline))} {speed_text(r.img_per_s)}"
                                                          for r in here.itertuples()))
    short_of = large[large.img_per_s < FED * m.img_per_s]
    missing = ", ".join(f"{code(short(r.pipeline))} with {int(r.cpus)} cores ({pct(r.img_per_s / m.img_per_s)})"
                        for r in short_of.itertuples())
    verdict = ("all keep it fed" if short_of.empty else "none keeps it fed" if len(short_of) == len(large)
               else f"all keep it fed except {missing}")
    return (f"**{size}-px images**: {code(m.model)} ({m.step} step) trains at {speed_text(m.img_per_s)} img/s; "
            "loader ceilings (img/s) " + "; ".join(parts) + f" — {verdict}.")


def accuracy_sentence(df: pd.DataFrame) -> str | None:
    runs = trained(df)
    if runs.empty:
        return None
    first = runs.iloc[0]
    by = runs.groupby("pipeline").agg(seconds=("seconds", "median"), runs=("seconds", "count")).sort_values("seconds")
    times = ", ".join(f"{code(short(p))} {r.seconds:.1f} s" for p, r in by.iterrows())
    epochs = "" if pd.isna(first.train_epochs) else f"{first.train_epochs:.0f} epochs of "
    source = first.get("data_source")
    data = f"the {escape(str(source).split('-')[0])} data's" if isinstance(source, str) and source else "the"
    return (f"**Time to accuracy** ({epochs}{code(first.model)}, {first.step} step, "
            f"{first.cpus:.0f} cores; median wall time of the epochs, restarts included): {times}; "
            f"test accuracy on {data} test split "
            f"{pct(runs.test_accuracy.min()).rstrip('%')}–{pct(runs.test_accuracy.max())} over all "
            f"{len(runs)} runs.")


def summary(name: str, group: pd.DataFrame, view: RunView, report: str, plots: dict[str, str]) -> list[str]:
    """The short answer of one run (Markdown lines, at most about 25), for SUMMARY.md and the README
    block: host transfer, which pipeline by model speed and cores, large JPEG images, time to
    accuracy, the bus shared by several GPUs, one plot; each only where the run measured it."""
    c, cap = view.cells, view.ceilings
    commit = ", ".join(sorted(set(group.git_commit))) or "?"
    lines = [f"From one run, {code(name)} (commit {escape(commit)}; {escape(', '.join(sorted(set(group.gpu))) or 'CPU')}); "
             f"every number is in the [full report]({report})."]
    sentence = bus_sentence(c)
    if sentence:
        lines += ["", sentence]
    main = cap[cap.image_size == cap.image_size.min()] if len(cap) else cap   # the smallest images: CIFAR's own
    if len(main):
        setting = tuple(main.iloc[0][SETTING])
        lines += ["", f"**Which pipeline keeps a model fed** at {int(setting[0])} px (batch {int(setting[1])}): the pipelines "
                  "whose loader ceiling "
                  f"is at least {FED:.0%} of the model's speed, cheapest in CPU time first (+N: N more in the report), "
                  "and how much faster than `dataloader` the model then trains:", "",
                  table(which_table(at_setting(cap, setting), at_setting(c[c["mode"] == "model"], setting)))]
    for sentence in (jpeg_sentence(c, cap), accuracy_sentence(view.rows), gpus_sentence(group, c)):
        if sentence:
            lines += ["", sentence]
    if plots.get("cores"):
        lines += ["", f"![loader ceiling by CPU cores per GPU]({plots['cores']})"]
    return lines


def write_answers(out: Path, found: list[tuple[str, list[str]]], whole: str) -> None:
    """OUT/ANSWER.md: each run's answers (`answers`), one line per situation; `whole` says where the
    whole report is (Markdown)."""
    lines = ["# Which pipeline keeps the model fed", ""]
    for name, said in found:
        lines += [f"From {code(name)} ({whole} for the whole report).", "", *[f"- {a}" for a in said], ""]
    results.replace_file(out / "ANSWER.md", "\n".join(lines))


README_START, README_END = "<!-- summary: generated by pipebench report --readme -->", "<!-- end of summary -->"


def readme_block(text: str, readme: Path) -> tuple[str, str]:
    """The README's text before its summary block and after it; ValueError unless it holds
    README_START and then README_END, once each."""
    if text.count(README_START) != 1 or text.count(README_END) != 1 or text.index(README_START) > text.index(README_END):
        raise ValueError(f"{readme}: needs the line {README_START!r} and, after it, {README_END!r}, once each, "
                         "around the summary")
    head, rest = text.split(README_START, 1)
    return head, rest.split(README_END, 1)[1]


def update_readme(readme: Path, summary_lines: list[str], folder: str) -> None:
    """Replace the block between README_START and README_END with the summary, links made relative
    to the README (the folder percent-encoded: a name holding `)` or `](` cannot make a link of its own)."""
    head, tail = readme_block(readme.read_text(), readme)
    body = "\n".join(summary_lines)
    folder = urllib.parse.quote(folder, safe="/._-~")
    body = re.sub(r"\]\(((?:REPORT\.md|[\w.-]+\.png)[^)]*)\)", lambda m: f"]({folder}/{m.group(1)})", body)
    results.replace_file(readme, head + README_START + "\n" + body + "\n" + README_END + tail)


def write(paths: list[str | Path], out: Path, readme: Path | None = None) -> Path:
    """Write out/REPORT.md (the summary of each run first) and its plots, out/SUMMARY.md and
    out/ANSWER.md (each run's answers); with `readme`, its summary block too (one run only).
    Returns the report's path."""
    df = load(paths)
    found = runs(df)
    if readme is not None and len(found) != 1:
        raise ValueError(f"--readme takes the summary of one run; these rows hold {len(found)}: "
                         + "; ".join(name for name, _ in found))
    if readme is not None:
        readme_block(readme.read_text(), readme)   # a README it cannot update: refused before anything is written
    out.mkdir(parents=True, exist_ok=True)
    sections, briefs, said = [], [], []
    for i, (name, group) in enumerate(found, start=1):
        plots: dict[str, str] = {}
        view = view_of(group)
        sections += run_sections(name, group, view, out, f"run{i}", plots)
        briefs.append((name, summary(name, group, view, "REPORT.md", plots)))
        said.append((name, answers(view.cells, view.situations)))
    results.replace_file(out / "SUMMARY.md", "\n".join(["# Summary", "", *[line for _, brief in briefs
                                                                           for line in [*brief, ""]]]))
    if any(a for _, a in said):
        write_answers(out, [(n, a) for n, a in said if a], "[REPORT.md](REPORT.md)")
    else:   # no situation measured: no answer, not an older one left beside this report
        (out / "ANSWER.md").unlink(missing_ok=True)
    parts = ["# Report", "", "Sources: " + ", ".join(code(Path(p).as_posix()) for p in dict.fromkeys(paths)), "",
             *[line for _, brief in briefs for line in ["## Summary", "", *brief, ""]],
             TIMERS, "", __doc__.split("\n\n", 2)[2].strip(), "", *sections]
    results.replace_file(out / "REPORT.md", "\n".join(parts))
    if readme is not None:
        update_readme(readme, briefs[0][1], Path(os.path.relpath(out, readme.resolve().parent)).as_posix())
    return out / "REPORT.md"
