"""Tidy result rows: one row per run x repeat, config fields as columns, environment included.

Each row is appended whole (one line, one `write` on an append-only descriptor, then `fsync`), so
a killed run or a full disk leaves at most a torn last line: `read_rows` drops it with a warning and
the next writer moves it aside to `results.csv.torn` before appending. Errors are kept on one line. A configuration that fails becomes a row with `status="error"` and
the exception in `error`; one that cannot run here (a missing optional dependency) becomes
`status="skipped"` with the reason; a stage the pipeline does not have becomes `status="not-applicable"`.
"""
from __future__ import annotations

import datetime as dt
import importlib.metadata
import io
import math
import os
import platform
import re
import socket
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from . import machine
from .harness import RunSpec, Window

CONFIG_COLUMNS = ["pipeline", "mode", "stage", "model", "image_size", "batch_size", "cpus", "num_workers", "dtype",
                  "channels_last", "pin_memory", "non_blocking", "prefetch_depth", "prefetch_augment", "worker_start",
                  "encoding", "augment", "split", "last_batch", "max_samples", "seed", "world_size", "rank", "parallel",
                  "step", "busy_levels", "payload", "train_epochs", "dali_reader", "dali_threads", "dali_queue_depth",
                  "dali_hw_decoder_load", "dali_decoder", "dali_batch_multiple", "source", "data_seed",
                  "requested_steps", "min_window_s", "warmup"]
MEASURE_COLUMNS = ["process", "repeat", "busy_ms", "steps", "images", "epochs", "seconds", "img_per_s", "world_img_per_s",
                   "steady_img_per_s", "wait_ms_p50", "wait_ms_p95", "wait_frac", "restart_ms", "step_ms_p50",
                   "step_ms_p95", "cpu_s", "cpu_s_per_kimg", "cpu_set", "sm_mhz", "mem_mhz", "pcie", "test_accuracy",
                   "peak_gpu_mem_mb", "peak_gpu_mem_mb_others", "setup_s", "upload_s", "compile_s"]
# What must match for a sweep to count an earlier row as this environment's (not the git commit).
SAME_ENVIRONMENT = ["gpu", "driver", "cuda", "torch", "torchvision", "dali", "cpu_count", "hostname"]
ENV_COLUMNS = ["gpu", "driver", "cuda", "torch", "torchvision", "dali", "peers", "python", "cpu_count",
               "cpu_model", "host_calibration_ms", "boot_id", "platform", "hostname", "git_commit"]
COLUMNS = (["run_id", "timestamp", *CONFIG_COLUMNS, "device", "gpus", "data_source", "samples",
            "steps_per_epoch", "copy", "batch_bytes", *MEASURE_COLUMNS, "status", "error", *ENV_COLUMNS])


def _version(package: str) -> str:
    for name in (package, f"{package}-cuda120", f"{package}-cuda130"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    try:   # imported from a path rather than installed (as on the GPU machine)
        return __import__(package.replace("nvidia-", "nvidia.")).__version__
    except Exception:
        return ""


PEER_PACKAGES = ["timm", "spdl-io", "torchcodec"]   # what the peer pipelines import


def peer_versions() -> str:
    """The installed peer packages and their versions, e.g. "timm 1.0.31, torchcodec 0.17.0"."""
    found = []
    for package in PEER_PACKAGES:
        try:
            found.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def _run(*cmd: str) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).resolve().parent).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def git_commit() -> str:
    """$PIPEBENCH_GIT_COMMIT if set (a copied tree whose .git, if any, is not its source), else
    HEAD of the checkout with '-dirty' if it has changes, else 'unknown'."""
    if os.environ.get("PIPEBENCH_GIT_COMMIT"):
        return os.environ["PIPEBENCH_GIT_COMMIT"]
    commit = _run("git", "rev-parse", "--short=12", "HEAD")
    if not commit:
        return "unknown"
    return commit + ("-dirty" if _run("git", "status", "--porcelain", "--untracked-files=no") else "")


def environment() -> dict[str, object]:
    cuda = torch.cuda.is_available()
    driver = _run("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader") if cuda else ""
    return {"gpu": torch.cuda.get_device_name() if cuda else "", "driver": driver.splitlines()[0] if driver else "",
            "cuda": torch.version.cuda or "", "torch": torch.__version__,
            "torchvision": _version("torchvision"), "dali": _version("nvidia-dali"), "peers": peer_versions(),
            "python": platform.python_version(), "cpu_count": os.cpu_count(), **machine.host_identity(),
            "platform": platform.platform(), "hostname": socket.gethostname(), "git_commit": git_commit()}


def _config_fields(spec: RunSpec) -> dict[str, object]:
    c = spec.config
    fields = {name: getattr(c, name) for name in CONFIG_COLUMNS if hasattr(c, name)}
    fields.update(pipeline=spec.pipeline, mode=spec.mode, stage=spec.stage, model=spec.model, warmup=spec.warmup,
                  parallel=spec.parallel, step=spec.step if spec.mode in ("model", "e2e", "train") else "",
                  requested_steps=spec.steps, min_window_s=spec.min_seconds, cpus=spec.cpus,
                  busy_levels=",".join(f"{b:g}" for b in spec.busy_ms) if spec.mode == "loader" else "",
                  payload=spec.payload, train_epochs=spec.epochs or None)
    return fields


def config_key(spec: RunSpec) -> tuple[str, ...]:
    """A configuration's identity: its config columns, as text (as a CSV holds them: None empty)."""
    fields = _config_fields(spec)
    return tuple("" if fields[c] is None else str(fields[c]) for c in CONFIG_COLUMNS)


