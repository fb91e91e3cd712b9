"""Several GPUs of one host: a prediction for 2, 4 and 8 GPUs per host made from a run's one-GPU
rows alone (`predict`; PREDICTION says how), written before the multi-GPU rows are read
(`prediction_file`: PREDICTION.md) and checked against every GPU count measured (`prediction`,
CHECKED), and the README's several-GPU answer (`answer`: what `bench.report.scaling` found, then the
prediction's sentences).
"""
from __future__ import annotations

import math
import os
import re
import urllib.parse
from pathlib import Path

import pandas as pd

from .formatting import code, escape, plural, table
from .readme import text_of
from .scaling import SETTING, gpus_used, lead_rows, measured, one_gpu_rows, photographs

CELL = ["pipeline", "model", "step", "image_size", "batch_size", "dtype"]
GROUP = ["pipeline", "model", "step", "size", "batch", "dtype", "e2e_cores"]   # one prediction per GPU count
PREDICTED_GPUS = (2, 4, 8)   # GPUs per host the prediction is made for (besides every count measured)

PREDICTION = """\
A prediction, not a measurement (`bench/report/hosts.py`), made from the run's one-GPU rows alone
(`pipebench report RUN --out DIR --prediction-only` writes it as DIR/PREDICTION.md, so it can be
written before the multi-GPU rows are measured): per-GPU e2e img/s with N GPUs in a host of H cores
(the rows' `cpu_count`), each GPU's rank on as many as the one-GPU e2e had, or on H / N where that is
fewer:
  - the model's per-GPU rate: its one-GPU model-only rate at every N. One GPU measures no
    all-reduce, so it is left out: an upper bound of the step under DDP;
  - the pipeline's rate at those cores: its one-GPU loader-only rate at that budget (idle GPU);
  - the pipeline's e2e efficiency at one GPU: its one-GPU restart-free e2e rate (the steps that began
    no epoch) over the lower of its model-only and loader-only rates at the e2e's cores (at most 1);
  - its epoch restarts: the seconds per epoch the one-GPU e2e spent beyond its steps at the
    restart-free rate, paid once per epoch of each rank, which under DDP holds 1/N of the steps;
  - prediction = an epoch of each rank's steps (ceil(S / N) of the one-GPU epoch's S) at efficiency x
    the lower of the first two, plus the restarts; "binds" names that lower one (input: the pipeline
    on its share of the host's cores; step: the model's one-GPU step).
It assumes a free all-reduce and ranks that do not slow each other (memory bandwidth, caches and the
bus shared): an upper bound. The bus is not in it."""

CHECKED = """\
Where the run measured N GPUs, "error" is predicted / measured - 1 (per-GPU e2e medians) and "beyond
spread" says whether the prediction lies outside the range of the processes' medians there; "with
the step measured there" is the same prediction made with model-only's per-GPU rate at that GPU count
(the all-reduce and DDP's hooks in it): what error is left is the input's. The scaling table's loader
rows show how much a rank lost beside the others, and its copy rows what each GPU's share of the bus
moves."""


def answer(df: pd.DataFrame, bus: str | None) -> list[str]:
    """The several-GPU answer of one run (Markdown lines, for the README's hosts block): what it
    measured at each GPU count (`measured`), where the shared bus binds (`bus`: the summary's
    sentence), what photographs need per GPU (`photographs`) and the prediction's sentences but the
    per-pipeline bounds (the most GPUs' line says what binds); none without them."""
    found = measured(df)
    said = prediction(df, bound=False)[1]
    return [*(f"- {line}" for line in found), *([f"- {bus}"] if bus else []),
            *(f"- {line}" for line in photographs(df)), *said]


def _prediction_inputs(one: pd.DataFrame) -> pd.DataFrame:
    """The rows a prediction reads from one-GPU rows (`one_gpu_rows`): model-only, e2e and idle
    loader-only (`lead_rows`); ValueError for a row of several GPUs, which it must never read."""
    if (gpus_used(one) != 1).any():
        raise ValueError("a prediction reads one-GPU rows only; these hold rows of several GPUs")
    ok = lead_rows(one, one["mode"].isin(["model", "e2e"]) | ((one["mode"] == "loader") & (one.busy_ms == 0)))
    return ok.assign(step=ok.step.fillna(""))   # loader rows have none


