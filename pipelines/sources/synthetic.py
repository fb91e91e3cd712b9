"""The synthetic CIFAR-10 set, the default when no real data is found.

Deterministic from a seed: 50,000 / 10,000 images, 10 balanced classes (`SYNTHETIC_CLASSES`) that
a small model learns within an epoch, with smooth shapes, gradients and texture so JPEG sizes and
decode cost resemble real CIFAR. Generated in seconds (vectorized numpy, a batch file's 10,000 images
per core at once, up to GENERATORS, each made CHUNK images at a time; the same bytes however many) in the
standard layout with its CHECKSUMS.json and SYNTHETIC.json, at `<data_root>/synthetic-seed<S>/` (or under
`cache_root`: see `ensure_synthetic`), saying so in one line on stderr. A set from before
CHECKSUMS.json is generated again rather than trusted as it is.
"""
from __future__ import annotations

import functools
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..config import CHANNELS, IMAGE_SIZE, NUM_CLASSES, usable_cores
from . import layout
from .cache import writing
from .cifar import write_split
from .layout import BATCH_FOLDER, CHECKSUMS, SYNTHETIC_META, split_files

SYNTHETIC_CLASSES = ("disk", "square", "ring", "triangle", "cross",
                     "stripes", "crescent", "pair", "ellipse", "checker")

GENERATORS = 4   # batch files made at once (`ensure_synthetic`)
CHUNK = 1024     # images of one made at once (`synthesize`)

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
    """`n` synthetic images (n x 32 x 32 x 3 uint8) and balanced labels, from (seed, stream).

    The per-image draws and the low-frequency texture are drawn for all `n` images first; then the pixels
    are made CHUNK images at a time, each chunk drawing its fine grain (the last draw, so the stream is the
    one a single draw makes). Each per-pixel intermediate is then megabytes, not a tenth of a gigabyte at
    n = 10,000: faster and smaller, with the bytes of the whole-array form (whatever CHUNK: a test;
    results/2026-12-02-tests/synthetic-time.txt)."""
    rng = np.random.default_rng([seed, stream])
    labels = rng.permutation(np.arange(n) % NUM_CLASSES).astype(np.int64)
    f32 = np.float32
    c0, c1 = rng.uniform(0, 1, (2, n, 1, 1, CHANNELS)).astype(f32)   # background: two colours ...
    theta = rng.uniform(0, 2 * np.pi, (n, 1, 1)).astype(f32)          # ... blended in a random direction
    cx, cy = rng.uniform(-0.35, 0.35, (2, n, 1, 1)).astype(f32)        # the shape's position, size, rotation
    scale = rng.uniform(0.4, 0.65, (n, 1, 1)).astype(f32)
    phi = rng.uniform(0, 2 * np.pi, (n, 1, 1)).astype(f32)
    mix = rng.uniform(0.55, 0.85, (n, 1, 1, 1)).astype(f32)            # its colour: the class's, mixed
    colour = mix * _PALETTE[labels][:, None, None, :] + (1 - mix) * rng.uniform(0, 1, (n, 1, 1, CHANNELS)).astype(f32)
    blotches = _smooth_noise(rng, n, 5)                                 # texture: low-frequency blotches ...
    draws = (labels, c0, c1, np.cos(theta), np.sin(theta), np.cos(phi), np.sin(phi), cx, cy, scale, colour, blotches)
    images = np.empty((n, IMAGE_SIZE, IMAGE_SIZE, CHANNELS), np.uint8)
    for a in range(0, n, CHUNK):
        part = slice(a, a + CHUNK)
        grain = rng.standard_normal(images[part].shape, dtype=f32)       # ... and grain
        images[part] = _pixels(*(d[part] for d in draws), grain)
    return images, labels


def _pixels(labels, c0, c1, cos_theta, sin_theta, cos_phi, sin_phi, cx, cy, scale, colour, blotches, grain):
    """The uint8 images of `synthesize`'s random draws for some images."""
    axis = (np.arange(IMAGE_SIZE, dtype=np.float32) + 0.5) / IMAGE_SIZE * 2 - 1   # pixel centres in [-1, 1]
    y, x = np.meshgrid(axis, axis, indexing="ij")

    # Background: a linear gradient between two random colours, in a random direction.
    t = ((cos_theta * x + sin_theta * y) * 0.5 + 0.5)[..., None]
    image = c0 + (c1 - c0) * t

    # The class's shape: random position, size and rotation, anti-aliased edge, shaded fill.
    du, dv = (x - cx) / scale, (y - cy) / scale
    u, v = cos_phi * du + sin_phi * dv, -sin_phi * du + cos_phi * dv
    dist = np.empty(u.shape, np.float32)
    for label in range(NUM_CLASSES):
        pick = labels == label
        dist[pick] = _signed_distance(label, u[pick], v[pick])
    mask = np.clip(0.5 - dist * scale * (IMAGE_SIZE / 2), 0, 1)[..., None]   # edge ~1 px wide
    shade = 0.75 + 0.25 * (-u - v)[..., None].clip(-1.5, 1.5)
    image = image * (1 - mask) + colour * shade * mask

    image += 0.10 * blotches
    image += 0.025 * grain
    image *= 255
    image += 0.5
    return np.clip(image, 0, 255, out=image).astype(np.uint8)


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
    with writing(final, "the synthetic set") as tmp:
        elsewhere = ("set $PIPEBENCH_CACHE or pass --cache-dir" if cache_root is not None
                     else "set $PIPEBENCH_DATA or pass --data-root")
        print(f"generating the synthetic CIFAR-10 set (once) in {final.parent}; {elsewhere} to put it elsewhere",
              file=sys.stderr)
        # numpy lets go of the GIL: a batch file per core at once, at most GENERATORS (each a few hundred MB while made)
        with ThreadPoolExecutor(min(GENERATORS, usable_cores())) as pool:
            files_of = {split: list(pool.map(functools.partial(synthesize, layout.PER_FILE, seed),
                                              [stream * 100 + k for k in range(len(split_files(split)))]))
                         for stream, split in enumerate(("train", "test"))}
        for split, files in files_of.items():
            write_split(tmp, split, np.concatenate([f[0] for f in files]),
                        np.concatenate([f[1] for f in files]), SYNTHETIC_CLASSES)
        (tmp / SYNTHETIC_META).write_text(json.dumps({"seed": seed, "generator": "pipebench v1"}))
    return final
