"""The same photo members on the H200 machines lent on different days: each run's machine (its kernel
build, the single-core calibration the harness records) and, per decoder and cores, the median e2e
img/s and the pipeline's CPU seconds per thousand images. DALI's CPU decoder keeps its cores busy in
every run, so its CPU seconds per image say how fast the machine's cores decode.

    python results/2026-12-04-h200-photos-ladder/machines.py > results/2026-12-04-h200-photos-ladder/MACHINES.md
"""
from pathlib import Path

import pandas as pd

RESULTS = Path(__file__).resolve().parents[1]
RUNS = ["2026-12-02-h200-split", "2026-12-04-h200-photos-ladder/part1of6", "2026-12-04-h200-photos-ladder/part3of6"]


def main() -> None:
    frames = []
    for name in RUNS:
        rows = pd.read_csv(RESULTS / name / "results.csv")
        rows = rows[(rows.status == "ok") & (rows.pipeline == "dali") & (rows["mode"] == "e2e")
                    & (rows.model == "torchvision:resnet50") & (rows.dali_decoder.notna())]
        frames.append(rows.assign(run=name, commit=rows.git_commit.str[:7],
                                  kernel=rows.platform.str.extract(r"fc-(v\d+)", expand=False)))
    rows = pd.concat(frames)
    table = (rows.groupby(["cpus", "dali_decoder", "dali_cpu_share", "run", "commit", "kernel", "host_calibration_ms"])
             .agg(img_per_s=("img_per_s", "median"), cpu_s_per_kimg=("pipeline_cpu_s_per_kimg", "median"),
                  windows=("img_per_s", "size"), processes=("process", "nunique"))
             .reset_index().sort_values(["cpus", "dali_decoder", "dali_cpu_share", "run"], ascending=[False, True, True, True]))
    table["img_per_s"] = table.img_per_s.round().astype(int)
    table["cpu_s_per_kimg"] = table.cpu_s_per_kimg.round(2)
    print(table.to_markdown(index=False))


if __name__ == "__main__":
    main()
