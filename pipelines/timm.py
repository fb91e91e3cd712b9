"""`timm`: the field's most copied GPU prefetcher, as timm's training script builds it.

Bytes (CIFAR-like images): uint8 arrays in host memory -> DataLoader workers (config.num_workers,
persistent) crop the zero-padded image and flip it per sample in numpy (the offsets and flips come
with the sample keys: the epoch's shared draws, `workers.EpochKeys`) and return C x H x W uint8 ->
`timm.data.fast_collate` stacks them into a uint8 batch (no ToTensor: the float conversion happens
on the GPU) -> the DataLoader's pin-memory thread -> `timm.data.PrefetchLoader` copies the next
batch `non_blocking` on its side stream and normalizes it there in the contract's dtype, one batch
ahead. Its output is N x C x H x W contiguous: for `channels_last` one more copy on the consumer's
stream converts it, counted as part of this pipeline's cost. Workers start with config.worker_start
(see `workers.worker_options`).

Hand-over: PrefetchLoader makes each batch on its side stream and makes the consumer's stream wait
for it, but records no use of it on the consumer's stream, so once the batch is dropped the caching
allocator may hand its memory to the side stream's next batch while the consumer's queued work still
reads it. timm 1.0.31 makes its stream wait for the consumer's before each batch; timm 1.0.29 does
not, and a training step captured in a CUDA graph, whose host runs far ahead of the GPU, then read
other labels than those handed over (tests/test_own_loop.py, H200, 2026-12-02). So this pipeline
`record_stream`s both tensors to the consumer's stream as it takes them: safe with either version,
and no host wait.

Photographs (`source="imagefolder:PATH"`): the CPU loader timm's `train.py` runs on ImageNet
(`create_loader` with `use_prefetcher=True`: `transforms_imagenet_train`, `fast_collate`, batches
pinned as with `--pin-mem`, persistent workers, `PrefetchLoader` normalizing on the GPU's side
stream in the contract's dtype). Each worker opens the sample's file from the packed JPEG copy with
PIL and converts it to RGB, as timm's `ImageDataset` does, then does the work of timm's training
transform with the epoch's shared box (`crops.epoch_boxes`: RandomResizedCrop's rule, or eval's
resize 256 + centre crop 224) instead of drawing its own: `F.resized_crop` with the box and the
interpolation of a `RandomResizedCropAndInterpolation`, as that class calls it, the flip, and
`MaybePILToTensor`, the uint8 C x H x W tensor timm 1.0's transforms end with for the prefetcher
(older timm's `ToNumpy` gave the same pixels as a numpy array). Where the suite departs from
`train.py`: the interpolation is bilinear (`create_loader`'s default), not `train.py`'s "random"
(bilinear or bicubic, drawn per sample by the worker), so that every pipeline cuts sample k of an
epoch alike and the pixels depend neither on a worker's random state nor on the number of workers;
`train.py`'s default ColorJitter(0.4) is left out (the suite's augmentation is the crop and the
flip, for every pipeline); and a file that does not decode is named
(`jpeg_errors.undecodable_sample`, as `dataloader` does) instead of skipped for the next one, as
timm's `ImageDataset` does. Per-sample CPU work bounds it: PIL's decode and resize, in as many
processes as there are workers.

Measured loader ceilings per CPU budget and what they feed: the reference run,
results/2026-11-24-h100-reference/REPORT.md.

Needs timm (`pip install -e '.[peers]'`); without it the pipeline is unavailable with that reason.
"""
from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import functional as F   # what timm's transforms call

from .contract import Pipeline, Stages
from .epochs import rank_seeds
from .jpeg_errors import undecodable_sample
from .workers import EpochKeys, SharedArrays, loader_capacity, worker_options
from .config import MEAN, STD
from .options import NUM_WORKERS, WORKER_START
from .peers import Peer




