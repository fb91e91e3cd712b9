"""`dataloader`: what most PyTorch users write -- the baseline.

Bytes: uint8 arrays in host memory -> per sample, in DataLoader worker processes, a PIL image
(decoded from the JPEG copy when config.encoding == "jpeg") -> torchvision RandomCrop(S,
padding=S/8) + RandomHorizontalFlip + ToTensor + Normalize -> default collate (float32, 4x the
uint8 bytes) -> `.to(device)` from pageable memory. `config.pin_memory` and `config.non_blocking`
switch on DataLoader pinning and asynchronous copies for the classic ablation; bf16 and
channels_last are applied on the device after the copy.

Per-sample CPU work bounds it: 41k img/s loader-only with 15 workers on an H100 host
(results/2026-11-22-h100-step/REPORT.md).

Determinism: each sample's transforms draw from a torch seed derived from (seed, epoch, batch,
position, and the rank when sharded), so the output for a fixed seed does not depend on the
number of workers; the process's own torch RNG is restored after each sample.

Workers start with config.worker_start (forkserver by default, safe in a threaded process; see
`base.worker_context`) and receive the arrays through shared memory.
"""
from __future__ import annotations

import io

import torch
from PIL import Image
from torchvision import transforms

from .base import Pipeline, SharedArrays, Stages, rank_seeds, undecodable_sample, worker_context
from .config import MEAN, STD, FLIP_P


class _Samples(SharedArrays, torch.utils.data.Dataset):
    """Map-style dataset keyed by (index, seed): a PIL image through torchvision transforms."""

    def __init__(self, data, transform, split: str):
        self.images = data.images if data.jpeg is None else None   # workers receive only what they read
        self.labels = data.labels
        self.jpeg, self.offsets = (data.jpeg.data, data.jpeg.offsets) if data.jpeg is not None else (None, None)
        self.transform, self.split = transform, split

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, key):
        index, seed = key
        if self.jpeg is not None:
            try:
                file = self.jpeg[self.offsets[index]:self.offsets[index + 1]]
                image = Image.open(io.BytesIO(file)).convert("RGB")
            except OSError as e:   # name the sample, not just the codec's complaint
                raise undecodable_sample(self.split, index, str(e)) from None
        else:
            image = Image.fromarray(self.images[index])
        with torch.random.fork_rng(devices=[]):   # the caller's RNG (the trainer's, with 0 workers) untouched
            torch.random.default_generator.manual_seed(seed)
            return self.transform(image), int(self.labels[index])


class _EpochPlan(torch.utils.data.Sampler):
    """Batch sampler reading the pipeline's current epoch: lists of (index, seed) keys."""

    def __init__(self, pipeline: "DataLoaderPipeline"):
        self.pipeline = pipeline

    def __iter__(self):
        p = self.pipeline
        for b, index in enumerate(p.batches()):
            seeds = rank_seeds(p.config, p.epoch, b, 2, count=len(index))
            yield list(zip(index.tolist(), seeds.tolist()))

    def __len__(self) -> int:
        return len(self.pipeline)


class DataLoaderPipeline(Pipeline):
    name = "dataloader"

    def __init__(self, config, data=None):
        super().__init__(config, data)
        steps = [transforms.RandomCrop(config.image_size, padding=config.pad),
                 transforms.RandomHorizontalFlip(FLIP_P)] if config.augment else []
        transform = transforms.Compose(steps + [transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
        cuda = self.device.type == "cuda"
        self.samples = _Samples(self.data, transform, config.split)
        self.pins = config.pin_memory and cuda
        self.loader = self.make_loader(pin_memory=self.pins)
        self.host_loader = None   # the same loader without pinning, built by stages()
        self.non_blocking = config.non_blocking and cuda
        self.dtype = getattr(torch, config.dtype)
        self.memory_format = torch.channels_last if config.channels_last else torch.contiguous_format

    def make_loader(self, pin_memory: bool, **options) -> torch.utils.data.DataLoader:
        """The DataLoader over this pipeline's samples and epoch plan (config.num_workers persistent
        workers); `options` override DataLoader arguments (e.g. num_workers, collate_fn)."""
        options = {"num_workers": self.config.num_workers, "pin_memory": pin_memory,
                   "generator": torch.Generator().manual_seed(self.config.seed), **options}   # not the global RNG
        options.setdefault("persistent_workers", options["num_workers"] > 0)
        options.setdefault("multiprocessing_context", worker_context(self.config, __name__, options["num_workers"]))
        return torch.utils.data.DataLoader(self.samples, batch_sampler=_EpochPlan(self), **options)

    def _on_device(self, images: torch.Tensor) -> torch.Tensor:
        return images.to(self.dtype).contiguous(memory_format=self.memory_format)

    def __iter__(self):
        if self.loader is None:
            raise RuntimeError("dataloader pipeline is closed")
        for images, labels in self.loader:
            images = images.to(self.device, non_blocking=self.non_blocking)
            labels = labels.to(self.device, non_blocking=self.non_blocking)
            yield self._on_device(images), labels

    def stages(self) -> Stages:
        """host: the DataLoader (same workers, no pinning); payload: the collated float32 batch;
        device: the dtype / memory-format conversion after the copy."""
        if self.loader is None:
            raise RuntimeError("dataloader pipeline is closed")
        self.host_loader = self.host_loader or self.make_loader(pin_memory=False)
        keys = next(iter(_EpochPlan(self)))
        images, labels = torch.utils.data.default_collate([self.samples[k] for k in keys])
        on_device = images.to(self.device)
        copy = ("pinned" if self.pins else "pageable") if self.device.type == "cuda" else "none"
        return Stages(host=lambda: iter(self.host_loader), payload=[images, labels], copy=copy,
                      pins=self.pins, device=lambda: self._on_device(on_device))

    def close(self) -> None:
        self.loader = self.host_loader = None   # drops the persistent workers, which shuts them down
