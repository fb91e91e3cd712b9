"""The instrument's checks on this run's rows (issue 51), printed: `python results/2026-11-27-h100-instrument-check/check.py`
(from the project root; its output is checks.txt)."""
from pathlib import Path

import pandas as pd

rows = pd.read_csv(Path(__file__).with_name("results.csv"))
ok = rows[rows.status == "ok"]
fed = ok[ok.pipeline != "none"]
print(f"rows: {len(rows)}, ok: {len(ok)}")

# the drain: never more than the declared capacity + 1 batches; what was ready when each window began
over = (fed.drain_steps - fed.queue_capacity - 1).max()
print(f"drain: the most batches a drain took beyond its pipeline's queue_capacity + 1: {over:g}")
print(fed.groupby(["pipeline", "mode"]).agg(capacity=("queue_capacity", "first"), drain_min=("drain_steps", "min"),
                                            drain_max=("drain_steps", "max"), ready_min=("ready_at_start", "min"),
                                            ready_max=("ready_at_start", "max")).to_string())

# the busy step: the same work units in every window of a process and level, and its stretch beside each pipeline
busy = ok[ok.busy_ms > 0]
units = busy.groupby(["pipeline", "process", "busy_ms"]).busy_units.nunique().max()
print(f"\nbusy step: distinct work units within one process and level (1 = never refit): {units}")
print(busy.groupby(["pipeline", "busy_ms"]).busy_stretch.agg(["min", "median", "max"]).round(3).to_string())

# the carry-over-balanced order: each member first once, each ordered pair (a right after b) once
shared = ok[ok["mode"].isin(["model", "e2e"])].drop_duplicates(["process", "pipeline"]).sort_values(["process", "slot"])
orders = shared.groupby("process").pipeline.apply(list)
pairs = pd.Series([(a, b) for order in orders for a, b in zip(order, order[1:])]).value_counts()
print(f"\norder per process: {orders.to_dict()}")
print(f"first: {sorted(o[0] for o in orders)}; ordered pairs: {len(pairs)} distinct, each {sorted(set(pairs))} time(s)")

# the GPU readings per window
print(f"\nreadings: gpu_temp_c {ok.gpu_temp_c.min():g}-{ok.gpu_temp_c.max():g} C, gpu_power_w "
      f"{ok.gpu_power_w.min():.0f}-{ok.gpu_power_w.max():.0f} W, clock_events {ok.clock_events.value_counts().to_dict()}")
print(ok.groupby(["mode", "busy_ms", "clock_events"]).size().to_string())

# CPU booked where it is spent: the training thread's seconds inside next() (next_cpu_s) go to the pipeline
cpu = fed[fed["mode"] == "e2e"].assign(inside=lambda d: d.next_cpu_s / d.train_cpu_s)
print("\ne2e: share of the training thread's CPU spent inside next(), and the pipeline's CPU s per 1,000 images")
print(cpu.groupby("pipeline").agg(inside=("inside", "median"), pipeline_cpu_s_per_kimg=("pipeline_cpu_s_per_kimg",
                                                                                         "median"),
                                  next_syncs=("next_syncs", "first")).round(3).to_string())
