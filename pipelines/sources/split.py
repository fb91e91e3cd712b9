"""What a pipeline reads: one split in host memory (`Split`), from the folder a config names or
from arrays a user already has (`Split.from_arrays`).

`resolve_folder` picks the standard-layout folder: `<data_root>/cifar-10-batches-py` (source
"cifar10", or "auto" when it is there), else the synthetic set (generated on first use);
`open_split` loads the config's split from it (checked, first `max_samples` samples, upscaled to
`image_size`, with its JPEG copy when the config reads JPEG).

`Split.source`, which result rows record, says what was really read: `cifar10` only for files
that match the md5s torchvision publishes (a folder without CHECKSUMS.json, which `load_split`
checks against them), `synthetic-seed<S>` for the synthetic set (its SYNTHETIC.json), `custom` for
any other folder pipebench wrote (CHECKSUMS.json: a user's own set written with `write_split`, the
tests' sets), `arrays` for `Split.from_arrays`; `@<S>px` appended when upscaled; `imagefolder` for
photographs of your own (`sources.imagefolder`), which have no raw pixels, only their files.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import CHANNELS, IMAGE_SIZE, MAX_IMAGE_SIZE, NUM_CLASSES, SPLITS, PipelineConfig
from .cache import read_json
from .cifar import load_split, upscale
from .imagefolder import read_imagefolder
from .jpeg import JpegSet, load_jpeg
from .layout import BATCH_FOLDER, CHECKSUMS, SYNTHETIC_META
from .synthetic import ensure_synthetic


@dataclass(frozen=True)
class Split:
    """One split in host memory, as every pipeline receives it."""
    images: np.ndarray | None     # N x S x S x 3 uint8 (S = config.image_size); None: photographs
    labels: np.ndarray            # N int64
    source: str                   # what was read (module docstring): "cifar10", "synthetic-seed<S>",
                                  # "custom", "arrays"; "@<S>px" appended if upscaled
    folder: Path | None           # the standard-layout folder it was read from (None: from arrays)
    jpeg: JpegSet | None = None   # the encoded copy, when config.encoding == "jpeg"; the photographs' files
    split: str = "train"          # which split it is: "train" or "test"
    sizes: np.ndarray | None = None   # photographs (`imagefolder`): N x 2 heights and widths, else None

    def __len__(self) -> int:
        return len(self.labels)

    @classmethod
    def from_arrays(cls, images, labels, split: str = "train") -> "Split":
        """A split of arrays you already have, for `pipelines.build(name, config, data=...)`: images
        N x H x W x 3 uint8 (NHWC, channels last) with H == W a multiple of 32 from 32 to 512 (the
        config's `image_size`), labels N integers in 0..9 (kept as int64). Its source is "arrays";
        it has no folder and no JPEG copy, so only pipelines that read raw pixels take it."""
        images, labels = np.asarray(images), np.asarray(labels)
        shape = images.shape
        if (images.ndim != 4 or shape[3] != CHANNELS or images.dtype != np.uint8 or shape[1] != shape[2]
                or shape[1] % IMAGE_SIZE or not IMAGE_SIZE <= shape[1] <= MAX_IMAGE_SIZE or not len(images)):
            raise ValueError(f"images have shape {shape} and dtype {images.dtype}: expected N x H x W x 3 "
                             f"uint8 (NHWC, channels last), N >= 1, H == W a multiple of {IMAGE_SIZE} from "
                             f"{IMAGE_SIZE} to {MAX_IMAGE_SIZE}")
        if labels.shape != (len(images),) or labels.dtype.kind not in "iu":
            raise ValueError(f"labels have shape {labels.shape} and dtype {labels.dtype}: expected "
                             f"{len(images)} integers (one per image)")
        if labels.min() < 0 or labels.max() >= NUM_CLASSES:
            raise ValueError(f"labels span {labels.min()}..{labels.max()}: expected 0..{NUM_CLASSES - 1}")
        if split not in SPLITS:
            raise ValueError(f"split={split!r}: expected one of {SPLITS}")
        return cls(np.ascontiguousarray(images), labels.astype(np.int64), "arrays", None, None, split)


def source_label(folder: Path) -> str:
    """What a standard-layout folder holds, as `Split.source` says it (module docstring)."""
    seed = (read_json(folder / SYNTHETIC_META) or {}).get("seed")
    if type(seed) is int:
        return f"synthetic-seed{seed}"
    return "custom" if (folder / CHECKSUMS).exists() else "cifar10"


def resolve_folder(config: PipelineConfig) -> tuple[str, Path]:
    """(what it holds, `source_label`; standard-layout folder) for the config; synthesizes the
    default set if needed."""
    real = Path(config.data_root) / BATCH_FOLDER
    if config.source == "cifar10" or (config.source == "auto" and real.is_dir()):
        if not real.is_dir():
            raise FileNotFoundError(f"{real}: no CIFAR-10 here; run `pipebench download --root "
                                    f"{config.data_root}` or use source='synthetic'")
        folder = real
    else:
        folder = ensure_synthetic(config.data_root, config.data_seed, config.cache_root)
    return source_label(folder), folder


def open_split(config: PipelineConfig) -> Split:
    """Load the split the config names (first `max_samples` samples if set, upscaled to
    config.image_size; photographs of an `imagefolder:PATH` source as their files and sizes)."""
    if config.photos:
        jpeg, labels, heights, widths, _ = read_imagefolder(config.photo_folder, config.split,
                                                            config.max_samples)
        return Split(None, labels, "imagefolder", None, jpeg, config.split, np.stack([heights, widths], axis=1))
    source, folder = resolve_folder(config)
    images, labels = load_split(folder, config.split, config.cache_root, config.max_samples)
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
    return Split(images, labels, source, folder, jpeg, config.split)
