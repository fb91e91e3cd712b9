"""What a plan costs on a fresh GPU machine before its sweep begins, predicted from the `before.txt` that
`bench/plans/on-gpu.sh` leaves beside each run it makes (issue 70: the sweep's estimate,
`bench.running.estimate`, prices the sweep alone).

Before a sweep that script runs the checks, makes the data and records `nvidia-smi` (before.txt's first
line: seconds since its start), then compiles every compiled model of the plan (or part) at once into
inductor's cache (its second line: seconds since the start, naming the models). A run is known by its
rows beside before.txt (or in sweep/, as that script leaves them): whether it read photographs (224 px,
the photo set made first) or not (32 px), its machine (boot) and its first row's time, read as the report
reads them (`bench.report.analysis.load`); a run whose rows do not say these is not read. Only runs on
a fresh machine count (`fresh`: no earlier run of the same boot; a part run after another on one machine
finds inductor's cache warm and the sources cached).
Predicted, from the fresh runs that read the plan's kind of data: the median of their first lines, plus
the slowest of the plan's compiled models, each at the median of its compile times (second line less
first) in the runs that compiled it alone. A compiled model no such run compiled is not priced, and
said; models compiled at once share the cores, so the slowest alone may read low. The data step is that
of the photo set the runs made (PHOTOS in on-gpu.sh: 25,000 in the committed runs, on 16 cores).
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

DATA = re.compile(r"^the checks, the data and nvidia-smi: (\d+) s since the start$", re.M)
COMPILE = re.compile(r"^the compile into inductor's cache \(([^)]*)\): (\d+) s since the start$", re.M)


@dataclass
class Prelude:
    """Predicted seconds before the sweep (None where no fresh run of the plan's kind of data left a
    before.txt), from `sources` before.txt; compiled models none of them prices (`unpriced`)."""
    seconds: float | None = None
    sources: int = 0
    unpriced: list[str] = field(default_factory=list)

    def text(self) -> str:
        where = "before the sweep, on a fresh machine (bench/plans/on-gpu.sh: the checks, the data, " \
                "nvidia-smi and each compiled model's compile into inductor's cache)"
        if self.seconds is None:
            return f"{where}: not predicted: no before.txt of an earlier run on a fresh machine that read its kind " \
                   "of data (results/, OUT)"
        notes = [f"from {self.sources} before.txt of earlier runs"]
        if self.unpriced:
            notes.append(f"the compile of {', '.join(self.unpriced)} not priced: no fresh machine's before.txt "
                         "has it alone")
        return f"{where}: {self.seconds / 60:.1f} min more ({'; '.join(notes)})"


@dataclass(frozen=True)
class Before:
    """One run's before.txt: its data step's seconds, the model it compiled alone and that compile's
    seconds (None where it compiled none, or several at once), and what its rows say of the run."""
    data_s: float
    compiled: str | None
    compile_s: float | None
    photographs: bool
    boot: str
    started: str


def _run(folder: Path) -> tuple[bool, str, str] | None:
    """(read photographs, machine, first row's time) of the run in `folder`, its rows read as the report
    reads them (`machine`: the boot id, else the host); None where it has no readable rows."""
    from ..report.analysis import load
    for rows in (folder / "results.csv", folder / "sweep" / "results.csv"):
        try:
            df = load([rows]) if rows.is_file() else None
        except ValueError:   # not pipebench's rows, or damaged
            df = None
        if df is not None and not df.empty and df.machine.ne("").all() and df.timestamp.ne("").all():
            return bool(df.data_source.eq("imagefolder").any()), df.machine.iloc[0], df.timestamp.min()
    return None


def records(folders: list[Path]) -> list[Before]:
    """Every before.txt of on-gpu.sh's form under `folders` whose run's rows say its data and machine."""
    found = []
    for path in sorted({p.resolve() for folder in folders if folder.is_dir() for p in folder.rglob("before.txt")}):
        try:
            text = path.read_text(errors="replace")
        except OSError:   # a folder of that name, or unreadable
            continue
        first, compiled = DATA.search(text), COMPILE.search(text)
        run = _run(path.parent) if first else None   # another file of that name: its folder's rows not read
        if not run:   # that, or a run whose rows say nothing of it
            continue
        alone = compiled and len(compiled.group(1).split()) == 1   # several compiled at once: no model's own time
        found.append(Before(float(first.group(1)), compiled.group(1) if alone else None,
                            float(compiled.group(2)) - float(first.group(1)) if alone else None, *run))
    return found


def fresh(run: Before, runs: list[Before]) -> bool:
    """Whether `run` began on a fresh machine: no run of `runs` began earlier on the same boot."""
    return not any(o.boot == run.boot and o.started < run.started for o in runs)


def before_sweep(models: list[str], photographs: bool, folders: list[Path]) -> Prelude:
    """The prelude of a plan whose compiled models are `models` and that reads `photographs` (or not),
    from the before.txt under `folders`."""
    every = records(folders)
    runs = [r for r in every if r.photographs == photographs and fresh(r, every)]
    if not runs:
        return Prelude()
    compiles: dict[str, list[float]] = {}
    for r in runs:
        if r.compiled:
            compiles.setdefault(r.compiled, []).append(r.compile_s)
    priced = [statistics.median(compiles[m]) for m in models if m in compiles]
    return Prelude(statistics.median(r.data_s for r in runs) + max(priced, default=0.0), len(runs),
                   [m for m in models if m not in compiles])
