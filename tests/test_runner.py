"""Faults a long sweep meets, each with what the suite does about it (the README's fault table):
hangs, crashes, Ctrl-C, a killed parent, torn rows, a full disk, a second writer, all-failed
grids, bad data, bad options."""
from __future__ import annotations

import errno
import fcntl
import json
import math
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import pipelines
from bench import cli, report, results
from bench.measuring import harness, interrupts, machine
from bench.measuring.spec import COPIES, PAYLOADS, RunSpec
from bench.running import children, plan, runner
from bench.running.children import PF_EXITING
from bench.studies import stability
from pipelines.contract import Pipeline
from pipelines.config import PipelineConfig
from pipelines.dataloader import _Samples
from pipelines.sources import JpegSet

PIDS = "PIPEBENCH_TEST_PIDS"   # where the hanging pipeline records its pid and its helper's
STARTED = "PIPEBENCH_TEST_STARTED"   # a file `slow` and `reading` create once they run (where a test sets it)
LINGER_S = 3600   # how long `lingering`'s thread and helper would keep running: longer than any allowance


def mark_started() -> None:
    """Create the file $STARTED names, where a test set it: the test waits for that, not for a time."""
    if STARTED in os.environ:
        Path(os.environ[STARTED]).touch()


class Hanging(Pipeline):
    """Starts a helper process (as DataLoader workers are), records both pids, then hangs."""
    name = "hanging"

    def _iterate(self):
        helper = subprocess.Popen(["sleep", "300"])
        Path(os.environ[PIDS]).write_text(f"{os.getpid()} {helper.pid}")
        while True:
            time.sleep(0.1)
        yield

    def _stages(self):
        raise NotImplementedError


class FailsOnRankOne(Pipeline):
    """Rank 0 delivers batches; rank 1 fails as its epoch `at` starts (rank 0 then waits in a
    collective): it raises, or its process is killed (SIGKILL) with `kill`."""
    name = "fails-on-rank-one"
    at, kill = 0, False

    def _iterate(self):
        if self.config.rank == 1 and self.epoch == self.at:
            if self.kill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError("rank one cannot read its shard")
        for _ in range(len(self)):
            yield torch.zeros(16, 3, 32, 32), torch.zeros(16, dtype=torch.int64)

    def _stages(self):
        raise NotImplementedError


class KilledOnRankOne(FailsOnRankOne):
    name = "killed-on-rank-one"
    at, kill = 1, True


class Slow(Pipeline):
    """Half a second per batch: long enough to be interrupted mid-configuration."""
    name = "slow"

    def _iterate(self):
        mark_started()
        for _ in range(len(self)):
            time.sleep(0.5)
            yield torch.zeros(4, 3, 32, 32), torch.zeros(4, dtype=torch.int64)

    def _stages(self):
        raise NotImplementedError


class Crashing(Slow):
    """Dies the way a segfaulting decoder does: SIGKILL, no exception, no row of its own, leaving
    a helper process (a DataLoader worker) behind; records the helper's pid."""
    name = "crashing"

    def _iterate(self):
        helper = subprocess.Popen(["sleep", "300"])
        Path(os.environ[PIDS]).write_text(str(helper.pid))
        os.kill(os.getpid(), signal.SIGKILL)
        yield


class Lingering(Slow):
    """Measures fine, but would keep its process from exiting (a non-daemon thread that never ends)
    and leaves a helper process behind (as compile workers do); records both pids."""
    name = "lingering"

    def _iterate(self):
        threading.Thread(target=time.sleep, args=(LINGER_S,), daemon=False).start()
        helper = subprocess.Popen(["sleep", str(LINGER_S)])
        Path(os.environ[PIDS]).write_text(f"{os.getpid()} {helper.pid}")
        while True:
            yield torch.zeros(4, 3, 32, 32), torch.zeros(4, dtype=torch.int64)


class Reading(Slow):
    """Blocks inside a data-loading call that turns any Exception into a data error, as a batch-file
    reader does ("not a readable CIFAR-10 pickle")."""
    name = "reading"

    def _iterate(self):
        try:
            mark_started()
            while True:   # reading data_batch_3
                time.sleep(0.1)
        except Exception as e:
            raise ValueError(f"data_batch_3: not a readable CIFAR-10 pickle ({e})") from e
        yield


class Stopping(Slow):
    """Four quick batches per epoch; Ctrl-C during its third epoch."""
    name = "stopping"

    def _iterate(self):
        if self.epoch == 2:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(10)   # the signal is handled here
        for _ in range(4):
            yield torch.zeros(4, 3, 32, 32), torch.zeros(4, dtype=torch.int64)


class CutMidBatch(Slow):
    """Ctrl-C while its third batch is being fetched; `fetched` gains each batch as it is handed over whole."""
    name = "cut-mid-batch"
    fetched: list = []

    def _iterate(self):
        for i in range(4):
            if i == 2:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.5)   # the signal is handled here
            CutMidBatch.fetched.append(i)
            yield torch.zeros(4, 3, 32, 32), torch.zeros(4, dtype=torch.int64)


def run(tmp_path, root, *extra, command="compare", out="run") -> int:
    return cli.main([command, "--device", "cpu", "--processes", "1", "--data-root", str(root), "--max-samples", "64",
                     "--batch-size", "16", "--steps", "2", "--warmup", "0", "--repeats", "2", "--workers", "1",
                     "--modes", "loader", "--out", str(tmp_path / out), *extra])


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):   # gone (ESRCH: it ended while its stat was read)
        return False
    return state != "Z"   # a zombie is dead, only not yet reaped


def signal_when(condition, signum: int) -> threading.Event:
    """Send this process `signum` from a thread as soon as `condition()` holds, unless the event returned
    is set first (set it when the run has ended): the thread waits for what it watches, not for a time."""
    done = threading.Event()

    def watch():
        while not done.is_set():
            if condition():
                os.kill(os.getpid(), signum)
                return
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    return done


def recorded(path: Path, count: int) -> list[int]:
    """The `count` pids a pipeline above wrote to `path`, or [] while they are not all there."""
    try:
        pids = path.read_text().split()
    except FileNotFoundError:
        return []
    return list(map(int, pids)) if len(pids) == count else []


def test_a_hang_becomes_a_timeout_row_with_stacks_and_leaves_no_process(tmp_path, synthetic_root, monkeypatch,
                                                                         allowance):
    monkeypatch.setitem(pipelines._REGISTRY, "hanging", (__name__, "Hanging"))
    monkeypatch.setenv(PIDS, str(tmp_path / "pids"))
    timeout = math.ceil(allowance(4))   # for the configuration to start hanging, where the stacks show it
    code = run(tmp_path, synthetic_root, "--pipelines", "hanging,resident", "--timeout", str(timeout))
    assert code == 1
    df = pd.read_csv(tmp_path / "run" / "results.csv")
    hung = df[df.pipeline == "hanging"]
    assert hung.status.tolist() == ["timeout"] and f"no result within {timeout} s" in hung.error.iloc[0]
    dump = (tmp_path / "run" / hung.error.iloc[0].split("stacks of every thread in ")[1].split(";")[0]).read_text()
    assert "_iterate" in dump and "test_runner.py" in dump   # where it hung
    assert hung.error.iloc[0].split("; main thread in ")[1].endswith("in _iterate")   # not the watchdog's frame
    # the sweep went on to the next configuration; on a busy machine its start alone can outlast the
    # short budget, so it may be a timeout row too: only the hanging one is this test's (issue 54)
    healthy = df[df.pipeline == "resident"].status
    assert len(healthy) and healthy.isin(["ok", "timeout"]).all()
    pids = recorded(tmp_path / "pids", 2)   # the child and its helper
    assert pids, "the configuration recorded no pids"
    assert_all_end(pids, allowance(5))


