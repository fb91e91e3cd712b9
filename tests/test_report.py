"""The report on fixture CSVs with known numbers: verdicts, crossover, failures, determinism."""
from __future__ import annotations

import pandas as pd
import pytest

from bench import cli, report, results

# model-only: fast 50k, slow 5k. Pipeline "quick": loader 100k, keeps both fed.
# "slow": loader 10k -> input-bound on the fast model, fed on the slow one. "clash": loader 80k,
# e2e on the fast model 20k -> below both ceilings (contention).
RATES = {("loader", "quick", "none"): 100_000, ("loader", "slow", "none"): 10_000,
         ("loader", "clash", "none"): 80_000,
         ("model", "none", "fast"): 50_000, ("model", "none", "slow-net"): 5_000,
         ("e2e", "quick", "fast"): 49_000, ("e2e", "quick", "slow-net"): 4_990,
         ("e2e", "slow", "fast"): 9_800, ("e2e", "slow", "slow-net"): 4_900,
         ("e2e", "clash", "fast"): 20_000}


def fixture_csv(path) -> str:
    rows = []
    for (mode, pipeline, model), rate in RATES.items():
        for repeat, jitter in enumerate((0.98, 1.0, 1.02)):
            rows.append({"run_id": "fixture", "pipeline": pipeline, "mode": mode, "model": model,
                         "batch_size": 512, "num_workers": 8, "dtype": "bfloat16", "gpu": "Test GPU",
                         "repeat": repeat, "img_per_s": rate * jitter, "wait_frac": 0.5 if mode == "e2e" else 0,
                         "status": "ok", "error": "", "torch": "2.x", "git_commit": "abc"})
    rows.append({"run_id": "fixture", "pipeline": "dali", "mode": "loader", "model": "none", "batch_size": 512,
                 "num_workers": 8, "dtype": "bfloat16", "gpu": "Test GPU", "status": "skipped",
                 "error": "NVIDIA DALI is not installed"})
    pd.DataFrame(rows).reindex(columns=results.COLUMNS).to_csv(path, index=False)
    return str(path)


@pytest.mark.parametrize("loader,model,e2e,label", [
    (100_000, 50_000, 49_000, "compute-bound"), (10_000, 50_000, 9_800, "input-bound"),
    (80_000, 50_000, 20_000, "contention"), (40_000, 50_000, 20_000, "contention")])
def test_verdict(loader, model, e2e, label):
    assert report.verdict(loader, model, e2e)[0] == label


def test_report_tables_crossover_and_failures(tmp_path):
    csv = fixture_csv(tmp_path / "results.csv")
    text = report.write([csv], tmp_path / "out").read_text()
    assert "| quick      | fast" in text and "compute-bound" in text
    assert "`slow` with fast: **input-bound** — e2e (9,800) is at the pipeline's loader-only ceiling (10,000)" in text
    assert "`clash` with fast: **contention**" in text
    assert ("`slow` keeps models up to 5,000 img/s fed at ≥ 95%; from 50,000 img/s up its loader-only rate "
            "(10,000) is the bottleneck.") in text
    assert "`quick` keeps models up to 50,000 img/s fed at ≥ 95%." in text
    assert ("`clash` keeps none of the measured models fed at ≥ 95%; fast (50,000 img/s) reaches only 40% "
            "although the loader alone is faster: contention, not the input rate.") in text
    assert "`dali` loader none: skipped — NVIDIA DALI is not installed" in text
    assert "50,000 [49,000–51,000]" in text   # median [min–max] over repeats
    assert (tmp_path / "out" / "roofline-1-bs512-bfloat16-w8.png").stat().st_size > 10_000


def test_crossover_names_a_slower_model_left_unfed_as_contention(tmp_path):
    rows = pd.read_csv(fixture_csv(tmp_path / "results.csv"))
    rows.loc[(rows.pipeline == "quick") & (rows.model == "slow-net"), "img_per_s"] = 3_000   # 60% of 5,000
    rows.to_csv(tmp_path / "results.csv", index=False)
    table, sentences = report.crossover(pd.read_csv(tmp_path / "results.csv"))
    assert ("- `quick` keeps models up to 50,000 img/s fed at ≥ 95%; slow-net (5,000 img/s) reaches only 60% "
            "although the loader alone is faster: contention, not the input rate.") in sentences
    assert table.set_index("pipeline").loc["quick", "not fed: contention"] == "slow-net (5,000)"


def test_report_is_reproducible(tmp_path):
    csv = fixture_csv(tmp_path / "results.csv")
    cli.main(["report", csv, "--out", str(tmp_path / "a")])
    cli.main(["report", csv, "--out", str(tmp_path / "b")])
    for name in ("REPORT.md", "roofline-1-bs512-bfloat16-w8.png"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_report_refuses_missing_csv(tmp_path, capsys):
    with pytest.raises(SystemExit, match="no such file"):
        cli.main(["report", str(tmp_path / "nope.csv"), "--out", str(tmp_path)])
