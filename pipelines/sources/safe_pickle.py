"""Reading one CIFAR-10 batch file without trusting it.

The genuine files are pickles written by Python 2; a pickle can name any callable, so they are
read with a restricted unpickler that allows only the few numpy globals the genuine files need,
so a tampered file cannot run code. Shapes, dtypes, labels and counts are validated.
"""
from __future__ import annotations

import codecs
import pickle
from pathlib import Path

import numpy as np

from ..config import NUM_CLASSES
from . import layout
from .layout import ROW_BYTES, CifarFormatError


def _allowed_globals() -> dict[tuple[str, str], object]:
    reconstruct = np.ndarray((0,)).__reduce__()[0]
    frombuffer = np.arange(2).__reduce_ex__(5)[0]
    allowed = {("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
               ("_codecs", "encode"): codecs.encode}
    for package in ("numpy.core", "numpy._core"):   # numpy 1 and numpy 2 spell these differently
        allowed[(f"{package}.multiarray", "_reconstruct")] = reconstruct
        allowed[(f"{package}.numeric", "_frombuffer")] = frombuffer
    return allowed


class _Refused(pickle.UnpicklingError):
    pass


class _RestrictedUnpickler(pickle.Unpickler):
    _allowed = _allowed_globals()

    def find_class(self, module: str, name: str):
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise _Refused(
                f"refusing global {module}.{name}: a CIFAR-10 batch holds only numpy arrays, "
                "lists and strings") from None


def load_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """One batch file -> (data N x 3072 uint8, labels N int64), validated, without running code."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing CIFAR-10 batch file")
    try:
        with path.open("rb") as f:
            obj = _RestrictedUnpickler(f, encoding="bytes").load()
    except _Refused as e:
        raise CifarFormatError(f"{path}: {e}") from None
    except Exception as e:  # truncated or garbled: EOFError, ValueError, ...
        raise CifarFormatError(f"{path}: not a readable CIFAR-10 pickle "
                               f"({type(e).__name__}: {e})") from None
    if not isinstance(obj, dict):
        raise CifarFormatError(f"{path}: expected a dict, found {type(obj).__name__}")
    obj = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in obj.items()}
    for key in ("data", "labels"):
        if key not in obj:
            raise CifarFormatError(f"{path}: no '{key}' entry (keys: {sorted(obj)})")
    data = obj["data"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.shape != (layout.PER_FILE, ROW_BYTES):
        desc = f"{data.shape} {data.dtype}" if isinstance(data, np.ndarray) else type(data).__name__
        raise CifarFormatError(f"{path}: 'data' is {desc}, expected ({layout.PER_FILE}, {ROW_BYTES}) uint8")
    try:
        labels = np.asarray(obj["labels"], dtype=np.int64)
    except (TypeError, ValueError):
        raise CifarFormatError(f"{path}: 'labels' is not a list of integers") from None
    if labels.shape != (layout.PER_FILE,):
        raise CifarFormatError(f"{path}: 'labels' has shape {labels.shape}, expected ({layout.PER_FILE},)")
    if labels.min() < 0 or labels.max() >= NUM_CLASSES:
        raise CifarFormatError(f"{path}: labels span {labels.min()}..{labels.max()}, "
                               f"expected 0..{NUM_CLASSES - 1}")
    return data, labels
