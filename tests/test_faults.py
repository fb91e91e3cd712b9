"""Faults a new user and a fault campaign hit (issue 32): each ends in one line naming its cause,
the right exit code, nothing lost or doubled."""
from __future__ import annotations

import errno
import multiprocessing.forkserver
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from bench import cli, report, results
from bench.running import plan, runner
from tests.test_report import processes, write


def fails(argv, capsys) -> tuple[int, str]:
    """The exit code and the whole message of a command that must fail."""
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err + (e.value.code if isinstance(e.value.code, str) else "")
    return (e.value.code if isinstance(e.value.code, int) else 1), err


@pytest.mark.parametrize("flag,value", [
    ("--image-size", "0"), ("--image-size", "-32"), ("--image-size", "33"), ("--batch-size", "0"),
    ("--processes", str(10**9)), ("--busy-ms", "1e300"), ("--busy-ms", "1e9"), ("--sync-every", "-1"),
])
def test_absurd_values_are_refused_up_front_naming_the_flag(tmp_path, capsys, flag, value):
    code, err = fails(["compare", "--device", "cpu", "--out", str(tmp_path / "x"), flag, value], capsys)
    assert code == 2 and f"argument {flag}:" in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()


def test_an_out_that_is_a_file_or_cannot_be_made_is_one_line(tmp_path, synthetic_root, capsys):
    (tmp_path / "file").write_text("")
    for out in (tmp_path / "file", "/proc/pipebench-x"):
        code, err = fails(["compare", "--device", "cpu", "--no-isolate", "--data-root", str(synthetic_root),
                           "--pipelines", "resident", "--modes", "loader", "--steps", "1", "--out", str(out)], capsys)
        assert err.startswith(f"pipebench compare: --out {out}:") and "name a folder this user can write" in err
        assert "Traceback" not in err


def test_an_os_error_not_about_the_out_folder_is_said_as_it_is_not_blamed_on_out(tmp_path, synthetic_root, capsys,
                                                                                 monkeypatch):
    """A sweep of the suite ended in "--out RUN: No such process: name a folder this user can write": an
    OSError from elsewhere in the run (there a process gone as its /proc file was read) blamed --out."""
    from bench.cli import measure

    def gone(*args, **kwargs):
        raise ProcessLookupError(errno.ESRCH, os.strerror(errno.ESRCH))
    monkeypatch.setattr(measure, "_run_specs", gone)
    out = tmp_path / "run"
    code, err = fails(["compare", "--device", "cpu", "--no-isolate", "--data-root", str(synthetic_root),
                       "--pipelines", "resident", "--modes", "loader", "--steps", "1", "--out", str(out)], capsys)
    assert code == 1 and err.strip().splitlines()[-1] == f"pipebench compare: [Errno {errno.ESRCH}] No such process"
    assert "--out" not in err and "Traceback" not in err


