"""results/README.md is the table `python -m bench.report.index results` writes (issue 55): every run
folder listed, the committed file what the generator writes now, a folder without a kind refused in one
line, superseded runs under results/archive/ only, and no test reading an archived run."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from PIL import Image

from bench.report import index, slim

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
RUN_PATH = re.compile(r"results/[\w.-]+(/\S*)?")


def run_folder(root: Path, name: str, readme: str, environment: dict | None = None) -> Path:
    """A run folder `root/name` holding `readme` (and an environment.json of `environment`)."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "README.md").write_text(readme)
    if environment is not None:
        (folder / "environment.json").write_text(json.dumps(environment))
    return folder


def test_every_results_folder_is_listed_in_the_committed_index():
    listed = (RESULTS / "README.md").read_text()
    folders = [p.relative_to(RESULTS).as_posix() for p in index.folders(RESULTS)]
    assert len(folders) == len([p for p in RESULTS.iterdir() if p.is_dir() and p.name != "archive"]
                               + [p for p in (RESULTS / "archive").iterdir() if p.is_dir()])
    assert [f for f in folders if f"]({f}/README.md)" not in listed] == []


def test_the_committed_index_is_what_the_generator_writes_now():
    assert (RESULTS / "README.md").read_text() == index.index(RESULTS), \
        "results/README.md is stale: python -m bench.report.index results"


def test_a_folder_without_a_kind_line_is_refused_in_one_line(tmp_path, capsys):
    run_folder(tmp_path, "2026-01-01-fine", "# A question\n\n**Kind**: study\n", {"git_commit": "a" * 40})
    run_folder(tmp_path, "2026-01-02-kindless", "# Another question\n\nNo kind here.\n", {"git_commit": "b" * 40})
    assert index.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "2026-01-02-kindless" in err and "**Kind**" in err
    assert not (tmp_path / "README.md").exists()


def test_a_superseded_run_outside_the_archive_and_a_current_one_inside_are_refused(tmp_path):
    run_folder(tmp_path, "old", "# Old\n\n**Kind**: superseded\n", {"git_commit": "c" * 12})
    with pytest.raises(ValueError, match="old: kind superseded belongs under"):
        index.index(tmp_path)
    run_folder(tmp_path / "archive", "new", "# New\n\n**Kind**: reference\n", {"git_commit": "d" * 12})
    (tmp_path / "old").rename(tmp_path / "archive" / "old")
    with pytest.raises(ValueError, match="new: kind reference belongs outside"):
        index.index(tmp_path)


def test_the_commit_comes_from_the_readme_line_else_environment_json_else_results_csv(tmp_path):
    run_folder(tmp_path, "a-line", "# A\n**Kind**: study\n**Commit**: 1234567abc, 89abcdef0-dirty\n",
               {"git_commit": "f" * 40})
    run_folder(tmp_path, "b-env", "# B\n**Kind**: tests\n", {"git_commit": "0123456789ab-dirty"})
    rows = run_folder(tmp_path, "c-csv", "# C | D\n**Kind**: reference\n")
    (rows / "results.csv").write_text("git_commit,img_per_s\nfedcba9876,1\nfedcba9876,2\n")
    run_folder(tmp_path, "d-none", "# D\n**Kind**: study\n")
    with pytest.raises(ValueError, match="d-none: no commit"):
        index.index(tmp_path)
    (tmp_path / "d-none" / "README.md").write_text("# D\n**Kind**: study\n**Commit**: not-a-commit\n")
    with pytest.raises(ValueError, match="'not-a-commit' is not a git commit"):
        index.index(tmp_path)
    (tmp_path / "d-none" / "README.md").unlink()
    (tmp_path / "d-none").rmdir()
    assert index.main([str(tmp_path)]) == 0
    text = (tmp_path / "README.md").read_text()
    assert "| [c-csv/](c-csv/README.md) | reference | `fedcba9` | C \\| D |" in text   # by kind, then name
    assert text.index("c-csv") < text.index("a-line") < text.index("b-env")
    assert "| [a-line/](a-line/README.md) | study | `1234567`, `89abcde-dirty` | A |" in text
    assert "| [b-env/](b-env/README.md) | tests | `0123456-dirty` | B |" in text


def results_paths_in_tests() -> dict[str, str]:
    """Every string constant in tests/*.py that is a path under results/ (a run a test reads), by file."""
    found = {}
    for path in sorted((ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and RUN_PATH.fullmatch(node.value):
                found[node.value] = path.name
    return found


def test_no_test_reads_or_regenerates_an_archived_run():
    """A test that regenerates a committed report or reads its rows names a current run folder:
    superseded runs are not kept regenerating (their reports stay as they were made)."""
    paths = results_paths_in_tests()
    assert paths   # tests/test_report.py regenerates committed reports
    current = {p.name for p in RESULTS.iterdir() if p.is_dir() and p.name != "archive"}
    wrong = {p: test for p, test in paths.items() if p.split("/")[1] not in current}
    assert wrong == {}


def test_committed_logs_hold_their_last_progress_frames_and_plots_at_most_256_colours():
    """`bench.report.slim`: the tree travels to the GPU machine beside a 40 MiB DALI chunk."""
    assert slim.last_frames(b"a 1/3\ra 2/3\ra 3/3\nb\r\n") == b"a 3/3\nb\r\n"   # a CRLF line kept as it is
    framed = [p for p in RESULTS.rglob("*.txt") if re.search(rb"\r[^\n]", p.read_bytes())]
    assert framed == [], "python -m bench.report.slim results"
    assert [p for p in RESULTS.rglob("*.png") if Image.open(p).mode != "P"] == [], "python -m bench.report.slim results"


def test_a_report_s_plots_are_written_at_most_256_colours(tmp_path):
    import matplotlib.pyplot as plt
    from bench.report import plots
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [3, 1, 2], label="a")
    ax.legend()
    plots.save_plot(fig, tmp_path / "p.png")
    data = (tmp_path / "p.png").read_bytes()
    assert Image.open(tmp_path / "p.png").mode == "P" and plots.small_png(data) is data
