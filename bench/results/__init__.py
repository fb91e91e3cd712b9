"""Tidy result rows: one row per run x repeat, config fields as columns, environment included.

The rows of one configuration are appended as one block (`CsvWriter.write_block`: one append-only
descriptor, short writes continued, then `fsync`); if that fails (a full disk), the file is cut back
to its size before the block and `WriteFailed` says so in one line: a configuration is in the file
whole or not at all, so a resumed sweep never counts part of one; a file that no block reached is
not left behind empty. Text that is not UTF-8 (a file name's bytes) is written escaped (`\\udcff`).
A killed run leaves at most a torn last line: `read_rows` drops it with a warning and the next
writer moves it aside to `results.csv.torn` before appending. A file from an older version is moved
to the current columns through a new file and `os.replace`, never rewritten in place; a CSV that is
not pipebench's is refused, and so is a damaged one (bytes that are not UTF-8, a row of more or fewer
fields than its header: one line naming the file and line, `cells.records`). A cell a spreadsheet
would read as a formula (`=`, `+`, `-`, `@` first: a run id from the `--out` folder, a model spec) is
written with a `'` before it and read back as it was given (`cells.guard`). Errors are kept on one
line. A window that cannot count (`Window.rejected`: it delivered more than its busy step allows) is a row with `status="rejected"` and the reason. A configuration that fails becomes a row with
`status="error"` and the exception in `error`; one that cannot run here (a missing optional
dependency) becomes `status="skipped"` with the reason; a stage the pipeline does not have becomes
`status="not-applicable"`.

`settings` (this folder) declares the harness's settings once: each one's flag, default, column and
cell membership, from which the command line, these columns and the report's keys are made.
"""
from __future__ import annotations

import contextlib
import csv
import datetime as dt
import importlib.metadata
import io
import math
import os
import platform
import re
import socket
import stat
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import pipelines

from ..measuring import machine
from ..measuring.spec import RunSpec, Window
from . import cells, settings

MEASURE_COLUMNS = ["process", "repeat", "busy_ms", "busy_units", "busy_idle_ms", "busy_null_ms", "busy_step_ms",
                   "busy_stretch", "steps", "images", "epochs", "seconds", "img_per_s", "world_img_per_s",
                   "steady_img_per_s", "wait_ms_p50", "wait_ms_p95", "wait_frac", "next_syncs", "restart_ms",
                   "step_ms_p50", "step_ms_p95", "cpu_s", "cpu_s_per_kimg", "train_cpu_s", "next_cpu_s",
                   "pipeline_cpu_s_per_kimg", "blocking_waits", "cpu_set", "sm_mhz", "mem_mhz", "pcie",
                   "gpu_temp_c", "gpu_power_w", "clock_events", "gpu_jpg_util", "test_accuracy",
                   "peak_gpu_mem_mb", "peak_gpu_mem_mb_others", "setup_s", "upload_s", "first_batch_s", "compile_s", "warmup_s", "warmup_steady",
                   "slot", "queue_capacity", "drain_steps", "drain_s", "ready_at_start"]   # the drain before the window (bench.measuring.drain)
# What must match for a sweep to count an earlier row as done: the same machine (boot), software and commit.
SAME_ENVIRONMENT = ["gpu", "driver", "cuda", "torch", "torchvision", "dali", "cpu_count", "hostname", "boot_id",
                    "git_commit"]
ENV_COLUMNS = ["gpu", "driver", "cuda", "torch", "torchvision", "dali", "peers", "python", "cpu_count",
               "cpu_model", "host_calibration_ms", "boot_id", "platform", "hostname", "git_commit"]
# Columns every pipebench results file has had: a CSV without them is someone else's (refused, untouched).
REQUIRED = ["run_id", "pipeline", "mode", "status"]


def config_columns() -> list[str]:
    """A configuration's columns: the settings' (`bench.results.settings.columns`), then every knob the
    registered pipelines declare (`pipelines.declared_options`), so a new setting or knob is a new column."""
    columns = settings.columns()
    return columns + [name for name in pipelines.declared_options() if name not in columns]


def all_columns() -> list[str]:
    """Every column of a results file, in order."""
    return ["run_id", "timestamp", *config_columns(), "device", "gpus", "data_source", "samples", "steps_per_epoch",
            "copy", "batch_bytes", *MEASURE_COLUMNS, "status", "error", *ENV_COLUMNS]


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


