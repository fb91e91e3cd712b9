"""Which configurations a run measures, and in which order.

`grid(sweep, device, world)` turns one set of options (the command line's, or one grid of a
`--config` plan, read once into a `settings.Sweep`: `sweep`) into RunSpecs: every combination of the listed image sizes, dtypes, batch sizes,
CPU budgets and worker counts; per such setting the copy configurations, the model-only ones (per
model and step kind), and per pipeline variant its loader-only, stage, e2e and train
configurations. The knobs a pipeline declares (`pipelines.options`) make variants of the
pipelines that read them alone (`--prefetch-augment device,host` measures two `prefetch` variants
and one of everything else), and rows of the others keep the knob's default. A CPU budget sets the default worker count (budget - 1, at least 1), which DALI's
threads follow.

What is not given takes the device's defaults; on a CPU above 32 px (photographs at 224 px) smaller
ones, a model, batch and fixed windows that answer in minutes (`CPU_LARGE`).

`size(sweep, device)` counts the configuration processes one set of options lists without building
them, so a plan of millions is refused (`--max-configurations`) before anything is built.

`rounds(grids)` runs each grid's configurations in that grid's number of independent processes, in
rounds (A B C ... A B C ...): a machine that drifts shows as a difference between the processes of one
configuration, not as a difference between pipelines. Within a round the configurations of one
setting and budget stay together, model-only first, then per pipeline its loader-only, stage, e2e
and train configurations next to each other.

`shared(specs)` says which configurations run in one process: each alone, except, with
`--share-process`, the model-only and e2e configurations of one cell (the settings declared `cell`,
`bench.results.settings`: model, step kind, loss reads, CPU budget, timing; the setting, GPUs) and round, and the copy configurations of one setting, which run in one
process (one per rank under DDP) at the place of the first, sharing its
trainer (`bench.measuring.harness.Shared`: startup and compilation paid once), in the order of row r of a Williams
design in round r (`williams`): a Latin square balanced for first-order carry-over, so with as many
processes as members each runs first once, and with as many processes as the design has rows (the
members for an even count, twice them for an odd one) each runs right after every other equally
often, so what one member leaves the next that releasing its memory does not take back (a GPU it
heated, a power limit it drove the clocks down to) weighs on none more than on the others. With
fewer processes the order is the design's first rows and the carry-over is not balanced:
`carry_over_note` says so, and the run prints it.
"""
from __future__ import annotations

import dataclasses
import math

import torch

import pipelines
from pipelines.config import IMAGE_SIZE, PipelineConfig
from pipelines.options import LINE_LIMIT, clip, echo

from ..measuring import distributed, machine
from ..measuring.models import CHECK_TIMEOUT_S, check_model, runs_user_code
from ..measuring.spec import RunSpec
from ..measuring.training import step_refusal
from ..results import settings
from ..results.settings import Sweep
from . import runner

MIN_PROCESSES = 3   # the fewest a verdict, a tie or "the fastest" may rest on (bench.report)
MIN_WINDOWS = 2     # the fewest windows per process a verdict may rest on: one window cannot show drift
CPU_SAMPLES = 2048   # without CUDA and --max-samples: the first 2,048 images, so an epoch (an e2e window) lasts seconds
# On a CPU above 32 px (photographs at 224 px), what is not given: a model, batch and fixed windows small
# enough that `compare` answers in minutes (32-px defaults there took 20-50 minutes: whole-epoch e2e windows
# and 50-step model-only blocks at a few images per second)
CPU_LARGE = {"model": "resnet9-w0.125", "batch_size": 16, "steps": 4, "warmup": 1}


def knobs() -> dict[str, pipelines.Option]:
    """The pipelines' knobs (`pipelines.declared_options`) that are not the worker count: that one
    the plan sets per CPU budget (`--workers`)."""
    return {name: option for name, option in pipelines.declared_options().items() if name != "num_workers"}


