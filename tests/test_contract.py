"""One contract test suite run over every registered pipeline (and the variants that read
differently), on index-encoded images. Runs on the CPU in CI and on the GPU where one is present
(device="auto"); DALI runs CPU-only without a GPU.

Pipelines that decode JPEG are compared with the same JPEG bytes decoded by PIL. Tolerance:
decoders differ in IDCT and chroma upsampling by a few levels at edges: nvJPEG on an H100 against
PIL (libjpeg-turbo) measured at most 5 and on average 1.17 levels on this data
(results/2026-11-21-h100-dali/lease-a-pytest-on-gpu.txt), so per image at
most JPEG_MAX_LEVELS and on average JPEG_MEAN_LEVELS (of 255). Raw pixels: exact.
"""
from __future__ import annotations

import dataclasses
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import pipelines
from pipelines import contract, kernels, sources, workers
from pipelines.config import MEAN, PAD, STD, PipelineConfig

from conftest import COL0, COL_STEP, DIGIT, LEVEL, forkserver_for_tests, indexed_images

JPEG_MAX_LEVELS, JPEG_MEAN_LEVELS = 8, 1.5
VARIANTS = [(name, {}) for name in pipelines.names()] + [
    ("dataloader", {"encoding": "jpeg"}), ("dali", {"dali_reader": "parallel"}), ("dali", {"dali_reader": "file"})]
IDS = [name + "".join(f"-{v}" for v in changes.values()) for name, changes in VARIANTS]
# DALI's parallel reader runs the same callback in worker processes that take seconds to start: it
# takes the tests of which samples arrive and what they hold; shape, option and determinism tests
# run the other variants. It starts PARALLEL_WORKERS of them (one still runs the callback in a spawned
# process) except where a test asks for NUM_WORKERS: each sample once in an epoch shared by two.
NUM_WORKERS, PARALLEL_WORKERS = 2, 1
LIGHT_VARIANTS = [v for v in VARIANTS if v[1].get("dali_reader") != "parallel"]
LIGHT_IDS = [i for v, i in zip(VARIANTS, IDS) if v in LIGHT_VARIANTS]
N = 1000   # samples used by most tests (the first N of the train split)


SPLITS: dict[tuple, sources.Split] = {}   # loaded once per data setting, shared by every pipeline


@pytest.fixture(scope="module", autouse=True)
def forkserver_preloading_every_worker_module():
    """DataLoader workers fork from this process's one forkserver, which imports what the first loader
    asked for (`workers.start_forkserver`): here one importing what both DataLoader-based pipelines'
    workers import (tests/conftest.py's `forkserver_for_tests`), so that `timm`'s workers do not each
    import timm (seconds each) after a `dataloader` started the server."""
    forkserver_for_tests()


def make(variant, root, **changes) -> pipelines.Pipeline:
    name, fixed = variant
    reason = pipelines.available()[name]
    if reason:
        pytest.skip(reason)
    common = dict(data_root=str(root), source="cifar10", max_samples=N, batch_size=64,
                  last_batch="partial",   # every sample, the epoch's last smaller batch too
                  num_workers=PARALLEL_WORKERS if fixed.get("dali_reader") == "parallel" else NUM_WORKERS)
    config = pipelines.resolve_config(name, PipelineConfig(**{**common, **fixed, **changes}))
    if pipelines.source_refusal(name, config):   # photographs only (tests/test_ffcv.py)
        pytest.skip(pipelines.source_refusal(name, config))
    key = (config.data_root, config.encoding, config.split, config.image_size, config.max_samples)
    if key not in SPLITS:
        SPLITS[key] = sources.open_split(config)
    return pipelines.build(name, config, data=SPLITS[key])


def epoch(pipeline, e: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    pipeline.set_epoch(e)
    xs, ys = zip(*[(x.float().cpu(), y.cpu()) for x, y in pipeline])
    return torch.cat(xs), torch.cat(ys)


def to_pixels(x: torch.Tensor) -> np.ndarray:
    """Invert the normalization: N x 3 x 32 x 32 -> N x 32 x 32 x 3 float pixel levels."""
    mean, std = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)
    return (x.double() * std + mean).mul(255).permute(0, 2, 3, 1).numpy()


