"""The ImageNet training and eval crops as boxes, drawn once per epoch and shared by every pipeline.

Training: torchvision's `RandomResizedCrop(224, scale=(0.08, 1), ratio=(3/4, 4/3))` then a
horizontal flip with p = 0.5. `rrc_boxes` draws the crop boxes of many images at once with
torchvision's own rule (`RandomResizedCrop.get_params`): up to 10 attempts, each an area share
uniform in `scale` and an aspect ratio log-uniform in `ratio`, the first box that fits the image
taken at a uniform position; when none fits, the central crop of the image clamped to `ratio`.
A pipeline decodes the box (or the whole image and cuts it) and resizes it to 224 x 224, so every
pipeline crops sample k of an epoch alike, as `epochs.epoch_draws` does for CIFAR's crops.

Eval: `Resize(256)` then `CenterCrop(224)`, which is the centred square of side short x 224 / 256
of the original (`center_boxes`); decoders that resize before cropping round differently, within a
pixel.

Boxes are (y, x, h, w) in the original image's pixels, int64 arrays.
"""
from __future__ import annotations

import math

import numpy as np

from .epochs import rank_seeds

SCALE = (0.08, 1.0)
RATIO = (3 / 4, 4 / 3)
ATTEMPTS = 10
RESIZE, CROP = 256, 224   # eval


def rrc_boxes(heights, widths, rng: np.random.Generator, scale: tuple[float, float] = SCALE,
              ratio: tuple[float, float] = RATIO, attempts: int = ATTEMPTS) -> tuple[np.ndarray, ...]:
    """RandomResizedCrop's boxes (module docstring) of images of these heights and widths."""
    heights, widths = np.asarray(heights, dtype=np.int64), np.asarray(widths, dtype=np.int64)
    n = len(heights)
    area = (heights * widths).astype(np.float64)
    target = area[:, None] * rng.uniform(scale[0], scale[1], (n, attempts))
    aspect = np.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1]), (n, attempts)))
    w = np.round(np.sqrt(target * aspect)).astype(np.int64)
    h = np.round(np.sqrt(target / aspect)).astype(np.int64)
    fits = (w > 0) & (w <= widths[:, None]) & (h > 0) & (h <= heights[:, None])
    found = fits.any(axis=1)
    first = fits.argmax(axis=1)
    rows = np.arange(n)
    box_h, box_w = h[rows, first], w[rows, first]
    # no attempt fits: the central crop, clamped to `ratio`
    fallback_h, fallback_w = heights.copy(), widths.copy()
    wide = widths / heights > ratio[1]
    tall = widths / heights < ratio[0]
    fallback_w[tall], fallback_h[tall] = widths[tall], np.round(widths[tall] / ratio[0]).astype(np.int64)
    fallback_h[wide], fallback_w[wide] = heights[wide], np.round(heights[wide] * ratio[1]).astype(np.int64)
    box_h, box_w = np.where(found, box_h, fallback_h), np.where(found, box_w, fallback_w)
    y = np.where(found, (rng.random(n) * (heights - box_h + 1)).astype(np.int64), (heights - box_h) // 2)
    x = np.where(found, (rng.random(n) * (widths - box_w + 1)).astype(np.int64), (widths - box_w) // 2)
    return y, x, box_h, box_w


def center_boxes(heights, widths, resize: int = RESIZE, crop: int = CROP) -> tuple[np.ndarray, ...]:
    """Eval's boxes: `Resize(resize)` then `CenterCrop(crop)` as the centred square of side
    round(short side x crop / resize) of the original."""
    heights, widths = np.asarray(heights, dtype=np.int64), np.asarray(widths, dtype=np.int64)
    side = np.minimum(np.round(np.minimum(heights, widths) * crop / resize).astype(np.int64),
                      np.minimum(heights, widths))
    return (heights - side) // 2, (widths - side) // 2, side, side


def flips(n: int, rng: np.random.Generator) -> np.ndarray:
    """Horizontal flips, p = 0.5 each."""
    return rng.random(n) < 0.5


def epoch_boxes(config, epoch: int, sizes: np.ndarray) -> tuple[np.ndarray, ...]:
    """(y, x, h, w, flip) of an epoch's samples in plan order, whose heights and widths are `sizes`
    (N x 2): RandomResizedCrop's boxes and flips with augmentation, eval's centre boxes and no flips
    without; one random stream per (seed, epoch, rank), as `epochs.epoch_draws`."""
    heights, widths = sizes[:, 0], sizes[:, 1]
    if not config.augment:
        return (*center_boxes(heights, widths), np.zeros(len(sizes), dtype=bool))
    rng = np.random.default_rng(rank_seeds(config, epoch, 2))
    return (*rrc_boxes(heights, widths, rng), flips(len(sizes), rng))
