"""`tvjpeg`: the GPU-decode alternative a PyTorch user already has, `torchvision.io.decode_jpeg`.

Bytes: the packed JPEG copy in host memory, wrapped once as one uint8 tensor per file (no copy)
-> one producer thread (`Producer`; a subclass may run several *lanes*, each a thread and a CUDA
stream of its own making every lanes-th batch, so that batches decode at once), on its own CUDA
stream, up to DEPTH batches ahead of the consumer (at least one per lane): per batch one `decode_jpeg(list, device="cuda")` (nvJPEG batched decode; the file bytes
cross the bus inside it) -> stack -> the shared GPU crop/flip gather on the zero-padded batch ->
normalize -> an event -> `next()` takes the finished batch off the queue, makes the consumer's
stream wait on its event and hands it over (`record_stream`): nothing is decoded, launched or
waited for on the training thread. Labels live on the device; the epoch's order and crop grid
are copied there once per epoch through reused pinned buffers (`epochs.Uploader`): no blocking
copy, not even per epoch.

Photographs (`source="imagefolder:PATH"`): the same batched decode on the same thread, then every
image's box (`crops`: RandomResizedCrop, or eval's centre crop) cut, resized to S x S and
mirrored where drawn in one batched resize of the whole batch (`kernels.resized_crops`: the
images zero-padded into one tensor, then two batched matrix products whose weights are PIL's
antialiased filter), normalized. The boxes go to the device once per epoch, as the crop grid does.

The producer thread ends at the epoch's end, when a newer iterator starts, on `stages()` and
`close()`, and when the pipeline is garbage-collected mid-epoch (it holds the pipeline weakly,
and only while it makes a batch). An error while making a batch (a file that does not decode,
named on one line: `jpeg_errors`) is raised by the `next()` that would have returned that batch.

Stream safety: torchvision's nvJPEG decode runs on its own stream into tensors allocated on the
current stream (here the side stream) and makes the current stream wait for it, but does not itself
wait for the current stream (torchcodec's is taken to be alike); so before each decode the producer waits (a blocking event, off the CPU)
for the side stream's previous batch, whose freed memory the decode's outputs may reuse. Batches
are made on the side stream and `record_stream`-ed to the consumer's stream at hand-over, so the
caching allocator never reuses them while the consumer may read them. The side stream is one of the
high-priority pool (`streams.side_stream`): never the stream a training step is being captured on
while the producer runs. (The hand-over is the
three lines `prefetch` and `resident` write too: kept here, as small as theirs.)

Without a GPU the same thread decodes on the CPU (libjpeg-turbo) and resizes there: the same
batches, up to float rounding in the resize.

Measured loader ceilings (32 and 224 px) and what they feed: the reference run,
results/2026-11-24-h100-reference/REPORT.md; on photographs: results/2026-11-26-h100-photos/.
"""
from __future__ import annotations

import contextlib
import queue
import threading
import weakref

import numpy as np
import torch
from torchvision.io import ImageReadMode, decode_jpeg

from .contract import Pipeline, Stages
from .jpeg_errors import undecodable_jpeg, undecodable_sample
from .kernels import crop_normalize, normalize, resized_crops, warm_crop_normalize, warm_padded
from .streams import side_stream

DEPTH = 3   # batches made ahead of the consumer (a batch of photographs varies in decode time)


class Producer:
    """`lanes` daemon threads that make `jobs` (`make(*job, lane)`: one batch each; lane j makes jobs
    j, j + lanes, ...) at most `depth` ahead of the batches taken, per lane: a lane starts one only
    while fewer than `depth` of its own are made and not yet taken. Iterating takes them in the jobs'
    order; an exception raised making one is raised where that batch would have been taken, and ends
    its lane. `make` (a `weakref.WeakMethod`) is held only while a batch is made, so an owner
    garbage-collected mid-epoch lets this object go too, and its finalizer (`stop`) ends the threads."""

    def __init__(self, make: weakref.WeakMethod, jobs: list[tuple], depth: int, name: str, lanes: int = 1):
        self.count, self.lanes = len(jobs), lanes
        self.made = [queue.SimpleQueue() for _ in range(lanes)]
        self.free = [threading.Semaphore(depth) for _ in range(lanes)]
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=_produce, args=(make, jobs[lane::lanes], lane, self.made[lane],
                                                                self.free[lane], self.stopping),
                                         name=f"{name}-{lane}" if lanes > 1 else name, daemon=True)
                        for lane in range(lanes)]
        for thread in self.threads:
            thread.start()
        self.stop = weakref.finalize(self, _stop, self.threads, self.free, self.stopping)   # idempotent

    def __iter__(self):
        for i in range(self.count):
            failed, value = self.made[i % self.lanes].get()
            self.free[i % self.lanes].release()
            if failed:
                raise value
            yield value


