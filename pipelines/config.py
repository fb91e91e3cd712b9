"""The one configuration every pipeline takes, and the constants all of them share.

`PipelineConfig` is a frozen dataclass validated at construction: a bad value raises
`ValueError` naming the field and the value. Command-line parsing lives in `bench.cli`;
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

IMAGE_SIZE = 32          # CIFAR-10 as stored; PipelineConfig.image_size may upscale it
CHANNELS = 3
NUM_CLASSES = 10
PAD = 4                  # crop padding at 32 px; image_size // 8 in general
MAX_IMAGE_SIZE = 512
ROUND_BYTES = 32 * 2**20   # prefetch, resident: a round of launches makes at most this many bytes of uint8 images
FLIP_P = 0.5
# Per-channel statistics of the CIFAR-10 training set on the [0, 1] scale.
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)

SOURCES = ("auto", "cifar10", "synthetic")
ENCODINGS = ("raw", "jpeg")
SPLITS = ("train", "test")
DTYPES = ("float32", "bfloat16")
LAST_BATCH = ("partial", "drop")
DALI_READERS = ("external", "parallel", "file")
DALI_DECODERS = ("mixed", "cpu")
PREFETCH_AUGMENT = ("device", "host")
WORKER_START_METHODS = ("forkserver", "spawn", "fork")
# Upper bounds, far above any real use, so that a typo (a batch of 10^30, a prefetch depth of 10^9)
# is a one-line error instead of allocating until the OOM killer ends the process.
MAXIMUM = {"batch_size": 65536, "prefetch_depth": 64, "batches_per_launch": 64, "num_workers": 256, "jpeg_quality": 100,
           "dali_threads": 256, "dali_queue_depth": 64, "dali_batch_multiple": 64}
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


@dataclass(frozen=True)
class PipelineConfig:
    """What to load, how to batch it and where to put it.

    Last-batch policy, worked on 7 samples with batch_size 3:
      - ``"partial"``: batches of 3, 3, 1 -- every sample once, the last batch smaller;
      - ``"drop"``:    batches of 3, 3    -- every batch full, the 7th sample skipped this epoch
        (the default, as on the command line: a captured training step has one batch shape).

    `pin_memory` and `non_blocking` switch the `dataloader` pipeline for the classic ablation;
    `prefetch` always pins and copies asynchronously, `resident` never copies per step.
    `rank` / `world_size` shard every epoch's sample order (sample k goes to rank k % world_size,
    every rank the same count: see `epochs.shard_order` for the cut / padding); augmentation draws
    come from per-rank seeds derived from `seed`.
    """

    data_root: str = field(default_factory=default_data_root)
    cache_root: str | None = field(default_factory=default_cache_root)  # JPEG copies, a synthetic set to generate; None: beside the data
    source: str = "auto"          # auto: real CIFAR-10 under data_root if present, else synthetic
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
    pin_memory: bool = False
    non_blocking: bool = False
    prefetch_depth: int = 2       # batches kept in flight ahead of the consumer
    batches_per_launch: int = 8   # prefetch, resident: at most this many batches per round of launches (`round_batches`)
    prefetch_augment: str = "device"  # prefetch: crop + flip on the GPU (the host only gathers rows) or on the host
    worker_start: str = "forkserver"  # how DataLoader workers start (dataloader, timm): see WORKER_START_METHODS
    # NVIDIA DALI (`dali`, `dali-raw`); defaults from the tuning runs in results/2026-11-21-h100-dali
    dali_reader: str = "external"     # external / parallel: the epoch plan through external_source,
                                      # in DALI's thread / in num_workers processes; file: fn.readers.file
    dali_threads: int | None = None   # DALI CPU threads; None: num_workers (at least 1), so they follow the budget
    dali_queue_depth: int = 4         # DALI prefetch queue depth (DALI batches)
    dali_hw_decoder_load: float = 0.0   # share of JPEG decoding sent to the hardware decoder
    dali_decoder: str = "mixed"       # mixed: nvJPEG (Huffman on DALI's threads, the rest on the GPU); cpu: libjpeg-turbo
    dali_batch_multiple: int = 4      # external / parallel: DALI batch = this many batches (its fixed cost shared)
    rank: int = 0
    world_size: int = 1

    @property
    def round_batches(self) -> int:
        """Batches made by one round of launches (prefetch, resident: one copy, one crop + normalize
        kernel): `batches_per_launch`, fewer where their uint8 images would pass ROUND_BYTES (at
        least one batch) -- rounds share launch costs that matter for small images only."""
        batch_bytes = self.batch_size * self.image_size ** 2 * CHANNELS
        return max(1, min(self.batches_per_launch, ROUND_BYTES // batch_bytes))

    def __post_init__(self) -> None:
        choices = {"source": SOURCES, "encoding": ENCODINGS, "split": SPLITS,
                   "dtype": DTYPES, "last_batch": LAST_BATCH, "dali_reader": DALI_READERS,
                   "dali_decoder": DALI_DECODERS, "prefetch_augment": PREFETCH_AUGMENT,
                   "worker_start": WORKER_START_METHODS}
        for name, allowed in choices.items():
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"PipelineConfig.{name}={value!r}: expected one of {allowed}")
        minimum = {"batch_size": 1, "num_workers": 0, "prefetch_depth": 1, "batches_per_launch": 1, "world_size": 1,
                   "rank": 0, "jpeg_quality": 1, "seed": 0, "data_seed": 0,
                   "dali_threads": 1, "dali_queue_depth": 1, "dali_batch_multiple": 1}
        for name, low in minimum.items():
            value, high = getattr(self, name), MAXIMUM.get(name)
            if value is None and name == "dali_threads":   # None: DALI's threads follow num_workers
                continue
            if (isinstance(value, bool) or not isinstance(value, int) or value < low
                    or high is not None and value > high):
                expected = f"an integer from {low} to {high}" if high is not None else f"an integer >= {low}"
                raise ValueError(f"PipelineConfig.{name}={value!r}: expected {expected}")
        if (isinstance(self.image_size, bool) or not isinstance(self.image_size, int)
                or self.image_size % IMAGE_SIZE or not IMAGE_SIZE <= self.image_size <= MAX_IMAGE_SIZE):
            raise ValueError(f"PipelineConfig.image_size={self.image_size!r}: expected a multiple of "
                             f"{IMAGE_SIZE} from {IMAGE_SIZE} to {MAX_IMAGE_SIZE}")
        load = self.dali_hw_decoder_load   # nan and inf fail the range test
        if isinstance(load, bool) or not isinstance(load, (int, float)) or not 0.0 <= load <= 1.0:
            raise ValueError(f"PipelineConfig.dali_hw_decoder_load={load!r}: expected 0..1")
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
        for name in ("augment", "shuffle", "channels_last", "pin_memory", "non_blocking"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"PipelineConfig.{name}={getattr(self, name)!r}: expected True or False")

    @property
    def pad(self) -> int:
        """Crop padding in pixels on each side: image_size / 8 (4 at 32 px)."""
        return self.image_size * PAD // IMAGE_SIZE

    def replace(self, **changes) -> "PipelineConfig":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)