def decode_index(pixels: np.ndarray) -> np.ndarray:
    """From the centre 8x8 patch, inside the source image for every crop."""
    digits = np.rint((pixels[:, 12:20, 12:20, :2].mean(axis=(1, 2)) - LEVEL // 2) / LEVEL).astype(int)
    return digits[:, 0] + DIGIT * digits[:, 1]


def source_pixels(p: pipelines.Pipeline, i: int) -> np.ndarray:
    """What the pipeline's input holds for sample i: raw pixels, or its JPEG bytes decoded by PIL."""
    if p.config.encoding == "jpeg":
        return np.asarray(Image.open(io.BytesIO(p.data.jpeg[i])).convert("RGB"))
    return p.data.images[i]


def assert_pixels_match(got: np.ndarray, want: np.ndarray, jpeg: bool, what=""):
    diff = np.abs(got - want.astype(np.float64))
    if jpeg:
        assert diff.max() <= JPEG_MAX_LEVELS and diff.mean() <= JPEG_MEAN_LEVELS, (what, diff.max(), diff.mean())
    else:
        assert diff.max() < 1e-3, (what, diff.max())


def test_a_split_that_is_not_the_one_the_pipeline_reads_is_refused(indexed_root):
    config = PipelineConfig(data_root=str(indexed_root), source="cifar10", max_samples=64, device="cpu")
    raw = sources.open_split(config)
    with pytest.raises(ValueError, match="tvjpeg: the data passed is not the split it reads"):
        pipelines.build("tvjpeg", config, data=raw)
    with pytest.raises(ValueError, match="prefetch: the data passed is not the split it reads"):
        pipelines.build("prefetch", config.replace(image_size=64), data=raw)
    with pytest.raises(ValueError, match=r"prefetch: the data passed is not the split it reads \(data: train split, "
                                         r"64 samples, no JPEG copy, 32 px; config: test split, at most 64 samples"):
        pipelines.build("prefetch", config.replace(split="test"), data=raw)
    with pytest.raises(ValueError, match=r"\(data: train split, 64 samples.*config: train split, at most 32 samples"):
        pipelines.build("prefetch", config.replace(max_samples=32), data=raw)
    with pipelines.build("prefetch", config, data=raw) as p:
        assert p.data is raw


@pytest.mark.parametrize("name,changes", [("prefetch", {}), ("resident", {}), ("dataloader", {"num_workers": 0})])
def test_a_split_of_your_own_arrays_feeds_the_pipelines_that_read_pixels(name, changes):
    images, labels = indexed_images(0, 100)
    data = sources.Split.from_arrays(images, labels)
    assert (data.source, data.folder, data.jpeg, data.split) == ("arrays", None, None, "train")
    config = PipelineConfig(batch_size=32, shuffle=False, augment=False, last_batch="partial", **changes)
    with pipelines.build(name, config, data=data) as p:
        batches = [(x.float().cpu(), y.cpu()) for x, y in p]
    assert [len(y) for _, y in batches] == [32, 32, 32, 4]
    assert torch.cat([y for _, y in batches]).tolist() == labels.tolist()
    assert_pixels_match(to_pixels(torch.cat([x for x, _ in batches])), images, jpeg=False)
    with pytest.raises(ValueError, match="tvjpeg: the data passed is not the split it reads .*no JPEG copy"):
        pipelines.build("tvjpeg", config, data=data)


def test_dali_s_file_reader_refuses_data_without_a_folder(small_indexed_root):
    if pipelines.available()["dali"]:
        pytest.skip(pipelines.available()["dali"])
    config = PipelineConfig(data_root=str(small_indexed_root), source="cifar10", max_samples=64, device="cpu",
                            dali_reader="file")
    data = dataclasses.replace(sources.open_split(pipelines.resolve_config("dali", config)), folder=None)
    with pytest.raises(ValueError, match="dali: dali_reader='file' reads the JPEG file tree of a data folder or "
                                         "photographs' files; the data passed \\(custom\\) has none: use "
                                         "dali_reader='external'"):
        pipelines.build("dali", config, data=data)


@pytest.mark.parametrize("variant", LIGHT_VARIANTS, ids=LIGHT_IDS)
@pytest.mark.parametrize("dtype,channels_last", [("float32", False), ("bfloat16", True)])
def test_batches_have_contract_shape_dtype_device(variant, dtype, channels_last, indexed_root):
    with make(variant, indexed_root, dtype=dtype, channels_last=channels_last) as p:
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


@pytest.mark.parametrize("variant", LIGHT_VARIANTS, ids=LIGHT_IDS)
@pytest.mark.parametrize("policy,sizes", [("partial", [3, 3, 1]), ("drop", [3, 3])])
def test_last_batch_policy_on_seven_samples(variant, policy, sizes, indexed_root):
    with make(variant, indexed_root, max_samples=7, batch_size=3, last_batch=policy) as p:
        for e in range(2):
            p.set_epoch(e)
            assert [len(y) for _, y in p] == sizes
        assert len(p) == len(sizes)


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_each_sample_once_per_epoch_and_reshuffled(variant, indexed_root):
    with make(variant, indexed_root, num_workers=NUM_WORKERS) as p:
        orders = []
        for e in range(2):
            x, y = epoch(p, e)
            index = decode_index(to_pixels(x))
            assert sorted(index.tolist()) == list(range(N))
            assert torch.equal(y, torch.from_numpy((7 * index + 3) % 10))
            orders.append(index)
        assert not np.array_equal(orders[0], orders[1])


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_ranks_partition_the_epoch(variant, indexed_root):
    seen = []
    for rank in range(2):
        with make(variant, indexed_root, rank=rank, world_size=2, augment=False) as p:
            seen += decode_index(to_pixels(epoch(p)[0])).tolist()
    assert sorted(seen) == list(range(N))


@pytest.mark.parametrize("variant", LIGHT_VARIANTS, ids=LIGHT_IDS)
def test_deterministic_for_a_seed(variant, indexed_root):
    outputs = []
    for seed in (5, 5, 6):
        with make(variant, indexed_root, seed=seed, max_samples=256) as p:
            outputs.append(epoch(p, 3))
    assert torch.equal(outputs[0][0], outputs[1][0]) and torch.equal(outputs[0][1], outputs[1][1])
    assert not torch.equal(outputs[0][0], outputs[2][0])


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
@pytest.mark.parametrize("dtype,tolerance", [("float32", 1e-5), ("bfloat16", 2e-2)])
def test_eval_output_equals_float64_reference(variant, dtype, tolerance, indexed_root):
    # Reference: float64 (pixels/255 - mean)/std of the pipeline's input (JPEG: decoded by PIL).
    # float32: one rounding of a fused multiply-add, ~1e-7 relative; bfloat16: 8-bit mantissa,
    # half an ulp at |x| < 2.2 is < 8e-3. JPEG: the decoder tolerance above, in pixel levels.
    with make(variant, indexed_root, augment=False, shuffle=False, dtype=dtype) as p:
        x, y = epoch(p)
        pixels = np.stack([source_pixels(p, i) for i in range(N)])
        jpeg = p.config.encoding == "jpeg"
    assert torch.equal(y, torch.from_numpy(p.data.labels))
    reference = (torch.from_numpy(pixels).double().permute(0, 3, 1, 2) / 255
                 - torch.tensor(MEAN, dtype=torch.float64).view(1, 3, 1, 1)) / torch.tensor(STD, dtype=torch.float64).view(1, 3, 1, 1)
    if jpeg:
        assert_pixels_match(to_pixels(x), pixels, jpeg=True)
    else:
        assert (x.double() - reference).abs().max().item() < tolerance


def infer_crop(pixels: np.ndarray) -> tuple[int, int, bool]:
    """(dy, dx, flip) of one augmented index-encoded image, from its zero padding (exact: it is
    added after any decode) and a least-squares fit of the column ramp (robust to JPEG error)."""
    inside = pixels[..., 2] > 0.5 * COL0
    rows = np.flatnonzero(inside.any(axis=1))
    top, bottom = rows[0], 31 - rows[-1]
    dy = PAD - top if top else PAD + bottom
    cols = np.flatnonzero(inside.any(axis=0))
    source_cols = (pixels[rows][:, cols, 2].mean(axis=0) - COL0) / COL_STEP
    flip = bool(np.polyfit(cols, source_cols, 1)[0] < 0)
    dx = np.rint(np.mean(source_cols - ((31 - cols) if flip else cols)) + PAD)
    return int(dy), int(dx), flip


def reference_crop(image: np.ndarray, dy: int, dx: int, flip: bool) -> np.ndarray:
    padded = np.pad(image, ((PAD, PAD), (PAD, PAD), (0, 0)))
    crop = padded[dy:dy + 32, dx:dx + 32]
    return crop[:, ::-1] if flip else crop


@pytest.mark.parametrize("variant", LIGHT_VARIANTS, ids=LIGHT_IDS)
def test_augmentation_crop_offsets_and_flip_rate(variant, indexed_root):
    draws = []
    with make(variant, indexed_root) as p:
        jpeg = p.config.encoding == "jpeg"
        for e in range(2):
            pixels = to_pixels(epoch(p, e)[0])
            for img, i in zip(pixels, decode_index(pixels)):
                dy, dx, flip = infer_crop(img)
                want = reference_crop(source_pixels(p, int(i)), dy, dx, flip)
                assert_pixels_match(img, want, jpeg, (i, dy, dx, flip))
                draws.append((dy, dx, flip))
    dy, dx, flip = map(np.array, zip(*draws))
    n = len(draws)
    for offsets in (dy, dx):   # uniform over 0..8: chi-square, 8 degrees of freedom, p = 0.001 -> 26.1
        counts = np.bincount(offsets, minlength=2 * PAD + 1)
        assert len(counts) == 2 * PAD + 1
        assert ((counts - n / 9) ** 2 / (n / 9)).sum() < 26.1, counts
    assert abs(flip.mean() - 0.5) < 4 * np.sqrt(0.25 / n), flip.mean()


@pytest.mark.parametrize("variant", LIGHT_VARIANTS, ids=LIGHT_IDS)
def test_set_epoch_rejects_bad_values_and_close_is_idempotent(variant, indexed_root):
    p = make(variant, indexed_root, max_samples=64)
    with pytest.raises(ValueError, match="epoch=-1"):
        p.set_epoch(-1)
    p.close()
    p.close()


@pytest.mark.parametrize("name, preload", [("dataloader", ["pipelines.dataloader"]),
                                           ("timm", ["pipelines.timm", "timm.data"])])
def test_the_forkserver_imports_once_what_every_worker_would_import(name, preload, monkeypatch, indexed_root):
    """DataLoader workers started by the forkserver begin with what it imported: the dataset's
    module, and for `timm` timm's data package, whose transforms every worker runs (its module
    imports timm lazily, so preloading the module alone left each worker importing timm); what a
    sweep's child starts early (`pipelines.worker_modules`) is the same, and nothing where no worker
    starts from a forkserver."""
    started = []
    monkeypatch.setattr(workers, "start_forkserver", lambda modules: started.append(list(modules)))
    pipeline = make((name, {}), indexed_root, max_samples=64, worker_start="forkserver")
    pipeline.close()
    assert started == [preload]
    config = pipeline.config
    assert list(pipelines.worker_modules(name, config)) == preload
    for other in (config.replace(num_workers=0), config.replace(worker_start="spawn")):
        assert pipelines.worker_modules(name, other) == ()
    assert pipelines.worker_modules("none", config) == pipelines.worker_modules("prefetch", config) == ()


EARLY_FORKSERVER = """
import sys, time
from pathlib import Path
from pipelines import workers
marker = Path(sys.argv[1])
workers.start_forkserver_early(["slow_import"])
started = marker.exists()
workers.forkserver_ready()
print(started, marker.exists())
"""


def test_a_forkserver_started_early_imports_meanwhile_and_is_waited_for_before_anything_is_timed(tmp_path):
    """`start_forkserver_early` returns while the forkserver still imports (here a module that takes
    2 s and then leaves a file); `forkserver_ready` returns only once it has imported everything."""
    (tmp_path / "slow_import.py").write_text("import os, sys, time\ntime.sleep(2)\n"
                                             f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).resolve().parents[1])])}
    done = subprocess.run([sys.executable, "-c", EARLY_FORKSERVER, str(tmp_path / "imported")], capture_output=True,
                          text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "True"], done.stdout


