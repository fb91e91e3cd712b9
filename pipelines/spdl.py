"""`spdl`: Meta's SPDL (`spdl.pipeline.PipelineBuilder`), thread-based stages whose
work releases the GIL, with its own host-to-device transfer stage.

Bytes (`spdl`): uint8 arrays in host memory -> the epoch plan's batches as the pipeline's source ->
a `pipe` stage of config.num_workers threads gathers each batch's crops + flips with numpy fancy
indexing over strided window views of the zero-padded set (numpy releases the GIL), N x S x S x 3
uint8 -> a one-thread `pipe` stage runs `spdl.io.transfer_tensor_h2d` (pin, `non_blocking` copy on
that thread's own CUDA stream, then a synchronize of that stream, so the batch is on the device
when handed over) -> SPDL's sink queue -> the consumer normalizes it on its own stream. Stage outputs keep the plan's
order (`output_order="input"`).

Hand-over: the transfer stage allocates each batch on its own stream and keeps the last four batches
referenced (`num_caches`) so that the caching allocator does not give their memory to the next
transfer while the consumer may still read them; a consumer further behind the transfer thread
than that (a step captured in a CUDA graph lets the training thread run far ahead of the GPU) then
read other labels than those handed over (tests/test_own_loop.py, H200, 2026-12-02). So
this pipeline `record_stream`s each batch to the consumer's stream as it takes it.

Measured loader ceilings per CPU budget and what they feed: the reference run,
results/2026-11-24-h100-reference/REPORT.md.

No JPEG variant: SPDL's image decoders (`spdl.io.load_image_batch`, and `decode_image_nvjpeg`) load
its `libspdl` extension, which links the system's FFmpeg libraries (libavutil 56-61); on the
machines this project runs on (the CPU development image and the GPU image) none is installed, and
both calls fail with "Failed to import libspdl" (checked with spdl 0.8.0, 2026-11-22).

Needs SPDL (`pip install -e '.[peers]'`); without it the pipeline is unavailable with that reason.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from .contract import Pipeline, Stages
from .kernels import crop_windows, normalize
from .options import NUM_WORKERS, PREFETCH_DEPTH
from .peers import Peer


def _import_spdl() -> SimpleNamespace:
    """SPDL's parts this pipeline uses."""
    import spdl.io
    from spdl.pipeline import PipelineBuilder
    return SimpleNamespace(transfer_tensor_h2d=spdl.io.transfer_tensor_h2d, PipelineBuilder=PipelineBuilder)


SPDL = Peer(_import_spdl, lambda e: f"SPDL is not installed: pip install -e '.[peers]' ({e})")

STAGE_QUEUE = 2   # the queue SPDL puts after each stage (its internal buffer size between stages)


class SpdlPipeline(Pipeline):
    name = "spdl"
    encoding = "raw"
    options = (PREFETCH_DEPTH, NUM_WORKERS)
    missing = SPDL

    def __init__(self, config, data=None):
        super().__init__(config, data)
        self.pad = config.pad if config.augment else 0
        self.cuda = self.device.type == "cuda"
        self.threads = max(1, config.num_workers)
        self.views = crop_windows(self.data.images, config.image_size, self.pad)
        self.transfer = ThreadPoolExecutor(1, thread_name_prefix="spdl-h2d") if self.cuda else None

    @property
    def queue_capacity(self) -> int:
        """An upper bound: the sink's buffer (`prefetch_depth`) and the batch its node holds, and per
        stage (the gather on `num_workers` threads; on CUDA the transfer on one) its output queue
        (STAGE_QUEUE) and its finished tasks: as many as it runs at once, one awaiting its queue
        and one awaiting its turn."""
        stages = [self.threads] + ([1] if self.cuda else [])
        return max(1, self.config.prefetch_depth) + 1 + sum(STAGE_QUEUE + n + 2 for n in stages)

    def _gather(self, job) -> tuple[torch.Tensor, torch.Tensor]:
        """Thread stage: one batch's uint8 crops (N x S x S x 3) and labels, on the host."""
        index, start, draws = job
        plain, mirrored = self.views
        n = len(index)
        if draws is not None:
            dy, dx, flip = (d[start:start + n].numpy() for d in draws)
        else:
            dy = dx = np.zeros(n, np.int64)
            flip = np.zeros(n, bool)
        out = np.empty((n, self.config.image_size, self.config.image_size, 3), np.uint8)
        keep = ~flip
        out[keep] = plain[index[keep], dy[keep], dx[keep]]
        out[flip] = mirrored[index[flip], dy[flip], 2 * self.pad - dx[flip]]
        return torch.from_numpy(out), torch.from_numpy(self.data.labels[index])

    def _jobs(self, batches: list) -> list:
        """The source's items: each batch's indices, its position in the epoch and the epoch's draws."""
        draws = self.draws(batches)
        starts = np.cumsum([0] + [len(index) for index in batches])
        return [(index, int(start), draws) for index, start in zip(batches, starts)]

    def _builder(self, batches: list, transfer: bool) -> Any:
        spdl = SPDL.get()
        builder = (spdl.PipelineBuilder()
                   .add_source(self._jobs(batches))
                   .pipe(self._gather, concurrency=self.threads, output_order="input", name="gather"))
        if transfer:
            builder = builder.pipe(spdl.transfer_tensor_h2d, executor=self.transfer, output_order="input",
                                   name="h2d")
        return builder.add_sink(buffer_size=max(1, self.config.prefetch_depth))

    def _iterate(self):
        """One epoch; a newer iterator closes this generator, which stops its SPDL pipeline."""
        pipeline = self._builder(self.batches(), transfer=self.cuda).build(num_threads=self.threads + 1)
        return self._epoch(pipeline)

    def _epoch(self, pipeline):
        consumer = torch.cuda.current_stream(self.device) if self.cuda else None
        with pipeline.auto_stop():
            for images, labels in pipeline.get_iterator():
                if consumer is not None:   # made on SPDL's transfer stream (module docstring: hand-over)
                    images.record_stream(consumer)
                    labels.record_stream(consumer)
                yield normalize(images, self.config), labels

    def _stages(self) -> Stages:
        """host: the SPDL pipeline without its transfer stage; payload: one uint8 batch and labels
        (transfer_tensor_h2d pins it, then copies); device: normalize."""
        batches = self.batches()
        images, labels = self._gather(self._jobs(batches)[0])
        on_device = images.to(self.device)

        def host():
            pipeline = self._builder(batches, transfer=False).build(num_threads=self.threads)
            with pipeline.auto_stop():
                for batch in pipeline.get_iterator():
                    yield list(batch), batch[1]

        return Stages(host=host, payload=[images, labels], copy="pinned" if self.cuda else "none",
                      pins=self.cuda, device=lambda: normalize(on_device, self.config))

    def _release(self) -> None:
        """The live epoch's SPDL pipeline was stopped first (`close` ends the live iterator), then
        its transfer thread goes."""
        if self.transfer is not None:
            self.transfer.shutdown(wait=True)
            self.transfer = None
