"""`prefetch`: uint8 over the bus from preallocated pinned buffers, asynchronous copies on a side
CUDA stream kept `prefetch_depth` batches ahead, augmentation and normalization on the GPU.

Bytes (`prefetch_augment="device"`, the default): uint8 arrays in host memory -> one producer
thread, a round of `rounds.round_batches` batches (8 at 32 px) at a time: gathers their whole
images (contiguous rows) into a pinned staging slot with `torch.index_select(..., out=slot)`, then,
on the side stream, launches the `non_blocking` host-to-device copy of the slot, crop + flip +
normalize of every image as one compiled kernel (`kernels.crop_normalize`, shared with `resident`;
the epoch's draws uploaded once per epoch) and the labels' gather, and records an event -> the
consumer's stream waits on that event, and the consumer takes the batches as views. The host does
nothing per image but copy its bytes; every launch is the producer's, off the training thread; a
round is four launches; the producer waits for a slot's earlier copy with a blocking event (off the
CPU, which a budget of two cores cannot spare to spinning). After an epoch's last round the
producer plans the next epoch (`set_epoch(e + 1)`, as a training loop calls it) and gathers its
first round, so the epoch restart neither plans nor gathers; another epoch is planned anew.

The gather is split into GATHER_THREADS (4) contiguous shares of the rows, each one
`torch.index_select` on its own thread with one intra-op thread: one wake-up per thread per round.
torch's own parallel gather (an OpenMP team) was no faster than a single thread with OpenMP's threads
sleeping between regions (`OMP_WAIT_POLICY=PASSIVE`) and only fast with them spinning, which depends
on how many cores the process has (results/2026-11-26-h100-prefetch-cores/).

`prefetch_augment="host"`: the older design, kept to show what moving the crop to the GPU buys:
`num_workers` producer threads crop and flip on the host (numpy fancy indexing over strided window
views of the zero-padded set, plain and mirrored; numpy releases the GIL) straight into the pinned
slot, one batch per slot; the GPU only normalizes. Both variants crop and flip every sample alike
(`epochs.epoch_draws`), so they yield the same batches. The apex `data_prefetcher` / timm
`PrefetchLoader` design, with FFCV's preallocated pinned buffers instead of per-batch pinning.

Measured rates: the results folders (results/README.md lists them), never here.

Labels live on the device and the epoch's order goes there once per epoch (`epochs.Uploader`): no
per-step label copy.

Stream safety: the stream, the events and the pinned slots are created once in `__init__`. One
iterator at a time owns the slots (`contract.Pipeline`): a newer iterator, or `stages()`, ends the
previous one, whose batches in production are cancelled or awaited first. A
slot is refilled only after the event recorded right after its copy has completed; outputs are
allocated on the side stream and `record_stream`-ed to the consumer's stream (`rounds.hand_over`,
shared with `resident`), so the caching allocator never hands them out while the consumer may still
read them. Without CUDA the same producer runs and does every step on the CPU.
"""
from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from .contract import Pipeline, Stages
from .epochs import EpochPlan, planned_ahead
from .kernels import crop_normalize, crop_windows, normalize, warm_crop_normalize
from .options import BATCHES_PER_LAUNCH, NUM_WORKERS, PREFETCH_DEPTH, Option
from .config import CHANNELS
from .rounds import consumer_stream, hand_over, on_stream, round_batches
from .streams import side_stream


AUGMENT = Option("prefetch_augment", "device", "crop and flip on the GPU (the host only gathers whole images) or "
                 "on the host (num_workers threads)", kind=str, choices=("device", "host"), listed=True)
GATHER_THREADS = 4   # threads of the gather, each copying a share of a round's rows (module docstring)