def crop_errors(img: np.ndarray, padded: np.ndarray) -> np.ndarray:
    """The mean absolute difference between `img` (S x S x 3) and every S x S crop of `padded`, as is
    and mirrored: errors[dy, dx, flip]."""
    size = img.shape[0]
    crops = np.lib.stride_tricks.sliding_window_view(padded, (size, size), axis=(0, 1))   # dy, dx, 3, S, S
    chw = img.transpose(2, 0, 1)
    return np.stack([np.abs(crops - chw).mean(axis=(2, 3, 4)), np.abs(crops - chw[..., ::-1]).mean(axis=(2, 3, 4))],
                    axis=-1)


@pytest.mark.parametrize("variant", LIGHT_VARIANTS, ids=LIGHT_IDS)
def test_image_size_upscales_the_set_and_scales_the_crop(variant, small_indexed_shared):
    size, n = 64, 128
    with make(variant, small_indexed_shared, image_size=size, augment=False, shuffle=False, max_samples=n) as p:
        x, y = epoch(p)
        jpeg = p.config.encoding == "jpeg"
        assert x.shape == (n, 3, size, size) and p.data.source == f"custom@{size}px"
        raw = np.stack([source_pixels(p, i) for i in range(n)]) if jpeg else p.data.images
        assert_pixels_match(to_pixels(x), raw, jpeg)
    assert not jpeg or raw.shape == (n, size, size, 3)
    if not jpeg:   # the same content, each pixel repeated 2 x 2
        small = make(variant, small_indexed_shared, max_samples=n).data.images
        assert np.array_equal(raw, small.repeat(2, axis=1).repeat(2, axis=2))
    pad = size // 8
    with make(variant, small_indexed_shared, image_size=size, shuffle=False, max_samples=32) as p:
        pixels = to_pixels(epoch(p)[0])
    offsets = []
    for img, src in zip(pixels, raw):   # find each output among every crop of the padded source
        errors = crop_errors(img, np.pad(src, ((pad, pad), (pad, pad), (0, 0))).astype(np.float64))
        best = np.unravel_index(np.argmin(errors), errors.shape)   # the first least, in (dy, dx, flip) order
        assert errors[best] <= (JPEG_MEAN_LEVELS if jpeg else 1e-3), (best, errors[best])
        offsets += [int(best[0]), int(best[1])]
    assert max(offsets) > 8   # offsets span 0..2 * pad = 16, not the 32-px 0..8


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_stages_run_alone(variant, indexed_root):
    """host yields the epoch's batches in plan order; payload is what crosses the bus; device
    turns one fixed batch into contract images."""
    with make(variant, indexed_root, max_samples=256) as p:
        p.set_epoch(1)
        stages = p.stages()
        plan = np.concatenate(p.batches())
        if stages.host is not None:
            labels = torch.cat([torch.as_tensor(y) for _, y in stages.host()])
            assert torch.equal(labels.long(), torch.from_numpy(p.data.labels[plan]))
        out = stages.device()
        images = out[0] if isinstance(out, tuple) else out
        assert images.shape == (stages.device_images or 64, 3, 32, 32) and images.device.type == p.device.type
        first = p.batches()[0]
        pixels = {"dataloader": 4 * 3072, "prefetch": 3072, "dali-raw": 3072, "timm": 3072, "spdl": 3072}   # float32 / uint8
        labels = 8 * len(first) if p.name in ("dataloader", "timm", "spdl") else 0   # int64 per batch; others keep them on the device
        if p.name == "resident":
            expected = 0
        elif p.name in pixels:
            expected = len(first) * pixels[p.name] + labels
        else:   # the batch's JPEG files
            expected = sum(len(p.data.jpeg[i]) for i in first)
        assert sum(t.nbytes for t in stages.payload) == expected
        cuda = p.device.type == "cuda"
        assert stages.copy == ("none" if not cuda or p.name == "resident" else
                               "pageable" if p.name in ("dataloader", "tvjpeg", "torchcodec", "nvimgcodec") else "pinned")
        assert (stages.host is None) == (p.name == "resident" or p.config.dali_reader == "file" and p.name == "dali")
        p.set_epoch(3)   # a jump (DALI builds its epoch pipeline again) leaves the stages usable
        next(iter(p))
        for _ in range(5):   # past the DALI batch (4 batches) fetched before the jump
            out = stages.device()
            assert (out[0] if isinstance(out, tuple) else out).shape == (stages.device_images or 64, 3, 32, 32)


