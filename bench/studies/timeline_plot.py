"""timeline.png for `bench.studies.timeline`, apart from the profiling and the trace's reading it draws from:
WINDOW_STEPS consecutive steps per configuration, one panel each, model-only on top, a lane per
CUDA stream (the training stream first, then the busiest, at most MAX_LANES), the step's own work,
other work on the training stream, kernels and copies on the other streams in their own colours.
"""
from __future__ import annotations

from pathlib import Path

WINDOW_STEPS = 3          # consecutive steps per configuration in the picture
MAX_LANES = 8             # streams drawn per configuration (the training stream first, then the busiest)


def shown_steps(work: list, stream: int, rows: list[dict]) -> list[float]:
    """The starts (µs, the trace's clock) of the WINDOW_STEPS steps drawn, from the second recorded
    step where there is one, and the end of the last one's period."""
    origin = min(w.start for w in work if w.step == 0 and w.stream == stream)
    chosen = rows[min(1, len(rows) - 1):][:WINDOW_STEPS]
    last = chosen[-1]
    return [origin + r["start_ms"] * 1e3 for r in chosen] + [origin + (last["start_ms"] + last["period_ms"]) * 1e3]


def draw(traces: dict[str, tuple[list, int, list[dict]]], path: Path) -> None:
    """WINDOW_STEPS consecutive steps per configuration, one panel each (`traces`: label -> its
    `bench.studies.timeline.Work` pieces, its training stream, its step rows), the steps' starts dotted."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    lanes_of = {label: min(MAX_LANES, len({w.stream for w in t[0]})) for label, t in traces.items()}
    fig, axes = plt.subplots(len(traces), 1, sharex=True, squeeze=False, height_ratios=list(lanes_of.values()),
                             figsize=(11, 1.2 + 0.5 * sum(lanes_of.values()) + 0.4 * len(traces)))
    colours = {"step": "tab:blue", "train-other": "tab:cyan", "kernel": "tab:orange", "copy": "tab:green"}
    width = 0.0
    for ax, (label, (work, stream, rows)) in zip(axes[:, 0], traces.items()):
        starts = shown_steps(work, stream, rows)
        low, high = starts[0], starts[-1]
        width = max(width, (high - low) / 1e3)
        shown = [w for w in work if w.end > low and w.start < high]
        busiest = sorted({w.stream for w in shown} - {stream},
                         key=lambda s: -sum(w.dur for w in shown if w.stream == s))
        lanes = [stream, *busiest[:MAX_LANES - 1]]
        for y, lane in enumerate(lanes):
            for w in (w for w in shown if w.stream == lane):
                kind = ("step" if w.step is not None else "train-other") if lane == stream else \
                    "copy" if w.copy else "kernel"
                ax.broken_barh([((w.start - low) / 1e3, w.dur / 1e3)], (-y - 0.4, 0.8), facecolors=colours[kind])
        for start in starts:
            ax.axvline((start - low) / 1e3, color="grey", linestyle=":", linewidth=0.8)
        ax.set_yticks([-y for y in range(len(lanes))],
                      [f"training {lane}" if lane == stream else f"stream {lane}" for lane in lanes], fontsize=8)
        more = len(busiest) - (MAX_LANES - 1)
        ax.set_title(label + (f" ({more} quieter streams not drawn)" if more > 0 else ""), fontsize=9, loc="left")
    axes[-1, 0].set_xlim(0, width)
    handles = [matplotlib.patches.Patch(color=c, label=text) for c, text in zip(
        colours.values(), ("the step's work", "other work on the training stream", "kernels, memsets", "copies"))]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8)
    axes[-1, 0].set_xlabel(f"ms from a step's start ({WINDOW_STEPS} consecutive steps, their starts dotted)")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
