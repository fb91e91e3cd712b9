"""The batch contract every pipeline implements, and the pieces all of them share.

Contract (`Pipeline`):
  - `for images, labels in pipeline:` yields one epoch; both tensors already on `pipeline.device`.
    images: N x 3 x S x S (S = config.image_size, 32 by default), float32 or bfloat16 (config.dtype), normalized with the CIFAR-10
    mean/std, channels_last memory format if config.channels_last; labels: int64, N.
  - `len(pipeline)` = batches per epoch (after sharding and the last-batch policy).
  - `set_epoch(e)` selects epoch e's shuffle and augmentation draws, deterministically from
    (config.seed, e) (augmentation also from the rank when sharded), like
    `DistributedSampler.set_epoch`: call it before each epoch.
  - One iterator at a time: a newer `iter()` supersedes the older one, whose next `next()` raises
    `RuntimeError` (it never ends quietly as if its epoch were complete).
  - `close()` releases workers, streams and buffers; `iter()` / `next()` after it raise
    `RuntimeError`; pipelines are also context managers.
  - `info`: facts for result rows (e.g. the resident upload time); `data.source`: where data came from.
  - `stages()`: the per-batch work split into stages that can each run alone (`Stages`), so the
    harness can measure every stage's ceiling in isolation.

Shared here so every pipeline has the same semantics: the epoch plan (`epoch_batches`, and
`Uploader` to put it on the device without a host synchronization), augmentation draws
(`epoch_draws`), and crop + flip + normalize in one pass (`crop_normalize`: uint8 NHWC in, contract
images out; one compiled kernel on CUDA).
"""
from __future__ import annotations

import abc
import functools
import math
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import sys
import threading
import time
import warnings
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
import torch

from .config import FLIP_P, MEAN, STD, PipelineConfig
from .sources import Split, open_split

Batch = tuple[torch.Tensor, torch.Tensor]


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"PipelineConfig.device={name!r}: CUDA is not available on this machine")
    return device


def shard_order(order: np.ndarray, config: PipelineConfig) -> np.ndarray:
    """This rank's share of an epoch's sample order, every rank the same length (so DDP ranks run
    the same number of steps), as `DistributedSampler` does: sample k of the order goes to rank
    k % world_size after the order is cut (last_batch="drop": the last n % world_size samples
    skipped this epoch) or padded (last_batch="partial": its first (-n) % world_size samples
    repeated) to a multiple of world_size. Worked on 7 samples and 2 ranks: drop gives ranks
    [o0, o2, o4] and [o1, o3, o5]; partial gives [o0, o2, o4, o6] and [o1, o3, o5, o0]."""
    world = config.world_size
    if world > 1:
        n = len(order)
        order = order[: n - n % world] if config.last_batch == "drop" else np.resize(order, shard_size(n, config) * world)
    return order[config.rank::world]


def shard_size(n: int, config: PipelineConfig) -> int:
    """Samples per rank and epoch under `shard_order`."""
    world = config.world_size
    return n // world if config.last_batch == "drop" else -(-n // world)