def _import_timm() -> SimpleNamespace:
    """timm's parts this pipeline uses (timm imports much of torchvision: seconds)."""
    from timm.data.loader import PrefetchLoader, fast_collate
    from timm.data.transforms import MaybePILToTensor, RandomResizedCropAndInterpolation
    return SimpleNamespace(PrefetchLoader=PrefetchLoader, fast_collate=fast_collate, MaybePILToTensor=MaybePILToTensor,
                           RandomResizedCropAndInterpolation=RandomResizedCropAndInterpolation)


TIMM = Peer(_import_timm, lambda e: f"timm is not installed: pip install -e '.[peers]' ({e})")

INTERPOLATION = "bilinear"   # on photographs; timm's train.py draws "random" (module docstring)


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


class _Photos(SharedArrays, torch.utils.data.Dataset):
    """Map-style dataset keyed by (index, y, x, h, w, flip): timm's training transform of the
    photograph with the given box and flip (module docstring), a uint8 C x S x S tensor."""

    def __init__(self, data, size: int, split: str):
        self.jpeg, self.offsets, self.labels, self.split = data.jpeg.data, data.jpeg.offsets, data.labels, split
        self.paths = data.jpeg.paths
        timm = TIMM.get()
        self.crop = timm.RandomResizedCropAndInterpolation(size, interpolation=INTERPOLATION)   # its size and mode
        self.to_uint8 = timm.MaybePILToTensor()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, key):
        index, y, x, h, w, flip = key
        file = self.jpeg[self.offsets[index]:self.offsets[index + 1]]
        try:   # timm's ImageDataset: Image.open, then convert (which decodes)
            image = Image.open(io.BytesIO(file)).convert("RGB")
        except OSError as e:   # name the sample, not just PIL's complaint
            raise undecodable_sample(self.split, index, str(e), paths=self.paths) from None
        image = F.resized_crop(image, y, x, h, w, self.crop.size, self.crop.interpolation)
        if flip:   # transforms.RandomHorizontalFlip's work
            image = F.hflip(image)
        return self.to_uint8(image), int(self.labels[index])


class TimmPrefetchPipeline(Pipeline):
    name = "timm"
    encoding = "raw"
    options = (NUM_WORKERS, WORKER_START)
    missing = TIMM
    photos = True
    worker_modules = (__name__, "timm.data")   # the workers' transforms come from timm

    def __init__(self, config, data=None):
        super().__init__(config, data)
        if config.photos:
            self.samples = _Photos(self.data, config.image_size, config.split)
        else:
            pad = config.pad if config.augment else 0
            padded = np.pad(self.data.images, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
            self.samples = _Crops(padded, self.data.labels, config.image_size)
        cuda, workers, timm = self.device.type == "cuda", config.num_workers, TIMM.get()
        loader = torch.utils.data.DataLoader(
            self.samples, batch_sampler=EpochKeys(self), num_workers=workers, collate_fn=timm.fast_collate,
            pin_memory=cuda, persistent_workers=workers > 0, **worker_options(config, self.worker_modules, workers),
            generator=torch.Generator().manual_seed(int(rank_seeds(config, 3)[0])))
        self.loader = timm.PrefetchLoader(loader, mean=MEAN, std=STD, device=self.device,
                                          img_dtype=getattr(torch, config.dtype))
        self.memory_format = torch.channels_last if config.channels_last else torch.contiguous_format

    @property
    def queue_capacity(self) -> int:
        """The DataLoader's (`workers.loader_capacity`), and the batch PrefetchLoader copies ahead."""
        return loader_capacity(self.loader.loader) + 1

    def _iterate(self):
        consumer = torch.cuda.current_stream(self.device) if self.device.type == "cuda" else None
        for images, labels in self.loader:
            if consumer is not None:   # made on PrefetchLoader's stream (module docstring: hand-over)
                images.record_stream(consumer)
                labels.record_stream(consumer)
            yield images.contiguous(memory_format=self.memory_format), labels

    def _stages(self) -> Stages:
        """host: the DataLoader alone (workers, fast_collate and, on CUDA, its pin-memory thread), no
        copy; payload: one uint8 batch (of S x S crops on photographs); device: PrefetchLoader's
        normalization of a batch already on the device, plus the memory-format conversion."""
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
