"""The JPEG copies of a standard-layout folder, for the pipelines that decode JPEG.

`prepare_jpeg`: every image of both splits encoded once by PIL at a recorded quality and image size
(upscaled first; upscaled sets on a thread pool, `encode_jpegs`), stored packed: one byte array +
offsets per split (`JpegSet`), in `jpeg-q<Q>` (or `jpeg-q<Q>-<S>px`) beside the data folder or under
`cache_root` (see `cache`). `prepare_jpeg_tree` writes the same bytes as one file per image in class
folders (`jpeg-q<Q>-files`, `<split>/<label>/<index>.jpg`), for file readers.

Both are caches: JPEG.json records the crc32 of the packed copy's files and the checksums of the
source it was encoded from; TREE.json the crc32s of the packed copy the tree was written from. A
copy that is missing, damaged (a file's crc32 differs; checked whenever the copy is opened: 0.02 s
for its 61 MB at 32 px) or made from other files (the synthetic set regenerated differently, real
data replaced) is written again, with a one-line note on stderr. The tree's 60,000 files are not
checked one by one.
"""
from __future__ import annotations

import io
import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import IMAGE_SIZE, NUM_CLASSES
from .cache import cache_dir, note, read_json, writing
from .checksums import CIFAR10_MD5, checksum, recorded, stale
from .cifar import load_split

JPEG_SUBSAMPLING = "4:2:0"   # PIL's default at quality < 96; fixed so every copy is alike
JPEG_FILES = ("train.data.npy", "train.offsets.npy", "test.data.npy", "test.offsets.npy")


@dataclass(frozen=True)
class JpegSet:
    """Packed JPEG files of one split: image i is `data[offsets[i]:offsets[i+1]]`."""
    data: np.ndarray      # uint8, all files back to back
    offsets: np.ndarray   # int64, N + 1
    quality: int
    paths: tuple[str, ...] | None = None   # photographs of a folder: the file each was read from (as
                                           # text, bytes that are not UTF-8 escaped); None: a copy

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        """File i's bytes as a uint8 view (a buffer for PIL / io.BytesIO, an array for DALI)."""
        return self.data[self.offsets[i]:self.offsets[i + 1]]


def encode_jpeg(image: np.ndarray, quality: int) -> bytes:
    """One H x W x 3 uint8 image as a JPEG file (PIL, `JPEG_SUBSAMPLING`)."""
    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=quality, subsampling=JPEG_SUBSAMPLING)
    return buf.getvalue()