def test_a_crashed_configuration_is_one_error_row_and_leaves_no_process(tmp_path, synthetic_root, monkeypatch,
                                                                         allowance):
    monkeypatch.setitem(pipelines._REGISTRY, "crashing", (__name__, "Crashing"))
    monkeypatch.setenv(PIDS, str(tmp_path / "pids"))
    assert run(tmp_path, synthetic_root, "--pipelines", "crashing,resident") == 1
    df = pd.read_csv(tmp_path / "run" / "results.csv")
    crashed = df[df.pipeline == "crashing"]
    assert crashed.status.tolist() == ["error"] and "(killed by SIGKILL) after 0 of 2 windows" in crashed.error.iloc[0]
    assert (df[df.pipeline == "resident"].status == "ok").sum() == 2
    pids = recorded(tmp_path / "pids", 1)   # its helper
    assert pids, "the configuration recorded no pids"
    assert_all_end(pids, allowance(5))


def test_one_failing_rank_ends_its_configuration_at_once_with_one_row_naming_it(synthetic_root, tmp_path,
                                                                                monkeypatch):
    monkeypatch.setitem(pipelines._REGISTRY, "fails-on-rank-one", (__name__, "FailsOnRankOne"))
    out, deadline = tmp_path / "run", 300
    started = time.monotonic()
    code = cli.main(["sweep", "--device", "cpu", "--ranks", "1,2", "--cpus", "1", "--processes", "1",
                     "--pipelines", "fails-on-rank-one", "--modes", "loader", "--batch-size", "16", "--steps", "2",
                     "--warmup", "1", "--repeats", "2", "--max-samples", "64", "--data-root", str(synthetic_root),
                     "--timeout", str(deadline), "--out", str(out)])
    # not the deadline: rank 0, waiting for rank 1, is ended with it (a configuration that waited for it
    # would alone take longer than the whole sweep here)
    assert time.monotonic() - started < deadline
    assert code == 1
    df = pd.read_csv(out / "results.csv")
    assert df[df.world_size == 1].status.tolist() == ["ok", "ok"]
    failed = df[df.world_size == 2]
    assert failed.status.tolist() == ["error"]
    assert failed.error.iloc[0] == "rank 1: RuntimeError: rank one cannot read its shard"


def test_a_rank_failing_in_a_shared_process_ends_its_member_and_the_rest_run_on_both_ranks(synthetic_root, tmp_path,
                                                                                          monkeypatch):
    """--ranks 2 --share-process: the member rank 1 fails ends both ranks' process at once with one row
    naming it; the members after it run in new processes, on both ranks, ok."""
    monkeypatch.setitem(pipelines._REGISTRY, "fails-on-rank-one", (__name__, "FailsOnRankOne"))
    out, deadline = tmp_path / "run", 300
    started = time.monotonic()
    assert cli.main(["sweep", "--device", "cpu", "--ranks", "2", "--cpus", "1", "--processes", "1", "--share-process",
                     "--pipelines", "fails-on-rank-one,resident", "--modes", "model,e2e", "--models", "resnet9-w0.25",
                     "--batch-size", "16", "--steps", "2", "--warmup", "1", "--repeats", "2", "--max-samples", "64",
                     "--data-root", str(synthetic_root), "--timeout", str(deadline), "--out", str(out)]) == 1
    assert time.monotonic() - started < deadline   # not the deadline
    df = pd.read_csv(out / "results.csv")
    failed = df[df.status != "ok"]
    assert failed.pipeline.tolist() == ["fails-on-rank-one"]
    assert failed.error.iloc[0] == "rank 1: RuntimeError: rank one cannot read its shard"
    ok = df[df.status == "ok"]
    assert ok.groupby(["mode", "pipeline"])["rank"].agg(sorted).to_dict() == {
        ("model", "none"): [0, 0, 1, 1], ("e2e", "resident"): [0, 0, 1, 1]}


def test_of_two_ranks_failing_in_one_poll_the_row_names_the_one_that_failed_first(synthetic_root):
    """A peer's error in a collective follows the rank that failed, and both can be read in one poll
    (rank 0 read first): the row names the first failure on the clock, not the lowest rank."""
    spec = RunSpec("resident", "loader", "none", PipelineConfig(data_root=str(synthetic_root), device="cpu"))
    children = [runner._Rank(None, None, None) for _ in range(2)]
    children[0].records = [{"member": 0, "status": "error", "error": "RuntimeError: Connection closed by peer", "at": 2.0}]
    children[1].records = [{"member": 0, "status": "error", "error": "RuntimeError: rank one cannot read", "at": 1.0}]
    for row in (runner._rows(spec, 0, children, True)[0], runner._failed(spec, 0, children, [], True)):
        assert row["error"] == "rank 1: RuntimeError: rank one cannot read"


@pytest.mark.parametrize("mode,late", [("loader", False), ("e2e", False), ("e2e", True)])
def test_a_rank_that_is_killed_is_named_not_the_peer_its_death_stopped(synthetic_root, tmp_path, monkeypatch, mode,
                                                                       late):
    """Rank 1 killed mid-configuration: the row blames it, not rank 0's collective error or rank 0's end;
    `late`: also when the forkserver has not yet reported its death (on a busy machine it reported it
    after rank 0's error had arrived: multiprocessing's is_alive() said True)."""
    monkeypatch.setitem(pipelines._REGISTRY, "killed-on-rank-one", (__name__, "KilledOnRankOne"))
    if late:
        monkeypatch.setattr(multiprocessing.process.BaseProcess, "is_alive", lambda self: True)
    out = tmp_path / "run"
    assert cli.main(["sweep", "--device", "cpu", "--ranks", "2", "--cpus", "1", "--processes", "1",
                     "--pipelines", "killed-on-rank-one", "--modes", mode, "--models", "resnet9-w0.25",
                     "--batch-size", "16", "--steps", "6", "--warmup", "1", "--repeats", "2", "--max-samples", "64",
                     "--data-root", str(synthetic_root), "--timeout", "120", "--out", str(out)]) == 1
    (error,) = pd.read_csv(out / "results.csv").error
    assert error.startswith("rank 1's process ended (killed by SIGKILL) after ")


def test_a_rank_whose_exit_has_begun_has_ended_for_the_runner(monkeypatch):
    """How the runner reads a rank's end from /proc: a process that runs has not; a zombie and a pid that
    is gone have; so has a process whose exit has begun (PF_EXITING in stat's flags), which closes its
    sockets, failing its peer's collective, before it turns zombie: a CI run read rank 0's error while
    SIGKILLed rank 1 was still in that stretch, and blamed rank 0. Only there: `_alive` (what pipebench
    waits for before it exits) still counts such a process as running."""
    assert children._alive(os.getpid()) and not children._exit_begun(os.getpid())
    zombie = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while children._alive(zombie.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert children._exit_begun(zombie.pid) and not children._alive(zombie.pid)
    zombie.wait()
    assert children._exit_begun(zombie.pid) and not children._alive(zombie.pid)   # gone
    head, tail = Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)
    fields = tail.split()
    own = int(fields[6])
    for state, flags, begun in [("S", own & ~PF_EXITING, False), ("S", own | PF_EXITING, True),
                                ("Z", own & ~PF_EXITING, True)]:   # a real zombie has the flag too
        text = head + ") " + " ".join([state] + fields[1:6] + [str(flags)] + fields[7:])
        monkeypatch.setattr("bench.running.children.Path", lambda path: type("Stat", (), {"read_text": lambda self: text})())
        assert children._exit_begun(os.getpid()) is begun
        assert children._alive(os.getpid()) is (state != "Z")


