"""Report and results-file faults a fault campaign found (issue 69): names holding URLs made no live
link, cells a spreadsheet would run as formulas neutralised and read back exactly, a run folder whose
path is not UTF-8 reported, a README that is not UTF-8 and damaged results files each one line naming
the file (and the line and column), exit code 1 as every `pipebench report` refusal, nothing written."""
from __future__ import annotations

import csv
import io
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from bench import cli, report, results
from tests.test_report import processes, row, windows, write

ROOT = Path(__file__).resolve().parent.parent
NEWCOMER = ROOT / "results" / "2026-12-02-newcomer" / "cpu" / "results.csv"   # a real CPU run's rows
AUTOLINK = re.compile(r"https?://|ftp://|www\.|[\w.+-]+@[\w-]+\.\w", re.I)   # what GFM links by itself


def outside_code(text: str) -> str:
    """Markdown without its code spans (an escaped backtick is no span's edge)."""
    return re.sub(r"`[^`\n]*`", "", text.replace("\\`", ""))


def refused(capsys, *argv: str) -> str:
    """The one line `pipebench ARGV` ends in (exit code 1, as every refusal of `report`), no traceback."""
    with pytest.raises(SystemExit) as done:
        cli.main(list(argv))
    assert isinstance(done.value.code, str) and "\n" not in done.value.code   # SystemExit(text): exit code 1
    assert "Traceback" not in capsys.readouterr().err
    return done.value.code