def epoch_batches(n: int, config: PipelineConfig, epoch: int) -> list[np.ndarray]:
    """Sample indices of each batch of `epoch` for this rank (shuffle, shard, last-batch policy).
    The shuffle depends on (seed, epoch) only, so every rank shards the same order."""
    order = (np.random.default_rng([config.seed, epoch]).permutation(n) if config.shuffle
             else np.arange(n))
    mine = shard_order(order, config)
    bs = config.batch_size
    if config.last_batch == "drop":
        mine = mine[: len(mine) // bs * bs]
    return [mine[i:i + bs] for i in range(0, len(mine), bs)]


def batch_count(n: int, config: PipelineConfig) -> int:
    mine = shard_size(n, config)
    return mine // config.batch_size if config.last_batch == "drop" else -(-mine // config.batch_size)


class Uploader:
    """Per-epoch host arrays (an epoch's sample order, its augmentation draws, their crop grid) put
    on the device without a host wait and without any allocation per epoch: a page-locked host
    allocation or a device allocation (cudaMalloc) is a point where the CUDA runtime waits for
    every stream, so an epoch restart that allocates stalls a training loop that runs ahead of the
    GPU. Each kind of array has two pinned buffers, used in turn (before one is refilled, the copy
    out of it two epochs ago is awaited: long done), and one device buffer, allocated once (grown
    for a larger epoch) and rewritten in stream order: every reader of the previous epoch's contents
    runs on the stream that uploads the next (the current stream when called). Without CUDA the
    arrays are used as they are."""

    def __init__(self, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.pinned: dict[str, deque] = {}
        self.buffers: dict[str, torch.Tensor] = {}

    def _buffer(self, kind: str, shape: tuple[int, ...], dtype=torch.int64) -> torch.Tensor:
        """A view of shape `shape` of this kind's device buffer (allocated once, grown if needed)."""
        n = math.prod(shape)
        if kind not in self.buffers or self.buffers[kind].numel() < n:
            self.buffers[kind] = torch.empty(n, dtype=dtype, device=self.device)
        return self.buffers[kind][:n].view(shape)

    def __call__(self, kind: str, array: np.ndarray) -> torch.Tensor:
        tensor = torch.from_numpy(np.ascontiguousarray(array, dtype=np.int64))
        if not self.cuda:
            return tensor
        turns = self.pinned.setdefault(kind, deque([(None, None), (None, None)]))
        buffer, copied = turns.popleft()
        if copied is not None:
            copied.synchronize()
        if buffer is None or buffer.numel() < tensor.numel():
            buffer = torch.empty(tensor.numel(), dtype=torch.int64, pin_memory=True)
        staged = buffer[:tensor.numel()].view(tensor.shape)
        staged.copy_(tensor)
        out = self._buffer(kind, tuple(tensor.shape)).copy_(staged, non_blocking=True)
        turns.append((buffer, torch.cuda.current_stream(self.device).record_event()))
        return out

    def order(self, batches: list[np.ndarray]) -> torch.Tensor:
        """An epoch's sample order (its batches back to back) on the device."""
        return self("order", np.concatenate(batches) if batches else np.empty(0, np.int64))

    def draws(self, draws: tuple[torch.Tensor, ...] | None) -> tuple[torch.Tensor, ...] | None:
        """An epoch's augmentation draws (`epoch_draws`: crop offsets dy, dx and flips, in plan
        order) on the device, as int64 views sliced per batch by position; None without
        augmentation."""
        if draws is None:
            return None
        return tuple(self("draws", torch.stack([draws[0], draws[1], draws[2].long()]).numpy()))


def rank_seeds(config: PipelineConfig, *keys: int, count: int = 1) -> np.ndarray:
    """`count` seeds for this rank derived from the one config.seed and `keys`: ranks draw
    independent augmentations. With world_size 1 the rank is left out, so single-process runs
    draw what they drew before sharding existed."""
    rank = [config.rank] if config.world_size > 1 else []
    return np.random.SeedSequence([config.seed, *keys, *rank]).generate_state(count)


def draw_augmentation(n: int, pad: int, generator: torch.Generator, device: torch.device | str = "cpu"):
    """Per-sample crop offsets (dy, dx in 0..2*pad, in padded coordinates) and flips."""
    offsets = torch.randint(0, 2 * pad + 1, (2, n), generator=generator, device=device)
    flip = torch.rand(n, generator=generator, device=device) < FLIP_P
    return offsets[0], offsets[1], flip


def epoch_draws(config: PipelineConfig, epoch: int, n: int) -> tuple[torch.Tensor, ...] | None:
    """The crop offsets and flips (CPU tensors, `draw_augmentation`) of an epoch's `n` samples in
    plan order, None without augmentation: one random stream per (seed, epoch, rank), drawn at once
    (about a millisecond for 50,000 samples) and shared by every pipeline, so sample k of an epoch is
    cropped and flipped alike whichever pipeline loads it."""
    if not config.augment:
        return None
    generator = torch.Generator().manual_seed(int(rank_seeds(config, epoch, 1)[0]))
    return draw_augmentation(n, config.pad, generator)


@dataclass
class EpochPlan:
    """An epoch as planned on the host: its number, its sample indices batch by batch
    (`epoch_batches`) and their augmentation draws (`epoch_draws`)."""
    epoch: int
    batches: list[np.ndarray]
    draws: tuple[torch.Tensor, ...] | None


def planned_ahead(future: Future | None, epoch: int | None) -> EpochPlan | None:
    """The plan `future` made in advance if it is epoch `epoch`'s, else None: nothing planned,
    the planning failed (its error is met again when the epoch is planned anew) or another epoch
    was planned. Waits for the future."""
    if future is None or future.exception() is not None:
        return None
    plan = future.result()
    return plan if plan.epoch == epoch else None


def crop_windows(images: np.ndarray, size: int, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """Strided views [i, dy, dx] -> the size x size x C crop at (dy, dx) of zero-padded NHWC image
    i, of the images and of their mirror images (a flipped crop at dx is the mirror's crop at
    2 * pad - dx): numpy fancy indexing over them gathers a batch of crops in one copy."""
    padded = np.pad(images, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    return tuple(sliding_window_view(p, (size, size), axis=(1, 2)).transpose(0, 1, 2, 4, 5, 3)
                 for p in (padded, padded[:, :, ::-1]))


_AFFINE: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}


def affine(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, shift), 1 x 3 x 1 x 1 float32 on `device`: (x/255 - mean)/std = x * scale + shift."""
    if device not in _AFFINE:
        std = torch.tensor(STD, dtype=torch.float64)
        scale = (1 / (255 * std)).view(1, 3, 1, 1)
        shift = (-torch.tensor(MEAN, dtype=torch.float64) / std).view(1, 3, 1, 1)
        _AFFINE[device] = (scale.float().to(device), shift.float().to(device))
    return _AFFINE[device]


def normalize(images: torch.Tensor, config: PipelineConfig) -> torch.Tensor:
    """uint8 B x H x W x C (any device) -> contract images: (x/255 - mean)/std as B x C x H x W.

    One kernel: a fused multiply-add computed in float32, written straight into a tensor of
    config.dtype in the requested memory format (the permute itself is a free view).
    """
    scale, shift = affine(images.device)
    return _normalize(images, scale, shift, getattr(torch, config.dtype), config.channels_last)


def _normalize(images: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor, dtype: torch.dtype,
               channels_last: bool) -> torch.Tensor:
    x = images.permute(0, 3, 1, 2)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    if torch.compiler.is_compiling():   # compiled, the layout is the output's: no out= buffer
        return torch.addcmul(shift, x, scale).to(dtype).contiguous(memory_format=layout)
    return torch.addcmul(shift, x, scale, out=torch.empty(x.shape, dtype=dtype, device=x.device, memory_format=layout))


def crop_normalize(images: torch.Tensor, index: torch.Tensor, draws: tuple[torch.Tensor, ...] | None,
                   config: PipelineConfig, start: int = 0) -> torch.Tensor:
    """Contract images of samples `images[index]` (`images`: N x S x S x C uint8, on the device
    of `index`): each cropped at (dy, dx) of its image zero-padded by `config.pad` and mirrored
    where `flip`, then normalized as `normalize` does. `draws`: the epoch's `epoch_draws` as
    `Uploader.draws` puts them on the device, of which these samples' are positions `start` to
    `start + len(index)`; None: no augmentation.

    Each output pixel is read straight from `images` (a pixel of the padding is a zero): nothing
    is padded, copied or indexed in between. On CUDA the function runs compiled (`torch.compile`)
    into one kernel, which `warm_crop_normalize` compiles for any number of images; elsewhere, or
    where compiling failed, it runs as written, op by op, with the same result."""
    n = len(index)
    dy, dx, flip = (d[start:start + n] for d in draws) if draws is not None else (None, None, None)
    return _apply(_COMPILED.get(images.device.type, _crop_normalize), images, index, dy, dx, flip, config)


def _apply(function: Callable, images, index, dy, dx, flip, config: PipelineConfig) -> torch.Tensor:
    """`function` (`_crop_normalize` or its compiled version) on these samples' images and draws."""
    scale, shift = affine(images.device)
    return function(images, index, dy, dx, flip, scale, shift, config.pad, getattr(torch, config.dtype),
                    config.channels_last)


def _crop_normalize(images, index, dy, dx, flip, scale, shift, pad: int, dtype: torch.dtype,
                    channels_last: bool) -> torch.Tensor:
    if dy is None:
        return _normalize(images[index], scale, shift, dtype, channels_last)
    size = images.shape[1]
    ramp = torch.arange(size, device=images.device)
    rows = dy[:, None] + (ramp - pad)                                                 # B x S
    cols = dx[:, None] + (torch.where(flip[:, None] != 0, ramp.flip(0), ramp) - pad)  # B x S
    inside = ((rows >= 0) & (rows < size))[:, :, None, None] & ((cols >= 0) & (cols < size))[:, None, :, None]
    pixels = images[index[:, None, None], rows.clamp(0, size - 1)[:, :, None], cols.clamp(0, size - 1)[:, None, :]]
    return _normalize(pixels * inside, scale, shift, dtype, channels_last)


_COMPILED: dict[str, Callable] = {}   # device type -> the compiled _crop_normalize, or the op-by-op one


def warm_crop_normalize(device: torch.device, config: PipelineConfig, planar: bool = False) -> None:
    """Compile `crop_normalize` for `config` now, for any number of images (the batch dimension
    marked dynamic: one compile, seconds, once per process and configuration), and check it
    against the op-by-op version; if compiling fails, warn and keep the op-by-op version. Called
    by the constructors, so no epoch and no producer thread compiles. `planar`: the images will
    be N x C x S x S tensors seen as N x S x S x C (a decoder's output; each memory layout is
    compiled apart).

    The kernel compiles in this process (`compile_threads=1`): otherwise inductor starts its pool
    of compile worker processes, which import torch on the cores the loader runs on for seconds
    after the compile is over; with a budget of two cores that took about one of them from
    `prefetch` (results/2026-11-24-h100-compile-workers/)."""
    if device.type != "cuda" or _COMPILED.get("cuda") is _crop_normalize:
        return
    _COMPILED.setdefault("cuda", torch.compile(_crop_normalize))
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (6, config.image_size, config.image_size, 3), dtype=torch.uint8, generator=generator)
    if planar:
        images = images.permute(0, 3, 1, 2).contiguous().permute(0, 2, 3, 1)
    index = torch.tensor([5, 1, 2, 0])
    draws = tuple(d.long() for d in draw_augmentation(4, config.pad, generator)) if config.augment else None
    want = crop_normalize(images, index, draws, config)
    on_device = [images.to(device), index.to(device),
                 *(tuple(d.to(device) for d in draws) if draws is not None else (None, None, None))]
    for tensor in on_device:   # marked on the very tensors the compiled function gets (a slice is unmarked)
        if tensor is not None:
            torch._dynamo.mark_dynamic(tensor, 0)
    try:
        import torch._inductor.config as inductor
        with inductor.patch(compile_threads=1):   # in this process: no compile worker processes (below)
            got = _apply(_COMPILED["cuda"], *on_device, config).cpu()
    except Exception as error:   # no compiler here: the op-by-op version, slower, same result
        warnings.warn(f"crop_normalize could not be compiled, it runs op by op: {type(error).__name__}: "
                      f"{(str(error).splitlines() or [''])[0]}", stacklevel=2)
        _COMPILED["cuda"] = _crop_normalize
        return
    ulp = 2.0 ** -6 if config.dtype == "bfloat16" else 1e-5   # one rounding apart (bfloat16 below 4: 2^-6)
    if (got.float() - want.float()).abs().max() > ulp:
        raise RuntimeError("crop_normalize: the compiled kernel disagrees with the op-by-op version")


def worker_options(config: PipelineConfig, preload: str, workers: int) -> dict[str, object]:
    """DataLoader arguments for `workers` workers: how they start (`worker_context`) and an init
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


def worker_context(config: PipelineConfig, preload: str, workers: int):
    """The multiprocessing context `workers` DataLoader workers start with (config.worker_start), or
    None for none. "forkserver" (the default; Python 3.14's default on Linux) and "spawn" start
    workers from a clean process, which is safe in a process that already runs threads (CUDA's, a
    pipeline's, a progress bar's), where `fork()` can copy a lock another thread holds and deadlock
    the worker. The forkserver imports `preload` (the dataset's module) once, so every worker starts
    with torch already imported. Datasets that workers receive by pickling keep their arrays in
    shared memory (`SharedArrays`)."""
    if workers == 0:
        return None
    context = multiprocessing.get_context(config.worker_start)
    if config.worker_start == "forkserver":
        start_forkserver([preload])
    return context


def start_forkserver(preload: list[str]) -> None:
    """Start this process's multiprocessing forkserver importing `preload` (a no-op while one runs:
    the first caller's preload holds), with
    - SIGINT ignored: a terminal's Ctrl-C reaches every process of its group, and a forkserver still
      importing torch printed a KeyboardInterrupt traceback; the process that started it handles
      Ctrl-C and ends what the server forked (which ignore SIGINT too);
    - this process's import path (PYTHONPATH) and not the current folder (PYTHONSAFEPATH): started
      by `python -c`, it would have the current folder first on its path, and a user's random.py
      there (a --models file) would replace the standard library's module that torch imports
      (Python >= 3.11 honours PYTHONSAFEPATH)."""
    multiprocessing.get_context("forkserver").set_forkserver_preload(preload)
    main = threading.current_thread() is threading.main_thread()   # only the main thread sets handlers
    env = {"PYTHONSAFEPATH": "1", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    before = {name: os.environ.get(name) for name in env}
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    os.environ.update(env)
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        for name, value in before.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value
        if main:
            signal.signal(signal.SIGINT, handler)


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


class EpochKeys(torch.utils.data.Sampler):
    """Batch sampler of the DataLoader-based pipelines: per batch of the pipeline's current epoch, the
    keys `(index, dy, dx, flip)` of its samples (the epoch's shared draws, `epoch_draws`; zeros and
    False without augmentation), so a worker crops a sample without drawing anything itself and
    the output does not depend on the number of workers."""

    def __init__(self, pipeline: "Pipeline"):
        self.pipeline = pipeline

    def __iter__(self):
        batches = self.pipeline.batches()
        n = sum(len(b) for b in batches)
        draws = self.pipeline.draws(batches)
        dy, dx, flip = (t.tolist() for t in draws) if draws is not None else ([0] * n, [0] * n, [False] * n)
        start = 0
        for index in batches:
            stop = start + len(index)
            yield list(zip(index.tolist(), dy[start:stop], dx[start:stop], flip[start:stop]))
            start = stop

    def __len__(self) -> int:
        return len(self.pipeline)


@dataclass
class Stages:
    """One pipeline's per-batch work, split so that each stage can be timed alone.

    host:    one epoch of host-side batches as the pipeline produces them with its own workers
             or threads (read + decode + augment + collate), each `(payload, labels)`; None when
             nothing runs on the host per step.
    payload: the host tensors one batch copies to the device per step ([] = none): their bytes
             are what the bus carries.
    copy:    how the pipeline copies the payload: "pageable", "pinned", or "none".
    pins:    whether it copies each batch into pinned memory first (DataLoader's pin thread).
    device:  the device-side work of one batch (conversion, decode, augment, normalize), run on a
             fixed batch already handed over (of `device_images` images where a pipeline makes
             several batches per round of launches).
    """
    host: Callable[[], Iterator[tuple[list[torch.Tensor], torch.Tensor]]] | None
    payload: list[torch.Tensor]
    copy: str
    pins: bool
    device: Callable[[], object]
    device_images: int | None = None   # images one device() call makes (None: one batch)


class Pipeline(abc.ABC):
    """Base of every pipeline: holds the config, the resolved device and the loaded split, and keeps
    the contract's iterator rules (one live iterator; nothing after `close()`; no stages of an epoch
    without a batch). A pipeline implements `_iterate` (one epoch, fixed when called), `_stages` and,
    if it holds resources, `_release`."""

    name: str = ""
    encoding: str | None = None   # what the pipeline reads if fixed ("raw" / "jpeg"), else config's

    def __init__(self, config: PipelineConfig, data: Split | None = None):
        self.config = config = self.resolve(config)
        self.device = resolve_device(config.device)
        if data is not None and (config.encoding == "jpeg" and data.jpeg is None
                                 or data.images.shape[1] != config.image_size or data.split != config.split
                                 or config.max_samples is not None and len(data) > config.max_samples):
            most = f", at most {config.max_samples} samples" if config.max_samples is not None else ""
            raise ValueError(f"{self.name}: the data passed is not the split it reads (data: {data.split} "
                             f"split, {len(data)} samples, {'a' if data.jpeg is not None else 'no'} JPEG copy, "
                             f"{data.images.shape[1]} px; config: {config.split} split{most}, encoding "
                             f"{config.encoding!r}, {config.image_size} px): pass "
                             "sources.open_split(pipelines.resolve_config(name, config))")
        self.data = data if data is not None else open_split(config)
        self.epoch = 0
        self.info: dict[str, object] = {}
        self.closed = False
        self.uploads = Uploader(self.device)   # each epoch's order and draws, to the device
        self._generation = 0        # bumped by every iter(): an older iterator is superseded
        self._live: Iterator[Batch] | None = None   # the newest epoch's generator

    @classmethod
    def resolve(cls, config: PipelineConfig) -> PipelineConfig:
        """The config this pipeline runs with: its own encoding where it reads a fixed one."""
        return config.replace(encoding=cls.encoding) if cls.encoding else config

    def set_epoch(self, epoch: int) -> None:
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"epoch={epoch!r}: expected an integer >= 0")
        self.epoch = epoch

    def __len__(self) -> int:
        return batch_count(len(self.data), self.config)

    def batches(self, epoch: int | None = None) -> list[np.ndarray]:
        """Epoch `epoch`'s (None: this epoch's) sample indices, batch by batch."""
        return epoch_batches(len(self.data), self.config, self.epoch if epoch is None else epoch)

    def draws(self, batches: list[np.ndarray], epoch: int | None = None) -> tuple[torch.Tensor, ...] | None:
        """Epoch `epoch`'s (None: this epoch's) augmentation draws (`epoch_draws`) for the samples
        of `batches`."""
        return epoch_draws(self.config, self.epoch if epoch is None else epoch, sum(len(b) for b in batches))

    def plan(self, epoch: int) -> EpochPlan:
        """Epoch `epoch`'s batches and draws."""
        batches = self.batches(epoch)
        return EpochPlan(epoch, batches, self.draws(batches, epoch))

    def __iter__(self) -> Iterator[Batch]:
        """One epoch (the current `set_epoch`). Ends the previous iterator first."""
        self._check_open()
        self._end_live()
        self._live = self._iterate()
        return _Guarded(self, self._live, self._generation)

    def _end_live(self) -> None:
        """Supersede the live iterator (a new epoch, or `stages()` reusing its buffers): its
        generator is closed now, so its cleanup runs before anything reuses what it held."""
        self._generation += 1
        if self._live is not None:
            live, self._live = self._live, None
            close = getattr(live, "close", None)
            if close is not None:
                close()

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"{self.name} pipeline is closed")

    @abc.abstractmethod
    def _iterate(self) -> Iterator[Batch]:
        """One epoch of contract batches, the epoch and its plan fixed when this is called."""

    def stages(self) -> Stages:
        """This pipeline's stages (see `Stages`), built from the first batch of the current epoch."""
        self._check_open()
        if len(self) == 0:
            raise ValueError(f"{self.name}: the epoch has no batch ({len(self.data)} samples, batch_size "
                             f"{self.config.batch_size}, last_batch={self.config.last_batch!r}): no stage to time")
        return self._stages()

    @abc.abstractmethod
    def _stages(self) -> Stages:
        """`stages()` of a pipeline that is open and whose epoch has a batch."""

    def close(self) -> None:
        """Release workers, streams and buffers. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        self._end_live()
        self._release()

    def _release(self) -> None:
        """What `close()` frees beyond the live iterator (workers, streams, buffers)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Guarded:
    """An epoch iterator that refuses to go on once its pipeline started a newer one or was closed."""

    __slots__ = ("pipeline", "batches", "generation")

    def __init__(self, pipeline: Pipeline, batches: Iterator[Batch], generation: int):
        self.pipeline, self.batches, self.generation = pipeline, batches, generation

    def __iter__(self):
        return self

    def __next__(self) -> Batch:
        p = self.pipeline
        if p._generation != self.generation:
            p._check_open()
            raise RuntimeError(f"{p.name}: this iterator was superseded by a newer iter() of the same "
                               "pipeline (one iterator at a time): iterate the newest one")
        return next(self.batches)


def undecodable_jpeg(files, indices, side: int | None = None) -> tuple[int, str] | None:
    """(i, the decoder's message) for the first i of `indices` whose JPEG bytes `files[i]` do not
    decode on the CPU (or cannot be read: the reader's message), or, given the set's `side`, that
    decode to another size than side x side (a damaged header: a batch of unequal images fails in a
    decoder's or stacking's own words); None if every file decodes. For error paths only (a decoder
    rejected a batch and did not say which file): it decodes every file named.

    The check is libjpeg-turbo through `torchvision.io.decode_jpeg`. In our trials it rejected every
    file that nvJPEG (torchvision on an H100), DALI's CPU decoder or PIL rejected: a missing or
    damaged header (all of them reject it), a file cut short (all but nvJPEG, which decodes it to
    wrong pixels without an error); no PIL setting (`ImageFile.LOAD_TRUNCATED_IMAGES`) makes it
    lenient. Its limit: libjpeg-turbo only warns about most garbage inside the entropy-coded data
    ("Corrupt JPEG data" on stderr) and decodes it to wrong pixels, so such a file passes here, as
    it does in DALI's CPU decoder, PIL and nvJPEG."""
    from torchvision.io import ImageReadMode, decode_jpeg
    for i in indices:
        i = int(i)
        try:
            data = torch.from_numpy(np.frombuffer(bytearray(files[i]), np.uint8))   # a copy: bytes or views
        except OSError as e:   # a file of a tree gone missing
            return i, e.strerror or type(e).__name__
        try:
            image = decode_jpeg(data, mode=ImageReadMode.RGB)
        except (RuntimeError, ValueError) as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            where = first.split(", ", 2)   # torchvision's "decode_jpeg, <source file>:<line>, <message>"
            return i, where[2] if len(where) == 3 and where[1].rpartition(":")[2].isdigit() else first
        if side is not None and tuple(image.shape[1:]) != (side, side):
            return i, f"its header says {image.shape[1]} x {image.shape[2]} px, the set's images are {side} x {side}"
    return None


def undecodable_sample(split: str, index: int, reason: str, copy: str = "JPEG copy",
                       remedy: str = "rebuild it with `pipebench prepare`") -> ValueError:
    """The one-line error naming a sample of the JPEG copy that cannot be decoded, and what to do."""
    return ValueError(f"sample {index} of the {split} {copy} cannot be decoded ({reason}): {remedy}")