def test_a_process_reaped_as_its_stat_is_read_has_ended_for_the_runner(monkeypatch):
    """/proc/PID/stat opened as the process was being reaped reads ESRCH ("No such process"): a SIGKILLed
    rank read in that instant raised it out of the sweep, which blamed --out. Such a process has ended."""
    def reaped(path):
        def read_text(self):
            raise ProcessLookupError(errno.ESRCH, os.strerror(errno.ESRCH))
        return type("Stat", (), {"read_text": read_text})()
    monkeypatch.setattr("bench.running.children.Path", reaped)
    assert children._exit_begun(os.getpid()) and not children._alive(os.getpid())


def test_a_configuration_exits_at_once_keeps_its_rows_and_leaves_no_process(tmp_path, synthetic_root, monkeypatch,
                                                                             allowance):
    monkeypatch.setitem(pipelines._REGISTRY, "lingering", (__name__, "Lingering"))
    monkeypatch.setenv(PIDS, str(tmp_path / "pids"))
    grace = math.ceil(allowance(120))   # more than the run takes; LINGER_S more than that
    monkeypatch.setattr(runner, "EXIT_GRACE_S", float(grace))
    start = time.monotonic()
    assert run(tmp_path, synthetic_root, "--pipelines", "lingering", "--timeout", str(grace)) == 0
    assert time.monotonic() - start < grace   # not the grace period, not the deadline, not the thread's LINGER_S
    df = pd.read_csv(tmp_path / "run" / "results.csv")
    assert df.status.tolist() == ["ok", "ok"]
    pids = recorded(tmp_path / "pids", 2)   # the child and its helper
    assert pids, "the configuration recorded no pids"
    assert_all_end(pids, allowance(5))


def test_ctrl_c_mid_configuration_then_resume_counts_nothing_twice(tmp_path, synthetic_root, monkeypatch):
    monkeypatch.setitem(pipelines._REGISTRY, "slow", (__name__, "Slow"))
    monkeypatch.setenv(STARTED, str(tmp_path / "started"))
    csv = tmp_path / "run" / "results.csv"
    done = signal_when((tmp_path / "started").exists, signal.SIGINT)   # the slow configuration runs now
    try:
        assert run(tmp_path, synthetic_root, "--pipelines", "resident,slow", command="sweep") == 130
    finally:
        done.set()
    df = pd.read_csv(csv)
    assert df.pipeline.tolist() == ["resident", "resident"]   # no partial rows of `slow`
    assert run(tmp_path, synthetic_root, "--pipelines", "resident,slow", command="sweep") == 0
    df = pd.read_csv(csv)
    assert df.groupby("pipeline").size().to_dict() == {"resident": 2, "slow": 2}
    assert sorted(df[df.pipeline == "slow"].repeat) == [0, 1]


def test_a_torn_last_line_is_set_aside_and_resume_and_report_go_on(tmp_path, synthetic_root):
    run(tmp_path, synthetic_root, "--pipelines", "resident", command="sweep")
    csv = tmp_path / "run" / "results.csv"
    whole = csv.read_bytes()
    csv.write_bytes(whole + whole.splitlines(keepends=True)[-1][:40])   # a row cut by a full disk
    with pytest.warns(UserWarning, match="torn"):
        assert len(results.read_rows(csv)) == 2
    with pytest.warns(UserWarning, match="torn"):
        report.write([csv], tmp_path / "report")
    with pytest.warns(UserWarning, match="moved to results.csv.torn"):
        assert run(tmp_path, synthetic_root, "--pipelines", "resident,prefetch", command="sweep") == 0
    df = pd.read_csv(csv)
    assert df.groupby("pipeline").size().to_dict() == {"prefetch": 2, "resident": 2}
    assert (tmp_path / "run" / "results.csv.torn").read_bytes() == whole.splitlines(keepends=True)[-1][:40] + b"\n"


@pytest.mark.parametrize("mode", ["loader", "model", "e2e"])
def test_a_block_cut_short_is_measured_again_not_doubled(tmp_path, synthetic_root, capsys, mode):
    """A crash in the middle of writing a block leaves its first rows and a torn line: a resume
    removes the rows and measures the configuration again (it kept them and added a second block)."""
    extra = ["--pipelines", "resident", "--modes", mode, "--models", "resnet9-w0.25"]
    run(tmp_path, synthetic_root, *extra, command="sweep")
    csv = tmp_path / "run" / "results.csv"
    lines = csv.read_bytes().splitlines(keepends=True)
    assert len(lines) == 3   # the header and one block of two windows
    csv.write_bytes(b"".join(lines[:-1]) + lines[-1][:30])   # its last row cut in the middle
    capsys.readouterr()
    with pytest.warns(UserWarning, match="torn"):
        assert run(tmp_path, synthetic_root, *extra, command="sweep") == 0
    assert "resume: removed 1 rows of 1 configuration processes cut short" in capsys.readouterr().err
    df = pd.read_csv(csv)
    assert len(df) == 2 and df.run_id.nunique() == 1 and set(df.repeat) == {0, 1}   # one whole block, the new one


def test_a_second_run_into_a_locked_folder_is_refused(tmp_path, synthetic_root):
    with runner.folder_lock(tmp_path / "run"):
        with pytest.raises(SystemExit, match=r"in use by another pipebench run \(pid \d+\)"):
            run(tmp_path, synthetic_root, "--pipelines", "resident", "--no-isolate")
    assert run(tmp_path, synthetic_root, "--pipelines", "resident", "--no-isolate") == 0   # released


def test_a_grid_where_everything_failed_exits_non_zero_and_says_so(tmp_path, synthetic_root, capsys):
    code = run(tmp_path, synthetic_root, "--pipelines", "resident", "--batch-size", "128", "--no-isolate")
    captured = capsys.readouterr()
    assert code == 1 and "1 of 1 configurations failed" in captured.err
    assert "no successful configuration" in captured.out
    df = pd.read_csv(tmp_path / "run" / "results.csv")   # 128 > 64 samples with last_batch drop
    assert df.status.tolist() == ["error"] and "larger than the 64 samples per epoch" in df.error.iloc[0]


def test_a_batch_larger_than_the_split_records_what_ran_with_partial(tmp_path, synthetic_root):
    run(tmp_path, synthetic_root, "--pipelines", "resident", "--batch-size", "128", "--last-batch", "partial",
        "--no-isolate")
    df = pd.read_csv(tmp_path / "run" / "results.csv")
    assert (df.status == "ok").all() and (df.batch_size == 64).all()


def test_a_missing_data_root_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match=r"no CIFAR-10 here; run `pipebench download --root"):
        cli.main(["compare", "--device", "cpu", "--no-isolate", "--source", "cifar10", "--data-root",
                  str(tmp_path / "nowhere"), "--modes", "loader", "--out", str(tmp_path / "run")])


