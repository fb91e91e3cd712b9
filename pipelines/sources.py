"""CIFAR-10 sources: real files read safely, a synthetic stand-in, and a cached JPEG copy.

Every source ends up in the standard python layout (`cifar-10-batches-py/data_batch_1..5`,
`test_batch`, `batches.meta`) and is read by the same code into host memory:
images as an N x 32 x 32 x 3 uint8 array (HWC, what PIL and the GPU gathers use) and int64 labels.

- Real CIFAR-10 at `<data_root>/cifar-10-batches-py`: pickles written by Python 2, loaded
  with a restricted unpickler that allows only the few numpy globals the genuine files need,
  so a tampered file cannot run code. Shapes, dtypes, labels and counts are validated.
- `download_cifar10(root)`: torchvision's downloader, only when asked for.
- Synthetic CIFAR-10 (the default when no real data is found): deterministic from a seed,
  50,000 / 10,000 images, 10 balanced classes that a small model learns within an epoch, with
  smooth shapes, gradients and texture so JPEG sizes and decode cost resemble real CIFAR.
  Generated in seconds (vectorized numpy), cached at `<data_root>/synthetic-seed<S>/` (or under
  `cache_root`, below).
- JPEG copy (`prepare_jpeg`): every image encoded once by PIL at a recorded quality, stored
  packed (one byte array + offsets per split); `prepare_jpeg_tree` writes the same bytes as one
  file per image in class folders (`jpeg-q<Q>-files`), for file readers.

Checksums, verified whenever a split is loaded (`load_split`, so every pipeline and `pipebench
prepare`); a file that differs is a one-line `CifarFormatError` naming it and what to do:
- A folder pipebench wrote (`write_split`: the synthetic set, the tests' sets) holds CHECKSUMS.json, the
  crc32 of every file written; the files read are checked against it: +0.06 s on a 0.43 s load
  of the 150 MB train split (measured on 2 cores; md5 or blake2b would add 0.4 s).
- A folder without CHECKSUMS.json is taken as the download and checked against the md5s
  torchvision publishes (`CIFAR10_MD5`), once: the crc32 of each file that matched is recorded in
  `cifar-10-verified.json` in the cache folder (below), and later loads check the crc32 only,
  computing the md5 again for a file whose crc32 changed. Where that record cannot be written,
  every load computes the md5 (+0.4 s).
- A synthetic set from before CHECKSUMS.json is generated again (deterministic, seconds) rather
  than trusted as it is.
- The JPEG copy records in JPEG.json the crc32 of its own files and the checksums of the source it
  was encoded from (`made_from`); the tree copy records in TREE.json the crc32s of the packed copy
  it was written from. Both are caches: one that is missing, damaged (a file's crc32 differs;
  checked whenever the copy is opened: 0.02 s for its 61 MB at 32 px) or made from other files
  (the synthetic set regenerated differently, real data replaced) is written again, with a
  one-line note on stderr. The tree's 60,000 files are not checked one by one.

Where things are written: the JPEG copies beside the set they came from, or, with `cache_root`
(`PipelineConfig.cache_root`, `--cache-dir`, `$PIPEBENCH_CACHE`), under
`<cache_root>/<source>/` (`synthetic-seed<S>`, or `cifar10-<hash of the data folder's path>` so that
two CIFAR-10 folders never share a copy), so the data folder may be read-only.
The synthetic set is used from `<data_root>` when it is there, else generated under `cache_root`
when set, else under `<data_root>`. A folder that cannot be written is a one-line
`CacheWriteError` naming it. Writes go to a temporary folder renamed into place (a stale copy is
first renamed aside), so an interrupted run leaves no half cache and a reader sees the old or the
new copy, never a mix.
"""
from __future__ import annotations

import codecs
import contextlib
import hashlib
import io
import json
import os
import pickle
import shutil
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .config import CHANNELS, IMAGE_SIZE, NUM_CLASSES, PipelineConfig

BATCH_FOLDER = "cifar-10-batches-py"
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILES = ("test_batch",)
PER_FILE = 10_000
ROW_BYTES = CHANNELS * IMAGE_SIZE * IMAGE_SIZE
SYNTHETIC_CLASSES = ("disk", "square", "ring", "triangle", "cross",
                     "stripes", "crescent", "pair", "ellipse", "checker")
