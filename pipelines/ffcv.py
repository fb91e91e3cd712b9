"""`ffcv`: FFCV (libffcv/ffcv) set up as its own ImageNet example sets it up (ffcv-imagenet's
`write_imagenet.py` and `train_imagenet.py`): a peer measured as its authors run it. Photographs only.

Bytes: the split's photographs are written once into an FFCV dataset file (`.beton`) by FFCV's
`DatasetWriter` in `num_workers` processes (each photograph decoded by PIL from the bytes in
memory, then FFCV's `RGBImageField(write_mode="proportion", max_resolution=500, jpeg_quality=90)`,
the settings of the example's ResNet-50 set) -> FFCV's `Loader` maps the file (`os_cache=True`: the
page cache holds it), its `num_workers` numba threads decode each batch's images with their crop
(`RandomResizedCropRGBImageDecoder((S, S))`, or for eval `CenterCropRGBImageDecoder((S, S),
ratio=224/256)`: the suite's resize 256 + centre crop 224) straight into pinned uint8 buffers,
mirror them (`RandomHorizontalFlip`, training only), copy them `non_blocking` to the device on its
own CUDA stream per batch slot (`ToDevice`), view them as channels-last N x C x H x W
(`ToTorchImage`) and normalize them there to float16 (`NormalizeImage` with the contract's mean and
std x 255: a lookup-table kernel, through CuPy) -> `batches_ahead` batches ahead of the consumer,
whose stream waits for the batch's stream -> on the consumer's stream, one conversion into the
contract's dtype and memory format (a new tensor: FFCV's buffers are reused). Labels:
`IntDecoder`, `ToTensor`, `Squeeze(1)`, `ToDevice`, copied out of FFCV's buffers. Without a GPU,
FFCV's CPU `NormalizeImage` runs where it can, on the decoded arrays before `ToTensor`.

How the stored bytes differ from the suite's JPEG files: every photograph whose longer side is
over 500 px is downscaled to 500 (OpenCV's area filter; the suite's photographs have sides up to
800), then FFCV draws per photograph whether it is stored as a JPEG re-encoded by OpenCV at
quality 90 (a second lossy generation; `ffcv_jpeg_share` of them, 0.5 as in the example's
ResNet-50 set) or as raw RGB pixels, which decoding only copies. Where a test split is read,
FFCV's example writes it alike.

What differs from the other pipelines here, as FFCV does it:
  - its crops and flips are FFCV's own random draws (numba's per-thread generators, not seeded),
    not the boxes every other pipeline cuts (`crops.epoch_boxes`): the crop rule is the same
    (torchvision's RandomResizedCrop, scale 0.08-1, ratio 3/4-4/3; flip p = 0.5), the samples are not;
  - its order is FFCV's `OrderOption.RANDOM` seeded with `seed`: epoch e is FFCV's permutation
    of (seed + e) (`set_epoch` selects it), not the suite's epoch plan; `shuffle=False` is FFCV's
    SEQUENTIAL (the split's order). The example's QUASI_RANDOM order saves disk reads where the
    file is not cached; with `os_cache` it saves nothing, and its order depends on the epochs
    drawn before it (it shuffles in place), so `set_epoch` could not select one;
  - the example trains under autocast on its float16 images; the contract's dtype (bfloat16 or
    float32) is one conversion more, and float16's 10-bit mantissa keeps every pixel level apart;
  - a last batch of one would lose its batch dimension to the example's `Squeeze()`: `Squeeze(1)`.
An error inside FFCV's thread (a decoder's) ends that thread, and the consumer then waits forever:
FFCV does not pass it on.

FFCV's thread makes a buffer slot's GPU work wait for the consumer's stream, but its numba threads
write the next batch into that slot's pinned host buffer at once: when the consumer's stream runs
several batches behind, a copy not yet run to the GPU reads the next batch's pixels (seen on an
H100: the GPU batches differed from the CPU ones). So before each batch is taken, the host waits
until the consumer's stream has copied out the batch before it (an event): FFCV's thread can then
reuse a slot only after its copy ran, and the training thread runs at most about one step ahead
of the GPU. FFCV also takes its buffers from PyTorch's caching allocator on the consumer's stream
and writes them on its own streams, which the allocator does not know: a buffer handed back while
work on it is queued could be handed out again. So the device is synchronized as each epoch
starts and once FFCV's thread has stopped: no queued work touches a buffer FFCV takes or frees.

The `.beton`: `<cache_root or the photo folder's parent>/ffcv-<folder>-<hash of its
path>/<split>-<samples>/data.beton`, written while the pipeline is built (outside every timer)
and again when the split's files, labels or the write settings change (FFCV.json records them).
FFCV's writer waits for its worker processes without a timeout, and an error ends a worker: a
photograph that cannot be decoded is written as a 1 x 1 stand-in, and once the writer ends the
first such file is a one-line error naming it (`jpeg_errors.undecodable_sample`); no `.beton` is kept.

CIFAR's sources are refused: FFCV's CIFAR example augments otherwise (translate and cutout), and
the suite's CIFAR pipelines all cut the one epoch plan's crops. One process reads the whole split
(world_size 1): FFCV's distributed order needs torch.distributed.

Needs FFCV, built from source against the system's OpenCV and libjpeg-turbo (not an extra of
this project: CI has no system packages): `apt-get install libopencv-dev libturbojpeg0-dev
pkg-config`, then `pip install ffcv`; with a GPU, CuPy too (`pip install cupy-cuda12x`, or
`cupy-cuda13x`), which FFCV's GPU normalization imports. Without them the pipeline is unavailable
with that reason.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import multiprocessing
import queue
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from PIL import Image

from .config import MEAN, STD
from .contract import Pipeline, Stages
from .jpeg_errors import undecodable_sample
from .kernels import normalize
from .options import NUM_WORKERS, Option
from .peers import Peer
from .sources.cache import note, writing
from .sources.checksums import stale

class _CupyMissing(ImportError):
    """FFCV imports, but normalizing on the GPU needs CuPy."""


def _import_ffcv() -> SimpleNamespace:
    """FFCV's parts this pipeline uses (importing them compiles numba functions: seconds)."""
    from ffcv.fields import IntField, RGBImageField
    from ffcv.fields.basics import IntDecoder
    from ffcv.fields.rgb_image import CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import NormalizeImage, RandomHorizontalFlip, Squeeze, ToDevice, ToTensor, ToTorchImage
    from ffcv.writer import DatasetWriter
    if torch.cuda.is_available() and importlib.util.find_spec("cupy") is None:
        raise _CupyMissing("FFCV normalizes on the GPU through CuPy, which is not installed: pip install "
                           "cupy-cuda12x (or cupy-cuda13x)")
    return SimpleNamespace(
        IntField=IntField, RGBImageField=RGBImageField, IntDecoder=IntDecoder, DatasetWriter=DatasetWriter,
        CenterCropRGBImageDecoder=CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder=RandomResizedCropRGBImageDecoder,
        Loader=Loader, OrderOption=OrderOption, NormalizeImage=NormalizeImage, RandomHorizontalFlip=RandomHorizontalFlip,
        Squeeze=Squeeze, ToDevice=ToDevice, ToTensor=ToTensor, ToTorchImage=ToTorchImage)


