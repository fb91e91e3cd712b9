"""Every pipeline inside a training loop written as users write theirs (issue 66): the whole step
(forward, loss, backward, SGD) captured in one CUDA graph as PyTorch's CUDA graphs notes write it
(warm-up on a side stream, static inputs, `xs.copy_(images); ys.copy_(labels); graph.replay()`),
captured before or after the pipeline is built; and a model compiled with
`torch.compile(mode="reduce-overhead")` (CUDA graphs made by inductor) fed the batches as they come.
Two epochs each, on 32-px images and on photographs. The step itself records what it read, and that
must be the epoch's labels (its plan's samples, `Pipeline.batches`) and the images the same pipeline
gives a consumer that synchronizes after every batch. Matrix products in every step keep the GPU
milliseconds behind the training thread, which a captured step lets run far ahead.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import pipelines
from pipelines import sources
from pipelines.config import PipelineConfig

from conftest import indexed_images, write_photographs

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
MODES = ("captured-before-build", "captured-after-build", "reduce-overhead")
BUSY = 12   # 4096 x 4096 bfloat16 matrix products per step: about 2 ms of the whole GPU (H200)


class Recording(torch.nn.Module):
    """A classifier's training loss that also returns what the step read: each image's mean, and
    the labels. `model`: a torchvision classifier (10 classes), or a small convolutional one."""

    def __init__(self, model: torch.nn.Module | None = None):
        super().__init__()
        self.model = model if model is not None else torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
            torch.nn.Linear(16, 10))

    def forward(self, images, labels):
        loss = F.cross_entropy(self.model(images), labels)
        return loss, images.float().mean(dim=(1, 2, 3)), labels + 0


def busy(work: torch.Tensor) -> None:
    for _ in range(BUSY):
        torch.mm(work, work, out=work.new_empty(work.shape))


class CapturedStep:
    """The whole step in one CUDA graph (PyTorch's CUDA graphs notes, "whole network capture"):
    three warm-up steps on a side stream, gradients set to None, the capture; each call copies the
    batch into the static inputs, replays, and returns copies of what the step read. It holds the
    model, the optimizer and the static inputs as long as the graph: a graph owns only the memory
    it allocated while captured, and replays write the parameters, gradients and momentum where
    they were, so a model freed after the capture leaves the graph writing into memory that later
    allocations (a pipeline's labels, say) are given."""

    def __init__(self, shape, dtype: torch.dtype, channels_last: bool, model: torch.nn.Module | None = None):
        self.model = Recording(model).cuda().to(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.xs = torch.zeros(shape, dtype=dtype, device="cuda")
        if channels_last:
            self.xs = self.xs.contiguous(memory_format=torch.channels_last)
        self.ys = torch.zeros(shape[0], dtype=torch.int64, device="cuda")
        self.work = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.optimizer.zero_grad(set_to_none=True)
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.optimizer.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.seen = self._step()

    def _step(self):
        busy(self.work)
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            loss, means, labels = self.model(self.xs, self.ys)
        loss.backward()
        self.optimizer.step()
        return means, labels

    def __call__(self, images, labels):
        self.xs.copy_(images)
        self.ys.copy_(labels)
        self.graph.replay()
        return tuple(t.clone() for t in self.seen)


class ReduceOverheadStep:
    """`torch.compile(model, mode="reduce-overhead")` fed each batch as it comes (inductor copies it
    into its graphs' static inputs); the busy work launched before it on the same stream."""

    def __init__(self, channels_last: bool):
        model = Recording().cuda().to(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        self.model = torch.compile(model, mode="reduce-overhead")
        self.work = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda")

    def __call__(self, images, labels):
        busy(self.work)
        torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss, means, seen = self.model(images, labels)
        means, seen = means.clone(), seen.clone()   # inductor's graph outputs are overwritten by its next replay
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return means, seen


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """A 32-px set of 640 index-encoded images (cifar10 layout, 128 per batch file) and a folder of
    96 JPEG photographs of assorted sizes in two classes."""
    root = tmp_path_factory.mktemp("own-loop")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sources.layout, "PER_FILE", 128)
        folder = root / sources.BATCH_FOLDER
        folder.mkdir()
        sources.write_split(folder, "train", *indexed_images(0, 640))
        sources.write_split(folder, "test", *indexed_images(50_000, 128))
        write_photographs(root / "photos", 96)
        yield root, patch


def config_for(sets, photos: bool) -> PipelineConfig:
    root, _ = sets
    source = dict(source=f"imagefolder:{root / 'photos'}", image_size=64, batch_size=16) if photos else \
        dict(data_root=str(root), source="cifar10", batch_size=64)
    return PipelineConfig(device="cuda", dtype="bfloat16", channels_last=True, num_workers=2,
                          cache_root=str(root / "cache"), **source)


def reference(name: str, config: PipelineConfig, epochs: int = 2):
    """What the pipeline gives a consumer that synchronizes after every batch: per epoch, each
    image's mean and the labels; and the labels the epoch's plan says."""
    got, planned = [], []
    with pipelines.build(name, config) as p:
        for epoch in range(epochs):
            p.set_epoch(epoch)
            planned.append(np.concatenate([p.data.labels[index] for index in p.batches()]))
            means, labels = [], []
            for images, batch_labels in p:
                torch.cuda.synchronize()
                means.append(images.float().mean(dim=(1, 2, 3)).cpu())
                labels.append(batch_labels.cpu())
                torch.cuda.synchronize()
            got.append((torch.cat(means), torch.cat(labels)))
    return got, planned


def run_loop(name: str, config: PipelineConfig, mode: str, epochs: int = 2, model=None):
    """Per epoch, what the user's step read: each image's mean and the labels. `model`: makes the
    classifier a captured step trains (default: a small one)."""
    shape = (config.batch_size, 3, config.image_size, config.image_size)
    dtype = getattr(torch, config.dtype)

    def captured():
        return CapturedStep(shape, dtype, config.channels_last, model() if model else None)
    step = captured() if mode == "captured-before-build" else None
    seen = []
    with pipelines.build(name, config) as p:
        if mode == "captured-after-build":
            step = captured()
        elif mode == "reduce-overhead":
            step = ReduceOverheadStep(config.channels_last)
        for epoch in range(epochs):
            p.set_epoch(epoch)
            read = [step(images, labels) for images, labels in p]
            seen.append((torch.cat([means for means, _ in read]).cpu(), torch.cat([labels for _, labels in read]).cpu()))
    return seen


def cuda_pipelines(photos: bool) -> list:
    """Every registered pipeline that reads the source (photographs, or 32-px images), those that
    cannot be built here marked skipped with the reason."""
    found = []
    for name, reason in pipelines.available().items():
        try:
            cls = pipelines._declared_class(name)
        except ImportError:   # its module does not import: whether it reads the source is not known
            cls = None
        if cls is not None and not (cls.photos if photos else cls.cifar):
            continue
        found.append(pytest.param(name, marks=pytest.mark.skip(reason=reason)) if reason else name)
    return found


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", cuda_pipelines(photos=False))
def test_a_users_captured_or_compiled_step_reads_the_batches_handed_over_at_32px(name, mode, sets):
    check(name, config_for(sets, photos=False), mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", cuda_pipelines(photos=True))
def test_a_users_captured_or_compiled_step_reads_the_batches_handed_over_on_photographs(name, mode, sets):
    check(name, config_for(sets, photos=True), mode)


@pytest.mark.parametrize("mode", MODES)
def test_a_users_captured_or_compiled_step_reads_the_batches_nvimgcodec_hands_over_from_two_lanes(mode, sets):
    """Two producer threads, each decoding on its own stream (`nvimgcodec_lanes`): batches in order."""
    reason = pipelines.available(["nvimgcodec"])["nvimgcodec"]
    if reason:
        pytest.skip(reason)
    check("nvimgcodec", config_for(sets, photos=True).replace(nvimgcodec_lanes=2), mode)


DEALT_OUT = dict(dali_cpu_share=0.3, dali_split="batches", dali_gpu_pipelines=2)   # three DALI pipelines in turn


@pytest.mark.parametrize("mode", MODES)
def test_a_users_captured_or_compiled_step_reads_the_batches_dali_deals_out_to_several_pipelines(mode, sets):
    """Whole batches dealt out to a CPU-decoding and two nvJPEG DALI pipelines (`dali_split`): in order."""
    reason = pipelines.available(["dali"])["dali"]
    if reason:
        pytest.skip(reason)
    check("dali", config_for(sets, photos=True).replace(**DEALT_OUT), mode)


@pytest.mark.parametrize("mode", MODES)
def test_a_users_captured_or_compiled_step_reads_what_dali_set_up_as_nvidias_example_hands_over(mode, sets):
    """`dali_reader="file"` on photographs draws its own order and crops (seeded): the step reads the
    images and labels a synchronizing consumer is handed, every photograph once an epoch."""
    reason = pipelines.available(["dali"])["dali"]
    if reason:
        pytest.skip(reason)
    config = config_for(sets, photos=True).replace(dali_reader="file")
    everyone = sorted(sources.open_split(pipelines.resolve_config("dali", config)).labels.tolist())
    want, _ = reference("dali", config)
    for epoch, ((means, labels), (want_means, want_labels)) in enumerate(zip(run_loop("dali", config, mode), want)):
        assert sorted(want_labels.tolist()) == everyone, f"epoch {epoch}: not every photograph once"
        assert torch.equal(labels, want_labels), f"epoch {epoch}: the step read other labels than handed over"
        assert torch.allclose(means, want_means, atol=5e-3, rtol=0), f"epoch {epoch}: the step read other images"


@pytest.fixture(scope="module")
def large_photos(tmp_path_factory):
    """1,536 JPEG photographs of 300-500 px a side in ten classes: six batches of 256."""
    return write_photographs(tmp_path_factory.mktemp("own-loop-large") / "photos", 1536, classes=10, sides=(300, 500),
                             detail=16, seed=1)


@pytest.mark.parametrize("mode", MODES[:2])
@pytest.mark.parametrize("name,changes", [("tvjpeg", {}), ("nvimgcodec", {}), ("dali", {}), ("dali", DEALT_OUT),
                                          ("dataloader", {})])
def test_a_captured_resnet50_step_at_224px_batch_256_reads_the_batches_handed_over(name, changes, mode, large_photos):
    """The loop of issue 66 at its scale: torchvision's ResNet-50, bf16 autocast, channels_last,
    batch 256 of 224-px crops, the whole step captured, 15 workers or threads; `dali` also with whole
    batches dealt out to three DALI pipelines."""
    reason = pipelines.available([name])[name]
    if reason:
        pytest.skip(reason)
    import torchvision
    config = PipelineConfig(source=f"imagefolder:{large_photos}", image_size=224, batch_size=256, device="cuda",
                            dtype="bfloat16", channels_last=True, num_workers=min(15, max(1, pipelines.config.usable_cores() - 1)),
                            cache_root=str(large_photos.parent / "cache"), **changes)
    check(name, config, mode, model=lambda: torchvision.models.resnet50(num_classes=10))


@pytest.mark.parametrize("name", ["prefetch", "resident", "tvjpeg", "nvimgcodec"])
def test_a_side_stream_is_never_the_stream_a_step_is_captured_on(name, sets):
    """torch hands out its default-priority streams (a capture's among them) from a pool of 32 in
    turn: cycling through it twice never gives the stream the pipeline's thread launches on, so
    none of its work can be captured into a step's graph (`pipelines.streams`)."""
    with pipelines.build(name, config_for(sets, photos=False)) as p:
        assert all(torch.cuda.Stream().cuda_stream != p.stream.cuda_stream for _ in range(64))


def check(name: str, config: PipelineConfig, mode: str, model=None) -> None:
    want, planned = reference(name, config)
    got = run_loop(name, config, mode, model=model)
    for epoch, ((means, labels), (want_means, want_labels), plan) in enumerate(zip(got, want, planned)):
        assert torch.equal(want_labels, torch.from_numpy(plan)), f"epoch {epoch}: the reference is not the plan"
        assert torch.equal(labels, want_labels), f"epoch {epoch}: the step read other labels than handed over"
        # bfloat16 images: one rounding of a mean is far below what another image would change
        assert torch.allclose(means, want_means, atol=5e-3, rtol=0), \
            f"epoch {epoch}: the step read other images (largest difference {(means - want_means).abs().max():.3f})"