PEER_PACKAGES = ["timm", "spdl-io", "torchcodec", "ffcv"]   # what the peer pipelines import


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
    """What every row records about where it ran; without a GPU `gpu`, `driver` and `cuda` are empty
    (a CUDA build of torch on a machine with no GPU runs no CUDA)."""
    cuda = torch.cuda.is_available()
    driver = _run("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader") if cuda else ""
    return {"gpu": torch.cuda.get_device_name() if cuda else "", "driver": driver.splitlines()[0] if driver else "",
            "cuda": (torch.version.cuda or "") if cuda else "", "torch": torch.__version__,
            "torchvision": _version("torchvision"), "dali": _version("nvidia-dali"), "peers": peer_versions(),
            "python": platform.python_version(), "cpu_count": os.cpu_count(), **machine.host_identity(),
            "platform": platform.platform(), "hostname": socket.gethostname(), "git_commit": git_commit()}


def recorded_knobs(pipeline: str) -> set[str]:
    """The knob columns (`pipelines.declared_options`) a row of `pipeline` fills: those it reads
    (`pipelines.reads`) and `encoding`, which every pipeline reads (its own fixed one where the
    config's is not: `Pipeline.resolve`); none for "none" (model-only, copies). The others stay empty:
    a knob nothing read says nothing about the run (the worker count's default at another budget)."""
    return set() if pipeline == "none" else {*pipelines.reads(pipeline), "encoding"}


def _config_fields(spec: RunSpec) -> dict[str, object]:
    """A configuration's columns: each setting's value (`bench.results.settings.value`), the knobs its
    pipeline reads (`recorded_knobs`; the others empty), the step kind of a configuration that trains
    alone, the busy levels of a loader one alone, `train_epochs` of a train one alone."""
    columns = settings.columns()
    unread = set(config_columns()) - set(columns) - recorded_knobs(spec.pipeline)
    fields = {name: None if name in unread else getattr(spec.config, name) for name in config_columns()
              if name not in columns}
    fields.update({name: settings.value(spec, name) for name in columns})
    fields.update(step=spec.step if spec.mode in ("model", "e2e", "train") else "",
                  busy_levels=",".join(f"{b:g}" for b in spec.busy_levels) if spec.mode == "loader" else "",
                  train_epochs=spec.train_epochs or None)
    return fields


def config_key(spec: RunSpec) -> tuple[str, ...]:
    """A configuration's identity: its config columns, as text (as a CSV holds them: None empty)."""
    fields = _config_fields(spec)
    return tuple("" if fields[c] is None else str(fields[c]) for c in config_columns())


def read_rows(path: str | Path, required: list[str] = REQUIRED, lines: list[int] | None = None, guarded: bool = True,
              **options) -> pd.DataFrame:
    """A results CSV through pandas, its cells as written (`cells.unguard`, unless not `guarded`); a
    torn last line (no newline: the writer was killed mid-row) is left out with a warning instead of
    failing the whole file. A file with no header or without the `required` columns is refused
    (ValueError, one line): it is not pipebench's; so is one that is damaged (bytes that are not UTF-8,
    a row of more or fewer fields than its header: `cells.records`), naming the file and the line.
    `lines` (a list) is given each row's line in the file."""
    data = Path(path).read_bytes()
    torn = len(data) - (data.rfind(b"\n") + 1)
    data = data[:len(data) - torn]
    if not data.strip():
        raise ValueError(f"{path} is empty: not a pipebench results file")
    found = cells.records(path, data, required)   # a damaged file is refused first: its torn line is no news
    if torn:
        warnings.warn(f"{path}: its last line is torn ({torn} bytes without a newline); left out", stacklevel=2)
    try:
        df = pd.read_csv(io.BytesIO(data), **options)
    except pd.errors.ParserError as e:   # a quote never closed
        raise ValueError(f"{path}: a damaged results file ({' '.join(str(e).split())})") from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ValueError(f"{path} is not a pipebench results file (no column {', '.join(missing)})")
    if lines is not None:
        lines[:] = found
    return cells.unguard(df) if guarded and cells.may_be_guarded(data) else df


def _rows(path: Path) -> pd.DataFrame:
    """A results CSV as text, in the current columns (empty if there is none)."""
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=all_columns())
    return read_rows(path, dtype=str, keep_default_na=False).reindex(columns=all_columns(), fill_value="")


def other_commits(path: str | Path, env: dict[str, object]) -> list[str]:
    """The git commits of the ok rows in the CSV that are not this environment's."""
    df = _rows(Path(path))
    return sorted(set(df[df.status == "ok"].git_commit) - {str(env["git_commit"])})