def predict(ok: pd.DataFrame, counts: list[int]) -> tuple[pd.DataFrame, int]:
    """PREDICTION's numbers from `_prediction_inputs`' rows, per one-GPU e2e cell and GPU count in
    `counts` (the model's one-GPU rate at the e2e's cores, or its median over the cores it ran at
    where it did not run at those, the loader's at the share of the host, the efficiency, the
    prediction and what binds), and the host's cores; empty without them."""
    if ok.empty or ok.cpu_count.isna().all() or not (ok["mode"] == "e2e").any():
        return pd.DataFrame(), 0
    host = int(ok.cpu_count.max())
    rates = ok.groupby(["mode", *CELL, "cpus"]).per_gpu.median()
    epochs = ok[ok["mode"] == "e2e"].groupby([*CELL, "cpus"])[["steady_img_per_s", "steps_per_epoch"]].median()
    found = []
    for (pipeline, model, step, size, batch, dtype, cores), e2e in rates.loc["e2e"].items():
        try:
            alone = rates.loc["model"].xs((model, step, size, batch, dtype), level=SETTING).droplevel("pipeline")
            loader = rates.loc["loader"].xs(("none", "", size, batch, dtype), level=SETTING)
        except KeyError:   # no model-only or no loader-only rows for this e2e cell
            continue
        if (pipeline, cores) not in loader.index:
            continue
        step_rate = alone.get(cores, alone.median())
        steady, steps = epochs.loc[(pipeline, model, step, size, batch, dtype, cores)]
        free = steady if steady >= e2e else e2e   # no restart-free rate (or none above e2e): no restart term
        restart_s = batch * steps / e2e - batch * steps / free if steps > 0 else 0.0
        efficiency = min(1.0, free / min(step_rate, loader[(pipeline, cores)]))
        for n in counts:
            share = min(host // n, cores)   # the one-GPU e2e's cores where the host has them for every rank
            feed = loader.get((pipeline, share), math.nan)
            rank_steps = math.ceil(steps / n) if steps > 0 else 1   # (any count: no restart term without steps)
            predicted = _epoch_rate(efficiency * min(step_rate, feed), batch, rank_steps, restart_s)
            found.append(dict(pipeline=pipeline, model=model, step=step, size=size, batch=batch, dtype=dtype,
                              e2e_cores=int(cores), gpus=n, cores=share, step_rate=step_rate, feed=feed, efficiency=efficiency,
                              restart_s=restart_s, rank_steps=rank_steps, predicted=predicted,
                              binds="" if math.isnan(predicted) else "input" if feed < step_rate else "step"))
    return pd.DataFrame(found), host


def _epoch_rate(rate, batch, rank_steps, restart_s):
    """Images per second over a rank's epoch: `rank_steps` batches at `rate`, then `restart_s` seconds
    of its restart (scalars or Series; nan where `rate` is)."""
    return batch * rank_steps / (batch * rank_steps / rate + restart_s)


def _number(v: float) -> str:
    """A rate as a whole number with thousands separators; "—" where there is none."""
    return "—" if pd.isna(v) else f"{v:,.0f}"


def _prediction_view(frame: pd.DataFrame) -> pd.DataFrame:
    """The prediction's table; with the measured columns where `frame` has them (`_checked`)."""
    view = pd.DataFrame({
        "pipeline": frame.pipeline.map(code), "model": frame.model.map(code), "px": frame["size"],
        "GPUs / host": frame.gpus, "cores / GPU": frame.cores,
        "model per GPU (1 GPU, no all-reduce)": frame.step_rate.map(_number),
        "loader per GPU (1 GPU)": frame.feed.map(_number), "e2e efficiency": frame.efficiency.map("{:.0%}".format),
        "restarts s / epoch": frame.restart_s.map("{:.2f}".format),
        "predicted per GPU": frame.predicted.map(_number), "predicted job": (frame.predicted * frame.gpus).map(_number)})
    if "measured" in frame:
        view["measured job"] = (frame.measured * frame.gpus).map(_number)
        view["error"] = (frame.predicted / frame.measured - 1).map(lambda v: "—" if pd.isna(v) else _signed(v))
        view["beyond spread"] = [("yes" if r.beyond else "no") if pd.notna(r.measured) and pd.notna(r.predicted)
                                 else "—" for r in frame.itertuples()]
    view["binds"] = frame.binds.replace("", "—").to_numpy()
    return view


def _setting_text(step: str, size: int, batch: int, dtype: str, cores: str) -> str:
    return f" ({escape(step)} step, {size} px, batch {batch}, {dtype}, {cores})"


def _names(frame: pd.DataFrame) -> dict[tuple, str]:
    """Per group of `frame` (GROUP), its name: "`pipeline` with `model`", and where the frame holds
    that pair in several settings, the setting."""
    keys = frame[GROUP].drop_duplicates()
    several = keys.groupby(["pipeline", "model"]).size()
    return {tuple(k): f"{code(k.pipeline)} with {code(k.model)}" + (_setting_text(
                k.step, k.size, k.batch, k.dtype, f"e2e on {k.e2e_cores} cores") if several[k.pipeline, k.model] > 1 else "")
            for k in keys.itertuples(index=False)}


def _bound_sentences(frame: pd.DataFrame, host: int) -> list[str]:
    """Per pipeline and model (and setting, `_names` over `frame`), the fewest GPUs per host at which
    it is predicted input-bound."""
    sentences = [f"- Host of {host} cores, each GPU's rank on the one-GPU e2e's cores or its even share where "
                 "fewer (a prediction from the one-GPU rows, "
                 "the all-reduce left out):"]
    names = _names(frame)
    for key, rows in frame.dropna(subset=["predicted"]).groupby(GROUP, sort=True):
        bound = rows[rows.binds == "input"]
        if len(bound):
            first = bound.iloc[0]
            when = (f"already at {plural(int(first.gpus), 'GPU')} per host, the fewest predicted"
                    if first.gpus == rows.gpus.min() else f"from {plural(int(first.gpus), 'GPU')} per host")
            sentences.append(f"  - {names[key]}: input-bound {when} ({first.feed:,.0f} img/s "
                             f"per GPU on {int(first.cores)} cores, the step {first.step_rate:,.0f}).")
        else:
            sentences.append(f"  - {names[key]}: the step binds up to "
                             f"{plural(int(rows.gpus.max()), 'GPU')} per host; the input keeps up.")
    return sentences


def _signed(v: float) -> str:
    """An error as a whole percentage with its sign; ±0% when it rounds to zero."""
    text = f"{v:+.0%}"
    return "±0%" if text in ("+0%", "-0%") else text


def _model_rates(lead: pd.DataFrame) -> pd.Series:
    """Model-only per-GPU medians per setting, cores per GPU and GPU count."""
    return lead[lead["mode"] == "model"].groupby([*SETTING, "cpus", "world_size"]).per_gpu.median()


def _checked(frame: pd.DataFrame, lead: pd.DataFrame) -> pd.DataFrame:
    """`frame` (`predict`) with the measured per-GPU e2e median at each GPU count and share of the
    host, the range of the processes' medians (lo, hi), whether the prediction lies beyond it, the
    model-only per-GPU median measured there (step_there), the prediction made with it (stepped) and
    whether that lies beyond the range (stepped_beyond)."""
    keys = [*CELL, "cpus", "world_size"]
    e2e = lead[lead["mode"] == "e2e"]
    found = e2e.groupby(keys).per_gpu.median().rename("measured").to_frame().join(
        e2e.groupby([*keys, "process"]).per_gpu.median().groupby(keys).agg(lo="min", hi="max"))
    at = [(r.pipeline, r.model, r.step, r.size, r.batch, r.dtype, r.cores, r.gpus) for r in frame.itertuples()]
    found = found.reindex(pd.MultiIndex.from_tuples(at, names=keys))
    model = _model_rates(lead)
    step_there = model.reindex(pd.MultiIndex.from_tuples([(r.model, r.step, r.size, r.batch, r.dtype, r.cores, r.gpus)
                                                          for r in frame.itertuples()], names=model.index.names))
    frame = frame.assign(measured=found.measured.to_numpy(), lo=found.lo.to_numpy(), hi=found.hi.to_numpy(),
                         step_there=step_there.to_numpy())
    stepped = _epoch_rate(frame.efficiency * frame[["step_there", "feed"]].min(axis=1, skipna=False), frame.batch,
                          frame.rank_steps, frame.restart_s)
    return frame.assign(beyond=(frame.predicted > frame.hi) | (frame.predicted < frame.lo), stepped=stepped,
                        stepped_beyond=(stepped > frame.hi) | (stepped < frame.lo))


def _error_text(r) -> str:
    return (f"{_signed(r.predicted / r.measured - 1)} ({'beyond' if r.beyond else 'within'} the spread of its "
            "processes)")


def _marked(predicted: float, r, beyond: bool) -> str:
    """`predicted`'s error against row `r`'s measured rate, marked where it lies within the spread."""
    return _signed(predicted / r.measured - 1) + ("" if beyond else " (within the spread)")


def _step_line(lead: pd.DataFrame) -> list[str]:
    """Per model setting and cores per GPU (named apart where a model ran under several), its
    model-only per-GPU median at each GPU count over one GPU's at the same cores: what the
    prediction, which takes 100%, leaves out (the all-reduce and DDP's hooks)."""
    rates = _model_rates(lead)
    found = []
    for (model, step, size, batch, dtype, cores), counts in rates.groupby(level=[*SETTING, "cpus"], sort=True):
        counts = counts.droplevel([*SETTING, "cpus"])
        if 1 in counts.index and len(counts) > 1:
            found.append((model, _setting_text(step, size, batch, dtype, f"{int(cores)} cores per GPU"),
                          ", ".join(f"{counts[n] / counts[1]:.0%} at {plural(int(n), 'GPU')}" for n in counts.index if n > 1)))
    several = pd.Series([model for model, _, _ in found]).value_counts()
    said = "; ".join(f"{code(model)}{setting if several[model] > 1 else ''} {ratios}" for model, setting, ratios in found)
    return [f"- The step under DDP, model-only per GPU over one GPU's (the prediction takes 100%): {said}."] if found else []


def _error_lines(checked: pd.DataFrame, names: dict[tuple, str]) -> list[str]:
    """Per pipeline and model (and setting: `names`), the prediction's error at each GPU
    count checked, and with the step as model-only measured it there (the prediction's own efficiency
    and input); each marked where it lies within the spread of the processes' medians."""
    lines = []
    for key, rows in checked.groupby(GROUP, sort=True):
        rows = rows.sort_values("gpus")
        said = ", ".join(f"{plural(int(r.gpus), 'GPU')} {_marked(r.predicted, r, r.beyond)}" for r in rows.itertuples())
        stepped = rows.dropna(subset=["stepped"])
        if len(stepped):
            said += "; with the step measured there: " + ", ".join(
                f"{plural(int(r.gpus), 'GPU')} {_marked(r.stepped, r, r.stepped_beyond)}" for r in stepped.itertuples())
        lines.append(f"  - {names[key]}: {said}.")
    return ["- Error on the GPU counts measured (predicted / measured - 1, per-GPU e2e medians; beyond the spread of "
            "the processes' medians unless marked):", *lines] if lines else []


def _most_gpus_line(frame: pd.DataFrame, names: dict[tuple, str]) -> list[str]:
    """The prediction at the most GPUs predicted, per pipeline and model (and setting: `names`), with
    its error at the most GPUs the run measured it on; where model-only ran there too, the same
    prediction made with that step (the all-reduce of that many GPUs in it, more GPUs' left out)
    and its error there."""
    most = max(PREDICTED_GPUS)
    lines = []
    for key, rows in frame.groupby(GROUP, sort=True):
        top = rows[rows.gpus == most].iloc[0]
        said = (f"{top.predicted:,.0f} img/s per GPU (job {top.predicted * most:,.0f}), {top.binds} binds"
                if pd.notna(top.predicted) else f"not predicted (no one-GPU loader-only rows at {int(top.cores)} cores)")
        seen = rows.dropna(subset=["predicted", "measured"])
        if len(seen):
            last = seen.loc[seen.gpus.idxmax()]
            said += f"; at {plural(int(last.gpus), 'GPU')}, the most measured, its error was {_error_text(last)}"
            if pd.notna(top.predicted) and pd.notna(last.step_there):
                again = _epoch_rate(top.efficiency * min(last.step_there, top.feed), top.batch, top.rank_steps,
                                    top.restart_s)
                said += (f"; with the step as model-only measured at {plural(int(last.gpus), 'GPU')}, {again:,.0f} img/s "
                         f"per GPU (its error there {_marked(last.stepped, last, last.stepped_beyond)})")
        else:
            said += "; no GPU count measured to check it"
        lines.append(f"  - {names[key]}: {said}.")
    return [f"- {most} GPUs per host, predicted, with the error seen at the most GPUs measured:", *lines]


def prediction(df: pd.DataFrame, bound: bool = True) -> tuple[pd.DataFrame, list[str]]:
    """PREDICTION, from the run's one-GPU rows alone (`predict`, as PREDICTION.md has it), for
    PREDICTED_GPUS and every GPU count the run measured, with the error where it measured that count
    at the cores per GPU predicted; sentences: per pipeline the fewest GPUs per host at which it is
    predicted input-bound (unless not `bound`), the step under DDP (`_step_line`), the errors
    (`_error_lines`), the most GPUs predicted with the error at the most measured, and where the
    input binds and the job fell short beyond its spread (`_short_of_the_input`)."""
    lead = lead_rows(df, df["mode"].isin(["model", "e2e"]) | ((df["mode"] == "loader") & (df.busy_ms == 0)))
    if lead.empty or lead.world_size.max() <= 1:
        return pd.DataFrame(), []
    counts = sorted({*PREDICTED_GPUS, *lead.world_size.astype(int).unique()} - {1})
    frame, host = predict(_prediction_inputs(one_gpu_rows(df)), counts)
    if frame.empty:
        return pd.DataFrame(), []
    frame = _checked(frame, lead)
    sentences = _bound_sentences(frame, host) if bound else []
    checked = frame.dropna(subset=["predicted", "measured"])
    names = _names(frame)   # every line of a group under one name
    sentences += _step_line(lead) + _error_lines(checked, names)
    sentences += _most_gpus_line(frame, names)
    sentences += _short_of_the_input(lead, checked, frame, names)
    return _prediction_view(frame), sentences


def prediction_file(name: str, one: pd.DataFrame) -> str:
    """PREDICTION.md of run `name` from its one-GPU rows alone (`one_gpu_rows`): which rows it read,
    PREDICTION and the prediction for PREDICTED_GPUS; ValueError where they hold none to make it from."""
    ok = _prediction_inputs(one)
    frame, host = predict(ok, list(PREDICTED_GPUS))
    if frame.empty:
        raise ValueError(f"{name}: no prediction from its one-GPU rows: it needs e2e, model-only and idle "
                         "loader-only rows of one GPU at the e2e's cores, and the host's core count (cpu_count)")
    ids, commits = sorted(set(ok.run_id)), sorted(set(ok.git_commit))
    return "\n".join([
        "# More GPUs per host, predicted from one GPU", "",
        f"From {code(name)}, written by `pipebench report --prediction-only` before its rows of several GPUs "
        f"were read, from its one-GPU rows alone: {plural(len(ok), 'row')} (rank 0, ok: model-only, e2e and idle "
        f"loader-only) of commit {', '.join(commits) or 'unknown'}, {plural(len(ids), 'invocation')} "
        f"({', '.join(code(i) for i in ids)}).", "",
        PREDICTION, "", table(_prediction_view(frame)), "", *_bound_sentences(frame, host), ""])


def prediction_note(name: str, group: pd.DataFrame, out: Path) -> list[str]:
    """Where the run's folder holds PREDICTION.md: a line linking it (relative to `out`) and saying
    whether it is what the run's one-GPU rows give now (`prediction_file`, under the name it was written
    with: a run folder moved after its prediction holds the same prediction)."""
    written = Path(group.results_folder.iloc[0]) / "PREDICTION.md"
    if not written.is_file():
        return []
    link = urllib.parse.quote(os.fsencode(Path(os.path.relpath(written, out)).as_posix()), safe="/._-~")   # its bytes
    text = text_of(written)
    then = re.search(r"^From `([^`]*)`, written by", text, re.M)   # the folder may have moved since
    try:
        same = text == prediction_file(then.group(1) if then else name, one_gpu_rows(group))
    except ValueError:
        same = False
    return [f"The run's folder holds [PREDICTION.md]({link}), written by `pipebench report --prediction-only` "
            "from its one-GPU rows before its rows of several GPUs were read; " +
            ("the same one-GPU rows give it today: it is the table below without the measured columns." if same else
             "it differs from what the run's one-GPU rows give today (rows of one GPU measured after it, or "
             "another version of the report): the table below is today's."), ""]


def _short_of_the_input(ok: pd.DataFrame, checked: pd.DataFrame, frame: pd.DataFrame, names: dict[tuple, str]) -> list[str]:
    """Where the input binds and the measured job fell short of the prediction beyond its spread
    (the prediction above every process's median): whether the job's ranks fed their GPUs less than
    the same ranks delivered loader-only at once (below every such process's median: the DDP step
    couples them), or the ranks slowed each other loader-only already, or no such rows ran. A pipeline
    is named alone where the prediction (`frame`) holds it in one group, else by `names`."""
    coupled, crowded, unmeasured = [], [], []
    keys = frame[GROUP].drop_duplicates().pipeline.value_counts()
    for r in checked[checked.binds == "input"].itertuples():
        who = code(r.pipeline) if keys[r.pipeline] == 1 else names[tuple(getattr(r, c) for c in GROUP)]
        if r.predicted <= r.hi:
            continue
        cell = ((ok.pipeline == r.pipeline) & (ok.image_size == r.size) & (ok.batch_size == r.batch)
                & (ok.dtype == r.dtype) & (ok.cpus == r.cores) & (ok.world_size == r.gpus))
        at_once = ok[cell & (ok["mode"] == "loader")]
        if at_once.empty:
            unmeasured.append(f"{who} at {plural(int(r.gpus), 'GPU')}")
            continue
        text = (f"{who} at {plural(int(r.gpus), 'GPU')}: e2e {r.measured:,.0f} per GPU, loader-only "
                f"{at_once.per_gpu.median():,.0f} per GPU with its ranks at once, {r.feed:,.0f} alone")
        (coupled if r.measured < at_once.groupby("process").per_gpu.median().min() else crowded).append(text)
    if not coupled and not crowded and not unmeasured:
        return []
    said = ["- Where the input binds, the measured job fell short of the prediction beyond the spread of its "
            "processes; the prediction takes each rank to feed its GPU as a rank alone does, so read its "
            "input-bound rows as upper bounds."]
    if coupled:
        said.append("  - Below what the same ranks delivered loader-only at once (a DDP step waits for every "
                    "rank's batch): " + "; ".join(coupled) + ".")
    if crowded:
        said.append("  - Not below what its ranks delivered loader-only at once (the ranks slowed each other "
                    "without a step): " + "; ".join(crowded) + ".")
    if unmeasured:
        said.append("  - Whether the step or the ranks beside each other hold it back is not measured (no "
                    "loader-only rows at that GPU count): " + "; ".join(unmeasured) + ".")
    return said