JPEG_SUBSAMPLING = "4:2:0"   # PIL's default at quality < 96; fixed so every copy is alike
JPEG_FILES = ("train.data.npy", "train.offsets.npy", "test.data.npy", "test.offsets.npy")
CHECKSUMS = "CHECKSUMS.json"          # written by write_split: {"crc32": {file name: 8 hex digits}}
SYNTHETIC_META = "SYNTHETIC.json"
VERIFIED = "cifar-10-verified.json"   # in the cache folder: crc32 of downloaded files whose md5 matched
# The md5s torchvision publishes for the genuine files (CIFAR10.train_list, test_list, meta).
CIFAR10_MD5 = {"data_batch_1": "c99cafc152244af753f735de768cd75f",
               "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
               "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
               "data_batch_4": "634d18415352ddfa80567beed471001a",
               "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
               "test_batch": "40351d587109b95175f43aff81a1287e",
               "batches.meta": "5ff9c542aee3614f3951f8cda6e48888"}
WRITABLE_HINT = "pass --cache-dir DIR or set $PIPEBENCH_CACHE to a writable folder"


class CifarFormatError(ValueError):
    """A file that is not a valid CIFAR-10 python batch, or differs from its checksum; the
    message names the file."""


class CacheWriteError(OSError):
    """A folder where data or a copy of it must be written cannot be; the message names it."""


# --- safe loading of the standard layout -------------------------------------------------------

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
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.shape != (PER_FILE, ROW_BYTES):
        desc = f"{data.shape} {data.dtype}" if isinstance(data, np.ndarray) else type(data).__name__
        raise CifarFormatError(f"{path}: 'data' is {desc}, expected ({PER_FILE}, {ROW_BYTES}) uint8")
    try:
        labels = np.asarray(obj["labels"], dtype=np.int64)
    except (TypeError, ValueError):
        raise CifarFormatError(f"{path}: 'labels' is not a list of integers") from None
    if labels.shape != (PER_FILE,):
        raise CifarFormatError(f"{path}: 'labels' has shape {labels.shape}, expected ({PER_FILE},)")
    if labels.min() < 0 or labels.max() >= NUM_CLASSES:
        raise CifarFormatError(f"{path}: labels span {labels.min()}..{labels.max()}, "
                               f"expected 0..{NUM_CLASSES - 1}")
    return data, labels


def _split_files(split: str) -> tuple[str, ...]:
    return TRAIN_FILES if split == "train" else TEST_FILES


