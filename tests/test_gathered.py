"""One answer table gathered from several runs (a plan's parts, each in a lease of its own: issue 70):
each cell one run's verdict with that run's letter, never a cell pooled from two runs, never runs of
two GPUs or two settings in one table; the README's `table` block is that table, byte for byte."""
from __future__ import annotations

import pandas as pd
import pytest

from bench import cli, report, results

BASE = {"git_commit": "abc123", "boot_id": "boot-1", "gpu": "Test GPU", "batch_size": 512, "dtype": "bfloat16",
        "image_size": 32, "num_workers": 3, "status": "ok", "error": "", "torch": "2.x", "seconds": 1.0,
        "steps": 100, "wait_frac": 0.1, "step": "compile", "busy_ms": 0.0}


def cell(model: str, cpus: int, model_rate: float, e2e: dict[str, float], **extra) -> list[dict]:
    """Model-only and each pipeline end to end at `cpus` cores: 3 processes of 2 windows each."""
    rows = []
    for p in range(3):
        for w in range(2):
            at = {**BASE, "cpus": cpus, "model": model, "process": p, "repeat": w, **extra}
            rows.append({**at, "mode": "model", "pipeline": "none", "img_per_s": model_rate, "images": model_rate})
            rows += [{**at, "mode": "e2e", "pipeline": name, "img_per_s": rate, "images": rate} for name, rate in e2e.items()]
    return rows


def run(tmp_path, name: str, rows: list[dict], when: str) -> str:
    folder = tmp_path / name
    folder.mkdir()
    frame = pd.DataFrame([{**r, "run_id": name, "timestamp": when} for r in rows])
    frame.reindex(columns=results.all_columns()).to_csv(folder / "results.csv", index=False)
    return str(folder / "results.csv")


def parts(tmp_path, **second) -> list[str]:
    """Two parts of one ladder: a fast model at 16 cores, then the same model at 4 cores and a slow one."""
    a = run(tmp_path, "part1", cell("fast", 16, 100_000, {"dataloader": 40_000, "prefetch": 99_000}),
            "2026-12-03T07:14:00+00:00")
    rows = cell("fast", 4, 100_000, {"dataloader": 20_000, "prefetch": 98_000}) \
        + cell("slow", 4, 10_000, {"dataloader": 9_900, "prefetch": 9_950})
    b = run(tmp_path, "part2", [{**r, **second} for r in rows], "2026-12-03T07:22:00+00:00")
    return [a, b]


def test_parts_make_one_table_each_cell_naming_its_run(tmp_path):
    out = tmp_path / "out"
    report.write(parts(tmp_path), out)
    summary = (out / "SUMMARY.md").read_text()
    assert "gathered from 2 runs on Test GPU" in summary
    table = summary.split("## All runs in one table")[1].split("From one run")[0]
    fast = next(line for line in table.splitlines() if line.startswith("| `fast`"))
    slow = next(line for line in table.splitlines() if line.startswith("| `slow`"))
    sixteen, four = [c.strip() for c in fast.split("|")[2:4]]
    assert sixteen.startswith("`prefetch` ×2.5") and sixteen.endswith("<sup>a</sup>")
    assert four.startswith("`prefetch` ×4.9") and four.endswith("<sup>b</sup>")
    assert [c.strip() for c in slow.split("|")[2:4]] == ["—", "any (`dataloader` too) <sup>b</sup>"]
    assert "; —: the model not measured with those cores" in table   # said where a cell is "—", only there
    assert "—: the model not measured" not in summary.split("From one run")[1]
    assert "- <sup>a</sup> `part1`: commit abc123, 2026-12-03 07:14–07:14 UTC" in table
    assert "- <sup>b</sup> `part2`: commit abc123" in table
    assert table in (out / "REPORT.md").read_text()


@pytest.mark.parametrize("second, refused", [({"cpus": 16}, r"fast \(compile step\) at 16 cores was measured by part1, part2"),
                                             ({"gpu": "Other GPU"}, "one GPU kind; these runs ran on Other GPU, Test GPU"),
                                             ({"batch_size": 256}, "one setting; these runs hold")])
def test_a_cell_of_two_runs_or_runs_of_two_gpus_or_settings_are_refused(tmp_path, second, refused):
    with pytest.raises(ValueError, match=refused):
        report.write(parts(tmp_path, **second), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_readme_s_table_block_is_the_gathered_table_and_takes_several_runs(tmp_path):
    folders, out, readme = parts(tmp_path), tmp_path / "out", tmp_path / "README.md"
    start, end = report.marks("table", "out")
    readme.write_text(f"# x\n{start}\nold\n{end}\nrest\n")
    assert cli.main(["report", *folders, "--out", str(out), "--readme", str(readme)]) == 0
    block = readme.read_text().split(start + "\n")[1].split("\n" + end)[0]
    summary = (out / "SUMMARY.md").read_text()
    assert block.startswith("**Which pipeline keeps your model fed**, gathered from 2 runs")
    assert "[full report](out/REPORT.md)" in block   # the link made relative to the README
    assert block.replace("](out/REPORT.md)", "](REPORT.md)") in summary and readme.read_text().endswith("rest\n")
    with pytest.raises(SystemExit, match="a table block gathers the e2e cells of two or more runs; these rows hold 1"):
        cli.main(["report", folders[0], "--out", str(out), "--readme", str(readme)])
    summary_start, summary_end = report.marks("summary", "out")
    readme.write_text(f"{summary_start}\n{summary_end}\n")
    with pytest.raises(SystemExit, match="a summary, answer or several-GPU block takes one run; these rows hold 2"):
        cli.main(["report", *folders, "--out", str(out), "--readme", str(readme)])
