"""The training step kinds (eager / graph / compile): validation, skip rows and CLI plumbing on the
CPU; on a GPU, that a captured step trains the same model as the eager one."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from bench import claims, cli, report, results
from bench.measuring import distributed, harness
from bench.measuring.spec import RunSpec, Window
from bench.measuring.training import step_refusal
from bench.running import plan
from pipelines import sources
from pipelines.config import PipelineConfig

CUDA = torch.device("cuda")   # a device object: nothing runs on it in the CPU tests
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("kwargs,message", [
    (dict(step="jit"), "expected one of"),
    (dict(mode="loader", pipeline="resident", model="none", step="graph"), "only model, e2e and train train"),
    (dict(requested_steps=5, min_window_s=1.0), "only with requested_steps=None"),
    (dict(min_window_s=-1.0), "expected >= 0"),
    (dict(mode="e2e", pipeline="resident", step="graph", config=PipelineConfig(last_batch="partial")),
     "last_batch='drop'"),
])
def test_runspec_rejects_bad_step_options(kwargs, message):
    spec = dict(pipeline="none", mode="model", model="resnet9")
    with pytest.raises(ValueError, match=message):
        RunSpec(**{**spec, **kwargs})


@pytest.mark.parametrize("args,message", [
    (("graph", torch.device("cpu")), "needs a CUDA device"),
    (("compile", CUDA, "bfloat16", "dp"), "DataParallel replicates it in threads every step"),
    (("graph", CUDA, "bfloat16", "dp"), "use DDP under torchrun"),
    (("graph", CUDA, "float16"), "GradScaler"),
    (("compile", CUDA, "bfloat16", "none", "partial"), "last_batch='drop'"),
    (("trace", CUDA), "expected one of"),
])
def test_step_refusal_says_why(args, message):
    assert message in step_refusal(*args)


@pytest.mark.parametrize("args", [("eager", torch.device("cpu"), "float16", "dp", "partial"),
                                  ("graph", CUDA), ("compile", CUDA, "float32"), ("compile", CUDA, "bfloat16", "ddp"),
                                  ("graph", CUDA, "bfloat16", "ddp")])
def test_step_refusal_accepts_what_runs(args):
    assert step_refusal(*args) is None


def test_trainer_refuses_a_captured_step_without_cuda():
    with pytest.raises(ValueError, match="needs a CUDA device"):
        harness.Trainer("resnet9-w0.25", torch.device("cpu"), "float32", False, step="graph")


def run_cli(tmp_path, root, *extra, command="compare") -> pd.DataFrame:
    out = tmp_path / "run"
    cli.main([command, "--no-isolate", "--processes", "1", "--device", "cpu", "--data-root", str(root), "--max-samples", "256", "--batch-size", "32",
              "--steps", "2", "--warmup", "1", "--repeats", "2", "--models", "resnet9-w0.25",
              "--pipelines", "resident", "--modes", "model,e2e", "--out", str(out), *extra])
    return pd.read_csv(out / "results.csv", keep_default_na=False)


def test_cli_runs_every_step_kind_and_skips_captured_ones_without_cuda(tmp_path, synthetic_root):
    df = run_cli(tmp_path, synthetic_root, "--step", "eager,graph,compile")
    assert set(zip(df["mode"], df.step, df.status)) == {
        ("model", "eager", "ok"), ("e2e", "eager", "ok"),
        *{(m, s, "skipped") for m in ("model", "e2e") for s in ("graph", "compile")}}
    skipped = df[df.status == "skipped"]
    assert skipped.error.str.contains("needs a CUDA device").all() and len(skipped) == 4   # one row per config
    ok = df[df.status == "ok"]
    assert (pd.to_numeric(ok.compile_s) > 0).all()   # the first step, timed alone


def test_cli_default_step_on_cpu_is_eager(tmp_path, synthetic_root):
    df = run_cli(tmp_path, synthetic_root)
    assert set(df.step) == {"eager"} and (df.status == "ok").all()


def test_sweep_resume_tells_step_kinds_apart(tmp_path, synthetic_root, capsys):
    run_cli(tmp_path, synthetic_root, command="sweep")
    capsys.readouterr()
    df = run_cli(tmp_path, synthetic_root, "--step", "eager,graph", command="sweep")
    assert "resume: 2 of 4 configuration processes already done" in capsys.readouterr().err
    assert (df.step == "graph").sum() == 2 and (df[df.step == "eager"].status == "ok").sum() == 4


def test_resume_counts_rows_written_before_the_step_column_as_eager(tmp_path):
    spec = RunSpec("none", "model", "resnet9", PipelineConfig(device="cpu"), requested_steps=1, repeats=1)
    window = Window(8, 0.1, pd.Series([1.0]).to_numpy(), pd.Series([1.0]).to_numpy(), float("nan"))
    env = results.environment()
    path = tmp_path / "results.csv"
    results.CsvWriter(path, env, run_id="old").write(results.measured_row(spec, {}, 0, window))
    old = pd.read_csv(path, dtype=str, keep_default_na=False)
    old.drop(columns=["step"]).to_csv(path, index=False)
    assert results.completed(path, env) == {(results.config_key(spec), 0): 1}


@pytest.mark.parametrize("argv,message", [
    (["--step", "graph,jit"], "expected a comma-separated list"),
    (["--steps", "3", "--min-window-s", "1"], "give one"),
])
def test_cli_rejects_bad_step_options(tmp_path, argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["compare", "--device", "cpu", "--out", str(tmp_path / "x"), *argv])
    assert message in str(e.value) + capsys.readouterr().err


SMALL_MODEL_BLOCK = 5   # harness.MODEL_BLOCK while the model-blocks windows are sized

# (mode, pipeline, model, samples, batch, busy levels, min_window_s, the calibration's s per step,
#  the expected steps per window at each busy level, what a window is made of)
WINDOWS = [
    # an epoch (4 steps, 0.044 s) fits in the 0.24 s target (min_window_s x WINDOW_MARGIN): 6 whole epochs
    ("loader", "resident", "none", 64, 16, (0.0,), 0.2, 0.011, [24], "epochs"),
    # an epoch of 32 steps (1.6 s) does not fit: ceil(0.24 / 0.05) = 5 steps, raised to MIN_LOADER_STEPS
    ("loader", "resident", "none", 512, 16, (0.0,), 0.2, 0.05, [harness.MIN_LOADER_STEPS], "steps"),
    # ... or as many steps as the target needs (ceil(0.12 / 0.011) = 11), when an epoch (64 steps,
    # 0.7 s) lasts more than LONG_EPOCH targets
    ("loader", "resident", "none", 1024, 16, (0.0,), 0.1, 0.011, [11], "steps"),
    # an epoch (32 steps, 0.35 s) longer than the 0.24 s target but within LONG_EPOCH of it: one epoch
    ("loader", "resident", "none", 512, 16, (0.0,), 0.2, 0.011, [32], "epochs"),
    # each busy level sized on its own: the level's ms per batch is the floor of a step's time
    # (0.06 s: 137 epochs of 4 steps of 0.11 ms; 4 epochs of 4 steps of 4 ms)
    ("loader", "resident", "none", 64, 16, (0.0, 4.0), 0.05, 0.00011, [548, 16], "epochs"),
    # e2e: whole epochs (4 steps, 0.044 s each) covering 0.12 s: 3 epochs
    ("e2e", "resident", "resnet9-w0.25", 16, 4, (0.0,), 0.1, 0.011, [12], "epochs"),
    # model-only: whole blocks of MODEL_BLOCK steps (0.5 s each) covering 0.72 s: 2 blocks (of
    # SMALL_MODEL_BLOCK steps, patched in: 2 blocks of the real one would train on the CPU for seconds)
    ("model", "none", "resnet9-w0.25", 16, 4, (0.0,), 0.6, 0.1, [2 * SMALL_MODEL_BLOCK], "blocks"),
]


@pytest.mark.parametrize("mode,pipeline,model,samples,batch,busy,seconds,step_s,expected,made_of", WINDOWS,
                         ids=["loader-epochs", "loader-min-steps", "loader-steps", "loader-long-epoch",
                              "loader-busy-levels", "e2e-epochs", "model-blocks"])
def test_windows_of_min_window_s_are_whole_epochs_or_blocks(mode, pipeline, model, samples, batch, busy, seconds,
                                                           step_s, expected, made_of, synthetic_root, monkeypatch):
    """Windows are sized from the calibration (here a known seconds per step, so no timing on a loaded
    machine decides the outcome) by the rule of `harness.window_steps`."""
    calibrated = []

    def calibrate(batches, step, device, most_s):
        calibrated.append(most_s)
        return step_s, True, 0.0

    monkeypatch.setattr(harness, "calibrate", calibrate)
    monkeypatch.setattr(harness, "MODEL_BLOCK", SMALL_MODEL_BLOCK)
    config = PipelineConfig(data_root=str(synthetic_root), device="cpu", batch_size=batch, max_samples=samples)
    spec = RunSpec(pipeline, mode, model, config, requested_steps=None, min_window_s=seconds, warmup=0, repeats=1,
                           busy_levels=busy)
    measured = list(harness.run(spec))
    assert calibrated == [min(harness.STEADY_MOST_S, harness.STEADY_WINDOWS * seconds)]   # one warm-up sizes every window
    unit = measured[0][0].get("steps_per_epoch") if made_of != "blocks" else harness.MODEL_BLOCK
    steps = [len(window.step_ms) for _, window in measured]
    assert [window.busy_ms for _, window in measured] == list(busy)
    assert steps == [harness.window_steps(spec, unit, step_s, b) for b in busy] == expected
    target = harness.WINDOW_MARGIN * seconds
    for n, b in zip(steps, busy):
        per_step = max(step_s, b / 1e3)
        assert n * per_step >= target   # long enough by the calibration
        if made_of == "steps":          # a loader window shorter than an epoch: as few steps as cover it
            assert harness.MIN_LOADER_STEPS <= n < unit and (n == harness.MIN_LOADER_STEPS or (n - 1) * per_step < target)
        else:                           # whole epochs or blocks, as few as cover it
            assert n % unit == 0 and (n - unit) * per_step < target


@pytest.mark.parametrize("mode, pipeline, model", [("e2e", "resident", "resnet9-w0.25"),
                                                   ("loader", "resident", "none")])
def test_nothing_is_timed_before_an_early_forkserver_is_ready(mode, pipeline, model, synthetic_root, monkeypatch):
    """A sweep's child starts its workers' forkserver as it starts (`pipelines.workers.start_forkserver_early`):
    the pipeline's construction and the model's first training call (its compilation) overlap the
    forkserver's imports, and the harness waits for them (`forkserver_ready`) before the warm-up and
    every window; in loader mode also before the busy steps are sized."""
    events = []
    workload, timed, null = harness._workload, harness.time_window, harness.beside_null

    def workload_then(*args):
        made = workload(*args)
        events.append("workload")
        return made
    monkeypatch.setattr(harness, "_workload", workload_then)
    monkeypatch.setattr(harness, "forkserver_ready", lambda: events.append("ready"))
    monkeypatch.setattr(harness, "calibrate", lambda *args: events.append("warm-up") or (0.01, True, 0.0))
    monkeypatch.setattr(harness, "time_window", lambda *args, **kw: events.append("window") or timed(*args, **kw))
    monkeypatch.setattr(harness, "beside_null", lambda *args: events.append("busy sized") or null(*args))
    config = PipelineConfig(data_root=str(synthetic_root), device="cpu", batch_size=4, max_samples=16)
    busy = (0.0, 1.0) if mode == "loader" else (0.0,)
    list(harness.run(RunSpec(pipeline, mode, model, config, requested_steps=None, min_window_s=0.05, warmup=0,
                             repeats=1, busy_levels=busy)))
    if mode == "e2e":
        assert events == ["workload", "ready", "warm-up", "window"]
    else:   # the busy steps are sized before the pipeline exists
        assert events == ["ready", "busy sized", "workload", "ready", "warm-up", "window", "window"]


def test_the_warm_up_sizes_its_chunks_to_last_steady_chunk_s_then_runs_them_until_two_in_a_row_agree(monkeypatch):
    """From 1 step on, a chunk shorter than STEADY_CHUNK_S (each ended by a synchronize) is followed
    by one sized at its rate for CHUNK_MARGIN more (at most CHUNK_GROWTH times as long), until one
    lasts STEADY_CHUNK_S, then chunks of that size until two in a row run within STEADY of each other
    (issue 67: DALI's first windows read 51 % of model-only, its second 79 %): a steady step (0.1 s
    each) stops after the second full chunk; a fast one (1 ms) grows 16-fold at a time; one whose
    steps speed up from 0.2 s to 0.1 s over its first 8 steps goes on until its chunks agree (a
    plateau followed by a faster one cannot be told apart: the windows' drift, which the report
    reads, catches that); one that never settles stops at STEADY_MOST_S, not steady. Returns the
    last chunk's seconds per step, whether steady, and the seconds taken."""
    clock, synced, done = [0.0], [], []
    monkeypatch.setattr(harness, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(harness, "sync", lambda device: synced.append(len(done)))
    monkeypatch.setattr(harness, "STEADY_CHUNK_S", 0.35)

    def run(step_s):
        done.clear(), synced.clear()
        clock[0] = 0.0

        def step(x, y):
            clock[0] += step_s(len(done))
            done.append(x)
        return harness.calibrate(iter([(i, None) for i in range(10_000)]), step, torch.device("cpu"))
    per_step, steady, took = run(lambda n: 0.1)
    assert (per_step, steady) == (pytest.approx(0.1), True) and took == pytest.approx(0.9)
    assert synced == [0, 1, 5, 9]   # 1 step (0.1 s), then 4 (1.1 x 0.35 s at its rate: the first to last it), 4 more
    per_step, steady, took = run(lambda n: 0.001)
    assert steady and synced == [0, 1, 17, 273, 658, 1043]   # 1, 16, 256 (16-fold), 385 (0.385 s), 385
    per_step, steady, took = run(lambda n: max(0.1, 0.2 * 0.5 ** (n / 8)))
    assert steady and per_step == pytest.approx(0.1) and len(done) >= 8 + 2 * 2
    monkeypatch.setattr(harness, "STEADY_MOST_S", 5.0)
    per_step, steady, took = run(lambda n: 0.05 * 1.1 ** n)   # a rate that keeps falling: never settles
    assert not steady and took >= 5.0 and len(done) < 50


def test_report_gives_each_step_kind_its_own_sections_against_the_same_loader_rows(tmp_path):
    rows = []
    for step, model_rate, e2e_rate in (("eager", 50_000, 45_000), ("graph", 200_000, 106_000)):
        rows += [{"mode": "model", "pipeline": "none", "model": "m", "step": step, "img_per_s": model_rate},
                 {"mode": "e2e", "pipeline": "p", "model": "m", "step": step, "img_per_s": e2e_rate}] * 6
    rows += [{"mode": "loader", "pipeline": "p", "model": "none", "step": "", "img_per_s": 110_000}] * 6
    frame = pd.DataFrame(rows).assign(run_id="r", gpu="G", batch_size=512, num_workers=4, dtype="bfloat16",
                                      cpus=4, status="ok", error="", wait_frac=0.0,
                                      device="cpu")   # idle loader rows name a cause on a CPU run only
    frame["repeat"] = frame.groupby(["mode", "step"]).cumcount()
    frame["process"] = frame.repeat % 3   # three processes of two windows: enough for a verdict
    frame.reindex(columns=results.all_columns()).to_csv(tmp_path / "results.csv", index=False)
    text = report.write([tmp_path / "results.csv"], tmp_path / "out").read_text()
    sections = {s.split("\n")[0]: s for s in text.split("\n### ")[1:]}
    eager, graph = (sections[f"{k} step — 32 px, batch 512, bfloat16, 4 cores"] for k in ("Eager", "Graph"))
    assert "| slower than both" in eager and "| input-bound" in graph   # 106k: at the loader's 110k, below 200k
    assert "110,000" in eager and "110,000" in graph   # the loader-only row in both
    assert "model-only 50,000" in eager and "model-only 200,000" in graph   # each against its own model-only


def fast_rows(model: dict, loader: dict, e2e: dict) -> pd.DataFrame:
    rows = [claims.row(f"none; {s}", "model_img_per_s", v, "img/s") for s, v in model.items()]
    rows += [claims.row(p, "loader_img_per_s", v, "img/s") for p, v in loader.items()]
    rows += [claims.row(f"{p}; {s}", "e2e_img_per_s", v, "img/s") for (p, s), v in e2e.items()]
    return pd.DataFrame(rows)


def test_judge_fast_step():
    model = {"eager": 80_000, "compile": 330_000}
    loader = {"resident": 2_000_000, "dataloader": 40_000, "prefetch": 300_000, "clash": 1_000_000}
    e2e = {("resident", "eager"): 79_000, ("resident", "compile"): 325_000,     # fed by both
           ("dataloader", "eager"): 38_000, ("dataloader", "compile"): 39_000,  # input-bound already
           ("prefetch", "eager"): 78_000, ("prefetch", "compile"): 290_000,     # becomes the bottleneck
           ("clash", "eager"): 79_000, ("clash", "compile"): 200_000}           # slower, not for want of input
    v = claims.judge_fast_step(fast_rows(model, loader, e2e))
    assert v.verdict == "depends on the pipeline"
    said = dict(part.split(" (loader-only", 1) for part in v.detail.split("; ") if part.startswith("`"))
    assert "keeps up with the compiled step" in said["`resident`"]
    assert "already the bottleneck with the eager step" in said["`dataloader`"]
    assert "becomes the bottleneck" in said["`prefetch`"] and "290,000 (88%)" in said["`prefetch`"]
    assert "loader-only rate is above the model's" in said["`clash`"]
    only = {k: v for k, v in e2e.items() if k[0] == "prefetch"}
    assert claims.judge_fast_step(fast_rows(model, {"prefetch": 300_000}, only)).verdict == "holds"
    only = {k: v for k, v in e2e.items() if k[0] == "resident"}
    assert claims.judge_fast_step(fast_rows(model, {"resident": 2e6}, only)).verdict == "does not hold"
    assert claims.judge_fast_step(fast_rows({"eager": 1.0}, loader, e2e)).verdict == "not measured"


def train_losses(step: str, steps: int = 8) -> list[float]:
    """Losses of `steps` training steps on one learnable batch (synthetic shapes and their labels),
    at a learning rate where training is smooth (set before the first step, which captures)."""
    torch.manual_seed(0)
    trainer = harness.Trainer("resnet9-w0.25", CUDA, "bfloat16", True, step=step)
    for group in trainer.optimizer.param_groups:
        group["lr"] = 1e-3
    images, labels = sources.synthesize(64, seed=0)
    x = (torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255 - 0.5).to(CUDA, torch.bfloat16)
    x, y = x.contiguous(memory_format=torch.channels_last), torch.from_numpy(labels).to(CUDA)
    losses = []
    for _ in range(steps):
        trainer(x, y)
        losses.append(trainer.loss.float().item())
    return losses


@needs_cuda
@pytest.mark.parametrize("step", ["graph", "compile"])
def test_captured_step_trains_the_same_model_as_eager(step):
    """Each step kind is deterministic from run to run; compiled kernels differ from eager ones in
    bf16 rounding. The test once trained random labels at the trainer's learning rate (0.05), where
    the loss climbed from 3.6 to about 40 in six steps: there those rounding differences grew to 6 %
    (eager 42.3 vs compiled 39.8 on one H100), past the 5 % tolerance it had then, and which cuDNN algorithms
    autotuning picked after the tests before decided whether it failed. At 1e-3 training is smooth
    (on a CPU, float32 and bf16 losses stay within 1 % over eight steps) and the comparison holds."""
    eager, captured = train_losses("eager"), train_losses(step)
    assert captured[0] == pytest.approx(eager[0], rel=2e-2), (eager, captured)   # same weights, same batch
    assert max(abs(c - e) for c, e in zip(captured, eager)) < 0.03 * eager[0], (eager, captured)
    assert eager[-1] < 0.5 * eager[0] and captured[-1] < 0.5 * captured[0], (eager, captured)   # both learn


@needs_cuda
def test_captured_step_refuses_a_batch_of_another_shape():
    trainer = harness.Trainer("resnet9-w0.25", CUDA, "bfloat16", True, step="graph")
    x = torch.randn(8, 3, 32, 32, device=CUDA, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    y = torch.zeros(8, dtype=torch.int64, device=CUDA)
    trainer(x, y)
    with pytest.raises(ValueError, match="needs one batch shape"):
        trainer(x[:4], y[:4])


def test_on_cuda_the_default_steps_are_eager_and_graph_on_one_gpu_and_eager_and_compile_under_ddp():
    """DataParallel refuses a captured step; under DDP the compiled one runs, its 2-GPU test passed, and
    with --ranks at every rank count, so one GPU and several compare (planned for a CUDA device; nothing
    runs)."""
    def steps(*extra, world=distributed.World(), device="cuda"):
        options = cli.build_parser().parse_args(["compare", "--models", "resnet9-w0.25", "--modes", "model",
                                                 "--cpus", "1", *extra])
        return sorted({s.step for s in plan.grid(plan.sweep(options), torch.device(device), world)})
    ddp = distributed.World(rank=0, world_size=2, local_world_size=2)
    assert steps() == ["eager", "graph"]
    assert steps(world=ddp) == ["compile", "eager"]
    assert steps("--ranks", "1,2") == ["compile", "eager"]   # the one-GPU layout of a --ranks sweep too
    assert steps("--ranks", "1") == ["eager", "graph"]
    assert steps("--step", "eager,graph", world=ddp) == ["eager", "graph"]
    assert steps("--parallel", "dp") == ["eager"]
    assert steps(world=ddp, device="cpu") == ["eager"]   # gloo on CPUs: nothing to capture


def test_options_a_pipeline_does_not_read_make_no_second_configuration_of_it():
    options = cli.build_parser().parse_args(["compare", "--pipelines", "resident,dataloader", "--modes", "model,loader",
                                             "--models", "resnet9-w0.25", "--workers", "1,3", "--cpus", "1"])
    specs = plan.grid(plan.sweep(options), torch.device("cpu"))
    assert sorted((s.pipeline, s.config.num_workers) for s in specs if s.pipeline != "none") == \
        [("dataloader", 1), ("dataloader", 3), ("resident", PipelineConfig.default("num_workers"))]
    assert sum(s.mode == "model" for s in specs) == 1   # model-only reads no worker count either