def sweep(options) -> Sweep:
    """A grid's parsed options (compare's or sweep's parser, or one --config grid) as a `Sweep`."""
    return settings.sweep(options, list(knobs()))


def default(name: str, device: torch.device):
    """Setting `name`'s default on `device` (`settings.Setting.on`)."""
    return settings.declared()[name].on(device.type)


def reads(pipeline: str) -> tuple[str, ...]:
    """The knobs `pipeline` reads: the registry's, none for "none" (copies and the model alone)."""
    return () if pipeline == "none" else pipelines.reads(pipeline)


def _variants(name: str, o) -> list[dict]:
    """The knob values pipeline `name` runs with, one dict per variant: a knob given as a list makes
    one variant per value, of the pipelines that read it only (the others keep its default)."""
    found = [{}]
    for option in knobs().values():
        if option.listed:
            values = o.knob(option.name) if option.name in reads(name) else [option.default]
            found = [{**v, option.name: value} for v in found for value in values]
    return found


def grid(o: Sweep, device: torch.device, world: distributed.World = distributed.World(),
         priced_only: bool = False) -> list[RunSpec]:
    """Every configuration of one set of options (module docstring); under torchrun each rank's share (a DDP
    replica on its own `cpus` cores; `batch_size` per GPU). `priced_only` (--estimate): lacking cores refuse nothing."""
    cuda = device.type == "cuda"
    if o.parallel == "dp" and (world.distributed or not cuda):
        raise ValueError("--parallel dp runs in one process on CUDA devices: not under torchrun, not on a CPU")
    if o.requested_steps is not None and o.min_window_s is not None:
        raise ValueError("--steps and --min-window-s: give one (a fixed step count, or windows sized by time)")
    budgets, parallel, kinds, modes, models, dtypes = _lists(o, device, world)
    for cpus in budgets:
        refusal = machine.budget_refusal(cpus, world.local_world_size)
        if refusal and not (priced_only and cpus >= 1):
            raise ValueError(refusal)
    for kind in kinds:   # what a captured step refuses on this GPU is refused here (no CUDA: skipped rows)
        for dtype in dtypes:
            refusal = step_refusal(kind, device, dtype, parallel, o.last_batch)
            if refusal and cuda:
                raise ValueError(refusal)
    if {"model", "e2e", "train"} & set(modes):   # 10 logits at every size it runs at
        check_models(models, o.image_size, min(o.timeout or CHECK_TIMEOUT_S, CHECK_TIMEOUT_S))
    base = PipelineConfig(
        data_root=o.data_root, source=o.source, data_seed=o.data_seed, cache_root=o.cache_root,
        last_batch=o.last_batch, max_samples=o.max_samples or (None if cuda else CPU_SAMPLES), device=str(device),
        channels_last=default("channels_last", device) if o.channels_last is None else o.channels_last,
        rank=world.rank, world_size=world.world_size,
        **{name: o.knob(name) for name, option in knobs().items() if not option.listed})
    repeats = o.repeats or default("repeats", device)
    busy = tuple(o.busy_levels or default("busy_levels", device))
    more = tuple((s.name, getattr(o, s.name)) for s in settings.carried())
    replicas = torch.cuda.device_count() if parallel == "dp" else 1
    reasons = pipelines.available(o.pipeline)

    def spec(pipeline: str, mode: str, model: str, config: PipelineConfig, cpus: int, **extra) -> RunSpec:
        """The config a pipeline really runs with, which resume matches: the options it does not read at
        their defaults (so `--workers 1,3` runs `resident` or model-only once; rows leave them empty:
        `results.recorded_knobs`)."""
        config = config.replace(**{name: PipelineConfig.default(name) for name in pipelines.declared_options()
                                   if name not in reads(pipeline)})
        if pipeline in reasons and not reasons[pipeline]:
            config = pipelines.resolve_config(pipeline, config)
        if mode in ("model", "e2e") and replicas > 1:   # DataParallel: the whole batch on one GPU
            config = config.replace(batch_size=config.batch_size * replicas)
        return RunSpec(pipeline, mode, model, config, cpus=cpus,
                               parallel=parallel if mode in ("model", "e2e") else "none",
                               share=o.share_process and mode in ("model", "e2e", "copy") and parallel in ("none", "ddp"),
                               repeats=1 if mode == "train" else repeats, more=more, **{**timing, **extra})

    specs = []
    for size in o.image_size:
        timing, large = _timing(o, device, size), not cuda and size > IMAGE_SIZE
        for dtype in dtypes:
            for bs in o.batch_size or ([CPU_LARGE["batch_size"]] if large else default("batch_size", device)):
                for cpus in budgets:
                    for workers in o.workers or [max(1, cpus - 1)]:
                        for seed in o.seed:
                            config = base.replace(image_size=size, dtype=dtype, batch_size=bs, num_workers=workers,
                                                  seed=seed)
                            specs += _setting(o, spec, config, cpus, modes, models, kinds, busy)
    return list(dict.fromkeys(specs))   # a configuration listed twice runs once


