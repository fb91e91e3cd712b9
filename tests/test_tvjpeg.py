"""`tvjpeg` and `torchcodec` on their producer thread: photographs resized in one batch
(`kernels.resized_crops`) as the per-image antialiased resize and PIL resize them, within
RESIZE_MAX_LEVELS (one uint8 level: the same filter, rounded apart) and on average far less
(RESIZE_MEAN_LEVELS, FLOAT16_MEAN_LEVELS); the producer thread ends whichever way an epoch ends.
"""
from __future__ import annotations

import gc
import threading
import time
import weakref

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import functional as TF

import pipelines
from pipelines import PipelineConfig, kernels, tvjpeg
from pipelines.config import STD

RESIZE_MAX_LEVELS = 1             # any pixel, against the per-image resize or PIL
RESIZE_MEAN_LEVELS = 0.01         # float32, against the per-image resize (the same sums, summed in another order)
FLOAT16_MEAN_LEVELS = 0.05        # float16 (the GPU's), against the per-image resize
PIL_MEAN_LEVELS = 0.3             # against PIL, which rounds to uint8 between its two passes
PHOTO_READERS = ["tvjpeg", "torchcodec", "nvimgcodec"]

NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(scope="module", autouse=True)
def nested_tensor_notice_taken():
    """`kernels.resized_crops` pads through torch's nested tensors, a prototype API that warns once per
    process; every pipeline that resizes photographs takes that warning silenced as it is built
    (`kernels.warm_padded`), and so do these tests, which call the kernel directly: the suite printed
    the notice wherever one of them was a worker's first resize."""
    kernels.warm_padded()


def per_image(images: list[torch.Tensor], boxes: torch.Tensor, size: int) -> torch.Tensor:
    """The reference: each box cut, resized with `interpolate(antialias=True)` (PIL's filter),
    mirrored, rounded: B x size x size x 3 uint8."""
    out = []
    for image, (y, x, h, w, flip) in zip(images, boxes.T.tolist()):
        crop = image[None, :, y:y + h, x:x + w].float()
        resized = torch.nn.functional.interpolate(crop, size=(size, size), mode="bilinear", antialias=True)[0]
        out.append((resized.flip(-1) if flip else resized).round().clamp(0, 255).to(torch.uint8))
    return torch.stack(out).permute(0, 2, 3, 1)


def with_pil(images: list[torch.Tensor], boxes: torch.Tensor, size: int) -> torch.Tensor:
    out = []
    for image, (y, x, h, w, flip) in zip(images, boxes.T.tolist()):
        crop = TF.resized_crop(TF.to_pil_image(image), y, x, h, w, [size, size], antialias=True)
        out.append(torch.from_numpy(np.array(TF.hflip(crop) if flip else crop)))   # a writable copy
    return torch.stack(out)


