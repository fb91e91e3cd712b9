"""The harness and the CLI's main command, end to end on synthetic data (CPU in CI)."""
from __future__ import annotations

import dataclasses
import json
import os
import queue
import threading
import time

import numpy as np
import pandas as pd
import pytest
import torch

import pipelines
from bench import cli, results
from bench.measuring import drain as drain_module, harness, machine, workloads
from bench.measuring.spec import RunSpec, STAGES, Window
from pipelines.contract import Pipeline
from pipelines.config import PipelineConfig


class Queued(Pipeline):
    """A producer thread making a batch every PRODUCE_S into a queue of QUEUED batches, as DataLoader
    workers do: whenever the consumer pauses, the queue fills."""
    name = "queued"
    PRODUCE_S = 0.025
    QUEUED = 8
    queue_capacity = QUEUED + 1   # its queue and the batch its producer holds while the queue is full

    def _iterate(self):
        if not hasattr(self, "queue"):
            self.queue = queue.Queue(maxsize=self.QUEUED)

            def produce():
                while True:
                    time.sleep(self.PRODUCE_S)
                    self.queue.put((torch.zeros(4, 3, 32, 32), torch.zeros(4, dtype=torch.int64)))
            threading.Thread(target=produce, daemon=True).start()
        for _ in range(len(self)):
            yield self.queue.get()

    def _stages(self):
        raise NotImplementedError


def test_a_loader_window_does_not_count_what_the_pipeline_queued_before_it(synthetic_root, monkeypatch):
    """Idle, busy 50 ms (the queue fills), idle again: the second idle window starts with QUEUED batches
    waiting; drained first, its 8 steps take about 8 x PRODUCE_S, not the moment a full queue takes."""
    monkeypatch.setitem(pipelines._REGISTRY, "queued", (__name__, "Queued"))
    config = PipelineConfig(data_root=str(synthetic_root), device="cpu", batch_size=4, max_samples=256)
    spec = RunSpec("queued", "loader", "none", config, requested_steps=8, warmup=0, repeats=2, busy_levels=(0.0, 50.0))
    windows = [window for _, window in harness.run(spec)]
    assert [w.busy_ms for w in windows] == [0.0, 50.0, 0.0, 50.0]
    assert windows[2].seconds >= 0.5 * 8 * Queued.PRODUCE_S


class AsyncDevice:
    """A fake asynchronous device: `launch` queues work (a sleep) on a worker thread and returns at
    once, as a CUDA launch does; `sync` waits until everything queued has run."""

    def __init__(self):
        self.work: queue.Queue = queue.Queue()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            time.sleep(self.work.get())
            self.work.task_done()

    def launch(self, seconds: float) -> None:
        self.work.put(seconds)

    def sync(self, device=None) -> None:
        self.work.join()


class Producer:
    """Batches from a thread making one every PRODUCE_S into a queue of CAPACITY (plus the one it
    holds while the queue is full); `ready` records the queue's size at each next()."""
    PRODUCE_S, CAPACITY = 0.02, 8

    def __init__(self):
        self.queue: queue.Queue = queue.Queue(maxsize=self.CAPACITY)
        self.ready: list[int] = []
        threading.Thread(target=self._produce, daemon=True).start()

    def _produce(self):
        while True:
            time.sleep(self.PRODUCE_S)
            self.queue.put((None, range(4)))

    def __iter__(self):
        return self

    def __next__(self):
        self.ready.append(self.queue.qsize())
        return self.queue.get()


def test_a_window_starts_on_an_idle_device_with_nothing_queued(monkeypatch):
    """A pipeline slower than an asynchronous step (12 ms of device work per 20-ms batch), its queue
    full: a drain that consumes on the host and synchronizes after lets the queue refill while the
    device works through what the drain launched, and the window starts with batches it did not wait for."""
    device = AsyncDevice()
    monkeypatch.setattr(harness, "sync", device.sync)
    batches = Producer()
    time.sleep((Producer.CAPACITY + 2) * Producer.PRODUCE_S)   # the queue is full
    drained = []

    def settle():
        taken = harness.drain(batches, Producer.CAPACITY + 1, torch.device("cpu"), synchronize=device.sync)
        drained.append(len(batches.ready))
        return taken

    harness.time_window(batches, lambda x, y: device.launch(0.6 * Producer.PRODUCE_S), 5, torch.device("cpu"),
                        settle=settle)
    assert batches.ready[drained[0]] <= 1, batches.ready


