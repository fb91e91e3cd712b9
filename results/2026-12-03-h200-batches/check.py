"""Issue 68's checks on this run's rows (and vit/'s where it ran), printed:
`python results/2026-12-03-h200-batches/check.py` (from the project root; its output is checks.txt)."""
from pathlib import Path

import pandas as pd

here = Path(__file__).parent


def members(ok: pd.DataFrame) -> pd.DataFrame:
    """Each row's member, named by the knobs this run varies."""
    def knob(column, text):
        return ok[column].map(lambda v: "" if pd.isna(v) or v in (0, 1, "samples") else text(v))
    return ok.assign(member=ok.pipeline.where(ok["mode"] == "e2e", "model-only")
                     + ok.dali_decoder.map(lambda d: "" if pd.isna(d) else f" {d}")
                     + knob("dali_cpu_share", lambda s: f" cpu {s:g}") + knob("dali_split", lambda s: f" {s}")
                     + knob("dali_gpu_pipelines", lambda g: f" x{g:g}")
                     + ok.dali_hw_decoder_load.map(lambda h: "" if pd.isna(h) else f" hw {h:g}"))


for run in (here, here / "vit"):
    if not (run / "results.csv").exists():
        continue
    rows = pd.read_csv(run / "results.csv")
    ok = members(rows[rows.status == "ok"])
    print(f"== {run.relative_to(here.parent)}: rows {len(rows)}, ok {len(ok)}, models {', '.join(ok.model.unique())}, "
          f"commit {', '.join(ok.git_commit.unique())}, UTC {ok.timestamp.min()} to {ok.timestamp.max()}")
    process = ok.groupby(["cpus", "member", "process"]).img_per_s.median()
    cell = process.groupby(["cpus", "member"]).agg(["median", "min", "max", "count"])
    model = cell.xs("model-only", level="member")
    print("img/s per cell: median, lowest and highest process (each the median of its windows), processes; "
          "and over the cell's model-only median (%):")
    share = 100 * cell.div(model["median"], level="cpus", axis=0)[["median", "min", "max"]]
    print(cell.round(0).join(share.round(1).add_suffix(" %")).to_string())
    print("GPU-decoding members: batches per second all nvJPEG pipelines made together (whole batches: the cell "
          "median x their share / 256; within batches: the cell median / 256) and per pipeline:")
    for (cpus, name), c in cell.iterrows():
        if "mixed" not in name:
            continue
        one = ok[(ok.cpus == cpus) & (ok.member == name)].iloc[0]
        gpus, share_cpu = int(one.dali_gpu_pipelines), float(one.dali_cpu_share)
        whole = one.dali_split == "batches"
        made = c["median"] * ((1 - share_cpu) if whole else 1) / 256
        print(f"  {cpus:g} cores, {name}: {made:.1f} batches/s of {256 if whole else 256 - round(share_cpu * 256)} "
              f"photographs from {gpus} nvJPEG pipeline(s), {made / gpus:.1f} each")
    print("each member's time per batch over the step's own (256 / e2e - 256 / model-only, cell medians, ms):")
    for (cpus, name), c in cell.iterrows():
        if name != "model-only":
            step = 256e3 / model.loc[cpus, "median"]
            print(f"  {cpus:g} cores, {name}: step {step:.1f} ms, period {256e3 / c['median']:.1f} ms, "
                  f"+{256e3 / c['median'] - step:.1f} ms")
    highest = process.xs("model-only", level="member").groupby("cpus").max()
    above = [(cpus, name) for (cpus, name, _), v in process.items() if name != "model-only" and v > highest[cpus]]
    print(f"e2e processes above their cell's highest model-only process: {above or 'none'}")
    e2e = ok[ok["mode"] == "e2e"]
    print("the JPEG engine's utilization at each e2e window's end (NVML, %): min, median, max; warm-up steady windows:")
    print(e2e.groupby(["cpus", "member"]).agg(jpg_min=("gpu_jpg_util", "min"), jpg_median=("gpu_jpg_util", "median"),
                                              jpg_max=("gpu_jpg_util", "max"), steady=("warmup_steady", "sum"),
                                              windows=("warmup_steady", "count")).to_string())
    print()
