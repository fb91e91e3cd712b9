"""A split of a standard-layout folder in host memory, and back; the download of the genuine set.

`load_split` reads a split's batch files (checked against their checksums first, `verify`, then
each read by `load_batch`) into images as an N x 32 x 32 x 3 uint8 array (HWC, what PIL and the
GPU gathers use) and int64 labels; `write_split` writes one, with its CHECKSUMS.json.
`upscale` repeats pixels to a larger image size. `download_cifar10` fetches and extracts the
genuine set, only when asked for (`pipebench download`).
"""
from __future__ import annotations

import json
import pickle
import tarfile
import zlib
from pathlib import Path

import numpy as np

from ..config import CHANNELS, IMAGE_SIZE
from . import layout
from .cache import writing
from .checksums import CIFAR10_MD5, checksum, recorded, verify
from .layout import BATCH_FOLDER, CHECKSUMS, ROW_BYTES, split_files
from .safe_pickle import load_batch

URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"   # torchvision's CIFAR10.url
ARCHIVE = "cifar-10-python.tar.gz"
ARCHIVE_MD5 = "c58f30108f718f92721af3b95e74349a"                   # torchvision's CIFAR10.tgz_md5


class DownloadError(OSError):
    """The genuine set cannot be fetched or extracted; the message names the URL or the archive and
    what to do."""


def load_split(folder: str | Path, split: str, cache_root: str | Path | None = None,
               limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A split of a standard-layout folder -> (images N x 32 x 32 x 3 uint8, labels N int64), each
    file checked against its checksum before it is read (`verify`). With `limit`, its files are read
    in order until they hold `limit` images (at least; the caller cuts): the later ones are neither
    checked nor read."""
    folder = Path(folder)
    files = split_files(split)
    for name in files:
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder / name}: missing CIFAR-10 batch file")
    parts, held = [], 0
    for name in files:
        verify(folder, (name,), cache_root)
        parts.append(load_batch(folder / name))
        held += len(parts[-1][1])
        if limit is not None and held >= limit:
            break
    data = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    images = data.reshape(-1, CHANNELS, IMAGE_SIZE, IMAGE_SIZE).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


def write_split(folder: Path, split: str, images: np.ndarray, labels: np.ndarray,
                label_names: tuple[str, ...] | None = None) -> None:
    """Write a split in the standard layout (the inverse of `load_split`), recording each file's
    crc32 in the folder's CHECKSUMS.json."""
    files = split_files(split)
    per_file = layout.PER_FILE
    if len(images) != per_file * len(files):
        raise ValueError(f"{split}: {len(images)} images, expected {per_file * len(files)}")
    rows = images.transpose(0, 3, 1, 2).reshape(len(images), ROW_BYTES)
    contents = {}
    for i, name in enumerate(files):
        part = slice(i * per_file, (i + 1) * per_file)
        contents[name] = {"batch_label": f"{split} batch {i + 1}", "labels": labels[part].tolist(),
                          "data": np.ascontiguousarray(rows[part]),
                          "filenames": [f"{j:05d}.png" for j in range(part.start, part.stop)]}
    if label_names is not None:
        contents["batches.meta"] = {"label_names": list(label_names), "num_cases_per_batch": per_file,
                                    "num_vis": ROW_BYTES}
    sums = recorded(folder) or {}
    for name, content in contents.items():
        raw = pickle.dumps(content, protocol=4)
        (folder / name).write_bytes(raw)
        sums[name] = f"{zlib.crc32(raw):08x}"
    (folder / CHECKSUMS).write_text(json.dumps({"crc32": sums}, indent=1))


def upscale(images: np.ndarray, size: int) -> np.ndarray:
    """N x 32 x 32 x C -> N x size x size x C by pixel repetition (size a multiple of 32)."""
    factor = size // images.shape[1]
    if factor == 1:
        return images
    return np.repeat(np.repeat(images, factor, axis=1), factor, axis=2)


def download_cifar10(root: str | Path) -> Path:
    """The genuine set at `<root>/cifar-10-batches-py`: kept as it is if every file matches its
    published md5, else the archive is fetched with torchvision's `download_url` (network access;
    md5-checked; kept in `root`, so a second call does not fetch it again) and extracted with
    tarfile's "data" filter (no member outside the folder, no link out of it, no device file) into
    a temporary folder renamed into place. No network, or any other download failure, is a one-line
    `DownloadError` naming the URL and what to do."""
    root = Path(root)
    final = root / BATCH_FOLDER
    if all((final / name).is_file() and checksum(final / name, "md5") == md5 for name, md5 in CIFAR10_MD5.items()):
        return final
    by_hand = f"or copy {BATCH_FOLDER}/ from a machine that has it to {final}"
    if not hasattr(tarfile, "data_filter"):
        raise DownloadError(f"extracting {URL} safely needs Python >= 3.10.12 (tarfile's data filter): "
                            f"upgrade Python, {by_hand}")
    from torchvision.datasets import utils
    try:
        utils.download_url(URL, str(root), ARCHIVE, ARCHIVE_MD5)
    except (OSError, RuntimeError) as e:   # no network (URLError is an OSError), a damaged download
        raise DownloadError(f"cannot download {URL} ({e}): check the network and run it again, {by_hand}") from None
    with writing(final, "CIFAR-10") as tmp:
        try:
            with tarfile.open(root / ARCHIVE) as archive:
                archive.extractall(tmp, filter="data")
        except (tarfile.TarError, OSError) as e:   # FilterError: a member outside the folder, a link, a device
            raise DownloadError(f"{root / ARCHIVE}: cannot be extracted ({e}): delete it and download "
                                f"again, {by_hand}") from None
        extracted = tmp / BATCH_FOLDER
        if not extracted.is_dir():
            raise DownloadError(f"{root / ARCHIVE}: no {BATCH_FOLDER}/ in it: delete it and download again, {by_hand}")
        for path in list(extracted.iterdir()):
            path.rename(tmp / path.name)
        extracted.rmdir()
    return final
