"""`bench.studies.priority`: refuses without CUDA in one line; its table is its rows' medians."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from bench.studies import priority


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_without_cuda_it_says_so_in_one_line(tmp_path, capsys):
    assert priority.main(["--out", str(tmp_path / "p")]) == 2
    assert capsys.readouterr().err.strip() == "priority: needs a CUDA device"
    assert not (tmp_path / "p").exists()


def test_the_table_gives_each_condition_and_priority_its_median_and_range():
    rows = pd.DataFrame(dict(condition=["idle"] * 3 + ["beside the busy step"] * 3, priority=["high"] * 6,
                             sample=[0, 1, 2] * 2, ms=[1.0, 2.0, 9.0, 5.0, 6.0, 7.0]))
    text = priority.report(rows, "python -m bench.studies.priority --out x", "a GPU")
    assert "| idle | high | 3 | 2.00 [1.00–9.00] |" in text
    assert "| beside the busy step | high | 3 | 6.00 [5.00–7.00] |" in text


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_it_measures_both_priorities_idle_and_beside_the_busy_step(tmp_path):
    assert priority.main(["--out", str(tmp_path), "--samples", "2"]) == 0
    rows = pd.read_csv(tmp_path / "priority.csv")
    assert len(rows) == 8 and set(rows.priority) == {"default", "high"} and (rows.ms > 0).all()
