"""torch.distributed on the CPU: the sharding policy, a real 2-process gloo job in which every
pipeline (DALI in CPU mode included) covers the epoch exactly once across ranks, on CIFAR-like data
and on photographs, and DDP replicas that stay in sync (eager and compiled), all in one 2-process
start; the harness under torchrun, and --ranks sweeps
(a shared-process one over photographs too)."""
from __future__ import annotations

import faulthandler
import json
import os
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import pipelines
from bench import cli
from pipelines.epochs import batch_count, epoch_batches, shard_order
from pipelines.config import PipelineConfig

from test_contract import LIGHT_VARIANTS, decode_index, to_pixels

REPO = Path(__file__).resolve().parents[1]
N_ODD = 1001   # samples: not a multiple of 2 ranks, so the padding shows
N_PHOTOS = 9   # photographs, one per class (the models have 10): odd, so the padding shows; 5 per rank
STEP_WORKER_S = 400   # _step_worker: a rank still running after this prints every thread's stack and ends


@pytest.mark.parametrize("policy,expected", [
    ("drop", [[0, 2, 4], [1, 3, 5]]),
    ("partial", [[0, 2, 4, 6], [1, 3, 5, 0]]),
])
def test_shard_order_worked_example(policy, expected):
    order = np.arange(7)
    got = [shard_order(order, PipelineConfig(rank=r, world_size=2, last_batch=policy)).tolist() for r in range(2)]
    assert got == expected


