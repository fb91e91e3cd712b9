"""DataLoader workers as the DataLoader-based pipelines start them: the multiprocessing context
and forkserver (`worker_context`, `start_forkserver`; started ahead of the first loader by
`start_forkserver_early`, waited for by `forkserver_ready`), each worker on its loader's cores
(`worker_options`), datasets passed as shared memory (`SharedArrays`) and the epoch's sample keys as
the batch sampler (`EpochKeys`).
"""
from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import multiprocessing.util
import os
import subprocess
import sys
import threading
import time
from typing import Sequence

import numpy as np
import torch

from .config import PipelineConfig
from .contract import Pipeline

def worker_options(config: PipelineConfig, preload: Sequence[str], workers: int) -> dict[str, object]:
    """DataLoader arguments for `workers` workers: how they start (`worker_context`, the forkserver
    importing the modules in `preload`: the dataset's and those its work imports) and an init
    function (`_init_worker`) that puts each worker on the cores of the process building the loader
    (a forkserver started earlier, under another CPU budget, would otherwise pass on its own) and
    ends it when that process is gone (a worker watches only its own parent, the forkserver, which
    the workers keep alive)."""
    options: dict[str, object] = {"multiprocessing_context": worker_context(config, preload, workers)}
    if workers:
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        options["worker_init_fn"] = functools.partial(_init_worker, cores, os.getpid())
    return options


def _init_worker(cores: list[int] | None, owner: int, worker_id: int) -> None:
    if cores is not None:
        os.sched_setaffinity(0, cores)

    def watch() -> None:
        while True:
            time.sleep(1.0)
            try:
                os.kill(owner, 0)
            except ProcessLookupError:
                os._exit(0)
            except PermissionError:   # a new process reuses the pid: the owner is gone too
                os._exit(0)

    threading.Thread(target=watch, name="owner-watch", daemon=True).start()


def worker_context(config: PipelineConfig, preload: Sequence[str], workers: int):
    """The multiprocessing context `workers` DataLoader workers start with (config.worker_start), or
    None for none. "forkserver" (the default; Python 3.14's default on Linux) and "spawn" start
    workers from a clean process, which is safe in a process that already runs threads (CUDA's, a
    pipeline's, a progress bar's), where `fork()` can copy a lock another thread holds and deadlock
    the worker. The forkserver imports `preload` (the dataset's module, and any its workers would
    otherwise import each) once, so every worker starts with them, and torch, already imported.
    Datasets that workers receive by pickling keep their arrays in shared memory (`SharedArrays`)."""
    if workers == 0:
        return None
    context = multiprocessing.get_context(config.worker_start)
    if config.worker_start == "forkserver":
        start_forkserver(preload)
    return context


