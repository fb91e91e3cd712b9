"""Turn result CSVs into REPORT.md (a generated summary first) plus PNG plots, reproducibly (same
CSVs -> same bytes).

Summary: where host transfer stops being the bottleneck (the copy's share of the model step per
payload, pinned vs pageable, by image size, and the bytes per image at which the measured copy
rate would equal the fastest measured step: an extrapolation, said so), a recommendation table
(per step kind and model: the fastest pipelines, those within noise of the fastest, % of
model-only, speed-up over `dataloader`, a link to the evidence) and the crossover (the fastest
model each pipeline keeps fed, per step kind).

Sections: one per results file, setting (GPU, image size, batch size, dtype, workers) and step
kind. A results file written by several invocations (a resumed sweep) is one section whose header
names the invocations, commits, hosts and window settings it pools. Per pipeline and model: the
loader-only, model-only and e2e rates (median [min-max], n windows), host wait in `next()`, the
epoch restart, the host-transfer share and a verdict; the stage ceilings with the slowest stage;
the crossover; plots. Rows of several GPUs get their own scaling section. Every sentence is
generated from the numbers; a rate that was not measured is said to be, never guessed.

Verdicts are no finer than the noise: e2e keeps the model fed when its median is at least FED of
model-only or its [min-max] range overlaps model-only's; it is input-bound when the loader-only
range lies wholly below model-only's and e2e reaches (or overlaps) the loader-only rate; otherwise
it is slower than both ceilings (the pipeline's work slows the training step).
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from . import results  # noqa: E402

FED = 0.95   # e2e / model-only at or above this (or ranges overlapping): the model is kept fed
AGREE = 0.85   # e2e / slowest stage's ceiling at or above this: the stage explains e2e
THRESHOLDS = (f"Thresholds: a pipeline keeps a model **fed** when its e2e median is ≥ {FED:.0%} of model-only "
              f"or their [min–max] ranges overlap (a smaller gap is within the windows' noise); the slowest "
              f"stage **explains** e2e when e2e is ≥ {AGREE:.0%} of that stage's ceiling. Percentages are "
              "rounded down, so a printed value never reaches a threshold the number does not.")
RUN = ["results_file", "gpu", "batch_size", "dtype", "num_workers"]   # one results file: never pools files
SETTING = [*RUN, "image_size", "step"]
STAGE_ORDER = ["host", "pin", "h2d-pageable", "h2d-pinned", "device"]
# Options that make two rows of the same pipeline different configurations: named when they vary.
VARIANT = ["encoding", "augment", "channels_last", "pin_memory", "non_blocking", "prefetch_depth", "worker_start",
           "dali_reader", "dali_threads", "dali_queue_depth", "dali_hw_decoder_load", "dali_decoder",
           "dali_batch_multiple"]
TIMERS = """\
What each timer includes (see `bench/harness.py`): every window starts and ends with a device
synchronize and covers exactly its steps; warm-up steps and pipeline construction (including a
resident upload, `upload_s`) are outside. **loader**: iterate the pipeline, one tiny kernel per
batch reading it, no model. **model**: the training step on one batch already on the device.
**e2e**: the training step on the pipeline's batches. **host wait**: host time blocked in `next()`
over the window time (it includes device synchronizations inside a pipeline that wait for the
model's queued work, so it is not all input starvation). **restart**: median host wait of the
steps that began a new epoch (new iterator, shuffle, worker start). **stage** (one at a time, the rest idle): **host** the pipeline's own producer
(workers / threads) with no copy; **pin** copying a batch into new pinned memory (only where the
pipeline does it per batch); **h2d-pageable** / **h2d-pinned** the batch's bytes copied to the
device from pageable (blocking) / pinned (`non_blocking`) memory; **device** its device-side work
on one fixed batch; the model step's ceiling is model-only. **transfer share**: e2e img/s over
the copy's img/s (the copy the pipeline makes), i.e. the share of each step the copy takes."""

SCALING = """\
DDP: one process per GPU under torchrun, each with its 1/N shard of every epoch and its own
workers, gradients all-reduced in the step; img/s is the job's (all ranks' images over the slowest
rank's window). DP: `torch.nn.DataParallel` in one process, fed N x the per-GPU batch on the first
GPU. "vs 1 GPU": img/s over N x the same pipeline's one-GPU img/s. All processes share the host's
CPU cores."""


def load(paths: list[str | Path]) -> pd.DataFrame:
    frames = [results.read_rows(p, keep_default_na=False, na_values=[""],
                          dtype={"stage": str, "copy": str, "parallel": str, "step": str, "run_id": str})
              .assign(results_file=Path(p).parent.name or str(p)) for p in paths]
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    nan = float("nan")
    defaults = {"stage": "", "step": "", "compile_s": nan, "restart_ms": nan, "image_size": 32, "copy": "", "batch_bytes": nan, "world_size": 1, "rank": 0,
                "parallel": "none", "gpus": nan, "peak_gpu_mem_mb_others": nan, "world_img_per_s": nan}
    for column, value in defaults.items():   # CSVs written before these columns existed
        df[column] = df[column].fillna(value) if column in df else value
    df["world_img_per_s"] = df.world_img_per_s.fillna(df.img_per_s)
    df.loc[df["mode"].isin(["model", "e2e"]) & (df.step == ""), "step"] = "eager"   # before --step existed
    df["image_size"] = df["image_size"].astype(int)
    return df


def per_step(df: pd.DataFrame) -> pd.DataFrame:
    """Loader-only and stage rows (no training step) copied into every step kind their run trained
    with, so each step kind's section compares against the same input ceilings."""
    trained = df["mode"].isin(["model", "e2e"])
    kinds = df[trained].groupby("run_id").step.unique()
    shared = df[~trained]
    copies = [shared[shared.run_id == run].assign(step=kind) for run, found in kinds.items() for kind in found]
    return pd.concat([df[trained], shared[~shared.run_id.isin(kinds.index)], *copies], ignore_index=True)


def rate(row) -> str:
    return f"{row.img_per_s:,.0f} [{row.low:,.0f}–{row.high:,.0f}] n={row.n}"


def pct(share: float) -> str:
    """A share as a percentage rounded down to 0.1, so it never shows a threshold it misses."""
    return f"{math.floor(share * 1000 + 1e-9) / 10:.1f}%"


def overlaps(a, b) -> bool:
    """Whether two rows' [low, high] ranges of img/s overlap: their difference is within noise."""
    return a.low <= b.high and b.low <= a.high


def fed(e2e, model) -> bool:
    return e2e.img_per_s >= FED * model.img_per_s or overlaps(e2e, model)


def verdict(loader, model, e2e) -> tuple[str, str]:
    """(label, reason) for one pipeline and model from `medians` rows (loader None: not measured)."""
    share = e2e.img_per_s / model.img_per_s
    if fed(e2e, model):
        noise = " (ranges overlap: within noise)" if share < FED else ""
        return "fed", f"e2e is {pct(share)} of model-only{noise}"
    if loader is None:
        return "not fed", f"e2e is {pct(share)} of model-only; loader-only not measured, so the cause is not known"
    if loader.high < model.low and (e2e.img_per_s >= FED * loader.img_per_s or overlaps(e2e, loader)):
        return "input-bound", (f"e2e ({e2e.img_per_s:,.0f}) is at the loader-only rate ({loader.img_per_s:,.0f}), "
                               f"below model-only ({model.img_per_s:,.0f})")
    return "slower than both", (f"e2e ({e2e.img_per_s:,.0f}) is below loader-only ({loader.img_per_s:,.0f}) "
                                f"and model-only ({model.img_per_s:,.0f}): the pipeline's work slows the training step")


def label_variants(df: pd.DataFrame) -> pd.DataFrame:
    """Rename `pipeline` to include the options in VARIANT that vary among its rows."""
    df = df.copy()
    for name, rows in df[df.pipeline != "none"].groupby("pipeline"):
        varying = [c for c in VARIANT if c in rows and rows[c].nunique(dropna=False) > 1]
        if varying:
            df.loc[rows.index, "pipeline"] = [
                f"{name} ({', '.join(f'{c}={r[c]}' for c in varying)})" for _, r in rows.iterrows()]
    return df


def medians(df: pd.DataFrame) -> pd.DataFrame:
    """Per (mode, stage, pipeline, model): median img/s with its min (low), max (high) and window
    count (n), median host wait and epoch restart, the copy kind and the median bytes per image copied."""
    ok = df[df.status == "ok"].assign(bytes_per_image=lambda d: d.batch_bytes * d.steps / d.images)
    return ok.groupby(["mode", "stage", "pipeline", "model"], sort=True).agg(
        img_per_s=("img_per_s", "median"), low=("img_per_s", "min"), high=("img_per_s", "max"),
        n=("img_per_s", "count"), stall=("wait_frac", "median"), restart=("restart_ms", "median"), copy=("copy", "first"),
        bytes_per_image=("bytes_per_image", "median")).reset_index()


def stage_ceilings(m: pd.DataFrame) -> dict[str, dict[str, float]]:
    """pipeline -> {stage: median img/s} for the stages measured in this setting."""
    stages = m[m["mode"] == "stage"]
    return {p: dict(zip(rows.stage, rows.img_per_s)) for p, rows in stages.groupby("pipeline")}


def copy_kind(m: pd.DataFrame, pipeline: str) -> str:
    """How the pipeline copies its batches ("pageable" / "pinned" / "none"), from its stage rows."""
    kinds = m[(m["mode"] == "stage") & (m.pipeline == pipeline)]["copy"].dropna()
    return kinds.iloc[0] if len(kinds) else ""


def bottleneck(ceilings: dict[str, float], copy: str, model_rate: float) -> dict[str, float]:
    """The stages one step of this pipeline passes through, with their ceilings (img/s)."""
    used = {s: ceilings[s] for s in ("host", "pin", "device") if s in ceilings}
    if f"h2d-{copy}" in ceilings:
        used[f"h2d-{copy}"] = ceilings[f"h2d-{copy}"]
    return {**used, "model": model_rate}


def prediction(e2e: float, stages: dict[str, float]) -> tuple[str, str, str]:
    """(slowest stage, check, sentence) for one pipeline and model."""
    slowest = min(stages, key=stages.get)
    ceiling = stages[slowest]
    serial = 1 / sum(1 / r for r in stages.values())
    ratio = e2e / ceiling
    if ratio >= AGREE:
        check = "explains e2e"
        why = f"e2e ({e2e:,.0f}) is {pct(ratio)} of it"
    else:
        check = "e2e well below it"
        why = (f"e2e ({e2e:,.0f}) reaches only {pct(ratio)} of it: the stages do not overlap "
               f"fully or slow each other down (run one after another they would give {serial:,.0f})")
    return slowest, check, f"the slowest stage is **{slowest}** ({ceiling:,.0f} img/s); {why}"


def pipeline_table(m: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Per pipeline and model, from `medians` of one setting: rates, shares, verdict, prediction;
    and one generated paragraph grouping the pipelines by verdict."""
    loaders = m[m["mode"] == "loader"].set_index("pipeline")
    models = m[m["mode"] == "model"].set_index("model")
    ceilings = stage_ceilings(m)
    rows, groups = [], {}
    for e in m[m["mode"] == "e2e"].itertuples():
        if e.model not in models.index:
            continue
        loader = loaders.loc[e.pipeline] if e.pipeline in loaders.index else None
        model = models.loc[e.model]
        label, why = verdict(loader, model, e)
        copy = copy_kind(m, e.pipeline)
        copy_rate = ceilings.get(e.pipeline, {}).get(f"h2d-{copy}")
        row = {"pipeline": e.pipeline, "model": e.model,
               "loader-only img/s": rate(loader) if loader is not None else "not measured",
               "model-only img/s": rate(model), "e2e img/s": rate(e),
               "e2e / model": pct(e.img_per_s / model.img_per_s), "host wait": pct(e.stall),
               "restart ms": "—" if pd.isna(e.restart) else f"{e.restart:,.1f}",
               "transfer share": (f"{pct(e.img_per_s / copy_rate)} ({copy})" if copy_rate else
                                  "none" if copy == "none" else "—"),
               "verdict": label}
        if e.pipeline in ceilings:
            slowest, check, _ = prediction(e.img_per_s, bottleneck(ceilings[e.pipeline], copy, model.img_per_s))
            row.update({"slowest stage": slowest, "check": check})
        rows.append(row)
        groups.setdefault(label, []).append(f"`{e.pipeline}` with {e.model} ({why})")
    titles = {"fed": "Kept fed", "input-bound": "Input-bound (the pipeline alone is slower than the model)",
              "slower than both": "Slower than both ceilings", "not fed": "Not fed, cause not measured"}
    paragraph = [f"**{titles[k]}:** " + "; ".join(groups[k]) + "." for k in titles if k in groups]
    return pd.DataFrame(rows), [" ".join(paragraph)] if paragraph else []


def stage_table(m: pd.DataFrame) -> pd.DataFrame:
    """Per pipeline: each stage's ceiling (median img/s [min-max]), copy kind, bytes per image."""
    stages = m[m["mode"] == "stage"]
    rows = []
    for pipeline, group in stages.groupby("pipeline"):
        by_stage = group.set_index("stage")
        row = {"pipeline": pipeline, "copy": group["copy"].iloc[0],
               "bytes / image": f"{group.bytes_per_image.max():,.0f}"}
        for stage in STAGE_ORDER:
            row[stage] = rate(by_stage.loc[stage]) if stage in by_stage.index else "—"
        rows.append(row)
    return pd.DataFrame(rows)


def crossover(m: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Per pipeline: the fastest model it keeps fed such that every slower measured model is fed
    too (a frontier, not a best case). A model not fed is input-bound where the loader-only range
    lies below the model's, slowed otherwise, unexplained where loader-only was not measured.
    `m`: `medians` of one setting."""
    loaders = m[m["mode"] == "loader"].set_index("pipeline")
    models = m[m["mode"] == "model"].set_index("model")
    rows, sentences = [], []
    for pipeline, e2e in m[m["mode"] == "e2e"].groupby("pipeline"):
        measured = sorted(((models.loc[r.model].img_per_s, r.model, fed(r, models.loc[r.model]))
                           for r in e2e.itertuples() if r.model in models.index))
        frontier = None
        for speed, name, ok in measured:
            if not ok:
                break
            frontier = (speed, name)
        starved = [(speed, name) for speed, name, ok in measured if not ok]
        loader = loaders.loc[pipeline] if pipeline in loaders.index else None
        below = [x for x in starved if loader is not None and loader.high < models.loc[x[1]].low]
        slowed = [x for x in starved if loader is not None and x not in below]
        unknown = [x for x in starved if loader is None]
        rows.append({"pipeline": pipeline, "models measured": len(measured),
                     "fastest model kept fed (model-only img/s)": f"{frontier[1]} ({frontier[0]:,.0f})" if frontier else "none",
                     "not fed: loader-only below model-only": ", ".join(f"{k} ({r:,.0f})" for r, k in below) or "—",
                     "not fed: slower than both": ", ".join(f"{k} ({r:,.0f})" for r, k in slowed) or "—",
                     "not fed: loader-only not measured": ", ".join(f"{k} ({r:,.0f})" for r, k in unknown) or "—"})
        sentence = (f"`{pipeline}` keeps every measured model up to {frontier[1]} ({frontier[0]:,.0f} img/s) fed"
                    if frontier else f"`{pipeline}` keeps none of the measured models fed")
        if below:
            sentence += f"; from {below[0][1]} ({below[0][0]:,.0f} img/s) up its loader-only rate ({loader.img_per_s:,.0f}) is the limit"
        if slowed:
            sentence += "; " + ", ".join(k for _, k in slowed) + " not fed although the loader alone is faster"
        if unknown:
            sentence += "; " + ", ".join(k for _, k in unknown) + " not fed (loader-only not measured)"
        sentences.append(sentence + ".")
    return pd.DataFrame(rows), [" ".join(sentences)] if sentences else []


def fed_plot(m: pd.DataFrame, path: Path, title: str) -> None:
    """e2e as % of model-only against model-only img/s, one labelled line per pipeline: where each
    line drops below the FED band is its crossover."""
    models = m[m["mode"] == "model"].set_index("model").img_per_s
    fig, ax = plt.subplots(figsize=(7, 5), dpi=100)
    for i, (pipeline, e2e) in enumerate(m[m["mode"] == "e2e"].groupby("pipeline")):
        pts = sorted((models[r.model], 100 * r.img_per_s / models[r.model]) for r in e2e.itertuples() if r.model in models)
        if pts:
            ax.plot(*zip(*pts), "o-", color=f"C{i}", label=pipeline)
            ax.annotate(pipeline, pts[-1], textcoords="offset points", xytext=(4, 0), fontsize=7, color=f"C{i}")
    ax.axhline(100 * FED, color="grey", linestyle=":", label=f"{FED:.0%} of model-only")
    ax.set(xscale="log", xlabel="model-only img/s (one point per model)", ylabel="e2e as % of model-only",
           ylim=(0, 110))
    ax.set_title(title.replace(": ", "\n", 1), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def speedup_plot(m: pd.DataFrame, path: Path, title: str) -> bool:
    """e2e speed-up over `dataloader` per pipeline and model (bars); False if dataloader has no e2e rows."""
    e2e = m[m["mode"] == "e2e"].pivot_table(index="pipeline", columns="model", values="img_per_s")
    if "dataloader" not in e2e.index:
        return False
    ratio = (e2e / e2e.loc["dataloader"]).drop(index="dataloader")
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ratio.plot.bar(ax=ax, rot=0)
    ax.axhline(1.0, color="grey", linestyle=":")
    ax.set(ylabel="e2e img/s ÷ dataloader's", xlabel="")
    ax.set_title(title.replace(": ", "\n", 1), fontsize=10)
    ax.legend(fontsize=8, title="model", title_fontsize=8)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return True


def transfer_points(df: pd.DataFrame) -> pd.DataFrame:
    """One run, any image sizes: per (bytes per image, copy kind, model) the copy's time as a share
    of the model step (model-only img/s over the copy's img/s)."""
    rows = []
    for size, group in df.groupby("image_size", sort=True):
        m = medians(group)
        copies = m[(m["mode"] == "stage") & m.stage.isin(["h2d-pageable", "h2d-pinned"])]
        for c in copies.itertuples():
            for r in m[m["mode"] == "model"].itertuples():
                per_pixel = c.bytes_per_image / (3 * size * size)
                payload = "float32" if per_pixel >= 2 else "uint8" if per_pixel >= 0.5 else "encoded"
                rows.append({"image_size": size, "bytes_per_image": c.bytes_per_image, "payload": payload,
                             "copy": c.stage.removeprefix("h2d-"), "copy_us": 1e6 / c.img_per_s,
                             "model": r.model, "step_us": 1e6 / r.img_per_s})
    if not rows:
        return pd.DataFrame()
    points = pd.DataFrame(rows).groupby(["model", "copy", "payload", "bytes_per_image", "image_size"],
                                        sort=True).median()
    return points.reset_index().assign(share=lambda d: d.copy_us / d.step_us)


def transfer_section(points: pd.DataFrame, path: Path, title: str) -> list[str]:
    fig, ax = plt.subplots(figsize=(7, 5), dpi=100)
    sentences = []
    for i, (model, group) in enumerate(points.groupby("model", sort=True)):
        for kind, style in (("pageable", "--"), ("pinned", "-")):
            line = group[group["copy"] == kind].sort_values("bytes_per_image")
            if line.empty:
                continue
            for payload, part in line.groupby("payload", sort=True):   # one line across image sizes
                marker = {"float32": "s", "uint8": "o", "encoded": "^"}[payload]
                gbps = part.bytes_per_image / part.copy_us / 1e3
                ax.plot(part.bytes_per_image, part.share, marker + style, color=f"C{i}",
                        label=f"{model}, {kind}, {payload} ({gbps.min():.1f}–{gbps.max():.1f} GB/s)")
            over = line[line.share >= 1]
            top = line.loc[line.share.idxmax()]
            sentences.append(
                f"- {model}, {kind} copies: the copy takes {pct(top.share)} of the model step at "
                f"{top.bytes_per_image:,.0f} B/image ({top.image_size:.0f} px)" +
                (f"; from {over.bytes_per_image.iloc[0]:,.0f} B/image ({over.image_size.iloc[0]:.0f} px) it "
                 "is as long as the step: the bus alone is the limit, even fully overlapped." if len(over) else
                 "; below 100% everywhere measured: the bus is not the limit for this model."))
    ax.axhline(1.0, color="grey", linestyle=":", label="copy = model step")
    ax.set(xscale="log", yscale="log", xlabel="bytes per image copied to the device",
           ylabel="copy time / model step time")
    ax.set_title(title.replace(": ", "\n", 1), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    table = points.assign(**{
        "bytes / image": points.bytes_per_image.map("{:,.0f}".format),
        "copy µs / image": points.copy_us.map("{:.2f}".format),
        "copy GB/s": (points.bytes_per_image / points.copy_us / 1e3).map("{:.1f}".format),
        "model step µs / image": points.step_us.map("{:.2f}".format),
        "copy / step": points.share.map(pct)})[
        ["image_size", "payload", "bytes / image", "copy", "copy µs / image", "copy GB/s", "model",
         "model step µs / image", "copy / step"]]
    return [table.to_markdown(index=False), "", *sentences, "", f"![transfer share]({path.name})", ""]


SCALE_KEY = ["results_file", "gpu", "per_gpu_batch", "dtype", "image_size", "step", "mode", "model", "pipeline"]   # never pools runs


def scaling(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Loader-only, model-only and e2e over several GPUs: per SCALE_KEY and (parallel, replicas)
    the job's img/s (all ranks' images over the slowest rank's window), its efficiency against one
    GPU (rate / (replicas x the 1-GPU rate)) and the peak memory of the busiest and least busy GPU;
    one sentence per setting and GPU count."""
    ok = df[(df.status == "ok") & df["mode"].isin(["loader", "model", "e2e"])].copy()
    ok["replicas"] = ok.gpus.where(ok.parallel == "dp", ok.world_size).astype(int)
    ok["per_gpu_batch"] = (ok.batch_size // ok.replicas).where(ok.parallel == "dp", ok.batch_size)
    ok["pipeline"] = ok.pipeline.replace("none", "(model-only)")
    ok["gpu"] = ok.gpu.astype(object).fillna("CPU")
    keys = [*SCALE_KEY, "parallel", "replicas"]
    lead = ok[ok["rank"] == 0].groupby(keys).world_img_per_s.agg(["median", "min", "max"])
    # peak memory per GPU: DDP's ranks each hold one (busiest / least busy rank); DP's main GPU and the others
    per_rank = ok.groupby([*keys, "rank"]).agg(main=("peak_gpu_mem_mb", "median"),
                                                others=("peak_gpu_mem_mb_others", "median")).reset_index()
    memory = per_rank.groupby(keys).agg(high=("main", "max"), low=("main", "min"), others=("others", "median"))
    table = lead.join(memory).reset_index()
    one = table[table.replicas == 1].set_index(SCALE_KEY)["median"]
    table["efficiency"] = [r["median"] / (r.replicas * one.get(tuple(r[k] for k in SCALE_KEY), float("nan")))
                           for _, r in table.iterrows()]
    if table.replicas.max() <= 1:
        return pd.DataFrame(), []
    sentences = []
    multi = table[table.replicas > 1]
    setting = [k for k in SCALE_KEY if k not in ("mode", "pipeline")] + ["parallel", "replicas"]
    bare_rates = multi[multi["mode"] == "model"].set_index(setting).efficiency
    for key, rows in multi[multi["mode"] != "model"].groupby(["mode", *setting]):
        mode, model, parallel, n = key[0], key[1 + setting.index("model")], key[-2], key[-1]
        rows = rows.dropna(subset=["efficiency"]).sort_values("efficiency")
        if rows.empty:
            continue
        effs = ", ".join(f"{r.pipeline} {r.efficiency:.0%}" for r in rows.itertuples())
        bare = bare_rates.get(key[1:])
        bare = pd.Series(dtype=float) if bare is None else pd.Series(bare).dropna()
        how = "loader-only, one process per GPU" if mode == "loader" else f"{model} {mode}, {parallel.upper()}"
        sentences.append(f"- {how} × {n}: scaling efficiency {effs} (lowest: {rows.pipeline.iloc[0]})"
                         + (f"; the model alone (model-only) scales {bare.iloc[0]:.0%}." if len(bare) else "."))
    dp = table[table.parallel == "dp"]
    for r in dp.itertuples():
        ddp = table[(table.parallel == "ddp") & (table.replicas == r.replicas)
                    & (table[SCALE_KEY] == pd.Series(r._asdict())[SCALE_KEY]).all(axis=1)]
        than = f"{r.median / ddp['median'].iloc[0]:.0%} of DDP's rate, " if len(ddp) else ""
        sentences.append(f"- {r.model} {r.mode}, {r.pipeline}, DP × {r.replicas}: {than}main GPU peak {r.high:,.0f} MB vs "
                         f"{r.others:,.0f} MB on the others ({r.high / r.others - 1:+.0%}).")
    view = table.assign(**{
        "img/s": [f"{a:,.0f} [{b:,.0f}–{c:,.0f}]" for a, b, c in zip(table["median"], table["min"], table["max"])],
        "vs 1 GPU": table.efficiency.map(lambda v: "" if pd.isna(v) else f"{v:.0%}"),
        "peak MB per GPU": ["" if pd.isna(h) else f"{h:,.0f} main / {o:,.0f} others" if p == "dp" else
                            (f"{h:,.0f}" if f"{h:,.0f}" == f"{lo:,.0f}" else f"{lo:,.0f}–{h:,.0f}")
                            for p, h, lo, o in zip(table.parallel, table.high, table.low, table.others)]})
    view = view[["gpu", "per_gpu_batch", "dtype", "mode", "model", "pipeline", "parallel", "replicas", "img/s",
                 "vs 1 GPU", "peak MB per GPU"]].rename(columns={"per_gpu_batch": "batch / GPU", "replicas": "GPUs"})
    return view, sentences


def environment(df: pd.DataFrame) -> str:
    cols = ["gpu", "driver", "cuda", "torch", "torchvision", "dali", "peers", "cpu_count", "git_commit", "run_id"]
    lines = []
    for col in [c for c in cols if c in df]:   # a column an older version did not write is left out
        values = sorted({str(v) for v in df[col].dropna()})
        lines.append(f"- {col}: {', '.join(values) if values else '—'}")
    return "\n".join(lines)


def anchor(title: str) -> str:
    """The link anchor a Markdown renderer (GitHub's rules) gives a heading."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def section_name(source: str, gpu, bs, dtype, workers, size, step) -> str:
    """A section's heading from its SETTING values."""
    return (f"{source}: {gpu if isinstance(gpu, str) else 'CPU'}, {size} px, batch {bs}, {dtype}, "
            f"{workers} workers" + (f", {step} step" if step else ""))


def provenance(group: pd.DataFrame) -> list[str]:
    """What a section pools: invocations, commits, hosts, window settings; said, never hidden."""
    ok = group[group.status == "ok"]
    def values(column: str) -> list[str]:
        found = ok[column].dropna() if column in ok else []
        return sorted({f"{v:g}" if isinstance(v, float) else str(v) for v in found})

    runs, commits, hosts = values("run_id"), values("git_commit"), values("hostname")
    line = (f"Rows from {len(runs)} invocation{'s' if len(runs) > 1 else ''} of this results file "
            f"(run id{'s' if len(runs) > 1 else ''} {', '.join(f'`{r}`' for r in runs)}); commit "
            f"{', '.join(commits) or '—'}; host {', '.join(hosts) or '—'}.")
    if len(ok):
        line += (f" Windows: {ok.seconds.min():.2f}–{ok.seconds.max():.2f} s, {ok.steps.min():.0f}–{ok.steps.max():.0f} "
                 "steps each.")
    mixed = [f"{c} {' / '.join(values(c))}" for c in ("warmup", "max_samples", "seed", "last_batch", "hostname")
             if len(values(c)) > 1]
    if mixed:
        line += " **Mixed settings pooled here:** " + "; ".join(mixed) + "."
    return [line, ""]


def recommendations(single: pd.DataFrame, report: str) -> pd.DataFrame:
    """Per results file, setting, step kind and model: the fastest pipelines end to end (the best
    and every one whose range overlaps it), its % of model-only, its speed-up over `dataloader`."""
    rows = []
    for setting, group in single.groupby(SETTING, sort=True, dropna=False, observed=True):
        m = medians(label_variants(group))   # two variants of a pipeline are two candidates
        models = m[m["mode"] == "model"].set_index("model")
        for model, e2e in m[m["mode"] == "e2e"].groupby("model"):
            if model not in models.index:
                continue
            e2e = e2e.sort_values("img_per_s", ascending=False)
            best = e2e.iloc[0]
            ties = [r.pipeline for r in e2e.iloc[1:].itertuples() if overlaps(r, best)]
            base = e2e[e2e.pipeline == "dataloader"]
            rows.append({
                "px": setting[5], "step": setting[-1] or "—", "model (model-only img/s)": f"{model} ({models.loc[model].img_per_s:,.0f})",
                "use": f"`{best.pipeline}`" + (f" (within noise: {', '.join(f'`{t}`' for t in ties)})" if ties else ""),
                "e2e / model-only": pct(best.img_per_s / models.loc[model].img_per_s),
                "× dataloader": f"{best.img_per_s / base.img_per_s.iloc[0]:.2f}×" if len(base) else "not measured",
                "evidence": f"[{setting[0]}]({report}#{anchor(section_name(*setting))})",
                "_best": [best.pipeline, *ties]})
    return pd.DataFrame(rows)


def frontier_table(single: pd.DataFrame) -> pd.DataFrame:
    """Per results file and setting: pipeline × step kind -> the fastest model kept fed (crossover)."""
    frames = []
    for setting, group in single.groupby(SETTING, sort=True, dropna=False, observed=True):
        cross, _ = crossover(medians(label_variants(group)))
        if not cross.empty:
            frames.append(cross.assign(step=setting[-1] or "—", run=setting[0], px=setting[5]))
    if not frames:
        return pd.DataFrame()
    both = pd.concat(frames)
    order = [k for k in ("eager", "graph", "compile", "—") if k in set(both.step)]
    order += sorted(set(both.step) - set(order))
    table = both.pivot_table(index=["run", "px", "pipeline"], columns="step", aggfunc="first",
                             values="fastest model kept fed (model-only img/s)")
    return table[order].fillna("not measured").reset_index()


def transfer_summary(single: pd.DataFrame) -> list[str]:
    """One paragraph: the copy's largest share of the model step per copy kind and payload, the
    measured copy rate, and where the copy would equal the fastest measured step (extrapolated)."""
    found = [transfer_points(g) for _, g in single.groupby([*RUN, "step"], observed=True, dropna=False)]
    points = pd.concat(found, ignore_index=True) if found else pd.DataFrame()
    if points.empty:
        return ["Host transfer: no host-to-device stage rows in these results (run `--modes stage`)."]
    points = points.assign(gbps=points.bytes_per_image / points.copy_us / 1e3)
    ok = single[(single.status == "ok") & (single["mode"] == "model")]
    fastest = ok.groupby(["model", "step"], observed=True).img_per_s.median().sort_values()
    parts = []
    for (kind, payload), g in points.groupby(["copy", "payload"], sort=True):
        top = g.loc[g.share.idxmax()]
        parts.append(f"a {kind} {payload} copy took at most {pct(top.share)} of the model step "
                     f"({top.model}, {top.image_size:.0f} px, {top.bytes_per_image:,.0f} B/image) at "
                     f"{g.gbps.min():.1f}–{g.gbps.max():.1f} GB/s")
    text = "**Where host transfer stops being the bottleneck.** Measured: " + "; ".join(parts) + "."
    if len(fastest):
        (model, step), speed = fastest.index[-1], fastest.iloc[-1]
        pinned = points[points["copy"] == "pinned"].gbps.max()
        pageable = points[points["copy"] == "pageable"].gbps.max()
        limits = [f"{kind} at {1e9 * g / speed:,.0f} B/image ({math.sqrt(1e9 * g / speed / 3):.0f} px uint8)"
                  for kind, g in (("pinned", pinned), ("pageable", pageable)) if not math.isnan(g)]
        text += (f" Extrapolated from those rates (not measured): the fastest step measured here ({model}, "
                 f"{step or 'eager'} step, {speed:,.0f} img/s) would wait for the copy beyond "
                 + " and ".join(limits) + ", even with the copy fully overlapped.")
    return [text]


def summary(single: pd.DataFrame, report: str) -> list[str]:
    """The summary users read first (Markdown lines); links point into `report`."""
    lines = ["## Summary", "", *transfer_summary(single), ""]
    recs = recommendations(single, report)
    if not recs.empty:
        wins = pd.Series([p for best in recs._best for p in best]).value_counts()
        shown = ", ".join(f"`{p}` in {n}" for p, n in wins.items())
        lines += ["**Which pipeline to use**, per results file, image size, training step kind and model: the "
                  "fastest end to end, with every pipeline whose [min–max] range overlaps it. "
                  f"Of the {len(recs)} situations measured, the fastest (or within noise of it) was {shown}; "
                  "any pipeline not named was in none.", "",
                  recs.drop(columns="_best").to_markdown(index=False), ""]
    front = frontier_table(single)
    if not front.empty:
        lines += ["**Crossover**: the fastest model each pipeline keeps fed (every slower measured model fed too), "
                  "per step kind.", "", front.to_markdown(index=False), ""]
    return lines + [THRESHOLDS, ""]


README_START, README_END = "<!-- summary: generated by pipebench report --readme -->", "<!-- end of summary -->"


def update_readme(readme: Path, summary_lines: list[str], folder: str) -> None:
    """Replace the block between README_START and README_END with the summary, links made relative
    to the README."""
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        raise ValueError(f"{readme}: needs the lines {README_START!r} and {README_END!r} around the summary")
    body = "\n".join(summary_lines).replace("## Summary", "### The answer, from the committed runs")
    body = re.sub(r"\]\((REPORT\.md#[^)]*)\)", lambda m: f"]({folder}/{m.group(1)})", body)
    head, rest = text.split(README_START, 1)
    readme.write_text(head + README_START + "\n" + body + "\n" + README_END + rest.split(README_END, 1)[1])


def write(paths: list[str | Path], out: Path, readme: Path | None = None) -> Path:
    """Write out/REPORT.md (summary first) and its plots from the CSVs, and out/SUMMARY.md; with
    `readme`, its summary block too. Returns the report's path."""
    df = load(paths)
    if df.empty:
        raise ValueError("no rows in " + ", ".join(map(str, paths)))
    out.mkdir(parents=True, exist_ok=True)
    single = per_step(df[(df.world_size == 1) & (df.parallel == "none")])   # one process, one GPU
    known = list(dict.fromkeys(["", "eager", "graph", "compile", *sorted(set(single.step))]))
    single["step"] = pd.Categorical(single.step, categories=known, ordered=True)   # sections: eager, graph, compile
    brief = summary(single, "REPORT.md")
    (out / "SUMMARY.md").write_text("\n".join(["# Summary", "", *brief[2:]]))
    parts = ["# Report", "", "Sources: " + ", ".join(f"`{Path(p).as_posix()}`" for p in paths), "", *brief,
             "## Environment", "", environment(df), "", TIMERS, ""]
    for i, (setting, group) in enumerate(single.groupby(SETTING, sort=True, dropna=False, observed=True), start=1):
        source, gpu, bs, dtype, workers, size, step = setting
        name = section_name(*setting)
        slug = f"{i}-{size}px-bs{bs}-{dtype}-w{workers}" + (f"-{step}" if step else "")
        group = label_variants(group)
        parts += [f"## {name}", "", *provenance(group)]
        first = group[(group["mode"] == "model") & (group.status == "ok")].groupby("model").compile_s.median().dropna()
        if len(first):
            parts += ["First training step alone (`compile_s`, before the warm-up: " + (
                "side-stream warm-up, compilation and capture" if step in ("graph", "compile") else "cuDNN autotuning")
                + "), model-only median: " + ", ".join(f"{k} {v:.1f} s" for k, v in first.items()) + ".", ""]
        m = medians(group)   # aggregated once per setting, read by every table and plot
        table, sentences = pipeline_table(m)
        if not table.empty:
            parts += ["### Per pipeline", "", table.to_markdown(index=False), "", *sentences, ""]
            plot = out / f"speedup-{slug}.png"
            if speedup_plot(m, plot, name):
                parts += [f"![e2e speed-up over dataloader]({plot.name})", ""]
        stages = stage_table(m)
        if not stages.empty:
            parts += ["### Stage ceilings (img/s)", "", stages.to_markdown(index=False), ""]
        cross, cross_sentences = crossover(m)
        if not cross.empty:
            plot = out / f"fed-{slug}.png"
            fed_plot(m, plot, name)
            parts += ["### Crossover", "", cross.to_markdown(index=False), "", *cross_sentences, "",
                      f"![e2e as % of model-only]({plot.name})", ""]
        failed = group[~group.status.isin(["ok", "not-applicable"])].drop_duplicates(
            ["pipeline", "mode", "stage", "model", "status", "error"])
        if not failed.empty:
            parts += ["### Not measured", ""] + [
                f"- `{r.pipeline}` {r.stage or r.mode} {r.model}: {r.status} — {r.error}"
                for r in failed.itertuples()] + [""]
    for i, (setting, group) in enumerate(single.groupby([*RUN, "step"], sort=True, dropna=False, observed=True), start=1):
        points = transfer_points(group)
        if not points.empty:
            source, gpu, bs, dtype, workers, step = setting
            name = (f"{source}: {gpu if isinstance(gpu, str) else 'CPU'}, batch {bs}, {dtype}, {workers} workers"
                    + (f", {step} step" if step else ""))
            plot = out / (f"transfer-{i}-bs{bs}-{dtype}-w{workers}" + (f"-{step}" if step else "") + ".png")
            parts += [f"## Host transfer vs bytes per image — {name}", "", *transfer_section(points, plot, name)]
    table, sentences = scaling(df)
    if not table.empty:
        parts += ["## Several GPUs: scaling", "", SCALING, "", table.to_markdown(index=False), "", *sentences, ""]
    report = out / "REPORT.md"
    report.write_text("\n".join(parts))
    if readme is not None:
        update_readme(readme, brief, Path(out).as_posix())
    return report
