"""The harness's settings, declared once, as `pipelines.options.Option` declares a pipeline's knobs.

A `Setting` is one quantity a measurement is made at (a batch size, the timed steps, the loss reads,
the CPU budget, ...): its name, which is its name in every layer (the results column, the `Sweep`'s
attribute, the `RunSpec` or `PipelineConfig` field where it is one, the report's name for it), its
flag (`--name-with-dashes` unless it says otherwise; a few keep their older spellings, `--steps`,
`--epochs`, `--busy-ms`, so existing commands run, and a `--config` plan's keys are the flags'), help line, argparse type and default (None:
the device's default, `devices`, filled in by `bench.running.plan`), the parser group it is listed in, and
where else it appears. Everything else is generated from `SETTINGS`: `pipebench compare`'s and
`sweep`'s flags for them (`bench.cli.parser`), the `Sweep` a grid's options are read into once
(`sweep`), the results columns (`results.config_columns`, `columns`), the values a results row
records (`value`), which of them make a shared process's cell (`plan.shared`, `cell`), and the
report's cell key (`report.analysis.key`, `report_key`) and pipeline variant labels
(`report.analysis.variant_options`, `variants`).

Adding a setting is one `Setting` in `SETTINGS` and the code that reads it: its value reaches every
configuration as given (`value(spec, name)`: a `RunSpec` or `PipelineConfig` field of that name
where there is one, else `RunSpec.more`), its row records it, its flag is listed. Options of a whole
run rather than of its measurements (--out, --timeout, --device, --isolate, the data's folders) are
no settings: the parser writes them by hand.

The argparse types (`bench.values`) refuse a bad value in one line naming it, with or without torch.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable

import pipelines
from pipelines.config import DTYPES, IMAGE_SIZE, LAST_BATCH, MAX_IMAGE_SIZE, MAXIMUM, PipelineConfig

from ..measuring.spec import BUSY_MS, COPIES, MODES, PAYLOADS, STAGES
from ..measuring.training import STEPS
from ..values import Choices, Integers, Milliseconds, Models, positive

MAX_PROCESSES = 1000   # --processes: far above any real use (a typo is one line, not minutes of planning)
MAX_RANKS = 64   # --ranks: GPUs of one host
MAX_BUSY_MS = 1000.0   # --busy-ms: a second of GPU work per batch is already no training step
MAX_STEPS = 10_000_000   # --steps, --warmup: ten million steps a window is days of any model (a typo, refused before anything runs)
MAX_WINDOW_S = 3600.0    # --min-window-s: an hour a window (1e9 seconds started, and failed on TiB arrays)


MEASURE = "what to measure"
SETTING = "the setting (lists: every combination runs)"
TIMING = "timing"
GPUS = "processes and GPUs"
GROUPS = (MEASURE, SETTING, TIMING, GPUS)   # the parser's groups of settings, in its order


@dataclass(frozen=True)
class Setting:
    """One setting of a measurement (module docstring).

    `name`: its one name (results column, `Sweep` attribute, field). `flag`: "" for `--name` with
    dashes, None for a column with no flag of its own (set by the data's flags, the plan or the
    pipeline). `help` may name `{CPU_LARGE}`, `{MODEL_BLOCK}` ... and a setting's `devices` by its
    name (`{batch_size[cuda][0]}`), filled in by the parser. `type`:
    argparse's (a list type for a listed setting); `switch`: --x / --no-x instead (None where neither
    is given). `default`: argparse's (a callable: called when the parser is built), given the `Sweep`
    as is (a list as a tuple); None where `devices` ({"cuda": ..., "cpu": ...}) or the plan sets it.
    `column`: a results column. `cell`: configurations sharing a process (`plan.shared`) share its value. `key`: its place in the
    report's cell key (`report.analysis.key`; 0: not in it). `variant`: two rows of one pipeline that
    differ in it are two variants, named by it in the report. `expands`: the plan makes
    configurations from it and no row holds it as given (the --processes count, the --ranks)."""

    name: str
    help: str = ""
    group: str = SETTING
    flag: str | None = ""
    type: Callable | None = None
    switch: bool = False
    choices: tuple = ()
    default: Any = None
    devices: dict = field(default_factory=dict)
    column: bool = True
    cell: bool = False
    key: int = 0
    variant: bool = False
    expands: bool = False

    @property
    def option(self) -> str:
        """Its flag as the command line spells it ('' where it has none)."""
        if self.flag is None:
            return ""
        return self.flag or "--" + self.name.replace("_", "-")

    def initial(self):
        """Its value where its flag is not given (`default`, called where it is a callable)."""
        return self.default() if callable(self.default) else self.default

    def on(self, device: str):
        """Its default on `device` ("cuda" or "cpu"): `devices`' where it has one, else `default`."""
        return self.devices.get(device, self.default)


