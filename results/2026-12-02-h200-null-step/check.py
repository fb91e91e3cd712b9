"""Issue 67's checks on this run's rows, printed: `python results/2026-12-02-h200-null-step/check.py`
(from the project root; its output is checks.txt)."""
from pathlib import Path

import pandas as pd

rows = pd.read_csv(Path(__file__).with_name("results.csv"))
ok = rows[rows.status == "ok"]
print(f"rows: {len(rows)}, ok: {len(ok)}")

# the busy step beside a null pipeline, and each pipeline's share of what it allows, against that and its idle time
busy = ok[ok.busy_ms > 0].assign(null_stretch=lambda d: d.busy_null_ms / d.busy_idle_ms,
                                 share_null=lambda d: d.img_per_s * d.busy_null_ms / 1e3 / d.batch_size,
                                 share_idle=lambda d: d.img_per_s * d.busy_idle_ms / 1e3 / d.batch_size)
print("\nthe busy step's time per batch beside a null pipeline over its idle time, per level (one timing per loader "
      "process, before its pipeline was built):")
print(busy.drop_duplicates(["pipeline", "process", "busy_ms"]).groupby("busy_ms").null_stretch
      .agg(["count", "min", "median", "max"]).round(3).to_string())
print("\nthe busy step beside each pipeline over beside the null pipeline (busy_step_ms: GPU time; the null: host "
      "clock per batch), and the share of each window spent waiting in next(), windows:")
print(busy.assign(over_null=busy.busy_step_ms / busy.busy_null_ms).groupby(["pipeline", "busy_ms"])
      [["over_null", "wait_frac"]].agg(["min", "max"]).round(3).to_string())
print("\nshare of batch / t delivered, t beside a null pipeline (share_null) or on an idle GPU (share_idle), windows:")
print(busy.groupby(["pipeline", "busy_ms"])[["share_null", "share_idle"]].agg(["min", "median", "max"]).round(3)
      .to_string())

# windows that start steady: the warm-up rule per member, the two windows of each process, batches ready at the start
timed = ok[ok["mode"].isin(["model", "e2e"])]
print("\nwarm-up (one per process and member): reached steady / all, and its seconds")
warm = timed.drop_duplicates(["process", "pipeline"])
print(warm.groupby("pipeline").agg(steady=("warmup_steady", "sum"), members=("warmup_steady", "count"),
                                   s_min=("warmup_s", "min"), s_max=("warmup_s", "max")).round(2).to_string())
pairs = timed.sort_values("repeat").groupby(["pipeline", "process"]).img_per_s.agg(lambda r: r.iloc[-1] / r.iloc[0] - 1)
print("\nsecond window over first, minus 1, per process:")
print(pairs.unstack().round(3).to_string())
print("\nready at the start of each window (batches) and the window's steps, the drain's steps, queue capacity, and "
      "how many windows' drains stopped at their cap, 2 x (capacity + 1):")
fed = ok[ok.pipeline != "none"].assign(capped=lambda d: d.drain_steps >= 2 * (d.queue_capacity + 1))
print(fed.groupby(["pipeline", "mode", "busy_ms"]).agg(
    capacity=("queue_capacity", "first"), steps=("steps", "median"), drain_max=("drain_steps", "max"),
    capped=("capped", "sum"), windows=("capped", "count"), ready_min=("ready_at_start", "min"),
    ready_max=("ready_at_start", "max")).to_string())

# restarts: the rate without them (the restart's steps and the burst after it left out) against the rate with them
e2e = ok[ok["mode"] == "e2e"]
print("\ne2e: restart-free over the rate with restarts, and the restart (ms), per pipeline:")
print(e2e.assign(ratio=e2e.steady_img_per_s / e2e.img_per_s).groupby("pipeline")
      .agg(ratio_min=("ratio", "min"), ratio_max=("ratio", "max"), restart_ms=("restart_ms", "median")).round(3)
      .to_string())
