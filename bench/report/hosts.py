"""Several GPUs of one host: what one run measured at each GPU count (`scaling`), and a prediction
for GPU counts it did not measure, checked against those it did (`prediction`). PREDICTION says how.
"""
from __future__ import annotations

import math

import pandas as pd

from ..plan import MIN_PROCESSES
from .analysis import FED, label_variants
from .formatting import code, escape, plural

SCALE_KEY = ["mode", "stage", "payload", "pipeline", "model", "step", "image_size", "batch_size", "dtype", "cpus"]
CELL = ["pipeline", "model", "step", "image_size", "batch_size", "dtype"]
SETTING = ["model", "step", "image_size", "batch_size", "dtype"]
PREDICTED_GPUS = (2, 4, 8)   # GPUs per host the prediction is made for (besides every count measured)

SCALING = """\
DDP: one process per GPU (`--ranks N`, or under torchrun), each with its 1/N shard of every epoch,
its own workers and its own CPU cores ("cores / GPU", `--cpus`), gradients all-reduced in the step;
img/s is the job's (all ranks' images over the slowest rank's window: median [range of the
processes' medians; of the windows with one process] n=windows/processes) and per GPU. "vs 1 GPU":
per-GPU img/s over the same configuration's one-GPU img/s at the same cores in the same run. "CPU
busy / rank": CPU seconds of a rank's process tree over its window and cores. Copy rows: every rank
copies at once."""

PREDICTION = """\
A prediction, not a measurement (`bench/report/hosts.py`): per-GPU e2e img/s with N GPUs in a host
of H cores, each GPU's rank on H / N of them, from this run's rows:
  - the model's per-GPU rate at N GPUs: model-only at N GPUs where measured; else its per-step time
    from the one-GPU rows and those of the most GPUs measured, k, the all-reduce's part growing with
    ring all-reduce traffic per GPU, 2(N-1)/N against k's ("≈" marks such a rate);
  - the pipeline's rate at H / N cores: its one-GPU loader-only rate at that budget (idle GPU);
  - the pipeline's e2e efficiency at one GPU: one-GPU e2e over the lower of its model-only and
    loader-only rates at the e2e's cores (at most 1);
  - prediction = efficiency x the lower of the first two; "binds" names that lower one (input: the
    pipeline on its share of the host's cores; step: the model's step with its all-reduce).
It assumes ranks that do not slow each other (memory bandwidth, caches and the bus shared); where
the run measured N GPUs, "error" is the prediction against that e2e rate, and the scaling table's
loader rows show how much a rank lost beside the others. The bus is not in it: the copy rows above
say what each GPU's share of it moves."""


def _gpus_used(rows: pd.DataFrame) -> pd.Series:
    return rows.gpus.where(rows.parallel == "dp", rows.world_size).fillna(1).astype(int)