def load_split(folder: str | Path, split: str,
               cache_root: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A split of a standard-layout folder -> (images N x 32 x 32 x 3 uint8, labels N int64), its
    files checked against their checksums first (`verify`)."""
    folder = Path(folder)
    files = _split_files(split)
    for name in files:
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder / name}: missing CIFAR-10 batch file")
    verify(folder, files, cache_root)
    parts = [load_batch(folder / name) for name in files]
    data = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    images = data.reshape(-1, CHANNELS, IMAGE_SIZE, IMAGE_SIZE).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


def write_split(folder: Path, split: str, images: np.ndarray, labels: np.ndarray,
                label_names: tuple[str, ...] | None = None) -> None:
    """Write a split in the standard layout (the inverse of `load_split`), recording each file's
    crc32 in the folder's CHECKSUMS.json."""
    files = _split_files(split)
    if len(images) != PER_FILE * len(files):
        raise ValueError(f"{split}: {len(images)} images, expected {PER_FILE * len(files)}")
    rows = images.transpose(0, 3, 1, 2).reshape(len(images), ROW_BYTES)
    contents = {}
    for i, name in enumerate(files):
        part = slice(i * PER_FILE, (i + 1) * PER_FILE)
        contents[name] = {"batch_label": f"{split} batch {i + 1}", "labels": labels[part].tolist(),
                          "data": np.ascontiguousarray(rows[part]),
                          "filenames": [f"{j:05d}.png" for j in range(part.start, part.stop)]}
    if label_names is not None:
        contents["batches.meta"] = {"label_names": list(label_names), "num_cases_per_batch": PER_FILE,
                                    "num_vis": ROW_BYTES}
    sums = _recorded(folder) or {}
    for name, content in contents.items():
        raw = pickle.dumps(content, protocol=4)
        (folder / name).write_bytes(raw)
        sums[name] = f"{zlib.crc32(raw):08x}"
    (folder / CHECKSUMS).write_text(json.dumps({"crc32": sums}, indent=1))


# --- checksums ---------------------------------------------------------------------------------

def checksum(path: str | Path, algorithm: str = "crc32") -> str:
    """A file's crc32 (8 hex digits) or md5, read in 4 MiB chunks."""
    md5, crc = hashlib.md5(usedforsecurity=False), 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(1 << 22):
            if algorithm == "md5":
                md5.update(chunk)
            else:
                crc = zlib.crc32(chunk, crc)
    return md5.hexdigest() if algorithm == "md5" else f"{crc:08x}"


def _read_json(path: Path) -> dict | None:
    """A JSON object from a file; None if it is missing or not a JSON object."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _recorded(folder: Path) -> dict[str, str] | None:
    """The crc32s in the folder's CHECKSUMS.json; None where there is none (a download)."""
    path = folder / CHECKSUMS
    if not path.exists():
        return None
    info = _read_json(path)
    if info is None or not isinstance(info.get("crc32"), dict):
        raise CifarFormatError(f"{path}: unreadable; delete {folder} and write it again")
    return info["crc32"]


def checksum_origin(folder: str | Path) -> str:
    """What `verify` checks the folder's files against, in words (for messages)."""
    return ("the crc32s recorded when written" if (Path(folder) / CHECKSUMS).exists()
            else "the md5s torchvision publishes")


def verify(folder: str | Path, names: tuple[str, ...], cache_root: str | Path | None = None) -> None:
    """Check files of a standard-layout folder: against its CHECKSUMS.json if pipebench wrote it,
    else (a download) against `CIFAR10_MD5`, the md5 computed only for a file whose crc32 is not
    already recorded as verified (see the module docstring). Raises `CifarFormatError` naming the
    first file that differs."""
    folder = Path(folder)
    recorded = _recorded(folder)
    if recorded is not None:
        remedy = (f"delete {folder} and it is generated again" if (folder / SYNTHETIC_META).exists()
                  else f"write {folder} again")
        for name in names:
            expected, found = recorded.get(name, "none"), checksum(folder / name)
            if found != expected:
                raise CifarFormatError(
                    f"{folder / name}: checksum does not match the one recorded when it was written "
                    f"(crc32 {expected} vs {found}): the file changed or is damaged; {remedy}")
        return
    record = _cache_dir(folder, cache_root) / VERIFIED
    verified = _read_json(record) or {}
    fresh = {}
    for name in names:
        crc = checksum(folder / name)
        if verified.get(name) == crc:
            continue
        expected, found = CIFAR10_MD5.get(name, "none"), checksum(folder / name, "md5")
        if found != expected:
            raise CifarFormatError(
                f"{folder / name}: md5 {found} differs from the genuine file's {expected} (published by "
                f"torchvision): the file is damaged or not CIFAR-10; run `pipebench download --root "
                f"{folder.parent}` to fetch it again")
        fresh[name] = crc
    if fresh:
        with contextlib.suppress(OSError):   # a read-only folder: the md5 is computed again next time
            record.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=record.parent, prefix=".tmp-", delete=False) as f:
                json.dump({**verified, **fresh}, f)
            os.replace(f.name, record)


# --- cache folders -----------------------------------------------------------------------------

def _cache_dir(folder: Path, cache_root: str | Path | None) -> Path:
    """Where copies of a standard-layout folder go: beside it, or `<cache_root>/<source name>`: the
    synthetic set's folder name (its content follows from the seed), or one per CIFAR-10 folder."""
    if cache_root is None:
        return folder.parent
    if (folder / SYNTHETIC_META).exists():
        return Path(cache_root) / folder.parent.name
    return Path(cache_root) / f"cifar10-{hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:8]}"


def _stale(cache: Path, meta: str, made_from: dict, files: tuple[str, ...] = ()) -> str | None:
    """Why a cache folder cannot be used as it is (None: it can): missing, made from other files
    than `made_from`, or one of `files` whose crc32 its metadata `meta` does not record or records
    differently."""
    info = _read_json(cache / meta)
    if info is None:
        return "missing"
    if info.get("made_from") != made_from:
        return "made from other files than the current ones"
    recorded = info.get("crc32") if isinstance(info.get("crc32"), dict) else {}
    unrecorded = [name for name in files if name not in recorded]
    if unrecorded:
        return f"no crc32 recorded for {', '.join(unrecorded)}"
    for name in files:
        expected = recorded[name]
        try:
            found = checksum(cache / name)
        except OSError:
            found = "unreadable"
        if found != expected:
            return f"{name}: crc32 {found}, recorded {expected}"
    return None