class Broken(Pipeline):
    """Yields two batches, then fails like a crashed worker."""
    name = "broken"
    error: type[BaseException] = RuntimeError

    def _iterate(self):
        for _ in range(2):
            yield torch.zeros(4, 3, 32, 32), torch.zeros(4, dtype=torch.int64)
        raise self.error("worker crashed")

    def _stages(self):
        raise self.error("worker crashed")


class Interrupted(Broken):
    error = KeyboardInterrupt


def compare(tmp_path, root, *extra) -> pd.DataFrame:
    """`pipebench compare` in this process (--no-isolate: isolation has its own tests); `extra` wins."""
    out = tmp_path / "run"
    cli.main(["compare", "--no-isolate", "--processes", "1", "--data-root", str(root), "--max-samples", "512",
              "--batch-size", "8", "--steps", "2", "--warmup", "1", "--repeats", "2", "--models", "resnet9-w0.25",
              "--workers", "1", "--out", str(out), *extra])
    return pd.read_csv(out / "results.csv")


def test_compare_writes_tidy_rows_for_every_pipeline_and_mode(tmp_path, synthetic_root):
    """Loader-only, model-only and e2e (stages: test_stage_sweep_measures_each_stage_and_resumes_past_inapplicable_ones
    and tests/test_contract.py)."""
    df = compare(tmp_path, synthetic_root, "--modes", "loader,model,e2e")
    assert list(df.columns) == results.all_columns()
    expected = {(p, "loader", "none") for p in pipelines.names()} | {("none", "model", "resnet9-w0.25")} \
        | {(p, "e2e", "resnet9-w0.25") for p in pipelines.names()}
    assert set(zip(df.pipeline, df["mode"], df.model)) == expected
    unavailable = {name for name, reason in pipelines.available().items() if reason}
    skipped = df[df.pipeline.isin(unavailable)]
    assert (skipped.status == "skipped").all() and skipped.error.astype(str).str.contains("pip install").all()
    photos_only = {name for name in pipelines.names() if pipelines.source_refusal(name, PipelineConfig())} - unavailable
    refused = df[df.pipeline.isin(photos_only)]
    assert (refused.status == "skipped").all() and refused.error.astype(str).str.contains("photographs only").all()
    df = df[~df.pipeline.isin(unavailable | photos_only)]
    assert (df.status == "ok").all(), df.error.tolist()
    assert df.groupby(["pipeline", "mode"]).size().eq(2).all()   # one row per repeat (one process, one busy level)
    assert (df.process == 0).all() and (df.busy_ms == 0).all()
    cores = sorted(os.sched_getaffinity(0))   # the default budget: every core this process may use
    assert (df.cpus == len(cores)).all() and (df.cpu_set == machine.cores_text(cores)).all()
    assert (df.images == 2 * 8).all() and (df.img_per_s > 0).all() and (df.step_ms_p50 > 0).all()
    assert (df[df["mode"] != "model"].data_source == "synthetic-seed0").all()
    assert (df.batch_size == 8).all() and (df.torch == torch.__version__).all()
    assert df.run_id.nunique() == 1 and df.git_commit.notna().all()
    out = tmp_path / "run"
    assert json.loads((out / "environment.json").read_text())["torch"] == torch.__version__
    assert (out / "COMMAND.txt").read_text().startswith("pipebench compare")


def test_failing_config_becomes_an_error_row_and_the_run_goes_on(tmp_path, synthetic_root, monkeypatch):
    monkeypatch.setitem(pipelines._REGISTRY, "broken", (__name__, "Broken"))
    df = compare(tmp_path, synthetic_root, "--pipelines", "broken,resident", "--modes", "loader")
    broken = df[df.pipeline == "broken"]
    assert broken.status.tolist() == ["error"] and "RuntimeError: worker crashed" in broken.error.iloc[0]
    assert (df[df.pipeline == "resident"].status == "ok").sum() == 2


