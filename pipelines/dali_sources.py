"""What feeds the `dali` pipelines' graphs: the `fn.external_source` callbacks, which need no DALI.

They are picklable, so that DALI's parallel external source (`dali_reader="parallel"`) runs them in
its worker processes: `EpochSource` streams the shared epoch plans epoch after epoch, as DALI
batches of `dali_batch_multiple` training batches (`grouped`), photographs with their boxes and
flips; `Share` gives one of two decoders its part of each batch (`dali_cpu_share`, `cpu_count`);
`FixedSource` gives one batch forever (the device stage alone). `Files` reads the file tree's
files on an error path.
"""
from __future__ import annotations

import numpy as np

from . import sources
from .crops import epoch_boxes
from .epochs import batch_count, epoch_batches


def grouped(plan: list[np.ndarray], multiple: int) -> list[np.ndarray]:
    """The epoch plan's batches, `multiple` consecutive ones concatenated per DALI batch."""
    return [np.concatenate(plan[i:i + multiple]) for i in range(0, len(plan), multiple)]


class EpochSource:
    """external_source callback, picklable for worker processes: DALI batch `info.iteration` of a
    stream that runs epoch after epoch from `first_epoch` and never stops, so DALI's prefetch goes on
    into the next epoch while one ends: each epoch's plan grouped by `multiple` (`per_epoch` DALI
    batches an epoch, the same for every epoch), epoch `first_epoch + iteration // per_epoch`, a
    function of the iteration alone (worker processes may serve any). `samples` holds the JPEG files
    (a list of zero-copy views out) or the raw pixels (one dense array out). With `sizes`
    (photographs' heights and widths) each file comes with its box, as (x, y) and (w, h), and its
    flip: the epoch's `crops.epoch_boxes`."""

    def __init__(self, config, samples, n: int, first_epoch: int, multiple: int, sizes=None):
        self.config, self.samples, self.n, self.first_epoch = config, samples, n, first_epoch
        self.multiple, self.sizes = multiple, sizes
        self.per_epoch = -(-batch_count(n, config) // multiple)
        self.epoch, self.groups, self.boxes = None, [], None
        self.files = None   # the JPEG files as views, made on the first call in the process that calls

    def _plan(self, epoch: int) -> None:
        """Epoch `epoch`'s DALI batches (and photographs' boxes), unless they are those held."""
        if epoch == self.epoch:
            return
        self.epoch = epoch
        plan = epoch_batches(self.n, self.config, epoch)
        self.groups = grouped(plan, self.multiple)
        if self.sizes is not None:
            y, x, h, w, flip = epoch_boxes(self.config, epoch, self.sizes[np.concatenate(plan)])
            self.boxes = (np.stack([x, y], 1).astype(np.int32), np.stack([w, h], 1).astype(np.int32),
                          flip.astype(np.int32))

    def __call__(self, info):
        if self.per_epoch == 0:   # an epoch without a batch: nothing to stream
            raise StopIteration
        epoch, group = divmod(info.iteration, self.per_epoch)
        self._plan(self.first_epoch + epoch)
        index = self.groups[group]
        if isinstance(self.samples, sources.JpegSet):   # a list lookup per file, not two numpy scalars
            if self.files is None:
                self.files = [self.samples[i] for i in range(len(self.samples))]
            files = [self.files[i] for i in index.tolist()]
            if self.boxes is None:
                return [files]
            start = sum(len(g) for g in self.groups[:group])
            return [files, *(b[start:start + len(index)] for b in self.boxes)]
        return [self.samples[index]]


def cpu_count(n: int, share: float) -> int:
    """Of a batch of n files split by `dali_cpu_share`, how many the CPU decoder takes: round(share x
    n), at least 1 and, where n > 1, at most n - 1 (DALI cannot run an empty batch)."""
    return min(max(round(share * n), 1), max(n - 1, 1))


class Share:
    """external_source callback, picklable: one decoder's slice of each batch `source` gives (its
    files with their boxes and flips): the CPU decoder's first `cpu_count`, the other decoder the
    rest. A batch of one file goes to both (no empty batch); the second copy is left over past the
    batch's count (`DaliPipeline._epoch` takes each batch's own count)."""

    def __init__(self, source, share: float, cpu: bool):
        self.source, self.share, self.cpu = source, share, cpu

    def __call__(self, info):
        batch = self.source(info)
        n = len(batch[0])
        k = cpu_count(n, self.share)
        cut = slice(0, k) if self.cpu else slice(k, n) if k < n else slice(0, n)
        return [part[cut] for part in batch]


class FixedSource:
    """external_source callback returning one batch forever (the device stage alone)."""

    def __init__(self, batch):
        self.batch = batch

    def __call__(self, info):
        return self.batch


class Files:
    """Files by sample index, read when asked for (the file tree, on an error path)."""

    def __init__(self, paths):
        self.paths = paths

    def __getitem__(self, i: int) -> bytes:
        return self.paths[i].read_bytes()