def damaged(tmp_path: Path, change) -> Path:
    """A run folder holding the newcomer run's results.csv as `change` (bytes -> bytes) left it."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "results.csv").write_bytes(change(NEWCOMER.read_bytes()))
    return folder


def test_urls_in_names_become_no_live_link(tmp_path):
    """Case 1: a pipeline, model spec, error message and run id (from the `--out` folder's name)
    holding a URL, `www.` or an e-mail address are code spans wherever they are printed, never text
    GFM would make a link of."""
    model, pipeline = "https://evil.example/model.pt", "www.evil.example/p"
    ids = {"run_id": "www.evil.example@20261202T000000-abc123"}
    rows = [*processes("model", "none", windows(50_000, 50_000, 50_000), model=model, step="eager", **ids),
            *processes("e2e", pipeline, windows(49_000, 49_000, 49_000), model=model, step="eager", **ids),
            *processes("loader", pipeline, windows(90_000, 90_000, 90_000), **ids),
            row("e2e", "q", float("nan"), model=model, status="error", error="see https://evil.example/e, "
                "www.evil.example or a@evil.example", **ids)]
    out = tmp_path / "out"
    report.write([write(tmp_path, rows, name="www.evil.example")], out)
    for name in ("REPORT.md", "SUMMARY.md", "ANSWER.md"):
        text = (out / name).read_text()
        assert not AUTOLINK.findall(outside_code(text)), name
        assert f"`{model}`" in text, name
    text = (out / "REPORT.md").read_text()
    assert "## Run `www.evil.example`" in text
    assert "see `https://evil.example/e,` `www.evil.example` or `a@evil.example`" in text   # as written


def test_escape_leaves_names_without_links_as_they_were():
    """What holds no link is escaped as before: knob names plain, Markdown's characters escaped."""
    assert report.formatting.escape("dali_decoder=mixed *x* _y_ [z]") == "dali_decoder=mixed \\*x\\* \\_y\\_ \\[z\\]"
    assert report.formatting.escape("imagefolder:/data/photos run@1 1.0.29") == "imagefolder:/data/photos run@1 1.0.29"


def test_formula_cells_are_neutralised_and_read_back_exactly(tmp_path):
    """Case 2: a run id from an `--out` folder named `=cmd|...`, a model spec `@evil.py:build` and an
    error `-2+3` are written with a `'` before them (a spreadsheet shows them as text); numbers keep
    their sign; every reader (the report, a resumed sweep, a file moved to new columns) gets the cells
    as they were given."""
    path = tmp_path / "run" / "results.csv"
    given = {"run_id": "=cmd|' /C calc'!A0", "model": "@evil.py:build", "error": "-2+3", "hostname": "'=x",
             "cpu_model": "+AMD", "busy_stretch": -0.5, "peers": "'plain"}
    writer = results.CsvWriter(path, {}, run_id=given["run_id"])
    writer.write_block([{**row("model", "none", 100.0, model=given["model"], step="eager", process=p),
                         **{k: v for k, v in given.items() if k != "run_id"}} for p in range(3)])
    raw = list(csv.DictReader(io.StringIO(path.read_text())))
    assert [raw[0][k] for k in given] == ["'=cmd|' /C calc'!A0", "'@evil.py:build", "'-2+3", "''=x", "'+AMD", "-0.5",
                                          "'plain"]
    assert not [c for r in raw for c in r.values() if c and c[0] in "=+-@" and not re.fullmatch(r"-?[\d.e+-]+", c)]
    back = results.read_rows(path, dtype=str, keep_default_na=False)
    assert [back[k].iloc[0] for k in given] == [str(v) for v in given.values()]
    assert results.CsvWriter(path, {}, run_id="again").guarded   # a resumed run's writer reads and keeps it
    assert list(csv.DictReader(io.StringIO(path.read_text())))[0]["run_id"] == "'=cmd|' /C calc'!A0"
    old = pd.read_csv(path, dtype=str, keep_default_na=False).drop(columns=["ready_at_start"])
    old.to_csv(path, index=False)   # a file of an older version, moved to the current columns through read_rows
    results.CsvWriter(path, {}, run_id="again")
    assert list(csv.DictReader(io.StringIO(path.read_text())))[0]["model"] == "'@evil.py:build"
    text = report.write([path], tmp_path / "out").read_text()
    assert "`=cmd|' /C calc'!A0`" in text and "`@evil.py:build`" in text and "'@evil" not in text


@pytest.mark.parametrize("value", ["=1+2", "-x", "@a", "+b", "'", "''", "'=", "'-1", "-1", "+1e-3", "-inf", "\t=1",
                                   "\r=1", "a=b", ""])
def test_guard_is_undone_by_reading(value):
    frame = pd.DataFrame({"a": [results.cells.guard(value)]})
    assert results.cells.unguard(frame).a.iloc[0] == value
    written = results.cells.guard(value)
    assert written[:1] not in ("=", "+", "-", "@", "\t", "\r") or re.fullmatch(r"[+-][\d.e+-]+|-inf", written)


def test_a_run_folder_whose_path_is_not_utf8_is_reported(tmp_path, capsys, monkeypatch):
    """Case 3: the path's bytes that are not UTF-8 are written escaped (`\\xff`) in the report: every
    file written, none half (SUMMARY.md was written, then REPORT.md failed: "surrogates not allowed").
    The path printed at the end goes out as its bytes, as on this machine's terminal (C.UTF-8)."""
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape"))
    for folder in (tmp_path / os.fsdecode(b"dir\xff") / "run", tmp_path / os.fsdecode(b"run\xfe")):
        folder.mkdir(parents=True)
        (folder / "results.csv").write_bytes(NEWCOMER.read_bytes())
        assert cli.main(["report", str(folder)]) == 0
        for name in ("REPORT.md", "SUMMARY.md", "ANSWER.md"):
            assert (folder / name).read_text(), name
    assert "dir\\xff/run/results.csv`" in (tmp_path / os.fsdecode(b"dir\xff") / "run" / "REPORT.md").read_text()
    assert "From one run, `run\\xfe`" in (tmp_path / os.fsdecode(b"run\xfe") / "SUMMARY.md").read_text()
    assert "Traceback" not in capsys.readouterr().err


def test_a_readme_that_is_not_utf8_is_one_line_naming_it(tmp_path, capsys):
    """Case 4: refused before anything is written, naming the README and where its text breaks."""
    folder = damaged(tmp_path, lambda data: data)
    readme = tmp_path / "README.md"
    start, end = report.marks("summary", "out")
    readme.write_bytes(f"# Run\n{start}\n{end}\n".encode() + "café\n".encode("latin-1"))
    line = refused(capsys, "report", str(folder), "--out", str(tmp_path / "out"), "--readme", str(readme))
    assert line == (f"pipebench report: {readme}: not UTF-8 text (invalid continuation byte at byte "
                    f"{len(readme.read_bytes()) - 2}, line 4): save it as UTF-8")
    assert not (tmp_path / "out").exists()


def cell(column: str, value: str, line: int = 6):
    """A change of the CSV's `column` on `line` (1: the header) to `value`."""
    def change(data: bytes) -> bytes:
        rows = list(csv.reader(io.StringIO(data.decode())))
        rows[line - 1][rows[0].index(column)] = value
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(rows)
        return text.getvalue().encode()
    return change


def lines_changed(line: int, how):
    return lambda data: b"\n".join(how(part) if i == line - 1 else part for i, part in enumerate(data.split(b"\n")))


@pytest.mark.parametrize("change,expected", [
    (cell("image_size", "abc"), ", line 6: image_size holds 'abc', not a number: a damaged results file"),
    (cell("world_size", "two", 9), ", line 9: world_size holds 'two', not a number: a damaged results file"),
    (cell("busy_ms", "x"), ", line 6: busy_ms holds 'x', not a number: a damaged results file"),
    (cell("samples", "many"), ", line 6: samples holds 'many', not a number: a damaged results file"),
    (cell("steps_per_epoch", "x"), ", line 6: steps_per_epoch holds 'x', not a number: a damaged results file"),
    (cell("test_accuracy", "x"), ", line 6: test_accuracy holds 'x', not a number: a damaged results file"),
    (cell("img_per_s", "-435"), ", line 6: img_per_s holds '-435.0', not a rate (img/s: finite, at least 0): a damaged "
                                "results file"),
    (cell("img_per_s", "inf", 7), ", line 7: img_per_s holds 'inf', not a rate (img/s: finite, at least 0): a damaged "
                                  "results file"),
    (lines_changed(6, lambda part: b",".join(part.split(b",")[:10])),
     ", line 6: 10 fields where its header has 115: a damaged results file"),
    (lines_changed(40, lambda part: part + b",x,y"), ", line 40: 117 fields where its header has 115: a damaged results file"),
    (lambda data: data[:3000] + b"\xff" + data[3000:],
     ", line 4: not UTF-8 text (invalid start byte at byte 3,000): a damaged results file, or not one"),
    (lambda data: random.Random(1).randbytes(4000) + b"\n",
     ", line 1: not UTF-8 text (invalid start byte at byte 0): a damaged results file, or not one"),
])
def test_a_damaged_results_file_is_one_line_naming_file_line_and_column(tmp_path, capsys, change, expected):
    """Case 5: text in a number's column, a short or long row, bytes that are not UTF-8: one line
    naming the file, its line and the column (was "invalid literal for int()", a 55-line TypeError
    traceback, a decode error naming no file); nothing written."""
    folder = damaged(tmp_path, change)
    line = refused(capsys, "report", str(folder), "--out", str(tmp_path / "out"))
    assert line == f"pipebench report: {(folder / 'results.csv').resolve()}{expected}"
    assert not (tmp_path / "out").exists()


def test_pipebench_s_own_warnings_are_one_line_named_by_the_command(monkeypatch, capsys):
    """Issue 69's campaign: a torn last line was said as Python shows a warning (its class, then the
    source line that warned)."""
    import importlib
    import warnings
    passed = []   # what Python's own display got (put back after the test)
    monkeypatch.setattr(warnings, "showwarning", lambda message, *rest, **more: passed.append(str(message)))
    importlib.import_module("bench.cli.main").said_in_one_line("pipebench report")
    warnings.showwarning(UserWarning("run/results.csv: its last line is torn (3 bytes without a newline); left out"),
                         UserWarning, str(ROOT / "bench" / "report" / "analysis.py"), 109)
    warnings.showwarning(UserWarning("another package's"), UserWarning, "/elsewhere/lib.py", 1)
    assert capsys.readouterr().err == ("pipebench report: run/results.csv: its last line is torn (3 bytes without "
                                       "a newline); left out\n")
    assert passed == ["another package's"]


def test_a_damaged_results_file_ends_the_process_in_one_line_exit_1(tmp_path):
    """As a user runs it: exit code 1, stderr one line, no traceback."""
    folder = damaged(tmp_path, lines_changed(6, lambda part: b",".join(part.split(b",")[:10]))).resolve()
    with open(folder / "results.csv", "ab") as torn:   # and a torn last line: no word of it before the refusal
        torn.write(b"run@1,2026")
    done = subprocess.run([sys.executable, "-m", "bench.cli", "report", str(folder), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"pipebench report: {folder / 'results.csv'}, line 6: 10 fields where")