FFCV = Peer(_import_ffcv, lambda e: str(e) if isinstance(e, _CupyMissing) else (
    f"FFCV is not installed: apt-get install libopencv-dev libturbojpeg0-dev pkg-config, then pip install ffcv ({e})"))

JPEG_SHARE = Option("ffcv_jpeg_share", 0.5, "share of the photographs FFCV's .beton stores as JPEG (quality 90), the "
                    "rest as raw pixels (its write_mode 'proportion'; 0.5: its ImageNet example's ResNet-50 set)",
                    kind=float, low=0.0, high=1.0, listed=True)
MAX_RESOLUTION = 500   # the example's ResNet-50 set: longer side at most 500 px
JPEG_QUALITY = 90
CHUNK_SIZE = 100       # the example writer's samples per task
BATCHES_AHEAD = 3      # Loader's default, which the example keeps
EVAL_CROP_RATIO = 224 / 256
BETON, META = "data.beton", "FFCV.json"


class _Photos:
    """The split's photographs as FFCV's writer reads them: (RGB uint8 H x W x 3, label), decoded
    by PIL from the bytes in memory, which the forked writer processes share. One that does not
    decode is a 1 x 1 stand-in (a writer process that raised would stall the writer), the lowest
    such index kept for `undecodable` to name."""

    def __init__(self, data):
        self.jpeg, self.labels, self.split = data.jpeg, data.labels, data.split
        self.first_bad = multiprocessing.Value("q", len(data))   # shared with the writer's processes

    def __len__(self) -> int:
        return len(self.labels)

    def _decode(self, i: int) -> np.ndarray:
        with Image.open(io.BytesIO(self.jpeg[i])) as image:
            return np.asarray(image.convert("RGB"))

    def __getitem__(self, i: int):
        try:
            image = self._decode(i)
        except OSError:
            with self.first_bad.get_lock():
                self.first_bad.value = min(self.first_bad.value, i)
            image = np.zeros((1, 1, 3), np.uint8)
        return image, int(self.labels[i])

    def undecodable(self) -> ValueError | None:
        """The error naming the first photograph that did not decode, None if all did."""
        i = self.first_bad.value
        if i == len(self):
            return None
        try:
            self._decode(i)
        except OSError as e:
            return undecodable_sample(self.split, i, str(e), paths=self.jpeg.paths)
        return None