SETTINGS: list[Setting] = [   # in the results' column order; settings that are no column where they are listed
    Setting("pipeline", "comma-separated, from {PIPELINES} (default: all)", MEASURE, flag="--pipelines",
            type=Choices(pipelines.names), default=pipelines.names, key=4),
    Setting("mode", "comma-separated, from loader (the pipeline alone, at each --busy-ms level), model (the "
            "training step on one batch), e2e (both), train (--epochs epochs, then test accuracy), stage "
            "(each stage of a pipeline alone), copy (the bus alone) (default: loader,model,e2e,stage,copy "
            "on CUDA, loader,model,e2e on CPU)", MEASURE, flag="--modes", type=Choices(MODES),
            devices={"cuda": ("loader", "model", "e2e", "stage", "copy"), "cpu": ("loader", "model", "e2e")}, key=1),
    Setting("stage", f"stage mode: which of {','.join(STAGES)} (default: all)", MEASURE, flag="--stages",
            type=Choices(STAGES), default=STAGES, key=2),
    Setting("copies", "copy mode: from pinned and/or pageable memory (default: both)", MEASURE,
            type=Choices(COPIES), default=COPIES, column=False, expands=True),
    Setting("model", "models for model-only, e2e and train: resnet18, resnet9, resnet9-w<F> (width x F, the "
            "compute knob), vit-s4, vit-b4 (ViTs on 4x4 patches of 32-px images), torchvision:<name> (e.g. "
            "torchvision:resnet50), timm:<name>, <module>:<callable> or <file.py>:<callable> returning an "
            "nn.Module with 10 outputs (default: resnet18 on CUDA, resnet9-w0.25 on CPU; on a CPU above 32 px, "
            "{CPU_LARGE[model]})", MEASURE, flag="--models", type=Models(), cell=True, key=5),
    Setting("image_size", "list; px per side, multiples of 32: the set upscaled (default: 32)",
            type=Integers(IMAGE_SIZE, MAX_IMAGE_SIZE, IMAGE_SIZE), default=(IMAGE_SIZE,), key=8),
    Setting("batch_size", "list; images per batch (default: {batch_size[cuda][0]} on CUDA, {batch_size[cpu][0]} "
            "on CPU, {CPU_LARGE[batch_size]} on a CPU above 32 px)", type=Integers(1, MAXIMUM["batch_size"]),
            devices={"cuda": (512,), "cpu": (64,)}, key=9),
    Setting("cpus", "list; CPU cores per GPU: each configuration (its workers and threads too) runs on that "
            "many cores, and the worker count follows (cores - 1, at least 1) unless --workers is given "
            "(default: every core this process may use; under torchrun, an equal share per rank; with "
            "--ranks, an equal share for the most ranks listed, the same at every rank count)", type=Integers(),
            cell=True, key=11),
    Setting("workers", "list; DataLoader workers / prefetch threads / parallel DALI sources (default: cores - 1)",
            type=Integers(), column=False, expands=True),
    Setting("dtype", "list; batch dtype and autocast (default: bfloat16 on CUDA, float32 on CPU)",
            type=Choices(DTYPES), devices={"cuda": ("bfloat16",), "cpu": ("float32",)}, key=10),
    Setting("channels_last", "channels_last batches and model (default: on for CUDA)", switch=True,
            devices={"cuda": True, "cpu": False}, variant=True),
    Setting("augment", flag=None, variant=True),
    Setting("split", flag=None),
    Setting("last_batch", "drop = every timed step has a full batch; partial = each epoch's last, smaller batch "
            "too (default: %(default)s)", choices=LAST_BATCH, default=PipelineConfig.last_batch),
    Setting("max_samples", "use only the first N samples of the split (default: all on CUDA; {CPU_SAMPLES:,} on a "
            "CPU, so an epoch lasts seconds)", type=positive(int)),
    Setting("seed", "list; shuffle / augmentation seed (default: 0)", type=Integers(), default=(0,)),
    Setting("world_size", flag=None),
    Setting("rank", flag=None),
    Setting("parallel", "model and e2e over several GPUs in one process: dp = torch.nn.DataParallel over "
            "every visible GPU, fed batch-size x GPUs. For DistributedDataParallel launch the same command under "
            "torchrun (--nproc-per-node N -m bench.cli ...) instead: each process takes one GPU and a 1/N shard "
            "of every epoch (default: none)", GPUS, choices=("none", "dp"), default="none"),
    Setting("step", "list; the training step of model-only and e2e: eager (as written), graph (the whole "
            "step captured in one CUDA graph and replayed), compile (torch.compile, then the same capture); every "
            "kind runs model-only and e2e. graph / compile need CUDA (skipped rows elsewhere), last-batch drop, no "
            "--parallel dp, no float16 (default: eager,graph on one CUDA GPU; eager,compile under torchrun and with "
            "--ranks on several GPUs; eager on a CPU and with --parallel dp)", MEASURE, type=Choices(STEPS),
            cell=True, key=6),
    Setting("sync_every", "list; model-only and e2e: read the loss on the host every N steps (loss.item(), as a "
            "loop that logs does; it drains the GPU's queue each time), 0 never; each value its own "
            "configurations (default: 0)", MEASURE, type=Integers(0), default=(0,), cell=True, key=7),
    Setting("busy_levels", "loader mode: the headspace levels, ms per batch the GPU is kept busy by a synthetic "
            "training step after each batch (bf16 matrix products and memory copies on every SM, checked every "
            "window; 0: an idle GPU); the report reads each pipeline's loader ceiling where it stops keeping up "
            "with that step (default: {BUSY_LEVELS} on CUDA, 0 on CPU)", MEASURE, flag="--busy-ms", type=Milliseconds(MAX_BUSY_MS),
            devices={"cuda": BUSY_MS, "cpu": (0.0,)}),
    Setting("payload", "copy mode: images copied as uint8 and/or float32 (default: both)", MEASURE,
            flag="--payloads", type=Choices(PAYLOADS), default=PAYLOADS, key=3),
    Setting("train_epochs", "train mode: epochs trained before the test accuracy (default: %(default)s)", MEASURE,
            flag="--epochs", type=positive(int), default=10),
    Setting("source", flag=None),
    Setting("data_seed", flag=None),
    Setting("requested_steps", "timed steps per window (default: sized by --min-window-s; {CPU_LARGE[steps]} on a "
            "CPU above 32 px)", TIMING, flag="--steps", type=positive(int, maximum=MAX_STEPS), cell=True),
    Setting("min_window_s", "without --steps: each window lasts at least this many seconds, sized by an untimed "
            "run first: whole epochs for e2e and stages (model-only: blocks of {MODEL_BLOCK} steps), loader "
            "windows too unless an epoch lasts over {LONG_EPOCH} windows (default: 2 on CUDA, 0.5 on CPU)", TIMING,
            type=positive(float, maximum=MAX_WINDOW_S), devices={"cuda": 2.0, "cpu": 0.5}, cell=True),
    Setting("warmup", "untimed steps first (default: 10 on CUDA, 2 on CPU, {CPU_LARGE[warmup]} on a CPU above "
            "32 px without --steps or --min-window-s)", TIMING, type=positive(int, 0, MAX_STEPS), devices={"cuda": 10, "cpu": 2},
            cell=True),
    Setting("repeats", "timed windows per process and configuration (loader: per headspace level) "
            "(default: 3 on CUDA, 2 on CPU)", TIMING, type=positive(int), devices={"cuda": 3, "cpu": 2},
            column=False, cell=True),
    Setting("processes", "independent processes per configuration, run in rounds (A B A B), so a range between "
            "processes shows how much a result moves; the report names no verdict, tie or fastest pipeline from "
            "fewer than {MIN_PROCESSES} of {MIN_WINDOWS} windows each (default: {processes[cuda]} on CUDA, "
            "{processes[cpu]} on CPU)", TIMING, type=positive(int, maximum=MAX_PROCESSES),
            devices={"cuda": 3, "cpu": 3}, column=False, expands=True),
    Setting("ranks", "list; GPUs of this host each configuration runs on at once, one process per GPU (as "
            "torchrun --nproc-per-node N would start them; DDP for model and e2e), each rank with its 1/N shard, "
            "its own --cpus cores and the --timeout deadline; 1 = one GPU. On a CPU the ranks join over gloo. "
            "Under torchrun the job's ranks instead (default: 1)", GPUS, type=Integers(1, MAX_RANKS),
            column=False, expands=True),
]


