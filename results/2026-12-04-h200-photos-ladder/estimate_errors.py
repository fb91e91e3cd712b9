"""How far `--estimate` lands from each committed run it is tested on (tests/test_estimate.py's RUNS and
PARTS, its formula): a part predicted from the runs that began before it, another run from all the
others, less the first process's start (the rows' span does not hold it), against the time from the
run's first row to its last; then what bench/plans/on-gpu.sh did before each photo part's sweep,
predicted from the parts that began before it (`bench/running/prelude.py`), against its own.

    python results/2026-12-04-h200-photos-ladder/estimate_errors.py > results/2026-12-04-h200-photos-ladder/ESTIMATE-ERRORS.md
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from bench.running import estimate  # noqa: E402
from test_estimate import PARTS, RUNS, photo_parts, predicted, prelude_predicted  # noqa: E402


def main() -> None:
    rows = estimate.rows_under([ROOT / "results"])
    costs = {cuda: estimate.Costs(rows, cuda) for cuda in (True, False)}
    print("| run | predicted min | rows span min | error |\n|:--|--:|--:|--:|")
    for name in RUNS + PARTS:
        _, found, start, span = predicted(rows, costs, name)
        seconds = found.seconds - start
        print(f"| {name}{' (part)' if name in PARTS else ''} | {seconds / 60:.1f} | {span / 60:.1f} | "
              f"{seconds / span - 1:+.0%} |")
    print("\n| part | before the sweep, predicted s | its before.txt s | error |\n|:--|--:|--:|--:|")
    for part in photo_parts():
        model, found, measured, fresh = prelude_predicted(part)
        if found.seconds is None:
            said, error = "not predicted (no earlier part)", ""
        else:
            said = f"{found.seconds:.0f}" + (f" (the compile of {model} unpriced)" if found.unpriced else "")
            error = "" if found.unpriced else f"{round(100 * (found.seconds / measured - 1)):+d}%"
        print(f"| {part.name}{'' if fresh else ' (not a fresh machine)'} | {said} | {measured:.0f} | {error} |")


if __name__ == "__main__":
    main()
