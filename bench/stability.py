"""`pipebench stability`: many epochs per pipeline, memory recorded after each, to catch leaks.

Each pipeline is iterated loader-only (`harness.Touch` per batch) for `epochs` epochs, `set_epoch`
before each, as training would. After every epoch (device synchronized) one row records the epoch's
img/s, the host resident memory of this process and of its child processes (DataLoader workers,
DALI's parallel sources), and the GPU memory allocated and reserved by PyTorch's caching allocator.
A pipeline that leaks per epoch (a stream or pinned buffer created per epoch and kept, as timm's
PrefetchLoader once did) shows a line that climbs; a flat line after the first epochs is the pass.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

import pipelines  # noqa: E402
from pipelines.config import PipelineConfig  # noqa: E402

from . import harness  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_mb(pid: int) -> float:
    """Resident memory of one process (Linux /proc), 0 if it is gone."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 2**20
    except (FileNotFoundError, IndexError, ValueError):
        return 0.0


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue
    return found


def measure(name: str, config: PipelineConfig, epochs: int, progress=None) -> list[dict]:
    """One row per epoch of `name` loader-only: img/s, host and GPU memory after the epoch."""
    device = pipelines.base.resolve_device(config.device)
    cuda = device.type == "cuda"
    rows = []
    with pipelines.build(name, config) as pipeline:
        touch = harness.Touch(device)
        for epoch in range(epochs):
            pipeline.set_epoch(epoch)
            harness.sync(device)
            start, images = time.perf_counter(), 0
            for x, y in pipeline:
                touch(x, y)
                images += len(y)
            harness.sync(device)
            seconds = time.perf_counter() - start
            kids = children(os.getpid())
            rows.append({"pipeline": name, "epoch": epoch, "images": images, "seconds": seconds,
                         "img_per_s": images / seconds, "host_rss_mb": rss_mb(os.getpid()),
                         "children_rss_mb": sum(rss_mb(k) for k in kids), "children": len(kids),
                         "gpu_allocated_mb": torch.cuda.memory_allocated(device) / 2**20 if cuda else float("nan"),
                         "gpu_reserved_mb": torch.cuda.memory_reserved(device) / 2**20 if cuda else float("nan")})
            if progress is not None:
                progress.update(1)
    harness.release(device)
    return rows


def growth(df: pd.DataFrame, column: str, settle: int = 2) -> pd.Series:
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
