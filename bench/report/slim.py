"""Committed results kept small, so that the working tree travels to a GPU machine beside the largest
file it must carry (issue 70's leases: a DALI chunk of 40 MiB in a call of at most 64 MiB):

- logs at the frames a terminal shows: a progress bar (tqdm) redraws its line with a carriage return
  many times a second, and a log captured to a file keeps every frame (a 32-px ladder part's sweep.txt:
  three quarters frames); each line keeps its last frame, what the terminal showed when it ended;
- plots as PNGs of at most 256 colours (`plots.small_png`: a third of the bytes; the report's plots
  are written so).

    python -m bench.report.slim results   # every log and PNG under results/, in place
"""
from __future__ import annotations

import sys
from pathlib import Path

from .plots import small_png

LOGS = ("*.txt", "*.log")


def last_frames(data: bytes) -> bytes:
    """`data` with each line's carriage-return frames cut to its last (a line ending in one kept)."""
    return b"\n".join(line.rstrip(b"\r").rsplit(b"\r", 1)[-1] + line[len(line.rstrip(b"\r")):]
                      for line in data.split(b"\n"))


def slim(root: Path) -> list[Path]:
    """Every log and PNG under `root` rewritten small; the ones that changed."""
    changed = []
    files = [(p, last_frames) for pattern in LOGS for p in root.rglob(pattern)] + \
            [(p, small_png) for p in root.rglob("*.png")]
    for path, smaller in sorted(files):
        data = path.read_bytes()
        if data != (kept := smaller(data)):
            path.write_bytes(kept)
            changed.append(path)
    return changed


if __name__ == "__main__":
    for folder in sys.argv[1:] or ["results"]:
        for path in slim(Path(folder)):
            print(path)