@pytest.mark.parametrize("variant", LIGHT_VARIANTS, ids=LIGHT_IDS)
def test_one_iterator_at_a_time_a_superseded_one_refuses_to_go_on(variant, indexed_root):
    with make(variant, indexed_root, max_samples=256) as p:
        p.set_epoch(0)
        old = iter(p)
        next(old)
        p.set_epoch(1)
        x, y = epoch(p, 1)   # a newer iterator: the whole epoch, right
        assert sorted(decode_index(to_pixels(x)).tolist()) == list(range(256)) and len(y) == 256
        with pytest.raises(RuntimeError, match="superseded by a newer iter"):
            next(old)


@pytest.mark.parametrize("variant", LIGHT_VARIANTS, ids=LIGHT_IDS)
def test_a_closed_pipeline_refuses_to_iterate(variant, indexed_root):
    p = make(variant, indexed_root, max_samples=128)
    live = iter(p)
    next(live)
    p.close()
    with pytest.raises(RuntimeError, match="pipeline is closed"):
        next(live)
    with pytest.raises(RuntimeError, match="pipeline is closed"):
        iter(p)
    with pytest.raises(RuntimeError, match="pipeline is closed"):
        p.stages()


RAW = [
    v
    for v in LIGHT_VARIANTS
    if pipelines.available()[v[0]] is None
    and pipelines.resolve_config(v[0], PipelineConfig(**v[1])).encoding == "raw"
]


