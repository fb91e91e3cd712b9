"""Time `ensure_synthetic` (the default data's first generation: 60,000 images, their batch files and
checksums) as pipebench made it at 014cc4c (whole arrays) and in this tree (CHUNK images at a time),
RUNS fresh processes each, alternating, on this machine; prints the median and [min-max] of wall and CPU
seconds and of the process's peak memory (its imports included; min(GENERATORS, cores) batch files are made
at once), whether each imported its own tree's module, and whether both wrote the same CHECKSUMS.json.

    python results/2026-12-02-tests/synthetic-time.py > results/2026-12-02-tests/synthetic-time.txt
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BEFORE = "014cc4c"
RUNS = 5
ONE = r"""
import json, resource, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
from pipelines.sources import synthetic
folder = tempfile.mkdtemp(dir=sys.argv[2])
t0 = time.perf_counter()
out = synthetic.ensure_synthetic(folder)
wall = time.perf_counter() - t0
used = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": wall, "cpu": used.ru_utime + used.ru_stime, "rss": used.ru_maxrss / 2**20,
                  "own": synthetic.__file__.startswith(sys.argv[1]),
                  "checksums": (out / "CHECKSUMS.json").read_text()}))
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        before.mkdir()
        archive = subprocess.run(["git", "archive", BEFORE, "pipelines"], cwd=ROOT, check=True, capture_output=True)
        subprocess.run(["tar", "x", "-C", str(before)], input=archive.stdout, check=True)
        trees = {f"{BEFORE} (whole arrays)": before, "this tree (CHUNK at a time)": ROOT}
        seen = {name: [] for name in trees}
        for _ in range(RUNS):
            for name, tree in trees.items():
                done = subprocess.run([sys.executable, "-c", ONE, str(tree), tmp], check=True, capture_output=True,
                                      text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
                seen[name].append(json.loads(done.stdout))
    print(f"ensure_synthetic(seed=0) in a fresh process, {RUNS} runs each, alternating; {os.cpu_count()} cores; "
          "CPU: the process's user + system seconds, its import of numpy and pipelines included")
    for name, runs in seen.items():
        wall, cpu, rss = ([r[k] for r in runs] for k in ("wall", "cpu", "rss"))
        print(f"{name}: wall {statistics.median(wall):.2f} s [{min(wall):.2f}-{max(wall):.2f}], "
              f"CPU {statistics.median(cpu):.2f} s [{min(cpu):.2f}-{max(cpu):.2f}], "
              f"peak memory {statistics.median(rss):.2f} GiB [{min(rss):.2f}-{max(rss):.2f}]; "
              f"imported from its tree: {all(r['own'] for r in runs)}")
    sums = {r["checksums"] for runs in seen.values() for r in runs}
    print("the same CHECKSUMS.json in every run:", len(sums) == 1, json.loads(sums.pop())["crc32"] if len(sums) == 1 else "")


if __name__ == "__main__":
    main()
