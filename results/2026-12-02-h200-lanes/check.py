"""Issue 68's checks on this run's rows, printed: `python results/2026-12-02-h200-lanes/check.py`
(from the project root; its output is checks.txt)."""
from pathlib import Path

import pandas as pd

rows = pd.read_csv(Path(__file__).with_name("results.csv"))
ok = rows[rows.status == "ok"]
print(f"rows: {len(rows)}, ok: {len(ok)}")
member = ok.assign(member=ok.pipeline + ok.nvimgcodec_lanes.map(lambda n: "" if pd.isna(n) else f" x{n:g}"))

process = member.groupby(["cpus", "member", "process"]).img_per_s.median()
cell = process.groupby(["cpus", "member"]).agg(["median", "min", "max"])
print("\ne2e and model-only img/s per cell: median, lowest and highest process (medians of each process's windows):")
print(cell.round(0).to_string())
print("\nnvimgcodec with N lanes over one lane (cell medians), and the gap over one lane's process range:")
for cpus in sorted(member.cpus.unique()):
    one = cell.loc[(cpus, "nvimgcodec x1")]
    for lanes in (2, 4):
        n = cell.loc[(cpus, f"nvimgcodec x{lanes}")]
        print(f"  {cpus:g} cores, {lanes} lanes: {n['median'] / one['median'] - 1:+.1%}; lowest process over one lane's "
              f"highest {n['min'] - one['max']:+,.0f} img/s (one lane's range {one['max'] - one['min']:,.0f})")

print("\nthe JPEG engine's utilization at each e2e window's end (NVML, %), per cell: min, median, max:")
e2e = member[member["mode"] == "e2e"]
print(e2e.groupby(["cpus", "member"]).gpu_jpg_util.agg(["min", "median", "max"]).to_string())
print("\nwarm-up reached steady (windows) and the windows' steps, per cell:")
print(member.groupby(["cpus", "member"]).agg(steady=("warmup_steady", "sum"), windows=("warmup_steady", "count"),
                                             steps=("steps", "median")).to_string())
