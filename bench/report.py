"""Turn result CSVs into REPORT.md plus PNG plots, reproducibly (same CSVs -> same bytes).

For each setting (GPU, batch size, dtype, workers) the report gives, per pipeline: the loader-only
ceiling, model-only ceiling per model, end-to-end rate, stall fraction (share of the e2e window
spent blocked waiting for the next batch) and a verdict; a crossover table (the fastest model each
pipeline keeps fed at >= 95% of its model-only rate); and a roofline plot (x = model-only img/s,
y = e2e img/s, one line per pipeline, the ideal min(loader, model) dashed). Every sentence is
generated from the numbers. Rates are medians over repeats with [min-max].
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

FED = 0.95   # e2e / model-only at or above this: the pipeline keeps the model fed
SETTING = ["run_id", "gpu", "batch_size", "dtype", "num_workers"]   # never pools across runs
# Options that make two rows of the same pipeline different configurations: named when they vary.
VARIANT = ["encoding", "augment", "channels_last", "pin_memory", "non_blocking", "prefetch_depth",
           "dali_reader", "dali_threads", "dali_queue_depth", "dali_hw_decoder_load"]
TIMERS = """\
What each timer includes (see `bench/harness.py`): every window starts and ends with a device
synchronize and covers exactly its steps; warm-up steps and pipeline construction (including a
resident upload, `upload_s`) are outside. **loader**: iterate the pipeline, one tiny kernel per
batch reading it, no model. **model**: the training step on one batch already on the device.
**e2e**: the training step on the pipeline's batches. **stall**: host time blocked in `next()` over
the window time."""


def load(paths: list[str | Path]) -> pd.DataFrame:
    frames = [pd.read_csv(p) for p in paths]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


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
    """Per (mode, pipeline, model): median img/s with its min (low) and max (high), median stall."""
    ok = df[df.status == "ok"]
    return ok.groupby(["mode", "pipeline", "model"], sort=True).agg(
        img_per_s=("img_per_s", "median"), low=("img_per_s", "min"), high=("img_per_s", "max"),
        stall=("wait_frac", "median")).reset_index()


def pipeline_table(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    m = medians(df)
    loaders = m[m["mode"] == "loader"].set_index("pipeline")
    models = m[m["mode"] == "model"].set_index("model")
    rows, sentences = [], []
    for e in m[m["mode"] == "e2e"].itertuples():
        if e.pipeline not in loaders.index or e.model not in models.index:
            continue
        loader, model = loaders.loc[e.pipeline], models.loc[e.model]
        label, why = verdict(loader.img_per_s, model.img_per_s, e.img_per_s)
        rows.append({"pipeline": e.pipeline, "model": e.model, "loader-only img/s": rate(loader),
                     "model-only img/s": rate(model), "e2e img/s": rate(e),
                     "e2e / model": f"{e.img_per_s / model.img_per_s:.0%}",
                     "stall": f"{e.stall:.0%}", "verdict": label})
        sentences.append(f"- `{e.pipeline}` with {e.model}: **{label}** — {why}.")
    return pd.DataFrame(rows), sentences


def crossover(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Per pipeline: the largest model-only rate it keeps fed at >= FED. A model it does not keep
    fed is input-starved where the loader-only rate is below the model-only rate, else contention."""
    m = medians(df)
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


def roofline(df: pd.DataFrame, path: Path, title: str) -> None:
    m = medians(df)
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
    for i, (setting, group) in enumerate(df.groupby(SETTING, sort=True, dropna=False), start=1):
        run, gpu, bs, dtype, workers = setting
        name = f"{run}: {gpu if isinstance(gpu, str) else 'CPU'}, batch {bs}, {dtype}, {workers} workers"
        slug = f"{i}-bs{bs}-{dtype}-w{workers}"
        group = label_variants(group)
        parts += [f"## {name}", ""]
        table, sentences = pipeline_table(group)
        if not table.empty:
            parts += ["### Per pipeline", "", table.to_markdown(index=False), "", *sentences, ""]
        cross, cross_sentences = crossover(group)
        if not cross.empty:
            plot = out / f"roofline-{slug}.png"
            roofline(group, plot, name)
            parts += ["### Crossover", "", cross.to_markdown(index=False), "", *cross_sentences, "",
                      f"![roofline]({plot.name})", ""]
        failed = group[group.status != "ok"].drop_duplicates(["pipeline", "mode", "model", "status", "error"])
        if not failed.empty:
            parts += ["### Not measured", ""] + [
                f"- `{r.pipeline}` {r.mode} {r.model}: {r.status} — {r.error}" for r in failed.itertuples()] + [""]
    report = out / "REPORT.md"
    report.write_text("\n".join(parts))
    return report
