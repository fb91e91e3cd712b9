"""Shared fixtures: a CIFAR-layout dataset whose pixels encode their index, and the synthetic set.

Index-encoded image i (train: i, test: 50000 + i): channels 0 and 1 are flat at
LEVEL * digit + LEVEL // 2 for the two base-64 digits of i % 4096 (coarse enough to survive
JPEG), channel 2 = COL0 + COL_STEP * column (never 0), so after a padded crop the zero rows /
columns and the column ramp reveal the crop offsets and the flip, and the centre reveals i.
Label of image i: (7 * i + 3) % 10.

Every test that skips without a CUDA device (a `skipif` whose reason names CUDA) is also marked
`gpu` (not one that needs a machine *without* CUDA), so the GPU machine runs exactly those:
`python -m pytest -m gpu` (in one process: their timings would not hold beside other tests).

The session's data roots are made once per run, by the first xdist worker to ask, and read by every
worker (`shared`): each of two workers made its own 60,000-image sets, about 20 s each.

The objects made while the suite imports and collects (torch, pandas, some 1,400 test items: about
half a million) are moved out of the garbage collector's reach once collection ends (`gc.freeze`):
every full collection walked them all, 0.3 s each, and the harness collects before each configuration
it runs in this process (`machine.release`), besides Python's own full collections: about a seventh of
test_bench.py's and test_runner.py's time. Nothing a test makes is frozen.

The suite runs one xdist worker more than there are cores (`pytest_xdist_auto_num_workers`): two
workers kept two cores busy only 84 % of the time (the rest waiting on a process a test started, a
timeout, a sleep it needs). Each worker, and every process it starts, runs torch's CPU ops on one
thread by default (`OMP_NUM_THREADS=1`, set before torch is first imported, unless set already; a
configuration sets its CPU budget's count, below): two workers of
two threads each oversubscribe two cores. On the 2-core machine the suite took 499 s as it was, 468 s
on one thread, 423 s with a third worker (results/2026-12-02-tests/README.md, "Suite time").
PYTEST_XDIST_AUTO_NUM_WORKERS, where set, still chooses the count.

Each worker's OpenMP threads sleep between parallel regions (`OMP_WAIT_POLICY=PASSIVE`, set before torch
loads the OpenMP runtime, unless set already), as in every pipebench process (bench/__init__.py sets it
before torch loads; here `pipelines`, imported below, loads torch first, so bench's setting came too
late for the workers and only reached the processes they start). A configuration run in a worker
(`--no-isolate`, the harness called directly) uses two threads on this 2-core machine (its default
budget); spinning beside two other processes, its steps took about twice as long: tests/test_budget.py's
`--no-isolate` answer run 21.6-24.4 s beside two busy loops before, 10.6-13.9 s after, 3 runs each
(results/2026-12-02-tests/omp-wait-policy.txt, by omp-wait-policy.sh there).

Every sweep records the host-speed figure (`bench.measuring.machine.host_identity`: three sorts of a
million numbers, 0.18 s of one core); this process measures it once (`functools.cache`) for the 111
sweeps the tests run in it: 19.8 s in a profile of the suite in one process (issue 69;
results/2026-12-02-tests/profile-top-afe04fb.txt). The processes the tests start measure it as every
pipebench process does; tests/test_instrument.py tests the measurement itself.

This process reads each split pipebench wrote once while its files stand as they are, keeping the four
latest (`load_split_once`, for `open_split` and the JPEG copies; a copy of the arrays each time): the
workers read splits 301-303 times for 63-72 s of their time, 51-58 s of it reading again what the same
worker had read; 101 times for 12-16 s with it, the suite 285-301 s against 332-337 s
(results/2026-12-02-tests/split-reads.txt, two runs each, alternating, by split_reads.py there). A split
whose files change (a test damaging one) is read again, as is one written less than 2 s before (the time
a file's mtime is stamped with moves by clock ticks), and a download (no CHECKSUMS.json) always;
tests/test_sources.py tests `load_split` itself.

An xdist worker runs one multiprocessing forkserver for its tests (`forkserver_for_tests`, before each
test), importing what every use of it here imports (`forkserver_preload()`: both DataLoader-based
pipelines' workers' modules and those of the configuration processes an in-process sweep forks), not
what the first test to need one asked for: test_contract.py's tests stopped a server that lacked what
theirs import, and started another (8 forkservers in the three workers of one run, about 3.3 CPU s
each; 5 with this, one of them a test's own: results/2026-12-02-tests/forkserver-starts.txt). One a
test started itself is replaced at the next test. In one process (the GPU machine's run) each test
starts what it needs, as a user's process does, but test_contract.py's.

A test that allows a process a fixed time to start or end takes it from `allowance`: the time set on
an idle machine, scaled by how much slower than that a Python process importing torch starts in this
session (`startup_s`), so the suite passes on a loaded machine (issue 69).
"""
from __future__ import annotations

