"""Would a rule that ends a process's windows early have changed any verdict? (issue 70: "windows
spent where the verdict is close"). Read from every committed run whose processes timed two windows
or more; nothing is measured.

The rule studied (`fires`): in one process, an e2e configuration's first window counts only if it
was timed after a warm-up the harness called steady (`warmup_steady`, the warm-up rule); the margin is
the largest move, up or down, of a later window from the first among such processes of the runs, per
kind of machine (`moves`, `study`). Where the first window's share of model-only's lowest process,
raised by the margin, is under FED / (1 + margin), the process times no more: given every process's
move within the margin (model-only's and the other processes' too), no later window could lift the
cell to fed, nor its windows' move make it noisy (`bench.report.verdicts`). The margin comes from the
same runs the rule is then checked on, and model-only's lowest process is known only once the cell has
run: a sweep would have to go by what it has measured so far. The study checks that each cell's whole
verdict (not fed, input-bound, slower than both, inconclusive) comes out the same from the first
windows of the processes where the rule fired and every window of the others (`simulate`), and counts
the window time the rule would have saved.

    python -m bench.report.early results --out results/2026-12-05-early-rule
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from ..running.plan import MIN_WINDOWS
from .analysis import cells, key, load, process_of, runs, short_windows, situations, view_of
from .formatting import table
from .verdicts import FED

TIMED = ["e2e", "model"]


def committed(folder: Path) -> list[Path]:
    """The results files of the runs under `folder` that have a report (studies' CSVs are not runs)."""
    return sorted(p for p in folder.rglob("results.csv") if (p.parent / "REPORT.md").exists()
                  and "pipeline" in p.read_text().splitlines()[0])


def windows(rows: pd.DataFrame) -> pd.DataFrame:
    """The timed e2e and model-only windows of a run's one-GPU rows that its cells count (not those
    shorter than the run's minimum: `analysis.short_windows`), each with its process (`proc`) and
    whether its warm-up was steady (`steady`)."""
    ok, _ = short_windows(rows[(rows.status == "ok") & rows["mode"].isin(TIMED) & rows.img_per_s.notna()])
    return ok.assign(proc=process_of, steady=ok.warmup_steady.astype(str) == "True").sort_values(
        [*key(), "proc", "repeat"])


def moves(w: pd.DataFrame) -> pd.DataFrame:
    """Per process of two windows or more: its first window's rate, whether it followed a steady
    warm-up, and how far its later windows rose above it (`rise`: the highest over the first, less 1)
    and fell below it (`fall`: the lowest over the first, less 1)."""
    by = w.groupby([*key(), "proc"], sort=False)
    found = by.agg(first=("img_per_s", "first"), high=("img_per_s", lambda r: r.iloc[1:].max()),
                   low=("img_per_s", lambda r: r.iloc[1:].min()), n=("img_per_s", "size"),
                   steady=("steady", "first"), device=("device", "first")).reset_index()
    found = found[found.n >= MIN_WINDOWS]
    return found.assign(rise=found.high / found["first"] - 1, fall=found.low / found["first"] - 1)


def fires(w: pd.DataFrame, s: pd.DataFrame, margin: float) -> pd.DataFrame:
    """The e2e processes (cell and `proc`) where the rule fires (module docstring): first window steady,
    and its share of model-only's lowest process (`s`: the run's situations), raised by `margin`, still
    under FED / (1 + margin)."""
    first = w[w["mode"] == "e2e"].groupby([*key(), "proc"], sort=False).first().reset_index()
    lowest = s.set_index(key()).model_lo if len(s) else pd.Series(dtype=float)
    model_lo = pd.Series([lowest.get(tuple(r), float("nan")) for r in first[key()].itertuples(index=False)],
                         index=first.index)
    fired = first.steady & (
        first.img_per_s * (1 + margin) < FED / (1 + margin) * model_lo)
    return first.loc[fired, [*key(), "proc"]]


def simulate(rows: pd.DataFrame, w: pd.DataFrame, fired: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The run's situations (from its `rows`, whose `windows` are `w`) had the processes in `fired` timed
    their first window alone, and the windows left out. A cell where the rule fired, and whose other
    processes timed MIN_WINDOWS or more, counts as having its windows (decided early); one whose other
    processes fell short stays thin."""
    ids = set(map(tuple, fired.itertuples(index=False)))
    procs = w[[*key(), "proc"]].itertuples(index=False)
    mine = pd.Series([tuple(r) in ids for r in procs], index=w.index, dtype=bool)
    dropped = w[mine & (w.groupby([*key(), "proc"], sort=False).cumcount() > 0)]
    others = w[~mine].groupby([*key(), "proc"]).size().groupby(key()).min()
    cells_fired = {i[:-1] for i in ids}
    decided = {k for k in cells_fired if others.get(k, MIN_WINDOWS) >= MIN_WINDOWS}
    c = cells(rows.drop(dropped.index))
    early = pd.Series([tuple(r) in decided for r in c[key()].itertuples(index=False)], index=c.index, dtype=bool)
    c.loc[early, "w"] = c.loc[early, "w"].clip(lower=MIN_WINDOWS)
    return situations(c), dropped


def kind(device: str) -> str:
    """The margin's machine kind of a row's device: "GPU" or "CPU"."""
    return "GPU" if str(device).startswith("cuda") else "CPU"


def study(root: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, float]]:
    """Per process of two windows or more (`moves`, with its run and machine kind), per run the rule's
    effect, and the margin per kind: the largest move, up or down, of a steady process's later windows
    from its first; from the runs under `root`, each named by its folder there."""
    views = [(Path(group.results_folder.iloc[0]).relative_to(root.resolve()).as_posix()
              + name[len(group.results_file.iloc[0]):], view_of(group)) for name, group in runs(load(committed(root)))]
    timed = {name: windows(v.rows) for name, v in views}
    found = pd.concat([moves(timed[name]).assign(run=name) for name, _ in views], ignore_index=True)
    found = found.assign(kind=found.device.map(kind), move=found[["rise"]].join(-found.fall).max(axis=1))
    margins = found[found.steady].groupby("kind").move.max().to_dict()
    per_run = []
    for name, v in views:
        w, s = timed[name], v.situations
        if not len(s) or not (w.groupby([*key(), "proc"]).size() >= MIN_WINDOWS).any():
            continue
        margin = margins.get(kind(w.device.iloc[0]))
        if margin is None:   # no steady process of two windows on this kind of machine: nothing to go by
            continue
        fired = fires(w, s, margin)
        after, dropped = simulate(v.rows, w, fired)
        both = s.set_index(key())[["verdict"]].join(after.set_index(key())[["verdict"]].add_suffix("_early"))
        changed = both[both.verdict != both.verdict_early]
        per_run.append({"run": name, "e2e cells": len(s), "decided early": fired.groupby(key()).ngroups,
                        "processes ended early": len(fired),
                        "changed": "; ".join(f"{c.pipeline} {c.model} {int(c.cpus)} cores: {c.verdict} -> "
                                             f"{c.verdict_early}" for c in changed.reset_index().itertuples()) or "none",
                        "window s saved": dropped.seconds.sum(), "window s": w.seconds.sum()})
    return found, pd.DataFrame(per_run).sort_values("run", ignore_index=True), margins


def markdown(found: pd.DataFrame, per_run: pd.DataFrame, margins: dict[str, float], command: str) -> str:
    steady = found[found.steady]
    tops = steady.loc[steady.groupby("kind").move.idxmax()]
    by = found.groupby(["kind", "pipeline", "mode"]).agg(processes=("move", "size"), steady=("steady", "sum"))
    by = by.join(steady.groupby(["kind", "pipeline", "mode"]).agg(
        median_rise=("rise", "median"), largest_rise=("rise", "max"), largest_fall=("fall", "min"))).reset_index()
    by = by.assign(**{c: lambda d, c=c: d[c].map(lambda x: "" if pd.isna(x) else f"{x:+.1%}")
                      for c in ["median_rise", "largest_rise", "largest_fall"]})
    changed = per_run[per_run.changed != "none"]
    saved, spent = per_run["window s saved"].sum(), per_run["window s"].sum()
    shown = per_run.assign(**{"window s saved": per_run["window s saved"].map("{:,.0f}".format),
                              "window s": per_run["window s"].map("{:,.0f}".format)})
    margin_text = "; ".join(f"on a {t.kind}, {margins[t.kind]:.1%} (`{t.pipeline}` {t.mode}, {t.model}, "
                            f"{int(t.cpus)} cores, run {t.run})" for t in tops.itertuples())
    return "\n".join([
        "# An early rule on the committed runs", "", f"Generated by `{command}` (`bench/report/early.py`, which "
        "states the rule).", "",
        "## The margin", "",
        f"Processes of {MIN_WINDOWS} windows or more, e2e and model-only, one GPU or the CPU: {len(found):,}; their "
        f"first window timed after a warm-up the harness called steady: {len(steady):,} (the others' first windows "
        f"are not the rule's to read). The largest move of a later window from the first among those, the margin: "
        f"{margin_text}. A process ends after its first window where that window's share of model-only's lowest "
        f"process, raised by the margin, is under {FED:.0%} / (1 + margin): no later window could make the cell "
        "fed, nor its windows' move call it noisy.", "",
        table(by), "",
        "## The rule on every run", "",
        (f"Verdicts changed: in {len(changed)} runs (below)." if len(changed) else
         "Verdicts changed: none: every cell where the rule fired kept its verdict.")
        + f" Window time it would have saved: {saved:,.0f} of {spent:,.0f} s ({saved / spent:.0%}).", "",
        table(shown), ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="where the committed runs are (results)")
    parser.add_argument("--out", type=Path, required=True, help="the folder EARLY.md is written to")
    args = parser.parse_args(argv)
    found, per_run, margins = study(args.folder)
    args.out.mkdir(parents=True, exist_ok=True)
    command = f"python -m bench.report.early {args.folder} --out {args.out}"
    (args.out / "EARLY.md").write_text(markdown(found, per_run, margins, command))
    print(f"{args.out / 'EARLY.md'}: margins {margins}, verdicts changed in "
          f"{int((per_run.changed != 'none').sum())} of {len(per_run)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