@pytest.mark.parametrize("argv,message", [
    (["--steps", "0"], "expected an integer from 1 to 10,000,000"), (["--repeats", "0"], "expected an integer >= 1"),
    (["--warmup", "-1"], "expected an integer from 0 to 10,000,000"), (["--timeout", "0"], "expected a number > 0"),
    (["--batch", "32"], "unrecognized arguments: --batch"),   # no abbreviations
])
def test_bad_cli_values_are_one_line_errors(tmp_path, argv, message, capsys):
    with pytest.raises(SystemExit):
        cli.main(["compare", "--device", "cpu", "--out", str(tmp_path / "x"), *argv])
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("values,message", [({"batch": [32]}, "unknown key 'batch'"),
                                             ({"work": [1]}, "unknown key 'work'"),
                                             ({"out": "x"}, "unknown key 'out'"),
                                             ({"grids": [{"batch": [32]}]}, "unknown key 'batch'"),
                                             ({"grids": [{"grids": []}]}, "unknown key 'grids'"),
                                             ({"grids": []}, '"grids" must be a list of JSON objects'),
                                             ({"grids": {"batch_size": [8]}}, '"grids" must be a list')])
def test_config_json_keys_must_be_whole_option_names(tmp_path, values, message):
    path = tmp_path / "grid.json"
    path.write_text(json.dumps(values))
    with pytest.raises(SystemExit, match=message):
        cli.main(["sweep", "--config", str(path), "--out", str(tmp_path / "x")])


def test_config_json_false_is_honoured(tmp_path):
    parser = cli.build_parser()

    def parsed(values: dict):
        path = tmp_path / "grid.json"
        path.write_text(json.dumps(values))
        (tokens,) = cli.config_grids(path, parser)   # one grid: the file without "grids"
        return parser.parse_args(["sweep", "--out", "x", *tokens])

    args = parsed({"channels_last": False, "pin_memory": False})
    assert args.channels_last is False and args.pin_memory is False
    args = parsed({"channels_last": True, "batch_size": [8, 16]})
    assert args.channels_last is True and args.batch_size == [8, 16]


def test_a_config_plan_of_several_grids_runs_each_in_its_own_processes_in_rounds(tmp_path):
    """A key "grids" holds several grids sharing the other keys; each grid runs in its own number of
    processes, round after round across the grids."""
    parser = cli.build_parser()
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"pipelines": ["resident"], "modes": ["loader"], "grids": [
        {"batch_size": [8], "processes": 1}, {"batch_size": [16, 32], "seed": [0, 1], "processes": 2}]}))
    grids = cli.config_grids(path, parser)
    assert grids == [["--pipelines", "resident", "--modes", "loader", "--batch-size", "8", "--processes", "1"],
                     ["--pipelines", "resident", "--modes", "loader", "--batch-size", "16,32", "--seed", "0,1",
                      "--processes", "2"]]
    options = [parser.parse_args(["sweep", "--device", "cpu", "--cpus", "1", *tokens]) for tokens in grids]
    specs = cli.specs_for(options, torch.device("cpu"))
    assert [(s.config.batch_size, s.config.seed, s.process) for s in specs] == [
        (8, 0, 0), (16, 0, 0), (16, 1, 0), (32, 0, 0), (32, 1, 0),   # round 1: both grids
        (16, 0, 1), (16, 1, 1), (32, 0, 1), (32, 1, 1)]              # round 2: the grid of 2 processes
    assert {(s.pipeline, s.mode, s.cpus, s.config.num_workers) for s in specs} == {("resident", "loader", 1, 1)}


@pytest.mark.parametrize("plan", sorted(p.name for p in (Path(__file__).resolve().parents[1] / "bench" / "plans").glob("*.json")))
def test_every_committed_plan_parses_into_grids_the_command_line_takes(plan):
    """Each plan in bench/plans: valid JSON whose keys are options, every grid parsed by `pipebench
    sweep` (its configurations are not expanded here: they ask for more cores and GPUs than CI has)."""
    parser = cli.build_parser()
    grids = cli.config_grids(Path(__file__).resolve().parents[1] / "bench" / "plans" / plan, parser)
    assert grids
    for tokens in grids:
        assert parser.parse_args(["sweep", "--out", "x", *tokens]).command == "sweep"


@pytest.mark.parametrize("plan", sorted(p.name for p in (Path(__file__).resolve().parents[1] / "bench" / "plans").glob("*.json")))
def test_no_committed_plan_cuts_the_32_px_split(plan):
    """A 32-px grid of a committed plan on the default data (not a photo folder) reads the whole
    training split: with the first N images (`max_samples`) every epoch is a fraction of it, and its
    restarts weigh that much more in every e2e window."""
    parser = cli.build_parser()
    for tokens in cli.config_grids(Path(__file__).resolve().parents[1] / "bench" / "plans" / plan, parser):
        options = parser.parse_args(["sweep", "--out", "x", *tokens])
        if 32 in options.image_size and not options.source.startswith("imagefolder:"):
            assert options.max_samples is None, (plan, tokens)


def test_a_corrupt_jpeg_names_its_sample():
    files = [b"\xff\xd8 not a jpeg", b"junk", b"junk"]
    jpeg = JpegSet(np.frombuffer(b"".join(files), np.uint8), np.cumsum([0, *map(len, files)]), 90)
    data = type("Data", (), {"images": None, "labels": np.zeros(3, np.int64), "jpeg": jpeg})()
    samples = _Samples(data, 32, None, "test")
    with pytest.raises(ValueError, match="sample 1 of the test JPEG copy cannot be decoded"):
        samples[1, 0, 0, False]   # key: (index, dy, dx, flip)


def test_prefetch_a_new_iterator_ends_the_previous_one_and_the_epoch_is_fixed_at_start(synthetic_root):
    config = PipelineConfig(data_root=str(synthetic_root), device="cpu", batch_size=16, max_samples=64)

    def epoch_of(epoch: int) -> list[torch.Tensor]:
        with pipelines.build("prefetch", config) as fresh:
            fresh.set_epoch(epoch)
            return [x for x, _ in fresh]

    with pipelines.build("prefetch", config) as p:
        first = iter(p)                 # epoch 0, fixed now
        p.set_epoch(3)
        assert torch.equal(next(first)[0], epoch_of(0)[0])
        second = iter(p)                # epoch 3: supersedes `first`
        assert [torch.equal(x, y) for (x, _), y in zip(second, epoch_of(3))] == [True] * 4
        with pytest.raises(RuntimeError, match="superseded"):
            next(first)


def test_dataloader_leaves_the_callers_random_stream_alone(synthetic_root):
    config = PipelineConfig(data_root=str(synthetic_root), device="cpu", batch_size=16, max_samples=64,
                            num_workers=0)
    with pipelines.build("dataloader", config) as p:
        torch.manual_seed(123)
        expected = torch.rand(3)
        torch.manual_seed(123)
        next(iter(p))
        assert torch.equal(torch.rand(3), expected)


def test_stability_records_memory_after_every_epoch(tmp_path, synthetic_root):
    out = tmp_path / "stability"
    assert cli.main(["stability", "--device", "cpu", "--pipelines", "resident,dataloader", "--epochs", "4",
                     "--max-samples", "128", "--workers", "1", "--data-root", str(synthetic_root),
                     "--out", str(out)]) == 0
    df = pd.read_csv(out / "stability.csv")
    assert df.groupby("pipeline").epoch.apply(list).to_dict() == {"dataloader": [0, 1, 2, 3], "resident": [0, 1, 2, 3]}
    workers = df[df.pipeline == "dataloader"]
    assert (df.host_rss_mb > 10).all() and (workers.children >= 1).all() and (workers.children_rss_mb > 0).all()
    assert (out / "stability.png").stat().st_size > 10_000 and "| resident" in (out / "STABILITY.md").read_text()


