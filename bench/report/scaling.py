"""Several GPUs of one host, as one run measured them: per configuration, the job's and each GPU's
rate at every GPU count against one GPU's (`scaling`, SCALING says what each column is), per model
the per-GPU model-only and e2e rates with what sets their pace at the most GPUs (`measured`), and for
photographs the share of model-only the best pipeline reaches per cores per GPU there
(`photographs`); the rows a prediction may read (`one_gpu_rows`, `lead_rows`; `bench.report.hosts`).
"""
from __future__ import annotations

import math

import pandas as pd

from pipelines.config import IMAGEFOLDER

from ..results import settings
from .analysis import cells, label_variants
from .verdicts import FED, FLOOR, judge
from .formatting import code, escape, pct, plural

SCALE_KEY = settings.report_key()   # a cell of the scaling table: the report's cell key, at every GPU count
SETTING = ["model", "step", "image_size", "batch_size", "dtype"]

SCALING = """\
DDP: one process per GPU (`--ranks N`, or under torchrun), each with its 1/N shard of every epoch,
its own workers and its own CPU cores ("cores / GPU", `--cpus`), gradients all-reduced in the step;
img/s is the job's (all ranks' images over the slowest rank's window: median [range of the
processes' medians; of the windows with one process] n=windows/processes) and per GPU. "vs 1 GPU":
per-GPU img/s over the same configuration's one-GPU img/s at the same cores in the same run. "CPU
busy / rank": CPU seconds of a rank's process tree over its window and cores. Copy rows: every rank
copies at once; loader rows on an idle GPU (no busy step)."""


def gpus_used(rows: pd.DataFrame) -> pd.Series:
    """Per row, the GPUs it used: DataParallel's devices, else its DDP ranks (1 without)."""
    return rows.gpus.where(rows.parallel == "dp", rows.world_size).fillna(1).astype(int)


def _what(r, mode: str, name) -> str:
    """What a scaling row of `mode` timed, each name through `name` (`code` or `str`): a copy's
    payload and stage, the model alone, a pipeline alone, or a pipeline feeding its model (e2e)."""
    if r.pipeline == "none":
        return escape(f"{r.payload} {r.stage}") if r.payload else name(r.model)
    return f"{name(r.pipeline)} feeding {name(r.model)}" if mode == "e2e" else name(r.pipeline)


