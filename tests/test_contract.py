"""One contract test suite run over every registered pipeline, on index-encoded images.

Runs on the CPU in CI and on the GPU where one is present (device="auto").
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import pipelines
from pipelines.config import MEAN, PAD, STD, PipelineConfig

from conftest import COL0, COL_STEP, indexed_images

ALL = pipelines.names()
N = 1000   # samples used by most tests (the first N of the train split)


def make(name: str, root, **changes) -> pipelines.Pipeline:
    reason = pipelines.available()[name]
    if reason:
        pytest.skip(reason)
    base = dict(data_root=str(root), source="cifar10", max_samples=N, batch_size=64, num_workers=2)
    return pipelines.build(name, PipelineConfig(**{**base, **changes}))


def epoch(pipeline, e: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    pipeline.set_epoch(e)
    xs, ys = zip(*[(x.float().cpu(), y.cpu()) for x, y in pipeline])
    return torch.cat(xs), torch.cat(ys)


def to_uint8(x: torch.Tensor) -> np.ndarray:
    """Invert the normalization: N x 3 x 32 x 32 -> N x 32 x 32 x 3 uint8 (float32 batches)."""
    mean, std = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)
    return (x * std + mean).mul(255).round().clamp(0, 255).byte().permute(0, 2, 3, 1).numpy()


def decode_index(pixels: np.ndarray) -> np.ndarray:
    centre = pixels[:, 16, 16].astype(np.int64)   # inside the source image for every crop
    return centre[:, 0] + 256 * centre[:, 1]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype,channels_last", [("float32", False), ("bfloat16", True)])
def test_batches_have_contract_shape_dtype_device(name, dtype, channels_last, indexed_root):
    with make(name, indexed_root, dtype=dtype, channels_last=channels_last) as p:
        expected_device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        assert p.device.type == expected_device.type
        batches = list(p)
        assert len(batches) == len(p) == -(-N // 64)
        for x, y in batches:
            assert x.shape[1:] == (3, 32, 32) and x.shape[0] == y.shape[0]
            assert x.dtype == getattr(torch, dtype) and y.dtype == torch.int64
            assert x.device.type == y.device.type == expected_device.type
            memory_format = torch.channels_last if channels_last else torch.contiguous_format
            assert x.is_contiguous(memory_format=memory_format)
        assert [len(y) for _, y in batches] == [64] * (N // 64) + [N % 64]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("policy,sizes", [("partial", [3, 3, 1]), ("drop", [3, 3])])
def test_last_batch_policy_on_seven_samples(name, policy, sizes, indexed_root):
    with make(name, indexed_root, max_samples=7, batch_size=3, last_batch=policy) as p:
        assert [len(y) for _, y in p] == sizes
        assert len(p) == len(sizes)


@pytest.mark.parametrize("name", ALL)
def test_each_sample_once_per_epoch_and_reshuffled(name, indexed_root):
    with make(name, indexed_root) as p:
        orders = []
        for e in range(2):
            x, y = epoch(p, e)
            index = decode_index(to_uint8(x))
            assert sorted(index.tolist()) == list(range(N))
            assert torch.equal(y, torch.from_numpy((7 * index + 3) % 10))
            orders.append(index)
        assert not np.array_equal(orders[0], orders[1])


@pytest.mark.parametrize("name", ALL)
def test_ranks_partition_the_epoch(name, indexed_root):
    seen = []
    for rank in range(2):
        with make(name, indexed_root, rank=rank, world_size=2, augment=False) as p:
            seen += decode_index(to_uint8(epoch(p)[0])).tolist()
    assert sorted(seen) == list(range(N))


@pytest.mark.parametrize("name", ALL)
def test_deterministic_for_a_seed(name, indexed_root):
    outputs = []
    for seed in (5, 5, 6):
        with make(name, indexed_root, seed=seed, max_samples=256) as p:
            outputs.append(epoch(p, 3))
    assert torch.equal(outputs[0][0], outputs[1][0]) and torch.equal(outputs[0][1], outputs[1][1])
    assert not torch.equal(outputs[0][0], outputs[2][0])


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype,tolerance", [("float32", 1e-5), ("bfloat16", 2e-2)])
def test_eval_output_equals_float64_reference(name, dtype, tolerance, indexed_root):
    # float32: one rounding of a fused multiply-add, ~1e-7 relative; bfloat16: 8-bit mantissa,
    # half an ulp at |x| < 2.2 is < 8e-3.
    with make(name, indexed_root, augment=False, shuffle=False, dtype=dtype) as p:
        x, y = epoch(p)
    images, labels = indexed_images(0, N)
    reference = (torch.from_numpy(images).double().permute(0, 3, 1, 2) / 255
                 - torch.tensor(MEAN, dtype=torch.float64).view(1, 3, 1, 1)) / torch.tensor(STD, dtype=torch.float64).view(1, 3, 1, 1)
    assert torch.equal(y, torch.from_numpy(labels))
    assert (x.double() - reference).abs().max().item() < tolerance


def infer_crop(pixels: np.ndarray) -> tuple[int, int, bool]:
    """(dy, dx, flip) of one augmented index-encoded image, from its padding and column codes."""
    inside = pixels[..., 2] != 0
    rows = np.flatnonzero(inside.any(axis=1))
    top, bottom = rows[0], 31 - rows[-1]
    dy = PAD - top if top else PAD + bottom
    cols = np.flatnonzero(inside.any(axis=0))
    source_cols = (pixels[rows[0], cols, 2].astype(int) - COL0) // COL_STEP
    flip = bool(source_cols[-1] < source_cols[0])
    c = cols[0]
    dx = source_cols[0] - ((31 - c) if flip else c) + PAD
    return int(dy), int(dx), flip


def reference_crop(image: np.ndarray, dy: int, dx: int, flip: bool) -> np.ndarray:
    padded = np.pad(image, ((PAD, PAD), (PAD, PAD), (0, 0)))
    crop = padded[dy:dy + 32, dx:dx + 32]
    return crop[:, ::-1] if flip else crop


@pytest.mark.parametrize("name", ALL)
def test_augmentation_crop_offsets_and_flip_rate(name, indexed_root):
    draws = []
    with make(name, indexed_root) as p:
        for e in range(2):
            pixels = to_uint8(epoch(p, e)[0])
            for img, i in zip(pixels, decode_index(pixels)):
                dy, dx, flip = infer_crop(img)
                source = indexed_images(int(i), 1)[0][0]
                assert np.array_equal(img, reference_crop(source, dy, dx, flip)), (name, i, dy, dx, flip)
                draws.append((dy, dx, flip))
    dy, dx, flip = map(np.array, zip(*draws))
    n = len(draws)
    for offsets in (dy, dx):   # uniform over 0..8: chi-square, 8 degrees of freedom, p = 0.001 -> 26.1
        counts = np.bincount(offsets, minlength=2 * PAD + 1)
        assert len(counts) == 2 * PAD + 1
        assert ((counts - n / 9) ** 2 / (n / 9)).sum() < 26.1, counts
    assert abs(flip.mean() - 0.5) < 4 * np.sqrt(0.25 / n), flip.mean()


@pytest.mark.parametrize("name", ALL)
def test_set_epoch_rejects_bad_values_and_close_is_idempotent(name, indexed_root):
    p = make(name, indexed_root, max_samples=64)
    with pytest.raises(ValueError, match="epoch=-1"):
        p.set_epoch(-1)
    p.close()
    p.close()