def scaling(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Copies, loader-only, model-only and e2e over several GPUs of one run: per configuration, cores
    per GPU and GPU count, the job's img/s (median over windows [range of the processes' medians; of
    the windows with one process] n=windows/processes), per GPU, against one GPU at the same cores,
    the share of its cores a rank kept busy (median over ranks and windows) and the largest peak GPU
    memory of any rank; one sentence per GPU count."""
    ok = df[(df.status == "ok") & df["mode"].isin(["copy", "loader", "model", "e2e"]) & (df.busy_ms == df.groupby(
        ["mode", "pipeline"]).busy_ms.transform("max"))].copy()
    if ok.empty:
        return pd.DataFrame(), []
    ok["gpus_used"] = _gpus_used(ok)
    if ok.gpus_used.max() <= 1:
        return pd.DataFrame(), []
    ok["busy"] = ok.cpu_s / (ok.seconds * ok.cpus)
    keys = [*SCALE_KEY, "parallel", "gpus_used"]
    lead = ok[ok["rank"] == 0]
    spans = lead.groupby([*keys, "process"]).world_img_per_s.median().groupby(keys).agg(["count", "min", "max"])
    table = lead.groupby(keys).agg(job=("world_img_per_s", "median"), wlo=("world_img_per_s", "min"),
                                   whi=("world_img_per_s", "max"), n=("world_img_per_s", "count")).join(spans)
    table = table.join(ok.groupby(keys).agg(memory=("peak_gpu_mem_mb", "max"), busy=("busy", "median"))).reset_index()
    several = table["count"] > 1
    table["lo"], table["hi"] = table["min"].where(several, table.wlo), table["max"].where(several, table.whi)
    table["per_gpu"] = table.job / table.gpus_used
    one = table[table.gpus_used == 1].set_index(SCALE_KEY).per_gpu
    table["vs_one"] = [r.per_gpu / one.get(tuple(getattr(r, k) for k in SCALE_KEY), math.nan)
                       for r in table.itertuples()]
    view = pd.DataFrame({
        "mode": table["mode"], "what": [code(r.pipeline) if r.pipeline != "none" else (escape(f"{r.payload} {r.stage}") if r.payload
                                                                                      else code(r.model)) for r in table.itertuples()],
        "px": table.image_size, "cores / GPU": table.cpus.fillna(0).astype(int), "GPUs": table.gpus_used,
        "job img/s": [f"{r.job:,.0f} [{r.lo:,.0f}–{r.hi:,.0f}] n={r.n}/{r.count}" for r in table.itertuples()],
        "per GPU": table.per_gpu.map("{:,.0f}".format),
        "vs 1 GPU": table.vs_one.map(lambda v: "—" if pd.isna(v) else f"{v:.0%}"),
        "CPU busy / rank": table.busy.map(lambda v: "—" if pd.isna(v) else f"{v:.0%}"),
        "peak MB / GPU": table.memory.map(lambda v: "—" if pd.isna(v) else f"{v:,.0f}")})
    sentences = []
    for n, rows in table[table.gpus_used > 1].groupby("gpus_used"):
        rows = rows.dropna(subset=["vs_one"]).sort_values("vs_one")
        if len(rows):
            worst = rows.iloc[0]
            sentences.append(f"- {n} GPUs: per-GPU rate from {worst.vs_one:.0%} ({worst['mode']} "
                             f"{worst.pipeline if worst.pipeline != 'none' else worst.payload or worst.model}, "
                             f"{int(worst.cpus)} cores per GPU) to {rows.vs_one.max():.0%} of one GPU's.")
    return view.sort_values(["mode", "what", "px", "cores / GPU", "GPUs"]), sentences


def answer(df: pd.DataFrame, bus: str | None) -> list[str]:
    """The several-GPU answer of one run (Markdown lines, for the README's hosts block): what it
    measured at each GPU count (`measured`), where the shared bus binds (`bus`: the summary's
    sentence) and the prediction's sentences; none without them."""
    found = measured(df)
    said = prediction(df)[1]
    return [*(f"- {line}" for line in found), *([f"- {bus}"] if bus else []), *said]


def most_gpus(df: pd.DataFrame) -> int:
    """The most GPUs any ok row of the run used (DDP ranks or DataParallel's devices)."""
    ok = df[df.status == "ok"]
    return int(_gpus_used(ok).max()) if len(ok) else 1


def _ring(gpus: int) -> float:
    """Ring all-reduce traffic per GPU, in units of the gradients' size."""
    return 2 * (gpus - 1) / gpus


def _lead_rows(df: pd.DataFrame, keep: pd.Series) -> pd.DataFrame:
    """Rank 0's ok rows of DDP and one-GPU runs that `keep` selects, loss never read, pipeline
    variants labelled (`label_variants`), with each row's per-GPU rate (`per_gpu`)."""
    ok = df[(df.status == "ok") & (df["rank"] == 0) & (df.parallel != "dp") & (df.sync_every.fillna(0) == 0) & keep]
    ok = label_variants(ok)
    return ok.assign(per_gpu=ok.world_img_per_s / ok.world_size)


def _signed(v: float) -> str:
    """An error as a whole percentage with its sign; ±0% when it rounds to zero."""
    text = f"{v:+.0%}"
    return "±0%" if text in ("+0%", "-0%") else text


def prediction(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """PREDICTION, per one-GPU e2e cell of the run and GPU count (PREDICTED_GPUS and every count the
    run measured): the inputs, the predicted per-GPU and job img/s, the measured job rate and the
    error where the run measured that count at H / N cores, and what binds; sentences: per pipeline
    the fewest GPUs per host at which it is predicted input-bound, and the errors."""
    ok = _lead_rows(df, ((df["mode"].isin(["model", "e2e"])) | ((df["mode"] == "loader") & (df.busy_ms == 0))))
    if (ok.empty or ok.world_size.max() <= 1 or not ((ok["mode"] == "e2e") & (ok.world_size == 1)).any()
            or ok.cpu_count.isna().all()):   # no one-GPU e2e row to start from, or no host size
        return pd.DataFrame(), []
    host = int(ok.cpu_count.max())
    ok["step"] = ok.step.fillna("")   # loader rows have none
    rates = ok.groupby(["mode", *CELL, "cpus", "world_size"]).per_gpu.median()
    counts = sorted({*PREDICTED_GPUS, *ok.world_size.unique()} - {1})
    found = []
    for (pipeline, model, step, size, batch, dtype, cores), e2e in rates.loc["e2e"].xs(1, level="world_size").items():
        try:
            per_count = rates.loc["model"].xs((model, step, size, batch, dtype), level=SETTING).groupby(
                level="world_size").median()
            loader = rates.loc["loader"].xs(("none", "", size, batch, dtype, 1), level=[*SETTING, "world_size"])
        except KeyError:   # no model-only or no loader-only rows for this e2e cell
            continue
        if 1 not in per_count.index or (pipeline, cores) not in loader.index:
            continue
        efficiency = min(1.0, e2e / min(per_count[1], loader[(pipeline, cores)]))
        for n in counts:
            share = host // n
            if n in per_count.index:
                step_rate, measured_model = per_count[n], True
            elif per_count.index.max() > 1:   # from the most GPUs measured, k
                k = per_count.index.max()
                t1, tk = 1 / per_count[1], 1 / per_count[k]
                step_rate, measured_model = 1 / (t1 + max(0.0, tk - t1) * _ring(n) / _ring(k)), False
            else:
                continue
            feed = loader.get((pipeline, share), math.nan)
            predicted = efficiency * min(step_rate, feed) if not math.isnan(feed) else math.nan
            measured = rates.get(("e2e", pipeline, model, step, size, batch, dtype, share, n), math.nan)
            found.append(dict(pipeline=pipeline, model=model, step=step, size=size, gpus=n, cores=share,
                              step_rate=step_rate, measured_model=measured_model, feed=feed, efficiency=efficiency,
                              predicted=predicted, measured=measured,
                              binds="" if math.isnan(predicted) else "input" if feed < step_rate else "step"))
    if not found:
        return pd.DataFrame(), []
    frame = pd.DataFrame(found)
    number = lambda v: "—" if pd.isna(v) else f"{v:,.0f}"   # noqa: E731
    view = pd.DataFrame({
        "pipeline": frame.pipeline.map(code), "model": frame.model.map(code), "px": frame["size"],
        "GPUs / host": frame.gpus, "cores / GPU": frame.cores,
        "model per GPU": [("" if r.measured_model else "≈") + number(r.step_rate) for r in frame.itertuples()],
        "loader per GPU (1 GPU)": frame.feed.map(number), "e2e efficiency": frame.efficiency.map("{:.0%}".format),
        "predicted per GPU": frame.predicted.map(number), "predicted job": (frame.predicted * frame.gpus).map(number),
        "measured job": (frame.measured * frame.gpus).map(number),
        "error": (frame.predicted / frame.measured - 1).map(lambda v: "—" if pd.isna(v) else _signed(v)),
        "binds": frame.binds.replace("", "—")})
    sentences = [f"- Host of {host} cores split evenly over its GPUs (a prediction):"]
    for (pipeline, model), rows in frame.dropna(subset=["predicted"]).groupby(["pipeline", "model"], sort=True):
        bound = rows[rows.binds == "input"]
        if len(bound):
            first = bound.iloc[0]
            when = (f"already at {plural(int(first.gpus), 'GPU')} per host, the fewest predicted"
                    if first.gpus == rows.gpus.min() else f"from {plural(int(first.gpus), 'GPU')} per host")
            sentences.append(f"  - {code(pipeline)} with {code(model)}: input-bound {when} ({first.feed:,.0f} img/s "
                             f"per GPU on {int(first.cores)} cores, the step {first.step_rate:,.0f}).")
        else:
            sentences.append(f"  - {code(pipeline)} with {code(model)}: the step binds up to "
                             f"{plural(int(rows.gpus.max()), 'GPU')} per host; the input keeps up.")
    checked = frame.dropna(subset=["predicted", "measured"])
    if len(checked):
        sentences.append("- Error on the GPU counts measured: " + ", ".join(
            f"{code(r.pipeline)} {r.gpus} GPUs {_signed(r.predicted / r.measured - 1)}" for r in checked.itertuples()) + ".")
    sentences += _short_of_the_input(ok, checked)
    return view, sentences


def _short_of_the_input(ok: pd.DataFrame, checked: pd.DataFrame) -> list[str]:
    """Where the input binds and the measured job fell short of the prediction beyond its spread
    (the prediction above every process's median): whether the job's ranks fed their GPUs less than
    the same ranks delivered loader-only at once (below every such process's median: the DDP step
    couples them), or the ranks slowed each other loader-only already."""
    coupled, crowded = [], []
    for r in checked[checked.binds == "input"].itertuples():
        cell = (ok.pipeline == r.pipeline) & (ok.image_size == r.size) & (ok.cpus == r.cores) & (ok.world_size == r.gpus)
        e2e = ok[cell & (ok["mode"] == "e2e") & (ok.model == r.model) & (ok.step == r.step)]
        if r.predicted <= e2e.groupby("process").per_gpu.median().max():
            continue
        at_once = ok[cell & (ok["mode"] == "loader")]
        if at_once.empty:
            crowded.append(f"{code(r.pipeline)} at {plural(int(r.gpus), 'GPU')} (no loader-only rows at that count)")
            continue
        text = (f"{code(r.pipeline)} at {plural(int(r.gpus), 'GPU')}: e2e {r.measured:,.0f} per GPU, loader-only "
                f"{at_once.per_gpu.median():,.0f} per GPU with its ranks at once, {r.feed:,.0f} alone")
        (coupled if r.measured < at_once.groupby("process").per_gpu.median().min() else crowded).append(text)
    if not coupled and not crowded:
        return []
    said = ["- Where the input binds, the measured job fell short of the prediction beyond the spread of its "
            "processes; the prediction takes each rank to feed its GPU as a rank alone does, so read its "
            "input-bound rows as upper bounds."]
    if coupled:
        said.append("  - Below what the same ranks delivered loader-only at once (a DDP step waits for every "
                    "rank's batch): " + "; ".join(coupled) + ".")
    if crowded:
        said.append("  - Not below what its ranks delivered loader-only at once (the ranks slowed each other "
                    "without a step, or that was not measured): " + "; ".join(crowded) + ".")
    return said


def measured(df: pd.DataFrame) -> list[str]:
    """Per model, step kind, image size and cores per GPU run on several GPU counts: the per-GPU
    model-only and e2e img/s (medians) at each count where both ran (two counts at least), and at
    the most GPUs which pipelines the step sets the pace of (e2e at least FED of model-only there)
    and which the input holds back. Loss never read; pipeline variants apart."""
    ok = _lead_rows(df, df["mode"].isin(["model", "e2e"]))
    keys = [*SETTING, "cpus", "mode", "pipeline", "world_size"]
    rates = ok.groupby(keys).per_gpu.median()
    processes = ok.groupby(keys).process.nunique()
    lines = []
    for (model, step, size, batch, dtype, cores), cell in rates.groupby(level=[*SETTING, "cpus"]):
        enough = processes.xs((model, step, size, batch, dtype, cores), level=[*SETTING, "cpus"]) >= MIN_PROCESSES
        cell = cell.droplevel([*SETTING, "cpus"])
        modes = cell.index.get_level_values("mode")
        if "model" not in modes or "e2e" not in modes:
            continue
        alone = cell.loc["model"].droplevel("pipeline")
        by_counts: dict[tuple, list] = {}   # the GPU counts where model-only and a pipeline's e2e both ran
        for pipeline, runs in cell.loc["e2e"].groupby(level="pipeline", sort=False):
            runs = runs.droplevel("pipeline")
            both = tuple(sorted(set(runs.index) & set(alone.index)))
            if len(both) >= 2:
                by_counts.setdefault(both, []).append((pipeline, runs))
        for counts, found in by_counts.items():
            most = counts[-1]
            judged = [(p, runs) for p, runs in found if enough["model", "none", most] and enough["e2e", p, most]]
            fed = [code(p) for p, runs in judged if runs[most] >= FED * alone[most]]
            bound = [code(p) for p, runs in judged if runs[most] < FED * alone[most]]
            thin = [code(p) for p, _ in found if p not in {q for q, _ in judged}]
            listed = [f"{code(p)} {' / '.join(f'{runs[n]:,.0f}' for n in counts)}" for p, runs in found]
            lines.append(f"With {int(cores)} cores per GPU, {code(model)} ({escape(step)} step, {size} px, batch {batch}) per "
                         f"GPU at {' / '.join(str(n) for n in counts)} GPUs (img/s, medians): model-only "
                         f"{' / '.join(f'{alone[n]:,.0f}' for n in counts)}; " + "; ".join(listed)
                         + f". At {plural(int(most), 'GPU')} the step sets the pace of " + (", ".join(fed) or "none")
                         + f" (e2e at least {FED:.0%} of model-only); the input holds back "
                         + (", ".join(bound) or "none")
                         + (f"; too few processes to judge (fewer than {MIN_PROCESSES}): {', '.join(thin)}" if thin else "")
                         + ".")
    return lines
