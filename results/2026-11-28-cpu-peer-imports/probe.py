"""How long a CPU `compare` of one configuration takes in a fresh pipebench process, and then isolated
(its own child process) and not (`--no-isolate`) in the same process; from the root of a checkout:

    python results/2026-11-28-cpu-peer-imports/probe.py

The first run pays the parent's imports and the forkserver's start; the later isolated ones the child's
start alone. Which of the optional peers (DALI, FFCV, timm, SPDL, torchcodec) the parent imported is printed.
"""
import sys
import tempfile
import time
from pathlib import Path

PEERS = ("nvidia.dali", "ffcv", "timm", "spdl", "torchcodec")


def main() -> None:
    from pipelines import sources
    root = Path(tempfile.mkdtemp(prefix="peer-imports-"))
    sources.ensure_synthetic(root, seed=0)
    from bench import cli

    def run(*extra: str) -> float:
        start = time.perf_counter()
        cli.main(["compare", "--device", "cpu", "--processes", "1", "--data-root", str(root), "--max-samples", "64",
                  "--batch-size", "16", "--steps", "2", "--warmup", "0", "--repeats", "2", "--workers", "1",
                  "--modes", "loader", "--pipelines", "resident", "--out", tempfile.mkdtemp(), *extra])
        return time.perf_counter() - start

    first = run()
    print(f"first isolated run in a fresh process: {first:.2f} s; peers the parent imported: "
          f"{[name for name in PEERS if name in sys.modules]}")
    for k in range(3):
        print(f"isolated run {k + 2}: {run():.2f} s")
    for k in range(3):
        print(f"--no-isolate run {k + 1}: {run('--no-isolate'):.2f} s")


if __name__ == "__main__":
    main()
