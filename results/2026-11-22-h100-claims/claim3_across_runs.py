"""Claim 3 across runs: median time to completion per run, size and copy variant
(`python results/2026-11-22-h100-claims/claim3_across_runs.py`)."""
from pathlib import Path

import pandas as pd

df = pd.read_csv(Path(__file__).with_name("claims.csv"))
rows = df[(df.claim == "pin-on-the-fly") & (df.status == "ok")]
table = rows.groupby(["run_id", "level", "metric", "setting"]).value.median().unstack("setting").round(3)
print(table.to_markdown())