def beton_folder(config, samples: int) -> Path:
    """Where the split's `.beton` lives (module docstring)."""
    folder = Path(config.photo_folder).resolve()
    base = Path(config.cache_root) if config.cache_root is not None else folder.parent
    tag = hashlib.sha256(str(folder).encode()).hexdigest()[:8]
    return base / f"ffcv-{folder.name}-{tag}" / f"{config.split}-{samples}"


def write_settings(config, data) -> dict:
    """What the `.beton` is made from: the split's content (crc32 of its files, offsets and labels)
    and the writer's settings."""
    crc = 0
    for array in (data.jpeg.data, data.jpeg.offsets, data.labels):
        crc = zlib.crc32(memoryview(np.ascontiguousarray(array)).cast("B"), crc)
    return {"crc32": f"{crc:08x}", "samples": len(data), "write_mode": "proportion",
            "max_resolution": MAX_RESOLUTION, "jpeg_share": config.ffcv_jpeg_share, "jpeg_quality": JPEG_QUALITY,
            "ffcv": importlib.metadata.version("ffcv")}


def prepare_beton(config, data) -> Path:
    """The split's `.beton`, written by FFCV's writer unless one made from the same files with the
    same settings is there."""
    final = beton_folder(config, len(data))
    made_from = write_settings(config, data)
    why = stale(final, META, made_from)
    if why is None:
        return final / BETON
    note(final, why, "writing it again")
    with writing(final, "the FFCV dataset file") as tmp:
        ffcv = FFCV.get()
        fields = {"image": ffcv.RGBImageField(write_mode="proportion", max_resolution=MAX_RESOLUTION,
                                              compress_probability=config.ffcv_jpeg_share, jpeg_quality=JPEG_QUALITY),
                  "label": ffcv.IntField()}
        writer = ffcv.DatasetWriter(str(tmp / BETON), fields, num_workers=max(1, config.num_workers))
        photos = _Photos(data)
        writer.from_indexed_dataset(photos, chunksize=CHUNK_SIZE)
        bad = photos.undecodable()
        if bad is not None:
            raise bad
        (tmp / META).write_text(json.dumps({"made_from": made_from, "source": config.photo_folder}, indent=1))
    return final / BETON


