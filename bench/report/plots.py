"""The report's plots: delivered rate against CPU cores, the headspace curves (rate against the
busy step's time), and the share of model-only e2e keeps against the model's speed, per CPU budget
(`share_plot`). Same rows, same bytes (no timestamps in the files).
"""
from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.lines  # noqa: E402
import matplotlib.ticker  # noqa: E402
import pandas as pd  # noqa: E402
from PIL import Image  # noqa: E402

from .. import results  # noqa: E402
from .analysis import step_alone  # noqa: E402
from .verdicts import FED, NO_VERDICT  # noqa: E402
from .formatting import per_gpu  # noqa: E402

def colour(i: int):
    """The i-th pipeline's colour: 20 apart before one repeats (matplotlib's default cycle has 10),
    the strong shades first."""
    return plt.get_cmap("tab20")((2 * i) % 20 + (i // 10) % 2)


def plain_rates(ax) -> None:
    """Rates on a log axis as plain numbers (12,000, not 1.2×10⁴), the minor ticks unlabelled."""
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def small_png(data: bytes) -> bytes:
    """A PNG as one of at most 256 colours, undithered (a plot's flat colours stay flat), the same
    bytes from the same image; one already so is returned as it is."""
    image = Image.open(io.BytesIO(data))
    if image.mode == "P":
        return data
    out = io.BytesIO()
    image.convert("RGB").quantize(256, dither=Image.Dither.NONE).save(out, "PNG", optimize=True)
    return out.getvalue()


def save_plot(fig, path: Path) -> None:
    """A figure as PNG of at most 256 colours (`small_png`), the same bytes from the same data,
    written whole or not at all."""
    data = io.BytesIO()
    fig.savefig(data, format="png", metadata={"Software": None}, bbox_inches="tight")   # the legend beside it too
    plt.close(fig)
    results.replace_file(path, small_png(data.getvalue()))


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
    ax.set(xscale="log", yscale="log", xlabel=f"CPU cores{per_gpu(cap.device)}", ylabel="loader ceiling, img/s")
    ax.set_xticks(sorted(cap.cpus.unique()), [f"{int(k)}" for k in sorted(cap.cpus.unique())])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())   # cores as plain numbers, no "3×10⁰"
    plain_rates(ax)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))   # beside the data, never over it
    fig.tight_layout()
    save_plot(fig, path)
    return True


def headspace_plot(loader: pd.DataFrame, batch: int, models: pd.DataFrame, path: Path, title: str) -> None:
    """Delivered img/s against the synthetic step time per batch, one line per pipeline; the line a
    pipeline that is never the limit would follow (batch / step time); models' step times."""
    busy = sorted(b for b in loader.busy_ms.unique() if b > 0)
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    if busy:
        xs = [busy[0] / 1.5, busy[-1] * 1.5]
        ax.plot(xs, [batch / (x / 1e3) for x in xs], color="grey", lw=3, alpha=0.3, label="the step is the limit")
        alone = step_alone(loader)
        if len(alone):
            ax.plot(alone.index, alone.img_per_s, "x", color="black", ms=6, label="the step beside a null pipeline")
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


def share_plot(s: pd.DataFrame, path: Path, title: str) -> bool:
    """Each pipeline's e2e median as a share of model-only (bars: its lowest and highest process)
    against the model's speed alone (model-only img/s, log x), one line per pipeline, one panel per
    CPU budget, FED marked; open markers where the cell got no verdict (thin, or e2e above
    model-only). `s`: one setting's situations, loss never read. False (nothing drawn) unless they
    hold at least two model speeds (model and step kind)."""
    if s[["model", "step"]].drop_duplicates().shape[0] < 2:
        return False
    budgets = sorted(s.cpus.unique(), reverse=True)
    fig, axes = plt.subplots(1, len(budgets), figsize=(4.5 * len(budgets), 4.8), dpi=100, sharey=True, squeeze=False)
    names = sorted(s.pipeline.unique())
    for ax, cpus in zip(axes[0], budgets):
        here = s[s.cpus == cpus]
        for i, name in enumerate(names):
            share_line(ax, here[here.pipeline == name].sort_values("model_rate"), colour(i), name)
        ax.axhline(FED, color="black", lw=0.8, linestyle="--")
        ax.annotate(f"fed: {FED:.0%}", (here.model_rate.min(), FED), fontsize=7, va="bottom")
        ax.set(xscale="log", title=f"{int(cpus)} cores")
        speeds = here.drop_duplicates(["model", "step"]).sort_values("model_rate")
        ax.set_xticks(speeds.model_rate, [f"{m} {st}\n{v:,.0f}" for m, st, v in
                                          zip(speeds.model, speeds.step, speeds.model_rate)],
                      rotation=60, ha="right", fontsize=6)   # each model at its speed
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("e2e / model-only")
    axes[0][0].set_ylim(top=max(1.05, axes[0][0].get_ylim()[1]))   # 100 % always in view
    fig.supxlabel("model-only img/s: the model's speed (log scale)", fontsize=9)
    axes[0][0].yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    handles = axes[0][0].get_legend_handles_labels()[0]
    if (~judged(s)).any():
        handles.append(matplotlib.lines.Line2D([], [], marker="o", markerfacecolor="white", markeredgecolor="grey",
                                               linestyle="",
                                               label="open: no verdict (thin, or e2e above model-only)"))
    fig.suptitle(title, fontsize=10)
    axes[0][-1].legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    save_plot(fig, path)
    return True


def share_line(ax, rows: pd.DataFrame, colour_, name: str) -> None:
    """One pipeline's shares in one panel (`share_plot`): a line through its cells, each with its
    range between processes; a cell without a verdict drawn open."""
    if rows.empty:
        return
    low = rows.e2e.map(lambda e: e.lo) / rows.model_rate
    high = rows.e2e.map(lambda e: e.hi) / rows.model_rate
    ax.errorbar(rows.model_rate, rows.share, yerr=[rows.share - low, high - rows.share], fmt="o-", ms=4, capsize=2,
                color=colour_, label=name)
    none = ~judged(rows)
    ax.plot(rows.model_rate[none], rows.share[none], "o", ms=4, markerfacecolor="white", markeredgecolor=colour_,
            zorder=3)


def judged(s: pd.DataFrame) -> pd.Series:
    """Which situations got a verdict (not thin, not e2e above model-only)."""
    return ~s.verdict.isin(NO_VERDICT)
