"""Issue 68's checks on this run's rows and timeline, printed: `python results/2026-12-02-h200-dali-nvidia/check.py`
(from the project root; its output is checks.txt)."""
from pathlib import Path

import pandas as pd

here = Path(__file__).parent
rows = pd.read_csv(here / "results.csv")
ok = rows[rows.status == "ok"]
print(f"rows: {len(rows)}, ok: {len(ok)}, commit: {', '.join(ok.git_commit.unique())}, "
      f"UTC {ok.timestamp.min()} to {ok.timestamp.max()}")
member = ok.assign(member=ok.pipeline.where(ok["mode"] == "e2e", "model-only")
                   + ok.dali_reader.map(lambda r: "" if pd.isna(r) else f" {r}")
                   + ok.dali_cpu_share.map(lambda s: "" if pd.isna(s) or s == 0 else f" split {s:g}"))
process = member.groupby(["cpus", "member", "process"]).img_per_s.median()
cell = process.groupby(["cpus", "member"]).agg(["median", "min", "max", "count"])
model = cell.xs("model-only", level="member")
share = cell.div(model["median"], level="cpus", axis=0)[["median", "min", "max"]]
print("\nimg/s per cell: median, lowest and highest process (each the median of its windows), processes:")
print(cell.round(0).to_string())
print("\nthe same over the cell's model-only median (%):")
print((100 * share).round(1).to_string())
print("\nthe suite's dali (external) over DALI as NVIDIA's example (file reader), cell medians; lowest suite process "
      "over the highest file-reader process:")
for cpus in sorted(member.cpus.unique()):
    suite, file = cell.loc[(cpus, "dali external")], cell.loc[(cpus, "dali file")]
    print(f"  {cpus:g} cores: {suite['median'] / file['median'] - 1:+.1%}; {suite['min'] - file['max']:+,.0f} img/s")
print("\nthe JPEG engine's utilization at each e2e window's end (NVML, %), per cell: min, median, max:")
e2e = member[member["mode"] == "e2e"]
print(e2e.groupby(["cpus", "member"]).gpu_jpg_util.agg(["min", "median", "max"]).to_string())
print("\nwarm-up reached steady (windows), per cell:")
print(member.groupby(["cpus", "member"]).warmup_steady.agg(["sum", "count"]).to_string())

calls = pd.read_csv(here / "timeline" / "host-calls.csv")
pipeline = calls[calls.thread != "training"]
print("\ntimeline: the pipeline's threads' CUDA calls per recorded step, summed over its threads (ms, calls), "
      "and the longest single call (ms), by kind:")
print(pipeline.groupby(["pipeline", "kind"]).agg(ms=("ms_per_step", "sum"), calls=("calls_per_step", "sum"),
                                                 longest=("longest_ms", "max")).round(2).to_string())
print("\ntimeline: threads of each pipeline with a synchronizing call longer than 20 ms:")
long = pipeline[(pipeline.kind == "sync") & (pipeline.longest_ms > 20)]
print(long.groupby("pipeline").thread.count().to_string())
