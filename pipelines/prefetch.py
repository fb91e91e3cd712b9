"""`prefetch`: uint8 over the bus from preallocated pinned buffers, asynchronous copies on a side
CUDA stream kept `prefetch_depth` batches ahead, conversion and normalization on the GPU.

Bytes: uint8 arrays in host memory -> producer threads (config.num_workers, at least 1) gather
each batch with its random crop + flip as two numpy fancy-indexing copies over strided window
views of the zero-padded set (plain and mirrored; numpy releases the GIL, so threads scale),
straight into a pinned staging slot (uint8, a quarter of the float32 bytes) -> `non_blocking` host-to-device copy
on the side stream -> float conversion + normalize on the side stream -> the consumer's stream
waits on an event. The apex `data_prefetcher` / timm `PrefetchLoader` design, with FFCV's
preallocated pinned buffers instead of per-batch pinning.

Stream safety: the stream, the events and the pinned slots are created once in `__init__`.
One iterator at a time owns the slots: `iter()` fixes the epoch, and a newer iterator (or
`stages()`) ends the previous one, whose fills are cancelled or awaited first.
A slot is refilled only after the event recorded right after its copy has completed; outputs are
allocated on the side stream and `record_stream`-ed to the consumer's stream, so the caching
allocator never hands them out while the consumer may still read them.
Without CUDA the same producer threads run and the batch is normalized on the CPU.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from .base import Pipeline, Stages, augmentation_generator, crop_windows, draw_augmentation, normalize
from .config import CHANNELS


@dataclass
class _Slot:
    images: torch.Tensor          # B x S x S x 3 uint8, pinned when on CUDA
    labels: torch.Tensor          # B int64, pinned when on CUDA
    copied: torch.cuda.Event | None   # recorded on the side stream after the copy out of this slot
    ready: torch.cuda.Event | None    # recorded on the side stream after the batch is normalized


class PrefetchPipeline(Pipeline):
    name = "prefetch"
    encoding = "raw"

    def __init__(self, config, data=None):
        super().__init__(config, data)
        size, pad = config.image_size, config.pad
        if config.augment:   # windows[i, dy, dx] is the S x S x 3 crop at (dy, dx) of padded image i
            self.windows = crop_windows(self.data.images, size, pad)   # plain, mirrored
        self.cuda = self.device.type == "cuda"
        self.stream = torch.cuda.Stream(self.device) if self.cuda else None
        threads = max(1, config.num_workers)
        bs = config.batch_size

        def slot() -> _Slot:
            events = (torch.cuda.Event(), torch.cuda.Event()) if self.cuda else (None, None)
            return _Slot(torch.empty((bs, size, size, CHANNELS), dtype=torch.uint8,
                                     pin_memory=self.cuda),
                         torch.empty(bs, dtype=torch.int64, pin_memory=self.cuda), *events)

        # Enough slots for every thread to fill one while `prefetch_depth` are in flight.
        self.slots = [slot() for _ in range(config.prefetch_depth + threads)]
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="prefetch")
        self.generation = 0   # bumped by every new iterator; an older one ends at its next step
        self.active: dict = {}   # the live iterator's pending fills

    def _fill(self, slot: _Slot, batch: int, index, epoch: int) -> int:
        """Producer thread: gather (and augment) one batch of `epoch` into a slot the GPU no longer reads."""
        if slot.copied is not None:
            slot.copied.synchronize()
        n = len(index)
        out = slot.images[:n].numpy()
        if self.config.augment:
            pad = self.config.pad
            dy, dx, flip = (t.numpy() for t in draw_augmentation(
                n, pad, augmentation_generator(self.config, epoch, batch, "cpu")))
            plain, mirrored = self.windows
            keep = ~flip   # a flipped crop at dx is the crop of the mirrored image at 2*pad - dx
            out[keep] = plain[index[keep], dy[keep], dx[keep]]
            out[flip] = mirrored[index[flip], dy[flip], 2 * pad - dx[flip]]
        else:
            np.take(self.data.images, index, axis=0, out=out)
        np.take(self.data.labels, index, out=slot.labels[:n].numpy())
        return n

    def _launch(self, slot: _Slot, n: int):
        """Consumer thread: start the copy + normalize of a filled slot (asynchronous on CUDA)."""
        if not self.cuda:
            return normalize(slot.images[:n], self.config), slot.labels[:n].clone()
        with torch.cuda.stream(self.stream):
            images = slot.images[:n].to(self.device, non_blocking=True)
            labels = slot.labels[:n].to(self.device, non_blocking=True)
            slot.copied.record(self.stream)
            out = normalize(images, self.config)
            slot.ready.record(self.stream)
        return out, labels

    def __iter__(self):
        """One epoch, fixed when this is called (epoch and its batches). Starting a new iterator ends
        the previous one: its fills are cancelled or awaited before the slots are reused."""
        if self.pool is None:
            raise RuntimeError("prefetch pipeline is closed")
        self._end_active()
        self.generation += 1
        return self._epoch(self.generation, self.batches(), self.epoch)

    def _end_active(self) -> None:
        """Stop the live iterator's fillers writing into the slots (a newer iterator or stages())."""
        for future in self.active.values():
            future.cancel()
        for future in self.active.values():
            if not future.cancelled():
                future.exception()
        self.active = {}
        if self.stream is not None:
            self.stream.synchronize()   # its copies out of the slots are done

    def _epoch(self, generation: int, batches: list, epoch: int):
        nslots, depth = len(self.slots), self.config.prefetch_depth
        pending = self.active = {}   # batch number -> future of its fill

        def submit(b: int) -> None:
            if b < len(batches):
                pending[b] = self.pool.submit(self._fill, self.slots[b % nslots], b, batches[b], epoch)

        for b in range(nslots):
            submit(b)
        launched: deque = deque()
        try:
            for b in range(len(batches)):
                if self.generation != generation:   # a newer iterator took the slots: this one is over
                    return
                while len(launched) < depth and b + len(launched) < len(batches):
                    nxt = b + len(launched)
                    launched.append((self.slots[nxt % nslots], self._launch(
                        self.slots[nxt % nslots], pending.pop(nxt).result())))
                    submit(nxt + nslots)   # its filler first waits for this slot's copy event
                slot, (images, labels) = launched.popleft()
                if self.cuda:
                    consumer = torch.cuda.current_stream(self.device)
                    consumer.wait_event(slot.ready)
                    images.record_stream(consumer)
                    labels.record_stream(consumer)
                yield images, labels
        finally:   # an abandoned epoch must not leave fillers writing into the slots
            if self.generation == generation:
                self._end_active()

    def stages(self) -> Stages:
        """host: the producer threads filling pinned slots (pinning is part of the fill); payload:
        the uint8 batch and labels; device: normalize."""
        if self.pool is None:
            raise RuntimeError("prefetch pipeline is closed")
        self.generation += 1   # ends a live iterator: the stages reuse its slots
        self._end_active()
        slot = self.slots[0]
        n = self._fill(slot, 0, self.batches()[0], self.epoch)
        payload = [slot.images[:n].clone(), slot.labels[:n].clone()]
        on_device = payload[0].to(self.device)
        return Stages(host=self._host_batches, payload=payload, copy="pinned" if self.cuda else "none",
                      pins=False, device=lambda: normalize(on_device, self.config))

    def _host_batches(self):
        """One epoch of filled slots, every thread busy, no copies (the host stage alone)."""
        pending: deque = deque()

        def oldest():
            slot, future = pending.popleft()
            n = future.result()
            return [slot.images[:n], slot.labels[:n]], slot.labels[:n]

        epoch = self.epoch
        for b, index in enumerate(self.batches()):
            slot = self.slots[b % len(self.slots)]   # free: the fill that used it was awaited
            pending.append((slot, self.pool.submit(self._fill, slot, b, index, epoch)))
            if len(pending) == len(self.slots):
                yield oldest()
        while pending:
            yield oldest()

    def close(self) -> None:
        self.generation += 1
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
        if self.stream is not None:
            self.stream.synchronize()
        self.slots = []