def scaling(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Copies, loader-only (on an idle GPU), model-only and e2e over several GPUs of one run: per
    configuration, cores per GPU and GPU count, the job's img/s (median over windows [range of the processes' medians; of
    the windows with one process] n=windows/processes), per GPU, against one GPU at the same cores,
    the share of its cores a rank kept busy (median over ranks and windows) and the largest peak GPU
    memory of any rank; one sentence per GPU count. Pipeline variants apart (`label_variants`)."""
    ok = df[(df.status == "ok") & df["mode"].isin(["copy", "loader", "model", "e2e"]) & (df.busy_ms.fillna(0) == 0)]
    ok = label_variants(ok)   # a pipeline's variants (DALI's decoders) apart
    if ok.empty:
        return pd.DataFrame(), []
    ok["gpus_used"] = gpus_used(ok)
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
        "mode": table["mode"], "what": [_what(r, r.mode, code) for r in table.itertuples()],
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
                             f"{_what(worst, worst['mode'], str)} at {worst.image_size:.0f} px, "
                             f"{int(worst.cpus)} cores per GPU) to {rows.vs_one.max():.0%} of one GPU's.")
    return view.sort_values(["mode", "what", "px", "cores / GPU", "GPUs"]), sentences


def most_gpus(df: pd.DataFrame) -> int:
    """The most GPUs any ok row of the run used (DDP ranks or DataParallel's devices)."""
    ok = df[df.status == "ok"]
    return int(gpus_used(ok).max()) if len(ok) else 1


def one_gpu_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of one GPU (one rank, not DataParallel over several): all a prediction may read."""
    return df[gpus_used(df) == 1]


def lead_rows(df: pd.DataFrame, keep: pd.Series) -> pd.DataFrame:
    """Rank 0's ok rows of DDP and one-GPU runs that `keep` selects, loss never read, pipeline
    variants labelled (`label_variants`), with each row's per-GPU rate (`per_gpu`)."""
    ok = df[(df.status == "ok") & (df["rank"] == 0) & (df.parallel != "dp") & (df.sync_every.fillna(0) == 0) & keep]
    ok = label_variants(ok)
    return ok.assign(per_gpu=ok.world_img_per_s / ok.world_size)


def measured(df: pd.DataFrame) -> list[str]:
    """Per model, step kind, image size and cores per GPU run on several GPU counts: the per-GPU
    model-only and e2e img/s (medians) at each count where both ran (two counts at least), and at
    the most GPUs which pipelines the step sets the pace of (e2e at least FED of model-only there)
    and which the input holds back. Loss never read; pipeline variants apart."""
    ok = lead_rows(df, df["mode"].isin(["model", "e2e"]))
    keys = [*SETTING, "cpus", "mode", "pipeline", "world_size"]
    rates = ok.groupby(keys).per_gpu.median()
    lines = []
    for (model, step, size, batch, dtype, cores), cell in rates.groupby(level=[*SETTING, "cpus"]):
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
            here = ok[(ok.world_size == most) & (ok.model == model) & (ok.step == step) & (ok.image_size == size)
                      & (ok.batch_size == batch) & (ok.dtype == dtype) & (ok.cpus == cores)]
            labels = verdicts_per_gpu(here)
            fed = [code(p) for p, _ in found if labels.get(p, ("",))[0] == "fed"]
            bound = [code(p) for p, _ in found if labels.get(p, ("",))[0].startswith("not fed")]
            thin = [f"{code(p)} ({labels[p][0]}: {labels[p][1].split('; a verdict needs')[0]})" if p in labels
                    else code(p) for p, _ in found if code(p) not in fed + bound]
            listed = [f"{code(p)} {' / '.join(f'{runs[n]:,.0f}' for n in counts)}" for p, runs in found]
            lines.append(f"With {int(cores)} cores per GPU, {code(model)} ({escape(step)} step, {size} px, batch {batch}) per "
                         f"GPU at {' / '.join(str(n) for n in counts)} GPUs (img/s, medians): model-only "
                         f"{' / '.join(f'{alone[n]:,.0f}' for n in counts)}; " + "; ".join(listed)
                         + f". At {plural(int(most), 'GPU')} " + "; ".join(_verdicts(fed, bound, thin)) + ".")
    return lines


def verdicts_per_gpu(rows: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """pipeline -> the one-GPU verdict (`verdicts.judge`: processes, windows, floor, the tolerance
    above model-only, steady windows) on the per-GPU rates of one setting's rank-0 rows at one GPU
    count and cores per GPU, e2e against model-only there; no loader rows are read (a cause is not
    named)."""
    c = cells(rows.assign(img_per_s=rows.per_gpu))
    model = c[c["mode"] == "model"]
    if model.empty:
        return {}
    return {e.pipeline: judge(e, model.iloc[0], None) for e in c[c["mode"] == "e2e"].itertuples()}


def _verdicts(fed: list[str], bound: list[str], thin: list[str]) -> list[str]:
    """`measured`'s verdicts at the most GPUs, each named only where it holds a pipeline."""
    said = [f"the step sets the pace of {', '.join(fed)} (fed: e2e at least {FED:.0%} of model-only, every "
            f"process at least {FLOOR:.0%})"] if fed else []
    if bound:
        said.append(f"the input holds back {', '.join(bound)}" + ("" if fed else f" (e2e below {FED:.0%} of model-only)"))
    if thin:
        said.append(f"no verdict for {', '.join(thin)}")
    return said


def photographs(df: pd.DataFrame) -> list[str]:
    """Per photo setting (model, step, size, batch, dtype of e2e rows at 224 px read from an
    `imagefolder:` source) run on several GPUs, at the most GPUs it ran on: the best pipeline's
    per-GPU e2e median at each cores per GPU measured there, as a share of model-only's per-GPU
    median at that GPU count (at the same cores where measured), and the fewest cores per GPU at
    which it reaches FED; with one cores value, what it reaches there and whether that is FED."""
    source = df["source"].astype("string").fillna("") if "source" in df else pd.Series("", index=df.index)
    ok = lead_rows(df, (df.image_size == 224) & ((df["mode"] == "model") | (
        (df["mode"] == "e2e") & source.str.startswith(IMAGEFOLDER))))
    lines = []
    for (model, step, size, batch, dtype), rows in ok[ok["mode"] == "e2e"].groupby(SETTING, sort=True):
        most = int(rows.world_size.max())
        alone = ok[(ok["mode"] == "model") & (ok.model == model) & (ok.step == step) & (ok.batch_size == batch)
                   & (ok.dtype == dtype) & (ok.world_size == most)]
        if most <= 1 or alone.empty:
            continue
        shares = []
        for cores, here in rows[rows.world_size == most].groupby("cpus", sort=True):
            model_rate = alone[alone.cpus == cores].per_gpu.median() if (alone.cpus == cores).any() else alone.per_gpu.median()
            best = here.groupby("pipeline").per_gpu.median().sort_index().sort_values(ascending=False, kind="stable")
            same = alone[alone.cpus == cores] if (alone.cpus == cores).any() else alone
            label = verdicts_per_gpu(pd.concat([same, here])).get(best.index[0], ("", ""))[0]
            shares.append((int(cores), best.index[0], best.iloc[0] / model_rate, label))
        head = (f"Photographs, {code(model)} ({escape(step)} step, {size} px, batch {batch}), {most} GPUs sharing "
                f"the host (per-GPU e2e medians over model-only's at {plural(most, 'GPU')}): ")
        if len(shares) == 1:
            cores, pipeline, share, label = shares[0]
            lines.append(head + f"at {cores} cores per GPU the best pipeline, {code(pipeline)}, reaches {pct(share)} "
                         + (f"of model-only: fed (at least {FED:.0%}, every process at least {FLOOR:.0%})." if label == "fed"
                            else f"of model-only: {label or 'no verdict'}; no core count measured at "
                            f"{plural(most, 'GPU')} is shown to keep the model fed."))
            continue
        fed = [cores for cores, _, _, label in shares if label == "fed"]
        lines.append(head + "the best pipeline " + "; ".join(
            f"at {cores} cores per GPU {code(pipeline)} {pct(share)} ({label or 'no verdict'})"
            for cores, pipeline, share, label in shares) + "; "
            + (f"it needs {fed[0]} cores per GPU of those measured to keep the model fed." if fed else
               "none is shown to keep the model fed at the cores per GPU measured."))
    return lines
