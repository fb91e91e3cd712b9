"""What a window iterates besides a plain pipeline: the pipeline's batches epoch after epoch
(`endless`, each epoch's iterator started with Ctrl-C held back), real batches already on the device
(model mode: `real_batches`), one stage of a pipeline alone (`stage_workload`) and the bus alone
(`copy_workload`); a stage a pipeline does not have raises `NotApplicable`.
"""
from __future__ import annotations

import itertools
from typing import Callable, Iterator

import numpy as np
import torch

import pipelines
from pipelines.config import CHANNELS, PipelineConfig
from pipelines.kernels import normalize
from pipelines.sources import open_split

from . import interrupts
from .spec import RunSpec

REAL_BATCHES = 8   # model mode: distinct real batches cycled through


class NotApplicable(Exception):
    """The measured pipeline has no such stage (or this machine cannot run it)."""


class endless:
    """The pipeline's batches (or what `one_epoch()` yields) epoch after epoch, calling
    `set_epoch` before each; `epoch` is the epoch of the last batch handed out, so a timer can
    tell the steps that restarted an epoch (a new iterator: workers, shuffle, first batch). Each
    epoch's iterator starts, up to its first batch, with Ctrl-C held back (`interrupts.deferred`):
    a stop never leaves one half built."""

    def __init__(self, pipeline: pipelines.Pipeline, one_epoch: Callable[[], Iterator] | None = None):
        self.pipeline, self.one_epoch = pipeline, one_epoch or pipeline.__iter__
        self.epoch, self.current, self.count = -1, None, 0

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            try:
                if self.current is None:
                    with interrupts.deferred():
                        self.epoch += 1
                        self.pipeline.set_epoch(self.epoch)
                        self.current, self.count = iter(self.one_epoch()), 0
                        batch = next(self.current)
                else:
                    batch = next(self.current)
            except StopIteration:
                if self.count == 0:
                    raise ValueError("the pipeline yields no batch: batch_size is larger than the samples "
                                     "with last_batch='drop'") from None
                self.current = None
                continue
            self.count += 1
            return batch


def real_batches(config: PipelineConfig, device: torch.device, count: int = REAL_BATCHES):
    """`count` batches of the split's first images (repeated if the split is smaller), normalized as
    every pipeline's batches are (contract dtype and memory format), on the device, round and round
    (model-only mode): real pixels, whose arithmetic and power draw are those of e2e's batches."""
    if config.photos:   # photographs: eval's centre crops, as `dataloader` makes them
        eval_config = config.replace(augment=False, shuffle=False, last_batch="partial", num_workers=0)
        with pipelines.build("dataloader", eval_config) as loader:
            made = [batch for _, batch in zip(range(count), itertools.cycle(loader))]
        images, labels = torch.cat([b[0] for b in made]).to(device), torch.cat([b[1] for b in made]).to(device)
        index = torch.arange(count * config.batch_size, device=device) % len(labels)
        images, labels = images[index], labels[index]
    else:
        data = open_split(config.replace(augment=False))
        index = np.arange(count * config.batch_size) % len(data.labels)
        images = normalize(torch.from_numpy(data.images[index]).to(device), config)
        labels = torch.from_numpy(data.labels[index]).to(device)
    batches = list(zip(images.split(config.batch_size), labels.split(config.batch_size)))
    yield from itertools.cycle(batches)


def stage_workload(spec: RunSpec, pipeline: pipelines.Pipeline, device: torch.device):
    """(batches, step, facts) that run one stage of `pipeline` alone; see the module docstring."""
    stages = pipeline.stages()
    payload = stages.payload
    facts = {"copy": stages.copy, "batch_bytes": sum(t.nbytes for t in payload)}
    n = len(pipeline.batches()[0])
    fixed = itertools.repeat((None, range(n)))   # time_window counts len(labels) images per step
    name = spec.stage
    if name == "host":
        if stages.host is None:
            raise NotApplicable(f"{spec.pipeline}: no host-side work per step")
        return endless(pipeline, stages.host), lambda x, y: None, facts
    if name == "device":   # one call may make several batches (a pipeline's round of launches)
        per_call = itertools.repeat((None, range(stages.device_images or n)))
        return per_call, lambda x, y: stages.device(), facts
    if device.type != "cuda" or not payload:
        raise NotApplicable(f"{spec.pipeline}: no host-to-device copy per step" if device.type == "cuda"
                            else "no CUDA device: nothing is copied or pinned")
    if name == "pin":
        if not stages.pins:
            raise NotApplicable(f"{spec.pipeline}: does not pin each batch")
        return fixed, lambda x, y: [t.pin_memory() for t in payload], facts
    if name == "h2d-pageable":
        pageable = [torch.empty(t.shape, dtype=t.dtype).copy_(t) for t in payload]
        return fixed, lambda x, y: [t.to(device) for t in pageable], facts
    pinned = [t.pin_memory() for t in payload]
    return fixed, lambda x, y: [t.to(device, non_blocking=True) for t in pinned], facts


def copy_workload(spec: RunSpec, device: torch.device):
    """(batches, step, facts) that copy one batch of `spec.payload` to the device, back to back."""
    if device.type != "cuda":
        raise NotApplicable("no CUDA device: nothing is copied")
    c = spec.config
    shape = (c.batch_size, CHANNELS, c.image_size, c.image_size)
    host = torch.randint(0, 256, shape, dtype=torch.uint8).to(getattr(torch, spec.payload))   # not zeros
    pinned = spec.stage == "h2d-pinned"
    if pinned:
        host = host.pin_memory()
    target = torch.empty(shape, dtype=host.dtype, device=device)
    facts = {"copy": "pinned" if pinned else "pageable", "batch_bytes": host.nbytes}
    return itertools.repeat((None, range(c.batch_size))), lambda x, y: target.copy_(host, non_blocking=pinned), facts