def test_a_config_that_is_not_utf8_is_one_line(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_bytes(b'{"batch_size": [\xff]}')
    code, err = fails(["sweep", "--config", str(plan), "--out", str(tmp_path / "x")], capsys)
    assert err.startswith(f"pipebench sweep: --config {plan}: not UTF-8 text")


def test_ctrl_c_before_any_configuration_finished_says_nothing_was_written(tmp_path, synthetic_root, monkeypatch,
                                                                          capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(runner, "run_in_process", interrupted)
    code = cli.main(["compare", "--device", "cpu", "--no-isolate", "--data-root", str(synthetic_root),
                     "--pipelines", "resident", "--modes", "loader", "--steps", "1", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 130 and "no configuration had finished: no row of this run was written" in err
    assert 0 <= err.find("pipebench compare: the plan: 3 configuration processes, 6 windows") < err.find("data:")
    assert "are in" not in err and not (tmp_path / "run" / "results.csv").exists()


@pytest.mark.parametrize("body,reason", [
    ("import sys\ndef build():\n    sys.exit(3)\n", r"it called sys\.exit\(3\)"),
    ("import sys\nsys.exit(0)\n", r"it called sys\.exit\(0\)"),                         # on import
    ("import time\ndef build():\n    time.sleep(60)\n", "it did not end within 2 s"),
    ("import os\ndef build():\n    os.abort()\n", "its process was killed by SIGABRT"),
    ("import os\ndef build():\n    os._exit(7)\n", "its process ended with exit code 7"),
    ("def build():\n    return 3\n", "build\\(\\) returned int, not a torch.nn.Module"),
])
def test_a_model_that_exits_aborts_or_hangs_is_one_line_naming_it(tmp_path, body, reason):
    path = tmp_path / "net.py"
    path.write_text(body)
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=re.escape(f"model '{path}:build': ") + reason):
        plan.check_models([f"{path}:build"], [32], timeout=2.0)
    assert time.monotonic() - t0 < 60   # a hang is cut at its deadline


def test_a_users_random_py_does_not_replace_the_standard_librarys(tmp_path, synthetic_root, monkeypatch, capsys):
    """Started by `python -c` in the current folder, the forkserver imported the user's random.py
    (a --models file) when torch imported the standard library's random."""
    (tmp_path / "random.py").write_text("from torch import nn\ndef build():\n    return nn.Sequential(nn.Flatten(), "
                                        "nn.Linear(3 * 32 * 32, 10))\n")
    monkeypatch.chdir(tmp_path)
    multiprocessing.forkserver._forkserver._stop()   # one started earlier, elsewhere, would hide the fault
    code = cli.main(["compare", "--device", "cpu", "--data-root", str(synthetic_root), "--models", "random.py:build",
                     "--pipelines", "resident", "--modes", "model", "--steps", "1", "--warmup", "0", "--repeats", "1",
                     "--processes", "1", "--max-samples", "64", "--batch-size", "16", "--out", str(tmp_path / "run")])
    assert code == 0, capsys.readouterr().err
    assert (pd.read_csv(tmp_path / "run" / "results.csv").status == "ok").all()


SLOW_SERVER = """
import signal, sys, time, multiprocessing
sys.path.insert(0, sys.argv[1])
from pipelines import workers
workers.start_forkserver(["slow_preload"])
signal.signal(signal.SIGINT, signal.SIG_IGN)   # this process goes on past the Ctrl-C (pipebench would stop)
print("started", flush=True)
child = multiprocessing.get_context("forkserver").Process(target=time.sleep, args=(0,))
child.start()
child.join(60)
print(child.exitcode, flush=True)
"""


def test_ctrl_c_while_the_forkserver_imports_torch_prints_no_traceback(tmp_path):
    """Ctrl-C reaches the whole process group; the forkserver (DataLoader workers' or pipebench's
    own), still importing torch, printed a KeyboardInterrupt traceback (1 run in 3 under --no-isolate).
    Here the group of a process whose forkserver is importing gets SIGINT, as from a terminal."""
    (tmp_path / "slow_preload.py").write_text("import time\ntime.sleep(3)\n")
    process = subprocess.Popen([sys.executable, "-c", SLOW_SERVER, str(tmp_path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True,
                               cwd=Path(__file__).resolve().parents[1])
    assert process.stdout.readline().strip() == "started"
    time.sleep(1)
    os.killpg(process.pid, signal.SIGINT)   # mid-import
    out, err = process.communicate(timeout=120)
    assert out.split() == ["0"], err[-2000:]   # the server survived and forks
    assert "KeyboardInterrupt" not in err and "Traceback" not in err, err[-2000:]


def test_one_last_batch_default_for_the_library_and_the_command_line():
    from pipelines.config import PipelineConfig
    parser = cli.build_parser()
    assert parser.parse_args(["compare"]).last_batch == PipelineConfig().last_batch == "drop"


def test_text_in_a_rate_cell_is_named_as_a_damaged_results_file(tmp_path, capsys):
    rows = processes("loader", "p", [[100, 110], [120, 130]])
    rows[1]["img_per_s"] = "fast"
    write(tmp_path, rows)
    code, err = fails(["report", str(tmp_path / "run"), "--out", str(tmp_path / "out")], capsys)
    assert "img_per_s holds 'fast', not a number: a damaged results file" in err and "Traceback" not in err


def readme_run(tmp_path, folder: str = "out") -> tuple:
    """A run and a README holding the summary block of its report in tmp_path/folder."""
    write(tmp_path, [*processes("model", "none", [[50_000], [50_000]], model="m", step="eager"),
                     *processes("e2e", "p", [[49_000], [49_500]], model="m", step="eager")])
    readme = tmp_path / "README.md"
    start, end = report.marks("summary", folder)
    readme.write_text("head\n" + start + "\nold\n" + end + "\n" + "tail line\n" * 6000)
    return readme, readme.read_bytes()


def test_a_full_disk_while_writing_the_readme_leaves_it_whole(tmp_path, monkeypatch, capsys):
    readme, before = readme_run(tmp_path)
    real = results._write_all

    def full(fd, data):   # the README is cut at 40,960 bytes by a full disk; the reports fit
        if len(data) > 40_960:
            real(fd, data[:40_960])
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data)
    monkeypatch.setattr(results, "_write_all", full)
    code, err = fails(["report", str(tmp_path / "run"), "--out", str(tmp_path / "out"), "--readme", str(readme)],
                      capsys)
    assert readme.read_bytes() == before and not list(tmp_path.glob(".README.md.new"))
    assert f"cannot write {readme} (No space left on device): {readme} is left as it was" in err


def test_ctrl_c_during_a_report_exits_130_and_leaves_the_previous_files_whole(tmp_path, monkeypatch, capsys):
    readme_run(tmp_path)
    out = tmp_path / "out"
    assert cli.main(["report", str(tmp_path / "run"), "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(results, "_write_all", interrupted)
    assert cli.main(["report", str(tmp_path / "run"), "--out", str(out)]) == 130
    assert "stopped by SIGINT" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before   # no file cut, none added


def test_a_pipe_in_a_name_keeps_every_table_row_whole(tmp_path):
    rows = [*processes("model", "none", [[50_000], [50_000]], model="m|n", step="eager"),
            *processes("e2e", "p|q", [[49_000], [49_500]], model="m|n", step="eager")]
    write(tmp_path, rows)
    text = report.write([tmp_path / "run" / "results.csv"], tmp_path / "out").read_text()
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line.startswith("|")]
        unescaped = {len(line.replace("\\|", "")) - len(line.replace("\\|", "").replace("|", "")) for line in lines}
        assert len(unescaped) <= 1, block   # every row of a table has as many cell borders


def test_a_cpu_run_says_cores_not_cores_per_gpu_and_a_run_without_an_answer_says_so(tmp_path, synthetic_root,
                                                                                       capsys):
    base = ["compare", "--device", "cpu", "--no-isolate", "--data-root", str(synthetic_root), "--max-samples", "64",
            "--batch-size", "16", "--steps", "2", "--warmup", "0", "--repeats", "1", "--pipelines", "resident",
            "--models", "resnet9-w0.25"]
    cli.main([*base, "--modes", "model,e2e", "--out", str(tmp_path / "a")])
    printed = capsys.readouterr().out
    assert "mode    pipeline" in printed   # the printed table has a header (no stage column: none ran)
    answer = (tmp_path / "a" / "ANSWER.md").read_text()
    assert "cores, `resnet9-w0.25`" in answer and "per GPU" not in answer
    cli.main([*base, "--modes", "loader,model", "--out", str(tmp_path / "b")])
    assert "No answer: no e2e configuration ran beside its model-only one" in capsys.readouterr().out
    assert not (tmp_path / "b" / "ANSWER.md").exists()


def test_a_folder_name_cannot_make_a_link_of_its_own_in_the_readme(tmp_path):
    readme, _ = readme_run(tmp_path, "x](javascript:alert(1))")
    out = tmp_path / "x](javascript:alert(1))"
    report.write([tmp_path / "run" / "results.csv"], out, readme)
    text = readme.read_text().replace(report.marks("summary", out.name)[0], "")   # the marker: an HTML comment
    assert "](javascript:" not in text and "](x%5D%28javascript%3Aalert%281%29%29/REPORT.md)" in text


def test_a_first_block_that_cannot_be_written_leaves_no_empty_results_csv(tmp_path, monkeypatch):
    """Text that is not UTF-8 (a file name's bytes, as os.fsdecode gives them) is written escaped;
    a failure before any row landed leaves no 0-byte results.csv behind."""
    from tests.test_runner import no_space, results_write
    path = tmp_path / "results.csv"
    writer = results.CsvWriter(path, {}, run_id="r")
    monkeypatch.setattr(os, "write", results_write(no_space))
    with pytest.raises(results.WriteFailed, match="No space left on device"):
        writer.write({"pipeline": "dataloader", "mode": "loader", "status": "error", "error": "x"})
    assert not path.exists()
    monkeypatch.undo()
    writer.write({"pipeline": "dataloader", "mode": "loader", "status": "error", "error": os.fsdecode(b"bad\xff.jpg")})
    assert pd.read_csv(path).error.tolist() == ["bad\\udcff.jpg"]
