"""The loop that conducts a run's configuration processes: which cannot run here (`refusals`: a
skipped row each), which run together (`processes`, from `plan.shared`), each run in this process
or in child processes (`run_processes`, through `runner`), and what happens as each ends
(`Progress`: its rows written by rank 0, counted, its failure said, the progress bar moved).
`bench.cli.measure` parses, plans, prints and calls it.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pipelines

from .. import results
from ..measuring import harness
from ..measuring.spec import RunSpec
from ..measuring.training import step_refusal
from . import plan, runner


CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def printable(text: str) -> str:
    """`text` for a terminal: a control character (a carriage return in a model's path) shown escaped,
    never acted on (it overwrote the line's first columns)."""
    return CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


def windows(spec: RunSpec) -> int:
    """Windows (rows) one process of `spec` measures."""
    return spec.repeats * len(spec.busy_levels)



def refusals(specs: list[RunSpec], device) -> dict[RunSpec, str]:
    """Why each configuration that cannot run here cannot: its pipeline not installed, photographs
    only, or a step kind this device refuses (a skipped row each instead)."""
    reasons = pipelines.available({s.pipeline for s in specs})
    why = {s: (reasons.get(s.pipeline) or pipelines.source_refusal(s.pipeline, s.config) or step_refusal(s.step, device))
           for s in specs}
    return {s: reason for s, reason in why.items() if reason}


def named_refusal(pipeline: str, reason: str) -> str:
    """A refusal with its pipeline named once: "ffcv: FFCV is not installed …" (`source_refusal`'s
    reasons name it already)."""
    return reason if reason.startswith(f"{pipeline}: ") else f"{pipeline}: {reason}"


def processes(specs: list[RunSpec], refusals: dict[RunSpec, str]) -> list[tuple[list[RunSpec], str]]:
    """The configurations one process runs (`plan.shared`), or one that cannot run here: why not (a
    skipped row instead)."""
    processes = []
    for group in plan.shared(specs):
        processes += [([s], refusals[s]) for s in group if s in refusals]
        processes += [([s for s in group if s not in refusals], "")] * any(s not in refusals for s in group)
    return processes


class Progress:
    """The progress bar over the configurations in `order`, and what happens as each ends: its rows
    written (rank 0), counted in `outcome`, its failure said."""

    def __init__(self, bar, order: list[RunSpec], world, writer, outcome: runner.Outcome):
        self.bar, self.order, self.world, self.writer, self.outcome = bar, order, world, writer, outcome
        self.windows = self.configurations = 0

    def describe(self, spec: RunSpec) -> None:
        what = spec.stage or spec.payload or spec.mode
        ranks = f" x{spec.config.world_size} GPUs" if spec.config.world_size > 1 and not self.world.distributed else ""
        self.bar.set_description(printable(f"{spec.pipeline} {what} {spec.model} {spec.config.image_size}px "
                                           f"{spec.cpus} cores{ranks} #{spec.process + 1}"))

    def on_window(self, row: dict) -> None:
        self.bar.update(1)
        self.bar.set_postfix(img_per_s=f"{row['world_img_per_s']:,.0f}")

    def on_done(self, spec: RunSpec, rows: list[dict]) -> None:
        """A configuration ended: its rows committed, the bar at its end (a skipped one had no
        windows in it), its failure said."""
        self.windows += windows(spec) * any(row["status"] != "skipped" for row in rows)
        self.configurations += 1
        self.bar.update(self.windows - self.bar.n)
        if self.writer is not None:
            self.writer.write_block(rows)
        self.outcome.written += 1
        cause = self.outcome.record(spec, rows)
        if self.writer is not None and cause:
            self.bar.write(cause, file=sys.stderr)
        if self.configurations < len(self.order):
            self.describe(self.order[self.configurations])


def run_processes(args, world, out: Path, processes: list, progress: Progress) -> None:
    """Each configuration process: a skipped one's row, else its configurations in this process (one
    after another, sharing what they can) or in child processes (`--isolate`, several GPUs)."""
    for group, skip in processes:
        if skip:
            progress.on_done(group[0], [results.failed_row(group[0], "skipped", skip)])
        elif world.distributed or (not args.isolate and group[0].config.world_size == 1):
            shared = harness.Shared() if len(group) > 1 else None
            for spec in group:
                rows = runner.run_in_process(spec, world, progress.on_window, shared)
                progress.on_done(spec, rows)
                if shared is not None and any(r["status"] != "ok" for r in rows):
                    shared = harness.Shared()   # what a failed one left (a half-captured step) is not the next's
        else:
            while group:   # a configuration that hangs or kills its process: the rest in a new one
                group = group[runner.run_isolated(group, args.timeout, out, progress.on_window, progress.on_done):]