def declared() -> dict[str, Setting]:
    """name -> Setting, in `SETTINGS`' order."""
    return {s.name: s for s in SETTINGS}


def columns() -> list[str]:
    """The settings' results columns, in order (`bench.results.config_columns`)."""
    return [s.name for s in SETTINGS if s.column]


def cell() -> list[str]:
    """The settings whose values configurations sharing a process have in common (`plan.shared`)."""
    return [s.name for s in SETTINGS if s.cell]


def report_key() -> list[str]:
    """The settings of the report's cell key (`report.analysis.key`), in its order."""
    return [s.name for s in sorted((s for s in SETTINGS if s.key), key=lambda s: s.key)]


def variants() -> list[str]:
    """The settings that name a pipeline's variants in the report (`report.analysis.variant_options`)."""
    return [s.name for s in SETTINGS if s.variant]


def carried() -> list[Setting]:
    """The settings a configuration carries as given (`RunSpec.more`): those with a flag that no
    field of `RunSpec` or `PipelineConfig` holds and the plan does not expand."""
    from ..measuring.spec import RunSpec
    fields = set(RunSpec.__dataclass_fields__) | set(PipelineConfig.__dataclass_fields__)
    return [s for s in SETTINGS if s.name not in fields and not s.expands and s.flag is not None]


