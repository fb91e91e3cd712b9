"""How far `--estimate` lands from each committed run it is tested on (tests/test_estimate.py's RUNS and
PARTS, its formula): a part predicted from the runs that began before it, another run from all the
others, less the first process's start (the rows' span does not hold it), against the time from the
run's first row to its last.

    python results/2026-12-04-h200-photos-ladder/estimate_errors.py > results/2026-12-04-h200-photos-ladder/ESTIMATE-ERRORS.md
"""
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from bench.report.analysis import load  # noqa: E402
from bench.running import estimate  # noqa: E402
from test_estimate import PARTS, RUNS  # noqa: E402


def main() -> None:
    frames = []
    for path in sorted((ROOT / "results").rglob("results.csv")):
        try:
            frames.append(load([path]))
        except ValueError:   # a study's own CSV
            continue
    rows = pd.concat(frames, ignore_index=True)
    costs = {cuda: estimate.Costs(rows, cuda) for cuda in (True, False)}
    began = pd.to_datetime(rows.timestamp, utc=True, format="ISO8601").groupby(rows.run_id).min()
    print("| run | predicted min | rows span min | error |\n|:--|--:|--:|--:|")
    for name in RUNS + PARTS:
        own = rows[rows.results_folder == str(ROOT / "results" / name)]
        processes = estimate.ran(own)
        t = pd.to_datetime(own.timestamp, utc=True, format="ISO8601")
        span = (t.max() - t.min()).total_seconds()
        later = set(began[began >= t.min()].index) if name in PARTS else set()
        c = costs[own.device.str.startswith("cuda").any()].without(set(own.run_id) | later)
        predicted = c.predict(processes, own.gpu.iloc[0]).seconds - c.start(processes[0][0].image_size)
        print(f"| {name}{' (part)' if name in PARTS else ''} | {predicted / 60:.1f} | {span / 60:.1f} | "
              f"{predicted / span - 1:+.0%} |")


if __name__ == "__main__":
    main()