import collections
import fcntl
import functools
import gc
import multiprocessing.forkserver
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")   # before numpy and torch are imported (module docstring)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # likewise (module docstring)

import numpy as np
import pytest
from PIL import Image

import pipelines
from bench.measuring import machine
from pipelines import sources, workers
from pipelines.config import PipelineConfig

machine.host_identity = functools.cache(machine.host_identity)   # once per process (module docstring)


SPLITS_KEPT = 4   # the splits `load_split_once` keeps, the latest read (a full train split: 150 MB)
SETTLED_NS = 2_000_000_000   # files written this recently are read afresh: a write within the same clock tick
_SPLITS: collections.OrderedDict = collections.OrderedDict()
_load_split = sources.load_split


def load_split_once(folder, split, cache_root=None, limit=None):
    """`sources.load_split`, a split pipebench wrote read once while its files are unchanged (module
    docstring): a copy of the arrays it returned. The key holds the files' inode, size, mtime and ctime
    (which no `os.utime` sets back) and `layout.PER_FILE` (each batch's shape is checked against it)."""
    folder = Path(folder)
    try:
        stamp = tuple((s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for s in
                      (folder.joinpath(name).stat() for name in (*sources.layout.split_files(split), sources.CHECKSUMS)))
    except OSError:   # a file missing, or no CHECKSUMS.json (a download): read as it is, as always
        return _load_split(folder, split, cache_root, limit)
    if time.time_ns() - max(mtime for _, _, mtime, _ in stamp) < SETTLED_NS:
        return _load_split(folder, split, cache_root, limit)   # a change within a clock tick keeps the mtime
    key = (str(folder.resolve()), split, str(cache_root), limit, sources.layout.PER_FILE, stamp)
    if key in _SPLITS:
        _SPLITS.move_to_end(key)
        images, labels = _SPLITS[key]
    else:
        images, labels = _SPLITS[key] = _load_split(folder, split, cache_root, limit)
        if len(_SPLITS) > SPLITS_KEPT:
            _SPLITS.popitem(last=False)
    return images.copy(), labels.copy()


sources.split.load_split = sources.jpeg.load_split = load_split_once

COL0, COL_STEP = 16, 7
# seconds `python -c "import torch"` took on the idle 2-core machine the tests' allowances were set on
STARTUP_REFERENCE_S = 2.0


@pytest.hookimpl(optionalhook=True)   # pytest without xdist knows no such hook
def pytest_xdist_auto_num_workers(config) -> int | None:
    """`-n auto`: a worker per core this process may run on, and one more (module docstring); what
    PYTEST_XDIST_AUTO_NUM_WORKERS asks where it is set (xdist's own hook reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(os.sched_getaffinity(0)) + 1


def pytest_configure(config):
    """SIGINT catchable here, so the processes the tests start get Python's own Ctrl-C: a suite started
    as a background job of a script inherits SIGINT ignored, and then every Ctrl-C test's signal was
    lost (its run went on to the end, exit 0)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_finish(session):
    """What importing and collecting made stays for the session: out of every later collection."""
    gc.collect()
    gc.freeze()


# Modules whose tests each train in a process of their own (seconds each) run first: near the end of the
# collection (alphabetical) they were often the run's last tests, one worker busy while the others had
# nothing left to take (results/2026-12-02-tests/suite-tail-runs.txt and the summaries beside it)
FIRST = ("test_train_script.py",)


def pytest_collection_modifyitems(items):
    """`FIRST`'s tests moved to the front (the rest in order); a test that skips without CUDA marked `gpu`."""
    items.sort(key=lambda item: item.path.name not in FIRST)
    for item in items:
        reasons = [str(mark.kwargs.get("reason", "")) for mark in item.iter_markers("skipif")]
        if any("CUDA" in reason and "without" not in reason for reason in reasons):
            item.add_marker(pytest.mark.gpu)

LEVEL, DIGIT = 4, 64


def indexed_images(start: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    index = np.arange(start, start + n)
    images = np.empty((n, 32, 32, 3), np.uint8)
    images[..., 0] = (LEVEL * (index % DIGIT) + LEVEL // 2)[:, None, None]
    images[..., 1] = (LEVEL * (index // DIGIT % DIGIT) + LEVEL // 2)[:, None, None]
    images[..., 2] = (COL0 + COL_STEP * np.arange(32))[None, None, :]
    return images, (7 * index + 3) % 10


def shared(tmp_path_factory, name: str, make: Callable[[Path], None]) -> Path:
    """The folder `name` of this test run, filled by `make` once for every xdist worker: the first
    to take its lock makes it, the others wait and read it (tests only read a session's roots)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent   # the run's folder, above each worker's own
    folder, done = base / name, base / f"{name}.done"
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


def write_indexed(root: Path) -> None:
    folder = root / sources.BATCH_FOLDER
    folder.mkdir()
    sources.write_split(folder, "train", *indexed_images(0, 50_000))
    sources.write_split(folder, "test", *indexed_images(50_000, 10_000))


@pytest.fixture(scope="session")
def indexed_root(tmp_path_factory):
    """A data root holding the index-encoded set as cifar-10-batches-py (read as source='cifar10')."""
    return shared(tmp_path_factory, "indexed", write_indexed)


@pytest.fixture(scope="session")
def synthetic_root(tmp_path_factory):
    """A data root with the default synthetic set generated in it."""
    return shared(tmp_path_factory, "synthetic", lambda root: sources.ensure_synthetic(root, seed=0))


@pytest.fixture
def small_indexed_root(tmp_path, monkeypatch):
    """The index-encoded set with 100 images per batch file (500 train, 100 test), read with
    `sources.layout.PER_FILE` patched to match: for tests that make a JPEG copy at another image size,
    which encodes the whole set."""
    monkeypatch.setattr(sources.layout, "PER_FILE", 100)
    write_small_indexed(tmp_path)
    return tmp_path


def write_small_indexed(root: Path) -> None:
    """The small index-encoded set (500 train, 100 test) under `root`, with `PER_FILE` patched to 100."""
    folder = root / sources.BATCH_FOLDER
    folder.mkdir()
    sources.write_split(folder, "train", *indexed_images(0, 500))
    sources.write_split(folder, "test", *indexed_images(50_000, 100))


@pytest.fixture(scope="module")
def small_indexed_module_root(tmp_path_factory):
    """`small_indexed_root`'s set written once for a module's tests, which only read it (its JPEG copies
    at other sizes, made beside it, encoded once too); read it through `small_indexed_shared`."""
    root = tmp_path_factory.mktemp("small-indexed")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sources.layout, "PER_FILE", 100)
        write_small_indexed(root)
    return root


@pytest.fixture
def small_indexed_shared(small_indexed_module_root, monkeypatch):
    """`small_indexed_root` as one module's tests share it: `sources.layout.PER_FILE` patched to match for
    the test."""
    monkeypatch.setattr(sources.layout, "PER_FILE", 100)
    return small_indexed_module_root


def write_photographs(folder: Path, count: int, classes: int = 2, sides: tuple[int, int] = (200, 640),
                      detail: int = 8, seed: int = 0) -> Path:
    """`count` JPEG photographs (quality 90) in `classes` class folders of `folder`, each a random
    `detail` x `detail` image upscaled to a random size with sides in `sides`; returns `folder`."""
    rng = np.random.default_rng(seed)
    for k in range(count):
        h, w = (int(v) for v in rng.integers(*sides, 2))
        small = Image.fromarray(rng.integers(0, 256, (detail, detail, 3), dtype=np.uint8))
        path = folder / f"class{k % classes}" / f"{k}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        small.resize((w, h), Image.Resampling.BICUBIC).save(path, quality=90)
    return folder


def forkserver_preload() -> list[str]:
    """What an xdist worker's one forkserver imports (module docstring): what the DataLoader workers of both
    DataLoader-based pipelines import and what the configuration processes forked from it import
    (`bench.running.children.PRELOAD`). Asked when needed, not as the controller loads this file: it
    imports both pipelines, torchvision and the harness."""
    from bench.running import children
    workers_import = [m for name in ("dataloader", "timm")
                      for m in pipelines.worker_modules(name, PipelineConfig(num_workers=1))]
    return list(dict.fromkeys([*workers_import, *children.PRELOAD]))


_STARTED: list[int] = []   # the forkserver `forkserver_for_tests` started last (its pid)


def forkserver_for_tests() -> None:
    """This process's forkserver, importing `forkserver_preload()`: the one running if this started it
    and it still runs, else that one stopped (no pipeline is open between tests) and this one started.
    (Which server runs is known by its pid: multiprocessing records the preload a caller last asked
    for, also while an earlier server runs, so it does not tell what the running one imported.)"""
    from bench.running import children
    server = multiprocessing.forkserver._forkserver
    if server._forkserver_pid is not None and server._forkserver_pid in _STARTED and children._alive(server._forkserver_pid):
        return
    if server._forkserver_pid is not None:
        server._stop()
    workers.start_forkserver(forkserver_preload())
    _STARTED[:] = [server._forkserver_pid]


@pytest.fixture(autouse=True)
def one_forkserver_per_xdist_worker():
    """In an xdist worker, `forkserver_for_tests` before each test (module docstring)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        forkserver_for_tests()


@pytest.fixture(scope="session")
def startup_s() -> float:
    """Seconds a Python process importing torch takes to start and end here, measured once per session
    (per xdist worker), when a test first asks: how slow the machine is now, load included."""
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    return time.monotonic() - t0


@pytest.fixture(scope="session")
def allowance(startup_s):
    """`allowance(seconds)`: an allowance for a process to start or end, given as set on an idle machine
    (STARTUP_REFERENCE_S), scaled by how much slower a process starts in this session; never less."""
    def scaled(seconds: float) -> float:
        return seconds * max(1.0, startup_s / STARTUP_REFERENCE_S)
    return scaled