def encode_jpegs(images: np.ndarray, quality: int, size: int = IMAGE_SIZE) -> list[bytes]:
    """`encode_jpeg` of each image upscaled to `size` px, in order: the bytes of encoding them one
    after another. Each image is upscaled alone, never the whole split at once (9 GB at 224 px).

    Upscaled sets are encoded on a thread pool, one thread per usable core but at most size / 32:
    PIL releases the GIL only while it resizes and while it encodes into a file (not into a
    BytesIO), and the rest of each image's work holds it, so more threads only wait. Measured on 16
    cores (Pillow 12.3): 2.4x faster at 224 px, 6.9x at 512 px; at 32 px any thread pool was
    slower, so the 32-px set is encoded one image after another."""
    if size == IMAGE_SIZE:
        return [encode_jpeg(image, quality) for image in images]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    chunks = [images[i:i + 64] for i in range(0, len(images), 64)]
    with ThreadPoolExecutor(min(cores, size // IMAGE_SIZE)) as pool:
        return [file for files in pool.map(partial(_encode_chunk, quality=quality, size=size), chunks)
                for file in files]


def _encode_chunk(images: np.ndarray, quality: int, size: int) -> list[bytes]:
    """The images upscaled by PIL (nearest neighbour: pixel repetition, as `upscale`) and encoded
    one after another into one temporary file, cut into the files."""
    from PIL import Image
    ends = []
    with tempfile.TemporaryFile() as f:
        for image in images:
            picture = Image.fromarray(image).resize((size, size), Image.NEAREST)
            picture.save(f, format="JPEG", quality=quality, subsampling=JPEG_SUBSAMPLING)
            ends.append(f.tell())
        f.seek(0)
        data = f.read()
    return [data[start:end] for start, end in zip([0, *ends], ends)]


def _jpeg_cache(folder: Path, quality: int, size: int, cache_root: str | Path | None) -> Path:
    return cache_dir(folder, cache_root) / (f"jpeg-q{quality}" + ("" if size == IMAGE_SIZE else f"-{size}px"))


def prepare_jpeg(folder: str | Path, quality: int = 90, size: int = IMAGE_SIZE,
                 cache_root: str | Path | None = None) -> Path:
    """Encode both splits of a standard-layout folder (upscaled to `size` px) and return the
    copy's folder; an existing copy is checked first and encoded again if damaged or made from
    other source files (see the module docstring)."""
    folder = Path(folder)
    final = _jpeg_cache(folder, quality, size, cache_root)
    crc32s = recorded(folder)   # a download that loads is the files whose md5s are published
    made_from = {"crc32": crc32s} if crc32s is not None else {"md5": CIFAR10_MD5}
    why = stale(final, "JPEG.json", made_from, JPEG_FILES)
    if why is None:
        return final
    note(final, why, "encoding it again")
    import PIL
    with writing(final, "the JPEG copy") as tmp:
        for split in ("train", "test"):
            images, _ = load_split(folder, split, cache_root)
            files = encode_jpegs(images, quality, size)
            offsets = np.zeros(len(files) + 1, np.int64)
            np.cumsum([len(b) for b in files], out=offsets[1:])
            np.save(tmp / f"{split}.data.npy", np.frombuffer(b"".join(files), np.uint8))
            np.save(tmp / f"{split}.offsets.npy", offsets)
        (tmp / "JPEG.json").write_text(json.dumps(
            {"quality": quality, "subsampling": JPEG_SUBSAMPLING, "encoder": f"Pillow {PIL.__version__}",
             "size": size, "source": str(folder), "made_from": made_from,
             "crc32": {name: checksum(tmp / name) for name in JPEG_FILES}}, indent=1))
    return final


def prepare_jpeg_tree(folder: str | Path, quality: int = 90, size: int = IMAGE_SIZE,
                      cache_root: str | Path | None = None) -> Path:
    """The same JPEG files as a class-folder tree, `<split>/<label>/<index>.jpg`, for file readers
    (DALI `fn.readers.file`), written from the packed copy and again whenever that copy changed.
    Returns the tree's root."""
    packed = prepare_jpeg(folder, quality, size, cache_root)
    final = packed.with_name(packed.name + "-files")
    made_from = read_json(packed / "JPEG.json")["crc32"]
    why = stale(final, "TREE.json", made_from)
    if why is None:
        return final
    note(final, why, "writing it again")
    with writing(final, "the JPEG file tree") as tmp:
        for split in ("train", "test"):
            jpeg = _read_jpeg(packed, split, quality)
            _, labels = load_split(folder, split, cache_root)
            for label in range(NUM_CLASSES):
                (tmp / split / str(label)).mkdir(parents=True)
            for i, label in enumerate(labels):
                (tmp / tree_path(split, i, label)).write_bytes(jpeg[i])
        (tmp / "TREE.json").write_text(json.dumps({"jpeg": str(packed), "made_from": made_from}))
    return final


def tree_path(split: str, index: int, label: int) -> str:
    return f"{split}/{label}/{index:05d}.jpg"


def _read_jpeg(cache: Path, split: str, quality: int) -> JpegSet:
    return JpegSet(np.load(cache / f"{split}.data.npy"), np.load(cache / f"{split}.offsets.npy"), quality)


def load_jpeg(folder: str | Path, split: str, quality: int, size: int = IMAGE_SIZE,
              cache_root: str | Path | None = None) -> JpegSet:
    """The packed JPEG copy of a split, checked (and encoded again if needed) by `prepare_jpeg`."""
    return _read_jpeg(prepare_jpeg(folder, quality, size, cache_root), split, quality)
