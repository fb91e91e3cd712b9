# runs at commit 4720982f52a2
"""The checks this run was made for, recomputed from its results.csv with the report's own reading
(bench.report): run from the repository root,

    python results/2026-11-25-h100-instrument/check.py results/2026-11-25-h100-instrument > results/2026-11-25-h100-instrument/checks.txt

- every busy window within busy.TOLERANCE of its label (and none rejected);
- no e2e or steady rate (cell medians) above model-only beyond the between-process range, and none of
  those fed (single windows above it are counted too);
- no verdict from fewer than plan.MIN_PROCESSES processes;
- 224-px `prefetch` loader-only on an idle GPU: 16 cores against 8 and 4;
- every situation's verdict, and what the run's answers say.
"""
from __future__ import annotations

import sys
from pathlib import Path

from bench import busy, plan, report


def main(folder: Path) -> int:
    df = report.load([folder / "results.csv"])
    view = report.view_of(df)
    c, s = view.cells, view.situations
    failures = 0

    def check(ok: bool, text: str) -> None:
        nonlocal failures
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {text}")

    windows = df[(df["mode"] == "loader") & (df.busy_ms > 0) & df.status.isin(["ok", "rejected"])]
    off = (windows.busy_step_ms / windows.busy_ms - 1).abs()
    check((off <= busy.TOLERANCE).all() and (windows.status == "ok").all(),
          f"busy windows: {len(windows)}, rejected {int((windows.status == 'rejected').sum())}, largest "
          f"|measured / label - 1| {off.max():.2%} (tolerance {busy.TOLERANCE:.0%})")
    models = c[c["mode"] == "model"].set_index(["model", "step", "sync_every", "cpus"])
    above = s[s.apply(lambda r: r.e2e.lo > models.loc[(r.model, r.step, r.sync_every, r.cpus)].hi, axis=1)]
    check(not (above.verdict == "fed").any(),
          f"e2e cells whose whole range is above model-only's: {len(above)}, labelled fed: "
          f"{int((above.verdict == 'fed').sum())}")
    e2e = c[c["mode"] == "e2e"]
    steady_over = [r for r in e2e.itertuples() if r.steady > models.loc[(r.model, r.step, r.sync_every, r.cpus)].hi]
    windows_over = [r for r in df[(df["mode"] == "e2e") & (df.status == "ok")].itertuples()
                    if r.steady_img_per_s > models.loc[(r.model, r.step, r.sync_every, r.cpus)].hi]
    check(not steady_over, f"e2e cells whose steady rate (median of windows) is above model-only's highest process: "
                           f"{len(steady_over)} (single windows above it: {len(windows_over)} of "
                           f"{int((df['mode'] == 'e2e').sum())})")
    thin = s[(s.e2e.map(lambda e: e.p) < plan.MIN_PROCESSES) & (s.verdict != report.TOO_FEW)]
    check(thin.empty, f"verdicts from fewer than {plan.MIN_PROCESSES} processes: {len(thin)}; fewest processes in "
                      f"any cell {int(c.p.min())}")
    large = c[(c["mode"] == "loader") & (c.pipeline == "prefetch") & (c.image_size == 224) & (c.busy_ms == 0)]
    rates = large.set_index("cpus").img_per_s
    check(len(rates) > 1 and rates.get(16.0, 0) >= rates.drop(16.0, errors="ignore").max(),
          "224-px prefetch loader-only, idle GPU: " + ", ".join(f"{int(k)} cores {report.rate(r)}"
                                                               for k, r in large.set_index("cpus").sort_index().iterrows()))
    print()
    for r in s.sort_values(["sync_every", "cpus", "pipeline"]).itertuples():
        print(f"{r.pipeline:10s} {int(r.cpus):>2d} cores, loss read every {int(r.sync_every)}: e2e {r.e2e_text} / "
              f"model-only {r.model_text} = {report.pct(r.share)}: {r.verdict} ({r.why})")
    print()
    for line in report.answers(c, s):
        print(f"- {line}")
    return failures


if __name__ == "__main__":
    sys.exit(1 if main(Path(sys.argv[1])) else 0)