def _blocks(df: pd.DataFrame, env: dict[str, object]) -> tuple[pd.Series, pd.Series]:
    """Per row of a results file (as text): its block, (config_key, process), and whether it is
    this environment's. The rows of every rank of a configuration make one block, keyed as rank 0's."""
    df = df.copy()
    df["rank"] = "0"
    df["parallel"] = df.parallel.replace("", "none")   # rows from before these columns existed
    df["process"] = df.process.replace("", "0")
    df["sync_every"] = df.sync_every.replace("", "0")
    trained = df["mode"].isin(["model", "e2e"]) & (df.step == "")
    df.loc[trained, "step"] = "eager"
    mine = (df[SAME_ENVIRONMENT] == pd.Series({k: str(env[k]) for k in SAME_ENVIRONMENT})).all(axis=1)
    block = pd.Series([(tuple(r[:-1]), int(r[-1])) for r in df[[*config_columns(), "process"]].itertuples(index=False)],
                      index=df.index, dtype=object)
    return block, mine


MEASURED = ["ok", "rejected"]   # a window measured, whether it counts or not: not run again


def completed(path: str | Path, env: dict[str, object]) -> dict[tuple[tuple[str, ...], int], float]:
    """(config_key, process) -> number of windows (ok or rejected rows) already in the CSV for this
    environment, per rank (a block of 2 ranks with one rank's windows written counts half of them;
    infinite for a stage found not applicable: nothing to repeat)."""
    df = _rows(Path(path))
    if df.empty:
        return {}
    block, mine = _blocks(df, env)
    measured = mine & df.status.isin(MEASURED)
    ranks = pd.to_numeric(df.world_size, errors="coerce").fillna(1).clip(lower=1)
    rows = block[measured].value_counts()
    done = (rows / ranks[measured].groupby(block[measured]).max().reindex(rows.index)).to_dict()
    done.update({key: math.inf for key in block[mine & (df.status == "not-applicable")]})
    return done


def drop_blocks(path: str | Path, env: dict[str, object], blocks: set) -> int:
    """Remove this environment's measured rows of `blocks` ((config_key, process) pairs: blocks cut
    short, by a crash in the middle of writing one) from the file, rewritten whole (`replace_file`),
    so that a resumed sweep measures them again instead of adding a second block; the number of rows
    removed."""
    path = Path(path)
    df = _rows(path)
    if df.empty or not blocks:
        return 0
    block, mine = _blocks(df, env)
    drop = mine & df.status.isin(MEASURED) & block.isin(blocks)
    if drop.any():
        replace_file(path, cells.guarded_csv(df[~drop]).encode())
    return int(drop.sum())


def measured_row(spec: RunSpec, facts: dict, repeat: int, w: Window) -> dict[str, object]:
    """One window of one rank; `world_img_per_s` is its own rate until the ranks' windows are
    combined (`bench.running.runner.job_rows`)."""
    samples = facts.get("samples", math.nan)
    return {**_config_fields(spec), **facts, "process": spec.process, "repeat": repeat, "busy_ms": w.busy_ms,
            "busy_units": w.busy_units, "busy_idle_ms": w.busy_idle_ms, "busy_null_ms": w.busy_null_ms,
            "busy_step_ms": w.busy_step_ms,
            "busy_stretch": w.busy_stretch,
            "steps": len(w.step_ms), "images": w.images, "epochs": w.images / samples if samples else math.nan,
            "seconds": w.seconds, "img_per_s": w.images / w.seconds,
            "world_img_per_s": w.images / w.seconds,
            "steady_img_per_s": w.steady_img_per_s,
            "wait_ms_p50": float(np.percentile(w.wait_ms, 50)), "wait_ms_p95": float(np.percentile(w.wait_ms, 95)),
            "wait_frac": float(w.wait_ms.sum() / 1e3 / w.seconds),
            "restart_ms": float(np.median(w.restart_ms)) if len(w.restart_ms) else math.nan,
            "step_ms_p50": float(np.percentile(w.step_ms, 50)), "step_ms_p95": float(np.percentile(w.step_ms, 95)),
            "cpu_s": w.cpu_s, "cpu_s_per_kimg": 1e3 * w.cpu_s / w.images, "train_cpu_s": w.train_cpu_s,
            "next_cpu_s": w.next_cpu_s, "pipeline_cpu_s_per_kimg": 1e3 * pipeline_cpu_s(w) / w.images, **w.gpu,
            "test_accuracy": w.test_accuracy,
            "peak_gpu_mem_mb": w.peak_gpu_mem_mb, "peak_gpu_mem_mb_others": w.peak_gpu_mem_mb_others,
            "drain_steps": w.drain_steps, "drain_s": w.drain_s, "ready_at_start": w.ready_at_start,
            "status": "rejected" if w.rejected else "ok", "error": w.rejected}


def pipeline_cpu_s(w: Window) -> float:
    """The pipeline's CPU seconds in a window (`bench.measuring.harness` docstring): the process tree's without
    the training thread's, plus what the training thread spent inside `next()`."""
    return w.cpu_s - w.train_cpu_s + w.next_cpu_s


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


