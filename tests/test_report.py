"""The report on fixture CSVs with known numbers: verdicts, crossover, failures, determinism."""
from __future__ import annotations

from types import SimpleNamespace

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


def r(median, spread=0.0):
    """A `medians` row: median img/s with a [min-max] range of ± spread (a fraction)."""
    return SimpleNamespace(img_per_s=median, low=median * (1 - spread), high=median * (1 + spread), n=3)


@pytest.mark.parametrize("loader,model,e2e,label", [
    (r(100_000), r(50_000), r(49_000), "fed"), (r(10_000), r(50_000), r(9_800), "input-bound"),
    (r(80_000), r(50_000), r(20_000), "slower than both"), (r(40_000), r(50_000), r(20_000), "slower than both"),
    (None, r(50_000), r(20_000), "not fed"), (None, r(50_000), r(49_000), "fed"),
    (r(100_000), r(50_000), r(47_380), "slower than both"),   # 94.76%: just under the threshold
    (r(100_000), r(50_000, 0.04), r(46_000, 0.05), "fed"),     # 92%, but the ranges overlap
    (r(48_000, 0.05), r(50_000, 0.05), r(20_000), "slower than both"),   # loader within noise of the model
])
def test_verdict(loader, model, e2e, label):
    assert report.verdict(loader, model, e2e)[0] == label


def test_verdict_says_what_it_rests_on():
    assert report.verdict(None, r(50_000), r(20_000))[1].endswith("loader-only not measured, so the cause is not known")
    assert "(ranges overlap: within noise)" in report.verdict(r(1e6), r(50_000, 0.04), r(46_000, 0.05))[1]
    assert report.verdict(r(1e6), r(50_000), r(47_380))[1].startswith("e2e (47,380) is below loader-only")


@pytest.mark.parametrize("share,text", [(0.9476, "94.7%"), (0.95, "95.0%"), (0.9999, "99.9%"), (1.2, "120.0%")])
def test_pct_rounds_down(share, text):
    assert report.pct(share) == text


def test_report_tables_crossover_and_failures(tmp_path):
    csv = fixture_csv(tmp_path / "results.csv")
    text = report.write([csv], tmp_path / "out").read_text()
    assert "| quick      | fast" in text
    assert ("`slow` with fast (e2e (9,800) is at the loader-only rate (10,000), below model-only (50,000))") in text
    assert "**Slower than both ceilings:** `clash` with fast (e2e (20,000) is below loader-only (80,000)" in text
    assert ("`slow` keeps every measured model up to slow-net (5,000 img/s) fed; from fast (50,000 img/s) up its "
            "loader-only rate (10,000) is the limit.") in text
    assert "`quick` keeps every measured model up to fast (50,000 img/s) fed." in text
    assert "`clash` keeps none of the measured models fed; fast not fed although the loader alone is faster." in text
    assert "`dali` loader none: skipped — NVIDIA DALI is not installed" in text
    assert "50,000 [49,000–51,000] n=3" in text   # median [min–max] over n windows
    assert (tmp_path / "out" / "fed-1-32px-bs512-bfloat16-w8-eager.png").stat().st_size > 10_000
    assert text.index("## Summary") < text.index("## Environment") < text.index(f"## {tmp_path.name}: Test GPU")


def test_crossover_is_a_frontier_not_a_best_case(tmp_path):
    rows = pd.read_csv(fixture_csv(tmp_path / "results.csv"))
    rows.loc[(rows.pipeline == "quick") & (rows.model == "slow-net"), "img_per_s"] = 3_000   # 60% of 5,000
    rows.to_csv(tmp_path / "results.csv", index=False)
    table, sentences = report.crossover(report.medians(report.load([tmp_path / "results.csv"])))
    quick = table.set_index("pipeline").loc["quick"]
    assert quick["fastest model kept fed (model-only img/s)"] == "none"   # fast is fed, the slower slow-net is not
    assert quick["not fed: slower than both"] == "slow-net (5,000)"
    assert "`quick` keeps none of the measured models fed; slow-net not fed although the loader alone is faster." in sentences[0]


