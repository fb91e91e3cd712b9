"""The one configuration every pipeline takes, and the constants all of them share.

`PipelineConfig` is a frozen dataclass validated at construction: a bad value raises
`ValueError` naming the field and the value. Its fields are what every pipeline reads; a pipeline's
own knobs are declared with the pipeline (`pipelines.options`) and given and read like fields; the
registry says which knobs there are (`use_knobs`). Command-line parsing lives in `bench.cli`;
nothing here reads `sys.argv`.

The augmentation semantics are fixed here for every pipeline: train = random S x S crop of
the image zero-padded by S/8 pixels on each side (S = image_size; at 32 px: 4 pixels, offsets
uniform in 0..8 per axis) plus a horizontal flip with p = 0.5; eval = none. Normalization uses the
CIFAR-10 channel mean/std.

`image_size` (the bytes-per-image knob): 32 is CIFAR-10 itself; 64, 128, 224, ... (multiples of
32) are the 32-px set upscaled by an integer factor (nearest neighbour) when loaded, so every
pipeline, the JPEG copy and the model see S x S images of the same content.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Callable

IMAGE_SIZE = 32          # CIFAR-10 as stored; PipelineConfig.image_size may upscale it
CHANNELS = 3
NUM_CLASSES = 10
PAD = 4                  # crop padding at 32 px; image_size // 8 in general
MAX_IMAGE_SIZE = 512
FLIP_P = 0.5
# Per-channel statistics of the CIFAR-10 training set on the [0, 1] scale.
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)

SOURCES = ("auto", "cifar10", "synthetic")   # or IMAGEFOLDER + a path
IMAGEFOLDER = "imagefolder:"
ENCODINGS = ("raw", "jpeg")
SPLITS = ("train", "test")
DTYPES = ("float32", "bfloat16")
LAST_BATCH = ("partial", "drop")
WORKER_START_METHODS = ("forkserver", "spawn", "fork")
# Upper bounds, far above any real use, so that a typo (a batch of 10^30, a prefetch depth of 10^9)
# is a one-line error instead of allocating until the OOM killer ends the process.
MAXIMUM = {"batch_size": 65536, "num_workers": 256, "jpeg_quality": 100}
MAX_SAMPLES = 10_000_000


def default_data_root() -> str:
    """One folder per user, whatever the working folder: `$PIPEBENCH_DATA` if set, else
    `$XDG_CACHE_HOME/pipebench`, else `~/.cache/pipebench`."""
    cache = os.environ.get("XDG_CACHE_HOME")
    if not cache or not os.path.isabs(cache):   # the XDG spec ignores a relative path
        cache = os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("PIPEBENCH_DATA") or os.path.join(cache, "pipebench")


def default_cache_root() -> str | None:
    """`$PIPEBENCH_CACHE` if set, else None: copies of the data (JPEG) are written beside it."""
    return os.environ.get("PIPEBENCH_CACHE") or None


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, which `--cpus` sets), not the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_num_workers() -> int:
    """One fewer than the usable CPU cores (the main process needs one), at least 1, at most 16."""
    return max(1, min(16, usable_cores() - 1))


@dataclass(frozen=True, init=False)
class PipelineConfig:
    """What to load, how to batch it and where to put it.

    Last-batch policy, worked on 7 samples with batch_size 3:
      - ``"partial"``: batches of 3, 3, 1 -- every sample once, the last batch smaller;
      - ``"drop"``:    batches of 3, 3    -- every batch full, the 7th sample skipped this epoch
        (the default, as on the command line: a captured training step has one batch shape).

    The pipelines' own knobs (`pipelines.options`) are keywords too, e.g. `pin_memory` and
    `non_blocking`, which switch the `dataloader` pipeline for the classic ablation (`prefetch`
    always pins and copies asynchronously, `resident` never copies per step).
    `rank` / `world_size` shard every epoch's sample order (sample k goes to rank k % world_size,
    every rank the same count: see `epochs.shard_order` for the cut / padding); augmentation draws
    come from per-rank seeds derived from `seed`.
    """

    data_root: str = field(default_factory=default_data_root)
    cache_root: str | None = field(default_factory=default_cache_root)  # JPEG copies, a synthetic set to generate; None: beside the data
    source: str = "auto"          # auto: real CIFAR-10 under data_root if present, else synthetic;
                                  # imagefolder:PATH: your JPEGs, a folder per class (photos, ImageNet crops)
    data_seed: int = 0            # seed of the synthetic set
    encoding: str = "raw"         # raw uint8 pixels, or the cached JPEG copy (decoded per sample)
    jpeg_quality: int = 90
    split: str = "train"
    augment: bool = True
    image_size: int = IMAGE_SIZE  # 32, or a multiple of 32: the set upscaled (bytes-per-image knob)
    shuffle: bool = True
    batch_size: int = 512
    last_batch: str = "drop"      # drop: every batch full (one shape: captured steps); partial: each epoch's last too
    max_samples: int | None = None  # use only the first N samples of the split
    seed: int = 0                 # shuffling and augmentation; epoch e uses (seed, e) (+ rank for augmentation)
    device: str = "auto"          # auto: cuda if available, else cpu
    dtype: str = "float32"
    channels_last: bool = False
    num_workers: int = field(default_factory=default_num_workers)
    rank: int = 0
    world_size: int = 1
    # The pipelines' own knobs (`pipelines.options`), those set away from their defaults, as sorted
    # (name, value) pairs; read as attributes (`config.prefetch_depth`), given as keywords.
    options: tuple = ()

    def __init__(self, **values) -> None:
        """Every field and every registered pipeline knob by keyword; a knob's value is checked by
        its `Option` (`pipelines.options`), an unknown name is a ValueError naming the known ones."""
        known = {f.name for f in dataclasses.fields(self)}
        knobs = dict(values.pop("options", ()))
        knobs.update({name: values.pop(name) for name in list(values) if name not in known})
        declared = _declared()
        for f in dataclasses.fields(self):
            if f.name == "options":
                continue
            value = values[f.name] if f.name in values else (
                f.default if f.default is not dataclasses.MISSING else f.default_factory())
            object.__setattr__(self, f.name, value)
        for name, value in knobs.items():
            if name not in declared:
                raise ValueError(f"PipelineConfig has no option {name!r}: expected one of "
                                 f"{sorted((known | set(declared)) - {'options'})}")
            refusal = declared[name].refusal(value)
            if refusal:
                raise ValueError(refusal)
        object.__setattr__(self, "options", tuple(sorted((k, v) for k, v in knobs.items()
                                                         if v != declared[k].default)))
        self.__post_init__()

    def __getattr__(self, name: str):
        """A pipeline knob: its value here, else its declared default (only names that are no field)."""
        if name.startswith("__") or name == "options":
            raise AttributeError(name)
        declared = _declared()
        if name not in declared:
            raise AttributeError(f"PipelineConfig has no attribute or option {name!r}")
        return dict(self.options).get(name, declared[name].default)

    @classmethod
    def default(cls, name: str):
        """The default of field or knob `name` (a field's factory called now)."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if name in fields:
            f = fields[name]
            return f.default if f.default is not dataclasses.MISSING else f.default_factory()
        return _declared()[name].default

    def __post_init__(self) -> None:
        choices = {"source": SOURCES, "encoding": ENCODINGS, "split": SPLITS,
                   "dtype": DTYPES, "last_batch": LAST_BATCH}
        if isinstance(self.source, str) and self.source.startswith(IMAGEFOLDER) and len(self.source) > len(IMAGEFOLDER):
            choices.pop("source")
        for name, allowed in choices.items():
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"PipelineConfig.{name}={value!r}: expected one of {allowed}"
                                 + (" or 'imagefolder:PATH'" if name == "source" else ""))
        minimum = {"batch_size": 1, "num_workers": 0, "world_size": 1, "rank": 0, "jpeg_quality": 1, "seed": 0,
                   "data_seed": 0}
        for name, low in minimum.items():
            value, high = getattr(self, name), MAXIMUM.get(name)
            if (isinstance(value, bool) or not isinstance(value, int) or value < low
                    or high is not None and value > high):
                expected = f"an integer from {low} to {high}" if high is not None else f"an integer >= {low}"
                raise ValueError(f"PipelineConfig.{name}={value!r}: expected {expected}")
        if (isinstance(self.image_size, bool) or not isinstance(self.image_size, int)
                or self.image_size % IMAGE_SIZE or not IMAGE_SIZE <= self.image_size <= MAX_IMAGE_SIZE):
            raise ValueError(f"PipelineConfig.image_size={self.image_size!r}: expected a multiple of "
                             f"{IMAGE_SIZE} from {IMAGE_SIZE} to {MAX_IMAGE_SIZE}")
        if self.rank >= self.world_size:
            raise ValueError(f"PipelineConfig.rank={self.rank!r}: expected < world_size={self.world_size}")
        if self.max_samples is not None and (isinstance(self.max_samples, bool)
                                             or not isinstance(self.max_samples, int)
                                             or not 1 <= self.max_samples <= MAX_SAMPLES):
            raise ValueError(f"PipelineConfig.max_samples={self.max_samples!r}: expected None or an integer "
                             f"from 1 to {MAX_SAMPLES}")
        if not (self.device in ("auto", "cpu") or self.device.startswith("cuda")):
            raise ValueError(f"PipelineConfig.device={self.device!r}: expected 'auto', 'cpu', 'cuda' or 'cuda:N'")
        if self.cache_root is not None and (not isinstance(self.cache_root, str) or not self.cache_root):
            raise ValueError(f"PipelineConfig.cache_root={self.cache_root!r}: expected None or a non-empty path")
        for name in ("augment", "shuffle", "channels_last"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"PipelineConfig.{name}={getattr(self, name)!r}: expected True or False")

    @property
    def photo_folder(self) -> str | None:
        """PATH of an `imagefolder:PATH` source (a folder of photographs), else None."""
        return self.source[len(IMAGEFOLDER):] if self.source.startswith(IMAGEFOLDER) else None

    @property
    def photos(self) -> bool:
        """The source is a folder of photographs (`imagefolder:PATH`): ImageNet's crops, not CIFAR's."""
        return self.photo_folder is not None

    @property
    def pad(self) -> int:
        """Crop padding in pixels on each side: image_size / 8 (4 at 32 px)."""
        return self.image_size * PAD // IMAGE_SIZE

    def replace(self, **changes) -> "PipelineConfig":
        """A copy with some fields or knobs changed (validated again)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return PipelineConfig(**{**values, **dict(values.pop("options")), **changes})


# name -> Option of every registered pipeline's knobs: none until the registry hands its own over (`use_knobs`)
_declared: Callable[[], dict] = dict


def use_knobs(declared: Callable[[], dict]) -> None:
    """Where `PipelineConfig` finds the knobs (name -> `Option`, `pipelines.options`): the registry
    (`pipelines/__init__.py`) hands over its `declared_options` when it is imported, before any
    config can be made, so that this module, which the registry imports, imports nothing from it."""
    global _declared
    _declared = declared
