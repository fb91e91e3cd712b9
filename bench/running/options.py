"""The options of a run, as `pipebench compare` and `sweep` take them and `plan.sweep` reads them:
`run_options` adds them, in groups, to a parser (a flag per declared setting, `bench.results.settings`,
and per pipeline knob, `pipelines.options`, generated; the options of the whole run by hand), and
`add_data_options` the data options every command that reads the data shares. Here, beside the plan,
so what measures a run's configurations without the command line (`bench.studies.timeline`) reads
the same options as the sweep (issue 69: it built the command line's whole parser).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pipelines
from pipelines.config import IMAGEFOLDER, SOURCES, default_cache_root, default_data_root

from ..measuring import harness
from ..measuring.spec import BUSY_MS
from ..results import settings
from ..values import Device, Folder, Knob, PartOf, Source, positive
from . import plan, runner

LEASE_MINUTES = 30.0   # the device time a plan on a GPU may be predicted to take (a lease, a job's limit)
MAX_CONFIGURATIONS = 10_000   # --max-configurations: days of measuring at seconds each; a typo's millions, refused


def _add_knobs(p: argparse.ArgumentParser) -> None:
    """A flag per pipeline knob (`pipelines.options`), its help naming the pipelines that read it."""
    for name, option in plan.knobs().items():
        if not option.cli:
            continue
        readers = ", ".join(n for n in pipelines.names() if name in pipelines.reads(n))
        default = option.none if option.default is None else option.default
        text = f"{'list; ' if option.listed else ''}{readers}: {option.help} (default: {default})"
        if option.kind is bool:
            p.add_argument(option.flag, action="store_true", help=text)
        else:
            p.add_argument(option.flag, type=Knob(option), help=text,
                           default=[option.default] if option.listed else option.default)


def add_data_options(p: argparse.ArgumentParser) -> None:
    _add_data_root(p)
    _add_source(p)
    _add_data_more(p)


def _add_data_root(p) -> None:
    p.add_argument("--data-root", default=default_data_root(),
                   help="folder holding cifar-10-batches-py/ or the synthetic cache (default: %(default)s, "
                        "or $PIPEBENCH_DATA)")


def _add_source(p) -> None:
    p.add_argument("--source", type=Source(SOURCES, IMAGEFOLDER), default="auto",
                   help="auto = real CIFAR-10 under --data-root if present, else synthetic; imagefolder:PATH = "
                        "your JPEGs, a folder per class (or train/ and val/ so), read by the pipelines that cut "
                        "ImageNet's crops from photographs (the others: skipped rows) (default: auto)")


def _add_data_more(p) -> None:
    """The data's seed and the folder of its copies."""
    p.add_argument("--data-seed", type=int, default=0, help="seed of the synthetic set (default: 0)")
    p.add_argument("--cache-dir", dest="cache_root", default=default_cache_root(),
                   help="where the JPEG copies (and a synthetic set not under --data-root) are written, "
                        "under DIR/<source>/, so --data-root may be read-only (default: $PIPEBENCH_CACHE, "
                        "else beside the data)")


RUN_HELP = ("Measure each pipeline loader-only (at each headspace level), stage by stage and end-to-end, each "
            "model on real batches already on the device (model-only) and the bus alone (copies), for every combination of the "
            "listed image sizes, batch sizes, CPU budgets, worker counts, models and dtypes, each configuration "
            "in --processes independent processes; append one CSV row per window to OUT/results.csv, print a "
            "summary and the answer (which pipeline keeps each model fed), also written to OUT/ANSWER.md. "
            "Defaults adapt to the device: on CUDA bs 512, bf16, channels_last, resnet18, windows of 2 s; on CPU "
            "bs 64, float32, resnet9-w0.25, windows of 0.5 s.")


def _help_values() -> dict:
    """What the settings' help lines name (`bench.results.settings.Setting.help`)."""
    return dict(PIPELINES=",".join(pipelines.names()), CPU_LARGE=plan.CPU_LARGE, CPU_SAMPLES=plan.CPU_SAMPLES,
                BUSY_LEVELS=",".join(f"{b:g}" for b in BUSY_MS), MODEL_BLOCK=harness.MODEL_BLOCK,
                LONG_EPOCH=harness.LONG_EPOCH, MIN_PROCESSES=plan.MIN_PROCESSES, MIN_WINDOWS=plan.MIN_WINDOWS,
                **{s.name: s.devices for s in settings.SETTINGS if s.devices})


FIRST_RUN = "a first run (the options most runs give; the others below, in groups)"
FIRST_SETTINGS = ("pipeline", "model", "image_size", "cpus")   # in compare's and sweep's first group


