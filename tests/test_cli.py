"""The command line as people use it: help for a user (grouped; --help and --version without torch),
--version, values refused in one line,
`report` on run folders and on what is not a run, the environment of a machine without a GPU."""
from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import cli, results
from bench.cli import light, top
from bench.running.options import FIRST_RUN

ROOT = Path(__file__).resolve().parents[1]


def parse(*argv: str):
    return cli.build_parser().parse_args(list(argv))


def test_help_is_written_for_a_user():
    parser = cli.build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for text in [parser.format_help(), *(command.format_help() for command in commands.values())]:
        for internal in ("Parsing lives", "harness.", "report.README", "README_START", "_REGISTRY"):
            assert internal not in text


def test_the_top_level_help_names_each_command_once_and_no_function():
    text = cli.build_parser().format_help()
    for internal in ("build_parser", "config_grids", "`parser", "parser."):
        assert internal not in text
    commands = cli.build_parser()._subparsers._group_actions[0].choices
    for name in commands:
        assert len(re.findall(rf"^\s+{name}\b", text, re.M)) == 1, name
        assert f"pipebench {name}" not in text


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["-h"]])
def test_help_and_version_answer_without_importing_torch(argv):
    """torch took 13-15 s and 1 GB before `pipebench --help` said anything."""
    code = ("import sys\nfrom bench.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    print('exit', e.code, 'torch' in sys.modules, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stderr.splitlines()[-1] == "exit 0 False"
    assert done.stdout.startswith("pipebench " if argv == ["--version"] else "usage: pipebench")


def test_compare_help_is_in_groups_and_every_option_is_in_one():
    command = cli.build_parser()._subparsers._group_actions[0].choices["compare"]
    titles = [group.title for group in command._action_groups]
    for title in (FIRST_RUN, "what to measure", "timing", "processes and GPUs", "data"):
        assert title in titles
    options = [a for a in command._action_groups if a.title == "options"][0]._group_actions
    assert {o for a in options for o in a.option_strings} == {"-h", "--help", "--debug"}
    assert len(command.format_usage().splitlines()) == 1


def test_compare_and_sweep_help_list_a_first_runs_options_first():
    """--source was in compare's last group, --models, --image-size, --cpus and --out each in another
    (issue 69): what a first run gives comes first, in one group, right after -h and --debug."""
    commands = cli.build_parser()._subparsers._group_actions[0].choices
    for name in ("compare", "sweep"):
        groups = [g for g in commands[name]._action_groups if g._group_actions]
        assert [g.title for g in groups[:2]] == ["options", FIRST_RUN]
        assert [a.option_strings[0] for a in groups[1]._group_actions] == [
            "--source", "--data-root", "--pipelines", "--models", "--image-size", "--cpus", "--device", "--out"]
        text = commands[name].format_help()
        assert text.index("  --source") < text.index("  --models") < text.index("  --out ") < text.index(
            "what to measure:")


USAGE_ERRORS = [[], ["--versio"], ["compare", "--cpus"], ["compare", "--cpu", "2"], ["sweep", "--sourc", "auto"],
                ["compare", "--last-batch", "never"], ["report"], ["stability", "--epochs", "3"], ["lst"],
                # a bad value of each kind of type (issue 69: `sweep --steps -1` took 7.8 s to say so)
                ["compare", "--steps", "-3"], ["sweep", "--pipelines", "nosuch"], ["compare", "--dali-cpu-share", "2"],
                ["sweep", "--encoding", "raw,raw"], ["sweep", "--part", "3/2"], ["compare", "--source", "bogus"],
                ["compare", "--image-size", "33"], ["compare", "--busy-ms", "-1"], ["compare", "--models", ","],
                ["compare", "--data-seed", "x"], ["prepare", "--jpeg-quality", "0"], ["stability", "--pipelines", "x"],
                ["compare", "--device", "tpu"], ["stability", "--epochs", "3", "--out", "x"]]


def test_every_help_and_usage_error_answers_without_importing_torch():
    """`pipebench compare --help` and a typo (`--versio`, `compare --cpus`) took 4.7 s each: building
    the commands' parsers imported torch (issue 69). Every command's help and these usage errors are
    answered with torch never imported."""
    cases = [[name, "--help"] for name in top.COMMANDS] + USAGE_ERRORS
    code = ("import json, sys, contextlib, io\nfrom bench.cli import main\nfound = []\n"
            "for argv in json.loads(sys.argv[1]):\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
            "        try:\n            main(argv)\n        except SystemExit as e:\n"
            "            found.append([argv, e.code, 'torch' in sys.modules])\n"
            "print(json.dumps(found))\n")
    done = subprocess.run([sys.executable, "-c", code, json.dumps(cases)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == [[argv, 0 if "--help" in argv else 2, False] for argv in cases]


def test_the_light_parsers_help_and_usage_errors_are_the_real_parsers(capsys):
    """What answers help and usage errors without torch (`light.light_parser`) says what the real
    parsers say, word for word, a bad value's error included."""
    real, made = cli.build_parser(), light.light_parser()
    assert made.format_help() == real.format_help()
    commands = made._subparsers._group_actions[0].choices
    for name, command in real._subparsers._group_actions[0].choices.items():
        assert commands[name].format_help() == command.format_help(), name
    for argv in USAGE_ERRORS:
        said = []
        for parser in (real, made):
            with pytest.raises(SystemExit) as stop:
                parser.parse_args(argv)
            said.append((stop.value.code, capsys.readouterr().err))
        assert said[0] == said[1] and said[0][0] == 2, argv


def test_the_light_parsers_are_made_from_what_the_real_ones_are_now():
    """bench/cli/shapes.py is what `python -m bench.cli.light` writes from the parsers now."""
    path = ROOT / "bench" / "cli" / "shapes.py"
    assert path.read_text() == light.generated(), "bench/cli/shapes.py is out of date: run python -m bench.cli.light"


def test_the_light_parsers_check_every_value_the_real_ones_check_but_a_path_and_the_claims():
    """Each option's type is described in shapes.py (`bench.values`) and made again there, so that
    every bad value is refused without torch: all but a path (any text but the empty one is one: `Folder`)
    and `claims --claims` (the claims' names: their modules import torch)."""
    real, made = cli.build_parser(), light.light_parser()
    commands = made._subparsers._group_actions[0].choices
    checked = 0
    for name, command in real._subparsers._group_actions[0].choices.items():
        light_types = {a.dest: a.type for a in commands[name]._actions}
        for action in command._actions:
            if action.type is None or action.type is Path or (name, action.dest) == ("claims", "claims"):
                continue
            twin = light_types[action.dest]
            assert twin is int if action.type is int else (type(twin), twin.spec()) == (type(action.type), action.type.spec())
            checked += 1
    assert checked >= 100


def test_the_light_modules_copies_of_pipelines_are_equal(monkeypatch, tmp_path):
    """`top.clip`, `top.LINE_LIMIT` and `light.default_data_root` are pipelines' own, read without the
    package's torch (`bench.values.pipelines_module`)."""
    from pipelines import config, options
    assert top.LINE_LIMIT == options.LINE_LIMIT
    for text in ("short", "x" * 5000, "é" * 2001):
        for limit in (10, options.LINE_LIMIT):
            assert top.clip(text, limit) == options.clip(text, limit)
    for data, cache in [(None, None), (None, str(tmp_path)), (None, "relative"), (str(tmp_path / "d"), str(tmp_path))]:
        for name, value in (("PIPEBENCH_DATA", data), ("XDG_CACHE_HOME", cache)):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        assert light.default_data_root() == config.default_data_root()


def test_version_is_the_installed_one_else_the_checkouts(monkeypatch, capsys):
    expected = re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"pipebench {expected}\n"

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert cli.version() == expected


def test_download_takes_data_root_like_every_other_command():
    assert parse("download", "--data-root", "somewhere").data_root == "somewhere"
    assert parse("download", "--root", "elsewhere").data_root == "elsewhere"   # the former name still works
    assert "--root" not in cli.build_parser()._subparsers._group_actions[0].choices["download"].format_help()


@pytest.mark.parametrize("argv,message", [
    (["--timeout", "nan"], "'nan': expected a number > 0"), (["--timeout", "inf"], "'inf': expected a number > 0"),
    (["--min-window-s", "nan"], "'nan': expected a number > 0"),
    (["--dali-hw-decoder-load", "nan"], "'nan': expected None or a number from 0 to 1"),
    (["--dali-hw-decoder-load", "0.5,1.5"], "'1.5': expected None or a number from 0 to 1"),
    (["--batch-size", "64,64"], "'64,64': 64 is given twice; give each value once"),
    (["--pipelines", "prefetch,resident,prefetch"], "prefetch is given twice"),
    (["--models", "resnet18,resnet18"], "resnet18 is given twice"),
    (["--modes", "loader,loader"], "loader is given twice"),
])
def test_non_finite_numbers_and_repeated_values_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as done:
        parse("sweep", *argv)
    assert done.value.code == 2 and message in capsys.readouterr().err


def test_a_claim_named_twice_is_refused(capsys):
    with pytest.raises(SystemExit):
        parse("claims", "--claims", "1,1")
    assert "is given twice" in capsys.readouterr().err


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory, synthetic_root):
    out = tmp_path_factory.mktemp("run")
    assert cli.main(["compare", "--no-isolate", "--processes", "1", "--device", "cpu", "--pipelines", "resident", "--modes", "loader",
                     "--data-root", str(synthetic_root), "--max-samples", "64", "--batch-size", "16", "--steps", "2",
                     "--warmup", "0", "--repeats", "2", "--out", str(out)]) == 0
    return out


def test_report_takes_a_run_folder(run_folder, tmp_path):
    assert cli.main(["report", str(run_folder), "--out", str(tmp_path / "report")]) == 0
    assert f"`{run_folder / 'results.csv'}`" in (tmp_path / "report" / "REPORT.md").read_text()


def report_error(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as done:
        cli.main(["report", *argv])
    assert "Traceback" not in capsys.readouterr().err
    return done.value.code


def test_report_on_what_is_not_a_run_is_one_line(run_folder, tmp_path, capsys):
    empty, foreign = tmp_path / "empty.csv", tmp_path / "foreign.csv"
    empty.write_text("")
    foreign.write_text("name,score\nx,1\n")
    out = str(tmp_path / "report")
    assert report_error(capsys, str(empty), "--out", out) == f"pipebench report: {empty} is empty: not a pipebench results file"
    assert report_error(capsys, str(foreign), "--out", out) == (
        f"pipebench report: {foreign} is not a pipebench results file (no column run_id, pipeline, mode, status)")
    assert report_error(capsys, str(tmp_path / "nowhere"), "--out", out).startswith(
        f"pipebench report: no such file: {tmp_path / 'nowhere'} (")
    assert report_error(capsys, str(run_folder), "--out", str(empty)) == (
        f"pipebench report: --out {empty} is a file: name a folder")


def test_report_into_a_folder_that_cannot_be_written_is_one_line(run_folder, tmp_path, monkeypatch, capsys):
    out = tmp_path / "read-only"
    opened = os.open

    def open_(path, *args, **kwargs):   # as a read-only folder answers (root is never refused)
        if Path(path).parent == out:
            raise PermissionError(13, "Permission denied", str(path))
        return opened(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    assert report_error(capsys, str(run_folder), "--out", str(out)) == (
        f"pipebench report: cannot write {out / 'SUMMARY.md'} (Permission denied): choose a writable --out folder")


def test_debug_shows_the_traceback_of_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PIPEBENCH_DEBUG", "")   # --debug sets it: unset again after the test
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(SystemExit):
        cli.main(["report", str(empty), "--out", str(tmp_path / "report"), "--debug"])
    assert "Traceback" in capsys.readouterr().err


def test_a_machine_without_a_gpu_records_no_cuda_version(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", "13.0")   # a CUDA build of torch
    env = results.environment()
    assert (env["gpu"], env["driver"], env["cuda"]) == ("", "", "")


def test_the_command_that_resumes_a_run_keeps_its_options_and_folder():
    assert cli.resume_command(["compare", "--pipelines", "resident", "--out", "old", "--cpus", "1,2"], Path("runs/x")) \
        == "pipebench sweep --pipelines resident --cpus 1,2 --out runs/x"
    assert cli.resume_command(["sweep", "--out=a b", "--models", "m.py:build"], Path("a b")) \
        == "pipebench sweep --models m.py:build --out 'a b'"


def test_compare_appends_rows_of_its_own_commit_and_refuses_another_commits(tmp_path, synthetic_root, monkeypatch, capsys):
    """A fault campaign: `compare --out DIR` appended to rows of another commit, and every `report DIR`
    then failed ("report them apart"), which one file cannot be; refused as a sweep refuses, nothing written."""
    out = tmp_path / "run"
    argv = ["--no-isolate", "--processes", "1", "--device", "cpu", "--pipelines", "resident", "--modes", "loader",
            "--data-root", str(synthetic_root), "--max-samples", "64", "--batch-size", "16", "--steps", "2",
            "--warmup", "0", "--repeats", "1", "--out", str(out)]
    monkeypatch.setenv("PIPEBENCH_GIT_COMMIT", "aaaaaaaaaaaa")
    for _ in range(2):   # the same commit: appended
        assert cli.main(["compare", *argv]) == 0
    assert len(results.read_rows(out / "results.csv")) == 2
    with open(out / "results.csv", "ab") as f:   # a torn last line, which a writer would move aside
        f.write(b"run@2,2026")
    written = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setenv("PIPEBENCH_GIT_COMMIT", "bbbbbbbbbbbb")
    said = f"{out}/results.csv holds rows of commit aaaaaaaaaaaa, this is bbbbbbbbbbbb: a reference result is one commit"
    for command, hint in [("compare", "; choose another --out"), ("sweep", "; choose another --out, or pass "
                                                                           "--resume-other-commit")]:
        with pytest.raises(SystemExit) as stop:
            cli.main([command, *argv])
        assert stop.value.code == f"pipebench {command}: {said}{hint}"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == written   # no results.csv.torn either
    capsys.readouterr()


@pytest.mark.parametrize("command", ["compare", "sweep", "report x", "claims", "stability"])
@pytest.mark.parametrize("out", [["--out", ""], ["--out="], ["--out", "elsewhere", "--out", ""]])
def test_an_empty_out_is_refused_in_one_line_before_anything_is_written(command, out, tmp_path, monkeypatch, capsys):
    """A fault campaign: `--out ""` (parsed as ".") wrote results.csv, ANSWER.md, COMMAND.txt and
    environment.json into the current folder."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        cli.main([*command.split(), *(["--device", "cpu"] if command != "report x" else []), *out])
    assert stop.value.code == 2 and ("argument --out: '': expected a folder (an empty path would be the current "
                                     "folder)") in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_a_knob_that_takes_none_takes_it_by_name_on_the_command_line():
    """None is a knob's documented default where it has one ("none" on the command line)."""
    assert parse("sweep", "--dali-hw-decoder-load", "none,0.99").dali_hw_decoder_load == [None, 0.99]
    assert parse("sweep", "--dali-threads", "None").dali_threads is None


def test_report_of_one_run_folder_writes_into_it_by_default(run_folder, tmp_path, capsys):
    """`pipebench report RUN` needed `--out` even to write into the run folder (issue 69); several
    runs or a CSV file still need one, said in one line."""
    assert cli.main(["report", str(run_folder)]) == 0
    assert (run_folder / "REPORT.md").is_file()
    assert (run_folder / "COMMAND.txt").read_text().splitlines()[-1] == f"pipebench report {run_folder}"
    with pytest.raises(SystemExit, match="--out is needed where the rows are not one run folder's"):
        cli.main(["report", str(run_folder / "results.csv")])
    with pytest.raises(SystemExit, match="--out is needed"):
        cli.main(["report", str(run_folder), str(run_folder)])


@pytest.mark.parametrize("argv,message", [
    (["sweep", "--min-window-s", "1e9"], "'1e9': expected a number > 0, at most 3,600"),
    (["sweep", "--steps", str(10**12)], f"'{10**12}': expected an integer from 1 to 10,000,000"),
    (["sweep", "--warmup", str(10**9)], f"'{10**9}': expected an integer from 0 to 10,000,000"),
    (["prepare", "--jpeg-quality", "-5"], "'-5': expected an integer from 1 to 100"),
    (["prepare", "--jpeg-quality", "0"], "'0': expected an integer from 1 to 100"),
    (["prepare", "--jpeg-quality", "101"], "'101': expected an integer from 1 to 100"),
])
def test_absurd_bounds_are_refused_in_one_line_before_anything_runs(argv, message, capsys):
    """Issue 69: `--min-window-s 1e9` and `--steps 10**12` started and ended in MemoryError rows,
    `--warmup 10**9` in a timeout row, `prepare --jpeg-quality -5 / 0 / 101` each wrote a JPEG copy."""
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["compare", "--device", "tpu"], ["sweep", "--device", "mps", "--estimate"], ["compare", "--device", "cuda:-1"],
    ["sweep", "--device", "cuda:abc"], ["compare", "--device", ""], ["stability", "--device", "meta", "--out", "x"],
    ["claims", "--device", "gpu"]])
def test_a_device_the_suite_cannot_run_on_is_refused_in_one_line(argv, capsys):
    """Fault campaign: `--device tpu` (or gpu, cuda:abc, cuda:-1) was a traceback of torch's, `--device mps` or
    `meta` a TypeError from the plan's defaults."""
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"argument --device: '{argv[2]}': expected auto, cpu, cuda or cuda:N" in err
    assert "Traceback" not in err


def test_the_devices_the_suite_runs_on_are_taken():
    assert [parse("compare", "--device", d).device for d in ("auto", "cpu", "cuda", "cuda:0", "cuda:12")] == [
        "auto", "cpu", "cuda", "cuda:0", "cuda:12"]


def test_an_empty_claim_list_is_refused(capsys):
    with pytest.raises(SystemExit) as stop:
        parse("claims", "--claims", " , ")
    assert stop.value.code == 2 and "argument --claims: ' , ': expected a comma-separated list of claims" in \
        capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--versio"], ["--debug", "compare"], ["-x", "list"]])
def test_an_unknown_option_before_the_command_is_named_as_such(argv, capsys):
    """Issue 69's campaign: `pipebench --versio` answered "the following arguments are required: COMMAND"."""
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"pipebench: error: unrecognized arguments: {argv[0]}"
