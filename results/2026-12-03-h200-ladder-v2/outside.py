"""Where each part's device time went outside its timed windows (issue 70's target: at most a quarter).

Per part: the sweep's time (its progress bar's last elapsed reading in sweep.txt: from the plan's start
to its last window, process starts and compiles included), the timed windows (`seconds`, every row),
and what the rows record outside them: per member (each member's first row: its value is the member's,
repeated on its second window's row) building the pipeline (`setup_s`), its first batch (`first_batch_s`:
a worker pool's start), compiling or loading the compiled step (`compile_s`), the warm-up that sizes the
windows (`warmup_s`); per window its drain (`drain_s`); the rest (process starts, pipelines' closes,
the memory released between members) is what none of them holds. Then, per member, the medians of
its pipeline's build, its warm-up and its windows' seconds together.

    python results/2026-12-03-h200-ladder-v2/outside.py [RUN] > RUN/OUTSIDE.md

RUN: a folder of parts (`part*of*`, each a sweep's rows and its sweep.txt); this script's folder by default.
"""
import re
import sys
from pathlib import Path

import pandas as pd

HERE = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent


def elapsed_s(sweep_txt: Path) -> float:
    """The last `[mm:ss` of the sweep's progress bar."""
    minutes, seconds = re.findall(r"\d+/\d+ \[(\d+):(\d+)", sweep_txt.read_text().replace("\r", "\n"))[-1]
    return 60 * int(minutes) + int(seconds)


MEMBER = {"setup_s": "setup", "first_batch_s": "first batch", "compile_s": "compile", "warmup_s": "warm-up"}
print(f"| part | sweep s | windows s | {' | '.join(f'{n} s' for n in MEMBER.values())} | drains s | the rest s "
      "| outside the windows |")
print("|:--|" + "--:|" * (len(MEMBER) + 5))
for part in sorted(HERE.glob("part*of*")):
    rows = pd.read_csv(part / "results.csv")
    first = rows[rows.repeat == 0]
    total, windows, drains = elapsed_s(part / "sweep.txt"), rows.seconds.sum(), rows.drain_s.fillna(0).sum()
    member = [first[c].fillna(0).sum() for c in MEMBER]
    rest = total - windows - sum(member) - drains
    print(f"| {part.name} | {total:.0f} | {windows:.0f} | {' | '.join(f'{v:.0f}' for v in member)} | {drains:.0f} "
          f"| {rest:.0f} | {1 - windows / total:.0%} |")

print()
print("| part | members | setup s, median | warm-up s, median | windows s per member, median |")
print("|:--|--:|--:|--:|--:|")
for part in sorted(HERE.glob("part*of*")):
    rows = pd.read_csv(part / "results.csv")
    member = rows.groupby(["model", "process", "slot"])
    print(f"| {part.name} | {member.ngroups} | {member.setup_s.first().median():.2f} | "
          f"{member.warmup_s.first().median():.2f} | {member.seconds.sum().median():.2f} |")