@pytest.mark.parametrize("variant", RAW, ids=[v[0] + "".join(f"-{x}" for x in v[1].values()) for v in RAW])
def test_raw_pipelines_crop_and_flip_every_sample_alike(variant, indexed_root):
    """Every pipeline draws an epoch's crops and flips from the one stream of (seed, epoch, rank): the
    raw-pixel pipelines yield the same batches as prefetch (float32 rounding apart), so they train
    on the same data and can be compared on accuracy."""
    with make(("prefetch", {}), indexed_root, max_samples=256) as p:
        want = epoch(p, 2)
    with make(variant, indexed_root, max_samples=256) as p:
        got = epoch(p, 2)
    assert torch.equal(got[1], want[1])
    assert (got[0] - want[0]).abs().max() < 1e-5


def test_prefetch_crops_on_the_host_or_the_device_alike(indexed_root):
    outputs = [epoch(make(("prefetch", {}), indexed_root, max_samples=256, prefetch_augment=where), 1)
               for where in ("device", "host")]
    assert torch.equal(outputs[0][0], outputs[1][0]) and torch.equal(outputs[0][1], outputs[1][1])


CROP_DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                     reason="needs a CUDA device"))]


@pytest.mark.parametrize("device", CROP_DEVICES)
@pytest.mark.parametrize("dtype,channels_last,tolerance", [("float32", False, 1e-5), ("bfloat16", True, 2e-2)])
def test_crop_normalize_is_the_padded_crop_mirrored_then_normalized(device, dtype, channels_last, tolerance):
    """The shared kernel of `prefetch` and `resident` (compiled on CUDA, for any number of images)
    against the definition: pad with zeros, crop at (dy, dx), mirror, normalize; the extreme
    offsets included, in the layout the config asks for; the samples' draws taken from the
    epoch's at their position. On CUDA the compiled kernel is the one that runs."""
    from pipelines.kernels import crop_normalize, warm_crop_normalize
    config = PipelineConfig(device=device, dtype=dtype, channels_last=channels_last)
    warm_crop_normalize(torch.device(device), config)
    if device == "cuda":
        assert kernels._COMPILED["cuda"] is not kernels._crop_normalize, "crop_normalize fell back to op by op"
    g = torch.Generator().manual_seed(3)
    images = torch.randint(0, 256, (20, 32, 32, 3), dtype=torch.uint8, generator=g)
    for n in (7, 12):   # two batch sizes: one compiled kernel serves both
        index = torch.randint(0, 20, (n,), generator=g)
        dy, dx = torch.randint(0, 2 * PAD + 1, (2, n), generator=g)
        dy[:2], dx[:2] = torch.tensor([0, 2 * PAD]), torch.tensor([2 * PAD, 0])   # the corners of the padding
        flip = torch.arange(n) % 2
        start = 3   # the epoch's draws: 3 other samples' before these, 2 after
        epoch = [torch.cat([torch.randint(0, 2, (start,), generator=g), d, torch.randint(0, 2, (2,), generator=g)])
                 for d in (dy, dx, flip)]
        got = crop_normalize(images.to(device), index.to(device), tuple(d.to(device) for d in epoch), config, start)
        assert got.shape == (n, 3, 32, 32) and got.dtype == getattr(torch, dtype) and got.device.type == device
        assert got.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        crops = np.stack([reference_crop(images[i].numpy(), int(y), int(x), bool(f))
                          for i, y, x, f in zip(index, dy, dx, flip)])
        want = ((torch.from_numpy(crops).double().permute(0, 3, 1, 2) / 255 - torch.tensor(MEAN).double().view(1, 3, 1, 1))
                / torch.tensor(STD).double().view(1, 3, 1, 1))
        assert (got.cpu().double() - want).abs().max().item() < tolerance


