"""`pipebench compare` and `pipebench sweep`: the grids' configurations measured into OUT/results.csv
(`run_grid`), resumable, and the run's rates and answer printed at the end (`summary`; its table,
`rates_table`, leaves out the columns no row fills: stage, loss reads and busy step on a CPU run, the
image size where all share one; the rates of several GPUs are the report's, and the print says so).
The plan's size (configuration processes, windows) is printed before anything runs, and a plan
listing more than --max-configurations is refused before its configurations are built (`check_size`).
Every photograph a run reads (`imagefolder:PATH`) is checked once before anything runs: the first that
cannot be read is named in one line (`imagefolder.check_imagefolder`), not once per configuration.
A run where nothing asked for can run here is refused before anything runs (`_nothing_runs`), and an
OUT/results.csv holding rows of another commit before anything is written in OUT (`_other_commits`).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import shlex
import signal
import sys
import time
import uuid
import warnings
from pathlib import Path

import torch
from tqdm import tqdm

import pipelines
from pipelines import sources
from pipelines.sources import imagefolder
from pipelines.contract import resolve_device

from .. import results
from ..measuring import distributed, interrupts
from ..measuring.spec import RunSpec
from ..running import conduct, estimate, plan, prelude, runner
from ..running.conduct import printable, windows
from .common import _fail, record

ROOT = Path(__file__).resolve().parents[2]   # the project: its results/ hold the rows estimates rest on


def specs_for(grids: list, device: torch.device, world: distributed.World = distributed.World(),
              priced_only: bool = False) -> list[RunSpec]:
    """Every configuration of the grids (one per --config grid, else the command line's), each in
    its grid's --processes independent processes, in rounds (`plan.grid`, `plan.rounds`), once per
    --ranks value (`plan.worlds`); of a plan cut in parts, --part K/N's (`plan.part`)."""
    sweeps = [plan.sweep(options) for options in grids]
    specs = plan.rounds([(plan.grid(sweep, device, layout, priced_only), sweep.processes or plan.default("processes", device))
                         for sweep in sweeps for layout in plan.worlds(sweep, device, world)])
    k, n = getattr(grids[0], "part", None) or (1, 1)
    return plan.part(specs, k, n) if n > 1 else specs


def check_size(grids: list, device: torch.device, world: distributed.World) -> None:
    """A one-line ValueError where the grids list more configuration processes (`plan.size`) than
    --max-configurations: a plan of millions is refused before anything is built."""
    args, listed = grids[0], sum(plan.size(plan.sweep(options), device, world) for options in grids)
    if listed > args.max_configurations:
        where = f"--config {args.config} lists" if getattr(args, "config", None) else "the command line lists"
        raise ValueError(f"{where} {listed:,} configuration processes, more than --max-configurations "
                         f"{args.max_configurations:,}: list fewer values, or pass --max-configurations {listed} "
                         "to run them all")


def predicted(args, specs: list[RunSpec], device: torch.device, world: distributed.World) -> estimate.Estimate:
    """The plan's predicted device time (`bench.running.estimate`), said and returned; a one-line
    ValueError where it is past --lease-minutes on a GPU (unless --estimate or --past-lease)."""
    folders = [ROOT / "results", *([args.out] if args.out else [])]
    found = estimate.plan_estimate(specs, device, folders)
    if world.rank == 0:
        print(f"pipebench {args.command}: the plan is {found.text()}", file=sys.stderr)
        for line in found.per_cell() if args.estimate else ():
            print(f"  {line}", file=sys.stderr)
        if args.estimate and device.type == "cuda":   # what on-gpu.sh does first on a fresh GPU machine
            compiled = list(dict.fromkeys(s.model for s in specs if s.step == "compile"))
            photographs = any(estimate.photo_folder(s.config) for s in specs)
            print(f"pipebench {args.command}: {prelude.before_sweep(compiled, photographs, folders).text()}",
                  file=sys.stderr)
    if not args.estimate and not args.past_lease and found.sources and found.seconds > args.lease_minutes * 60:
        raise ValueError(f"the plan is predicted to take {found.seconds / 60:.0f} min, more than --lease-minutes "
                         f"{args.lease_minutes:g}: split it (fewer cells per run), or pass --past-lease")
    return found


def resume_command(argv: list[str], out: Path) -> str:
    """The command that resumes this run: `sweep` with the same options into the same folder."""
    tokens, skip = ["pipebench", "sweep"], False
    for token in argv[1:]:
        if skip:
            skip = False
        elif token == "--out":
            skip = True
        elif not token.startswith("--out="):
            tokens.append(token)
    return shlex.join([*tokens, "--out", str(out)])


def run_grid(grids: list, argv: list[str], begun=lambda: None) -> int:
    """Measure the grids (parsed options, each with its own --processes; the first one's run-wide
    options: output, deadline, device) into OUT/results.csv; the exit code (1 if a configuration failed or timed
    out). Under torchrun every process runs the same specs on its own GPU, shard and cores; rank 0
    alone writes files, one row per rank and window. `begun()` is called as the run, planned, takes
    SIGINT (`starting.Start.release`): a Ctrl-C from then on stops the run, its last lines included."""
    args = grids[0]
    try:
        world, device_name = distributed.setup(args.device)
        # a plan is priced anywhere: for a GPU and cores this machine may lack (`--estimate --device cuda`)
        device = torch.device(device_name) if args.estimate and device_name != "auto" else resolve_device(device_name)
        check_size(grids, device, world)
        specs = specs_for(grids, device, world, priced_only=args.estimate)
        if not args.estimate and (refusal := _nothing_runs(specs, conduct.refusals(specs, device))):
            raise ValueError(refusal)   # every rank alike: the same specs and machine
        if args.estimate or (device.type == "cuda" and not args.past_lease):
            predicted(args, specs, device, world)
            if args.estimate:
                return 0
    except ValueError as e:
        raise _fail(args.command, e) from None
    lead = world.rank == 0
    note = plan.carry_over_note(plan.shared(specs))
    if lead and note:
        print(f"pipebench {args.command}: {note}", file=sys.stderr)
    out = args.out or Path("runs") / f"{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}-{device.type}"
    out = distributed.broadcast(out)
    outcome = runner.Outcome()
    started = time.monotonic()
    try:
        begun()   # a Ctrl-C from here on is the run's: said by the except below, or after it by `main`
        with runner.folder_lock(out) if lead else contextlib.nullcontext(), interrupts.signals_as_interrupts():
            _run_specs(args, argv, specs, device, world, lead, out, outcome)
            if lead:
                for line in outcome.summary_lines():
                    print(f"pipebench {args.command}: {line}", file=sys.stderr)
    except results.WriteFailed as e:   # the disk is full: what resumes the run
        raise _fail(args.command, e, f"{e}; `{resume_command(argv, out)}` resumes") from None
    except OSError as e:   # --out is a file, under /proc, read-only: nothing was measured
        if not _in_folder(e.filename, out):   # another error (a process gone, say): said as it is
            raise _fail(args.command, e) from None
        raise _fail(args.command, e, f"--out {out}: {e.strerror or e}"
                    + (f" ({e.filename})" if str(e.filename) != str(out) else "")
                    + ": name a folder this user can write") from None
    except ValueError as e:   # the folder is locked, its results.csv is not pipebench's
        raise _fail(args.command, e) from None
    except (interrupts.Interrupted, KeyboardInterrupt) as e:
        if isinstance(e, KeyboardInterrupt):
            e = interrupts.Interrupted(signal.SIGINT)
        print(f"pipebench {args.command}: stopped by {e} after {time.monotonic() - started:.0f} s; "
              + interrupted_text(outcome, out, resume_command(argv, out)), file=sys.stderr)
        return e.exit_code
    finally:
        distributed.teardown()
    return 1 if outcome.failed else 0


def _in_folder(filename, folder: Path) -> bool:
    """Whether an OSError's file is `folder` or lies in it (an error without a file is not the folder's)."""
    return isinstance(filename, (str, Path)) and Path(filename).absolute().is_relative_to(Path(folder).absolute())


def interrupted_text(outcome: runner.Outcome, out: Path, resume: str) -> str:
    """What an interrupted run kept: the configurations it wrote, or nothing."""
    if not outcome.written:
        return (f"no configuration had finished: no row of this run was written (the one running was discarded; "
                f"`{resume}` starts it again)")
    from ..report import plural
    if outcome.written == outcome.configurations:   # stopped as it ended (its last lines)
        return f"after its work: the rows of its {plural(outcome.written, 'configuration')} are in {out}/results.csv"
    return (f"the rows of the {plural(outcome.written, 'configuration')} it finished are in {out}/results.csv "
            f"(the one running was discarded; `{resume}` resumes)")


def _run_specs(args, argv, specs, device, world, lead: bool, out: Path, outcome: runner.Outcome) -> None:
    """Run `specs` into OUT (`run_grid`), counting them in `outcome` as they finish: the plan said and
    recorded, a sweep's finished ones left out, the data made, then each configuration process run."""
    env = results.environment()
    # refused before the writer touches the file (moves a torn line aside, rewrites older columns); every rank
    refusal = distributed.broadcast(_other_commits(args, out, env) if lead else None)
    if refusal:
        raise ValueError(refusal)
    run_id = distributed.broadcast(f"{out.name}@{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}")
    writer = results.CsvWriter(out / "results.csv", env, run_id=run_id) if lead else None   # rank 0 writes; one id per invocation
    todo = list(range(len(specs)))
    refusals = conduct.refusals(specs, device)
    if lead:
        _announce(args, argv, specs, refusals, world, out, env)
        if args.command == "sweep":
            todo = _resume(args, specs, out, env)
    specs = [specs[i] for i in distributed.broadcast(todo)]   # rank 0's choice, the ranks' own configs
    outcome.configurations = len(specs)
    if not specs:
        if lead:
            print(summary(out))
        return
    _prepare_data(args, specs, device, world, lead, out)
    processes = conduct.processes(specs, refusals)
    order = [s for group, _ in processes for s in group]
    with tqdm(total=sum(windows(s) for s in order if s not in refusals), unit="window", desc=args.command, disable=not lead) as bar:
        progress = conduct.Progress(bar, order, world, writer, outcome)
        progress.describe(order[0])
        conduct.run_processes(args, world, out, processes, progress)
    if lead:
        print(summary(out, run_id))


RUN_FILES = {"results.csv", "results.csv.torn", "COMMAND.txt", "environment.json", "REPORT.md", "SUMMARY.md",
             "ANSWER.md", "PREDICTION.md", ".lock"}   # what a run writes in its folder


def _announce(args, argv, specs: list[RunSpec], refusals: dict, world, out: Path, env: dict) -> None:
    """Say the plan's size (what will run; the processes skipped apart) and record the command (and a
    copy of its --config) in OUT."""
    from ..report import plural
    runnable = [s for s in specs if s not in refusals]
    processes = plural(len(runnable), "configuration process", "configuration processes")
    print(f"pipebench {args.command}: the plan: {processes}, {plural(sum(map(windows, runnable)), 'window')}"
          + (f" ({len(specs) - len(runnable)} more skipped: they cannot run here, said at the end)"
             if refusals else ""), file=sys.stderr)
    launcher = ["torchrun", f"--nnodes={world.world_size // world.local_world_size}",
                f"--nproc-per-node={world.local_world_size}", "-m", "bench.cli"] if world.distributed else ["pipebench"]
    record(out, [*launcher, *argv], env)
    if getattr(args, "config", None) is not None:   # the command names it: keep a copy beside, never over
        name = args.config.name                     # a file of the run's own (a plan named results.csv)
        (out / (f"plan-{name}" if name in RUN_FILES or name.startswith("plan-") else name)).write_text(
            args.config.read_text())


def _nothing_runs(specs: list[RunSpec], refusals: dict) -> str | None:
    """Why a run can give nothing it was asked for here, or None: every pipeline asked for (with none,
    every configuration) cannot run, or every training step (model, e2e, train) cannot: it would
    write skipped rows, say "No answer" and exit 0."""
    piped = [s for s in specs if s.pipeline != "none"]
    steps = [s for s in specs if s.mode in ("model", "e2e", "train")]
    for asked, named in ((piped, True), (steps, False), (specs, False)):   # the last: copies alone
        if asked and all(s in refusals for s in asked):
            said = (conduct.named_refusal(s.pipeline, refusals[s]) if named else refusals[s] for s in asked)
            return "nothing asked for can run here: " + "; ".join(dict.fromkeys(said))
    return None


def _other_commits(args, out: Path, env: dict) -> str | None:
    """Why the run may not write into OUT, or None: OUT/results.csv holds rows of another commit, and a
    reference result is one commit (`report` refuses a folder of two, which no --out of its own could
    part); a sweep takes them with --resume-other-commit, compare never."""
    with warnings.catch_warnings():   # a torn last line: the writer sets it aside next, and says so
        warnings.simplefilter("ignore", UserWarning)
        others = results.other_commits(out / "results.csv", env)
    if not others or getattr(args, "resume_other_commit", False):
        return None
    return (f"{out}/results.csv holds rows of commit {', '.join(others)}, this is {env['git_commit']}: a reference "
            "result is one commit; choose another --out" + (", or pass --resume-other-commit" if args.command == "sweep"
                                                            else ""))


def _resume(args, specs: list[RunSpec], out: Path, env: dict) -> list[int]:
    """The indices of `specs` a sweep still has to run in OUT: those not finished; a block cut short is
    removed and run again (rows of another commit: `_other_commits`, before)."""
    _refuse_damaged(out / "results.csv")
    done = results.completed(out / "results.csv", env)
    cut = {(results.config_key(s), s.process) for s in specs
           if 0 < done.get((results.config_key(s), s.process), 0) < windows(s)}
    if cut:   # a block cut short (a crash while writing it): measured again, not added to
        removed = results.drop_blocks(out / "results.csv", env, cut)
        done = {block: n for block, n in done.items() if block not in cut}
        print(f"resume: removed {removed} rows of {len(cut)} configuration processes cut short "
              "(a crash while writing them); they run again", file=sys.stderr)
    todo = [i for i, s in enumerate(specs) if done.get((results.config_key(s), s.process), 0) < windows(s)]
    print(f"resume: {len(specs) - len(todo)} of {len(specs)} configuration processes already done",
          file=sys.stderr)
    return todo


def _refuse_damaged(path: Path) -> None:
    """A ValueError in one line naming the line, column and cell where the rows a sweep resumes hold
    text in a number column, as `report` refuses them (a sweep counted such rows and went on)."""
    if path.exists() and path.stat().st_size:
        from ..report.analysis import numbers
        lines: list[int] = []
        numbers(results.read_rows(path, lines=lines), path, lines)


def _prepare_data(args, specs: list[RunSpec], device, world, lead: bool, out: Path) -> None:
    """Data generation and JPEG encoding happen here, outside every timer, only where read, rank 0 first."""
    for turn in (True, False):
        if lead == turn:
            try:
                source, folder = _make_data(specs)
            except OSError as e:   # a missing root, a folder that cannot be written: one line, no traceback
                hint = (" (choose a writable --data-root or $PIPEBENCH_DATA)"
                        if isinstance(e, PermissionError) else "")
                raise SystemExit(f"pipebench {args.command}: {e}{hint}") from None
            except ValueError as e:   # a photograph that cannot be used: named once, before anything runs
                raise _fail(args.command, e) from None
        distributed.barrier()
    if lead:
        ranks = f"; {world.world_size} processes" if world.distributed else ""
        print(f"data: {source} ({folder}); device: {device}{ranks}; output: {out}/results.csv", file=sys.stderr)


def _make_data(specs: list[RunSpec]) -> tuple[str, Path]:
    """The data the specs read, made or checked: your photographs each checked once, else the
    source's JPEG copies made; its source and folder."""
    read = [s for s in specs if s.pipeline != "none"] or specs
    if read[0].config.photos:   # your files, read as they are: nothing to make, each checked once here
        for checked in dict.fromkeys((s.config.photo_folder, s.config.split, s.config.max_samples)
                                     for s in read if s.config.photos):
            imagefolder.check_imagefolder(*checked)
        return "imagefolder", read[0].config.photo_folder
    source, folder = sources.resolve_folder(read[0].config)
    quality, cache = read[0].config.jpeg_quality, read[0].config.cache_root
    needed = {(copy, s.config.image_size) for s in read for copy in pipelines.copies(s.pipeline, s.config)}
    for copy, size in sorted(needed):   # "jpeg" before "jpeg-tree"
        prepare = sources.prepare_jpeg if copy == "jpeg" else sources.prepare_jpeg_tree
        prepare(folder, quality, size, cache)
    return source, folder


RATE_COLUMNS = [   # the printed table's columns: header, width, a row's text, what it means where not plain
    ("mode", -7, lambda r: r.mode, ""),
    ("stage", -20, lambda r: " ".join(t for t in (r.payload, r.stage) if isinstance(t, str) and t), ""),
    ("pipeline", -28, lambda r: r.pipeline, ""), ("model", -22, lambda r: r.model, ""),
    ("step", -8, lambda r: r.step or "", ""), ("px", 4, lambda r: f"{r.image_size:.0f}", ""),
    ("reads", 5, lambda r: f"{r.sync_every:g}", "reads: the step reads the loss every N steps (0: never)"),
    ("cores", 5, lambda r: f"{r.cpus:.0f}", ""),
    ("busy ms", 7, lambda r: f"{r.busy_ms:g}", "busy ms: the synthetic GPU step per batch a loader row ran beside")]


def rates_table(c) -> list[str]:
    """The run's cells as printed lines: a header, one line per cell, then what a shown column's name
    does not say; a column no cell fills (no stage, loss never read, no busy step: a CPU run) is left out."""
    from ..report import rate
    filled = {"stage": (c.stage.fillna("") + c.payload.fillna("")).ne("").any(),
              "reads": c.sync_every.fillna(0).ne(0).any(), "busy ms": c.busy_ms.fillna(0).ne(0).any(),
              "px": c.image_size.nunique() > 1}
    shown = [col for col in RATE_COLUMNS if filled.get(col[0], True)]

    def line(cells: list[str]) -> str:
        return " ".join(f"{printable(text):<{-width}s}" if width < 0 else f"{printable(text):>{width}s}"
                        for text, (_, width, _, _) in zip(cells, shown))
    return [line([name for name, *_ in shown]) + "  img/s median [lowest-highest process] n=windows/processes",
            *[line([text(r) for _, _, text, _ in shown]) + f"  {rate(r)}" for r in c.itertuples()],
            *[note for *_, note in shown if note]]


def summary(out: Path, run_id: str | None = None) -> str:
    """The run's rates per configuration (median [range between processes] n=windows/processes),
    its failures, and the answer per situation (also written to OUT/ANSWER.md). The run is the one
    `run_id` belongs to (rows of one commit and machine), else the last in the file."""
    from .. import report
    from ..report.scaling import gpus_used
    try:
        found = report.runs(report.load([out / "results.csv"]))
    except (OSError, ValueError):
        return f"\n{out}/results.csv: no rows"
    name, group = next(((n, g) for n, g in found if run_id in set(g.run_id)), found[-1])
    seen = report.view_of(group)
    c = seen.cells
    lines = [f"\n{out}/results.csv", *rates_table(c)] if len(c) else [f"\n{out}/results.csv", "no successful configuration"]
    used = gpus_used(group[group.status == "ok"])
    several = " and ".join(map(str, sorted(set(used) - {1})))
    if several:
        shown = "one GPU's cells" if (used == 1).any() else "rank 0's cells (no row used one GPU)"
        lines.append(f"({shown}; per GPU and per job at {several} GPUs: `pipebench report {out} --out {out}`)")
    failed = group[~group.status.isin(["ok", "not-applicable"])].fillna({"stage": ""})
    said = failed[["status", "pipeline", "mode", "stage", "model", "error"]].drop_duplicates()   # once per configuration
    lines += [printable(f"{r.status}: {r.pipeline} {r.stage or r.mode} {r.model}: {r.error}") for r in said.itertuples()]
    answers = report.answers(c, seen.situations)
    if answers:
        report.write_answers(out, [(name, group, answers)], f"`pipebench report {out} --out {out}`")
        lines += ["", "The answer (also in ANSWER.md):", *[f"- {a}" for a in answers]]
    else:
        lines += ["", "No answer: no e2e configuration ran beside its model-only one (the rows above say what "
                      "ran, skipped and failed)"]
    return "\n".join(lines)
