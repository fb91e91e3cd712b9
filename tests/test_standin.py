"""The stand-in validation (`bench.studies.standin`): its rows made into the table and the conclusion, its
refusal without CUDA (CPU), and its lanes' timing (GPU, skipped without CUDA)."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from bench.measuring import busy
from bench.studies import standin

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
# (model, side) -> step kind -> (stretch, retention), the same in each repeat but for a spread of ±0.1 in stretch
MEDIANS = {("torchvision:resnet50", "copies"): {"real": (1.5, 0.30), "busy": (3.0, 0.40)},
           ("torchvision:resnet50", "resizes"): {"real": (1.2, 0.06), "busy": (1.2, 0.45)},
           ("resnet18", "copies"): {"real": (2.0, 0.50), "busy": (1.8, 0.45)},
           ("resnet18", "resizes"): {"real": (1.1, 0.20), "busy": (1.32, 0.20)}}


def rows() -> pd.DataFrame:
    found = []
    for (model, side), kinds in MEDIANS.items():
        for kind, (stretch, kept) in kinds.items():
            for repeat, wobble in enumerate((-0.1, 0.0, 0.1)):
                found.append({"model": model, "image_size": 224 if "50" in model else 32, "batch_size": 256,
                              "step": kind, "side": side, "side_unit": standin.UNITS[side], "repeat": repeat,
                              "seconds": 1.0, "step_alone_ms": 10.0, "step_beside_ms": 10.0 * (stretch + wobble),
                              "stretch": stretch + wobble, "side_alone_per_s": 1000.0,
                              "side_beside_per_s": 1000.0 * kept, "retention": kept, "gpu": "Test GPU"})
    return pd.DataFrame(found)


def test_the_conclusion_ranges_the_busy_steps_stretch_and_side_work_against_the_real_steps():
    line = standin.conclusion(rows())
    # stretch busy / real: 2.0, 1.0, 0.9, 1.2; side kept busy - real: +10, +39, -5, 0 points
    assert line == ("Over 4 pairs of a real step and a side workload, the busy step's stretch is 0.90–2.00 × the "
                    "real step's, and beside it the side work keeps -5 to +39 points of its rate alone more than "
                    "beside the real step.")


def test_the_table_has_one_row_per_model_side_and_step_with_medians_ranges_and_n():
    table = standin.table(rows())
    assert len(table) == 8 and (table.n == 3).all()
    row = table[(table.step == "busy") & table["side work"].str.startswith("copies")
                & table.model.str.contains("resnet50")].iloc[0]
    assert row.stretch == "3.00 [2.90–3.10]" and row["side kept"] == "40 [40–40] %"
    assert row["side work"] == "copies (copies of 256 MiB)" and row["step beside ms"] == "30 [29–31]"
    text = standin.report(rows())
    assert text.count("\n| `") == 8 and standin.conclusion(rows()) in text


def test_without_cuda_it_refuses_in_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert standin.main(["--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CUDA" in err and not (tmp_path / "out").exists()


@needs_cuda
def test_a_lane_times_a_busy_step_alone_at_its_idle_time():
    step = busy.BusyStep(torch.device("cuda"), 2.0)
    lane = standin.Lane(step, torch.cuda.current_stream())
    standin.timed([lane], 0.2)
    (ms,) = standin.timed([lane], 0.5)
    assert abs(ms / step.idle_ms - 1) < busy.TOLERANCE, (ms, step.idle_ms)
