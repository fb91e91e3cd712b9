"""`resident`: the whole uint8 split on the GPU -- the upper bound on feeding rate.

Bytes: uint8 arrays in host memory -> copied to the device once at construction (timed,
reported as `info["upload_s"]`, not part of any epoch) -> per epoch, on the device: the shuffled
order (one small copy) and every sample's crop offsets and flip as index grids; per batch: one
gather kernel (crop with zero padding + flip) and normalize. No per-step host transfer, and only a
handful of kernel launches per batch, which is what bounds it. The airbench / hlb-CIFAR10 approach.

Loader-only on an H100: 2.28M img/s at batch 512 (results/2026-11-22-h100-step/REPORT.md).
"""
from __future__ import annotations

import time

import numpy as np
import torch

from .base import Pipeline, Stages, crop_grid, draw_augmentation, gather_crops, normalize, pad_images


class ResidentPipeline(Pipeline):
    name = "resident"
    encoding = "raw"

    def __init__(self, config, data=None):
        super().__init__(config, data)
        cuda = self.device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(self.device)
        start = time.perf_counter()
        images = torch.from_numpy(self.data.images).to(self.device)
        self.labels = torch.from_numpy(self.data.labels).to(self.device)
        if cuda:
            torch.cuda.synchronize(self.device)
        self.info["upload_s"] = time.perf_counter() - start
        self.images = pad_images(images, config.pad) if config.augment else images

    def __iter__(self):
        batches = self.batches()
        if not batches:
            return
        order = torch.from_numpy(np.concatenate(batches)).to(self.device)
        if self.config.augment:
            draws = draw_augmentation(len(order), self.config.pad, self.generator(self.device), self.device)
            rows, cols = crop_grid(*draws, self.config.image_size)
        start = 0
        for index in batches:
            stop = start + len(index)
            idx = order[start:stop]
            if self.config.augment:
                pixels = gather_crops(self.images, idx, rows[start:stop], cols[start:stop])
            else:
                pixels = self.images[idx]
            start = stop
            yield normalize(pixels, self.config), self.labels[idx]

    def stages(self) -> Stages:
        """No host stage and no per-step copy: its whole per-batch work is the device stage."""
        if self.images is None:
            raise RuntimeError("resident pipeline is closed")

        def forever():
            while True:
                yield from self

        batches = forever()
        return Stages(host=None, payload=[], copy="none", pins=False, device=lambda: next(batches))

    def close(self) -> None:
        self.images = self.labels = None
