"""CIFAR-10 sources: real files read safely, a synthetic stand-in, cached JPEG copies, and your own
arrays.

Where the bytes live: every source on disk is a folder in the standard python layout
(`cifar-10-batches-py/data_batch_1..5`, `test_batch`, `batches.meta`: `layout`): the genuine set at
`<data_root>/cifar-10-batches-py`, the synthetic set at `<data_root>/synthetic-seed<S>/` (or under
`cache_root`). `data_root` defaults to one folder per user (`$PIPEBENCH_DATA`, else
`$XDG_CACHE_HOME/pipebench`, else `~/.cache/pipebench`). A split is read into host memory as an
N x 32 x 32 x 3 uint8 array (HWC, what PIL and the GPU gathers use) and int64 labels, upscaled
there to the config's image size; `Split.from_arrays` takes arrays you already have instead.

- `safe_pickle`: one batch file read without trusting it (`load_batch`): no code runs, and numpy
  receives no state from the file, only arrays built from validated shapes, dtypes and bytes.
- `checksums`: every file checked on every load, against the crc32s pipebench recorded when it
  wrote the folder (CHECKSUMS.json), or, for a folder without them (a download), against the md5s
  torchvision publishes, once.
- `cache`: where data and copies are written (JPEG copies beside the data or under `cache_root`),
  each folder atomically, with the mode the user's umask gives.
- `cifar`: a split of a standard-layout folder in memory and back (`load_split`, `write_split`);
  `download_cifar10` (the archive md5-checked, extracted with tarfile's "data" filter).
- `synthetic`: the deterministic synthetic set (`ensure_synthetic`, `synthesize`).
- `jpeg`: the JPEG copies, packed (`prepare_jpeg`, `JpegSet`) and as a file tree
  (`prepare_jpeg_tree`); upscaled sets encoded on a thread pool (`encode_jpegs`).
- `photos`: a set of photographs like ImageNet's, cut deterministically from a few real ones
  (`make_photos`), in the ImageFolder layout (`pipebench prepare --photos N`).
- `split`: what a pipeline reads (`Split`, `resolve_folder`, `open_split`) and what it is called in
  result rows (`Split.source`): `cifar10` only for the genuine files, `synthetic-seed<S>`, `custom`
  (another folder pipebench wrote) or `arrays`.

The names below are the package's interface: `from pipelines import sources; sources.open_split(...)`.
"""
from __future__ import annotations

from .cache import WRITABLE_HINT, CacheWriteError
from .checksums import CIFAR10_MD5, VERIFIED, checksum, checksum_origin, verify
from .cifar import URL, DownloadError, download_cifar10, load_split, upscale, write_split
from .jpeg import (JPEG_FILES, JPEG_SUBSAMPLING, JpegSet, encode_jpeg, encode_jpegs, load_jpeg, prepare_jpeg,
                   prepare_jpeg_tree, tree_path)
from .layout import (BATCH_FOLDER, CHECKSUMS, PER_FILE, ROW_BYTES, SYNTHETIC_META, TEST_FILES,
                     TRAIN_FILES, CifarFormatError)
from .safe_pickle import load_batch
from .split import Split, open_split, resolve_folder
from .synthetic import SYNTHETIC_CLASSES, ensure_synthetic, synthesize

__all__ = [
    "BATCH_FOLDER", "CHECKSUMS", "CIFAR10_MD5", "JPEG_FILES", "JPEG_SUBSAMPLING", "PER_FILE", "ROW_BYTES",
    "SYNTHETIC_CLASSES", "SYNTHETIC_META", "TEST_FILES", "TRAIN_FILES", "URL", "VERIFIED", "WRITABLE_HINT",
    "CacheWriteError", "CifarFormatError", "DownloadError", "JpegSet", "Split",
    "checksum", "checksum_origin", "download_cifar10", "encode_jpeg", "encode_jpegs", "ensure_synthetic", "load_batch",
    "load_jpeg", "load_split", "open_split", "prepare_jpeg", "prepare_jpeg_tree", "resolve_folder",
    "synthesize", "tree_path", "upscale", "verify", "write_split",
]