def _produce(make_ref: weakref.WeakMethod, jobs: list[tuple], lane: int, made: queue.SimpleQueue,
             free: threading.Semaphore, stopping: threading.Event) -> None:
    """A producer thread's loop (no reference to its owner while it waits for room)."""
    for job in jobs:
        free.acquire()
        make = make_ref()
        if make is None or stopping.is_set():
            return
        try:
            batch = (False, make(*job, lane))
        except BaseException as error:   # raised on the consumer's side, where this batch is taken
            batch = (True, error)
        del make
        made.put(batch)
        if batch[0]:
            return


def _stop(threads: list[threading.Thread], free: list[threading.Semaphore], stopping: threading.Event) -> None:
    """End a producer's threads: no batch started after this; the ones under way finish first."""
    stopping.set()
    for room in free:
        room.release()   # wakes a thread that waits for room
    for thread in threads:
        if thread is not threading.current_thread():   # a collection may run on a producer thread itself
            thread.join()


class TorchvisionJpegPipeline(Pipeline):
    name = "tvjpeg"
    encoding = "jpeg"
    photos = True

    def __init__(self, config, data=None):
        super().__init__(config, data)
        jpeg = self.data.jpeg
        self.files = [torch.from_numpy(jpeg[i]) for i in range(len(jpeg))]
        self.labels = torch.from_numpy(self.data.labels).to(self.device)
        self.photographs = self.data.sizes is not None
        if self.photographs:   # resized in one batch (`resized_crops`), not gathered
            warm_padded()
        else:
            warm_crop_normalize(self.device, self.config, planar=True)
        self.cuda = self.device.type == "cuda"
        self.streams = [side_stream(self.device) for _ in range(self.lanes)]   # a side stream per lane
        self.stream = self.streams[0]
        self.finished: list[torch.cuda.Event | None] = [None] * self.lanes   # each lane's last batch (blocking)

    @property
    def lanes(self) -> int:
        """Batches made at once, each by a producer thread on a side stream of its own (1 here: one
        batched nvJPEG decode at a time is all torchvision runs, behind one lock)."""
        return 1

    @property
    def depth(self) -> int:
        """Batches a lane makes ahead of the consumer: DEPTH in all, at least one per lane."""
        return -(-DEPTH // self.lanes)

    @property
    def queue_capacity(self) -> int:
        """The producer's batches made and not yet taken: at most `depth` per lane."""
        return self.depth * self.lanes

    def _side(self, lane: int = 0):
        return torch.cuda.stream(self.streams[lane]) if self.cuda else contextlib.nullcontext()

    def _iterate(self):
        batches = self.batches()   # the previous epoch's producer has ended (`_hand_over`)
        if self.cuda:   # the side stream after everything made so far on the current one
            self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with self._side():
            order = self.uploads.order(batches)
            draws = self._placed(self.draws(batches))
        for stream in self.streams[1:] if self.cuda else ():   # the other lanes after the epoch's uploads
            stream.wait_stream(self.stream)
        starts = np.cumsum([0] + [len(index) for index in batches])
        jobs = [(index, int(start), draws, order) for index, start in zip(batches, starts)]
        return self._hand_over(Producer(weakref.WeakMethod(self._batch), jobs, self.depth, f"{self.name}-producer",
                                        self.lanes))

    def _hand_over(self, producer: Producer):
        """The epoch's batches as the producer finishes them, each handed to the consumer's stream.
        Its producer ends with it: at the epoch's end or an error (`finally`), or when it is closed
        (a newer iterator, `stages()`, `close()`) or collected; closed before its first batch, it
        drops the only reference to the producer, whose finalizer ends the thread."""
        try:
            for images, labels, ready in producer:
                if self.cuda:
                    consumer = torch.cuda.current_stream(self.device)
                    consumer.wait_event(ready)
                    images.record_stream(consumer)
                    labels.record_stream(consumer)
                yield images, labels
        finally:
            producer.stop()

    def _batch(self, index: np.ndarray, start: int, draws, order: torch.Tensor, lane: int):
        """Producer thread of `lane`: the batch of samples `index` (positions start.. of the epoch),
        made on the lane's side stream: its images, its labels and the event it is finished at."""
        if self.finished[lane] is not None:
            self.finished[lane].synchronize()   # the decode may reuse what that batch freed (module docstring)
        with self._side(lane):
            images = self._decode([self.files[i] for i in index], index, draws, start, lane)
            labels = self.labels[order[start:start + len(index)]]
            if self.cuda:
                self.finished[lane] = torch.cuda.Event(blocking=True)
                self.finished[lane].record(self.streams[lane])
        return images, labels, self.finished[lane]

    def _placed(self, draws):
        """An epoch's draws on the device, where `_decode` reads them: CIFAR's crops
        (`Uploader.draws`), a photograph's boxes and flips as one 5 x N tensor (y, x, h, w, flip)."""
        if self.photographs:
            return self.uploads("boxes", np.stack([d.numpy() for d in draws]))
        return self.uploads.draws(draws)

    def decode_files(self, files: list[torch.Tensor], index: np.ndarray, lane: int = 0) -> list[torch.Tensor]:
        """One batch of JPEG files (of samples `index`) -> 3 x H x W uint8 images on the device, in
        one batched call (by the producer thread of `lane`)."""
        return decode_jpeg(files, mode=ImageReadMode.RGB, device=self.device)

    def _decode(self, files: list[torch.Tensor], index, draws, start: int, lane: int = 0) -> torch.Tensor:
        """The files of samples `index` (positions start.. of the epoch) -> contract images: decode,
        crop/flip (CIFAR: the epoch's crop grid; photographs: their boxes, resized) + normalize."""
        n = len(files)
        try:
            decoded = self.decode_files(files, index, lane)
            if self.photographs:
                return normalize(resized_crops(decoded, draws[:, start:start + n], self.config.image_size), self.config)
            pixels = torch.stack(decoded).permute(0, 2, 3, 1)   # B x S x S x 3 view
        except RuntimeError:   # one error for the whole batch (or unequal sizes): name the sample if a file is bad
            bad = undecodable_jpeg(self.data.jpeg, index, None if self.photographs else self.data.images.shape[1])
            if bad is None:
                raise
            raise undecodable_sample(self.config.split, *bad, paths=self.data.jpeg.paths) from None
        return crop_normalize(pixels, torch.arange(n, device=self.device), draws, self.config, start)

    def _stages(self) -> Stages:
        """host: gathering each batch's file tensors; payload: the files' bytes, which
        `decode_jpeg` copies itself (from pageable memory); device: decode + augment + normalize of
        one fixed batch on the calling thread. The live iterator ends first (its uploads are reused)."""
        self._end_live()
        batches = self.batches()

        def host():
            for index in batches:
                yield [self.files[i] for i in index], torch.from_numpy(self.data.labels[index])

        index = batches[0]
        first = [self.files[i] for i in index]
        with self._side():
            draws = self._placed(self.draws(batches))
        if self.cuda:
            torch.cuda.current_stream(self.device).wait_stream(self.stream)
        payload = [torch.cat(first)]   # the labels live on the device
        return Stages(host=host, payload=payload, copy="pageable" if self.cuda else "none",
                      pins=False, device=lambda: self._decode(first, index, draws, 0))

    def _release(self) -> None:
        for stream in self.streams:
            if stream is not None:
                stream.synchronize()
        self.files = []
