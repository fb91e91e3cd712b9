"""`dataloader`: what most PyTorch users write -- the baseline.

Bytes: uint8 arrays in host memory -> per sample, in DataLoader worker processes, a PIL image
(decoded from the JPEG copy when config.encoding == "jpeg") -> torchvision RandomCrop(32,
padding=4) + RandomHorizontalFlip + ToTensor + Normalize -> default collate (float32, 4x the
uint8 bytes) -> `.to(device)` from pageable memory. `config.pin_memory` and `config.non_blocking`
switch on DataLoader pinning and asynchronous copies for the classic ablation; bf16 and
channels_last are applied on the device after the copy.

Per-sample CPU work bounds it: FIELD.md measured 22.0k img/s with 15 workers on an H100 host.

Determinism: each sample's transforms draw from a torch seed derived from (seed, epoch, batch,
position), so the output for a fixed seed does not depend on the number of workers.
"""
from __future__ import annotations

import io

import numpy as np
import torch
from PIL import Image
from torchvision import transforms

from .base import Pipeline
from .config import IMAGE_SIZE, MEAN, PAD, STD, FLIP_P


class _Samples(torch.utils.data.Dataset):
    """Map-style dataset keyed by (index, seed): a PIL image through torchvision transforms."""

    def __init__(self, data, transform):
        self.images, self.labels, self.jpeg = data.images, data.labels, data.jpeg
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, key):
        index, seed = key
        torch.random.default_generator.manual_seed(seed)
        if self.jpeg is not None:
            image = Image.open(io.BytesIO(self.jpeg[index])).convert("RGB")
        else:
            image = Image.fromarray(self.images[index])
        return self.transform(image), int(self.labels[index])


class _EpochPlan(torch.utils.data.Sampler):
    """Batch sampler reading the pipeline's current epoch: lists of (index, seed) keys."""

    def __init__(self, pipeline: "DataLoaderPipeline"):
        self.pipeline = pipeline

    def __iter__(self):
        p = self.pipeline
        for b, index in enumerate(p.batches()):
            seeds = np.random.SeedSequence([p.config.seed, p.epoch, b, 2]).generate_state(len(index))
            yield list(zip(index.tolist(), seeds.tolist()))

    def __len__(self) -> int:
        return len(self.pipeline)


class DataLoaderPipeline(Pipeline):
    name = "dataloader"

    def __init__(self, config, data=None):
        super().__init__(config, data)
        steps = [transforms.RandomCrop(IMAGE_SIZE, padding=PAD),
                 transforms.RandomHorizontalFlip(FLIP_P)] if config.augment else []
        transform = transforms.Compose(steps + [transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
        cuda = self.device.type == "cuda"
        self.loader = torch.utils.data.DataLoader(
            _Samples(self.data, transform), batch_sampler=_EpochPlan(self),
            num_workers=config.num_workers, persistent_workers=config.num_workers > 0,
            pin_memory=config.pin_memory and cuda)
        self.non_blocking = config.non_blocking and cuda
        self.dtype = getattr(torch, config.dtype)
        self.memory_format = torch.channels_last if config.channels_last else torch.contiguous_format

    def __iter__(self):
        if self.loader is None:
            raise RuntimeError("dataloader pipeline is closed")
        for images, labels in self.loader:
            images = images.to(self.device, non_blocking=self.non_blocking)
            labels = labels.to(self.device, non_blocking=self.non_blocking)
            yield images.to(self.dtype).contiguous(memory_format=self.memory_format), labels

    def close(self) -> None:
        self.loader = None   # drops the persistent worker iterator, which shuts the workers down
