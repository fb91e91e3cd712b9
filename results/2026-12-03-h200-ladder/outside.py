"""Where each part's device time went outside its timed windows (issue 70's target: at most a quarter).

Per part: the sweep's time (its progress bar's last elapsed reading in sweep.txt: from the plan's start
to its last window, process starts and compiles included), the timed windows (`seconds`, every row),
and what the rows record outside them per member (each member's first row: its value is the member's,
repeated on its second window's row): building the pipeline (`setup_s`), compiling or loading the
compiled step (`compile_s`), the warm-up that sizes the windows (`warmup_s`); the rest (process starts,
drains, teardown, the garbage collection before each member) is what none of them holds.

    python results/2026-12-03-h200-ladder/outside.py > results/2026-12-03-h200-ladder/OUTSIDE.md
"""
import re
from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent


def elapsed_s(sweep_txt: Path) -> float:
    """The last `[mm:ss` of the sweep's progress bar."""
    minutes, seconds = re.findall(r"\d+/\d+ \[(\d+):(\d+)", sweep_txt.read_text().replace("\r", "\n"))[-1]
    return 60 * int(minutes) + int(seconds)


print("| part | sweep s | windows s | setup s | compile s | warm-up s | the rest s | outside the windows |")
print("|:--|--:|--:|--:|--:|--:|--:|--:|")
for part in sorted(HERE.glob("part*of*")):
    rows = pd.read_csv(part / "results.csv")
    first = rows[rows.repeat == 0]
    total, windows = elapsed_s(part / "sweep.txt"), rows.seconds.sum()
    setup, compile_s, warmup = (first[c].fillna(0).sum() for c in ("setup_s", "compile_s", "warmup_s"))
    rest = total - windows - setup - compile_s - warmup
    print(f"| {part.name} | {total:.0f} | {windows:.0f} | {setup:.0f} | {compile_s:.0f} | {warmup:.0f} | {rest:.0f} "
          f"| {1 - windows / total:.0%} |")
