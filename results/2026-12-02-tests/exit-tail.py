"""How long `pipebench compare` takes to exit after its last line (its work done): the time pipebench's exit
spends ending the processes it started (`bench/running/reaping.py`) and unloading torch.

    python results/2026-12-02-tests/exit-tail.py [TREE] [N]

TREE: the source tree to run (`python -m bench.cli` from it; this checkout by default), N runs (5). Each run
is a one-configuration `compare` (model-only, 2 steps, CPU); printed: its seconds to the last line, to the
exit, and the difference, then their median.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

tree = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
tails = []
with tempfile.TemporaryDirectory() as tmp:
    for i in range(runs):
        shutil.rmtree(f"{tmp}/run", ignore_errors=True)
        started = time.monotonic()
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.cli", "compare", "--device", "cpu", "--pipelines", "resident", "--modes",
             "model", "--processes", "1", "--steps", "2", "--warmup", "0", "--repeats", "1", "--data-root",
             f"{tmp}/data", "--out", f"{tmp}/run"], cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        last = started
        for line in process.stdout:
            last = time.monotonic()
        process.wait()
        ended = time.monotonic()
        tails.append(ended - last)
        print(f"run {i + 1}: last line {last - started:.2f} s, exit {ended - started:.2f} s, "
              f"after the last line {ended - last:.2f} s, exit code {process.returncode}")
print(f"after the last line, median of {runs}: {statistics.median(tails):.2f} s "
      f"[{min(tails):.2f}–{max(tails):.2f}]")
