"""`dataloader`: what most PyTorch users write -- the baseline.

Bytes: uint8 arrays in host memory -> per sample, in DataLoader worker processes, a PIL image
(decoded from the JPEG copy when config.encoding == "jpeg") -> torchvision's crop with zero padding
(S/8 px) and horizontal flip, `to_tensor`, `normalize` (the functional forms of `RandomCrop`,
`RandomHorizontalFlip`, `ToTensor`, `Normalize`) -> default collate (float32, 4x the uint8 bytes)
-> `.to(device)` from pageable memory. `config.pin_memory` and `config.non_blocking` switch on
DataLoader pinning and asynchronous copies for the classic ablation; bf16 and channels_last are
applied on the device after the copy. Unless both are on, the copy in `next()` waits for the
model's queued work on the stream (`next_syncs`).

Photographs (`source="imagefolder:PATH"`): decoded with PIL, the sample's box (`crops`: torchvision's
`RandomResizedCrop` rule, or eval's resize 256 + centre crop 224) resized to S x S, flipped,
normalized: the torchvision ImageNet reference example's per-image work.

`dataloader_decoder="tensor"`: the JPEG files decoded by `torchvision.io.decode_jpeg` on the CPU
(libjpeg-turbo into a uint8 tensor) and the same transforms run on tensors (antialiased bilinear
resize), the torchvision v2 way; the pixels agree with PIL's within rounding.

Per-sample CPU work bounds it: PIL and torchvision's per-image Python, in as many processes as
there are workers.

Determinism: the crop offsets and flips come with each sample's key from the batch sampler
(`workers.EpochKeys`: the epoch's shared draws, the same every pipeline uses), so a worker draws
nothing, touches no random state, and the output does not depend on the number of workers. This
costs a worker less than drawing from a seeded per-worker generator, as user code does, would.

Workers start with config.worker_start (forkserver by default, safe in a threaded process; see
`workers.worker_options`) and receive the arrays through shared memory.
"""
from __future__ import annotations

import io

import torch
from PIL import Image
from torchvision.io import ImageReadMode, decode_jpeg
from torchvision.transforms import functional as TF

from .contract import Pipeline, Stages
from .jpeg_errors import undecodable_sample
from .workers import EpochKeys, SharedArrays, loader_capacity, worker_options
from .config import MEAN, STD
from .options import ENCODING, NUM_WORKERS, WORKER_START, Option

PIN_MEMORY = Option("pin_memory", False, "workers hand over pinned batches (DataLoader pin_memory=True)", kind=bool)
NON_BLOCKING = Option("non_blocking", False, "copy batches to the device asynchronously (non_blocking=True)", kind=bool)
DECODER = Option("dataloader_decoder", "pil", "JPEG files: pil = PIL decode and PIL transforms (the torchvision "
                 "reference example); tensor = torchvision.io.decode_jpeg on the CPU and tensor transforms", kind=str,
                 choices=("pil", "tensor"), listed=True)


class _Samples(SharedArrays, torch.utils.data.Dataset):
    """Map-style dataset keyed by (index, dy, dx, flip): a PIL image cropped, flipped, to a tensor,
    normalized; for photographs keyed by (index, y, x, h, w, flip): the box resized to S x S
    (`resized_crop`, as `RandomResizedCrop` and eval's resize + centre crop do), flipped."""

    def __init__(self, data, size: int, pad: int | None, split: str, decoder: str = "pil"):
        self.images = data.images if data.jpeg is None else None   # workers receive only what they read
        self.labels = data.labels
        self.jpeg, self.offsets, self.paths = ((data.jpeg.data, data.jpeg.offsets, data.jpeg.paths)
                                               if data.jpeg is not None else (None, None, None))
        self.size, self.pad, self.split, self.tensors = size, pad, split, decoder == "tensor"

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, key):
        index, *box, flip = key
        if self.jpeg is not None:
            file = self.jpeg[self.offsets[index]:self.offsets[index + 1]]
            try:
                if self.tensors:   # 3 x H x W uint8
                    image = decode_jpeg(torch.from_numpy(file), mode=ImageReadMode.RGB)
                else:
                    image = Image.open(io.BytesIO(file)).convert("RGB")
            except (OSError, RuntimeError) as e:   # name the sample, not just the codec's complaint
                raise undecodable_sample(self.split, index, str(e), paths=self.paths) from None
        else:
            image = Image.fromarray(self.images[index])
        if len(box) == 4:   # a photograph: RandomResizedCrop's (or eval's) box, resized
            image = TF.resized_crop(image, *box, [self.size, self.size], antialias=True)
        elif self.pad is not None:   # RandomCrop(size, padding=pad) at (dy, dx)
            image = TF.crop(TF.pad(image, self.pad), *box, self.size, self.size)
        if flip:   # RandomHorizontalFlip
            image = TF.hflip(image)
        pixels = image.float().div_(255) if isinstance(image, torch.Tensor) else TF.to_tensor(image)
        return TF.normalize(pixels, MEAN, STD), int(self.labels[index])


