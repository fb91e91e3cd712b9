"""What a plan costs on a fresh GPU machine before its sweep begins, predicted from the `before.txt` that
`bench/plans/on-gpu.sh` leaves beside each run it makes (issue 70: the sweep's estimate,
`bench.running.estimate`, prices the sweep alone).

Before a sweep that script runs the checks, makes the data and records `nvidia-smi` (before.txt's first
line: seconds since its start), then compiles every compiled model of the plan (or part) at once into
inductor's cache (its second line: seconds since the start, naming the models). Predicted: the median of
the first lines of the runs that read the same kind of data (photographs, or not: their rows beside
before.txt say), plus the slowest of the plan's compiled models, each at the median of the compile times
(second line less first) of the before.txt that name that model alone. A compiled model no before.txt
names alone is not priced, and said. The committed before.txt record photo sets of 25,000 made on 16
cores, the compile on a cold cache save one (a part run right after another on the same machine,
results/2026-12-04-h200-photos-ladder/README.md): the median keeps such a one from moving the price much.
"""
from __future__ import annotations

import csv
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

DATA = re.compile(r"^the checks, the data and nvidia-smi: (\d+) s since the start$", re.M)
COMPILE = re.compile(r"^the compile into inductor's cache \(([^)]*)\): (\d+) s since the start$", re.M)


@dataclass
class Prelude:
    """Predicted seconds before the sweep (None where no before.txt was found), from `sources` files;
    compiled models no file prices (`unpriced`)."""
    seconds: float | None = None
    sources: int = 0
    unpriced: list[str] = field(default_factory=list)

    def text(self) -> str:
        where = "before the sweep, on a fresh machine (bench/plans/on-gpu.sh: the checks, the data, " \
                "nvidia-smi and each compiled model's compile into inductor's cache)"
        if self.seconds is None:
            return f"{where}: not predicted: no before.txt of an earlier run that read its kind of data (results/, OUT)"
        notes = [f"from {self.sources} committed before.txt"]
        if self.unpriced:
            notes.append(f"the compile of {', '.join(self.unpriced)} not priced: no before.txt names it alone")
        return f"{where}: {self.seconds / 60:.1f} min more ({'; '.join(notes)})"


def reads_photographs(run: Path) -> bool:
    """Whether the run in folder `run` (its rows beside before.txt, or in sweep/ as on-gpu.sh leaves
    them) read a folder of photographs."""
    for rows in (run / "results.csv", run / "sweep" / "results.csv"):
        if rows.is_file():
            with rows.open(newline="", errors="replace") as f:
                return any(row.get("data_source") == "imagefolder" for row in csv.DictReader(f))
    return False


def before_sweep(models: list[str], photographs: bool, folders: list[Path]) -> Prelude:
    """The prelude of a plan whose compiled models are `models` and that reads `photographs` (or not),
    from every before.txt under `folders`."""
    data: list[float] = []
    compiles: dict[str, list[float]] = {}
    for path in sorted({p.resolve() for folder in folders if folder.is_dir() for p in folder.rglob("before.txt")}):
        text = path.read_text(errors="replace")
        first = DATA.search(text)
        if not first:   # not on-gpu.sh's (results/2026-12-02-tests holds others of that name)
            continue
        if reads_photographs(path.parent) == photographs:
            data.append(float(first.group(1)))
        compiled = COMPILE.search(text)
        if compiled:   # several models compiled at once: a key no model matches
            compiles.setdefault(compiled.group(1), []).append(float(compiled.group(2)) - float(first.group(1)))
    if not data:
        return Prelude()
    priced = [statistics.median(compiles[m]) for m in models if m in compiles]
    return Prelude(statistics.median(data) + max(priced, default=0.0), len(data),
                   [m for m in models if m not in compiles])
