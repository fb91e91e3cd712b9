"""`dali`: NVIDIA DALI decodes JPEG-encoded CIFAR-10 on the GPU; `dali-raw`: the same graph on raw
uint8 pixels, no decode, so decode cost and DALI's framework cost can be told apart.

Bytes: the packed JPEG copy (`dali`) or the uint8 arrays (`dali-raw`) in host memory -> each
batch handed to DALI by a batch-mode `fn.external_source` in the shared epoch plan's order, with
that batch's crop offsets and flips (so every pipeline sees the same batches and `set_epoch` is
exact). The source runs in DALI's own thread (`dali_reader="external"`, default) or in
`num_workers` spawned processes (`"parallel"`, DALI's parallel external source). Measured on the
H100 (results/2026-11-21-h100-dali): the serial source needs the GIL, which a training loop's main
thread holds while it launches kernels, so it produces little while the model step runs; the
parallel source avoids that but spent minutes starting 15 workers and ran slower per batch -> `fn.decoders.image(device="mixed")` (nvJPEG; `dali_hw_decoder_load` of it on the
hardware JPEG engine) -> `fn.slice` with `out_of_bounds_policy="pad"` (the random 32x32 crop of
the zero-padded image) -> `fn.crop_mirror_normalize` (flip, normalize, CHW or HWC layout,
float32) -> DALI's PyTorch iterator, outputs handed over without an extra copy. HWC output is
exactly a channels_last NCHW tensor after a free permute. DALI has no bfloat16: that cast is
one torch kernel.

`dali_reader="file"` reads the folder-tree copy with `fn.readers.file` instead, with DALI's own
sharding, per-epoch shuffle (`shuffle_after_epoch`, seeded) and random crop/flip operators: epochs
then follow the reader's sequence from construction, and `set_epoch` does not select one. Its
sharding policy is DALI's: contiguous shards of the (shuffled) file list whose sizes differ by at
most one sample, each padded by repeating its last sample to whole batches (`pad_last_batch`), so
every rank runs the same number of batches; "drop" then drops the shard's incomplete last batch.
The random operators use the per-rank pipeline seed; the reader's shuffle, one seed for all shards.

Without a GPU the same graph runs CPU-only (`device_id=None`, CPU decoder and operators).
Loader-only on an H100: 81k img/s at batch 512, 15 threads; `dali-raw` 165k
(results/2026-11-22-h100-step/REPORT.md).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

try:
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator
except ImportError as e:   # the message every caller (build, sweeps) shows
    raise ImportError(
        "NVIDIA DALI is not installed: pip install -e '.[dali]' (nvidia-dali-cuda120, CUDA 12 "
        "drivers) or pip install -e '.[dali-cu13]' (nvidia-dali-cuda130, CUDA 13)") from e

from . import sources
from .base import (Pipeline, Stages, augmentation_generator, draw_augmentation, epoch_batches, rank_seeds,
                   undecodable_jpeg, undecodable_sample)
from .config import FLIP_P, MEAN, STD


class _EpochSource:
    """external_source callback, picklable for worker processes: batch `info.iteration` of epoch
    `first_epoch + info.epoch_idx` of the shared plan, with its crop starts (relative to the
    unpadded image) and flips. `samples` holds the JPEG bytes + offsets, or the raw pixels."""

    def __init__(self, config, samples, labels: np.ndarray, first_epoch: int):
        self.config, self.samples, self.labels, self.first_epoch = config, samples, labels, first_epoch
        self.epoch, self.plan = None, []

    def __call__(self, info):
        epoch = self.first_epoch + info.epoch_idx
        if epoch != self.epoch:
            self.epoch, self.plan = epoch, epoch_batches(len(self.labels), self.config, epoch)
        if info.iteration >= len(self.plan):
            raise StopIteration
        index = self.plan[info.iteration]
        if isinstance(self.samples, sources.JpegSet):
            encoded = [self.samples[i] for i in index]   # zero-copy views of each file
        else:
            encoded = self.samples[index]   # one dense uint8 batch, B x S x S x 3
        batch = [encoded, self.labels[index]]
        if self.config.augment:
            generator = augmentation_generator(self.config, epoch, info.iteration)
            pad = self.config.pad
            dy, dx, flip = (t.numpy() for t in draw_augmentation(len(index), pad, generator))
            batch += [np.stack([dy, dx], axis=1).astype(np.int32) - pad, flip.astype(np.int32)]
        return batch


class _Files:
    """Files by sample index, read when asked for (the file tree, on an error path)."""

    def __init__(self, paths):
        self.paths = paths

    def __getitem__(self, i: int) -> bytes:
        return self.paths[i].read_bytes()


class _FixedSource:
    """external_source callback returning one batch forever (the device stage alone)."""

    def __init__(self, batch):
        self.batch = batch

    def __call__(self, info):
        return self.batch


class DaliPipeline(Pipeline):
    name = "dali"
    encoding = "jpeg"

    def __init__(self, config, data=None):
        super().__init__(config, data)
        self.cuda = self.device.type == "cuda"
        self.file_reader = config.dali_reader == "file"
        self.iterator = self.fixed = None
        self._start(first_epoch=0)

    def _start(self, first_epoch: int) -> None:
        """(Re)build the DALI pipeline and iterator; its epoch k is our epoch first_epoch + k."""
        self.close()
        self.first_epoch = self.next_epoch = first_epoch
        self.pipe = self._graph()
        self.iterator = DALIGenericIterator(
            [self.pipe], ["images", "labels"], prepare_first_batch=False, auto_reset=False,
            **(dict(reader_name="reader", last_batch_policy=LastBatchPolicy.DROP
                    if self.config.last_batch == "drop" else LastBatchPolicy.PARTIAL)
               if self.file_reader else dict(size=-1)))
        self.in_epoch = False   # an epoch was started and not run to its end

    def samples(self):
        return self.data.jpeg

    def decode(self, samples):
        return fn.decoders.image(samples, device="mixed", output_type=types.RGB,
                                 hw_decoder_load=self.config.dali_hw_decoder_load) if self.cuda \
            else fn.decoders.image(samples, device="cpu", output_type=types.RGB)

    def _inputs(self, fixed: _FixedSource | None):
        c = self.config
        if fixed is not None or not self.file_reader:
            source = fixed or _EpochSource(c, self.samples(), self.data.labels, self.first_epoch)
            return fn.external_source(source=source, num_outputs=4 if c.augment else 2, batch=True,
                                      batch_info=True, parallel=c.dali_reader == "parallel" and not fixed)
        root = self.tree_root = sources.prepare_jpeg_tree(self.data.folder, c.jpeg_quality, c.image_size,
                                                          c.cache_root)
        files = [sources.tree_path(c.split, i, label) for i, label in enumerate(self.data.labels)]
        samples, labels = fn.readers.file(
            file_root=str(root), files=files, labels=self.data.labels.tolist(), name="reader",
            random_shuffle=False, shuffle_after_epoch=c.shuffle, seed=c.seed, shard_id=c.rank,
            num_shards=c.world_size, pad_last_batch=True)   # one shuffle seed for every shard
        if not c.augment:
            return samples, labels
        start = fn.random.uniform(values=list(range(-c.pad, c.pad + 1)), shape=[2], dtype=types.INT32)
        return samples, labels, start, fn.random.coin_flip(probability=FLIP_P)

    def _graph(self, fixed: _FixedSource | None = None):
        c = self.config

        parallel = dict(py_num_workers=max(1, c.num_workers), py_start_method="spawn") \
            if c.dali_reader == "parallel" and not fixed else {}

        @pipeline_def(batch_size=c.batch_size, num_threads=c.dali_threads,
                      device_id=(self.device.index or 0) if self.cuda else None,
                      prefetch_queue_depth=c.dali_queue_depth,
                      seed=c.seed if c.world_size == 1 else int(rank_seeds(c)[0]) % 2**31, **parallel)
        def graph():
            inputs = self._inputs(fixed)
            images, labels = self.decode(inputs[0]), inputs[1]
            if self.cuda:
                labels = labels.gpu()
            mirror = 0
            if c.augment:
                images = fn.slice(images, start=inputs[2], shape=[c.image_size] * 2, axes=[0, 1],
                                  out_of_bounds_policy="pad", fill_values=0)
                mirror = inputs[3]
            images = fn.crop_mirror_normalize(
                images, mirror=mirror, dtype=types.FLOAT, output_layout="HWC" if c.channels_last else "CHW",
                mean=[255 * m for m in MEAN], std=[255 * s for s in STD])
            return images, labels

        return graph()

    def __len__(self) -> int:
        return len(self.iterator) if self.file_reader else super().__len__()

    def __iter__(self):
        if self.iterator is None:
            raise RuntimeError(f"{self.name} pipeline is closed")
        if self.in_epoch:   # DALI cannot reset mid-epoch: finish the abandoned one
            while self._next() is not None:
                pass
            self.in_epoch = False
        if not self.file_reader and self.epoch != self.next_epoch:
            self._start(first_epoch=self.epoch)   # set_epoch jumped: the source starts there
        if self.next_epoch > self.first_epoch:
            self.iterator.reset()
        self.next_epoch += 1
        self.in_epoch, self.fetched = True, 0
        while (out := self._next()) is not None:
            yield self._to_contract(out)
        self.in_epoch = False

    def _next(self):
        """DALI's next batch of the epoch under way (epoch `next_epoch - 1`), None at its end. DALI
        reports a file its decoder rejects as an error of the whole pipeline, a RuntimeError with
        the graph's traceback and "nvImageCodec failure: '#4'" (a status: not a supported image) or
        "Failed to decode sample #3" (a position in a batch it does not name), raised by the call
        that fetches that batch: it becomes a one-line ValueError naming the sample."""
        try:
            out = next(self.iterator)
        except StopIteration:
            return None
        except Exception:   # DALI maps its errors to RuntimeError, ValueError, IndexError, TypeError
            bad = self._undecodable()
            if bad is None:
                raise
            raise bad from None
        self.fetched += 1
        return out

    def _undecodable(self) -> ValueError | None:
        """After a DALI error: the error naming the first file that does not decode on the CPU
        (`base.undecodable_jpeg`, see its limits) among those DALI may have been decoding, or None.
        External source: the batches from the one due next to the last that DALI can have
        prefetched (dali_queue_depth ahead, plus one). readers.file: its own order, so every file of
        the tree, which holds the same bytes as the packed copy but can be damaged apart from it."""
        c = self.config
        if self.encoding != "jpeg":
            return None
        if self.file_reader:
            paths = [self.tree_root / sources.tree_path(c.split, i, label)
                     for i, label in enumerate(self.data.labels)]
            bad = undecodable_jpeg(_Files(paths), range(len(paths)))
            return None if bad is None else undecodable_sample(c.split, *bad, f"JPEG file tree ({paths[bad[0]]})")
        plan = epoch_batches(len(self.data), c, self.next_epoch - 1)
        window = plan[self.fetched:self.fetched + c.dali_queue_depth + 2]
        bad = undecodable_jpeg(self.data.jpeg, np.concatenate(window)) if window else None
        return None if bad is None else undecodable_sample(c.split, *bad)

    def _to_contract(self, out):
        images, labels = out[0]["images"], out[0]["labels"]
        if self.config.channels_last:
            images = images.permute(0, 3, 1, 2)
        return images.to(getattr(torch, self.config.dtype)), labels.long().view(-1)

    def stages(self) -> Stages:
        """host: the external_source callback over an epoch (with readers.file: none, the reader runs
        inside DALI); payload: the batch's encoded bytes, which DALI copies from its own pinned
        buffers; device: the DALI graph (decode on its threads + GPU, crop, normalize) fed one
        fixed batch forever."""
        if self.iterator is None:
            raise RuntimeError(f"{self.name} pipeline is closed")
        source = _EpochSource(self.config, self.samples(), self.data.labels, self.epoch)

        def host():
            for i in range(len(self.batches())):
                batch = source(SimpleNamespace(epoch_idx=0, iteration=i))
                yield batch, torch.from_numpy(batch[1])

        batch = source(SimpleNamespace(epoch_idx=0, iteration=0))
        payload = [torch.from_numpy(np.concatenate([np.ravel(x) for x in batch[0]])), torch.from_numpy(batch[1])]
        pipe = self._graph(_FixedSource(batch))
        self.fixed = DALIGenericIterator([pipe], ["images", "labels"], size=-1, auto_reset=False,
                                         prepare_first_batch=False)
        return Stages(host=None if self.file_reader else host, payload=payload,
                      copy="pinned" if self.cuda else "none", pins=False,
                      device=lambda: self._to_contract(next(self.fixed)))

    def close(self) -> None:
        self.iterator = self.pipe = self.fixed = None


class DaliRawPipeline(DaliPipeline):
    name = "dali-raw"
    encoding = "raw"

    def __init__(self, config, data=None):
        if config.dali_reader == "file":
            raise ValueError("PipelineConfig.dali_reader='file': dali-raw reads raw pixels through "
                             "external_source only")
        super().__init__(config, data)

    def samples(self):
        return self.data.images

    def decode(self, samples):
        return samples.gpu() if self.cuda else samples