@dataclass(frozen=True)
class Sweep:
    """One grid's options, read once from the parsed command line (`sweep`): every declared setting
    by its name (`sweep.batch_size`; a list as a tuple, None where not given: the device's default),
    the pipelines' knobs (`knobs`), and what a grid needs of the run: the data, whether
    configurations share a process, the deadline of a model's check."""

    values: tuple = ()          # (name, value) per declared setting
    knobs: tuple = ()           # (name, value) per pipeline knob (`plan.knobs`)
    data_root: str = ""
    source: str = "auto"
    data_seed: int = 0
    cache_root: str | None = None
    share_process: bool = False
    timeout: float | None = None

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("values", "knobs"):
            raise AttributeError(name)
        values = dict(self.values)
        if name not in values:
            raise AttributeError(f"Sweep has no setting {name!r}")
        return values[name]

    def knob(self, name: str):
        return dict(self.knobs)[name]


def _frozen(value):
    return tuple(value) if isinstance(value, list) else value


def sweep(options: argparse.Namespace, knobs: list[str]) -> Sweep:
    """A grid's parsed options (compare's or sweep's, or one --config grid's) as a `Sweep`."""
    return Sweep(values=tuple((s.name, _frozen(getattr(options, s.name, s.initial()))) for s in SETTINGS
                              if s.flag is not None),
                 knobs=tuple((name, _frozen(getattr(options, name))) for name in knobs),
                 data_root=options.data_root, source=options.source, data_seed=options.data_seed,
                 cache_root=options.cache_root, share_process=getattr(options, "share_process", False),
                 timeout=getattr(options, "timeout", None))


def value(spec, name: str):
    """The value of setting `name` in configuration `spec` (a `RunSpec`): its field of that name,
    else its config's, else what it carries (`RunSpec.more`; None where it carries none)."""
    if name in type(spec).__dataclass_fields__:
        return getattr(spec, name)
    if name in type(spec.config).__dataclass_fields__:
        return getattr(spec.config, name)
    return dict(spec.more).get(name)