class WriteFailed(OSError):
    """Rows could not be written (a full disk, an I/O error); the file is as it was before them."""


def _write_all(fd: int, data: bytes) -> None:
    """All of `data` to `fd`: a short write is continued where it stopped."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def replace_file(path: str | Path, data: bytes | str) -> None:
    """`path`'s content becomes `data` (text as UTF-8): written to a new file beside it, synced and
    renamed over it, so the only copy is never truncated: a kill, Ctrl-C or a full disk leaves the old
    file whole (or none, if there was none) and no new file behind. The file keeps its mode; a
    symlink stays one: its target is the file replaced (the new file is written beside the target).
    Errors propagate (OSError)."""
    path = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    data = data.encode() if isinstance(data, str) else data
    new = path.with_name(f".{path.name}.new")
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else None
    try:
        fd = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data)
            if mode is not None:
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(new, path)
    except BaseException as e:
        new.unlink(missing_ok=True)
        if isinstance(e, OSError) and not e.filename:   # a write that failed says which file it was writing
            e.filename = str(new)
        raise


class CsvWriter:
    """Appends rows to one CSV with a fixed column order, each configuration's rows whole and synced
    to disk; every row carries run id and environment. A results file's cells (`columns` None: the
    default columns, read back through `read_rows`) are `cells.guard`ed; `guarded` says so for others
    (claims.csv: not, until its reader undoes it)."""

    def __init__(self, path: str | Path, env: dict[str, object], run_id: str, columns: list[str] | None = None,
                 guarded: bool | None = None):
        self.path = Path(path)
        self.guarded = columns is None if guarded is None else guarded
        self.columns = columns = columns or all_columns()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = self.path.read_bytes() if self.path.exists() else b""
        cut = data.rfind(b"\n") + 1   # the whole lines end here
        old = None
        if data[:cut].strip():   # refused before anything is touched if it is not pipebench's
            with warnings.catch_warnings():   # a torn last line is set aside below, and said so there
                warnings.simplefilter("ignore")
                old = read_rows(self.path, [c for c in REQUIRED if c in columns], guarded=self.guarded, dtype=str,
                                keep_default_na=False)
        if cut < len(data):   # a torn last row: keep it apart, append after the last whole one
            with open(self.path.with_name(self.path.name + ".torn"), "ab") as torn:
                torn.write(data[cut:] + b"\n")
            os.truncate(self.path, cut)
            warnings.warn(f"{self.path}: a torn last line ({len(data) - cut} bytes) was moved to "
                          f"{self.path.name}.torn", stacklevel=2)
        if old is not None and list(old.columns) != list(columns):   # an older file: move it to these columns
            extra = [c for c in old.columns if c not in columns]
            if extra:
                raise ValueError(f"{self.path}: columns {extra} are not written by this version")
            old = old.reindex(columns=columns, fill_value="")
            self._replace((cells.guarded_csv(old) if self.guarded else old.to_csv(index=False, lineterminator="\n")).encode())
        self.stamp = {"run_id": run_id, **env}

    def _replace(self, data: bytes) -> None:
        """The file's content becomes `data` (`replace_file`): a kill or a full disk leaves the old
        file whole."""
        try:
            replace_file(self.path, data)
        except OSError as e:
            raise WriteFailed(f"cannot move {self.path} to this version's columns ({e.strerror or e}); it is "
                              "left as it was: free space and run again") from e

    def write_block(self, rows: list[dict[str, object]]) -> None:
        """Append `rows` (one configuration's) in one write, synced to disk. On any failure the file
        is cut back to its size before them and WriteFailed says why: whole or not at all."""
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        frame = pd.DataFrame([{**row, **self.stamp, "timestamp": now} for row in rows]).reindex(columns=self.columns)
        if self.guarded:   # no cell a spreadsheet reads as a formula
            frame = frame.map(cells.guard)
        carriage = frame.map(lambda v: isinstance(v, str) and "\r" in v).any().any()   # a CR unquoted splits the row
        text = frame.to_csv(index=False, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC if carriage else
                            csv.QUOTE_MINIMAL).encode("utf-8", "backslashreplace")   # bytes not UTF-8: escaped
        body = text[text.index(b"\n") + 1:]
        fd = size = None
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            size = os.fstat(fd).st_size
            _write_all(fd, text if size == 0 else body)
            os.fsync(fd)
        except OSError as e:
            if size is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                    if size == 0:   # no row was written: no empty results.csv either
                        os.unlink(self.path)
            raise WriteFailed(f"cannot write to {self.path} ({e.strerror or e}): every finished configuration's "
                              "rows are kept, none of this one's") from e
        finally:
            if fd is not None:
                os.close(fd)

    def write(self, row: dict[str, object]) -> None:
        self.write_block([row])