def read_rows(path: str | Path, **options) -> pd.DataFrame:
    """A results CSV through pandas; a torn last line (no newline: the writer was killed or the
    disk filled mid-row) is left out with a warning instead of failing the whole file."""
    data = Path(path).read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        warnings.warn(f"{path}: its last line is torn ({len(data) - cut} bytes without a newline); left out",
                      stacklevel=2)
        data = data[:cut]
    return pd.read_csv(io.BytesIO(data), **options) if data.strip() else pd.DataFrame()


def completed(path: str | Path, env: dict[str, object]) -> dict[tuple[str, ...], float]:
    """config_key -> number of ok rows already in the CSV for this environment (infinite for a
    stage found not applicable: nothing to repeat)."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return {}
    df = read_rows(path, dtype=str, keep_default_na=False).reindex(columns=COLUMNS, fill_value="")
    df["parallel"] = df.parallel.replace("", "none")   # rows from before these columns existed
    trained = df["mode"].isin(["model", "e2e"]) & (df.step == "")
    df.loc[trained, "step"] = "eager"
    mine = df[(df[SAME_ENVIRONMENT] == pd.Series({k: str(env[k]) for k in SAME_ENVIRONMENT})).all(axis=1)]
    done = {tuple(key): n for key, n in mine[mine.status == "ok"].groupby(CONFIG_COLUMNS).size().items()}
    done.update({tuple(key): math.inf for key in mine[mine.status == "not-applicable"].groupby(CONFIG_COLUMNS).groups})
    return done


def measured_row(spec: RunSpec, facts: dict, repeat: int, w: Window,
                 world_img_per_s: float | None = None) -> dict[str, object]:
    """One window of one rank. `world_img_per_s`: the whole job's rate (all ranks' images over the
    slowest rank's seconds); by default this process's own."""
    samples = facts.get("samples", math.nan)
    return {**_config_fields(spec), **facts, "process": spec.process, "repeat": repeat, "busy_ms": w.busy_ms,
            "steps": len(w.step_ms), "images": w.images, "epochs": w.images / samples if samples else math.nan,
            "seconds": w.seconds, "img_per_s": w.images / w.seconds,
            "world_img_per_s": w.images / w.seconds if world_img_per_s is None else world_img_per_s,
            "steady_img_per_s": w.steady_img_per_s,
            "wait_ms_p50": float(np.percentile(w.wait_ms, 50)), "wait_ms_p95": float(np.percentile(w.wait_ms, 95)),
            "wait_frac": float(w.wait_ms.sum() / 1e3 / w.seconds),
            "restart_ms": float(np.median(w.restart_ms)) if len(w.restart_ms) else math.nan,
            "step_ms_p50": float(np.percentile(w.step_ms, 50)), "step_ms_p95": float(np.percentile(w.step_ms, 95)),
            "cpu_s": w.cpu_s, "cpu_s_per_kimg": 1e3 * w.cpu_s / w.images, **w.gpu, "test_accuracy": w.test_accuracy,
            "peak_gpu_mem_mb": w.peak_gpu_mem_mb, "peak_gpu_mem_mb_others": w.peak_gpu_mem_mb_others,
            "status": "ok", "error": ""}


def failed_row(spec: RunSpec, status: str, error: str, facts: dict | None = None) -> dict[str, object]:
    return {**_config_fields(spec), **(facts or {}), "status": status, "error": one_line(error)}


def one_line(error: str) -> str:
    """An error message as one CSV field: its lines joined by " | ". An exception re-raised from a
    DataLoader worker carries the worker's whole traceback in its message ("Caught X in DataLoader
    worker process N." / "Original Traceback (most recent call last):" / ... / the error itself):
    it keeps only its last line, the error, and where it was raised, e.g. "ValueError: sample 3 of
    ... (in DataLoader worker process 0)"; unless $PIPEBENCH_DEBUG is set (not empty), which
    keeps every line."""
    lines = error.strip().splitlines()
    if len(lines) > 2 and lines[1].startswith("Original Traceback") and not os.environ.get("PIPEBENCH_DEBUG"):
        caught = re.search(r"Caught \w+ (in .+?)\.?$", lines[0])
        if caught:
            lines = [f"{lines[-1].strip()} ({caught[1]})"]
    return " | ".join(lines)


class CsvWriter:
    """Appends rows to one CSV with a fixed column order, each row whole and synced to disk; every
    row carries run id and environment."""

    def __init__(self, path: str | Path, env: dict[str, object], run_id: str, columns: list[str] = COLUMNS):
        self.path = Path(path)
        self.columns = columns
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and self.path.stat().st_size:
            data = self.path.read_bytes()
            if not data.endswith(b"\n"):   # a torn last row: keep it apart, append after the last whole one
                cut = data.rfind(b"\n") + 1
                with open(self.path.with_name(self.path.name + ".torn"), "ab") as torn:
                    torn.write(data[cut:] + b"\n")
                os.truncate(self.path, cut)
                warnings.warn(f"{self.path}: a torn last line ({len(data) - cut} bytes) was moved to "
                              f"{self.path.name}.torn", stacklevel=2)
            old = read_rows(self.path, dtype=str, keep_default_na=False)
            if len(old.columns) and list(old.columns) != list(columns):   # an older file: move it to these columns
                extra = [c for c in old.columns if c not in columns]
                if extra:
                    raise ValueError(f"{self.path}: columns {extra} are not written by this version")
                old.reindex(columns=columns, fill_value="").to_csv(self.path, index=False)
        self.stamp = {"run_id": run_id, **env}

    def write(self, row: dict[str, object]) -> None:
        row = {**row, **self.stamp, "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
        frame = pd.DataFrame([row]).reindex(columns=self.columns)
        header = not self.path.exists() or self.path.stat().st_size == 0
        text = frame.to_csv(header=header, index=False, lineterminator="\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, text)
            os.fsync(fd)
        finally:
            os.close(fd)