@contextlib.contextmanager
def _writing(final: Path, what: str):
    """A temporary folder beside `final`, published as `final` when the block ends; a folder that
    cannot be written is a one-line `CacheWriteError` saying what to do."""
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
    except OSError as e:
        raise CacheWriteError(f"cannot write {what} to {final} ({e.strerror or e}): {WRITABLE_HINT}") from None
    try:
        yield tmp
        _publish(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _publish(tmp: Path, final: Path) -> None:
    """Move a finished temporary folder into place. An old folder there is renamed aside first, so
    a reader finds the old or the new one, never a mix; a concurrent writer may win."""
    aside = None
    if final.exists():
        aside = Path(tempfile.mkdtemp(prefix=".old-", dir=final.parent))
        with contextlib.suppress(FileNotFoundError):   # a concurrent writer moved it
            os.replace(final, aside / final.name)
    try:
        os.replace(tmp, final)
    except OSError:
        if not final.exists():
            raise
    finally:
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)


def _note(final: Path, stale: str, action: str) -> None:
    if stale != "missing":
        print(f"{final}: {stale}; {action}", file=sys.stderr)


def download_cifar10(root: str | Path) -> Path:
    """Fetch the genuine set with torchvision (network access; never called by tests)."""
    from torchvision.datasets import CIFAR10
    for train in (True, False):
        CIFAR10(str(root), train=train, download=True)
    return Path(root) / BATCH_FOLDER


# --- synthetic CIFAR-10 ------------------------------------------------------------------------

# A colour per class, RGB in [0, 1]; mixed with a random colour so colour alone is not the label.
_PALETTE = np.array([[.85, .20, .15], [.15, .55, .85], [.90, .75, .10], [.20, .70, .30],
                     [.60, .25, .70], [.95, .50, .15], [.10, .65, .65], [.80, .35, .55],
                     [.45, .35, .20], [.55, .60, .65]], dtype=np.float32)


