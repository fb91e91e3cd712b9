"""The early rule studied on the committed runs (bench/report/early.py, issue 70): it ends a process
after its first window only where that window followed a steady warm-up and, raised by the margin,
stays under FED / (1 + margin) of model-only's lowest process; a cell so decided keeps its verdict."""
from __future__ import annotations

import pandas as pd
import pytest

from bench import results
from bench.report import analysis, early

MARGIN = 0.381


def run(tmp_path, cells: dict[str, tuple[float, bool]], move: dict[str, float] | None = None,
        thin: str = "") -> pd.DataFrame:
    """A run of model-only at 1,000 img/s and one e2e cell per entry (its rate, whether its warm-ups
    were steady), 3 processes x 2 windows each, the second window 10 % above the first (`move`: other
    moves by cell); `thin`: a cell whose last process timed one window."""
    base = {"run_id": "r", "git_commit": "c", "boot_id": "b", "gpu": "G", "batch_size": 512, "dtype": "bfloat16",
            "image_size": 32, "status": "ok", "error": "", "seconds": 2.0, "steps": 10, "model": "m", "step": "eager",
            "device": "cuda", "cpus": 16, "busy_ms": 0.0}
    rows = []
    for pipeline, (rate, steady) in {"none": (1000.0, True), **cells}.items():
        for process in range(3):
            for repeat in range(1 if pipeline == thin and process == 2 else 2):
                r = rate * (1 + (move or {}).get(pipeline, 0.1) * repeat) if pipeline != "none" else rate
                rows.append({**base, "mode": "model" if pipeline == "none" else "e2e", "pipeline": pipeline,
                             "process": process, "repeat": repeat, "img_per_s": r, "images": r,
                             "steady_img_per_s": r, "warmup_steady": steady})
    path = tmp_path / "run" / "results.csv"
    path.parent.mkdir()
    pd.DataFrame(rows).reindex(columns=results.all_columns()).to_csv(path, index=False)
    (_, group), = analysis.runs(analysis.load([path]))
    return group


def test_the_rule_ends_only_steady_processes_far_under_the_line_and_their_cells_keep_their_verdicts(tmp_path):
    group = run(tmp_path, {"slow": (200.0, True), "unsteady": (200.0, False), "close": (600.0, True)})
    view = analysis.view_of(group)
    w = early.windows(view.rows)
    fired = early.fires(w, view.situations, MARGIN)
    # 200 x 1.381 = 276 < 0.95 / 1.381 x 1,000 = 688; 600 x 1.381 = 829 is not; an unsteady warm-up is not read
    assert sorted(set(fired.pipeline)) == ["slow"] and len(fired) == 3
    after, dropped = early.simulate(view.rows, w, fired)
    assert sorted(dropped.pipeline) == ["slow"] * 3 and (dropped.repeat == 1).all()
    before = view.situations.set_index("pipeline").verdict
    assert before["slow"].startswith("not fed")
    assert after.set_index("pipeline").verdict.to_dict() == before.to_dict()


def test_a_cell_whose_other_processes_fell_short_stays_thin(tmp_path):
    group = run(tmp_path, {"slow": (200.0, True), "thin": (200.0, True)}, thin="thin")
    view = analysis.view_of(group)
    w = early.windows(view.rows)
    fired = early.fires(w, view.situations, MARGIN)
    fired = fired[fired.proc != fired.proc.max()]   # the rule fired in processes 0 and 1 alone
    after, _ = early.simulate(view.rows, w, fired)
    verdicts = after.set_index("pipeline").verdict
    assert verdicts["thin"] == "too few measurements" and verdicts["slow"].startswith("not fed")


def test_the_margin_is_the_largest_move_either_way_of_a_steady_process(tmp_path, monkeypatch):
    group = run(tmp_path, {"slow": (200.0, True), "falling": (300.0, True), "unsteady": (200.0, False)},
                move={"falling": -0.2, "unsteady": 0.9})
    monkeypatch.setattr(early, "load", lambda paths: group)
    monkeypatch.setattr(early, "committed", lambda root: [])
    found, per_run, margins = early.study(tmp_path)
    steady = found[found.steady]
    assert len(found) == 12 and len(steady) == 9   # model-only's 3 and the steady cells' 6
    assert steady[steady.pipeline == "slow"].move.round(6).eq(0.1).all()
    assert steady[steady.pipeline == "falling"].move.round(6).eq(0.2).all()
    assert margins == {"GPU": pytest.approx(0.2)}   # not the unsteady cell's 90 %