@pytest.mark.parametrize("epochs", ["1", "3"])
def test_stability_refuses_fewer_epochs_than_growth_needs(tmp_path, epochs, capsys):
    """Fault campaign: with --epochs 1 or 2 (or 3) growth, measured from epoch 2 on, compared no two epochs, and
    STABILITY.md said a flat pass."""
    out = tmp_path / "stability"
    with pytest.raises(SystemExit) as e:
        cli.main(["stability", "--device", "cpu", "--pipelines", "resident", "--epochs", epochs, "--out", str(out)])
    assert e.value.code == 2 and f"argument --epochs: '{epochs}': expected an integer >= 4" in capsys.readouterr().err
    assert not out.exists()


def test_stability_refuses_a_batch_larger_than_the_data(tmp_path, synthetic_root):
    """Fault campaign: --batch-size 512 of 64 samples read 0 images per epoch (the partial batch dropped), and
    STABILITY.md said a flat pass."""
    out = tmp_path / "stability"
    with pytest.raises(SystemExit) as e:
        cli.main(["stability", "--device", "cpu", "--pipelines", "resident", "--batch-size", "512", "--max-samples",
                  "64", "--epochs", "4", "--data-root", str(synthetic_root), "--out", str(out)])
    assert e.value.code == ("pipebench stability: batch size 512 is larger than the 64 samples per epoch (the last, "
                            "partial batch is dropped): no epoch would read an image; pass a smaller --batch-size or "
                            "a larger --max-samples")
    assert not {"stability.csv", "STABILITY.md", "stability.png"} & {p.name for p in out.iterdir()}


def test_stability_refuses_when_no_pipeline_asked_for_can_run(tmp_path, monkeypatch):
    """Fault campaign: `--pipelines ffcv` where FFCV is missing wrote a stability.csv of environment columns alone,
    then failed with `KeyError: 'pipeline'`."""
    monkeypatch.setitem(pipelines._REGISTRY, "missing", ("no_such_module_xyz", "Nothing"))
    out = tmp_path / "stability"
    with pytest.raises(SystemExit) as e:
        cli.main(["stability", "--device", "cpu", "--pipelines", "missing", "--epochs", "4", "--out", str(out)])
    assert e.value.code == ("pipebench stability: nothing asked for can run here: missing: No module named "
                            "'no_such_module_xyz'")
    assert not out.exists()


@pytest.mark.parametrize("name", ["dataloader", "timm"])
def test_dataloader_workers_start_outside_the_threaded_process_by_default(synthetic_root, name):
    if name not in [n for n, reason in pipelines.available().items() if reason is None]:
        pytest.skip(f"{name} unavailable here")
    config = PipelineConfig(data_root=str(synthetic_root), device="cpu", batch_size=16, max_samples=64,
                            num_workers=2)
    assert config.worker_start == "forkserver"
    with pipelines.build(name, config.replace(num_workers=0)) as p:
        expected = [x for x, _ in p]
    for method in ("forkserver", "fork"):
        with pipelines.build(name, config.replace(worker_start=method)) as p:
            assert all(torch.equal(x, y) for (x, _), y in zip(p, expected))
            workers = multiprocessing.active_children()
            parents = {int(Path(f"/proc/{w.pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) for w in workers}
            assert len(workers) >= 2
            # forkserver: children of a clean server process, not forks of this one (which runs threads)
            assert (os.getpid() in parents) == (method == "fork")


def test_shared_arrays_travel_as_shared_memory_copied_once():
    from pipelines.workers import SharedArrays

    class Holder(SharedArrays):
        def __init__(self):
            self.images, self.name = np.arange(4096, dtype=np.uint8), "x"

    holder = Holder()
    first, second = holder.__getstate__(), holder.__getstate__()
    assert first["images"].is_shared() and first["images"] is second["images"] and first["name"] == "x"
    clone = Holder.__new__(Holder)
    clone.__setstate__(first)
    assert isinstance(clone.images, np.ndarray) and np.array_equal(clone.images, holder.images)


def test_a_killed_parent_leaves_no_process_of_its_run(tmp_path, synthetic_root, allowance):
    """SIGKILL of `pipebench compare` (nothing runs its clean-up) while a configuration hangs: the
    configuration's process group and the forkserver end within seconds."""
    pids = tmp_path / "pids"
    code = (f"import sys, pipelines; pipelines._REGISTRY['hanging'] = ({__name__!r}, 'Hanging'); "
            "from bench import cli; sys.exit(cli.main(sys.argv[1:]))")
    path = os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parents[1])])
    parent = subprocess.Popen([sys.executable, "-c", code, "compare", "--device", "cpu", "--processes", "1",
                               "--pipelines", "hanging",
                               "--modes", "loader", "--max-samples", "64", "--batch-size", "16", "--steps", "2",
                               "--warmup", "0", "--repeats", "1", "--workers", "1", "--data-root", str(synthetic_root),
                               "--out", str(tmp_path / "run")],
                              # TMPDIR: its run's temporary folder, which nothing removes once it is killed
                              env={**os.environ, PIDS: str(pids), "PYTHONPATH": path, "TMPDIR": str(tmp_path)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not recorded(pids, 2) and parent.poll() is None:   # until the configuration hangs
            time.sleep(0.1)
        assert recorded(pids, 2), "the configuration never started"
        started = machine.descendants(parent.pid)   # the forkserver, the configuration, its helper
        assert set(recorded(pids, 2)) <= set(started) and len(started) >= 3
    finally:
        parent.kill()
        parent.wait()
    assert_all_end(started, allowance(5))


def assert_all_end(pids, seconds: float) -> None:
    """Every process of `pids` ends within `seconds`; any left is killed (so no test leaves one) and
    named in the failure."""
    deadline = time.monotonic() + seconds
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:80] for pid in pids if alive(pid)}
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left


def test_dataloader_workers_end_when_the_process_that_built_the_loader_is_killed(tmp_path, synthetic_root, allowance):
    """Workers watch the process that built their loader, not only their parent (the forkserver, which
    they keep alive themselves): SIGKILL of a script iterating `dataloader` leaves no worker."""
    script = tmp_path / "loop.py"
    script.write_text(
        "import sys, time, pipelines\n"
        "if __name__ == '__main__':\n"
        f"    p = pipelines.build('dataloader', data_root={str(synthetic_root)!r}, device='cpu', max_samples=256,\n"
        "                        batch_size=32, num_workers=2)\n"
        "    next(iter(p))\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(300)\n")
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    try:
        assert owner.stdout.readline().strip() == "ready"
        started = machine.descendants(owner.pid)   # the forkserver, two workers, the resource tracker
        assert len(started) >= 3
    finally:
        owner.kill()
        owner.wait()
    assert_all_end(started, allowance(6))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_under_no_isolate_stops_the_run_without_an_error_row(tmp_path, synthetic_root, monkeypatch, signum):
    """Inside a call that catches every Exception (a data reader's), a stop is still a stop: no row
    blaming the data, no next configuration, exit 130 (143 for SIGTERM)."""
    monkeypatch.setitem(pipelines._REGISTRY, "reading", (__name__, "Reading"))
    monkeypatch.setenv(STARTED, str(tmp_path / "started"))
    monkeypatch.setattr(interrupts, "HOLD_S", 0.5)   # `reading` blocks in its first batch, where a stop is held back
    csv = tmp_path / "run" / "results.csv"
    done = signal_when((tmp_path / "started").exists, signum)   # `reading` is blocked now
    try:
        code = run(tmp_path, synthetic_root, "--pipelines", "resident,reading,prefetch", "--no-isolate",
                   command="sweep")
    finally:
        done.set()
    assert code == 128 + signum
    assert pd.read_csv(csv).pipeline.tolist() == ["resident", "resident"]   # no row of `reading` or after it


