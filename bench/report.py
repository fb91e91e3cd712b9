"""Turn result CSVs into REPORT.md plus PNG plots, reproducibly (same CSVs -> same bytes).

For each setting (GPU, image size, batch size, dtype, workers) the report gives, per pipeline: the
loader-only ceiling, model-only ceiling per model, end-to-end rate, stall fraction (share of the
e2e window spent blocked waiting for the next batch), host-transfer share (the share of the e2e
step time its per-batch copy takes at the measured copy rate) and a verdict; the stage ceilings
(host, pin, host-to-device pageable / pinned, device, model) with the slowest stage as the
predicted bottleneck, checked against e2e; a crossover table (the fastest model each pipeline
keeps fed at >= 95% of its model-only rate); and a roofline plot (x = model-only img/s, y = e2e
img/s, one line per pipeline, the ideal min(loader, model) dashed). Across image sizes of one run:
copy time as a share of the model step vs bytes per image, pageable vs pinned. Rows of several
GPUs (torchrun / DDP, DataParallel) get their own section: the job's img/s per GPU count, scaling
efficiency against one GPU, per-GPU peak memory. Every sentence is generated from the numbers.
Rates are medians over repeats with [min-max].
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

FED = 0.95   # e2e / model-only at or above this: the pipeline keeps the model fed
AGREE = 0.85   # e2e / slowest stage's ceiling at or above this: the prediction holds
RUN = ["run_id", "gpu", "batch_size", "dtype", "num_workers"]   # never pools across runs
SETTING = [*RUN, "image_size", "step"]
STAGE_ORDER = ["host", "pin", "h2d-pageable", "h2d-pinned", "device"]
# Options that make two rows of the same pipeline different configurations: named when they vary.
VARIANT = ["encoding", "augment", "channels_last", "pin_memory", "non_blocking", "prefetch_depth",
           "dali_reader", "dali_threads", "dali_queue_depth", "dali_hw_decoder_load"]
TIMERS = """\
What each timer includes (see `bench/harness.py`): every window starts and ends with a device
synchronize and covers exactly its steps; warm-up steps and pipeline construction (including a
resident upload, `upload_s`) are outside. **loader**: iterate the pipeline, one tiny kernel per
batch reading it, no model. **model**: the training step on one batch already on the device.
**e2e**: the training step on the pipeline's batches. **stall**: host time blocked in `next()` over
the window time. **stage** (one at a time, the rest idle): **host** the pipeline's own producer
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
    frames = [pd.read_csv(p, keep_default_na=False, na_values=[""],
                          dtype={"stage": str, "copy": str, "parallel": str, "step": str})
              for p in paths]
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    nan = float("nan")
    defaults = {"stage": "", "step": "", "compile_s": nan, "image_size": 32, "copy": "", "batch_bytes": nan, "world_size": 1, "rank": 0,
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
    return f"{row.img_per_s:,.0f} [{row.low:,.0f}–{row.high:,.0f}]"


def verdict(loader: float, model: float, e2e: float) -> tuple[str, str]:
    """(label, sentence) for one pipeline and model from the three median rates."""
    share = e2e / model
    if share >= FED:
        return "compute-bound", f"e2e reaches {share:.0%} of model-only: the model, not the input, sets the pace"
    if loader < model and e2e >= FED * loader:
        return "input-bound", (f"e2e ({e2e:,.0f}) is at the pipeline's loader-only ceiling ({loader:,.0f}), "
                               f"below the model's ({model:,.0f})")
    return "contention", (f"e2e ({e2e:,.0f}) is below both loader-only ({loader:,.0f}) and model-only "
                          f"({model:,.0f}): pipeline and training step slow each other down")


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
    """Per (mode, stage, pipeline, model): median img/s with its min (low) and max (high), median
    stall, the copy kind and the median bytes per image copied."""
    ok = df[df.status == "ok"].assign(bytes_per_image=lambda d: d.batch_bytes * d.steps / d.images)
    return ok.groupby(["mode", "stage", "pipeline", "model"], sort=True).agg(
        img_per_s=("img_per_s", "median"), low=("img_per_s", "min"), high=("img_per_s", "max"),
        stall=("wait_frac", "median"), copy=("copy", "first"),
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
        check = "agrees"
        why = f"e2e ({e2e:,.0f}) is {ratio:.0%} of it"
    else:
        check = "**disagrees**"
        why = (f"but e2e ({e2e:,.0f}) reaches only {ratio:.0%} of it: the stages do not overlap "
               f"fully or slow each other down (run one after another they would give {serial:,.0f})")
    return slowest, check, f"the slowest stage is **{slowest}** ({ceiling:,.0f} img/s); {why}"


def pipeline_table(m: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Per pipeline and model, from `medians` of one setting: rates, shares, verdict, prediction."""
    loaders = m[m["mode"] == "loader"].set_index("pipeline")
    models = m[m["mode"] == "model"].set_index("model")
    ceilings = stage_ceilings(m)
    rows, sentences = [], []
    for e in m[m["mode"] == "e2e"].itertuples():
        if e.pipeline not in loaders.index or e.model not in models.index:
            continue
        loader, model = loaders.loc[e.pipeline], models.loc[e.model]
        label, why = verdict(loader.img_per_s, model.img_per_s, e.img_per_s)
        copy = copy_kind(m, e.pipeline)
        copy_rate = ceilings.get(e.pipeline, {}).get(f"h2d-{copy}")
        row = {"pipeline": e.pipeline, "model": e.model, "loader-only img/s": rate(loader),
               "model-only img/s": rate(model), "e2e img/s": rate(e),
               "e2e / model": f"{e.img_per_s / model.img_per_s:.0%}", "stall": f"{e.stall:.0%}",
               "transfer share": (f"{e.img_per_s / copy_rate:.1%} ({copy})" if copy_rate else
                                  "none" if copy == "none" else "—"),
               "verdict": label}
        sentence = f"- `{e.pipeline}` with {e.model}: **{label}** — {why}"
        if e.pipeline in ceilings:
            slowest, check, said = prediction(e.img_per_s, bottleneck(ceilings[e.pipeline], copy, model.img_per_s))
            row.update({"slowest stage (predicted)": slowest, "prediction": check})
            sentence += f"; {said}"
        rows.append(row)
        sentences.append(sentence + ".")
    return pd.DataFrame(rows), sentences


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
    """Per pipeline: the largest model-only rate it keeps fed at >= FED. A model it does not keep
    fed is input-starved where the loader-only rate is below the model-only rate, else contention.
    `m`: `medians` of one setting."""
    loaders = m[m["mode"] == "loader"].set_index("pipeline").img_per_s
    models = m[m["mode"] == "model"].set_index("model").img_per_s
    rows, sentences = [], []
    for pipeline, e2e in m[m["mode"] == "e2e"].groupby("pipeline"):
        share = {r.model: r.img_per_s / models[r.model] for r in e2e.itertuples() if r.model in models}
        top = max((models[k] for k, v in share.items() if v >= FED), default=None)
        starved = sorted((models[k], k, v) for k, v in share.items() if v < FED)
        loader = loaders.get(pipeline, float("inf"))
        input_bound = [x for x in starved if loader < x[0]]
        contention = [x for x in starved if loader >= x[0]]
        rows.append({"pipeline": pipeline, "models measured": len(share),
                     "fastest model kept fed (model-only img/s)": f"{top:,.0f}" if top else "none",
                     "not fed: loader-only below model-only": ", ".join(f"{k} ({r:,.0f})" for r, k, _ in input_bound) or "—",
                     "not fed: contention": ", ".join(f"{k} ({r:,.0f})" for r, k, _ in contention) or "—"})
        sentence = (f"- `{pipeline}` keeps models up to {top:,.0f} img/s fed at ≥ {FED:.0%}" if top else
                    f"- `{pipeline}` keeps none of the measured models fed at ≥ {FED:.0%}")
        if input_bound:
            sentence += (f"; from {input_bound[0][0]:,.0f} img/s up its loader-only rate ({loader:,.0f}) "
                         "is the bottleneck")
        if contention:
            sentence += ("; " + ", ".join(f"{k} ({r:,.0f} img/s) reaches only {v:.0%}" for r, k, v in contention)
                         + " although the loader alone is faster: contention, not the input rate")
        sentences.append(sentence + ".")
    return pd.DataFrame(rows), sentences


def roofline(m: pd.DataFrame, path: Path, title: str) -> None:
    loaders = m[m["mode"] == "loader"].set_index("pipeline").img_per_s
    models = m[m["mode"] == "model"].set_index("model").img_per_s
    fig, ax = plt.subplots(figsize=(7, 5), dpi=100)
    xs = sorted(models.values)
    for i, (pipeline, e2e) in enumerate(m[m["mode"] == "e2e"].groupby("pipeline")):
        e2e = e2e[e2e.model.isin(models.index)]
        pts = sorted((models[r.model], r.img_per_s) for r in e2e.itertuples())
        if not pts:
            continue
        colour = f"C{i}"
        ax.plot(*zip(*pts), "o-", color=colour, label=pipeline)
        if pipeline in loaders:   # the ideal bends where the model outruns the loader
            knee = [loaders[pipeline]] if xs[0] < loaders[pipeline] < xs[-1] else []
            ideal = sorted(xs + knee)
            ax.plot(ideal, [min(x, loaders[pipeline]) for x in ideal], "--", color=colour, alpha=0.6)
    if xs:
        ax.plot(xs, xs, ":", color="grey", label="e2e = model-only")
    ax.set(xscale="log", yscale="log", xlabel="model-only img/s (one point per model)",
           ylabel="end-to-end img/s")
    ax.set_title(title.replace(": ", "\n", 1), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, title="dashed: min(loader-only, model-only)", title_fontsize=7)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


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
                ax.plot(part.bytes_per_image, part.share, marker + style, color=f"C{i}",
                        label=f"{model}, {kind}, {payload}")
            over = line[line.share >= 1]
            top = line.loc[line.share.idxmax()]
            sentences.append(
                f"- {model}, {kind} copies: the copy takes {top.share:.0%} of the model step at "
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
        "model step µs / image": points.step_us.map("{:.2f}".format),
        "copy / step": points.share.map("{:.1%}".format)})[
        ["image_size", "payload", "bytes / image", "copy", "copy µs / image", "model", "model step µs / image", "copy / step"]]
    return [table.to_markdown(index=False), "", *sentences, "", f"![transfer share]({path.name})", ""]


SCALE_KEY = ["run_id", "gpu", "per_gpu_batch", "dtype", "image_size", "step", "mode", "model", "pipeline"]   # never pools runs


def scaling(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Loader-only, model-only and e2e over several GPUs: per SCALE_KEY and (parallel, replicas)
    the job's img/s (all ranks' images over the slowest rank's window), its efficiency against one
    GPU (rate / (replicas x the 1-GPU rate)) and the peak memory of the busiest and least busy GPU;
    one sentence per setting and GPU count."""
    ok = df[(df.status == "ok") & df["mode"].isin(["loader", "model", "e2e"])].copy()
    ok["replicas"] = ok.gpus.where(ok.parallel == "dp", ok.world_size).astype(int)
    ok["per_gpu_batch"] = (ok.batch_size // ok.replicas).where(ok.parallel == "dp", ok.batch_size)
    ok["pipeline"] = ok.pipeline.replace("none", "(model-only)")
    ok["gpu"] = ok.gpu.fillna("CPU")
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
    cols = ["gpu", "driver", "cuda", "torch", "torchvision", "dali", "cpu_count", "git_commit", "run_id"]
    lines = []
    for col in cols:
        values = sorted({str(v) for v in df[col].dropna()}) if col in df else []
        lines.append(f"- {col}: {', '.join(values) if values else '—'}")
    return "\n".join(lines)


def write(paths: list[str | Path], out: Path) -> Path:
    """Write out/REPORT.md and its plots from the CSVs; returns the report's path."""
    df = load(paths)
    if df.empty:
        raise ValueError("no rows in " + ", ".join(map(str, paths)))
    out.mkdir(parents=True, exist_ok=True)
    parts = ["# Report", "", "Sources: " + ", ".join(f"`{Path(p).as_posix()}`" for p in paths), "",
             "## Environment", "", environment(df), "", TIMERS, ""]
    single = per_step(df[(df.world_size == 1) & (df.parallel == "none")])   # one process, one GPU
    known = ["", *dict.fromkeys(["eager", "graph", "compile", *sorted(set(single.step))])]
    single["step"] = pd.Categorical(single.step, categories=known, ordered=True)   # sections: eager, graph, compile
    for i, (setting, group) in enumerate(single.groupby(SETTING, sort=True, dropna=False, observed=True), start=1):
        run, gpu, bs, dtype, workers, size, step = setting
        name = (f"{run}: {gpu if isinstance(gpu, str) else 'CPU'}, {size} px, batch {bs}, {dtype}, "
                f"{workers} workers" + (f", {step} step" if step else ""))
        slug = f"{i}-{size}px-bs{bs}-{dtype}-w{workers}" + (f"-{step}" if step else "")
        group = label_variants(group)
        parts += [f"## {name}", ""]
        first = group[(group["mode"] == "model") & (group.status == "ok")].groupby("model").compile_s.median().dropna()
        if len(first):
            parts += ["First training step alone (`compile_s`, before the warm-up: " + (
                "side-stream warm-up, compilation and capture" if step in ("graph", "compile") else "cuDNN autotuning")
                + "), model-only median: " + ", ".join(f"{k} {v:.1f} s" for k, v in first.items()) + ".", ""]
        m = medians(group)   # aggregated once per setting, read by every table and plot
        table, sentences = pipeline_table(m)
        if not table.empty:
            parts += ["### Per pipeline", "", table.to_markdown(index=False), "", *sentences, ""]
        stages = stage_table(m)
        if not stages.empty:
            parts += ["### Stage ceilings (img/s)", "", stages.to_markdown(index=False), ""]
        cross, cross_sentences = crossover(m)
        if not cross.empty:
            plot = out / f"roofline-{slug}.png"
            roofline(m, plot, name)
            parts += ["### Crossover", "", cross.to_markdown(index=False), "", *cross_sentences, "",
                      f"![roofline]({plot.name})", ""]
        failed = group[~group.status.isin(["ok", "not-applicable"])].drop_duplicates(
            ["pipeline", "mode", "stage", "model", "status", "error"])
        if not failed.empty:
            parts += ["### Not measured", ""] + [
                f"- `{r.pipeline}` {r.stage or r.mode} {r.model}: {r.status} — {r.error}"
                for r in failed.itertuples()] + [""]
    for i, (setting, group) in enumerate(single.groupby([*RUN, "step"], sort=True, dropna=False, observed=True), start=1):
        points = transfer_points(group)
        if not points.empty:
            run, gpu, bs, dtype, workers, step = setting
            name = (f"{run}: {gpu if isinstance(gpu, str) else 'CPU'}, batch {bs}, {dtype}, {workers} workers"
                    + (f", {step} step" if step else ""))
            plot = out / (f"transfer-{i}-bs{bs}-{dtype}-w{workers}" + (f"-{step}" if step else "") + ".png")
            parts += [f"## Host transfer vs bytes per image — {name}", "", *transfer_section(points, plot, name)]
    table, sentences = scaling(df)
    if not table.empty:
        parts += ["## Several GPUs: scaling", "", SCALING, "", table.to_markdown(index=False), "", *sentences, ""]
    report = out / "REPORT.md"
    report.write_text("\n".join(parts))
    return report
