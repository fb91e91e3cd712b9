"""The batch contract every pipeline implements (`Pipeline`) and its guard (one iterator at a time).

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
  - `next_syncs`: whether `next()` waits for the device's queued work (a blocking copy), so time
    spent in it is not all waiting for input.
  - `info`: facts for result rows (e.g. the resident upload time); `data.source`: where data came from.
  - `stages()`: the per-batch work split into stages that can each run alone (`Stages`), so the
    harness can measure every stage's ceiling in isolation.
  - `queue_capacity`: how many batches it can hold ready ahead of its consumer (made by its
    workers, threads or launches while nobody asks), so a timer can take them off before a window.

What every pipeline shares beside the contract lives in modules named for it: `epochs` (the epoch
plan, sharding, augmentation draws, their upload), `kernels` (crop + flip + normalize),
`workers` (DataLoader workers and the forkserver), `jpeg_errors` (naming a JPEG that fails).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import torch

from .config import PipelineConfig
from .crops import epoch_boxes
from .epochs import EpochPlan, Uploader, batch_count, epoch_batches, epoch_draws
from .sources import Split, open_split

Batch = tuple[torch.Tensor, torch.Tensor]


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"PipelineConfig.device={name!r}: CUDA is not available on this machine")
    return device


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
    options: tuple = ()   # the knobs it reads beyond those every pipeline reads (`pipelines.options`)
    missing: str = ""     # why it cannot be built here: a `peers.Peer` reads as its optional dependency's reason
    # The sources it reads (`pipelines.build` refuses the others, `pipelines.source_refusal` says why):
    photos: bool = False  # reads photographs (`imagefolder:PATH`) with ImageNet's crops (`pipelines.crops`)
    cifar: bool = True    # reads CIFAR-like images of one size (cifar10, synthetic, arrays); False: photographs only
    # Its `next()` waits for the device's queued work (a blocking copy on the current stream), so a
    # caller's time in `next()` includes the model's queued steps; set per instance where it depends on the config.
    next_syncs: bool = False
    # What the forkserver of its DataLoader workers imports, once for every worker (`workers.worker_options`)
    worker_modules: tuple[str, ...] = ()

    def __init__(self, config: PipelineConfig, data: Split | None = None):
        self.config = config = self.resolve(config)
        self.device = resolve_device(config.device)
        if data is not None and (config.encoding == "jpeg" and data.jpeg is None
                                 or (data.images is None) != config.photos
                                 or data.images is not None and data.images.shape[1] != config.image_size
                                 or data.split != config.split
                                 or config.max_samples is not None and len(data) > config.max_samples):
            most = f", at most {config.max_samples} samples" if config.max_samples is not None else ""
            pixels = "photographs" if data.images is None else f"{data.images.shape[1]} px"
            raise ValueError(f"{self.name}: the data passed is not the split it reads (data: {data.split} "
                             f"split, {len(data)} samples, {'a' if data.jpeg is not None else 'no'} JPEG copy, "
                             f"{pixels}; config: {config.split} split{most}, encoding "
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
    def copies(cls, config: PipelineConfig) -> tuple[str, ...]:
        """The copies of the data this pipeline reads with `config` (a resolved one), made ahead of
        time outside every timer: "jpeg" (`sources.prepare_jpeg`), "jpeg-tree" (`prepare_jpeg_tree`)."""
        return ("jpeg",) if config.encoding == "jpeg" else ()

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

    @property
    def queue_capacity(self) -> int:
        """The most batches this pipeline holds ready ahead of its consumer: made (by its workers,
        threads or device-side launches) while nobody calls `next()`, each handed over without
        waiting for the work that makes it. An upper bound, from the pipeline's configuration. 0
        here: a pipeline that makes every batch inside `next()`; one that makes batches ahead says how
        many."""
        return 0

    def batches(self, epoch: int | None = None) -> list[np.ndarray]:
        """Epoch `epoch`'s (None: this epoch's) sample indices, batch by batch."""
        return epoch_batches(len(self.data), self.config, self.epoch if epoch is None else epoch)

    def draws(self, batches: list[np.ndarray], epoch: int | None = None) -> tuple[torch.Tensor, ...] | None:
        """Epoch `epoch`'s (None: this epoch's) augmentation draws (`epoch_draws`) for the samples
        of `batches`; for photographs their crop boxes and flips (`crops.epoch_boxes`), always."""
        epoch = self.epoch if epoch is None else epoch
        if self.data.sizes is not None:
            order = np.concatenate(batches) if batches else np.zeros(0, dtype=np.int64)
            return tuple(torch.from_numpy(a) for a in epoch_boxes(self.config, epoch, self.data.sizes[order]))
        return epoch_draws(self.config, epoch, sum(len(b) for b in batches))

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
