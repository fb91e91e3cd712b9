"""`pipebench stability`: many epochs per pipeline, memory recorded after each, to catch leaks.

Each pipeline runs loader-only (every batch read on the device, no model) for many epochs, each
epoch's shuffle selected first, as training would. After every epoch one row records its img/s,
the resident memory of this process and of every process it started (DataLoader workers, the
forkserver that starts them, DALI's parallel sources), and the GPU memory PyTorch allocated and
reserved. A pipeline that leaks per epoch (a stream or pinned buffer created per epoch and kept,
as timm's PrefetchLoader once did) shows a line that climbs; a flat line after the first epochs is
the pass. Stopped early (Ctrl-C), it writes the epochs measured and says where it stopped.

Rows come from `measure` as each epoch ends (`harness.Touch` reads each batch; the device is
synchronized around every epoch), so an interrupted run keeps every epoch it finished. Each epoch's
iterator starts, up to its first batch, with Ctrl-C held back (`interrupts.deferred`), as the harness
starts its own: a stop never leaves a DataLoader's workers half started. So is each later batch's
fetch: a stop raised while this process took a batch's tensors from a worker (a file descriptor
passed over a connection a thread of the worker serves) cut that exchange, and a traceback (one kept
whole: that thread's `BrokenPipeError`) came before the stop message in 7 of 15 stops 12 s into a run
(results/2026-12-02-tests/ctrl-c-stability-mid-before.txt). A fetch that never returns still stops on
one Ctrl-C, after `interrupts.HOLD_S`; a second Ctrl-C stops it at once.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Iterator

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

import pipelines  # noqa: E402
from pipelines.config import PipelineConfig  # noqa: E402
from pipelines.contract import resolve_device  # noqa: E402

from ..measuring import harness, interrupts, machine  # noqa: E402

END = object()   # an epoch's iterator is exhausted
SETTLE = 2       # growth is measured from this epoch on (the first epochs warm caches and start workers)
MIN_EPOCHS = SETTLE + 2   # two epochs from SETTLE on: the fewest that can show a growth
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_mb(pid: int) -> float:
    """Resident memory of one process (Linux /proc), 0 if it is gone."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 2**20
    except (FileNotFoundError, IndexError, ValueError):
        return 0.0


def measure(name: str, config: PipelineConfig, epochs: int) -> Iterator[dict]:
    """One row per epoch of `name` loader-only, as each epoch ends: img/s, host and GPU memory."""
    device = resolve_device(config.device)
    cuda = device.type == "cuda"
    with pipelines.build(name, config) as pipeline:
        if not len(pipeline):   # every batch dropped: epochs of 0 images would read as a flat pass
            raise ValueError(f"batch size {config.batch_size} is larger than the {len(pipeline.data)} samples per "
                             "epoch (the last, partial batch is dropped): no epoch would read an image; pass a "
                             "smaller --batch-size or a larger --max-samples")
        touch = harness.Touch(device)
        for epoch in range(epochs):
            pipeline.set_epoch(epoch)
            harness.sync(device)
            start, images = time.perf_counter(), 0
            with interrupts.deferred():   # the epoch's iterator whole, up to its first batch, before a stop
                batches = iter(pipeline)
                batch = next(batches, END)
            while batch is not END:
                x, y = batch
                touch(x, y)
                images += len(y)
                with interrupts.deferred():   # each batch whole, before a stop (module docstring)
                    batch = next(batches, END)
            harness.sync(device)
            seconds = time.perf_counter() - start
            kids = machine.descendants(os.getpid())
            yield {"pipeline": name, "epoch": epoch, "images": images, "seconds": seconds,
                   "img_per_s": images / seconds, "host_rss_mb": rss_mb(os.getpid()),
                   "children_rss_mb": sum(rss_mb(k) for k in kids), "children": len(kids),
                   "gpu_allocated_mb": torch.cuda.memory_allocated(device) / 2**20 if cuda else float("nan"),
                   "gpu_reserved_mb": torch.cuda.memory_reserved(device) / 2**20 if cuda else float("nan")}
    machine.release(device)


def growth(df: pd.DataFrame, column: str, settle: int = SETTLE) -> pd.Series:
    """Per pipeline: `column` at the last epoch minus at epoch `settle` (the first epochs warm caches)."""
    def change(rows: pd.DataFrame) -> float:
        rows = rows.sort_values("epoch")
        later = rows[rows.epoch >= min(settle, rows.epoch.max())]
        return float(later[column].iloc[-1] - later[column].iloc[0])
    return df.groupby("pipeline").apply(change, include_groups=False)


def plot(df: pd.DataFrame, path: Path, title: str) -> None:
    columns = ["host_rss_mb", "children_rss_mb", "gpu_reserved_mb", "img_per_s"]
    fig, axes = plt.subplots(1, len(columns), figsize=(16, 4), dpi=100)
    for ax, column in zip(axes, columns):
        for i, (name, rows) in enumerate(df.groupby("pipeline")):
            ax.plot(rows.epoch, rows[column], "o-", ms=3, color=f"C{i}", label=name)
        ax.set(xlabel="epoch", title=column.replace("_", " "))
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def write_report(df: pd.DataFrame, out: Path, title: str, interrupted: str | None, skipped: dict[str, str]) -> Path:
    """OUT/stability.png and OUT/STABILITY.md from the epochs measured (`df`, as stability.csv holds
    them); `interrupted`: how the run was stopped, if it was; `skipped`: pipeline -> why it did not run."""
    plot(df, out / "stability.png", title)
    table = pd.DataFrame({c: growth(df, c).map(lambda v: "—" if pd.isna(v) else f"{v:+,.1f}")
                          for c in ("host_rss_mb", "children_rss_mb", "gpu_allocated_mb", "gpu_reserved_mb")})
    not_run = [f"- `{name}`: {why}" for name, why in skipped.items()]
    path = out / "STABILITY.md"
    path.write_text("\n".join([
        "# Stability: memory over epochs", "", f"{title}; generated by `pipebench stability` (COMMAND.txt) from "
        f"stability.csv. Growth in MB from epoch {SETTLE} to the last epoch (the first epochs warm caches and start "
        "workers); flat lines are the pass.", "", *([f"**Interrupted**: {interrupted}.", ""] if interrupted else []),
        table.reset_index().to_markdown(index=False), "",
        "![memory per epoch](stability.png)", "", *(["Not run:", *not_run, ""] if not_run else [])]))
    return path
