"""What a pipeline reads: one split in host memory (`Split`), from the folder a config names.

`resolve_folder` picks the standard-layout folder: real CIFAR-10 at
`<data_root>/cifar-10-batches-py`, or the synthetic set (generated on first use); `open_split`
loads the config's split from it (checked, first `max_samples` samples, upscaled to
`image_size`, with its JPEG copy when the config reads JPEG).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import IMAGE_SIZE, PipelineConfig
from .cifar import load_split, upscale
from .jpeg import JpegSet, load_jpeg
from .layout import BATCH_FOLDER
from .synthetic import ensure_synthetic


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
