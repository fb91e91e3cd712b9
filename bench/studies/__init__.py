"""Studies: measurements beside the sweep, each a command of its own, that explain or check it.

`timeline` (`python -m bench.studies.timeline`: where the GPU's time goes, from a profiler trace;
`timeline_plot` draws it, `host_waits` reads the host's CUDA calls and the GPU's queues from it), `standin` (`python -m bench.studies.standin`: how well the busy step
stands in for a real training step), `stability` (`pipebench stability`: memory over many
epochs), `priority` (a pipeline's GPU work beside a busy step, by stream priority) and
`decode_stages` (a GPU-decoding producer's time per batch). They use `measuring/` and `results/` as
the sweep does; the sweep uses none of them. `write` ends the small ones: rows and page written, the
page printed.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Callable

import pandas as pd


def write(out: Path, rows: pd.DataFrame, csv_name: str, page_name: str, module: str, argv: list[str] | None,
          page: Callable[[str], str]) -> int:
    """`rows` as OUT/csv_name and `page(command)` (the command that ran, as a user types it) as
    OUT/page_name, the page printed too; exit code 0."""
    out.mkdir(parents=True, exist_ok=True)
    rows.to_csv(out / csv_name, index=False)
    command = f"python -m {module} " + shlex.join(argv if argv is not None else sys.argv[1:])
    text = page(command)
    (out / page_name).write_text(text)
    print(text)
    return 0