class FfcvPipeline(Pipeline):
    name = "ffcv"
    options = (JPEG_SHARE, NUM_WORKERS)
    missing = FFCV
    photos = True
    cifar = False

    def __init__(self, config, data=None):
        if config.world_size > 1:
            raise ValueError(f"ffcv: one process reads the whole split (world_size=1), not world_size="
                             f"{config.world_size}: FFCV's distributed order needs torch.distributed")
        super().__init__(config, data)
        self.cuda = self.device.type == "cuda"
        self.dtype = getattr(torch, config.dtype)
        self.memory_format = torch.channels_last if config.channels_last else torch.contiguous_format
        self.path = prepare_beton(self.config, self.data)
        self.loader = self._loader(self.device, normalized=True)
        self.host_loader = None   # the loader without copy and normalize, built by stages()
        self._stop(iter(self.loader), first=True)   # numba compiles FFCV's pipeline here, not in a window

    def _loader(self, device: torch.device, normalized: bool) -> Any:
        """FFCV's Loader over the `.beton`: the example's pipelines, with the copy to `device` and the
        normalization to float16, or (`normalized` False) host batches of uint8 only."""
        c, ffcv = self.config, FFCV.get()
        size = (c.image_size, c.image_size)
        images = ([ffcv.RandomResizedCropRGBImageDecoder(size), ffcv.RandomHorizontalFlip()] if c.augment
                  else [ffcv.CenterCropRGBImageDecoder(size, ratio=EVAL_CROP_RATIO)])
        labels = [ffcv.IntDecoder(), ffcv.ToTensor(), ffcv.Squeeze(1)]
        if normalized:
            scaled = ffcv.NormalizeImage(np.array(MEAN) * 255, np.array(STD) * 255, np.float16)
            on_device = [ffcv.ToTensor(), ffcv.ToDevice(device, non_blocking=True), ffcv.ToTorchImage(channels_last=True)]
            images += (on_device + [scaled]) if device.type == "cuda" else ([scaled] + on_device)
            labels += [ffcv.ToDevice(device, non_blocking=True)]
        else:
            images += [ffcv.ToTensor()]
        return ffcv.Loader(str(self.path), batch_size=c.batch_size, num_workers=max(1, c.num_workers),
                           order=ffcv.OrderOption.RANDOM if c.shuffle else ffcv.OrderOption.SEQUENTIAL, os_cache=True,
                           drop_last=c.last_batch == "drop", seed=c.seed, batches_ahead=BATCHES_AHEAD,
                           pipelines={"image": images, "label": labels})

    @property
    def queue_capacity(self) -> int:
        """FFCV's output queue (`batches_ahead`) and the batch its thread finished and waits to put."""
        return BATCHES_AHEAD + 1

    def _settle(self) -> None:
        """On the GPU: wait until every stream's queued work has run (module docstring)."""
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def _stop(self, batches, first: bool = False) -> None:
        """End an FFCV epoch iterator: its thread told to stop, its queue emptied until it has (its
        end-of-epoch mark waits for room in the queue without a timeout), so that no two threads run
        FFCV's numba-parallel code at once; then the device settled. `first`: take one batch first
        (compiles its code)."""
        if first:
            next(batches)
        batches.close()
        while batches.is_alive():
            with contextlib.suppress(queue.Empty):
                batches.output_queue.get(timeout=0.05)
        self._settle()

    def _iterate(self):
        self._settle()
        self.loader.next_epoch = self.epoch   # FFCV's epoch: its order is the permutation of (seed + epoch)
        return self._epoch(iter(self.loader))

    def _epoch(self, batches):
        copied = None   # on the GPU: the event after the batch before was copied out, on this stream
        try:
            while True:
                if copied is not None:
                    copied.synchronize()   # before FFCV's thread may decode into that batch's pinned slot
                batch = next(batches, None)
                if batch is None:
                    return
                images, labels = batch   # both in FFCV's reused buffers: copied out on this stream
                out = images.to(self.dtype, memory_format=self.memory_format), labels.clone()
                if self.cuda:
                    copied = torch.cuda.Event()
                    copied.record()
                yield out
        finally:
            self._stop(batches)

    def _stages(self) -> Stages:
        """host: FFCV's loader up to its host batches (decode, crop, flip, into its pinned buffers),
        no copy; payload: one uint8 N x S x S x 3 batch and its labels; device: the suite's
        normalize into the contract's dtype, standing in for FFCV's normalize and the conversion."""
        self._end_live()
        self.host_loader = self.host_loader or self._loader(torch.device("cpu"), normalized=False)
        self.host_loader.next_epoch = self.epoch
        batches = iter(self.host_loader)
        images, labels = (t.clone() for t in next(batches))
        self._stop(batches)
        on_device = images.to(self.device)

        def host():
            self.host_loader.next_epoch = self.epoch
            batches = iter(self.host_loader)
            try:
                for batch_images, batch_labels in batches:
                    yield [batch_images, batch_labels], batch_labels
            finally:
                self._stop(batches)

        return Stages(host=host, payload=[images, labels], copy="pinned" if self.cuda else "none", pins=False,
                      device=lambda: normalize(on_device, self.config))

    def _release(self) -> None:
        self.loader = self.host_loader = None