def test_interrupted_run_keeps_rows_already_written(tmp_path, synthetic_root, monkeypatch):
    monkeypatch.setitem(pipelines._REGISTRY, "interrupted", (__name__, "Interrupted"))
    code = cli.main(["compare", "--no-isolate", "--processes", "1", "--data-root", str(synthetic_root), "--max-samples", "512",
                     "--batch-size", "32", "--steps", "3", "--warmup", "1", "--repeats", "2",
                     "--pipelines", "resident,interrupted", "--modes", "loader", "--out", str(tmp_path / "run")])
    assert code == 130   # Ctrl-C: the finished configuration's rows kept, none of the interrupted one
    df = pd.read_csv(tmp_path / "run" / "results.csv")
    assert df.pipeline.tolist() == ["resident", "resident"] and (df.status == "ok").all()


def test_unavailable_pipeline_becomes_a_skipped_row_said_once_and_not_planned_as_work(tmp_path, synthetic_root,
                                                                                        monkeypatch, capsys):
    """Issue 69: a photo run printed a skip line per process (30 lines for 11 rows) and its plan
    counted the skipped processes as work."""
    monkeypatch.setitem(pipelines._REGISTRY, "missing", ("no_such_module_xyz", "Nothing"))
    df = compare(tmp_path, synthetic_root, "--pipelines", "missing,resident", "--modes", "loader", "--processes", "3")
    skipped = df[df.pipeline == "missing"]
    assert len(skipped) == 3 and (skipped.status == "skipped").all() and "no_such_module_xyz" in skipped.error.iloc[0]
    captured = capsys.readouterr()
    assert "the plan: 3 configuration processes, 6 windows (3 more skipped: they cannot run here" in captured.err
    assert captured.out.count("skipped: missing loader none: ") == 1


@pytest.mark.parametrize("extra,said", [
    (["--pipelines", "missing", "--modes", "loader,model,e2e"], "missing: No module named 'no_such_module_xyz'"),
    (["--pipelines", "resident", "--step", "graph"], "step='graph' captures the training step in a CUDA graph: needs "
                                                     "a CUDA device"),   # its loader rows alone would run
    (["--pipelines", "resident", "--step", "graph", "--modes", "model"], "step='graph' captures the training step in a "
                                                                        "CUDA graph: needs a CUDA device"),
])
def test_a_run_where_nothing_asked_for_can_run_is_one_line_not_skipped_rows_and_success(tmp_path, synthetic_root,
                                                                                       monkeypatch, extra, said):
    """A fault campaign: `compare --pipelines ffcv` where FFCV is missing (or `--step graph` on a CPU) wrote
    skipped rows (model-only's rows beside them), said "No answer" and exited 0."""
    monkeypatch.setitem(pipelines._REGISTRY, "missing", ("no_such_module_xyz", "Nothing"))
    with pytest.raises(SystemExit) as stop:
        compare(tmp_path, synthetic_root, "--device", "cpu", *extra)
    assert stop.value.code == f"pipebench compare: nothing asked for can run here: {said}"
    assert not (tmp_path / "run" / "results.csv").exists()


def test_window_counts_images_and_steps(synthetic_root):
    config = pipelines.PipelineConfig(data_root=str(synthetic_root), batch_size=8, max_samples=64, device="cpu")
    batches = workloads.real_batches(config, torch.device("cpu"))
    window = harness.time_window(batches, harness.Touch(torch.device("cpu")), 5, torch.device("cpu"))
    assert window.images == 40 and len(window.step_ms) == len(window.wait_ms) == 5 and window.seconds > 0


def test_the_training_thread_s_cpu_seconds_are_what_its_steps_spent(synthetic_root):
    config = pipelines.PipelineConfig(data_root=str(synthetic_root), batch_size=8, max_samples=64, device="cpu")
    batches = workloads.real_batches(config, torch.device("cpu"))
    next(batches)   # the first call makes the batches

    def spin(images, labels, seconds=0.04):   # a step that keeps this thread's core busy
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    window = harness.time_window(batches, spin, 5, torch.device("cpu"))
    # 5 steps of 0.04 s on the thread's own clock; the process tree's in whole ticks, read apart: a tick
    # each reading, so the thread's can read up to TOLERANCE above the whole, never more
    assert 0.19 <= window.train_cpu_s <= window.cpu_s + TOLERANCE
    assert window.next_cpu_s < 0.1   # the step spun, not next()