def photographs(rng: np.random.Generator, n: int) -> list[torch.Tensor]:
    """Textured images of assorted sizes: smooth colour fields, sharp edges and noise."""
    images = []
    for _ in range(n):
        h, w = rng.integers(30, 140, 2)
        small = Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)).resize((int(w), int(h)), Image.BICUBIC)
        pixels = np.asarray(small).astype(np.int64) + rng.normal(0, 12, (h, w, 3)).astype(np.int64)
        pixels[:, : w // 3] //= 3   # a sharp edge
        images.append(torch.from_numpy(pixels.clip(0, 255).astype(np.uint8)).permute(2, 0, 1).contiguous())
    return images


def boxes_of(images: list[torch.Tensor], rng: np.random.Generator) -> torch.Tensor:
    """5 x B (y, x, h, w, flip): random boxes, then boxes touching each edge: the whole image, its
    top-left and bottom-right corners, one-pixel-thin strips at the bottom and the right."""
    rows = []
    for k, image in enumerate(images):
        H, W = image.shape[1:]
        kind = k % 6
        if kind == 0:
            h, w = rng.integers(1, H + 1), rng.integers(1, W + 1)
            y, x = rng.integers(0, H - h + 1), rng.integers(0, W - w + 1)
        else:
            y, x, h, w = [(0, 0, H, W), (0, 0, H // 2, W // 3), (H - H // 3, W - W // 2, H // 3, W // 2),
                          (H - 1, 0, 1, W), (0, W - 1, H, 1)][kind - 1]
        rows.append((y, x, h, w, rng.random() < 0.5))
    return torch.tensor(rows, dtype=torch.int64).T.contiguous()


def levels(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() - b.float()).abs()


@pytest.mark.parametrize("size", [16, 48, 224])   # mostly shrinking, both, mostly enlarging
def test_one_batched_resize_cuts_what_the_per_image_resize_and_pil_cut(size):
    rng = np.random.default_rng(size)
    images = photographs(rng, 36)
    boxes = boxes_of(images, rng)
    got = kernels.resized_crops(images, boxes, size)
    assert got.shape == (36, size, size, 3) and got.dtype == torch.uint8
    reference = levels(got, per_image(images, boxes, size))
    assert reference.max() <= RESIZE_MAX_LEVELS and reference.mean() <= RESIZE_MEAN_LEVELS, (reference.max(), reference.mean())
    pil = levels(got, with_pil(images, boxes, size))
    assert pil.max() <= RESIZE_MAX_LEVELS and pil.mean() <= PIL_MEAN_LEVELS, (pil.max(), pil.mean())


def test_the_resize_in_float16_stays_within_a_level():
    """The GPU's precision (float16 pixels and weights), computed here on the CPU."""
    rng = np.random.default_rng(1)
    images = photographs(rng, 24)
    boxes = boxes_of(images, rng)
    half = levels(kernels.resized_crops(images, boxes, 32, dtype=torch.float16), per_image(images, boxes, 32))
    assert half.max() <= RESIZE_MAX_LEVELS and half.mean() <= FLOAT16_MEAN_LEVELS, (half.max(), half.mean())


@NEEDS_CUDA
def test_the_batched_resize_on_cuda_cuts_what_the_cpu_reference_cuts():
    rng = np.random.default_rng(2)
    images = photographs(rng, 60)
    boxes = boxes_of(images, rng)
    got = kernels.resized_crops([i.cuda() for i in images], boxes.cuda(), 224).cpu()
    error = levels(got, per_image(images, boxes, 224))
    assert error.max() <= RESIZE_MAX_LEVELS and error.mean() <= FLOAT16_MEAN_LEVELS, (error.max(), error.mean())


@pytest.fixture
def folder(tmp_path):
    """Two classes of textured JPEG photographs of assorted sizes."""
    rng = np.random.default_rng(0)
    for k, image in enumerate(photographs(rng, 14)):
        path = tmp_path / "mine" / f"class{k % 2}" / f"{k}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image.permute(1, 2, 0).numpy()).save(path, quality=92)
    return tmp_path / "mine"


def photo_config(folder, **changes) -> PipelineConfig:
    settings = dict(image_size=64, batch_size=4, num_workers=0, device="cpu", last_batch="partial")
    return PipelineConfig(source=f"imagefolder:{folder}", **{**settings, **changes})


def build(name: str, config: PipelineConfig):
    reason = pipelines.available()[name]
    if reason:
        pytest.skip(reason)
    return pipelines.build(name, config)


@pytest.mark.parametrize("name", PHOTO_READERS)
@pytest.mark.parametrize("augment", [True, False])
def test_photographs_are_the_crops_dataloader_cuts_within_a_level(folder, name, augment):
    """The same boxes and flips, decoded by libjpeg-turbo as PIL decodes them: what differs is the
    resize's rounding (module docstring)."""
    config = photo_config(folder, augment=augment)
    with pipelines.build("dataloader", config) as loader, build(name, config) as other:
        loader.set_epoch(1), other.set_epoch(1)
        pairs = list(zip(loader, other))
    assert len(pairs) == len(loader) == 4
    error = torch.cat([((a - b) * torch.tensor(STD).view(1, 3, 1, 1) * 255).abs().flatten() for (a, _), (b, _) in pairs])
    assert all(torch.equal(la, lb) for (_, la), (_, lb) in pairs)
    assert error.max() <= RESIZE_MAX_LEVELS + 1e-3 and error.mean() <= PIL_MEAN_LEVELS, (error.max(), error.mean())


def producers(name: str = "tvjpeg") -> int:
    return sum(t.name.startswith(f"{name}-producer") for t in threading.enumerate())


def none_left(name: str = "tvjpeg", timeout: float = 10.0) -> bool:
    """Whether every producer thread of `name` has ended within `timeout` (collecting garbage meanwhile)."""
    deadline = time.monotonic() + timeout
    while producers(name) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.02)
    return producers(name) == 0


@pytest.mark.parametrize("photos", [True, False], ids=["photographs", "cifar"])
def test_the_producer_thread_ends_with_its_epoch_however_it_ends(folder, synthetic_root, photos):
    """At the epoch's end; for an epoch abandoned, started or not (its iterator still held); on
    stages(); on close() of an epoch never started; for a pipeline dropped mid-epoch unclosed."""
    config = (photo_config(folder, batch_size=2) if photos else   # more batches than it makes ahead
              PipelineConfig(data_root=str(synthetic_root), device="cpu", batch_size=16, max_samples=160))
    assert none_left()
    with build("tvjpeg", config) as p:
        assert len(list(p)) == len(p) > tvjpeg.DEPTH + 1 and none_left()   # the epoch's end
        first = iter(p)
        next(first)
        assert producers() == 1
        p.set_epoch(1)
        unstarted = iter(p)   # supersedes `first`, then is superseded before its first batch
        second = iter(p)
        assert producers() == 1
        next(second)
        p.stages()   # the stages end the live epoch
        assert producers() == 0
        iter(p)
    assert producers() == 0   # close()
    del first, unstarted, second
    p = build("tvjpeg", config)
    batches = iter(p)
    next(batches)
    time.sleep(0.2)   # the producer waits for room
    del p, batches   # dropped mid-epoch, never closed
    assert none_left()


def test_a_batch_that_fails_on_the_thread_is_raised_where_it_would_have_been_taken(folder, monkeypatch):
    decode = tvjpeg.TorchvisionJpegPipeline.decode_files
    calls = []

    def third_fails(self, files, index, lane=0):
        calls.append(len(files))
        if len(calls) == 3:
            raise MemoryError("the third batch")
        return decode(self, files, index, lane)

    monkeypatch.setattr(tvjpeg.TorchvisionJpegPipeline, "decode_files", third_fails)
    with build("tvjpeg", photo_config(folder)) as p:
        batches = iter(p)
        next(batches), next(batches)
        with pytest.raises(MemoryError, match="the third batch"):
            next(batches)
        assert none_left()
        assert len(calls) == 3   # nothing decoded after the failure


def test_nvimgcodec_decodes_on_two_threads_at_once_as_on_one(folder):
    """`stages().device` decodes on the caller's thread while the producer decodes on its own: one
    nvImageCodec Decoder called from both at once hung them (the CI run of 2026-12-02)."""
    with build("nvimgcodec", photo_config(folder)) as p:
        index = np.arange(len(p.data.labels))
        expected = [image.clone() for image in p.decode_files(None, index)]
        failures = []

        def decode_again():
            for _ in range(40):
                if not all(torch.equal(a, b) for a, b in zip(p.decode_files(None, index), expected)):
                    failures.append("differs")

        threads = [threading.Thread(target=decode_again, daemon=True) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not any(thread.is_alive() for thread in threads), "a decode call hung"
        assert not failures


def test_lanes_hand_batches_over_in_order_and_a_lane_s_error_where_its_batch_is_taken():
    """Lane j makes jobs j, j + lanes, ...; the consumer takes them in the jobs' order however the
    lanes finish; a failing batch is raised where it would have been taken; every lane ends."""
    class Maker:
        def make(self, k, lane):
            time.sleep(0.02 * (3 - lane))   # lane 2 finishes first, lane 0 last
            if k == 7:
                raise MemoryError("batch 7")
            return k, lane, threading.current_thread().name

    maker = Maker()
    producer = tvjpeg.Producer(weakref.WeakMethod(maker.make), [(k,) for k in range(10)], 2, "lanes-test", lanes=3)
    taken = []
    with pytest.raises(MemoryError, match="batch 7"):
        for batch in producer:
            taken.append(batch)
    assert [(k, lane) for k, lane, _ in taken] == [(k, k % 3) for k in range(7)]
    assert {name for _, _, name in taken} == {"lanes-test-0", "lanes-test-1", "lanes-test-2"}
    producer.stop()
    assert not any(t.name.startswith("lanes-test") and t.is_alive() for t in threading.enumerate())


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=NEEDS_CUDA)])
def test_nvimgcodec_in_three_lanes_gives_the_batches_of_one(folder, device):
    """Three batches decoded at once, each by a lane of its own (thread, decoder, side stream): the
    same images (on a GPU within a level: the hardware and CUDA decoders may split a batch otherwise)
    and labels, in the same order, as one lane; its producer threads end with the epoch."""
    epochs = {}
    for lanes in (1, 3):
        with build("nvimgcodec", photo_config(folder, batch_size=2, nvimgcodec_lanes=lanes, device=device)) as p:
            p.set_epoch(1)
            epochs[lanes] = [(images.float().cpu(), labels.cpu()) for images, labels in p]
            assert p.queue_capacity == tvjpeg.DEPTH and len(p.decoders) == lanes   # one ahead per lane of 3
    assert len(epochs[3]) == len(epochs[1]) == 7
    level = 1.5 / 255 / min(STD)   # a level and a half of 0-255, normalized
    assert all(torch.equal(b, d) for (_, b), (_, d) in zip(epochs[1], epochs[3]))
    assert max((a - c).abs().max().item() for (a, _), (c, _) in zip(epochs[1], epochs[3])) <= (
        0 if device == "cpu" else level)
    assert none_left("nvimgcodec")