def results_write(fault):
    """A stand-in for os.write: writes to results.csv (or a new file beside it) go through
    `fault(real_write, fd, data, call_number)`, the rest as usual."""
    real, calls = os.write, []

    def write(fd, data):
        if "results.csv" not in os.readlink(f"/proc/self/fd/{fd}"):
            return real(fd, data)
        calls.append(len(data))
        return fault(real, fd, bytes(data), len(calls))
    return write


def no_space(real, fd, data, call):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_mid_configuration_keeps_none_of_its_rows_and_ends_in_one_line(tmp_path, synthetic_root,
                                                                                  monkeypatch, capsys):
    def full_on_the_second_block(real, fd, data, call):
        if call == 1:
            return real(fd, data)
        if call == 2:   # half of it lands, then the disk is full
            return real(fd, data[:len(data) // 2])
        return no_space(real, fd, data, call)

    monkeypatch.setattr(os, "write", results_write(full_on_the_second_block))
    csv = tmp_path / "run" / "results.csv"
    with pytest.raises(SystemExit) as stop:
        run(tmp_path, synthetic_root, "--pipelines", "resident,prefetch", "--no-isolate", command="sweep")
    said = stop.value.code
    assert said.startswith(f"pipebench sweep: cannot write to {csv} (No space left on device): every finished "
                           "configuration's rows are kept, none of this one's; `pipebench sweep ")
    assert "--pipelines resident,prefetch" in said and said.endswith(f" --out {csv.parent}` resumes")   # the same run
    assert "Traceback" not in capsys.readouterr().err
    assert pd.read_csv(csv).pipeline.tolist() == ["resident", "resident"]   # whole lines, nothing of prefetch
    assert not (csv.parent / ".lock").exists()
    monkeypatch.undo()
    assert run(tmp_path, synthetic_root, "--pipelines", "resident,prefetch", "--no-isolate", command="sweep") == 0
    assert pd.read_csv(csv).groupby("pipeline").size().to_dict() == {"prefetch": 2, "resident": 2}


def test_a_short_write_is_continued(tmp_path, synthetic_root, monkeypatch):
    def short(real, fd, data, call):   # at most half of what was asked, each time
        return real(fd, data[:max(1, len(data) // 2)])

    monkeypatch.setattr(os, "write", results_write(short))
    assert run(tmp_path, synthetic_root, "--pipelines", "resident,prefetch", "--no-isolate") == 0
    df = pd.read_csv(tmp_path / "run" / "results.csv")
    assert df.pipeline.tolist() == ["resident", "resident", "prefetch", "prefetch"] and (df.status == "ok").all()
    assert list(df.columns) == results.all_columns()


def older_results(path: Path) -> bytes:
    old_columns = [c for c in results.all_columns() if c not in ("parallel", "gpus", "world_img_per_s")]
    pd.DataFrame([{"run_id": "r", "pipeline": "prefetch", "mode": "loader", "status": "ok"}] * 3).reindex(
        columns=old_columns).to_csv(path, index=False)
    return path.read_bytes()


def test_a_failed_column_upgrade_leaves_the_older_file_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "results.csv"
    before = older_results(path)
    monkeypatch.setattr(os, "write", results_write(no_space))
    with pytest.raises(results.WriteFailed, match=r"cannot move .*results.csv to this version's columns \(No space "
                                                  r"left on device\); it is left as it was"):
        results.CsvWriter(path, {}, run_id="r")
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["results.csv"]
    monkeypatch.undo()
    results.CsvWriter(path, {}, run_id="r")   # with room: moved to the current columns
    assert list(pd.read_csv(path).columns) == results.all_columns() and len(pd.read_csv(path)) == 3


@pytest.mark.parametrize("text", ["pipeline,img_per_s\nresident,100\n", "a;b\n1;2\n"])
def test_a_results_csv_that_is_not_pipebenchs_is_refused_and_left_alone(tmp_path, synthetic_root, text):
    csv = tmp_path / "run" / "results.csv"
    csv.parent.mkdir()
    csv.write_text(text)
    with pytest.raises(SystemExit, match=r"results.csv is not a pipebench results file \(no column run_id"):
        run(tmp_path, synthetic_root, "--pipelines", "resident", "--no-isolate", command="sweep")
    assert csv.read_text() == text


def test_a_finished_run_removes_its_lock(tmp_path, synthetic_root):
    assert run(tmp_path, synthetic_root, "--pipelines", "resident", "--no-isolate") == 0
    assert not (tmp_path / "run" / ".lock").exists()


def test_a_lock_removed_by_its_holder_meanwhile_is_taken_afresh(tmp_path, monkeypatch):
    """The holder removes OUT/.lock between another process's open and flock: that process must
    lock the file the path names now, not the removed one (which would let a third run in)."""
    out = tmp_path / "run"
    out.mkdir()
    (out / ".lock").write_text("1")
    real = fcntl.flock

    def flock(f, operation):
        monkeypatch.setattr(fcntl, "flock", real)
        (out / ".lock").unlink()   # the holder's run ends
        return real(f, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    with runner.folder_lock(out):
        with pytest.raises(ValueError, match=rf"in use by another pipebench run \(pid {os.getpid()}\)"):
            with runner.folder_lock(out):
                pass
    assert not (out / ".lock").exists()


def test_each_failure_is_printed_as_it_happens_and_a_shared_cause_once(tmp_path, synthetic_root, capsys):
    code = run(tmp_path, synthetic_root, "--pipelines", "resident,prefetch", "--batch-size", "128", "--no-isolate")
    err = capsys.readouterr().err
    cause = pd.read_csv(tmp_path / "run" / "results.csv").error.iloc[0]
    assert code == 1 and "larger than the 64 samples per epoch" in cause
    assert f"error: resident loader none 32px batch 128: {cause}\n" in err
    assert f"error: prefetch loader none 32px batch 128: {cause}\n" in err
    assert err.endswith(f"pipebench compare: 2 of 2 configurations failed or timed out\n"
                        f"pipebench compare: all 2 failed: {cause}\n")


def test_outcome_names_no_shared_cause_when_causes_differ():
    spec = RunSpec("resident", "loader", "none", PipelineConfig(device="cpu"))
    outcome = runner.Outcome(3)
    assert outcome.record(spec, [{"status": "ok"}, {"status": "ok"}]) is None
    assert outcome.record(spec, [{"status": "error", "error": "A"}]) == "error: resident loader none 32px batch 512: A"
    assert outcome.summary_lines() == ["1 of 3 configurations failed or timed out: A"]
    outcome.record(spec, [{"status": "timeout", "error": "B"}])
    assert (outcome.ok, outcome.failed) == (1, 2)
    assert outcome.summary_lines() == ["2 of 3 configurations failed or timed out (each one's cause is printed "
                                       "above and in its row)"]


def test_ctrl_c_during_stability_writes_the_epochs_measured(tmp_path, synthetic_root, monkeypatch, capsys):
    monkeypatch.setitem(pipelines._REGISTRY, "stopping", (__name__, "Stopping"))
    out = tmp_path / "stability"
    assert cli.main(["stability", "--device", "cpu", "--pipelines", "resident,stopping,prefetch", "--epochs", "4",
                     "--max-samples", "64", "--workers", "1", "--data-root", str(synthetic_root),
                     "--out", str(out)]) == 130
    df = pd.read_csv(out / "stability.csv")
    assert df.groupby("pipeline", sort=False).epoch.apply(list).to_dict() == {"resident": [0, 1, 2, 3],
                                                                              "stopping": [0, 1]}
    said = "stopped by SIGINT after 2 of 4 epochs of `stopping` (not run: prefetch)"
    assert f"**Interrupted**: {said}." in (out / "STABILITY.md").read_text() and (out / "stability.png").exists()
    assert f"pipebench stability: {said}; the epochs measured are in {out}" in capsys.readouterr().err


def test_ctrl_c_while_stability_fetches_a_batch_stops_once_the_batch_is_whole(tmp_path, synthetic_root, monkeypatch,
                                                                             capsys):
    """Issue 69's campaign, case 13: a stop raised while `stability` took a batch from a DataLoader worker cut the
    worker's file-descriptor exchange, and a traceback came before the stop message
    (results/2026-12-02-tests/ctrl-c-stability-mid-before.txt); each batch is taken whole first."""
    monkeypatch.setitem(pipelines._REGISTRY, "cut-mid-batch", (__name__, "CutMidBatch"))
    monkeypatch.setattr(CutMidBatch, "fetched", [])
    assert cli.main(["stability", "--device", "cpu", "--pipelines", "cut-mid-batch", "--epochs", "4",
                     "--max-samples", "64", "--data-root", str(synthetic_root), "--out", str(tmp_path / "s")]) == 130
    assert CutMidBatch.fetched == [0, 1, 2]
    assert "stopped by SIGINT after 0 of 4 epochs of `cut-mid-batch`" in capsys.readouterr().err


def test_stability_counts_the_workers_a_forkserver_started(synthetic_root):
    config = PipelineConfig(data_root=str(synthetic_root), device="cpu", batch_size=16, max_samples=64,
                            num_workers=2, worker_start="forkserver")
    for row in stability.measure("dataloader", config, 1):   # its workers still run while a row is read
        workers = {w.pid for w in multiprocessing.active_children()}
        children = {int(c) for task in Path(f"/proc/{os.getpid()}/task").glob("*")
                    for c in (task / "children").read_text().split()}
        assert len(workers) >= 2 and not workers & children   # grandchildren: the forkserver's children
        assert row["children"] >= len(children | workers)


LEAK = '''
import multiprocessing, os, sys

def leave_like_a_configuration():
    held = multiprocessing.get_context("forkserver").Semaphore()   # a DataLoader queue's kind, still held
    os._exit(0)                                                    # when a configuration process leaves

if __name__ == "__main__":
    if sys.argv[1] == "runner":
        from bench.running import runner
        ctx = runner._context()
    else:
        ctx = multiprocessing.get_context("forkserver")
    process = ctx.Process(target=leave_like_a_configuration)
    process.start()
    process.join()
'''


def test_configurations_leaving_by_os_exit_end_a_run_without_a_leaked_semaphore_warning(tmp_path, allowance):
    """The resource tracker unlinks what a configuration process left; through the runner's context
    it does so without warning the user at the end of the run (without it, it warns)."""
    script = tmp_path / "leak.py"
    script.write_text(LEAK)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    stderr = {how: subprocess.run([sys.executable, str(script), how], env=env, capture_output=True, text=True,
                                  timeout=allowance(120)).stderr for how in ("plain", "runner")}
    assert "leaked semaphore" in stderr["plain"]
    assert "leaked semaphore" not in stderr["runner"] and "Traceback" not in stderr["runner"], stderr["runner"]


class Raising(Slow):
    """Fails as its iterator starts: an exception, its process goes on."""
    name = "raising"

    def _iterate(self):
        raise RuntimeError("cannot open the data")
        yield


def test_configurations_sharing_a_process_follow_the_design_and_a_failure_costs_one_row(tmp_path, synthetic_root,
                                                                                        monkeypatch, capsys):
    monkeypatch.setitem(pipelines._REGISTRY, "raising", (__name__, "Raising"))
    monkeypatch.setitem(pipelines._REGISTRY, "crashing", (__name__, "Crashing"))
    monkeypatch.setenv(PIDS, str(tmp_path / "pids"))
    code = run(tmp_path, synthetic_root, "--pipelines", "raising,crashing,resident", "--modes", "model,e2e",
               "--models", "resnet9-w0.25", "--processes", "2", "--share-process", command="sweep")
    assert code == 1
    # 4 configurations in 2 processes: the order is not balanced for carry-over, and the run says so once
    assert capsys.readouterr().err.count("only with --processes 4 or more") == 1
    df = pd.read_csv(tmp_path / "run" / "results.csv")
    name = df.pipeline.where(df["mode"] == "e2e", "model")
    failed = df[df.status != "ok"]
    assert sorted(zip(name[failed.index], failed.status)) == [("crashing", "error")] * 2 + [("raising", "error")] * 2
    assert "cannot open the data" in failed[failed.pipeline == "raising"].error.iloc[0]
    ok = df[df.status == "ok"].assign(name=name)
    slots = {(p, n): set(g.slot.fillna(-1)) for (p, n), g in ok.groupby(["process", "name"])}
    # the Williams design's rows for 4: round 0 runs model, raising | resident, crashing (a new process
    # after the failure); round 1 raising | crashing | model, resident
    assert slots == {(0, "model"): {0}, (0, "resident"): {0}, (1, "model"): {0}, (1, "resident"): {1}}
    assert (ok.groupby(["process", "name"]).size() == 2).all()   # every window of what ran


def test_shared_configurations_in_this_process_share_one_trainer(synthetic_root):
    config = PipelineConfig(data_root=str(synthetic_root), device="cpu", batch_size=16, max_samples=64, num_workers=1)
    shared = harness.Shared()
    specs = [RunSpec("none", "model", "resnet9-w0.25", config, requested_steps=2, warmup=0, repeats=1, share=True),
             RunSpec("resident", "e2e", "resnet9-w0.25", config, requested_steps=2, warmup=0, repeats=1, share=True)]
    facts = [f for spec in specs for f, _ in harness.run(spec, shared)]
    assert [f["slot"] for f in facts] == [0, 1] and len(shared.trainers) == 1
    with pytest.raises(ValueError, match="only model-only, e2e and copy"):
        RunSpec("resident", "loader", "none", config, share=True)


def test_shared_configurations_under_no_isolate_run_in_order_in_this_process(tmp_path, synthetic_root):
    assert run(tmp_path, synthetic_root, "--pipelines", "resident,dataloader", "--modes", "model,e2e",
               "--models", "resnet9-w0.25", "--share-process", "--no-isolate") == 0
    df = pd.read_csv(tmp_path / "run" / "results.csv")
    assert df.groupby(df.pipeline.where(df["mode"] == "e2e", "model")).slot.unique().to_dict() == {
        "model": [0], "resident": [1], "dataloader": [2]}


def test_a_failed_configuration_under_no_isolate_leaves_the_next_a_new_trainer(tmp_path, synthetic_root, monkeypatch):
    monkeypatch.setitem(pipelines._REGISTRY, "raising", (__name__, "Raising"))
    assert run(tmp_path, synthetic_root, "--pipelines", "raising,resident", "--modes", "model,e2e",
               "--models", "resnet9-w0.25", "--share-process", "--no-isolate") == 1
    df = pd.read_csv(tmp_path / "run" / "results.csv")
    ok = df[df.status == "ok"]
    # model (slot 0), raising (fails), then resident on a new shared trainer, as in a new process
    assert ok.groupby(ok.pipeline.where(ok["mode"] == "e2e", "model")).slot.unique().to_dict() == {
        "model": [0], "resident": [0]}


def test_share_process_groups_each_cell_and_round_in_the_williams_design_s_order():
    parser = cli.build_parser()
    main = ["dataloader", "prefetch", "resident", "dali", "dali-raw"]
    options = parser.parse_args(["sweep", "--device", "cpu", "--cpus", "1", "--processes", "2", "--share-process",
                                 "--modes", "loader,model,e2e", "--models", "resnet9-w0.25", "--pipelines",
                                 ",".join(main)])
    groups = plan.shared(cli.specs_for([options], torch.device("cpu")))
    assert [[s.pipeline for s in g] for g in groups if g[0].mode == "loader"] == [[p] for p in main] * 2
    shared = [g for g in groups if g[0].mode != "loader"]
    assert [[s.pipeline for s in g] for g in shared] == [   # rows 0 and 1 of the design for 6 (plan.williams)
        ["none", "dataloader", "dali-raw", "prefetch", "dali", "resident"],
        ["dataloader", "prefetch", "none", "resident", "dali-raw", "dali"]]
    assert [{s.process for s in g} for g in shared] == [{0}, {1}]


def test_share_process_runs_the_copies_of_one_setting_in_one_process_per_round():
    options = cli.build_parser().parse_args(["sweep", "--device", "cpu", "--cpus", "1", "--processes", "2",
                                             "--share-process", "--modes", "copy", "--image-size", "32,64"])
    groups = plan.shared(cli.specs_for([options], torch.device("cpu")))
    assert len(groups) == 4   # 2 sizes x 2 rounds
    for g in groups:
        assert {(s.config.image_size, s.process) for s in g} == {(g[0].config.image_size, g[0].process)}
        assert sorted((s.stage, s.payload) for s in g) == sorted((c, p) for c in COPIES for p in PAYLOADS)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_pipelines_sharing_a_process_share_one_compiled_step_on_the_gpu(synthetic_root):
    """The compiled (captured) step of the first configuration serves the next pipelines' batches:
    compiled once, every window measured, none after it compiles again."""
    config = PipelineConfig(data_root=str(synthetic_root), device="cuda", batch_size=256, max_samples=4096,
                            num_workers=3, dtype="bfloat16", channels_last=True)
    shared = harness.Shared()
    runs = [RunSpec(p, "model" if p == "none" else "e2e", "resnet9-w0.25", config, step="compile", requested_steps=8,
                            warmup=2, repeats=2, share=True) for p in ("none", "resident", "prefetch", "dataloader")]
    facts = [[(f, w) for f, w in harness.run(spec, shared)] for spec in runs]
    assert len(shared.trainers) == 1 and all(len(windows) == 2 for windows in facts)
    assert all(w.images == 8 * 256 and w.seconds > 0 for windows in facts for _, w in windows)
    first, *later = [windows[0][0]["compile_s"] for windows in facts]
    assert max(later) < first / 5   # the later ones only ran a step


def session_members(sid: int) -> set[int]:
    """Every running process of session `sid` (pipebench's own, started in a session of its own)."""
    members = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            members.add(int(stat.parent.name))
    return members


def left_after_exit(argv: list[str], env: dict, patience: float, stop=None) -> tuple[int, dict[int, bytes]]:
    """Run `pipebench ARGV` (`hanging` and `raising` registered) in a session of its own, calling
    `stop(process)` as it runs until it returns True; its exit code and, the moment it has exited,
    every process still running that it started (its session's, or one seen among its descendants
    while it ran), each then killed. Not exited within `patience` seconds: all of them killed, and the
    test fails."""
    code = (f"import sys, pipelines; pipelines._REGISTRY.update(hanging=({__name__!r}, 'Hanging'), "
            f"raising=({__name__!r}, 'Raising')); from bench import cli; sys.exit(cli.main())")
    path = os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parents[1])])
    process = subprocess.Popen([sys.executable, "-c", code, *argv], env={**os.environ, **env, "PYTHONPATH": path},
                               start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen, stopped, deadline = set(), stop is None, time.monotonic() + patience
    while process.poll() is None and time.monotonic() < deadline:
        seen.update(machine.descendants(process.pid))
        stopped = stopped or stop(process)
        time.sleep(0.05)
    hung = process.poll() is None
    left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:80] for pid in seen | session_members(process.pid)
            if alive(pid)}
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    process.wait()
    assert not hung, f"pipebench did not exit within {patience:g} s"
    return process.returncode, left


def test_a_failure_in_a_shared_process_leaves_no_process_once_pipebench_has_exited(tmp_path, synthetic_root,
                                                                                     allowance):
    """--share-process with a configuration that fails: the forkserver, the resource tracker and
    every configuration's processes have ended by the time pipebench's exit code is known."""
    code, left = left_after_exit(
        ["sweep", "--device", "cpu", "--processes", "1", "--data-root", str(synthetic_root), "--max-samples", "64",
         "--batch-size", "16", "--steps", "2", "--warmup", "0", "--repeats", "1", "--workers", "1",
         "--pipelines", "raising,dataloader", "--modes", "model,e2e", "--models", "resnet9-w0.25",
         "--share-process", "--out", str(tmp_path / "run")], {}, allowance(240))
    assert code == 1 and not left


def test_ctrl_c_with_a_stopped_helper_leaves_no_process_once_pipebench_has_exited(tmp_path, synthetic_root,
                                                                                   allowance):
    """Ctrl-C while a configuration's helper process (as a DataLoader worker) is stopped (SIGSTOP):
    exit 130 and nothing it started still running once it has exited."""
    pids = tmp_path / "pids"

    def stop_helper_then_interrupt(process) -> bool:
        if not (pids.exists() and len(pids.read_text().split()) == 2):
            return False
        os.kill(int(pids.read_text().split()[1]), signal.SIGSTOP)
        os.kill(process.pid, signal.SIGINT)
        return True
    code, left = left_after_exit(
        ["compare", "--device", "cpu", "--processes", "1", "--data-root", str(synthetic_root), "--max-samples", "64",
         "--batch-size", "16", "--steps", "2", "--warmup", "0", "--repeats", "1", "--workers", "1",
         "--pipelines", "hanging", "--modes", "loader", "--out", str(tmp_path / "run")], {PIDS: str(pids)},
        allowance(240), stop=stop_helper_then_interrupt)
    assert code == 130 and not left


@pytest.mark.parametrize("name", ["results.csv", "COMMAND.txt"])
def test_a_plan_named_like_a_run_s_file_is_kept_beside_it_not_over_it(tmp_path, synthetic_root, name):
    """Issue 69: `sweep --config PLAN` copied the plan over the run's results.csv (its rows lost, the
    run then refused) or over its COMMAND.txt (the command history lost): the copy is `plan-NAME`."""
    plan = tmp_path / "plans" / name
    plan.parent.mkdir()
    plan.write_text('{"pipelines": ["resident"]}')
    for _ in range(2):   # the second run resumes into the first one's rows
        assert run(tmp_path, synthetic_root, "--config", str(plan), "--no-isolate", command="sweep") == 0
    out = tmp_path / "run"
    assert (out / f"plan-{name}").read_text() == plan.read_text()
    assert len(pd.read_csv(out / "results.csv")) == 2   # one configuration's two windows, measured once
    assert (out / "COMMAND.txt").read_text().count("pipebench sweep") >= 1


def test_a_child_that_starts_after_its_run_stopped_ends_without_a_word(tmp_path):
    """Issue 69: Ctrl-C as a configuration process started removed the run's temporary folder first,
    and the child printed a FileNotFoundError traceback for its stacks-0.txt (3 of 3 runs)."""
    gone = tmp_path / "removed"
    code = ("import os, sys; from bench.running import children; "
            f"children._child([], {{}}, os.getpid(), sys.path, dict(os.environ), os.getcwd(), "
            f"{str(gone / 'rows-0.jsonl')!r}, {str(gone / 'stacks-0.txt')!r})")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