TOLERANCE = 2 / machine.TICK   # two readings of /proc's process counter, each a clock tick coarse


def test_the_training_thread_s_cpu_seconds_are_read_not_bounded_by_the_process_tree_s(synthetic_root, monkeypatch):
    """A counter that misreads shows in the rows: nothing clamps one reading to the other."""
    config = pipelines.PipelineConfig(data_root=str(synthetic_root), batch_size=8, max_samples=64, device="cpu")
    batches = workloads.real_batches(config, torch.device("cpu"))
    monkeypatch.setattr(machine, "cpu_seconds", lambda: 1.0)   # a process tree that seems to burn nothing

    def spin(images, labels):
        end = time.thread_time() + 0.04
        while time.thread_time() < end:
            pass

    window = harness.time_window(batches, spin, 5, torch.device("cpu"))
    assert window.cpu_s == 0 and window.train_cpu_s >= 0.19


def test_model_only_trains_on_real_batches_made_as_the_pipelines_make_them(synthetic_root):
    """Not noise: the split's own images, normalized into the contract's dtype and memory format."""
    config = pipelines.PipelineConfig(data_root=str(synthetic_root), batch_size=8, max_samples=64, device="cpu",
                                      dtype="bfloat16", channels_last=True, augment=False, shuffle=False)
    real = workloads.real_batches(config, torch.device("cpu"))
    batches = [next(real) for _ in range(workloads.REAL_BATCHES + 1)]
    with pipelines.build("resident", config) as resident:
        images, labels = next(iter(resident))
    assert torch.equal(batches[0][1], labels) and torch.allclose(batches[0][0].float(), images.float())
    assert batches[0][0].dtype == images.dtype and batches[0][0].is_contiguous(memory_format=torch.channels_last)
    assert batches[workloads.REAL_BATCHES][0] is batches[0][0]   # REAL_BATCHES distinct batches, round and round
    assert not torch.equal(batches[1][0], batches[0][0])


