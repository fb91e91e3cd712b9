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
  Generated in seconds (vectorized numpy), cached at `<data_root>/synthetic-seed<S>/`.
- JPEG copy (`prepare_jpeg`): every image encoded once by PIL at a recorded quality, stored
  packed (one byte array + offsets per split) next to the set it came from; `prepare_jpeg_tree`
  writes the same bytes as one file per image in class folders, for file readers.

Writes go to a temporary folder renamed into place, so an interrupted run leaves no half cache.
"""
from __future__ import annotations

import codecs
import io
import json
import os
import pickle
import shutil
import tempfile
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


class CifarFormatError(ValueError):
    """A file that is not a valid CIFAR-10 python batch; the message names the file."""


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


def load_split(folder: str | Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """A split of a standard-layout folder -> (images N x 32 x 32 x 3 uint8, labels N int64)."""
    files = TRAIN_FILES if split == "train" else TEST_FILES
    parts = [load_batch(Path(folder) / name) for name in files]
    data = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    images = data.reshape(-1, CHANNELS, IMAGE_SIZE, IMAGE_SIZE).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


def write_split(folder: Path, split: str, images: np.ndarray, labels: np.ndarray,
                label_names: tuple[str, ...] | None = None) -> None:
    """Write a split in the standard layout (the inverse of `load_split`)."""
    files = TRAIN_FILES if split == "train" else TEST_FILES
    if len(images) != PER_FILE * len(files):
        raise ValueError(f"{split}: {len(images)} images, expected {PER_FILE * len(files)}")
    rows = images.transpose(0, 3, 1, 2).reshape(len(images), ROW_BYTES)
    for i, name in enumerate(files):
        part = slice(i * PER_FILE, (i + 1) * PER_FILE)
        batch = {"batch_label": f"{split} batch {i + 1}", "labels": labels[part].tolist(),
                 "data": np.ascontiguousarray(rows[part]),
                 "filenames": [f"{j:05d}.png" for j in range(part.start, part.stop)]}
        with open(folder / name, "wb") as f:
            pickle.dump(batch, f, protocol=4)
    if label_names is not None:
        with open(folder / "batches.meta", "wb") as f:
            pickle.dump({"label_names": list(label_names), "num_cases_per_batch": PER_FILE,
                         "num_vis": ROW_BYTES}, f, protocol=4)


def _publish(tmp: Path, final: Path) -> None:
    """Move a finished temporary folder into place (a concurrent writer may have won)."""
    try:
        os.replace(tmp, final)
    except OSError:
        if not final.exists():
            raise
        shutil.rmtree(tmp, ignore_errors=True)


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


def ensure_synthetic(root: str | Path, seed: int = 0) -> Path:
    """Generate (once) and return the standard-layout folder of the synthetic set for `seed`."""
    final = Path(root) / f"synthetic-seed{seed}" / BATCH_FOLDER
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
    try:
        for stream, (split, n) in enumerate((("train", 50_000), ("test", 10_000))):
            chunks = [synthesize(PER_FILE, seed, stream * 100 + k) for k in range(n // PER_FILE)]
            write_split(tmp, split, np.concatenate([c[0] for c in chunks]),
                        np.concatenate([c[1] for c in chunks]), SYNTHETIC_CLASSES)
        (tmp / "SYNTHETIC.json").write_text(json.dumps({"seed": seed, "generator": "pipebench v1"}))
        _publish(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
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


def _jpeg_cache(folder: str | Path, quality: int, size: int) -> Path:
    return Path(folder).parent / (f"jpeg-q{quality}" + ("" if size == IMAGE_SIZE else f"-{size}px"))


def prepare_jpeg(folder: str | Path, quality: int = 90, size: int = IMAGE_SIZE) -> Path:
    """Encode both splits of a standard-layout folder once (upscaled to `size` px); return the
    cache folder."""
    final = _jpeg_cache(folder, quality, size)
    if final.is_dir():
        return final
    import PIL
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
    try:
        for split in ("train", "test"):
            images, _ = load_split(folder, split)
            files = [encode_jpeg(upscale(img[None], size)[0], quality) for img in images]
            offsets = np.zeros(len(files) + 1, np.int64)
            np.cumsum([len(b) for b in files], out=offsets[1:])
            np.save(tmp / f"{split}.data.npy", np.frombuffer(b"".join(files), np.uint8))
            np.save(tmp / f"{split}.offsets.npy", offsets)
        (tmp / "JPEG.json").write_text(json.dumps(
            {"quality": quality, "subsampling": JPEG_SUBSAMPLING, "encoder": f"Pillow {PIL.__version__}",
             "size": size, "source": str(folder)}))
        _publish(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def prepare_jpeg_tree(folder: str | Path, quality: int = 90, size: int = IMAGE_SIZE) -> Path:
    """The same JPEG files as a class-folder tree, `<split>/<label>/<index>.jpg`, for file readers
    (DALI `fn.readers.file`); written once from the packed copy. Returns the tree's root."""
    final = Path(str(_jpeg_cache(folder, quality, size)) + "-files")
    if final.is_dir():
        return final
    prepare_jpeg(folder, quality, size)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
    try:
        for split in ("train", "test"):
            jpeg = load_jpeg(folder, split, quality, size)
            _, labels = load_split(folder, split)
            for label in range(NUM_CLASSES):
                (tmp / split / str(label)).mkdir(parents=True)
            for i, label in enumerate(labels):
                (tmp / tree_path(split, i, label)).write_bytes(jpeg[i])
        _publish(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def tree_path(split: str, index: int, label: int) -> str:
    return f"{split}/{label}/{index:05d}.jpg"


def load_jpeg(folder: str | Path, split: str, quality: int, size: int = IMAGE_SIZE) -> JpegSet:
    cache = _jpeg_cache(folder, quality, size)
    return JpegSet(np.load(cache / f"{split}.data.npy"), np.load(cache / f"{split}.offsets.npy"), quality)


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
    return f"synthetic-seed{config.data_seed}", ensure_synthetic(config.data_root, config.data_seed)


def open_split(config: PipelineConfig) -> Split:
    """Load the split the config names (first `max_samples` samples if set, upscaled to
    config.image_size)."""
    source, folder = resolve_folder(config)
    images, labels = load_split(folder, config.split)
    jpeg = None
    if config.encoding == "jpeg":
        prepare_jpeg(folder, config.jpeg_quality, config.image_size)
        jpeg = load_jpeg(folder, config.split, config.jpeg_quality, config.image_size)
    if config.max_samples is not None and config.max_samples < len(labels):
        n = config.max_samples
        images, labels = images[:n], labels[:n]
        if jpeg is not None:
            jpeg = JpegSet(jpeg.data[:jpeg.offsets[n]], jpeg.offsets[:n + 1], jpeg.quality)
    if config.image_size != IMAGE_SIZE:
        images, source = upscale(images, config.image_size), f"{source}@{config.image_size}px"
    return Split(images, labels, source, folder, jpeg)
