"""`dali`: NVIDIA DALI decodes JPEG-encoded CIFAR-10 (on the GPU by default); `dali-raw`: the same
pipeline on raw uint8 pixels, no decode, so decode cost and DALI's own cost can be told apart.

Bytes: the packed JPEG copy (`dali`) or the uint8 arrays (`dali-raw`) in host memory -> a batch-mode
`fn.external_source` hands DALI `dali_batch_multiple` consecutive batches of the shared epoch plan at
once (one DALI batch; its fixed per-batch cost is shared; photographs: one batch) -> DALI decodes them:
`fn.decoders.image(device="mixed")` (nvJPEG: Huffman decoding on DALI's `dali_threads` CPU threads, the
rest on the GPU; `dali_hw_decoder_load` of the files on the hardware JPEG engine; the threads follow
`num_workers`, the CPU budget, unless `dali_threads` is set) or, with `dali_decoder="cpu"`,
`device="cpu"` (libjpeg-turbo on DALI's threads) and the pixels copied to the GPU; `dali-raw` copies
the pixels -> DALI's PyTorch iterator hands over the uint8 N x S x S x 3 batch without a copy (held
until the copy that makes it torch's has run: `streams.Borrowed`) -> split into the plan's batches, each
cropped and flipped with one gather kernel over the zero-padded batch (the epoch's offsets and flips,
`epochs.epoch_draws`, as every pipeline draws them) and normalized into the contract's dtype and memory
format with one kernel. Labels live on the device; the epoch's order goes there once per epoch, pinned
and asynchronous.

Epochs: the external source streams epoch after epoch on one DALI pipeline (when epoch e's plan runs
out it goes on with epoch e+1's, the draws of (seed, e+1)), so DALI's prefetch queue
(`dali_queue_depth`) already holds the next epoch's first batches when an epoch ends and no epoch
start waits for it to refill; each epoch still yields `len(pipeline)` batches. `set_epoch` to
another epoch than the next (a jump, a repeat) starts a new source there; an epoch left mid-way
is run out first when the next one follows it.

Why this structure (the probe and its measured output: results/2026-11-23-h100-peers/probe/): DALI's
per-sample operators (`slice` with per-sample starts, `crop_mirror_normalize` with per-sample flips) cost
more than the work they do at 32 px, so the graph augments in torch instead, and DALI batches several
training batches at once to share its fixed cost. Decoding is then what limits `dali`: nvJPEG ("mixed")
stops gaining threads early, the GPU Huffman decoder (`hybrid_huffman_threshold=0`) and the hardware
engine are slower, and libjpeg-turbo on many threads is faster and leaves the GPU to the training step.

`dali_reader="parallel"` runs the external source in `num_workers` spawned processes (DALI's
parallel external source). `dali_reader="file"` reads the folder-tree copy (photographs: their own
files) with `fn.readers.file` instead: DALI's own sharding and per-epoch shuffle
(`shuffle_after_epoch`, seeded), one training batch per DALI batch; epochs follow the reader's
sequence from construction and `set_epoch` does not select one. The reader reads on across epoch
ends too (DALI's iterator only counts the epoch's samples), so its queue does not drain there
either. Its sharding policy is DALI's: contiguous shards of the (shuffled) file list whose sizes
differ by at most one sample, each padded by repeating its last sample to whole batches
(`pad_last_batch`), so every rank runs the same number of batches; "drop" then drops the shard's
incomplete last batch. CIFAR's crops and flips are drawn per epoch like the external source's, by
position in the epoch; photographs' by DALI itself, as NVIDIA's example draws them (`dali_photos`).

Measured loader ceilings per CPU budget, for both decoders and `dali-raw`, and what they feed: the
reference run, results/2026-11-24-h100-reference/REPORT.md; on photographs (threads x
`dali_hw_decoder_load` too): results/2026-11-26-h100-photos/ and results/2026-11-26-h100-photos-dali/.

Photographs (`source="imagefolder:PATH"`): DALI decodes, resizes, mirrors and normalizes them into
the contract's images itself, one training batch per DALI batch (`dali_batch_multiple` is not read), in
the graphs of `dali_photos`: the boxes every pipeline draws, decoded alone (external source), or DALI
set up as NVIDIA's ResNet-50 example sets it up, its own file reader and random crop
(`dali_reader="file"`); the one copy that makes the batch torch's converts it to the contract's dtype.
`dali_cpu_share` divides photographs between libjpeg-turbo and nvJPEG, each batch's files
(`dali_split="samples"`: the copy that owns the batch concatenates the two parts) or whole batches
(`"batches"`, also over `dali_gpu_pipelines` nvJPEG pipelines in turn), in DALI pipelines of their own
side by side, each fed its part of the same plan: `dali_split` says how and why.

Without a GPU the same graphs run CPU-only (`device_id=None`, CPU decoder). The knobs are declared in
`dali_options`, the external source's callbacks in `dali_sources`; neither needs DALI."""
from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from . import dali_photos, sources
from .streams import Borrowed
from .config import MEAN, STD
from .contract import Pipeline, Stages
from .dali_options import (BATCH_MULTIPLE, CPU_SHARE, DECODER, GPU_PIPELINES, HW_DECODER_LOAD, QUEUE_DEPTH, READER,
                           SPLIT, THREADS, refuse_share, resolved)