@pytest.mark.parametrize("kwargs,message", [
    (dict(pipeline="resident", mode="loader", model="resnet18"), "loader, stage and copy modes run model 'none'"),
    (dict(pipeline="resident", mode="e2e", model="none"), "the other modes need a model"),
    (dict(pipeline="resident", mode="train", model="none"), "mode='train'"),
    (dict(pipeline="resident", mode="stage", model="none"), r"mode='stage' with stage='': expected one of"),
    (dict(pipeline="resident", mode="loader", model="none", stage="host"), "stage='host'"),
    (dict(pipeline="resident", mode="model", model="resnet9"), "model and copy modes run pipeline 'none'"),
    (dict(pipeline="none", mode="copy", model="none", stage="h2d-pinned"), "copy mode needs one of"),
    (dict(pipeline="resident", mode="train", model="resnet9"), "train mode needs train_epochs >= 1"),
    (dict(pipeline="resident", mode="train", model="resnet9", train_epochs=1),
     r"train mode runs once per process \(repeats=1\)"),
    (dict(pipeline="resident", mode="e2e", model="resnet9", busy_levels=(0.0, 1.0)), "the other modes \\(0.0,\\)"),
    (dict(pipeline="resident", mode="loader", model="none", busy_levels=()), "loader mode takes finite ms >= 0"),
    (dict(pipeline="resident", mode="loader", model="none", busy_levels=(-1.0,)), "loader mode takes finite ms >= 0"),
    (dict(pipeline="resident", mode="loader", model="none", cpus=0), "cpus=0"),
])
def test_run_spec_validates(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RunSpec(**kwargs)


def test_cli_rejects_unknown_pipeline(capsys):
    with pytest.raises(SystemExit):
        cli.main(["compare", "--pipelines", "nope"])
    assert "expected a comma-separated list" in capsys.readouterr().err


def sweep(tmp_path, root, *extra, processes: int = 1) -> pd.DataFrame:
    cli.main(["sweep", "--data-root", str(root), "--max-samples", "256", "--steps", "2", "--warmup", "1",
              "--repeats", "2", "--processes", str(processes), "--out", str(tmp_path / "sweep"), *extra])
    return pd.read_csv(tmp_path / "sweep" / "results.csv")


GRID = ["--pipelines", "resident,prefetch", "--modes", "loader,model", "--batch-size", "16,32",
        "--workers", "1", "--models", "resnet9-w0.25"]


def test_sweep_runs_the_grid_in_rounds_of_processes_and_resumes_per_process(tmp_path, synthetic_root, capsys):
    df = sweep(tmp_path, synthetic_root, *GRID, "--no-isolate", processes=2)   # isolation has its own tests
    # 2 pipelines x 2 batch sizes loader-only + 2 batch sizes model-only, each in 2 processes, 2 repeats each
    assert len(df) == 24 and (df.status == "ok").all()
    assert sorted(set(zip(df.pipeline, df.batch_size))) == sorted(
        {(p, b) for p in ("resident", "prefetch", "none") for b in (16, 32)})
    assert (df[df["mode"] == "model"].model == "resnet9-w0.25").all()
    assert df.groupby(["pipeline", "batch_size", "process"]).size().eq(2).all()
    assert df.process.tolist() == [0] * 12 + [1] * 12   # rounds: every configuration once, then again
    assert len(sweep(tmp_path, synthetic_root, *GRID, "--no-isolate", processes=2)) == 24          # nothing left to do
    assert "resume: 12 of 12 configuration processes already done" in capsys.readouterr().err
    # a run killed during one configuration's second process left it incomplete: only that process runs again
    text = pd.read_csv(tmp_path / "sweep" / "results.csv", dtype=str, keep_default_na=False)   # cells as written
    lost = (df.pipeline == "prefetch") & (df.batch_size == 32) & (df.process == 1) & (df.repeat == 1)
    text[~lost].to_csv(tmp_path / "sweep" / "results.csv", index=False)
    again = sweep(tmp_path, synthetic_root, *GRID, "--no-isolate", processes=2)
    err = capsys.readouterr().err   # its one surviving row is removed, not kept beside a second block
    assert "resume: removed 1 rows of 1 configuration processes cut short" in err
    assert "resume: 11 of 12 configuration processes already done" in err
    assert len(again) == 22 + 2 and again.iloc[-2:].pipeline.tolist() == ["prefetch", "prefetch"]
    assert again.iloc[-2:].process.tolist() == [1, 1] and again.iloc[-2:].batch_size.tolist() == [32, 32]


def test_resume_counts_only_rows_of_this_environment_commit_and_boot(tmp_path):
    spec = RunSpec("none", "model", "resnet9", PipelineConfig(device="cpu"), requested_steps=1, repeats=1)
    window = Window(8, 0.1, np.array([1.0]), np.array([1.0]), float("nan"))
    env = results.environment()
    path = tmp_path / "results.csv"
    writer = results.CsvWriter(path, env, run_id="r")
    writer.write(results.measured_row(spec, {}, 0, window))
    writer.write(results.measured_row(dataclasses.replace(spec, process=1), {}, 0, window))
    assert results.completed(path, env) == {(results.config_key(spec), 0): 1, (results.config_key(spec), 1): 1}
    for key, other in (("git_commit", "0123456789ab"), ("boot_id", "another-boot"), ("torch", "0.0")):
        assert results.completed(path, {**env, key: other}) == {}, key


def test_sweep_reads_a_config_file_and_the_command_line_wins(tmp_path, synthetic_root):
    config = tmp_path / "grid.json"
    config.write_text(json.dumps({"pipelines": ["resident"], "modes": ["loader"], "batch_size": [8, 16],
                                  "workers": [1], "channels_last": True, "repeats": 3}))
    df = sweep(tmp_path, synthetic_root, "--config", str(config), "--batch-size", "8")
    assert set(df.batch_size) == {8} and len(df) == 2 and df.channels_last.all()
    assert (tmp_path / "sweep" / "grid.json").is_file()


def test_sweep_config_with_unknown_option_or_bad_model_is_refused(tmp_path, synthetic_root):
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"batch_sizes": [8]}))
    with pytest.raises(SystemExit, match="unknown key 'batch_sizes'"):
        sweep(tmp_path, synthetic_root, "--config", str(config))
    with pytest.raises(SystemExit) as refused:
        sweep(tmp_path, synthetic_root, "--models", "resnet9-w0")
    message = str(refused.value.code)
    assert message.startswith("pipebench sweep: model 'resnet9-w0': ") and "\n" not in message
    assert not (tmp_path / "sweep" / "results.csv").exists()   # refused before anything ran


