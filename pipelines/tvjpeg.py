"""`tvjpeg`: the GPU-decode alternative a PyTorch user already has, `torchvision.io.decode_jpeg`.

Bytes: the packed JPEG copy in host memory, wrapped once as one uint8 tensor per file (no copy)
-> per batch, `decode_jpeg(list, device="cuda")` (nvJPEG batched decode; the file bytes cross the
bus inside it) -> stack -> the shared GPU crop/flip gather on the zero-padded batch -> normalize.
Labels live on the device; the epoch's order and crop grid are copied there once per epoch through
reused pinned buffers (`epochs.Uploader`): no blocking copy, not even per epoch.
Without a GPU the same calls decode on the CPU.

Photographs (`source="imagefolder:PATH"`): the same batched decode, then each image's box
(`crops`: RandomResizedCrop, or eval's centre crop) cut and resized to S x S on the device,
mirrored where drawn, normalized (`kernels.resized_crops`): one interpolation per image.

Measured loader ceilings (32 and 224 px) and what they feed: the reference run,
results/2026-11-24-h100-reference/REPORT.md; on photographs: results/2026-11-26-h100-photos/.
"""
from __future__ import annotations

import torch
from torchvision.io import ImageReadMode, decode_jpeg

from .contract import Pipeline, Stages
from .jpeg_errors import undecodable_jpeg, undecodable_sample
from .kernels import crop_normalize, normalize, resized_crops, warm_crop_normalize


class TorchvisionJpegPipeline(Pipeline):
    name = "tvjpeg"
    encoding = "jpeg"
    photos = True

    def __init__(self, config, data=None):
        super().__init__(config, data)
        jpeg = self.data.jpeg
        self.files = [torch.from_numpy(jpeg[i]) for i in range(len(jpeg))]
        self.labels = torch.from_numpy(self.data.labels).to(self.device)
        if self.data.sizes is None:   # photographs are resized per image (`resized_crops`), not gathered
            warm_crop_normalize(self.device, self.config, planar=True)

    @property
    def queue_capacity(self) -> int:
        """None: every batch is decoded inside `next()`."""
        return 0

    def _iterate(self):
        batches = self.batches()
        return self._epoch(batches, self.draws(batches))

    def _epoch(self, batches, draws):
        if not batches:
            return
        order = self.uploads.order(batches)
        draws = self._placed(draws)
        start = 0
        for index in batches:
            n = len(index)
            yield self._decode([self.files[i] for i in index], index, draws, start), self.labels[order[start:start + n]]
            start += n

    def _placed(self, draws):
        """An epoch's draws where `_decode` reads them: CIFAR's crops on the device, a
        photograph's boxes and flips on the host (one per-image crop each)."""
        if self.data.sizes is not None:
            return list(zip(*(t.tolist() for t in draws)))
        return self.uploads.draws(draws)

    def decode_files(self, files: list[torch.Tensor]) -> list[torch.Tensor]:
        """One batch of JPEG files -> 3 x S x S uint8 images on the device, in one batched call."""
        return decode_jpeg(files, mode=ImageReadMode.RGB, device=self.device)

    def _decode(self, files: list[torch.Tensor], index, draws, start: int) -> torch.Tensor:
        """The files of samples `index` (positions start.. of the epoch) -> contract images: decode,
        crop/flip (the epoch's draws on the device) + normalize."""
        n = len(files)
        photos = self.data.sizes is not None
        try:
            decoded = self.decode_files(files)
            if photos:   # each its own size: its box, resized to S x S (`kernels.resized_crops`)
                return normalize(resized_crops(decoded, draws[start:start + n], self.config.image_size), self.config)
            pixels = torch.stack(decoded).permute(0, 2, 3, 1)   # B x S x S x 3 view
        except RuntimeError:   # one error for the whole batch (or unequal sizes): name the sample if a file is bad
            bad = undecodable_jpeg(self.data.jpeg, index, None if photos else self.data.images.shape[1])
            if bad is None:
                raise
            raise undecodable_sample(self.config.split, *bad) from None
        return crop_normalize(pixels, torch.arange(n, device=self.device), draws, self.config, start)

    def _stages(self) -> Stages:
        """host: gathering each batch's file tensors; payload: the files' bytes, which
        `decode_jpeg` copies itself (from pageable memory); device: decode + augment + normalize."""
        batches = self.batches()

        def host():
            for index in batches:
                yield [self.files[i] for i in index], torch.from_numpy(self.data.labels[index])

        index = batches[0]
        first = [self.files[i] for i in index]
        draws = self._placed(self.draws(batches))
        payload = [torch.cat(first)]   # the labels live on the device
        return Stages(host=host, payload=payload, copy="pageable" if self.device.type == "cuda" else "none",
                      pins=False, device=lambda: self._decode(first, index, draws, 0))

    def _release(self) -> None:
        self.files = []
