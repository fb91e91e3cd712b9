"""The standard python layout of CIFAR-10, shared by every module of `pipelines.sources`.

A standard-layout folder (`cifar-10-batches-py`) holds `data_batch_1..5` (the train split),
`test_batch` and `batches.meta`. A data batch is a pickled dict: 'data', a PER_FILE x 3072 uint8
array (each row one 32 x 32 image: its red, then green, then blue plane, row by row) and 'labels',
PER_FILE integers in 0..9. A folder pipebench wrote also holds CHECKSUMS.json (the crc32 of each
file, see `checksums`); the synthetic set also holds SYNTHETIC.json (its seed).

`PER_FILE` is read as `layout.PER_FILE` wherever it is used, so that a test can shrink every batch
file by patching it here alone.
"""
from __future__ import annotations

from ..config import CHANNELS, IMAGE_SIZE

BATCH_FOLDER = "cifar-10-batches-py"
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILES = ("test_batch",)
PER_FILE = 10_000
ROW_BYTES = CHANNELS * IMAGE_SIZE * IMAGE_SIZE
CHECKSUMS = "CHECKSUMS.json"          # written by write_split: {"crc32": {file name: 8 hex digits}}
SYNTHETIC_META = "SYNTHETIC.json"     # written by ensure_synthetic: {"seed": S, "generator": ...}


class CifarFormatError(ValueError):
    """A file that is not a valid CIFAR-10 python batch, or differs from its checksum; the
    message names the file."""


def split_files(split: str) -> tuple[str, ...]:
    """The batch files of a split ("train" or "test")."""
    return TRAIN_FILES if split == "train" else TEST_FILES