def _add_settings(g, group: str | None = None, names: tuple[str, ...] = ()) -> None:
    """A flag per setting of `group` but those of the first group (`bench.results.settings.SETTINGS`), or
    per setting `names` names, in that order; each stored under the setting's name."""
    declared = settings.declared()
    chosen = [declared[n] for n in names] if names else [s for s in settings.SETTINGS if s.group == group
                                                         and s.flag is not None and s.name not in FIRST_SETTINGS]
    for s in chosen:
        text = s.help.format(**_help_values())
        if s.switch:
            g.add_argument(s.option, dest=s.name, action=argparse.BooleanOptionalAction, help=text)
            continue
        default, metavar = s.initial(), None if s.choices else s.option[2:].upper().replace("-", "_")
        g.add_argument(s.option, dest=s.name, type=s.type, choices=s.choices or None, help=text, metavar=metavar,
                       default=list(default) if isinstance(default, tuple) else default)


def add_device(g) -> None:
    g.add_argument("--device", type=Device(), default="auto", help="auto | cpu | cuda | cuda:N (default: auto)")


def run_options(p: argparse.ArgumentParser, description: str) -> argparse.ArgumentParser:
    """compare's and sweep's options, in groups: what a first run gives (the data, the pipelines, models,
    image sizes and cores, the device, the output folder), then the other settings
    (`bench.results.settings`), the pipelines' knobs, and the options of the whole run (deadline,
    processes, data)."""
    p.description = description
    p.usage = "%(prog)s [options]   (below, in groups)"
    g = p.add_argument_group(FIRST_RUN)
    _add_source(g)
    _add_data_root(g)
    _add_settings(g, names=FIRST_SETTINGS)
    add_device(g)
    g.add_argument("--out", type=Folder(), help="output folder (default: runs/<UTC time>-<device>)")
    _add_settings(p.add_argument_group(settings.MEASURE), settings.MEASURE)
    _add_settings(p.add_argument_group(settings.SETTING), settings.SETTING)
    _add_knobs(p.add_argument_group("the pipelines' knobs (lists: one variant of the pipelines that read them per "
                                    "value)"))
    g = p.add_argument_group(settings.TIMING)
    _add_settings(g, settings.TIMING)
    g.add_argument("--timeout", type=positive(float), default=runner.DEFAULT_TIMEOUT_S,
                   help="seconds one configuration may take (its own process; on expiry its stacks are saved "
                        "under OUT/timeouts/, it is killed with its workers and a `timeout` row written) "
                        "(default: %(default)g)")
    _gpu_options(p.add_argument_group(settings.GPUS))
    _add_data_more(p.add_argument_group("data"))
    return p


def _gpu_options(g) -> None:
    """compare's and sweep's group `settings.GPUS`: --isolate, --share-process and its settings."""
    g.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                   help="each configuration (or, with --share-process, each cell's) in its own process with the "
                        "--timeout deadline; --no-isolate runs "
                        "them in this one (starts faster, no deadline; always so under torchrun; --ranks N > 1 always "
                        "in processes of their own) (default: on)")
    g.add_argument("--share-process", action="store_true",
                   help="run the model-only and e2e configurations of one model, step kind, loss reads and CPU "
                        "budget in one process per round (per rank with --ranks or torchrun), sharing its trainer "
                        "(started and compiled once), and the copy configurations of one setting likewise; each "
                        "pipeline still built, warmed up and timed on its own, the one before it released, in the "
                        "order of a Williams design (each right after every other equally often once --processes "
                        "reaches the cell's configurations, twice them for an odd count; fewer: a warning); rows say "
                        "the order (`slot`) (default: each configuration in a process of its own)")
    _add_settings(g, settings.GPUS)
    g.add_argument("--max-configurations", type=positive(int), default=MAX_CONFIGURATIONS,
                   help="the most configuration processes (configurations x --processes) a run may list; "
                        "more are refused before anything runs, the count said (default: %(default)s)")
    g.add_argument("--estimate", action="store_true",
                   help="print the plan's predicted device time (per cell and in all, from the rows of earlier "
                        "runs under the project's results/ and OUT: bench/running/estimate.py) and exit without "
                        "running it; also where the plan's GPU and cores are not (--device cuda: priced from rows "
                        "of any GPU)")
    g.add_argument("--lease-minutes", type=positive(float), default=LEASE_MINUTES,
                   help="on a GPU the plan's device time is predicted first, and a plan predicted to take longer "
                        "than this is refused before anything runs: split it, or pass --past-lease "
                        "(default: %(default)g)")
    g.add_argument("--past-lease", action="store_true",
                   help="run a plan predicted to take longer than --lease-minutes anyway")
    g.add_argument("--part", type=PartOf(), metavar="K/N",
                   help="run part K of N of the plan: its settings and models cut into N parts of about equal "
                        "size, each holding model-only and every pipeline of its cells (and a setting's loader "
                        "runs with its first model), so each part's verdicts are its own; each part in an --out "
                        "of its own (default: the whole plan)")
