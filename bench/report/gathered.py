"""One answer table gathered from several runs — a plan's parts (`sweep --part K/N`), each run in a
lease of its own — for SUMMARY.md, the top of REPORT.md and the README's `table` block. Each cell is
one run's verdict (model-only and every pipeline of the cell timed in that run's processes, as
`summary.measured_table` gives it for one run) and names that run by a letter, listed under the table
with its commit and when it ran. Never pooled: a cell measured by two of the runs, runs on different
GPUs, or runs at different settings (image size, batch, dtype) are refused in one line.
"""
from __future__ import annotations

import string

import pandas as pd

from .analysis import SETTING, RunView
from .formatting import code, escape, table
from .summary import measured_table, which_header

CELL = ["model", "step", "cpus"]


def gathered(found: list[tuple[str, pd.DataFrame, RunView]]) -> list[str]:
    """Markdown lines: the runs' e2e cells (`found`: (name, rows, `view_of` them) per run) in one table of model x
    CPU cores, each cell followed by its run's letter, then the letters' runs; [] where fewer than two
    of the runs hold e2e cells. ValueError as the module docstring says."""
    parts = []
    for name, group, view in found:
        s = view.situations
        s = s[s.sync_every.fillna(0) == 0] if len(s) else s
        if len(s):
            k = len(parts)
            parts.append((string.ascii_lowercase[k] if k < 26 else f"r{k + 1}", name, group, s))
    if len(parts) < 2:
        return []
    gpus = sorted({gpu for *_, group, _ in parts for gpu in set(group.gpu.dropna())})
    if len(gpus) > 1:
        raise ValueError(f"one table gathers runs of one GPU kind; these runs ran on {', '.join(gpus)}")
    s = pd.concat([rows.assign(part=letter) for letter, _, _, rows in parts], ignore_index=True)
    settings = s[SETTING].drop_duplicates()
    if len(settings) > 1:
        said = "; ".join(", ".join(f"{k} {v}" for k, v in row.items()) for row in settings.to_dict("records"))
        raise ValueError(f"one table gathers runs of one setting; these runs hold {said}")
    runs_of = s.groupby(CELL).part.unique()
    for (model, step, cpus), letters in runs_of[runs_of.map(len) > 1].items():
        names = ", ".join(name for letter, name, _, _ in parts if letter in letters)
        raise ValueError(f"{model} ({step} step) at {cpus:g} cores was measured by {names}: a cell's verdict "
                         "comes from one run; report them apart")
    measured = measured_table(s, lambda here: f" <sup>{here.part.iloc[0]}</sup>")
    how = f"gathered from {len(parts)} runs on {escape(gpus[0] if gpus else 'CPU')}, measured"
    lines = [which_header(s, measured, how, "(its model-only img/s at the most cores)", s.device)
             + ". Each cell is the verdict of one run (its letter), model-only and every pipeline timed in that run's "
             "processes; every number is in the [full report](REPORT.md):", "", table(measured), ""]
    for letter, name, group, _ in parts:
        commit = ", ".join(sorted(set(group.git_commit.dropna()))) or "?"
        when = pd.to_datetime(group.timestamp, utc=True, errors="coerce", format="ISO8601")
        lines.append(f"- <sup>{letter}</sup> {code(name)}: commit {escape(commit[:12])}, "
                     f"{when.min():%Y-%m-%d %H:%M}–{when.max():%H:%M} UTC")
    return lines