def test_compiles_run_in_process_unless_inductor_s_own_variable_asks_for_workers(monkeypatch):
    import torch._inductor.config as inductor
    from pipelines.kernels import compile_in_process
    monkeypatch.setattr(inductor, "compile_threads", 8)
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    compile_in_process(torch.nn.Identity())
    assert inductor.compile_threads == 1
    monkeypatch.setattr(inductor, "compile_threads", 8)   # as inductor reads the variable at import
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "8")
    compile_in_process(torch.nn.Identity())
    assert inductor.compile_threads == 8


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_compiling_the_kernel_starts_no_compile_worker_process():
    """A pipeline's constructor compiles `crop_normalize` in its own process: inductor's compile
    workers would take the loader's cores while they start (a fresh process: none started yet)."""
    script = ("import os, torch; from bench.measuring import machine; from pipelines import kernels\n"
              "from pipelines.config import PipelineConfig\n"
              "kernels.warm_crop_normalize(torch.device('cuda'), PipelineConfig(device='cuda'))\n"
              "assert kernels._COMPILED['cuda'] is not kernels._crop_normalize, 'fell back to op by op'\n"
              "print(len(machine.descendants(os.getpid())))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR_COMPILE_THREADS")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600,
                          cwd=str(Path(__file__).resolve().parents[1]))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "0", "child processes left running: " + done.stdout