def test_width_knob_scales_the_small_net():
    from bench.measuring.models import build_model
    sizes = [sum(p.numel() for p in build_model(m).parameters())
             for m in ("resnet9-w0.25", "resnet9-w0.5", "resnet9", "resnet9-w2")]
    assert sizes == sorted(sizes) and sizes[-1] > 30 * sizes[0]
    assert build_model("resnet9-w0.5")(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_sweep_resumes_pipelines_that_fix_their_own_encoding(tmp_path, synthetic_root, capsys):
    grid = ["--pipelines", "tvjpeg,resident", "--modes", "loader", "--workers", "1", "--batch-size", "32",
            "--encoding", "jpeg"]
    df = sweep(tmp_path, synthetic_root, *grid)
    assert dict(zip(df.pipeline, df.encoding)) == {"tvjpeg": "jpeg", "resident": "raw"}
    capsys.readouterr()
    assert len(sweep(tmp_path, synthetic_root, *grid)) == len(df)
    assert "resume: 2 of 2 configuration processes already done" in capsys.readouterr().err


def test_stage_sweep_measures_each_stage_and_resumes_past_inapplicable_ones(tmp_path, synthetic_root, capsys):
    grid = ["--pipelines", "prefetch,resident", "--modes", "stage", "--workers", "1", "--batch-size", "32",
            "--image-size", "32,64", "--no-isolate"]   # in this process: isolation has its own tests
    df = sweep(tmp_path, synthetic_root, *grid)
    ok = df[df.status == "ok"]
    assert ok.groupby(["pipeline", "stage", "image_size"]).size().eq(2).all()
    assert (ok.process == 0).all()
    assert set(ok.stage) == ({"host", "device"} if not torch.cuda.is_available() else set(STAGES) - {"pin"})
    resident_host = df[(df.pipeline == "resident") & (df.stage == "host")]
    assert resident_host.status.tolist() == ["not-applicable"] * 2   # once per image size
    # bytes per batch copied: 32 images x 3 x S x S uint8 (the labels live on the device)
    payload = ok[ok.pipeline == "prefetch"].groupby("image_size").batch_bytes.first()
    assert payload.to_dict() == {32: 32 * 3 * 32 * 32, 64: 32 * 3 * 64 * 64}
    # prefetch's device stage makes a round of batches_per_launch batches per step
    device = ok[(ok.pipeline == "prefetch") & (ok.stage == "device")]
    assert (device.images == device.steps * PipelineConfig.default("batches_per_launch") * 32).all()
    capsys.readouterr()
    assert len(sweep(tmp_path, synthetic_root, *grid)) == len(df)
    total = 2 * 2 * len(STAGES)
    assert f"resume: {total} of {total} configuration processes already done" in capsys.readouterr().err


def test_model_only_runs_at_each_image_size(tmp_path, synthetic_root):
    df = sweep(tmp_path, synthetic_root, "--modes", "model", "--models", "resnet9-w0.25", "--image-size", "32,64")
    assert sorted(df.image_size.unique()) == [32, 64] and (df.status == "ok").all()


def test_sweep_resumes_configs_with_unset_options(tmp_path, synthetic_root, capsys):
    """An option left at None (here max_samples) is an empty CSV cell: resume must still match."""
    args = ["sweep", "--data-root", str(synthetic_root), "--modes", "model", "--models", "resnet9-w0.25",
            "--steps", "1", "--warmup", "0", "--repeats", "1", "--processes", "1", "--out", str(tmp_path / "s")]
    cli.main(args)
    capsys.readouterr()
    cli.main(args)
    assert "resume: 1 of 1 configuration processes already done" in capsys.readouterr().err


def test_git_commit_named_in_the_environment_wins(monkeypatch):
    monkeypatch.setenv("PIPEBENCH_GIT_COMMIT", "0123456789ab")
    assert results.environment()["git_commit"] == "0123456789ab"
    monkeypatch.delenv("PIPEBENCH_GIT_COMMIT")
    assert results.git_commit() != "0123456789ab"


def test_the_environment_names_each_installed_peer_with_its_version():
    import importlib.metadata
    peers = results.environment()["peers"]
    for package in results.PEER_PACKAGES:
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            assert package not in peers
            continue
        assert f"{package} {version}" in peers


def test_csv_writer_moves_an_older_file_to_the_current_columns(tmp_path):
    """Resuming into a folder written before columns were added keeps one header and every row."""
    path = tmp_path / "results.csv"
    old_columns = [c for c in results.all_columns() if c not in ("parallel", "gpus", "world_img_per_s")]
    pd.DataFrame([{"pipeline": "prefetch", "mode": "loader", "status": "ok"}]).reindex(columns=old_columns).to_csv(path, index=False)
    results.CsvWriter(path, {}, run_id="r").write({"pipeline": "resident", "mode": "loader", "status": "ok", "parallel": "none"})
    df = pd.read_csv(path)
    assert list(df.columns) == results.all_columns() and list(df.pipeline) == ["prefetch", "resident"]
    assert df.parallel.isna().tolist() == [True, False]


def test_loader_and_e2e_windows_drain_ddp_s_too_and_model_only_windows_do_not():
    def spec(mode, **extra):
        model = "none" if mode == "loader" else "resnet9"
        pipeline = "none" if mode == "model" else "resident"
        return RunSpec(pipeline, mode, model, PipelineConfig(**extra.pop("config", {})), **extra)
    assert harness.drains(spec("loader")) and harness.drains(spec("loader", config=dict(rank=1, world_size=2)))
    assert harness.drains(spec("e2e")) and harness.drains(spec("e2e", parallel="dp"))
    assert harness.drains(spec("e2e", parallel="ddp", config=dict(world_size=2)))
    assert not harness.drains(spec("model"))


def test_every_rank_drains_as_many_batches_as_the_rank_that_drained_most(monkeypatch):
    """A rank whose queue emptied first takes more, so every rank's epochs restart at the same step."""
    monkeypatch.setattr(harness.distributed, "gather", lambda taken: [taken, 11])
    batches = iter(range(100))
    assert harness.drain(batches, 3, torch.device("cpu"), synchronize=lambda device: None)[0] == 11
    assert next(batches) == 11


def test_the_batches_ready_at_a_window_s_start_are_its_leading_steps_that_did_not_wait():
    wait_ms = np.array([0.1, 0.2, 5.0, 0.1, 0.1])
    assert harness.ready_at_start(wait_ms, capacity=8) == 2
    assert harness.ready_at_start(np.full(20, 0.1), capacity=8) == 9   # keeps ahead: capacity + 1, no more
    assert harness.ready_at_start(np.array([3.0, 0.1]), capacity=8) == 0
    # a handover that is itself a copy of 3 ms: ready until a next() waits 1 ms beyond twice that
    assert harness.ready_at_start(np.array([3.0, 3.2, 2.9, 7.5, 3.0]), capacity=8, handover_ms=3.0) == 3


def test_steps_that_begin_an_epoch_are_timed_apart_as_restarts(synthetic_root, monkeypatch):
    monkeypatch.setattr(harness, "drain", lambda *_: (0, 0.0))   # the window starts at the first step
    config = PipelineConfig(data_root=str(synthetic_root), device="cpu", batch_size=16, max_samples=64)
    spec = RunSpec("resident", "loader", "none", config, requested_steps=9, warmup=0, repeats=1)
    (facts, window), = harness.run(spec)
    assert facts["steps_per_epoch"] == 4
    assert len(window.restart_ms) == 3   # steps 0, 4 and 8 start epochs 0, 1 and 2
    row = results.measured_row(spec, facts, 0, window)
    assert row["restart_ms"] == pytest.approx(float(np.median(window.restart_ms)))


def test_every_invocation_gets_its_own_run_id(tmp_path, synthetic_root):
    for _ in range(2):
        df = compare(tmp_path, synthetic_root, "--pipelines", "resident", "--modes", "loader")
    assert df.run_id.nunique() == 2 and df.run_id.str.startswith("run@").all()


def test_a_window_records_its_drain_and_the_handover_its_ready_count_is_judged_by(monkeypatch):
    """`time_window` keeps what its drain returned (batches taken, a ready batch's handover); `_run`
    judges `ready_at_start` by that handover, not by a fixed threshold alone."""
    batches = iter([(None, range(4))] * 10)
    window = harness.time_window(batches, lambda x, y: None, 3, torch.device("cpu"), settle=lambda: (5, 2.5))
    assert window.drain_steps == 5 and window.drain_handover_ms == 2.5
    assert harness.ready_at_start(np.array([4.0, 4.0, 9.0]), capacity=8, handover_ms=window.drain_handover_ms) == 2


def test_the_drain_waits_out_a_burst_that_lands_after_one_wait(monkeypatch):
    """A worker pool's batches land together: the drain used to stop at the first `next()` that
    waited, and the window then began with the burst that landed right after (issue 67: up to 23 of
    24 batches ready). It stops after two waits in a row; a pipeline that keeps ahead stops at
    2 x (capacity + 1) taken."""
    waits = iter([0.0, 0.0, 0.02, 0.0, 0.0, 0.0, 0.02, 0.02] + [0.0] * 50)   # seconds next() takes
    clock = [0.0]

    class Timed:
        def __next__(self):
            clock[0] += next(waits)
            return None
    monkeypatch.setattr(drain_module.time, "perf_counter", lambda: clock[0])
    taken, quickest = harness.drain(Timed(), 8, torch.device("cpu"), synchronize=lambda device: None)
    assert taken == 8 and quickest == 0.0   # the burst after the first wait taken, stopped at the second
    assert harness.drain(iter(range(100)), 3, torch.device("cpu"), synchronize=lambda device: None)[0] == 8


def test_a_carriage_return_in_a_name_stays_inside_its_row(tmp_path):
    """Issue 69: a CR in a `--models` path or an `--out` name was written unquoted, the row split in
    two and every rerun measured again. Rows holding one are quoted; they read back whole, one row
    each, the name as given; rows without one are written as before."""
    path = tmp_path / "results.csv"
    writer = results.CsvWriter(path, {}, run_id="run\rname")
    writer.write({"pipeline": "resident", "mode": "e2e", "model": "my\rnet.py:build", "status": "ok", "parallel": "none"})
    writer.write({"pipeline": "prefetch", "mode": "loader", "model": "none", "status": "ok", "parallel": "none"})
    rows = results.read_rows(path, keep_default_na=False)
    assert len(rows) == 2 and rows.model.tolist() == ["my\rnet.py:build", "none"]
    assert rows.run_id.tolist() == ["run\rname"] * 2


def test_a_carriage_return_in_a_name_is_shown_not_acted_on_in_the_printed_table(tmp_path, synthetic_root, capsys):
    """Issue 69's campaign: the printed rates and the progress bar wrote a model path's CR raw, and
    the terminal overwrote the line's first columns with what followed it."""
    (tmp_path / "my\rnet.py").write_text("import torch\n\ndef build():\n    return torch.nn.Sequential("
                                         "torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 10))\n")
    compare(tmp_path, synthetic_root, "--pipelines", "resident", "--modes", "model",
            "--models", f"{tmp_path / 'my'}\rnet.py:build")
    printed = capsys.readouterr()
    assert "\r" not in printed.out and "my\\rnet.py:build" in printed.out
    assert all("\\rnet.py" in part for part in printed.err.split("\r") if "net.py" in part)


def test_a_sweep_refuses_to_resume_into_rows_with_text_in_a_number_column(tmp_path, synthetic_root):
    """Issue 69's campaign: `batch_size` 'sixteen' in a row was counted, the sweep appended and exited 0,
    and its summary said "no rows"; `report` refused the same file naming line and column."""
    grid = ["--pipelines", "resident", "--modes", "loader", "--no-isolate"]
    sweep(tmp_path, synthetic_root, *grid)
    path = tmp_path / "sweep" / "results.csv"
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    df.loc[1, "batch_size"] = "sixteen"
    df.to_csv(path, index=False)
    before = path.read_bytes()
    with pytest.raises(SystemExit, match=r"line 3: batch_size holds 'sixteen', not a number: a damaged results file"):
        sweep(tmp_path, synthetic_root, *grid, "--pipelines", "resident,prefetch")
    assert path.read_bytes() == before
