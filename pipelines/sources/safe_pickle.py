"""Reading one CIFAR-10 batch file without trusting it (`load_batch`).

The genuine files are pickles written by Python 2 (read with `encoding="bytes"`); files written by
`write_split` are protocol 4 pickles. A pickle names the callables that rebuild its objects, so it is
read by a restricted unpickler that resolves only the globals a genuine batch uses, and none of them
to numpy itself: each resolves to a stand-in that validates what the file hands it before any numpy
code sees it (numpy's own `dtype` / `ndarray.__setstate__` trust their input: an object-dtype array
state whose data is not there makes numpy read heap memory as Python objects and crash).

- `numpy.dtype(spec, align, copy)` + its state: only the plain integer dtypes (`u1` for the pixels,
  `i1`..`u8`), in a byte order numpy writes; object, structured, float, string dtypes are refused.
- `numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), b"b")` + its state `(1, shape, dtype,
  fortran, raw bytes)` (protocols 0-4), and numpy 2's `numpy._core.numeric._frombuffer(raw bytes,
  dtype, shape, order)` (protocol 5): the shape a tuple of non-negative integers, the dtype one of
  the above, the raw data bytes of exactly the length the shape and dtype say. The array is built
  here, with `np.frombuffer` (a writable copy).
- `_codecs.encode(text, "latin1")`: how protocol 2 spells bytes written by Python 3.
- Any other global, or a global used in any other way, is refused.

Then shapes, dtypes, labels and counts are validated. Whatever the file holds, the result is the
data or a one-line `CifarFormatError` naming the file.
"""
from __future__ import annotations

import math
import pickle
from pathlib import Path

import numpy as np

from ..config import NUM_CLASSES
from . import layout
from .layout import ROW_BYTES, CifarFormatError

INTEGER_DTYPES = ("u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8")
MAX_DIMS = 32


class _Refused(pickle.UnpicklingError):
    pass


def _text(value) -> str:
    """A str, or bytes as a Python 2 pickle read with encoding="bytes" holds them, as str."""
    if isinstance(value, bytes):
        return value.decode("latin1")
    if isinstance(value, str):
        return value
    raise _Refused(f"expected a string, found {type(value).__name__}")


class _Global:
    """What an allowed global resolves to: calling it builds a stand-in; a BUILD on it is refused
    (nothing can change what it does)."""
    __slots__ = ("name", "make")

    def __init__(self, name: str, make):
        self.name, self.make = name, make

    def __call__(self, *args):
        return self.make(*args)

    def __setstate__(self, state):
        raise _Refused(f"refusing to set the state of {self.name}")


class _Dtype:
    """numpy.dtype(spec, align, copy): a plain integer dtype, real once its state is validated."""
    __slots__ = ("spec", "dtype")

    def __init__(self, spec=None, align=False, copy=False):
        spec = _text(spec)
        if spec not in INTEGER_DTYPES or align not in (0, 1) or copy not in (0, 1):
            raise _Refused(f"refusing numpy.dtype({spec!r}): a CIFAR-10 batch holds only integer arrays "
                           f"({', '.join(INTEGER_DTYPES)})")
        self.spec, self.dtype = spec, None

    def __setstate__(self, state):
        # numpy writes (3, byte order, None, None, None, -1, -1, 0) for a plain integer dtype.
        orders = ("|",) if self.spec[1] == "1" else ("<", ">", "=")
        if (self.dtype is not None or not isinstance(state, tuple) or len(state) != 8 or state[0] != 3
                or state[2:] != (None, None, None, -1, -1, 0) or _text(state[1]) not in orders):
            raise _Refused(f"refusing a numpy.dtype({self.spec!r}) state other than a plain integer's")
        order = _text(state[1])
        self.dtype = np.dtype(order.replace("|", "") + self.spec)


class _Array:
    """An array of the file: `array` once built from validated parts (see `_build`)."""
    __slots__ = ("array",)

    def __init__(self, array: np.ndarray | None = None):
        self.array = array

    def __setstate__(self, state):
        # ndarray's state: (version 1, shape, dtype, fortran order, raw data).
        if self.array is not None or not isinstance(state, tuple) or len(state) != 5 or state[0] != 1:
            raise _Refused("refusing an array state other than (1, shape, dtype, fortran, data)")
        _, shape, dtype, fortran, raw = state
        if not isinstance(fortran, bool):
            raise _Refused(f"refusing an array whose fortran flag is {type(fortran).__name__}")
        self.array = _build(shape, dtype, "F" if fortran else "C", raw)