class DataLoaderPipeline(Pipeline):
    name = "dataloader"
    options = (ENCODING, DECODER, PIN_MEMORY, NON_BLOCKING, WORKER_START, NUM_WORKERS)
    photos = True
    worker_modules = (__name__,)

    def __init__(self, config, data=None):
        super().__init__(config, data)
        cuda = self.device.type == "cuda"
        self.samples = _Samples(self.data, config.image_size, config.pad if config.augment else None, config.split,
                                config.dataloader_decoder)
        self.pins = config.pin_memory and cuda
        self.loader = self.make_loader(pin_memory=self.pins)
        self.host_loader = None   # the same loader without pinning, built by stages()
        self.non_blocking = config.non_blocking and cuda
        # a blocking copy synchronizes with the stream, and CUDA may too to stage an asynchronous one
        # from pageable memory: only a non_blocking copy from pinned memory surely does not wait
        self.next_syncs = cuda and not (self.non_blocking and self.pins)
        self.dtype = getattr(torch, config.dtype)
        self.memory_format = torch.channels_last if config.channels_last else torch.contiguous_format

    def make_loader(self, pin_memory: bool, **options) -> torch.utils.data.DataLoader:
        """The DataLoader over this pipeline's samples and epoch plan (config.num_workers persistent
        workers); `options` override DataLoader arguments (e.g. num_workers, collate_fn)."""
        options = {"num_workers": self.config.num_workers, "pin_memory": pin_memory,   # its own seed, not the global RNG
                   "generator": torch.Generator().manual_seed(self.config.seed), **options}
        options.setdefault("persistent_workers", options["num_workers"] > 0)
        options = {**worker_options(self.config, self.worker_modules, options["num_workers"]), **options}
        return torch.utils.data.DataLoader(self.samples, batch_sampler=EpochKeys(self), **options)

    @property
    def queue_capacity(self) -> int:
        """The DataLoader's (`workers.loader_capacity`)."""
        return loader_capacity(self.loader)

    def _on_device(self, images: torch.Tensor) -> torch.Tensor:
        return images.to(self.dtype).contiguous(memory_format=self.memory_format)

    def _iterate(self):
        for images, labels in self.loader:
            images = images.to(self.device, non_blocking=self.non_blocking)
            labels = labels.to(self.device, non_blocking=self.non_blocking)
            yield self._on_device(images), labels

    def _stages(self) -> Stages:
        """host: the DataLoader (same workers, no pinning); payload: the collated float32 batch;
        device: the dtype / memory-format conversion after the copy."""
        self._end_live()   # the host stage iterates the same workers' plan
        self.host_loader = self.host_loader or self.make_loader(pin_memory=False)
        keys = next(iter(EpochKeys(self)))
        images, labels = torch.utils.data.default_collate([self.samples[k] for k in keys])
        on_device = images.to(self.device)
        copy = ("pinned" if self.pins else "pageable") if self.device.type == "cuda" else "none"
        return Stages(host=lambda: iter(self.host_loader), payload=[images, labels], copy=copy,
                      pins=self.pins, device=lambda: self._on_device(on_device))

    def _release(self) -> None:
        self.loader = self.host_loader = None   # drops the persistent workers, which shuts them down
