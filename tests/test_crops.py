"""The ImageNet crops (`pipelines.crops`): RandomResizedCrop's distribution, torchvision's fallback,
eval's centre crop, flips at p = 0.5."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torchvision.transforms import RandomResizedCrop

from pipelines import crops


def torchvision_boxes(height: int, width: int, n: int) -> np.ndarray:
    torch.manual_seed(0)
    image = torch.empty(3, height, width)
    return np.array([RandomResizedCrop.get_params(image, list(crops.SCALE), list(crops.RATIO)) for _ in range(n)])


@pytest.mark.parametrize("height,width", [(375, 500), (800, 200), (300, 300)])
def test_boxes_follow_torchvisions_random_resized_crop(height, width):
    n = 4000
    ours = np.stack(crops.rrc_boxes([height] * n, [width] * n, np.random.default_rng(2)), axis=1)
    theirs = torchvision_boxes(height, width, n)
    for boxes in (ours, theirs):   # every box inside the image
        y, x, h, w = boxes.T
        assert (y >= 0).all() and (x >= 0).all() and (y + h <= height).all() and (x + w <= width).all()

    def features(boxes):
        y, x, h, w = boxes.T.astype(float)
        return {"area": h * w / (height * width), "aspect": w / h, "cy": (y + h / 2) / height, "cx": (x + w / 2) / width}
    a, b = features(ours), features(theirs)
    for key in a:   # the same distribution: quantiles within sampling noise
        qa, qb = np.quantile(a[key], [0.1, 0.25, 0.5, 0.75, 0.9]), np.quantile(b[key], [0.1, 0.25, 0.5, 0.75, 0.9])
        assert np.allclose(qa, qb, atol=0.03 * (1 + abs(qb))), (key, qa, qb)
    # log-uniform aspect ratios: the mean log aspect within about 3 standard errors of torchvision's
    assert abs(np.log(a["aspect"]).mean() - np.log(b["aspect"]).mean()) < 0.012


@pytest.mark.parametrize("height,width", [(100, 1000), (1000, 100), (50, 49)])
def test_when_no_attempt_fits_the_box_is_torchvisions_central_crop(height, width):
    """scale above 1: no attempt fits, so both take the central crop clamped to the ratio."""
    ours = np.stack(crops.rrc_boxes([height], [width], np.random.default_rng(0), scale=(1.5, 2.0)), axis=1)[0]
    image = torch.empty(3, height, width)
    assert tuple(ours) == RandomResizedCrop.get_params(image, [1.5, 2.0], list(crops.RATIO))


def test_eval_box_is_the_centre_square_of_resize_256_then_crop_224():
    y, x, h, w = crops.center_boxes([375, 256, 600], [500, 256, 300])
    assert h.tolist() == w.tolist() == [328, 224, 262]   # round(short x 224 / 256)
    assert y.tolist() == [(375 - 328) // 2, 16, (600 - 262) // 2] and x.tolist() == [(500 - 328) // 2, 16, 19]


def test_flips_are_half_and_draws_repeat_with_the_seed():
    flips = crops.flips(20_000, np.random.default_rng(3))
    assert abs(flips.mean() - 0.5) < 0.015
    first = crops.rrc_boxes([400] * 50, [300] * 50, np.random.default_rng(7))
    again = crops.rrc_boxes([400] * 50, [300] * 50, np.random.default_rng(7))
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