def _build(shape, dtype, order: str, raw) -> np.ndarray:
    """The array `raw` holds, each part checked before numpy sees any of it."""
    if (not isinstance(shape, tuple) or len(shape) > MAX_DIMS
            or not all(type(n) is int and n >= 0 for n in shape)):
        raise _Refused(f"refusing an array of shape {shape!r}: expected a tuple of non-negative integers")
    if not isinstance(dtype, _Dtype) or dtype.dtype is None:
        raise _Refused(f"refusing an array of dtype {type(dtype).__name__}: expected a numpy integer dtype")
    if not isinstance(raw, (bytes, bytearray)):
        raise _Refused(f"refusing an array whose data is {type(raw).__name__}: expected bytes")
    expected = math.prod(shape) * dtype.dtype.itemsize
    if len(raw) != expected:
        raise _Refused(f"refusing an array of shape {shape} {dtype.dtype} with {len(raw)} bytes of data "
                       f"(expected {expected})")
    return np.frombuffer(raw, dtype.dtype).reshape(shape, order=order).copy()


def _reconstruct(subtype=None, shape=None, typecode=None) -> _Array:
    """numpy's `_reconstruct(ndarray, (0,), b"b")`: an empty array its state then fills."""
    if subtype is not _NDARRAY or shape != (0,) or _text(typecode) != "b":
        raise _Refused("refusing a numpy _reconstruct call other than (numpy.ndarray, (0,), b'b')")
    return _Array()


def _frombuffer(raw=None, dtype=None, shape=None, order=None) -> _Array:
    """numpy 2's `_frombuffer(raw, dtype, shape, order)` (protocol 5)."""
    if order not in ("C", "F"):
        raise _Refused(f"refusing a numpy _frombuffer call with order {order!r}")
    return _Array(_build(shape, dtype, order, raw))


def _latin1(text=None, encoding=None) -> bytes:
    """`_codecs.encode(text, "latin1")`, how protocol 2 spells bytes written by Python 3."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _Refused("refusing an _codecs.encode call other than (str, 'latin1')")
    return text.encode("latin1")


def _refuse_ndarray(*args):
    raise _Refused("refusing a call of numpy.ndarray")


_NDARRAY = _Global("numpy.ndarray", _refuse_ndarray)
_ALLOWED = {("numpy", "ndarray"): _NDARRAY, ("numpy", "dtype"): _Global("numpy.dtype", _Dtype),
            ("_codecs", "encode"): _Global("_codecs.encode", _latin1)}
for _package in ("numpy.core", "numpy._core"):   # numpy 1 and numpy 2 spell these differently
    _ALLOWED[(f"{_package}.multiarray", "_reconstruct")] = _Global("numpy _reconstruct", _reconstruct)
    _ALLOWED[(f"{_package}.numeric", "_frombuffer")] = _Global("numpy _frombuffer", _frombuffer)


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise _Refused(
                f"refusing global {module}.{name}: a CIFAR-10 batch holds only numpy arrays, "
                "lists and strings") from None


def _unpickle(path: Path) -> dict:
    """The file's dict, its arrays real numpy arrays (none was handed to numpy unchecked)."""
    with path.open("rb") as f:
        obj = _RestrictedUnpickler(f, encoding="bytes").load()
    if not isinstance(obj, dict):
        raise _Refused(f"expected a dict, found {type(obj).__name__}")
    return {(k.decode("latin1") if isinstance(k, bytes) else k): _real(v) for k, v in obj.items()}


def _real(value):
    """A value of the file's dict, an array built from its validated state where it is one."""
    if not isinstance(value, _Array):
        return value
    if value.array is None:
        raise _Refused("refusing an array without its state")
    return value.array


def load_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """One batch file -> (data N x 3072 uint8, labels N int64), validated, without running code."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing CIFAR-10 batch file")
    try:
        obj = _unpickle(path)
    except _Refused as e:
        raise CifarFormatError(f"{path}: {e}") from None
    except Exception as e:  # truncated or garbled: EOFError, ValueError, ...
        raise CifarFormatError(f"{path}: not a readable CIFAR-10 pickle "
                               f"({type(e).__name__}: {e})") from None
    for key in ("data", "labels"):
        if key not in obj:
            raise CifarFormatError(f"{path}: no '{key}' entry (keys: {sorted(map(str, obj))})")
    data = obj["data"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.shape != (layout.PER_FILE, ROW_BYTES):
        desc = f"{data.shape} {data.dtype}" if isinstance(data, np.ndarray) else type(data).__name__
        raise CifarFormatError(f"{path}: 'data' is {desc}, expected ({layout.PER_FILE}, {ROW_BYTES}) uint8")
    try:
        labels = np.asarray(obj["labels"], dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise CifarFormatError(f"{path}: 'labels' is not a list of integers") from None
    if labels.shape != (layout.PER_FILE,):
        raise CifarFormatError(f"{path}: 'labels' has shape {labels.shape}, expected ({layout.PER_FILE},)")
    if labels.min() < 0 or labels.max() >= NUM_CLASSES:
        raise CifarFormatError(f"{path}: labels span {labels.min()}..{labels.max()}, "
                               f"expected 0..{NUM_CLASSES - 1}")
    return data, labels
