"""Your own JPEG photographs, in torchvision's `ImageFolder` layout (`source="imagefolder:PATH"`).

PATH holds a folder per class (sorted names: labels 0, 1, ...), each holding JPEG files; or PATH
holds `train/` and `val/` (or `test/`) in that layout, one per split. A split is read into host memory
as its files' bytes (`JpegSet`) and each image's height and width (from its header): the pipelines
that decode JPEGs cut ImageNet's crops from them (`pipelines.crops`). `max_samples` takes the
first samples in class-interleaved order (the first file of every class, then the second, ...), so
a small subset still holds every class.

Every file is checked up front, and a folder that cannot be used is a one-line ValueError naming
the file or folder (its name's bytes that are not UTF-8 escaped, `shown`): no class folders, an
empty class, a name that is not UTF-8 (rename it), a file that is not a JPEG (by its first bytes), a
header PIL cannot read or one claiming more pixels than PIL's decompression-bomb bound (read before
anything is decoded, `jpeg_size`), more classes than the models' outputs. A file that does not
decode is named later, by the pipeline that decodes it (`JpegSet.paths`). `compare` and `sweep`
check each folder they read this way once before anything runs (`check_imagefolder`).
"""
from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
from PIL import Image, JpegImagePlugin

from ..config import NUM_CLASSES
from .jpeg import JpegSet

JPEG_MAGIC = b"\xff\xd8\xff"
MAX_FILE_BYTES = 256 << 20   # more than any photograph: a file this large is not read (a sparse 40 GB one was)
VAL_FOLDERS = ("val", "test")


def shown(path: str | Path) -> str:
    """`path` as text to print or write: bytes of its name that are not UTF-8 as `\\xff` escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def utf8_named(path: Path) -> Path:
    """`path`, whose name must be UTF-8: the files' names end up in messages and result rows."""
    try:
        path.name.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{shown(path)}: a name that is not UTF-8: rename it") from None
    return path


def read_photo(path: Path) -> bytes:
    """The bytes of photograph `path`; a one-line ValueError naming it where it is larger than any
    photograph (MAX_FILE_BYTES), before it is read."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ValueError(f"{shown(path)}: {size / 2**30:.1f} GiB, larger than any photograph (at most "
                         f"{MAX_FILE_BYTES >> 20} MiB a file here): remove it")
    return path.read_bytes()


def jpeg_size(path: str | Path, data: bytes) -> tuple[int, int]:
    """(width, height) from the header of JPEG file `path`, whose bytes are `data`, not decoded;
    a one-line ValueError naming the file if it is not a JPEG, its header does not read, or it
    claims more pixels than PIL's decompression-bomb bound (`Image.MAX_IMAGE_PIXELS`)."""
    if not data.startswith(JPEG_MAGIC):
        raise ValueError(f"{shown(path)}: not a JPEG file (the pipelines here decode JPEG only)")
    try:   # the plugin's own class reads the header alone: Image.open's bomb check would not say the size
        with JpegImagePlugin.JpegImageFile(io.BytesIO(data)) as image:
            width, height = image.size
    except (OSError, SyntaxError) as e:
        raise ValueError(f"{shown(path)}: an unreadable JPEG ({e})") from None
    bound = Image.MAX_IMAGE_PIXELS
    if bound is not None and width * height > bound:
        raise ValueError(f"{shown(path)}: its header says {width} x {height} px, over PIL's decompression-bomb "
                         f"bound of {bound} pixels: remove it, or re-encode it smaller")
    return width, height


def split_folder(root: str | Path, split: str) -> Path:
    """The folder of `split` under `root` (module docstring)."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"imagefolder {shown(root)}: no such folder")
    if (root / "train").is_dir():
        if split == "train":
            return root / "train"
        for name in VAL_FOLDERS:
            if (root / name).is_dir():
                return root / name
        raise ValueError(f"imagefolder {shown(root)}: has train/ but no val/ or test/ for the test split")
    if split == "test":
        raise ValueError(f"imagefolder {shown(root)}: one folder of classes is the train split only; for a test split "
                         "put the classes under train/ and val/")
    return root


def check_imagefolder(root: str | Path, split: str, max_samples: int | None = None) -> None:
    """What `read_imagefolder` checks, every file read once and its header checked (`jpeg_size`),
    nothing kept: a run checks a folder before it starts (the first file that cannot be used, named
    in one ValueError), not in each configuration."""
    order, _ = _listed(root, split, max_samples)
    for path, _ in order:
        jpeg_size(path, read_photo(path))


def _listed(root: str | Path, split: str, max_samples: int | None) -> tuple[list[tuple[Path, int]], list[Path]]:
    """The (file, label) pairs `read_imagefolder` reads, in class-interleaved order, and the class folders."""
    folder = split_folder(root, split)
    classes = sorted(utf8_named(p) for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise ValueError(f"imagefolder {shown(folder)}: no class folders in it (expected {shown(folder)}/<class>/"
                         "<image>.jpg)")
    if len(classes) > NUM_CLASSES:
        raise ValueError(f"imagefolder {shown(folder)}: {len(classes)} classes; the models here have {NUM_CLASSES} "
                         f"outputs: use at most {NUM_CLASSES}")
    files = []
    for label, cls in enumerate(classes):
        found = sorted(utf8_named(p) for p in cls.iterdir() if p.is_file() and not p.name.startswith("."))
        if not found:
            raise ValueError(f"imagefolder {shown(cls)}: an empty class (no files in it)")
        files.append([(path, label) for path in found])
    order = [item for k in range(max(map(len, files))) for group in files if k < len(group) for item in group[k:k + 1]]
    if max_samples is not None:
        order = order[:max_samples]
    return order, classes


def read_imagefolder(root: str | Path, split: str, max_samples: int | None = None):
    """(JpegSet, labels int64, heights, widths, class names) of `split` (module docstring)."""
    order, classes = _listed(root, split, max_samples)
    chunks, heights, widths = [], [], []
    for path, _ in order:
        data = read_photo(path)
        width, height = jpeg_size(path, data)
        chunks.append(np.frombuffer(data, dtype=np.uint8))
        heights.append(height)
        widths.append(width)
    offsets = np.zeros(len(chunks) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in chunks], out=offsets[1:])
    jpeg = JpegSet(np.concatenate(chunks), offsets, 0, tuple(shown(path) for path, _ in order))   # quality 0: as given
    labels = np.array([label for _, label in order], dtype=np.int64)
    return jpeg, labels, np.array(heights), np.array(widths), [c.name for c in classes]