def test_missing_loader_rows_are_not_measured_never_infinite(tmp_path):
    rows = pd.read_csv(fixture_csv(tmp_path / "results.csv"))
    rows = rows[rows["mode"] != "loader"]
    rows.to_csv(tmp_path / "results.csv", index=False)
    m = report.medians(report.load([tmp_path / "results.csv"]))
    table, sentences = report.crossover(m)
    clash = table.set_index("pipeline").loc["clash"]
    assert clash["not fed: loader-only not measured"] == "fast (50,000)" and clash["not fed: slower than both"] == "—"
    assert "although the loader alone is faster" not in sentences[0]
    rows_, paragraph = report.pipeline_table(m)
    assert rows_.set_index("pipeline").loc["clash", "loader-only img/s"] == "not measured"
    assert "**Not fed, cause not measured:** `clash`" in paragraph[0]


def test_report_is_reproducible(tmp_path):
    csv = fixture_csv(tmp_path / "results.csv")
    cli.main(["report", csv, "--out", str(tmp_path / "a")])
    cli.main(["report", csv, "--out", str(tmp_path / "b")])
    for name in ("REPORT.md", "SUMMARY.md", "fed-1-32px-bs512-bfloat16-w8-eager.png"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_a_section_names_the_invocations_and_mixed_settings_it_pools(tmp_path):
    rows = pd.read_csv(fixture_csv(tmp_path / "results.csv"))
    rows.loc[rows.repeat == 2, ["run_id", "git_commit", "warmup"]] = ["second", "def", 20]
    rows.loc[rows.repeat != 2, "warmup"] = 10
    rows.to_csv(tmp_path / "results.csv", index=False)
    text = report.write([tmp_path / "results.csv"], tmp_path / "out").read_text()
    assert "Rows from 2 invocations of this results file (run ids `fixture`, `second`); commit abc, def" in text
    assert "**Mixed settings pooled here:** warmup 10 / 20." in text


def test_two_results_files_are_never_pooled(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        fixture_csv(tmp_path / name / "results.csv")
    text = report.write([tmp_path / "a" / "results.csv", tmp_path / "b" / "results.csv"], tmp_path / "out").read_text()
    assert "## a: Test GPU" in text and "## b: Test GPU" in text
    a, b = text.split("## a: Test GPU")[1].split("## b: Test GPU")
    assert a.count("50,000 [49,000–51,000] n=3") == b.count("50,000 [49,000–51,000] n=3") > 0
    assert "n=6" not in text   # the two files' windows never pooled


def test_summary_recommends_from_the_rows_and_readme_block_regenerates(tmp_path):
    csv = fixture_csv(tmp_path / "results.csv")
    readme = tmp_path / "README.md"
    readme.write_text(f"# T\n\n{report.README_START}\nOLD-SUMMARY\n{report.README_END}\n\nrest\n")
    report.write([csv], tmp_path / "out", readme)
    summary = (tmp_path / "out" / "SUMMARY.md").read_text()
    # fast: quick 49,000 fed; slow-net: quick 4,990 and slow 4,900 overlap ([4,890–5,090] vs [4,802–4,998])
    assert "| fast (50,000)" in summary and "`quick`" in summary
    assert "`quick` (within noise: `slow`)" in summary
    assert "| not measured" in summary   # no dataloader rows: no speed-up over it
    text = readme.read_text()
    assert "OLD-SUMMARY" not in text and text.endswith(f"{report.README_END}\n\nrest\n")
    heading = f"{tmp_path.name}: Test GPU, 32 px, batch 512, bfloat16, 8 workers, eager step"
    assert f"]({(tmp_path / 'out').as_posix()}/REPORT.md#{report.anchor(heading)})" in text
    assert report.anchor("run-1: GPU X, 32 px, batch 512") == "run-1-gpu-x-32-px-batch-512"
    with pytest.raises(ValueError, match="needs the lines"):
        report.write([csv], tmp_path / "out", tmp_path / "out" / "SUMMARY.md")


def test_report_refuses_missing_csv(tmp_path, capsys):
    with pytest.raises(SystemExit, match="no such file"):
        cli.main(["report", str(tmp_path / "nope.csv"), "--out", str(tmp_path)])


def stage_rows(run_id="fixture", size=32, stages=(), copy="pageable", batch_bytes=512 * 3072, models=()):
    """Rows for stage ceilings {(pipeline, stage): img/s} and model-only {model: img/s} at one size."""
    rows = []
    for repeat in range(3):
        for (pipeline, stage), rate in dict(stages).items():
            rows.append({"run_id": run_id, "pipeline": pipeline, "mode": "stage", "stage": stage, "model": "none",
                         "image_size": size, "batch_size": 512, "num_workers": 8, "dtype": "bfloat16",
                         "gpu": "Test GPU", "repeat": repeat, "img_per_s": rate, "steps": 10, "images": 5120,
                         "copy": copy, "batch_bytes": batch_bytes, "wait_frac": 0, "status": "ok", "error": ""})
        for model, rate in dict(models).items():
            rows.append({"run_id": run_id, "pipeline": "none", "mode": "model", "model": model, "image_size": size,
                         "batch_size": 512, "num_workers": 8, "dtype": "bfloat16", "gpu": "Test GPU",
                         "repeat": repeat, "img_per_s": rate, "wait_frac": 0, "status": "ok", "error": ""})
    return pd.DataFrame(rows)


def test_stage_ceilings_predict_the_bottleneck_and_flag_disagreement(tmp_path):
    base = pd.read_csv(fixture_csv(tmp_path / "base.csv"))
    stages = pd.concat([
        stage_rows(stages={("slow", "host"): 10_500, ("slow", "h2d-pageable"): 200_000, ("slow", "h2d-pinned"): 900_000,
                           ("slow", "device"): 1_000_000}),
        stage_rows(stages={("clash", "host"): 90_000, ("clash", "h2d-pageable"): 100_000,
                           ("clash", "h2d-pinned"): 500_000, ("clash", "device"): 300_000}, copy="pinned")])
    csv = tmp_path / "results.csv"
    pd.concat([base, stages]).reindex(columns=results.COLUMNS).to_csv(csv, index=False)
    df = report.load([csv])
    table, _ = report.pipeline_table(report.medians(df))
    rows = table.set_index(["pipeline", "model"])
    assert rows.loc[("slow", "fast"), "slowest stage"] == "host"
    assert rows.loc[("slow", "fast"), "check"] == "explains e2e"
    assert rows.loc[("slow", "fast"), "transfer share"] == "4.9% (pageable)"   # 9,800 / 200,000
    assert rows.loc[("clash", "fast"), "slowest stage"] == "model"
    assert rows.loc[("clash", "fast"), "check"] == "e2e well below it"
    assert rows.loc[("clash", "fast"), "transfer share"] == "4.0% (pinned)"    # its own copy: 20,000 / 500,000
    assert rows.loc[("quick", "fast"), "transfer share"] == "—" and "check" in rows.columns
    stages = report.bottleneck({"host": 90_000, "h2d-pinned": 500_000, "device": 300_000}, "pinned", 50_000)
    _, _, said = report.prediction(20_000, stages)
    serial = 1 / (1 / 90_000 + 1 / 500_000 + 1 / 300_000 + 1 / 50_000)
    assert (f"the slowest stage is **model** (50,000 img/s); e2e (20,000) reaches only 40.0% of it: "
            f"the stages do not overlap fully or slow each other down (run one after another they would "
            f"give {serial:,.0f})") == said
    text = report.write([csv], tmp_path / "out").read_text()
    assert "### Stage ceilings (img/s)" in text
    assert "| slow       | pageable |           3,072 | 10,500 [10,500–10,500] n=3 | —     | 200,000" in text


def test_transfer_share_against_bytes_per_image(tmp_path):
    rates = {32: (50_000, 3_000_000, 15_000_000), 224: (2_000, 1_500, 300_000)}   # model, pageable, pinned
    frames = []
    for size, (model, pageable, pinned) in rates.items():
        batch = 512 * 3 * size * size
        frames.append(stage_rows(size=size, stages={("prefetch", "h2d-pageable"): pageable,
                                                    ("prefetch", "h2d-pinned"): pinned},
                                 copy="pinned", batch_bytes=batch, models={"net": model}))
    csv = tmp_path / "results.csv"
    pd.concat(frames).reindex(columns=results.COLUMNS).to_csv(csv, index=False)
    points = report.transfer_points(report.load([csv]))
    share = points.set_index(["copy", "image_size"]).share
    assert share[("pageable", 224)] == pytest.approx(2_000 / 1_500)
    assert share[("pinned", 32)] == pytest.approx(50_000 / 15_000_000)
    text = report.write([csv], tmp_path / "out").read_text()
    assert ("- net, pageable copies: the copy takes 133.3% of the model step at 150,528 B/image (224 px); "
            "from 150,528 B/image (224 px) it is as long as the step: the bus alone is the limit, even fully "
            "overlapped.") in text
    assert "- net, pinned copies: the copy takes 0.6% of the model step at 150,528 B/image (224 px); below 100%" in text
    assert (tmp_path / "out" / "transfer-1-bs512-bfloat16-w8-eager.png").stat().st_size > 10_000


def test_report_reads_csvs_from_before_stages_and_image_sizes(tmp_path):
    old = pd.read_csv(fixture_csv(tmp_path / "results.csv")).drop(columns=["stage", "image_size", "copy", "batch_bytes"])
    old.to_csv(tmp_path / "old.csv", index=False)
    text = report.write([tmp_path / "old.csv"], tmp_path / "out").read_text()
    assert f"## {tmp_path.name}: Test GPU, 32 px, batch 512, bfloat16, 8 workers, eager step" in text


def test_scaling_section_from_ddp_and_dp_rows(tmp_path):
    """1 GPU, DDP x 2 (two ranks, one row each per window) and DataParallel x 2: the job's rate,
    efficiency against one GPU, per-GPU memory, and the single-GPU tables left to single-GPU rows."""
    base = {"run_id": "multi", "model": "resnet18", "dtype": "bfloat16", "gpu": "Test GPU", "num_workers": 15,
            "status": "ok", "error": "", "torch": "2.x", "git_commit": "abc", "image_size": 32}
    rows = []
    for repeat in range(3):
        for pipeline, one, two in (("prefetch", 40_000, 76_000), ("dataloader", 25_000, 30_000)):
            rows.append({**base, "pipeline": pipeline, "mode": "e2e", "batch_size": 512, "repeat": repeat,
                         "img_per_s": one, "world_img_per_s": one, "world_size": 1, "rank": 0,
                         "parallel": "none", "gpus": 1, "peak_gpu_mem_mb": 3000})
            for rank in (0, 1):
                rows.append({**base, "pipeline": pipeline, "mode": "e2e", "batch_size": 512, "repeat": repeat,
                             "img_per_s": two / 2, "world_img_per_s": two, "world_size": 2, "rank": rank,
                             "parallel": "ddp", "gpus": 2, "peak_gpu_mem_mb": 3000 + 100 * rank})
        rows.append({**base, "pipeline": "prefetch", "mode": "e2e", "batch_size": 1024, "repeat": repeat,
                     "img_per_s": 50_000, "world_img_per_s": 50_000, "world_size": 1, "rank": 0, "parallel": "dp",
                     "gpus": 2, "peak_gpu_mem_mb": 4500, "peak_gpu_mem_mb_others": 3000})
    csv = tmp_path / "results.csv"
    pd.DataFrame(rows).reindex(columns=results.COLUMNS).to_csv(csv, index=False)
    text = report.write([csv], tmp_path / "out").read_text()
    assert "## Several GPUs: scaling" in text
    assert "76,000 [76,000–76,000]" in text.split("## Several GPUs")[1]
    table, sentences = report.scaling(report.load([csv]))
    ddp = table[(table.parallel == "ddp")].set_index("pipeline")
    assert ddp.loc["prefetch", "vs 1 GPU"] == "95%" and ddp.loc["dataloader", "vs 1 GPU"] == "60%"
    assert ddp.loc["prefetch", "peak MB per GPU"] == "3,000–3,100"
    dp = table[table.parallel == "dp"].iloc[0]
    assert (dp["batch / GPU"], dp["GPUs"], dp["vs 1 GPU"]) == (512, 2, "62%")
    assert dp["peak MB per GPU"] == "4,500 main / 3,000 others"
    assert "- resnet18 e2e, DDP × 2: scaling efficiency dataloader 60%, prefetch 95% (lowest: dataloader)." in sentences, sentences
    assert ("- resnet18 e2e, prefetch, DP × 2: 66% of DDP's rate, main GPU peak 4,500 MB vs 3,000 MB on the others "
            "(+50%).") in sentences
    # the per-setting tables read one-GPU rows only: no DDP rank's own rate pooled in
    assert "38,000" not in text.split("## Several GPUs")[0]


def test_scaling_never_pools_settings(tmp_path):
    """Two per-GPU batch sizes in one CSV: one sentence each, each against its own one-GPU and model-only rates."""
    base = {"run_id": "multi", "model": "resnet18", "dtype": "bfloat16", "gpu": "Test GPU", "num_workers": 15,
            "status": "ok", "error": "", "image_size": 32, "repeat": 0}
    rows = []
    for bs, one, two, bare1, bare2 in ((256, 10_000, 19_000, 20_000, 38_000), (512, 10_000, 11_000, 20_000, 30_000)):
        for pipeline, mode, r1, r2 in (("prefetch", "e2e", one, two), ("none", "model", bare1, bare2)):
            rows.append({**base, "pipeline": pipeline, "mode": mode, "batch_size": bs, "img_per_s": r1,
                         "world_img_per_s": r1, "world_size": 1, "rank": 0, "parallel": "none"})
            rows.append({**base, "pipeline": pipeline, "mode": mode, "batch_size": bs, "img_per_s": r2 / 2,
                         "world_img_per_s": r2, "world_size": 2, "rank": 0, "parallel": "ddp"})
    csv = tmp_path / "results.csv"
    pd.DataFrame(rows).reindex(columns=results.COLUMNS).to_csv(csv, index=False)
    _, sentences = report.scaling(report.load([csv]))
    assert sentences == [
        "- resnet18 e2e, DDP × 2: scaling efficiency prefetch 95% (lowest: prefetch); the model alone (model-only) scales 95%.",
        "- resnet18 e2e, DDP × 2: scaling efficiency prefetch 55% (lowest: prefetch); the model alone (model-only) scales 75%."]


def test_the_summary_keeps_variants_of_a_pipeline_apart(tmp_path):
    rows = []
    for (mode, pipeline, model, decoder), rate in {("model", "none", "fast", ""): 50_000,
                                                   ("loader", "dali", "none", "cpu"): 120_000,
                                                   ("e2e", "dali", "fast", "cpu"): 49_500,
                                                   ("loader", "dali", "none", "mixed"): 70_000,
                                                   ("e2e", "dali", "fast", "mixed"): 40_000}.items():
        rows += [{"run_id": "v", "pipeline": pipeline, "mode": mode, "model": model, "dali_decoder": decoder or None,
                  "batch_size": 512, "num_workers": 8, "dtype": "bfloat16", "gpu": "Test GPU", "repeat": i,
                  "img_per_s": rate * j, "wait_frac": 0.1, "status": "ok", "error": ""}
                 for i, j in enumerate((0.99, 1.0, 1.01))]
    path = tmp_path / "variants.csv"
    pd.DataFrame(rows).reindex(columns=results.COLUMNS).to_csv(path, index=False)
    summary = (report.write([path], tmp_path / "out").parent / "SUMMARY.md").read_text()
    assert "`dali (dali_decoder=cpu)`" in summary and "99.0%" in summary   # the faster variant, not a pool
    assert "| dali (dali_decoder=cpu)   |" in summary and "| dali (dali_decoder=mixed) |" in summary
