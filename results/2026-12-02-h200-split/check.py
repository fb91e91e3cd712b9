"""Issue 68's checks on this run's rows and its second plan's (hw/), printed:
`python results/2026-12-02-h200-split/check.py` (from the project root; its output is checks.txt)."""
from pathlib import Path

import pandas as pd

here = Path(__file__).parent
for run in (here, here / "hw"):
    rows = pd.read_csv(run / "results.csv")
    ok = rows[rows.status == "ok"]
    print(f"== {run.relative_to(here.parent)}: rows {len(rows)}, ok {len(ok)}, commit {', '.join(ok.git_commit.unique())}, "
          f"UTC {ok.timestamp.min()} to {ok.timestamp.max()}")
    member = ok.assign(member=ok.pipeline.where(ok["mode"] == "e2e", "model-only")
                       + ok.dali_decoder.map(lambda d: "" if pd.isna(d) else f" {d}")
                       + ok.dali_cpu_share.map(lambda s: "" if pd.isna(s) or s == 0 else f" split {s:g}")
                       + ok.dali_hw_decoder_load.map(lambda h: "" if pd.isna(h) else f" hw {h:g}"))
    threads = member.groupby("cpus").dali_threads.max()   # the rows' dali_threads (the cores less one)
    process = member.groupby(["cpus", "member", "process"]).img_per_s.median()
    cell = process.groupby(["cpus", "member"]).agg(["median", "min", "max", "count"])
    model = cell.xs("model-only", level="member")
    print("img/s per cell: median, lowest and highest process (each the median of its windows), processes; "
          "and over the cell's model-only median (%):")
    share = 100 * cell.div(model["median"], level="cpus", axis=0)[["median", "min", "max"]]
    print(cell.round(0).join(share.round(1).add_suffix(" %")).to_string())
    print("GPU-decoding cells: the nvJPEG pipeline's batches per second (a part of every batch: the cell median / 256) "
          "and its photographs per batch; split cells: photographs per second each decoder took (the cell median x "
          "its share), and per thread:")
    for (cpus, name), c in cell.iterrows():
        if "mixed" not in name:
            continue
        s = float(name.split(" split ")[1].split()[0]) if " split " in name else 0.0
        print(f"  {cpus:g} cores, {name}: nvJPEG {c['median'] / 256:.1f} batches/s of {256 - round(s * 256)} photographs")
        if s == 0:
            continue
        mixed = max(1, round(int(threads[cpus]) / 4))   # pipelines/dali.py's rule for a split (26fd181)
        cpu_threads = int(threads[cpus]) - mixed
        print(f"  {cpus:g} cores, {name}: CPU decoder {s * c['median']:,.0f} img/s on {cpu_threads} threads "
              f"({s * c['median'] / cpu_threads:,.0f} per thread), nvJPEG {(1 - s) * c['median']:,.0f} img/s "
              f"on {mixed}")
    for (cpus, name), c in cell.iterrows():
        if name.startswith("dali cpu"):
            print(f"  {cpus:g} cores, {name} (alone): {c['median'] / int(threads[cpus]):,.0f} img/s per thread on {int(threads[cpus])}")
    highest = process.xs("model-only", level="member").groupby("cpus").max()
    above = [(cpus, name) for (cpus, name, _), v in process.items() if name != "model-only" and v > highest[cpus]]
    print(f"e2e processes above their cell's highest model-only process: {above or 'none'}")
    e2e = member[member["mode"] == "e2e"]
    print("the JPEG engine's utilization at each e2e window's end (NVML, %): min, median, max; warm-up steady windows:")
    print(e2e.groupby(["cpus", "member"]).agg(jpg_min=("gpu_jpg_util", "min"), jpg_median=("gpu_jpg_util", "median"),
                                              jpg_max=("gpu_jpg_util", "max"), steady=("warmup_steady", "sum"),
                                              windows=("warmup_steady", "count")).to_string())
    print()
