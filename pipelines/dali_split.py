"""How the `dali` pipeline divides photographs' batches among DALI pipelines (`dali_cpu_share`,
`dali_split`, `dali_gpu_pipelines`); needs no DALI.

One DALI pipeline decodes one batch after another, and beside a busy step nvJPEG's makes a fixed
number of batches a second whatever they hold (results/2026-12-02-h200-split: about 21 of 256
photographs, 23 of 141, beside a compiled ResNet-50 on an H200). The ways round it tried here run
several DALI pipelines side by side, each fed by a source of its own from the same epoch plan, each
with its own prefetch queue:

- `dali_split="samples"` (with `dali_cpu_share`): every batch's first round(share x B) files go to a
  libjpeg-turbo pipeline, the rest to an nvJPEG one (`dali_sources.Share`); the copy that owns the batch
  concatenates the two parts. Each pipeline still makes every batch, so each batch costs both their fixed
  times, and the batch rate stays one pipeline's.
- `dali_split="batches"`: whole batches; a share `dali_cpu_share` of them to libjpeg-turbo, the rest to
  `dali_gpu_pipelines` nvJPEG pipelines in turn (`Lanes`): batch g of the stream is the CPU's where
  floor((g + 1) x share) > floor(g x share), so its batches are spread evenly, and the k-th of the others
  is nvJPEG pipeline (k mod G)'s. The batches come out in the plan's order, each whole from one
  pipeline. Measured (results/2026-12-03-h200-batches): their batch rates do not add up beside the
  step: two nvJPEG pipelines made 21.9 batches a second together where one made 21.1 (8 cores), so the
  fixed time per batch is not a pipeline's own; whole batches on the CPU fed no more than a split within
  batches. `samples` stays the default.

Threads (`thread_counts`): the nvJPEG pipelines share a quarter of `dali_threads`, at least one each (their
host work per photograph, parsing and the Huffman decoding of what the hardware decoder does not take, is
a fraction of a CPU decode's), the CPU decoder gets the rest (at least one); nvJPEG pipelines without a
CPU decoder share all of them. At 4 threads that is one for nvJPEG: with DALI's hardware share 0.65 it
Huffman-decodes a third of nvJPEG's photographs alone and starves (the split run: 53-57 % of the step's
rate at 0.65, 75 % at 0.99), so a split at few cores wants `dali_hw_decoder_load` near 1.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace


@dataclass(frozen=True)
class Lanes:
    """Which of the DALI pipelines (lanes: the CPU decoder's first, if any, then the nvJPEG ones)
    decodes each whole batch of the stream, `dali_split="batches"` (module docstring). `share`: the
    share of batches decoded on the CPU; `gpus`: nvJPEG pipelines."""

    share: float
    gpus: int

    @property
    def decoders(self) -> list[str]:
        return (["cpu"] if self.share > 0 else []) + ["mixed"] * (self.gpus if self.share < 1 else 0)

    def _cpu_before(self, g: int) -> int:
        """How many of the stream's batches 0..g-1 are the CPU decoder's."""
        return int(g * self.share) if self.share < 1 else g

    def lane(self, g: int) -> int:
        """The lane that decodes batch g of the stream."""
        cpu = self._cpu_before(g + 1) > self._cpu_before(g)
        if cpu:
            return 0
        return (self.share > 0) + (g - self._cpu_before(g)) % self.gpus

    def count(self, lane: int, g: int) -> int:
        """How many of the stream's batches 0..g-1 lane `lane` decodes."""
        cpu = self._cpu_before(g)
        if self.share > 0 and lane == 0:
            return cpu
        k = lane - (self.share > 0)   # this nvJPEG pipeline's turn among the batches the CPU does not take
        return max(0, -(-(g - cpu - k) // self.gpus))

    def nth(self, lane: int, j: int) -> int:
        """The stream position of the j-th batch (from 0) lane `lane` decodes."""
        high = j + 1
        while self.count(lane, high) <= j:
            high *= 2
        low = j   # a lane decodes at most one batch per position: its j-th is at position j or later
        while low < high:   # the first g where the count passes j, less one
            middle = (low + high) // 2
            if self.count(lane, middle + 1) > j:
                high = middle
            else:
                low = middle + 1
        return low


class Lane:
    """external_source callback, picklable: lane `lane`'s batches of the stream `source` gives (its
    iteration j is the stream's batch `lanes.nth(lane, j)`)."""

    def __init__(self, source, lanes: Lanes, lane: int):
        self.source, self.lanes, self.lane = source, lanes, lane

    def __call__(self, info):
        return self.source(SimpleNamespace(iteration=self.lanes.nth(self.lane, info.iteration)))


def thread_counts(decoders: list[str], threads: int) -> list[int]:
    """DALI threads per pipeline, in `decoders`' order, out of `threads` (module docstring)."""
    gpus = decoders.count("mixed")
    if len(decoders) == 1:
        return [threads]
    cpu = "cpu" in decoders
    mixed = max(gpus, round(threads / 4)) if cpu else max(gpus, threads)
    each = [mixed // gpus + (i < mixed % gpus) for i in range(gpus)]
    return ([max(1, threads - mixed)] if cpu else []) + each