def _signed_distance(label: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Signed distance (negative inside) of class `label`'s shape in shape-scaled coordinates."""
    rho = np.hypot(u, v)
    if label == 0:
        return rho - 1.0
    if label == 1:
        return np.maximum(np.abs(u), np.abs(v)) - 0.8
    if label == 2:
        return np.abs(rho - 0.7) - 0.28
    if label == 3:
        return np.maximum(-v - 0.5, 0.866 * np.abs(u) + 0.5 * v - 0.5) * 1.5
    if label == 4:
        return np.minimum(np.maximum(np.abs(u) - 0.3, np.abs(v) - 1.0),
                          np.maximum(np.abs(u) - 1.0, np.abs(v) - 0.3))
    if label == 5:
        return np.maximum(rho - 1.1, (np.abs(np.sin(2.5 * np.pi * v)) - 0.5) * 0.4)
    if label == 6:
        return np.maximum(rho - 1.0, 0.75 - np.hypot(u - 0.6, v))
    if label == 7:
        return np.minimum(np.hypot(u - 0.55, v) - 0.45, np.hypot(u + 0.55, v) - 0.45)
    if label == 8:
        return np.hypot(u / 1.1, v / 0.45) - 1.0
    return np.maximum(np.maximum(np.abs(u), np.abs(v)) - 0.95, -np.sin(3 * u) * np.sin(3 * v) * 0.5)


def _smooth_noise(rng: np.random.Generator, n: int, cells: int) -> np.ndarray:
    """n x 32 x 32 x 3 noise in [-1, 1], bilinear from a cells x cells grid (low frequency)."""
    grid = rng.uniform(-1, 1, size=(n, cells, cells, CHANNELS)).astype(np.float32)
    pos = np.linspace(0, cells - 1, IMAGE_SIZE, dtype=np.float32)
    lo = np.minimum(pos.astype(int), cells - 2)
    w = (pos - lo).astype(np.float32)
    interp = np.zeros((IMAGE_SIZE, cells), np.float32)
    interp[np.arange(IMAGE_SIZE), lo] = 1 - w
    interp[np.arange(IMAGE_SIZE), lo + 1] = w
    return np.einsum("yi,nijc,xj->nyxc", interp, grid, interp, optimize=True)


def synthesize(n: int, seed: int, stream: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`n` synthetic images (n x 32 x 32 x 3 uint8) and balanced labels, from (seed, stream)."""
    rng = np.random.default_rng([seed, stream])
    labels = rng.permutation(np.arange(n) % NUM_CLASSES).astype(np.int64)
    axis = (np.arange(IMAGE_SIZE, dtype=np.float32) + 0.5) / IMAGE_SIZE * 2 - 1   # pixel centres in [-1, 1]
    y, x = np.meshgrid(axis, axis, indexing="ij")
    f32 = np.float32

    # Background: a linear gradient between two random colours, in a random direction.
    c0, c1 = rng.uniform(0, 1, (2, n, 1, 1, CHANNELS)).astype(f32)
    theta = rng.uniform(0, 2 * np.pi, (n, 1, 1)).astype(f32)
    t = ((np.cos(theta) * x + np.sin(theta) * y) * 0.5 + 0.5)[..., None]
    image = c0 + (c1 - c0) * t

    # The class's shape: random position, size and rotation, anti-aliased edge, shaded fill.
    cx, cy = rng.uniform(-0.35, 0.35, (2, n, 1, 1)).astype(f32)
    scale = rng.uniform(0.4, 0.65, (n, 1, 1)).astype(f32)
    phi = rng.uniform(0, 2 * np.pi, (n, 1, 1)).astype(f32)
    du, dv = (x - cx) / scale, (y - cy) / scale
    u, v = np.cos(phi) * du + np.sin(phi) * dv, -np.sin(phi) * du + np.cos(phi) * dv
    dist = np.empty((n, IMAGE_SIZE, IMAGE_SIZE), f32)
    for label in range(NUM_CLASSES):
        pick = labels == label
        dist[pick] = _signed_distance(label, u[pick], v[pick])
    mask = np.clip(0.5 - dist * scale * (IMAGE_SIZE / 2), 0, 1)[..., None]   # edge ~1 px wide
    mix = rng.uniform(0.55, 0.85, (n, 1, 1, 1)).astype(f32)
    colour = mix * _PALETTE[labels][:, None, None, :] + (1 - mix) * rng.uniform(0, 1, (n, 1, 1, CHANNELS)).astype(f32)
    shade = 0.75 + 0.25 * (-u - v)[..., None].clip(-1.5, 1.5)
    image = image * (1 - mask) + colour * shade * mask

    # Texture: low-frequency blotches plus fine grain, as in photographs.
    image += 0.10 * _smooth_noise(rng, n, 5)
    image += 0.025 * rng.standard_normal(image.shape, dtype=f32)
    image *= 255
    image += 0.5
    return np.clip(image, 0, 255, out=image).astype(np.uint8), labels


def ensure_synthetic(root: str | Path, seed: int = 0, cache_root: str | Path | None = None) -> Path:
    """The standard-layout folder of the synthetic set for `seed`: the one under `root` if there,
    else generated (once) under `cache_root` if set, else under `root`. A set written before
    checksums were recorded is generated again."""
    name = f"synthetic-seed{seed}"
    final = Path(root) / name / BATCH_FOLDER
    if not (final / CHECKSUMS).is_file() and cache_root is not None:
        final = Path(cache_root) / name / BATCH_FOLDER
    if (final / CHECKSUMS).is_file():
        return final
    with _writing(final, "the synthetic set") as tmp:
        for stream, split in enumerate(("train", "test")):
            chunks = [synthesize(PER_FILE, seed, stream * 100 + k) for k in range(len(_split_files(split)))]
            write_split(tmp, split, np.concatenate([c[0] for c in chunks]),
                        np.concatenate([c[1] for c in chunks]), SYNTHETIC_CLASSES)
        (tmp / SYNTHETIC_META).write_text(json.dumps({"seed": seed, "generator": "pipebench v1"}))
    return final


# --- JPEG copy ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class JpegSet:
    """Packed JPEG files of one split: image i is `data[offsets[i]:offsets[i+1]]`."""
    data: np.ndarray      # uint8, all files back to back
    offsets: np.ndarray   # int64, N + 1
    quality: int

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        """File i's bytes as a uint8 view (a buffer for PIL / io.BytesIO, an array for DALI)."""
        return self.data[self.offsets[i]:self.offsets[i + 1]]


def encode_jpeg(image: np.ndarray, quality: int) -> bytes:
    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=quality, subsampling=JPEG_SUBSAMPLING)
    return buf.getvalue()


def upscale(images: np.ndarray, size: int) -> np.ndarray:
    """N x 32 x 32 x C -> N x size x size x C by pixel repetition (size a multiple of 32)."""
    factor = size // images.shape[1]
    if factor == 1:
        return images
    return np.repeat(np.repeat(images, factor, axis=1), factor, axis=2)


def _jpeg_cache(folder: Path, quality: int, size: int, cache_root: str | Path | None) -> Path:
    return _cache_dir(folder, cache_root) / (f"jpeg-q{quality}" + ("" if size == IMAGE_SIZE else f"-{size}px"))


def prepare_jpeg(folder: str | Path, quality: int = 90, size: int = IMAGE_SIZE,
                 cache_root: str | Path | None = None) -> Path:
    """Encode both splits of a standard-layout folder (upscaled to `size` px) and return the
    copy's folder; an existing copy is checked first and encoded again if damaged or made from
    other source files (see the module docstring)."""
    folder = Path(folder)
    final = _jpeg_cache(folder, quality, size, cache_root)
    recorded = _recorded(folder)   # a download that loads is the files whose md5s are published
    made_from = {"crc32": recorded} if recorded is not None else {"md5": CIFAR10_MD5}
    stale = _stale(final, "JPEG.json", made_from, JPEG_FILES)
    if stale is None:
        return final
    _note(final, stale, "encoding it again")
    import PIL
    with _writing(final, "the JPEG copy") as tmp:
        for split in ("train", "test"):
            images, _ = load_split(folder, split, cache_root)
            files = [encode_jpeg(upscale(img[None], size)[0], quality) for img in images]
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
    made_from = _read_json(packed / "JPEG.json")["crc32"]
    stale = _stale(final, "TREE.json", made_from)
    if stale is None:
        return final
    _note(final, stale, "writing it again")
    with _writing(final, "the JPEG file tree") as tmp:
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


# --- what a pipeline reads ---------------------------------------------------------------------

@dataclass(frozen=True)
class Split:
    """One split in host memory, as every pipeline receives it."""
    images: np.ndarray            # N x S x S x 3 uint8 (S = config.image_size)
    labels: np.ndarray            # N int64
    source: str                   # "cifar10" or "synthetic-seed<K>", "@<S>px" if upscaled
    folder: Path                  # the standard-layout folder it was read from
    jpeg: JpegSet | None = None   # the encoded copy, when config.encoding == "jpeg"

    def __len__(self) -> int:
        return len(self.labels)


def resolve_folder(config: PipelineConfig) -> tuple[str, Path]:
    """(source name, standard-layout folder) for the config; synthesizes the default set if needed."""
    real = Path(config.data_root) / BATCH_FOLDER
    if config.source == "cifar10" or (config.source == "auto" and real.is_dir()):
        if not real.is_dir():
            raise FileNotFoundError(f"{real}: no CIFAR-10 here; run `pipebench download --root "
                                    f"{config.data_root}` or use source='synthetic'")
        return "cifar10", real
    return f"synthetic-seed{config.data_seed}", ensure_synthetic(config.data_root, config.data_seed,
                                                                 config.cache_root)


def open_split(config: PipelineConfig) -> Split:
    """Load the split the config names (first `max_samples` samples if set, upscaled to
    config.image_size)."""
    source, folder = resolve_folder(config)
    images, labels = load_split(folder, config.split, config.cache_root)
    jpeg = None
    if config.encoding == "jpeg":
        jpeg = load_jpeg(folder, config.split, config.jpeg_quality, config.image_size, config.cache_root)
    if config.max_samples is not None and config.max_samples < len(labels):
        n = config.max_samples
        images, labels = images[:n], labels[:n]
        if jpeg is not None:
            jpeg = JpegSet(jpeg.data[:jpeg.offsets[n]], jpeg.offsets[:n + 1], jpeg.quality)
    if config.image_size != IMAGE_SIZE:
        images, source = upscale(images, config.image_size), f"{source}@{config.image_size}px"
    return Split(images, labels, source, folder, jpeg)