def start_forkserver(preload: Sequence[str]) -> None:
    """Start this process's multiprocessing forkserver importing `preload` (a no-op while one runs:
    the first caller's preload holds), with
    - a session of its own: a terminal's Ctrl-C reaches every process of its group, and a forkserver
      still importing torch printed a KeyboardInterrupt traceback; the process that started it handles
      Ctrl-C and ends what the server forked. (This process ignoring SIGINT while the server started,
      so that it inherited that, lost a Ctrl-C sent in those milliseconds: whichever thread took it
      ignored it, in 2 of 4 tries of a fault campaign's Ctrl-C sent as a sweep's first configuration
      started.) The server still ends with this process (its pipe from it closes). The resource
      tracker is started first, as multiprocessing starts it, in this process's group;
    - this process's import path (PYTHONPATH) and not the current folder (PYTHONSAFEPATH): started
      by `python -c`, it would have the current folder first on its path, and a user's random.py
      there (a --models file) would replace the standard library's module that torch imports
      (Python >= 3.11 honours PYTHONSAFEPATH)."""
    multiprocessing.get_context("forkserver").set_forkserver_preload(list(preload))
    multiprocessing.resource_tracker.ensure_running()
    env = {"PYTHONSAFEPATH": "1", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    before = {name: os.environ.get(name) for name in env}
    spawn = multiprocessing.util.spawnv_passfds
    os.environ.update(env)
    multiprocessing.util.spawnv_passfds = _spawn_in_own_session   # how the forkserver module starts it
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        multiprocessing.util.spawnv_passfds = spawn
        for name, value in before.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


_early: list[bool] = []   # a forkserver start_forkserver_early started, not yet known to be ready


def start_forkserver_early(preload: Sequence[str]) -> None:
    """Start this process's forkserver importing `preload` now, ahead of the first loader that needs
    it (a no-op if one runs), so that its imports (torch and the pipelines' modules: seconds) overlap
    what the process does meanwhile (starting CUDA, building and compiling a model);
    `forkserver_ready` then waits for them before anything is timed."""
    if preload:
        start_forkserver(preload)
        _early[:] = [True]


def forkserver_ready() -> None:
    """Wait until the forkserver `start_forkserver_early` started has imported its modules (it forks
    one process that does nothing: it serves none before), so that no timed work shares the CPU with
    those imports; a no-op otherwise, and once it was ready."""
    if _early:
        process = multiprocessing.get_context("forkserver").Process(target=os.getpid, daemon=True)
        process.start()
        process.join()
        _early.clear()


def _spawn_in_own_session(path: str, args: list[str], passfds) -> int:
    """`multiprocessing.util.spawnv_passfds` (the program `path` with `args`, only `passfds` open),
    in a session of its own; its pid."""
    return subprocess.Popen(args, executable=path, pass_fds=tuple(sorted(map(int, passfds))), close_fds=True,
                            start_new_session=True).pid


class SharedArrays:
    """Mixin for a Dataset that DataLoader workers receive by pickling (forkserver / spawn): its numpy
    attributes travel as torch shared-memory tensors (a file descriptor each, not the bytes), copied
    into shared memory once, on the first pickling, and are numpy views again in the worker. With
    fork or 0 workers nothing is pickled and nothing is copied."""

    def __getstate__(self) -> dict:
        state = dict(vars(self))
        shared = state.pop("_shared", None)
        if shared is None:
            shared = {k: torch.from_numpy(v).share_memory_() for k, v in state.items() if isinstance(v, np.ndarray)}
            self._shared = shared
        return {**state, **shared}

    def __setstate__(self, state: dict) -> None:
        vars(self).update({k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in state.items()})


def loader_capacity(loader: torch.utils.data.DataLoader) -> int:
    """Batches a DataLoader holds ready ahead of its consumer: `prefetch_factor` per worker (the
    index queue holds that many tasks per worker, done or not; its pin-memory thread only passes
    them on); 0 without workers (each batch made inside `next()`)."""
    return loader.num_workers * (loader.prefetch_factor or 0)


class EpochKeys(torch.utils.data.Sampler):
    """Batch sampler of the DataLoader-based pipelines: per batch of the pipeline's current epoch, the
    keys `(index, dy, dx, flip)` of its samples (the epoch's shared draws, `epoch_draws`; zeros and
    False without augmentation), for photographs `(index, y, x, h, w, flip)` (`crops.epoch_boxes`), so a worker crops a sample without drawing anything itself and
    the output does not depend on the number of workers."""

    def __init__(self, pipeline: "Pipeline"):
        self.pipeline = pipeline

    def __iter__(self):
        batches = self.pipeline.batches()
        n = sum(len(b) for b in batches)
        draws = self.pipeline.draws(batches)
        draws = [t.tolist() for t in draws] if draws is not None else [[0] * n, [0] * n, [False] * n]
        start = 0
        for index in batches:
            stop = start + len(index)
            yield list(zip(index.tolist(), *(d[start:stop] for d in draws)))
            start = stop

    def __len__(self) -> int:
        return len(self.pipeline)