from .dali_sources import EpochSource, Files, FixedSource, Share, grouped
from .dali_split import Lane, Lanes, thread_counts
from .epochs import epoch_batches, epoch_draws
from .jpeg_errors import refuse_unframed, undecodable_jpeg, undecodable_sample
from .kernels import crop_normalize, warm_crop_normalize
from .options import NUM_WORKERS
from .peers import Peer


def _import_dali() -> SimpleNamespace:
    """DALI's parts this pipeline uses."""
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator
    return SimpleNamespace(fn=fn, pipeline_def=pipeline_def, types=types, LastBatchPolicy=LastBatchPolicy,
                           DALIGenericIterator=DALIGenericIterator)


DALI = Peer(_import_dali, lambda e: "NVIDIA DALI is not installed: pip install -e '.[dali]' (nvidia-dali-cuda120, "
            "CUDA 12 drivers) or pip install -e '.[dali-cu13]' (nvidia-dali-cuda130, CUDA 13)")


class DaliPipeline(Pipeline):
    name = "dali"
    encoding = "jpeg"
    photos = True
    options = (READER, DECODER, THREADS, QUEUE_DEPTH, HW_DECODER_LOAD, BATCH_MULTIPLE, CPU_SHARE, SPLIT, GPU_PIPELINES,
               NUM_WORKERS)
    missing = DALI

    @classmethod
    def copies(cls, config):
        """The JPEG copy, and with `dali_reader="file"` its file tree (photographs: their own files)."""
        tree = config.dali_reader == "file" and not config.photos
        return super().copies(config) + (("jpeg-tree",) if tree else ())

    @classmethod
    def resolve(cls, config):
        """Its encoding, and the DALI knobs left unset as `dali_options.resolved` sets them."""
        return resolved(super().resolve(config))

    def __init__(self, config, data=None):
        if CPU_SHARE in self.options:
            refuse_share(self.name, config)
        super().__init__(config, data)
        if config.dali_reader == "file" and self.data.folder is None and self.data.sizes is None:
            raise ValueError(f"{self.name}: dali_reader='file' reads the JPEG file tree of a data folder or "
                             f"photographs' files; the "
                             f"data passed ({self.data.source}) has none: use dali_reader='external'")
        self.cuda = self.device.type == "cuda"
        self.file_reader = config.dali_reader == "file"
        side = None if self.data.images is None else self.data.images.shape[1]   # photographs: any size
        if self.encoding == "jpeg" and (not self.file_reader or side is None):   # photographs: as read, which
            refuse_unframed(self.data.jpeg, config.split, side)   # DALI's reader reads too; before DALI may die of one
        self.multiple = 1 if self.file_reader else self.config.dali_batch_multiple   # batches per DALI batch
        self.labels = torch.from_numpy(self.data.labels).to(self.device)
        if self.data.sizes is None:   # photographs come out of DALI as contract images
            warm_crop_normalize(self.device, self.config)
        self.dali_batches = None if self.file_reader else -(-len(self) // self.multiple)   # an epoch's
        c = self.config
        share, gpus = (c.dali_cpu_share, c.dali_gpu_pipelines) if CPU_SHARE in self.options else (0.0, 1)
        # whole batches in turn (`dali_split`): the pipelines decoding each, the CPU decoder's first
        self.lanes = Lanes(share, gpus) if gpus > 1 or 0 < share < 1 and c.dali_split == "batches" else None
        # the DALI pipelines (a split of every batch: the CPU's part first)
        self.decoders = (self.lanes.decoders if self.lanes else [c.dali_decoder] if share == 0
                         else ["cpu"] if share == 1 else ["cpu", "mixed"])
        self.pipes, self.iterators, self.fixed_pipes, self.fixed = [], [], [], []
        self.borrowed = Borrowed(self.device, self.config.dali_queue_depth + 1)   # DALI's outputs, until copied
        self._start(first_epoch=0)

    def _start(self, first_epoch: int) -> None:
        """(Re)build the DALI pipelines and iterators, starting at our epoch first_epoch (the external
        source then streams epoch after epoch; readers.file's epoch k is our epoch first_epoch + k).
        The pipelines of stages(), if any, are kept."""
        for pipe in self.pipes:
            pipe._shutdown()
        self.first_epoch = self.next_epoch = first_epoch
        self.taken = 0   # DALI batches taken from the stream
        self.pipes = self._pipelines(None if self.file_reader else lambda: self._source(first_epoch))
        self.iterators = [self._iterator(pipe) for pipe in self.pipes]
        self.in_epoch = False   # an epoch was started and not run to its end

    def _iterator(self, pipe, fixed: bool = False) -> Any:
        dali = DALI.get()
        if self.file_reader and not fixed:
            policy = dali.LastBatchPolicy.DROP if self.config.last_batch == "drop" else dali.LastBatchPolicy.PARTIAL
            return dali.DALIGenericIterator([pipe], ["images", "labels"], reader_name="reader", last_batch_policy=policy,
                                            prepare_first_batch=False, auto_reset=False)
        return dali.DALIGenericIterator([pipe], ["images"], size=-1, prepare_first_batch=False, auto_reset=False)

    def samples(self):
        return self.data.jpeg

    def decode(self, samples):
        """Encoded files -> uint8 S x S x 3 images where the rest of the graph runs."""
        dali = DALI.get()
        if self.cuda and self.config.dali_decoder == "mixed":
            return dali.fn.decoders.image(samples, device="mixed", output_type=dali.types.RGB,
                                          hw_decoder_load=self.config.dali_hw_decoder_load)
        images = dali.fn.decoders.image(samples, device="cpu", output_type=dali.types.RGB)
        return images.gpu() if self.cuda else images

    def _source(self, first_epoch: int) -> EpochSource:
        return EpochSource(self.config, self.samples(), len(self.data), first_epoch, self.multiple, self.data.sizes)

    def _inputs(self, source, parallel: bool):
        """The graph's inputs: encoded files from `source` (None: from readers.file, with their
        labels); for photographs, their boxes and flips too."""
        dali = DALI.get()
        c = self.config
        if source is not None:
            return dali.fn.external_source(source=source, batch=True, batch_info=True,
                                           num_outputs=1 if self.data.sizes is None or self.file_reader else 4,
                                           parallel=parallel)   # the file reader's photos: the files alone
        if self.data.sizes is not None:   # photographs: their own files
            root, files = dali_photos.reader_files(self.data.jpeg.paths)
        else:
            root = self.tree_root = sources.prepare_jpeg_tree(self.data.folder, c.jpeg_quality, c.image_size,
                                                              c.cache_root)
            files = [sources.tree_path(c.split, i, label) for i, label in enumerate(self.data.labels)]
        return dali.fn.readers.file(
            file_root=str(root), files=files, labels=self.data.labels.tolist(), name="reader",
            random_shuffle=False, shuffle_after_epoch=c.shuffle, seed=c.seed, shard_id=c.rank,
            num_shards=c.world_size, pad_last_batch=True)   # one shuffle seed for every shard

    def _pipelines(self, make_source) -> list:
        """The DALI pipelines fed by the sources `make_source()` makes (None: readers.file): one, or
        (`dali_split`) one per decoder, each fed its part of the stream by a source of its own: its whole
        batches (`dali_split.Lane`) or its slice of every batch (`dali_sources.Share`), with its share of
        `dali_threads` (`dali_split.thread_counts`)."""
        c = self.config
        if len(self.decoders) == 1:
            source = None if make_source is None else make_source()
            parallel = c.dali_reader == "parallel" and isinstance(source, EpochSource)
            return [self._graph(source, self.decoders[0], c.dali_threads, parallel)]
        sources = [Lane(make_source(), self.lanes, lane) if self.lanes else
                   Share(make_source(), c.dali_cpu_share, cpu=decoder == "cpu")
                   for lane, decoder in enumerate(self.decoders)]
        return [self._graph(source, decoder, threads) for source, decoder, threads
                in zip(sources, self.decoders, thread_counts(self.decoders, c.dali_threads))]

    def _graph(self, source, decoder: str, threads: int, parallel: bool = False):
        """One DALI pipeline: `source`'s files (None: readers.file's) decoded by `decoder`."""
        dali = DALI.get()
        c = self.config
        workers = dict(py_num_workers=max(1, c.num_workers), py_start_method="spawn") if parallel else {}

        @dali.pipeline_def(batch_size=c.batch_size * self.multiple, num_threads=threads,
                           device_id=(self.device.index or 0) if self.cuda else None,
                           prefetch_queue_depth=c.dali_queue_depth,
                           seed=c.seed, **workers)   # no random operator in the graph: crops and flips are drawn here
        def graph():
            inputs = self._inputs(source, parallel)
            if self.data.sizes is None:
                images = self.decode(inputs[0])
            elif self.file_reader:   # DALI's own random crop, also on stages()' fixed files
                images = dali_photos.random_crop_graph(dali, c, self.data.sizes, self.cuda, decoder, inputs[0])
            else:
                images = dali_photos.boxes_graph(dali, c, self.data.sizes, self.cuda, decoder, *inputs)
            if source is None:   # readers.file: labels come with the files
                return images, inputs[1].gpu() if self.cuda else inputs[1]
            return images

        return graph()

    def __len__(self) -> int:
        return len(self.iterators[0]) if self.file_reader else super().__len__()

    @property
    def queue_capacity(self) -> int:
        """DALI's prefetch queue (`dali_queue_depth` DALI batches of `multiple` batches each; a split of
        every batch: both pipelines' queues hold the same batches' parts; whole batches in turn: each
        pipeline's queue its own) and the rest of the DALI batch being split."""
        queues = len(self.pipes) if self.lanes else 1
        return self.config.dali_queue_depth * queues * self.multiple + self.multiple - 1

    def _iterate(self):
        """The next epoch of the stream, if it is the one set (its first DALI batches may be made
        already); else a new source that starts at the epoch set (a jump or a repeat)."""
        if not self.file_reader and self.epoch != self.next_epoch:
            self._start(first_epoch=self.epoch)
        elif self.in_epoch:   # DALI cannot reset mid-epoch: run the abandoned one out, then go on
            while self._next() is not None:
                pass
            self.in_epoch = False
        if self.file_reader and self.next_epoch > self.first_epoch:
            self.iterators[0].reset()   # the iterator's count only: DALI's reader read on into this epoch
        epoch, self.next_epoch = self.next_epoch, self.next_epoch + 1
        self.in_epoch, self.fetched = True, 0
        return self._epoch(epoch)

    def _epoch(self, epoch: int):
        """The epoch's contract batches: each DALI batch split into the plan's batches, augmented."""
        if self.file_reader:   # DALI's order: labels come with the images
            sizes, order = [self.config.batch_size] * len(self), None
        else:
            plan = epoch_batches(len(self.data), self.config, epoch)
            sizes = [len(index) for index in plan]
            order = self.uploads.order(plan)
        draws = None if self.data.sizes is not None else self.uploads.draws(epoch_draws(self.config, epoch, sum(sizes)))
        start, b = 0, 0
        while (batch := self._next()) is not None:
            images, labels = batch
            at = 0
            while at < len(images) and b < len(sizes):
                n = min(sizes[b], len(images) - at)
                yield (self._augment(images[at:at + n], draws, start),
                       labels[at:at + n] if labels is not None else self.labels[order[start:start + n]])
                at, start, b = at + n, start + n, b + 1
        self.in_epoch = False

    def _own(self, outs: list) -> tuple[torch.Tensor, torch.Tensor | None]:
        """A DALI batch (the outputs of each of `self.pipes`) in memory torch owns, made at once: DALI
        hands its own buffers over without a copy, and a DALI error in a batch being prefetched can
        free them: one copy per DALI batch, DALI's buffers held until it has run (`streams.Borrowed`).
        Photographs: the copy makes the contract's images (a split's two parts concatenated, DALI's
        float16 converted to bfloat16, HWC seen as channels_last)."""
        labels = outs[0][0].get("labels")   # readers.file only
        labels = None if labels is None else labels.long().view(-1)
        if self.data.sizes is None:
            images = outs[0][0]["images"].clone()
        else:
            images = dali_photos.contract_images([out[0]["images"] for out in outs], self.config)
        self.borrowed.hold(outs)   # DALI reuses them once dropped, whatever this stream has queued
        return images, labels

    def _augment(self, images: torch.Tensor, draws, start: int) -> torch.Tensor:
        """uint8 N x S x S x 3 on the device -> contract images: crop + flip with the epoch's draws
        of positions start.. (on the device) and normalize, one kernel (`crop_normalize`);
        photographs: DALI made them contract images already."""
        if self.data.sizes is not None:
            return images
        return crop_normalize(images, torch.arange(len(images), device=images.device), draws, self.config, start)

    def _next(self) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """DALI's next batch of the epoch under way (epoch `next_epoch - 1`) in memory torch owns (`_own`),
        None at its end (the external source's: after `dali_batches` DALI batches, the stream itself running
        on). DALI reports a file its decoder rejects as an error of the whole pipeline, a RuntimeError with
        the graph's traceback and "nvImageCodec failure: '#4'" (a status: not a supported image) or "Failed
        to decode sample #3" (a position in a batch it does not name), raised by the call that fetches that
        batch: it becomes a one-line ValueError naming the sample. DALI 2.4 crashed the process now and
        then on that path (tests/test_corrupt_jpeg.py): files that are not whole JPEGs never reach it."""
        if self.fetched == self.dali_batches:
            return None
        try:
            outs = self._take(self.iterators, self.taken)
        except StopIteration:
            return None
        except Exception:   # DALI maps its errors to RuntimeError, ValueError, IndexError, TypeError
            bad = self._undecodable()
            if bad is None:
                raise
            raise bad from None
        self.fetched += 1
        self.taken += 1
        return self._own(outs)

    def _take(self, iterators: list, g: int) -> list:
        """The outputs of the stream's DALI batch g: one from each pipeline (a split of every batch),
        or from the one whose turn it is (whole batches: `dali_split.Lanes`)."""
        return [next(iterators[self.lanes.lane(g)])] if self.lanes else [next(iterator) for iterator in iterators]

    def _undecodable(self) -> ValueError | None:
        """After a DALI error: the error naming the first file that does not decode on the CPU
        (`jpeg_errors.undecodable_jpeg`, see its limits) among those DALI may have been decoding, or None.
        External source: the DALI batches from the one due next to the last that DALI can have
        prefetched (dali_queue_depth ahead, plus one), on into the next epoch (`_upcoming`).
        readers.file: its own order, so every file: CIFAR's of the tree, which holds the same bytes as
        the packed copy but can be damaged apart from it; photographs' as read."""
        c = self.config
        if self.encoding != "jpeg":
            return None
        if self.file_reader and self.data.sizes is None:
            paths = [self.tree_root / sources.tree_path(c.split, i, label)
                     for i, label in enumerate(self.data.labels)]
            bad = undecodable_jpeg(Files(paths), range(len(paths)), self.data.images.shape[1])   # CIFAR only
            return None if bad is None else undecodable_sample(
                c.split, *bad, f"JPEG file tree ({paths[bad[0]]})",
                remedy=f"delete {self.tree_root} (it is written again when next used)")
        if self.file_reader:   # photographs through DALI's reader: in its own order, so any of them
            indices, size = range(len(self.data)), None
        else:
            window = self._upcoming(self.queue_capacity + 2)
            indices = np.concatenate(window) if window else []
            size = None if self.data.images is None else self.data.images.shape[1]   # photographs: any size
        bad = undecodable_jpeg(self.data.jpeg, indices, size) if len(indices) else None
        return None if bad is None else undecodable_sample(c.split, *bad, paths=self.data.jpeg.paths)

    def _upcoming(self, count: int) -> list[np.ndarray]:
        """The sample indices of the external source's next `count` DALI batches, from the one due
        next in the epoch under way on into the epochs after it."""
        epoch, start, groups = self.next_epoch - 1, self.fetched, []
        while len(groups) < count and self.dali_batches:
            groups += grouped(epoch_batches(len(self.data), self.config, epoch), self.multiple)[start:]
            epoch, start = epoch + 1, 0
        return groups[:count]

    def _stages(self) -> Stages:
        """host: the external_source callback over an epoch (with readers.file: none, the reader runs
        inside DALI); payload: one batch's bytes as DALI copies them to the GPU (`_payload`); device:
        the DALI pipelines (decode on its threads and the GPU) fed one fixed DALI batch forever, then
        the crop + flip and normalize of each batch in it (photographs: DALI's, all inside)."""
        source = self._source(self.epoch)
        groups = grouped(self.batches(), self.multiple)

        def host():
            for i, index in enumerate(groups):
                yield source(SimpleNamespace(iteration=i)), torch.from_numpy(self.data.labels[index])

        first, batch = self.batches()[0], source(SimpleNamespace(iteration=0))
        for pipe in self.fixed_pipes:   # stages() called again: one set of fixed pipelines at a time
            pipe._shutdown()
        files_only = self.file_reader and self.data.sizes is not None   # DALI draws the crops
        self.fixed_pipes = self._pipelines(lambda: FixedSource(batch[:1] if files_only else batch))
        self.fixed = [self._iterator(pipe, fixed=True) for pipe in self.fixed_pipes]
        draws = None if self.data.sizes is not None else self.uploads.draws(
            epoch_draws(self.config, self.epoch, len(groups[0])))

        def device_batches():
            for g in itertools.count():
                images, _ = self._own(self._take(self.fixed, g))
                for start in range(0, len(images), len(first)):
                    yield self._augment(images[start:start + len(first)], draws, start)

        batches = device_batches()
        return Stages(host=None if self.file_reader else host, payload=self._payload(first, batch),
                      copy="pinned" if self.cuda else "none", pins=False, device=lambda: next(batches))

    def _payload(self, first: np.ndarray, batch: list) -> list[torch.Tensor]:
        """The bytes of the plan's first batch (sample indices `first`, `batch` as the external source
        gives it) that DALI copies to the GPU from its own pinned buffers: the encoded files for the
        "mixed" decoder, the decoded pixels for "cpu" (CIFAR's images; photographs' decoded boxes,
        resized on the GPU); with a split, each decoder's part (whole batches in turn: as many files of a
        batch as it decodes on average)."""
        if self.data.sizes is None:
            if self.encoding == "jpeg" and self.config.dali_decoder == "mixed":
                return [torch.from_numpy(np.concatenate([self.data.jpeg[i] for i in first]))]
            return [torch.from_numpy(self.data.images[first])]
        decoders = sorted(set(self.decoders))   # "cpu" first
        parts = [batch] if len(decoders) == 1 else [
            Share(FixedSource(batch), self.config.dali_cpu_share, cpu=decoder == "cpu")(None) for decoder in decoders]
        return [torch.from_numpy(np.concatenate(files)) if decoder == "mixed"
                else torch.zeros(3 * int(shapes.prod(axis=1).sum()), dtype=torch.uint8)
                for decoder, (files, _, shapes, _) in zip(decoders, parts)]

    def _release(self) -> None:
        """Shut the DALI pipelines down now: left to Python's cycle collector, a DALI pipeline is shut down at a
        random later moment, and one that met a decoding error can crash the process then (seen with DALI 2.4 on
        the CPU)."""
        self.borrowed.release()
        for pipe in self.pipes + self.fixed_pipes:
            pipe._shutdown()   # what DALI's own exit handler calls
        self.pipes, self.iterators, self.fixed_pipes, self.fixed = [], [], [], []


class DaliRawPipeline(DaliPipeline):
    name = "dali-raw"
    encoding = "raw"
    photos = False
    options = (READER, THREADS, QUEUE_DEPTH, BATCH_MULTIPLE, NUM_WORKERS)

    def __init__(self, config, data=None):
        if config.dali_reader == "file":
            raise ValueError("PipelineConfig.dali_reader='file': dali-raw reads raw pixels through "
                             "external_source only")
        super().__init__(config, data)

    def samples(self):
        return self.data.images

    def decode(self, samples):
        return samples.gpu() if self.cuda else samples