def test_resident_launches_the_next_round_before_the_consumer_takes_a_batch(synthetic_root, monkeypatch):
    """With `prefetch_depth` 2 and rounds of 4 batches, taking a round's first batch leaves the
    next round launched: the consumer's stream never waits on work launched just before it."""
    import pipelines.resident as resident
    rounds = []
    kernel = resident.crop_normalize
    monkeypatch.setattr(resident, "crop_normalize", lambda images, index, *rest: (rounds.append(len(index)),
                                                                                 kernel(images, index, *rest))[1])
    config = PipelineConfig(data_root=str(synthetic_root), device="cpu", batch_size=32, max_samples=32 * 12,
                            prefetch_depth=2, batches_per_launch=4)
    with pipelines.build("resident", config) as p:
        batches = iter(p)
        for taken in range(1, 13):
            next(batches)
            launched = min(3, 1 + (taken - 1) // 4 + 1)   # the round of the batch taken and the next one
            assert len(rounds) == launched, (taken, rounds)
    assert rounds == [128, 128, 128]


@pytest.mark.parametrize("variant", LIGHT_VARIANTS, ids=LIGHT_IDS)
def test_a_host_stage_run_between_epochs_leaves_the_next_epoch_as_it_was(variant, indexed_root):
    """Stages made before an epoch and run after it (the host stage fills what the epoch and the
    preparation of the next one fill) do not change what the next epoch yields."""
    with make(variant, indexed_root, max_samples=128) as fresh:   # epochs in the same sequence
        epoch(fresh, 0)   # (DALI's file reader follows its own sequence of epochs)
        want = epoch(fresh, 1)
    with make(variant, indexed_root, max_samples=128) as p:
        stages = p.stages()
        epoch(p, 0)
        if stages.host is not None:
            list(stages.host())
        got = epoch(p, 1)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


@pytest.mark.parametrize("augment", ["device", "host"])
def test_prefetch_host_stage_ended_early_waits_for_its_fills(augment, indexed_root, monkeypatch):
    """A host stage abandoned after one batch, its slow fills still under way, does not write into
    the slots of the epoch that follows."""
    import pipelines.prefetch as prefetch
    gather = prefetch.PrefetchPipeline._gather

    def slow(self, slot, index, start, draws):
        time.sleep(0.02)
        return gather(self, slot, index, start, draws)

    with make(("prefetch", {}), indexed_root, max_samples=512, prefetch_augment=augment, num_workers=4) as fresh:
        want = epoch(fresh, 2)
    monkeypatch.setattr(prefetch.PrefetchPipeline, "_gather", slow)
    with make(("prefetch", {}), indexed_root, max_samples=512, prefetch_augment=augment, num_workers=4,
              prefetch_depth=1) as p:
        host = p.stages().host()
        next(host)
        got = epoch(p, 2)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


@pytest.mark.parametrize("variant", LIGHT_VARIANTS, ids=LIGHT_IDS)
def test_stages_of_an_epoch_without_a_batch_are_refused_in_one_line(variant, indexed_root):
    with make(variant, indexed_root, max_samples=20, batch_size=32, last_batch="drop") as p:
        assert len(p) == 0
        with pytest.raises(ValueError, match="the epoch has no batch"):
            p.stages()


@pytest.mark.parametrize("variant", [("prefetch", {"prefetch_augment": "device"}),
                                     ("prefetch", {"prefetch_augment": "host"}), ("resident", {})],
                         ids=["prefetch-device", "prefetch-host", "resident"])
def test_the_next_epoch_is_planned_during_this_one_and_yields_the_same_batches(variant, indexed_root, monkeypatch):
    """While an epoch runs, `prefetch` (its producer, after the last round, with the next epoch's
    first round) and `resident` (its planner thread) plan the next epoch, so the restart does not;
    epochs in sequence, an epoch skipped, and an epoch after `stages()` still yield exactly what a
    fresh pipeline yields for that epoch."""
    planned = []
    plan = contract.epoch_batches   # every pipeline plans its epochs through Pipeline.batches
    monkeypatch.setattr(contract, "epoch_batches", lambda n, config, e: (planned.append(e), plan(n, config, e))[1])
    with make(variant, indexed_root, max_samples=300) as p:
        seen = [epoch(p, 0)]
        p.upcoming.result()   # made while the epoch's last batches are consumed
        assert planned == [0, 1]   # epoch 1 planned before the loop asked for it
        seen.append(epoch(p, 1))
        p.upcoming.result()
        assert planned == [0, 1, 2]
        seen.append(epoch(p, 5))   # not the planned epoch: planned anew
        p.stages().device()
        seen.append(epoch(p, 6))
    for e, (x, y) in zip((0, 1, 5, 6), seen):
        with make(variant, indexed_root, max_samples=300) as fresh:
            want = epoch(fresh, e)
        assert torch.equal(x, want[0]) and torch.equal(y, want[1]), e


def test_every_pipeline_declares_its_queue_capacity():
    """The drain before a timed window takes up to `queue_capacity` + 1 batches (`bench.measuring.harness.drain`):
    a pipeline that says nothing would read as making every batch inside next()."""
    undeclared = [name for name in pipelines.names()
                  if pipelines._declared_class(name).queue_capacity is contract.Pipeline.queue_capacity]
    assert undeclared == []


@pytest.mark.parametrize("variant", LIGHT_VARIANTS, ids=LIGHT_IDS)
def test_a_pipeline_left_alone_holds_no_more_ready_batches_than_its_queue_capacity(variant, indexed_root):
    """After a second with nobody asking, the batches handed over without waiting (DRAIN_WAIT_MS, as
    the drain tells) number at most the declared capacity, + 1 for one finished while they are taken."""
    from bench.measuring.drain import DRAIN_WAIT_MS
    with make(variant, indexed_root) as p:
        batches = iter(p)
        next(batches)   # the producers run
        time.sleep(1.0)
        capacity, ready = p.queue_capacity, 0
        for _ in range(min(capacity + 2, len(p) - 1)):
            t0 = time.perf_counter()
            next(batches)
            if (time.perf_counter() - t0) * 1e3 >= DRAIN_WAIT_MS:
                break
            ready += 1
        assert ready <= capacity + 1, (ready, capacity)