@pytest.mark.parametrize("n", [1, 5, 999, 1000, 1001, 1003])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("policy", ["drop", "partial"])
def test_every_rank_runs_the_same_steps_and_the_epoch_is_covered(n, world, policy):
    plans = []
    for rank in range(world):
        config = PipelineConfig(rank=rank, world_size=world, last_batch=policy, batch_size=64, seed=3)
        plan = epoch_batches(n, config, epoch=1)
        assert len(plan) == batch_count(n, config)
        plans.append(plan)
    assert len({len(p) for p in plans}) == 1, "ranks would run different numbers of DDP steps"
    seen = np.concatenate([np.concatenate(p) for p in plans if p] or [np.array([], int)])
    counts = np.bincount(seen, minlength=n)
    if policy == "partial":   # every sample at least once; (-n) % world padded repeats, stated
        assert counts.min() >= 1 and counts.sum() - n == -n % world
    else:                     # never twice; what is dropped is the cut plus incomplete batches
        assert counts.max() <= 1
        assert n - counts.sum() == n % world + world * (n // world % 64)


def _init(rank: int, world: int, rendezvous: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)


def _coverage_worker(rank: int, world: int, rendezvous: str, root: str, out: str) -> None:
    """One rank: an epoch of every pipeline variant on its shard; rank 0 writes what each rank saw.
    DALI's parallel reader shards as its other readers do (`tests/test_contract.py` partitions its
    epoch by rank) and takes seconds to start its worker processes: left out here. Workers start by
    fork: their start method is not what this test checks."""
    _init(rank, world, rendezvous)
    report = {}
    for name, fixed in LIGHT_VARIANTS:
        if pipelines.available()[name]:
            continue
        key = name + "".join(f"-{v}" for v in fixed.values())
        config = PipelineConfig(**{**fixed, "data_root": root, "source": "cifar10", "max_samples": N_ODD,
                                   "batch_size": 64, "num_workers": 1, "device": "cpu", "rank": rank,
                                   "world_size": world, "last_batch": "partial", "seed": 7, "worker_start": "fork"})
        if pipelines.source_refusal(name, config):   # photographs only
            continue
        with pipelines.build(name, config) as p:
            p.set_epoch(1)
            batches = [x for x, _ in p]
        seen = decode_index(to_pixels(torch.cat([x.float() for x in batches]))).tolist()
        report[key] = _gathered(world, (len(batches), seen))
    _end(rank, report, out)


def _gathered(world: int, value) -> list:
    """Every rank's `value`, in rank order, on every rank."""
    gathered = [None] * world
    dist.all_gather_object(gathered, value)
    return gathered


def _end(rank: int, report: dict, out: str) -> None:
    """Rank 0 writes `report` to `out` as JSON; every rank leaves the process group."""
    if rank == 0:
        Path(out).write_text(json.dumps(report))
    dist.destroy_process_group()


def _photo_coverage_worker(rank: int, world: int, rendezvous: str, folder: str, out: str) -> None:
    """One rank: an epoch of every pipeline that reads photographs on its shard of a folder of one
    photograph per class (the label names the photograph); rank 0 writes the labels each rank saw."""
    _init(rank, world, rendezvous)
    report = {}
    for name in pipelines.photo_readers():
        if pipelines.available()[name] or name == "ffcv":   # ffcv refuses world_size > 1 (pipelines/ffcv.py)
            continue
        config = PipelineConfig(source=f"imagefolder:{folder}", image_size=32, batch_size=2, num_workers=1,
                                device="cpu", rank=rank, world_size=world, last_batch="partial", seed=7,
                                worker_start="fork")
        with pipelines.build(name, config) as p:
            p.set_epoch(1)
            seen = [label for _, y in p for label in y.tolist()]
        report[name] = _gathered(world, (len(p), seen))
    _end(rank, report, out)


def _all_cpu_workers(rank: int, world: int, rendezvous: str, root: str, folder: str, out: str) -> None:
    """One rank: the CIFAR coverage run, the photographs' one, then the CPU DDP steps, in one
    2-process start (each start costs seconds: two processes importing torch); rank 0 writes the
    three reports."""
    _coverage_worker(rank, world, rendezvous + "-cifar", root, out + ".cifar")
    _photo_coverage_worker(rank, world, rendezvous + "-photos", folder, out + ".photos")
    _step_worker(rank, world, rendezvous + "-steps", out + ".steps", ["eager", "compile", "no-ddp"], False)


@pytest.fixture(scope="module")
def two_rank_reports(indexed_root, tmp_path_factory) -> dict:
    """What each rank of one 2-process gloo job saw of an epoch: "cifar" (every pipeline variant on
    N_ODD index-encoded samples) and "photos" (every photo reader on N_PHOTOS photographs); and
    "steps", _step_worker's report for eager DDP, compiled DDP and eager without DDP."""
    from test_imagefolder import jpeg
    tmp = tmp_path_factory.mktemp("coverage")
    folder = tmp / "photos"
    for k in range(N_PHOTOS):   # one photograph per class, of assorted sizes: its label is its index
        jpeg(folder / f"c{k:02d}" / "0.jpg", size=(200 + 20 * k, 180 + 10 * k), seed=k)
    out = tmp / "report.json"
    mp.spawn(_all_cpu_workers, args=(2, str(tmp / "rdzv"), str(indexed_root), str(folder), str(out)), nprocs=2)
    return {kind: json.loads(Path(f"{out}.{kind}").read_text()) for kind in ("cifar", "photos", "steps")}


def test_two_gloo_processes_cover_an_epoch_of_photographs_once_for_every_photo_pipeline(two_rank_reports):
    report = two_rank_reports["photos"]
    assert "dataloader" in report and (pipelines.available()["dali"] or "dali" in report)
    for name, ranks in report.items():
        (steps_a, a), (steps_b, b) = ranks
        assert steps_a == steps_b == -(-len(a) // 2) == -(-len(b) // 2), (name, ranks)   # the same DDP steps per rank
        counts = np.bincount(a + b, minlength=N_PHOTOS)
        assert counts.min() == 1 and counts.sum() - N_PHOTOS == 1, (name, ranks)   # one padded, all others once


def test_two_gloo_processes_cover_the_epoch_once_for_every_pipeline(two_rank_reports):
    report = two_rank_reports["cifar"]
    assert {"dataloader", "prefetch", "resident"} <= set(report)
    if not pipelines.available()["dali"]:
        assert {"dali", "dali-raw", "dali-file"} <= set(report)
    for key, ranks in report.items():
        steps = [n for n, _ in ranks]
        assert steps[0] == steps[1], (key, steps)   # DDP ranks must run the same number of steps
        a, b = (set(seen) for _, seen in ranks)
        assert a | b == set(range(N_ODD)), key
        counts = np.bincount([i for _, seen in ranks for i in seen], minlength=N_ODD)
        if key == "dali-file":   # DALI's own shards (500 / 501), padded by repeating a shard's last sample
            assert counts.sum() - N_ODD <= 64, key
        else:                    # our policy: one sample padded (N_ODD is odd), all others exactly once
            assert counts.sum() - N_ODD == 1 and counts.max() == 2, key


def _step_worker(rank: int, world: int, rendezvous: str, out: str, steps: list[str], cuda: bool) -> None:
    """Three steps of a DDP replica per step kind from the same weights on each rank's own batches;
    rank 0 writes, per kind, the parameters' largest spread between ranks and distance from eager's.
    On a CPU "compile" is the DDP-wrapped model compiled as the Trainer compiles it (backend
    aot_eager: no C++ compiler needed), uncaptured; on CUDA each kind is the Trainer's own step.
    "no-ddp" is eager without DDP (parallel="none"): the same steps, gradients not all-reduced."""
    from bench.measuring import training
    faulthandler.dump_traceback_later(STEP_WORKER_S, exit=True)   # a hung collective: its stacks, then an end
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    else:
        _init(rank, world, rendezvous)
    found = {}
    for step in steps:
        torch.manual_seed(0)
        trainer = training.Trainer("resnet9-w0.25", device, "float32", channels_last=False,
                                   parallel="none" if step == "no-ddp" else "ddp",
                                   step=step if cuda and step != "no-ddp" else "eager")
        if step == "compile" and not cuda:
            trainer.forward = torch.compile(trainer.model, backend="aot_eager")
        if cuda:   # the same convolution algorithms in every step kind: a difference is the step's, not cuDNN's
            torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = False, True
            torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
        initial = torch.cat([p.detach().flatten().clone() for p in trainer.model.parameters()])
        g = torch.Generator().manual_seed(100 + rank)
        for i in range(3):
            trainer(torch.randn(16, 3, 32, 32, generator=g).to(device), torch.randint(0, 10, (16,), generator=g).to(device))
            if i == 0:   # the first update alone: its size against eager's tells a scaling fault from rounding
                found[step + "-first"] = (torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
                                          - initial).cpu()
        params = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
        found[step + "-moved"] = float((params - initial).abs().max())
        gathered = [torch.empty_like(params) for _ in range(world)]
        dist.all_gather(gathered, params)
        found[step] = params.cpu()
        found[step + "-spread"] = float((gathered[0] - gathered[1]).abs().max())
    if rank == 0:
        Path(out).write_text(json.dumps({
            **{k: v for k, v in found.items() if isinstance(v, float)},
            **{f"{k}-from-eager": float((found[k] - found["eager"]).abs().max()) for k in steps},
            **{f"{k}-first-vs-eager": float(found[k + "-first"].norm() / found["eager-first"].norm()) for k in steps}}))
    if cuda:   # NCCL's teardown after a captured collective hangs (seen on 2 H100s, torch 2.11): leave, as
        dist.barrier()   # the harness's configuration processes do, once both ranks are done
        os._exit(0)
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def cpu_steps(two_rank_reports) -> dict:
    """_step_worker's report for eager DDP, compiled DDP and eager without DDP, on 2 gloo ranks (the
    coverage runs' start)."""
    return two_rank_reports["steps"]


def test_ddp_replicas_stay_in_sync(cpu_steps):
    assert cpu_steps["eager-moved"] > 1e-3, "the DDP replicas did not train"
    assert cpu_steps["eager-spread"] < 1e-6, "the DDP replicas disagree: gradients not all-reduced"
    assert cpu_steps["no-ddp-spread"] > 1e-3, "without DDP the same steps on each rank's data did not diverge"


def test_a_compiled_ddp_model_trains_the_same_model_as_eager_ddp_on_the_cpu(cpu_steps):
    result = cpu_steps
    assert result["eager-moved"] > 1e-3 and result["compile-moved"] > 1e-3     # they trained
    assert result["eager-spread"] < 1e-6 and result["compile-spread"] < 1e-6   # replicas in sync
    assert result["compile-from-eager"] < 1e-4                                 # the same training


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices")
def test_captured_and_compiled_ddp_steps_train_the_same_model_as_eager_ddp_on_two_gpus(tmp_path):
    """The whole step captured with DDP's all-reduce inside (graph, compile) against eager DDP."""
    out = tmp_path / "steps.json"
    mp.spawn(_step_worker, args=(2, str(tmp_path / "rdzv"), str(out), ["eager", "graph", "compile"], True), nprocs=2)
    result = json.loads(out.read_text())
    assert min(result[f"{k}-moved"] for k in ("eager", "graph", "compile")) > 1e-3, result
    assert max(result[f"{k}-spread"] for k in ("eager", "graph", "compile")) < 1e-6, result
    assert result["graph-first-vs-eager"] == pytest.approx(1, abs=1e-3), result   # one update of eager's size
    assert result["graph-from-eager"] < 1e-4 and result["compile-from-eager"] < 1e-3, result


def test_harness_under_torchrun_writes_one_row_per_rank_with_the_job_rate(synthetic_root, tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "bench.cli", "compare",
           "--device", "cpu", "--pipelines", "prefetch,resident", "--modes", "loader,e2e",
           "--models", "resnet9-w0.25", "--batch-size", "16", "--steps", "2", "--warmup", "1",
           "--repeats", "2", "--processes", "1", "--workers", "1", "--max-samples", "256", "--data-root", str(synthetic_root),
           "--source", "synthetic", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    df = pd.read_csv(out / "results.csv")
    assert (df.status == "ok").all() and (df.world_size == 2).all()
    assert sorted(df["rank"].unique()) == [0, 1]
    assert set(df[df["mode"] == "e2e"].parallel) == {"ddp"} and set(df[df["mode"] == "loader"].parallel) == {"none"}
    # each rank on its own equal share of the cores (the default budget under torchrun)
    share = len(os.sched_getaffinity(0)) // 2
    assert (df.cpus == share).all() and (df.cpu_set.astype(str).str.count(",") == 0).all()
    sets = df.groupby("rank").cpu_set.agg(set)
    assert sets.map(len).eq(1).all() and sets[0] != sets[1]
    for _, window in df.groupby(["pipeline", "mode", "repeat"]):
        assert len(window) == 2
        assert window.world_img_per_s.nunique() == 1   # the job's rate, the same on both ranks' rows
        assert window.world_img_per_s.iloc[0] == pytest.approx(window.images.sum() / window.seconds.max())
        assert window.drain_steps.nunique() == 1 and window.drain_steps.iloc[0] >= 1   # DDP's too, as many per rank
    assert (out / "COMMAND.txt").read_text().startswith("torchrun --nnodes=1 --nproc-per-node=2 -m bench.cli compare")


def _ranks_sweep(root, out, *extra) -> int:
    return cli.main(["sweep", "--device", "cpu", "--ranks", "1,2", "--cpus", "1", "--processes", "1",
                     "--models", "resnet9-w0.25", "--batch-size", "16", "--steps", "2", "--warmup", "1",
                     "--repeats", "2", "--max-samples", "256", "--data-root", str(root), "--source", "synthetic",
                     "--out", str(out), *extra])


def test_ranks_runs_each_configuration_on_one_and_on_two_ranks_of_their_own(synthetic_root, tmp_path, capsys):
    out = tmp_path / "run"
    assert _ranks_sweep(synthetic_root, out, "--pipelines", "prefetch", "--modes", "loader,e2e") == 0
    df = pd.read_csv(out / "results.csv")
    assert (df.status == "ok").all()
    assert df.groupby("world_size").size().to_dict() == {1: 4, 2: 8}   # 2 modes x 2 windows, on every rank
    two = df[df.world_size == 2]
    assert set(two[two["mode"] == "e2e"].parallel) == {"ddp"} and set(df[df.world_size == 1].parallel) == {"none"}
    sets = two.groupby("rank").cpu_set.agg(set)
    assert sets.map(len).eq(1).all() and sets[0] != sets[1]   # each rank on its own core
    for _, window in two.groupby(["mode", "repeat"]):
        assert sorted(window["rank"]) == [0, 1]
        assert window.world_img_per_s.nunique() == 1
        assert window.world_img_per_s.iloc[0] == pytest.approx(window.images.sum() / window.seconds.max())
    capsys.readouterr()
    assert _ranks_sweep(synthetic_root, out, "--pipelines", "prefetch", "--modes", "loader,e2e") == 0
    assert "resume: 4 of 4 configuration processes already done" in capsys.readouterr().err
    assert len(pd.read_csv(out / "results.csv")) == len(df)   # a two-rank block counted once, not run again


def test_ranks_rendezvous_port_is_held_by_the_runner_from_before_the_ranks_start_until_they_end(monkeypatch):
    from bench.running.runner import rank_environments
    with rank_environments(2) as environments:
        port = int(environments[0]["MASTER_PORT"])
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))   # nothing else can take it before the ranks join
        stores = []
        for environment in environments:   # each rank as torch's env:// rendezvous joins: rank 0 binds nothing
            for name, value in environment.items():
                monkeypatch.setenv(name, value)
            stores.append(next(dist.rendezvous("env://", timeout=timedelta(seconds=10)))[0])
        stores[0].set("met", "yes")
        assert stores[1].get("met") == b"yes"   # both ranks reach the one store the runner hosts
        del stores
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()   # gone with the block


def test_a_shared_process_sweep_on_two_ranks_feeds_photographs_through_every_photo_pipeline(tmp_path):
    """--ranks 1,2 --share-process on a folder of photographs: every pipeline of the photo plans
    (DALI's CPU decoder where DALI is installed) writes ok rows on one rank and on both of two, the
    model-only and e2e configurations of each rank count in one process per rank, in one order."""
    from test_imagefolder import jpeg
    folder = tmp_path / "photos"
    for k in range(6):
        jpeg(folder / f"c{k % 2}" / f"{k}.jpg", size=(64 + 8 * k, 48 + 4 * k), seed=k)
    photo_pipelines = ["dataloader", "timm"] + ["dali"] * (not pipelines.available()["dali"])
    out = tmp_path / "run"
    assert cli.main(["sweep", "--device", "cpu", "--ranks", "1,2", "--cpus", "1", "--processes", "1",
                     "--share-process", "--source", f"imagefolder:{folder}", "--image-size", "32",
                     "--batch-size", "2", "--steps", "1", "--warmup", "0", "--repeats", "1",
                     "--models", "resnet9-w0.25", "--modes", "model,e2e", "--pipelines", ",".join(photo_pipelines),
                     "--dali-decoder", "cpu", "--workers", "0", "--out", str(out)]) == 0   # no worker processes to start
    df = pd.read_csv(out / "results.csv")
    assert (df.status == "ok").all(), df[df.status != "ok"].error.tolist()
    e2e = df[df["mode"] == "e2e"]
    assert e2e.groupby("world_size").pipeline.agg(sorted).to_dict() == {
        1: sorted(photo_pipelines), 2: sorted(photo_pipelines * 2)}   # one row per rank
    for ranks, cell in df.groupby("world_size"):   # one process per rank ran the cell's members in turn
        order = cell.sort_values("slot").drop_duplicates(["rank", "slot"])
        assert sorted(cell.slot.unique()) == list(range(len(photo_pipelines) + 1))
        assert order.groupby("rank").pipeline.agg(tuple).nunique() == 1 and order["rank"].nunique() == ranks
    assert set(df[df.pipeline == "dali"].dali_decoder) <= {"cpu"}


def test_ranks_are_refused_under_torchrun_and_beyond_the_gpus():
    from bench.measuring.distributed import World
    from bench.running import plan
    options = plan.sweep(cli.build_parser().parse_args(["sweep", "--ranks", "1,2"]))
    with pytest.raises(ValueError, match="--ranks starts the ranks itself"):
        plan.worlds(options, torch.device("cpu"), World(0, 2, 0, 2))
    assert [w.world_size for w in plan.worlds(options, torch.device("cpu"))] == [1, 2]
    if torch.cuda.device_count() < 2:
        with pytest.raises(ValueError, match=f"--ranks 2: this machine has {torch.cuda.device_count()} GPUs"):
            plan.worlds(options, torch.device("cuda"))


def test_dataparallel_needs_cuda_and_no_torchrun(synthetic_root, tmp_path):
    args = ["compare", "--device", "cpu", "--parallel", "dp", "--data-root", str(synthetic_root), "--out", str(tmp_path)]
    with pytest.raises(SystemExit, match="--parallel dp runs in one process on CUDA devices"):
        cli.main(args)


def test_runspec_ties_ddp_to_a_multi_process_config():
    from bench.measuring.spec import RunSpec
    with pytest.raises(ValueError, match="ddp is the mode of a torchrun job"):
        RunSpec("prefetch", "e2e", "resnet9", PipelineConfig(), parallel="ddp")
    with pytest.raises(ValueError, match="ddp is the mode of a torchrun job"):
        RunSpec("prefetch", "e2e", "resnet9", PipelineConfig(rank=1, world_size=2))
    with pytest.raises(ValueError, match="only model and e2e train replicas"):
        RunSpec("prefetch", "loader", "none", PipelineConfig(), parallel="dp")
    RunSpec("prefetch", "loader", "none", PipelineConfig(rank=1, world_size=2))   # loaders shard without replicas