def _timing(o: Sweep, device: torch.device, size: int) -> dict:
    """The windows' timing at `size` px: what is given, else the device's defaults (on a CPU above
    32 px, short fixed windows: `CPU_LARGE`)."""
    if device.type != "cuda" and size > IMAGE_SIZE and o.requested_steps is None and o.min_window_s is None:
        return dict(requested_steps=CPU_LARGE["steps"], warmup=CPU_LARGE["warmup"] if o.warmup is None else o.warmup,
                    min_window_s=0.0)
    return dict(requested_steps=o.requested_steps, warmup=default("warmup", device) if o.warmup is None else o.warmup,
                min_window_s=0.0 if o.requested_steps else default("min_window_s", device) if o.min_window_s is None
                else o.min_window_s)


def _lists(o: Sweep, device: torch.device, world: distributed.World) -> tuple[list, str, list, list, list, list]:
    """What one set of options lists, defaults filled in: CPU budgets, parallelism, step kinds, modes,
    models and dtypes."""
    cuda = device.type == "cuda"
    # by default an equal share of the cores per process; with --ranks the share of the most ranks listed,
    # the same for every rank count, so one GPU and several compare at the same cores per GPU
    slots = max(o.ranks) if o.ranks else world.local_world_size
    budgets = o.cpus or [max(1, len(machine.allowed_cores()) // slots)]
    parallel = "ddp" if world.distributed else o.parallel
    # on CUDA eager runs beside a captured step by default: the whole step captured on one GPU; under DDP (and
    # with --ranks on several GPUs, at every rank count alike, so one GPU and several compare) the compiled
    # step, whose 2-GPU test (tests/test_distributed.py) has passed. DataParallel refuses a captured step
    several = world.distributed or slots > 1
    kinds = o.step or (["eager"] if not cuda or parallel == "dp" else ["eager", "compile"] if several else
                       ["eager", "graph"])
    modes = o.mode or default("mode", device)
    models = o.model or (["resnet18"] if cuda else [CPU_LARGE["model"]] if min(o.image_size) > IMAGE_SIZE
                          else ["resnet9-w0.25"])
    dtypes = o.dtype or default("dtype", device)
    return budgets, parallel, kinds, modes, models, dtypes


def size(o: Sweep, device: torch.device, world: distributed.World = distributed.World()) -> int:
    """The configuration processes one set of options lists, counted without building them: every
    combination `grid` makes, times --processes and the --ranks values. At least as many as run (a
    configuration a pipeline runs once for values it does not read is counted per value): what
    --max-configurations bounds before anything is built."""
    budgets, _, kinds, modes, models, dtypes = _lists(o, device, world)
    combinations = math.prod(map(len, (o.image_size, dtypes, o.batch_size or [0], budgets, o.workers or [0], o.seed)))
    per_model = len(kinds) * len(o.sync_every or [0])
    one = (len(o.payload) * len(o.copies) * ("copy" in modes) + len(models) * per_model * ("model" in modes))
    for name in o.pipeline:
        variants = math.prod(len(o.knob(k.name)) for k in knobs().values() if k.listed and k.name in reads(name))
        one += variants * (("loader" in modes) + len(o.stage) * ("stage" in modes) + len(models) * (
            per_model * ("e2e" in modes) + len(kinds) * ("train" in modes)))
    processes = o.processes or default("processes", device)
    return combinations * one * processes * len(o.ranks or [1])


def worlds(o: Sweep, device: torch.device, world: distributed.World = distributed.World()) -> list[distributed.World]:
    """The layouts of processes a grid runs in: under torchrun the job's; else one per `--ranks` value
    (N processes on N GPUs of this host, launched per configuration by `bench.running.runner`)."""
    if not o.ranks:
        return [world]
    if world.distributed:
        raise ValueError("--ranks starts the ranks itself: give it without torchrun (or torchrun without it)")
    if device.type == "cuda" and max(o.ranks) > torch.cuda.device_count():
        raise ValueError(f"--ranks {max(o.ranks)}: this machine has {torch.cuda.device_count()} GPUs")
    return [distributed.World(0, n, 0, n) for n in o.ranks]


_CHECKED: set[tuple[str, int]] = set()


def check_models(models: list[str], sizes: list[int], timeout: float) -> None:
    """Each model checked once per image size (`bench.measuring.models.check_model`), a model of the user's
    code in a process of its own (`bench.running.runner.call_isolated`): a builder that raises, calls
    sys.exit, aborts or runs past `timeout` s is one ValueError line naming the spec."""
    for model in models:
        for size in sizes:
            if (model, size) in _CHECKED:
                continue
            if runs_user_code(model):
                reason = runner.call_isolated(check_model, (model, size), timeout)
            else:
                try:
                    check_model(model, size)
                    reason = ""
                except ValueError as e:
                    reason = str(e)
            if reason:
                raise ValueError(f"model {echo(model)}: {clip(reason, LINE_LIMIT)}")
            _CHECKED.add((model, size))


def _setting(o: Sweep, spec, config: PipelineConfig, cpus: int, modes: list[str], models: list[str], kinds: list[str],
             busy: tuple) -> list[RunSpec]:
    """The configurations of one setting and CPU budget: copies, model-only, then per pipeline variant
    its loader-only, stage, e2e and train configurations."""
    found = []
    if "copy" in modes:
        found += [spec("none", "copy", "none", config, cpus, stage=copy, payload=payload)
                  for payload in o.payload for copy in o.copies]
    reads = o.sync_every or [0]   # model and e2e: how often the loss is read on the host
    for model in models:
        for kind in kinds:
            if "model" in modes:
                found += [spec("none", "model", model, config, cpus, step=kind, sync_every=n) for n in reads]
    for name in o.pipeline:
        for variant in _variants(name, o):
            c = config.replace(**variant)
            if "loader" in modes:
                found.append(spec(name, "loader", "none", c, cpus, busy_levels=busy))
            if "stage" in modes:
                found += [spec(name, "stage", "none", c, cpus, stage=s) for s in o.stage]
            for model in models:
                for kind in kinds:
                    if "e2e" in modes:
                        found += [spec(name, "e2e", model, c, cpus, step=kind, sync_every=n) for n in reads]
                    if "train" in modes:
                        found.append(spec(name, "train", model, c.replace(last_batch="drop"), cpus, step=kind,
                                          train_epochs=o.train_epochs, warmup=0))
    return found


def rounds(grids: list[tuple[list[RunSpec], int]]) -> list[RunSpec]:
    """Each grid's specs as many times as its processes, round after round across the grids (module
    docstring): round r holds every spec of every grid that runs more than r processes; `process`
    says which."""
    most = max((processes for _, processes in grids), default=0)
    order = [dataclasses.replace(s, process=r) for r in range(most) for specs, processes in grids if r < processes
             for s in specs]
    return list(dict.fromkeys(order))   # a configuration listed by two grids runs once per round


def part(specs: list[RunSpec], k: int, n: int) -> list[RunSpec]:
    """Part `k` of `n` of a plan (issue 70: a plan too long for one lease run in self-contained parts):
    its groups in plan order, each a setting (image size, batch, dtype, cores, ranks) and a model, cut
    into n runs of about equal numbers of configurations, whole groups each, so that model-only and
    every pipeline of a cell run in one part (and a shared process stays whole); the loader, stage and
    copy configurations of a setting go with its first model's group."""
    def setting(s: RunSpec) -> tuple:
        c = s.config
        return c.image_size, c.batch_size, c.dtype, s.cpus, c.world_size, s.more

    first_model = {}
    for s in specs:
        if s.model != "none":
            first_model.setdefault(setting(s), s.model)
    group = [(*setting(s), s.model if s.model != "none" else first_model.get(setting(s), "none")) for s in specs]
    order = list(dict.fromkeys(group))
    sizes = [group.count(g) for g in order]
    cut, total, done = [], sum(sizes), 0
    for g, size in zip(order, sizes):   # a group falls in the part its middle lies in
        cut.append(min(n - 1, int((done + size / 2) * n / total)))
        done += size
    chosen = {g for g, p in zip(order, cut) if p == k - 1}
    return [s for s, g in zip(specs, group) if g in chosen]


def williams(n: int) -> list[list[int]]:
    """The rows of a Williams design for `n` members: Latin-square orders of 0..n-1 balanced for
    first-order carry-over. Square row i is the first row (0, 1, n-1, 2, n-2, ...) plus i (mod n), so
    it starts with member i; for even n these n rows have every member right after every other
    exactly once. For odd n each square row is followed by its mirror image (2n rows, every member
    right after every other exactly twice): its first n rows still start with each member once and
    run most ordered pairs both ways, where the square's first rows would be a cyclic shift."""
    first = [0] + [(k + 1) // 2 if k % 2 else n - k // 2 for k in range(1, n)]
    square = [[(m + i) % n for m in first] for i in range(n)]
    return square if n % 2 == 0 else [row for r in square for row in (r, r[::-1])]


def shared(specs: list[RunSpec]) -> list[list[RunSpec]]:
    """The configurations each process runs, in order (module docstring): one each, except those
    marked `share`, which join the others of their cell and round (process index r), ordered by
    row r (mod the rows) of the cell's Williams design (`williams`)."""
    groups: dict[object, list[RunSpec]] = {}
    for s in specs:
        c = s.config
        cell = (s.process, *(settings.value(s, name) for name in settings.cell()),
                c.replace(**{name: PipelineConfig.default(name) for name in pipelines.declared_options()})) \
            if s.share else s
        groups.setdefault(cell, []).append(s)
    return [[members[m] for m in _row(len(members), members[0].process)] for members in groups.values()]


def _row(members: int, process: int) -> list[int]:
    """The order of a cell of `members` in process `process`: its design's rows in turn."""
    design = williams(members)
    return design[process % len(design)]


def carry_over_note(groups: list[list[RunSpec]]) -> str:
    """'' where every cell sharing a process runs in at least as many processes as its Williams design
    has rows; else one line naming the largest cell short of them (its order is then the design's
    first rows: each member first once with as many processes as members, the carry-over not balanced)."""
    processes: dict[frozenset, int] = {}
    for group in groups:
        if len(group) > 1:
            cell = frozenset(dataclasses.replace(s, process=0) for s in group)
            processes[cell] = processes.get(cell, 0) + 1
    short = sorted((len(williams(len(cell))), len(cell), n) for cell, n in processes.items()
                   if n < len(williams(len(cell))))
    if not short:
        return ""
    rows, members, n = short[-1]
    return (f"--share-process: a cell of {members} configurations runs in {n} processes; its order is balanced "
            f"for carry-over (each right after every other equally often) only with --processes {rows} or more "
            "(a Williams design: as many as members, twice as many for an odd count)")