def gather_pool(count: int = GATHER_THREADS) -> ThreadPoolExecutor:
    """`count` started threads with one intra-op thread each (torch's ops on them never start an
    OpenMP team); every other thread, and those started later, keep torch's count. A thread takes
    torch's count at its first op, and `torch.set_num_threads` also sets the count later threads
    start with: each pool thread reads its count, then sets 1; this thread then puts the count back."""
    keep = torch.get_num_threads()
    started = threading.Barrier(count + 1)

    def one_thread():
        torch.get_num_threads()
        torch.set_num_threads(1)
        started.wait()

    pool = ThreadPoolExecutor(count, thread_name_prefix="prefetch-gather", initializer=one_thread)
    for _ in range(count):   # each waits in the barrier, so every submit starts a thread
        pool.submit(int)
    started.wait()
    torch.set_num_threads(keep)
    return pool


def gather_rows(pool: ThreadPoolExecutor, source: torch.Tensor, index: np.ndarray, out: torch.Tensor,
                shares: int = GATHER_THREADS) -> None:
    """out[i] = source[index[i]]: `shares` contiguous shares of the rows, copied on `pool` at once."""
    rows = torch.from_numpy(index)
    cuts = np.linspace(0, len(index), shares + 1).astype(int)
    jobs = [pool.submit(torch.index_select, source, 0, rows[a:b], out=out[a:b])
            for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
    for job in jobs:
        job.result()


def _stop(futures) -> None:
    """Cancel the producers' jobs not yet started and wait for those under way (their errors,
    if any, are dropped: nobody asks for their result any more)."""
    futures = list(futures)
    for future in futures:
        future.cancel()
    for future in futures:
        if not future.cancelled():
            future.exception()


@dataclass
class _Plan(EpochPlan):
    """One epoch as the producer works it: per round of launches its batches, their sample
    indices and the position of its first sample in the epoch; `filled`: the size of its first
    round if already gathered (into the slot that round takes)."""
    groups: list
    indices: list
    starts: np.ndarray
    filled: int | None = None


@dataclass
class _Slot:
    images: torch.Tensor               # B x S x S x 3 uint8, pinned when on CUDA
    copied: torch.cuda.Event | None    # recorded on the side stream after the copy out of this slot


class PrefetchPipeline(Pipeline):
    name = "prefetch"
    encoding = "raw"
    options = (AUGMENT, PREFETCH_DEPTH, BATCHES_PER_LAUNCH, NUM_WORKERS)

    def __init__(self, config, data=None):
        super().__init__(config, data)
        size, pad, bs = config.image_size, config.pad, config.batch_size
        self.host_crops = config.augment and config.prefetch_augment == "host"
        self.group = 1 if self.host_crops else round_batches(config)   # batches per slot and launch round
        rows = self.group * bs
        self.source = torch.from_numpy(self.data.images)
        if self.host_crops:   # windows[i, dy, dx] is the S x S x 3 crop at (dy, dx) of padded image i
            self.windows = crop_windows(self.data.images, size, pad)   # plain, mirrored
        self.cuda = self.device.type == "cuda"
        self.stream = side_stream(self.device)
        self.labels = torch.from_numpy(self.data.labels).to(self.device)
        self.device_crops = config.augment and not self.host_crops
        if self.device_crops:
            warm_crop_normalize(self.device, config)
        self.positions = torch.arange(rows, device=self.device)   # a slot's rows, copied to the device
        # One producer, whose gather runs on GATHER_THREADS threads of one intra-op thread each;
        # num_workers producers when each crops its own batch on the host.
        threads = max(1, config.num_workers) if self.host_crops else 1
        self.slots = [_Slot(torch.empty((rows, size, size, CHANNELS), dtype=torch.uint8, pin_memory=self.cuda),
                            torch.cuda.Event(blocking=True) if self.cuda else None)   # a producer waits off the CPU
                      for _ in range(-(-config.prefetch_depth // self.group) + threads + 1)]
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="prefetch")
        self.gatherers = None if self.host_crops else gather_pool()
        self.active: dict = {}   # the live epoch's batches in production
        self.upcoming = None     # future of the next epoch's plan and first round, made in advance
        self.turn = 0            # the slot of the next epoch's first round: slots are used in turn
        if self.cuda:   # the side stream uses what the current stream made here
            torch.cuda.synchronize(self.device)

    @property
    def queue_capacity(self) -> int:
        """Every slot's round but the free one's, produced ahead (`_epoch`), and the rest of the
        round being handed over."""
        return len(self.slots) * self.group - 1

    def _gather(self, slot: _Slot, index, start: int, draws) -> int:
        """A slot's images (samples `index`, cropped here only with `host_crops`) into a slot the GPU
        no longer reads."""
        if slot.copied is not None:
            slot.copied.synchronize()
        n = len(index)
        if self.host_crops:
            pad = self.config.pad
            dy, dx, flip = (d[start:start + n].numpy() for d in draws)
            plain, mirrored = self.windows
            out = slot.images[:n].numpy()
            keep = ~flip   # a flipped crop at dx is the crop of the mirrored image at 2*pad - dx
            out[keep] = plain[index[keep], dy[keep], dx[keep]]
            out[flip] = mirrored[index[flip], dy[flip], 2 * pad - dx[flip]]
        else:
            gather_rows(self.gatherers, self.source, index, slot.images[:n])
        return n

    def _launch(self, slot: _Slot, n: int, order: torch.Tensor, draws, start: int):
        """A filled slot to contract images on the device (on the side stream, asynchronous on
        CUDA): copy, then crop + flip + normalize in one kernel (only normalize when cropped on
        the host); the labels; the ready event."""
        with on_stream(self.stream):
            pixels = slot.images[:n].to(self.device, non_blocking=True)
            if slot.copied is not None:
                slot.copied.record(self.stream)
            images = (crop_normalize(pixels, self.positions[:n], draws, self.config, start)
                      if self.device_crops else normalize(pixels, self.config))
            return images, self.labels[order[start:start + n]], self.stream.record_event() if self.cuda else None

    def _produce(self, slot: _Slot, index, start: int, draws, order, on_device):
        """Producer thread: one slot's batches, gathered and launched (`draws`: the epoch's on the
        host, `on_device`: on the device)."""
        return self._launch(slot, self._gather(slot, index, start, draws), order, on_device, start)

    def _iterate(self):
        return self._epoch(self._take_upcoming(self.epoch) or self._plan(self.epoch))

    def _plan(self, epoch: int) -> _Plan:
        plan = self.plan(epoch)
        groups = [plan.batches[i:i + self.group] for i in range(0, len(plan.batches), self.group)]
        indices = [np.concatenate(group) for group in groups]
        return _Plan(epoch, plan.batches, plan.draws, groups, indices, np.cumsum([0] + [len(i) for i in indices]))

    def _prepare(self, epoch: int, slot: _Slot) -> _Plan:
        """Producer thread, after an epoch's last round: the plan of epoch `epoch` and its first
        round's images gathered into `slot` (the one its first round takes), so that the epoch
        restart neither plans nor gathers when the loop asks for that epoch next."""
        plan = self._plan(epoch)
        plan.filled = self._gather(slot, plan.indices[0], 0, plan.draws) if plan.groups else 0
        return plan

    def _take_upcoming(self, epoch: int | None) -> _Plan | None:
        """The prepared plan if it is epoch `epoch`'s (`epoch` None: awaited and dropped)."""
        upcoming, self.upcoming = self.upcoming, None
        return planned_ahead(upcoming, epoch)

    def _epoch(self, plan: _Plan):
        """One epoch's batches (its first round already gathered into the slot of `self.turn` where
        `plan.filled` is set)."""
        groups, indices, starts, draws, filled = plan.groups, plan.indices, plan.starts, plan.draws, plan.filled
        first, self.turn = self.turn, (self.turn + len(groups)) % len(self.slots)
        with on_stream(self.stream):   # the epoch's order and draws, on the side stream
            order = self.uploads.order(plan.batches)
            on_device = self.uploads.draws(draws) if self.device_crops else None
        pending = self.active = {}   # group number -> future of its batches in production
        ahead = len(self.slots) - 1   # groups in production or ready: one slot is always free

        def submit(g: int) -> None:
            if g >= len(groups):
                return
            slot = self.slots[(first + g) % len(self.slots)]
            if g == 0 and filled is not None:
                pending[g] = self.pool.submit(self._launch, slot, filled, order, on_device, 0)
            else:
                pending[g] = self.pool.submit(self._produce, slot, indices[g], int(starts[g]), draws, order, on_device)
            if g == len(groups) - 1:   # the last round: then the next epoch's plan and first round
                self.upcoming = self.pool.submit(self._prepare, plan.epoch + 1, self.slots[self.turn])

        consumer = consumer_stream(self.device)
        try:
            for g in range(ahead):
                submit(g)
            for g, group in enumerate(groups):
                images, labels, ready = pending.pop(g).result()
                submit(g + ahead)   # its slot's last copy was launched before this group's was
                yield from hand_over(images, labels, ready, consumer, group)
        finally:   # an abandoned epoch must not leave producers writing into the slots
            self._end_active()

    def _end_active(self) -> None:
        """Stop the live epoch's production (a newer iterator, stages(), close()). No device
        synchronization: a later fill of a slot first waits for that slot's copy event."""
        _stop(self.active.values())
        self.active = {}

    def _stages(self) -> Stages:
        """host: the producer filling pinned slots (pinning is part of the fill), no copy; payload:
        one batch's uint8 images; device: the copy, crop (unless done on the host) and normalize of
        one slot (`round_batches` batches)."""
        self._claim_slots()
        batches = self.batches()
        draws = self.draws(batches)
        first = np.concatenate(batches[:self.group])
        slot = self.slots[0]
        n = self._gather(slot, first, 0, draws)
        payload = [slot.images[:len(batches[0])].clone()]
        with on_stream(self.stream):
            order = self.uploads.order(batches)
            on_device = self.uploads.draws(draws) if self.device_crops else None
        fixed = _Slot(slot.images[:n].clone().pin_memory() if self.cuda else slot.images[:n].clone(), None)
        return Stages(host=lambda: self._host_stage(batches, draws), payload=payload,
                      copy="pinned" if self.cuda else "none", pins=False, device_images=n,
                      device=lambda: self._launch(fixed, n, order, on_device, 0)[:2])

    def _claim_slots(self) -> None:
        """The slots for the stages: the live iterator ends, and the next epoch's first round (if
        under way) is awaited and dropped."""
        self._end_live()
        self._take_upcoming(None)

    def _host_stage(self, batches, draws):
        """The host stage as the live iterator: it claims the slots, and a later `iter()` or
        `stages()` ends it."""
        self._check_open()
        self._claim_slots()
        self._live = self._host_batches(batches, draws)
        return self._live

    def _host_batches(self, batches, draws):
        """One epoch of filled slots, the producers busy, no copies (the host stage alone): each
        batch's images and labels. Ended early, it waits for the fills under way."""
        pending: deque = deque()
        start = 0

        def oldest():
            slot, future, b = pending.popleft()
            n = future.result()
            return [slot.images[:n]], torch.from_numpy(self.data.labels[batches[b]])

        try:
            for b, index in enumerate(batches):
                slot = self.slots[b % len(self.slots)]   # free: the fill that used it was awaited
                pending.append((slot, self.pool.submit(self._gather, slot, index, start, draws), b))
                start += len(index)
                if len(pending) == len(self.slots):
                    yield oldest()
            while pending:
                yield oldest()
        finally:
            _stop(future for _, future, _ in pending)

    def _release(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
        if self.gatherers is not None:   # after the producer, the only one that submits to it
            self.gatherers.shutdown(wait=True)
            self.gatherers = None
        if self.stream is not None:
            self.stream.synchronize()
        self.slots = []
