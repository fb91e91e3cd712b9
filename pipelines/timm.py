"""`timm`: the field's most copied GPU prefetcher, as timm's training script builds it.

Bytes: uint8 arrays in host memory -> DataLoader workers (config.num_workers, persistent) crop the
zero-padded image and flip it per sample in numpy (the offsets and flips come with the sample keys:
the epoch's shared draws, `workers.EpochKeys`) and return C x H x W uint8 ->
`timm.data.fast_collate` stacks them into a uint8 batch (no ToTensor: the float conversion happens
on the GPU) -> the DataLoader's pin-memory thread -> `timm.data.PrefetchLoader` copies the next batch
`non_blocking` on its side stream and normalizes it there in the contract's dtype, one batch ahead.
Its output is N x C x H x W contiguous: for `channels_last` one more copy on the consumer's stream
converts it, counted as part of this pipeline's cost. Workers start with config.worker_start (see
`workers.worker_options`).

Measured loader ceilings per CPU budget and what they feed: the reference run,
results/2026-11-24-h100-reference/REPORT.md.

Needs timm (`pip install -e '.[peers]'`); without it the pipeline is unavailable with that reason.
"""
from __future__ import annotations

import numpy as np
import torch

from .contract import Pipeline, Stages
from .epochs import rank_seeds
from .workers import EpochKeys, SharedArrays, loader_capacity, worker_options
from .config import MEAN, STD
from .options import NUM_WORKERS, WORKER_START

try:
    from timm.data.loader import PrefetchLoader, fast_collate
    MISSING = ""
except ImportError as e:   # optional peer: pipelines.available() reports this, build() raises it
    MISSING = f"timm is not installed: pip install -e '.[peers]' ({e})"


class _Crops(SharedArrays, torch.utils.data.Dataset):
    """Map-style dataset keyed by (index, dy, dx, flip): the crop of the zero-padded uint8 image."""

    def __init__(self, padded: np.ndarray, labels: np.ndarray, size: int):
        self.padded, self.labels, self.size = padded, labels, size

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, key):
        index, dy, dx, flip = key
        crop = self.padded[index, dy:dy + self.size, dx:dx + self.size]
        if flip:
            crop = crop[:, ::-1]
        return np.ascontiguousarray(crop.transpose(2, 0, 1)), int(self.labels[index])


class TimmPrefetchPipeline(Pipeline):
    name = "timm"
    encoding = "raw"
    options = (NUM_WORKERS, WORKER_START)
    missing = MISSING

    def __init__(self, config, data=None):
        super().__init__(config, data)
        pad = config.pad if config.augment else 0
        padded = np.pad(self.data.images, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
        self.samples = _Crops(padded, self.data.labels, config.image_size)
        cuda = self.device.type == "cuda"
        workers = config.num_workers
        loader = torch.utils.data.DataLoader(
            self.samples, batch_sampler=EpochKeys(self), num_workers=workers, collate_fn=fast_collate,
            pin_memory=cuda, persistent_workers=workers > 0, **worker_options(config, __name__, workers),
            generator=torch.Generator().manual_seed(int(rank_seeds(config, 3)[0])))
        self.loader = PrefetchLoader(loader, mean=MEAN, std=STD, device=self.device,
                                     img_dtype=getattr(torch, config.dtype))
        self.memory_format = torch.channels_last if config.channels_last else torch.contiguous_format

    @property
    def queue_capacity(self) -> int:
        """The DataLoader's (`workers.loader_capacity`), and the batch PrefetchLoader copies ahead."""
        return loader_capacity(self.loader.loader) + 1

    def _iterate(self):
        for images, labels in self.loader:
            yield images.contiguous(memory_format=self.memory_format), labels

    def _stages(self) -> Stages:
        """host: the DataLoader alone (workers, fast_collate and, on CUDA, its pin-memory thread), no
        copy; payload: one uint8 batch; device: PrefetchLoader's normalization of a batch already on
        the device, plus the memory-format conversion."""
        self._end_live()   # the stages iterate the same workers' plan
        batch, labels = next(iter(self.loader.loader))
        on_device = batch.to(self.device)
        mean, std = self.loader.mean, self.loader.std
        cuda = self.device.type == "cuda"
        return Stages(host=lambda: iter(self.loader.loader), payload=[batch, labels],
                      copy="pinned" if cuda else "none", pins=cuda,
                      device=lambda: on_device.to(mean.dtype).sub_(mean).div_(std)
                      .contiguous(memory_format=self.memory_format))

    def _release(self) -> None:
        self.loader = None   # drops the persistent workers, which shuts them down
