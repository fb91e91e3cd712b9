"""`resident`: the whole uint8 split on the GPU -- the upper bound on feeding rate.

Bytes: uint8 arrays in host memory -> copied to the device once at construction (timed,
reported as `info["upload_s"]`, not part of any epoch) -> per epoch: the shuffled order and the
crop offsets and flips (`epochs.epoch_draws`; drawn on a planner thread while the epoch before runs,
for the epoch after it, so the restart does not draw them) copied there from reused pinned buffers,
with no host synchronization and no allocation (`epochs.Uploader`) -> per round of `rounds.round_batches`
batches (8 at 32 px), on a side CUDA stream: crop + flip + normalize of every image of the round
as one compiled kernel reading the resident images by the epoch's order (`kernels.crop_normalize`,
shared with `prefetch`), the labels' gather, an event. Rounds are launched `prefetch_depth`
batches or more ahead of the batch the consumer takes, so the consumer's stream waits on an
event recorded long before and the round's kernel overlaps the training step instead of sitting
between two steps. No per-step host transfer, three launches per round. The airbench /
hlb-CIFAR10 approach.

Measured rates: the results folders (results/README.md lists them), never here.

Stream safety: the stream and the device copies are made once in `__init__` (synchronized there).
Everything an epoch allocates is allocated and used on the side stream; each round's tensors are
`record_stream`-ed to the consumer's stream (`rounds.hand_over`, shared with `prefetch`), so the
caching allocator never reuses them while the consumer may read them. Without CUDA the same steps
run on the CPU, in order.
"""
from __future__ import annotations

import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import torch

from .contract import Pipeline, Stages
from .epochs import EpochPlan, planned_ahead
from .kernels import crop_normalize, warm_crop_normalize
from .options import BATCHES_PER_LAUNCH, PREFETCH_DEPTH
from .rounds import consumer_stream, hand_over, on_stream, round_batches
from .streams import side_stream


class ResidentPipeline(Pipeline):
    name = "resident"
    encoding = "raw"
    options = (PREFETCH_DEPTH, BATCHES_PER_LAUNCH)

    def __init__(self, config, data=None):
        super().__init__(config, data)
        self.cuda = self.device.type == "cuda"
        if self.cuda:
            torch.cuda.synchronize(self.device)
        start = time.perf_counter()
        self.images = torch.from_numpy(self.data.images).to(self.device)
        self.labels = torch.from_numpy(self.data.labels).to(self.device)
        if self.cuda:
            torch.cuda.synchronize(self.device)
        self.info["upload_s"] = time.perf_counter() - start
        warm_crop_normalize(self.device, config)
        self.stream = side_stream(self.device)
        self.planner = ThreadPoolExecutor(1, thread_name_prefix="resident-plan")
        self.upcoming = None   # future of the next epoch's plan, made during this one
        if self.cuda:   # the side stream uses what the current stream made here
            torch.cuda.synchronize(self.device)

    @property
    def queue_capacity(self) -> int:
        """The rounds launched ahead of the one handed over (`_epoch`: `prefetch_depth` batches or
        more) and the rest of that round: made on the device while nobody asks."""
        group = round_batches(self.config)
        return max(1, -(-self.config.prefetch_depth // group)) * group + group - 1

    def _iterate(self):
        plan = planned_ahead(self.upcoming, self.epoch) or self.plan(self.epoch)
        self.upcoming = self.planner.submit(self.plan, self.epoch + 1)
        return self._epoch(plan)

    def _epoch(self, plan: EpochPlan):
        batches = plan.batches
        if not batches:
            return
        c, group = self.config, round_batches(self.config)
        consumer = consumer_stream(self.device)
        with on_stream(self.stream):
            order = self.uploads.order(batches)
            draws = self.uploads.draws(plan.draws)
        groups = [batches[i:i + group] for i in range(0, len(batches), group)]
        rounds = max(1, -(-c.prefetch_depth // group))   # rounds launched beyond the one consumed
        ahead: deque = deque()
        made, start = 0, 0
        for _ in groups:
            while made < len(groups) and len(ahead) <= rounds:
                n = sum(len(index) for index in groups[made])
                with on_stream(self.stream):   # one round of launches for the group's batches
                    idx = order[start:start + n]
                    made_group = (crop_normalize(self.images, idx, draws, c, start), self.labels[idx], groups[made])
                    ready = self.stream.record_event() if self.cuda else None
                ahead.append((made_group, ready))
                made, start = made + 1, start + n
            (images, labels, sizes), ready = ahead.popleft()
            yield from hand_over(images, labels, ready, consumer, sizes)

    def _stages(self) -> Stages:
        """No host stage and no per-step copy: its whole per-batch work is the device stage."""
        plan = self.plan(self.epoch)

        def forever():   # the one epoch again and again, planned once
            while True:
                yield from self._epoch(plan)

        batches = forever()
        return Stages(host=None, payload=[], copy="none", pins=False, device=lambda: next(batches))

    def _release(self) -> None:
        self.planner.shutdown(wait=True, cancel_futures=True)
        if self.stream is not None:
            self.stream.synchronize()
        self.images = self.labels = None

