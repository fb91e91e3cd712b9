"""Issue 68's checks on this run's timeline beside the compiled step's timeline of
../2026-12-02-h200-dali-nvidia, printed: `python results/2026-12-02-h200-sync-calls/check.py` (from the
project root; its output is checks.txt)."""
from pathlib import Path

import pandas as pd

here = Path(__file__).parent
runs = {"graph (this run)": here / "timeline", "compile (2026-12-02-h200-dali-nvidia)":
        here.parent / "2026-12-02-h200-dali-nvidia" / "timeline"}
print("per configuration and step kind, medians over the recorded steps (ms): the step's span, its period, the "
      "period less the span (what the step waited for its input each step), and the span over the period:")
for step, folder in runs.items():
    df = pd.read_csv(folder / "timeline.csv")
    df = df.assign(extra_ms=df.period_ms - df.step_span_ms)
    m = df.groupby("pipeline", sort=False)[["step_span_ms", "period_ms", "extra_ms"]].median()
    m["span / period %"] = 100 * m.step_span_ms / m.period_ms
    print(f"\n{step}:\n{m.round(2).to_string()}")
syncs = pd.read_csv(here / "timeline" / "host-syncs.csv")
print("\nthis run: the pipelines' synchronizing calls by name (per recorded step; ms; shares):")
print(syncs.round(4).to_string(index=False))
