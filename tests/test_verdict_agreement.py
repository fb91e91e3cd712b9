"""Every generated answer agrees with the one verdict rule (issue 67): on every committed run the
report reads and on random runs, each answer line names a pipeline's verdict and share as its
situation has them, calls fed only pipelines whose verdict is fed, names "below 95% only with epoch
restarts" only pipelines under 95%, says "no pipeline keeps it fed" only where no pipeline is fed
or undecided, and names a cell left without a verdict (thin, above model-only, noisy) only as such;
each summary table cell that names fed pipelines names only those."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench import results
from bench.report import analysis
from bench.report.verdicts import FED, NO_VERDICT
from bench.report.answers import answer
from bench.report.summary import measured_cell, short

ROOT = Path(__file__).resolve().parents[1]
RUNS = sorted(p.parent for p in (ROOT / "results").glob("*/results.csv") if (p.parent / "REPORT.md").exists()
              and "pipeline" in p.read_text().splitlines()[0])
GROUP = ["image_size", "model", "step", "sync_every", "cpus"]


def disagreements(s: pd.DataFrame) -> list[str]:
    """What the answers and summary cells of situations `s` say against their verdicts ([] where all agree)."""
    found = []
    for key, rows in (s.groupby(GROUP) if len(s) else []):
        text = answer(rows)
        fed = set(rows.pipeline[rows.verdict == "fed"])
        undecided = rows[rows.verdict.str.startswith("inconclusive") & ~rows.verdict.isin(NO_VERDICT)]
        for r in rows.itertuples():
            said = re.search(re.escape(f"`{r.pipeline}` delivers ") + r"[\d,]+ \(([^,]+(?:, cause not measured)?), "
                             r"([\d.]+)%", text)
            if said and (said.group(1) != r.verdict or said.group(2) != f"{np.floor(r.share * 1000) / 10:.1f}"):
                found.append(f"{key}: `{r.pipeline}` said {said.groups()}, is {r.verdict} {r.share:.4f}")
        use = re.search(r"keeps? it fed: use (.*?)(?: \(|;|\.$)", text)
        named = set(re.findall(r"`([^`]+)`", use.group(1))) if use else set()
        if named - fed:
            found.append(f"{key}: told to use {named - fed}, not fed")
        limit = re.search(r"the model is the limit; (.*?) keeps? it fed", text)
        if limit and set(re.findall(r"`([^`]+)`", limit.group(1))) != fed:
            found.append(f"{key}: the model is the limit, but fed are {fed}")
        if "no pipeline keeps it fed" in text and (fed or len(undecided)):
            found.append(f"{key}: 'no pipeline keeps it fed' beside fed {fed} or undecided {list(undecided.pipeline)}")
        restarts = text.split("only with epoch restarts: ")[1] if "only with epoch restarts: " in text else ""
        for name, share in re.findall(r"`([^`]+)` ([\d.]+)%", restarts):
            if float(share) >= 100 * FED:
                found.append(f"{key}: `{name}` {share}% named below {FED:.0%} only with epoch restarts")
        for r in rows[rows.verdict.isin(NO_VERDICT)].itertuples():
            if f"`{r.pipeline}` delivers" in text or f"`{r.pipeline}` keep" in text or r.pipeline in named:
                found.append(f"{key}: `{r.pipeline}` ({r.verdict}) given a verdict")
        cell = measured_cell(rows)
        if not cell.startswith(("none", "any", "thin", "noisy", "e2e above")):
            listed = set(re.findall(r"`([^`]+)`", cell.split(" (")[0].split(" ×")[0]))
            if listed - {short(p) for p in fed}:
                found.append(f"{key}: the summary cell names {listed} fed, fed are {fed}")
    return found


@pytest.mark.parametrize("run", RUNS, ids=[r.name for r in RUNS])
def test_every_committed_run_s_answers_agree_with_its_verdicts(run):
    df = analysis.load([run / "results.csv"])
    for _, group in analysis.runs(df):
        s = analysis.view_of(group).situations
        assert not disagreements(s)


def random_rows(seed: int) -> list[dict]:
    """A run of one model and four pipelines at two core counts, each cell's processes, windows,
    share of model-only, spread and drift drawn at random around the verdict's margins."""
    rng = np.random.default_rng(seed)
    base = {"run_id": "r", "git_commit": "c", "boot_id": "b", "gpu": "G", "batch_size": 512, "dtype": "bfloat16",
            "image_size": 32, "status": "ok", "error": "", "seconds": 1.0, "steps": 10, "model": "m", "step": "eager",
            "device": rng.choice(["cuda", "cpu"])}
    rows = []
    for cpus in (16, 4):
        model = 1000.0

        def cell(mode, pipeline, center):
            p, w = int(rng.integers(1, 5)), int(rng.integers(1, 4))
            spread, drift = rng.choice([0.0, 0.01, 0.05, 0.2]), rng.choice([0.0, 0.03, 0.1, -0.3, 0.9])
            for k in range(p):
                level = center * (1 + spread * rng.uniform(-1, 1))
                for j in range(w):
                    rate = level * (1 + drift * j / max(w - 1, 1))
                    rows.append({**base, "cpus": cpus, "mode": mode, "pipeline": pipeline, "process": k, "repeat": j,
                                 "img_per_s": rate, "images": rate, "busy_ms": 0.0,
                                 "steady_img_per_s": rate * rng.choice([1.0, 1.05, 1.3])})
        cell("model", "none", model)
        for name in ("dataloader", "a", "b", "c"):
            cell("e2e", name, model * rng.choice([0.2, 0.9, 0.94, 0.95, 0.97, 1.0, 1.03, 1.2]))
            if rng.random() < 0.5:
                cell("loader", name, model * rng.choice([0.3, 1.0, 3.0]))
    return rows


@pytest.mark.parametrize("seed", range(40))
def test_random_runs_answers_agree_with_their_verdicts(seed, tmp_path):
    path = tmp_path / "run" / "results.csv"
    path.parent.mkdir()
    pd.DataFrame(random_rows(seed)).reindex(columns=results.all_columns()).to_csv(path, index=False)
    (_, group), = analysis.runs(analysis.load([path]))
    assert not disagreements(analysis.view_of(group).situations)
