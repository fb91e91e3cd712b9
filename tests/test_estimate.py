"""`bench.running.estimate`: a plan's device time predicted from earlier rows. Committed runs are
predicted from the other runs' rows (never their own; a part of a plan from the runs that began before it,
as it was before its lease) within ESTIMATE_ERROR (a part: PART_ERROR) of the time their rows span;
windows are sized as the harness sizes them; `--estimate` prints and runs nothing; a plan predicted past
`--lease-minutes` is refused in one line naming the flag that lifts it."""
from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from bench import cli
from bench.cli import measure
from bench.cli.main import _parse
from bench.measuring.distributed import World
from bench.report.analysis import load
from bench.running import estimate, prelude
from bench.running.estimate import RECENT, Costs, Member

ROOT = Path(__file__).resolve().parents[1]
ESTIMATE_ERROR = 0.30
PART_ERROR = 0.20   # a part of a plan made to fit a lease (issue 70)
# runs made by today's harness or close to it, on a GPU and on the CPU, shared processes or not (not
# results/2026-11-26-cpu-first-command: its model-only step ran at half the rate of every later CPU row, 345
# against 725 img/s, so no price from later rows holds for it). The ladder's parts at 80dc6ec are among them, not
# among PARTS: their harness spent more time outside the windows than 68228c8's, while the time outside is priced
# from the newest runs (RECENT), all made after that cut since ladder-v2's part 4 (they read 21 % low).
RUNS = ["2026-12-02-h200-lanes", "2026-12-02-h200-null-step", "2026-12-02-h200-gpu-decode", "2026-11-27-h100-ladder",
        "2026-11-27-h100-photos-best", "2026-12-02-cpu-first-command", "2026-12-05-cpu-first-command",
        "2026-12-03-h200-ladder/part1of7", "2026-12-03-h200-ladder/part2of7"]
# the ladders' parts at the harness of 68228c8 (issue 70's plans made to fit a lease): the 32-px ladder's, the photo
# ladder's (one cell, 3 processes, each)
PARTS = ["2026-12-03-h200-ladder-v2/part1of7", "2026-12-03-h200-ladder-v2/part2of7",
         "2026-12-03-h200-ladder-v2/part3of7", "2026-12-03-h200-ladder-v2/part4of7",
         "2026-12-03-h200-ladder-v2/part5of7", "2026-12-03-h200-ladder-v2/part6of7",
         "2026-12-03-h200-ladder-v2/part7of7", "2026-12-04-h200-photos-ladder/part1of6",
         "2026-12-04-h200-photos-ladder/part2of6", "2026-12-04-h200-photos-ladder/part3of6",
         "2026-12-04-h200-photos-ladder/part4of6"]


@pytest.fixture(scope="module")
def committed() -> tuple[pd.DataFrame, dict[bool, Costs]]:
    """Every committed run's rows, and the costs they give on a GPU and on a CPU."""
    rows = estimate.rows_under([ROOT / "results"])
    return rows, {cuda: Costs(rows, cuda) for cuda in (True, False)}


def predicted(rows: pd.DataFrame, costs: dict[bool, Costs], name: str) -> tuple[list, estimate.Estimate, float, float]:
    """Committed run `name` (under results/) predicted as this test and ESTIMATE-ERRORS.md take it: a part
    as before its lease, from the runs that began before it; another run from all the others. Its
    processes, the estimate, the estimate's first process's start (not in the rows' span) and the span:
    from its first row to its last."""
    own = rows[rows.results_folder == str(ROOT / "results" / name)]
    processes = estimate.ran(own)
    t = pd.to_datetime(own.timestamp, utc=True, format="ISO8601")
    began = pd.to_datetime(rows.timestamp, utc=True, format="ISO8601").groupby(rows.run_id).min()
    later = set(began[began >= t.min()].index) if name in PARTS else set()
    c = costs[own.device.str.startswith("cuda").any()].without(set(own.run_id) | later)
    return processes, c.predict(processes, own.gpu.iloc[0]), c.start(processes[0][0].image_size), \
        (t.max() - t.min()).total_seconds()


@pytest.mark.parametrize("name", RUNS + PARTS)
def test_a_committed_run_is_predicted_from_the_other_runs_rows(committed, name):
    processes, found, start, span = predicted(*committed, name)
    members = sum(map(len, processes))
    assert found.unknown <= members // 10 and len(found.processes) == len(processes) >= (3 if name in PARTS else 6)
    assert abs((found.seconds - start) / span - 1) <= (PART_ERROR if name in PARTS else ESTIMATE_ERROR), \
        (found.seconds / 60, span / 60)


def test_a_window_is_whole_epochs_lasting_the_minimum_with_its_margin():
    m = Member("e2e", "p", "m", "eager", 32, 100, 2.0, samples=1_000)   # an epoch: 10 steps
    assert estimate._window_s(m, rate=10_000.0, busy=0.0) == pytest.approx(0.6)   # 6 epochs of 0.1 s >= 1.2 x 0.5
    assert estimate._window_s(m, rate=100.0, busy=0.0) == pytest.approx(10.0)     # one epoch of 10 s
    model = Member("model", "none", "m", "eager", 32, 100, 2.0, samples=1_000)   # blocks of 50 steps
    assert estimate._window_s(model, rate=10_000.0, busy=0.0) == pytest.approx(1.0)   # 2 blocks of 0.5 s


def test_members_without_rows_are_counted_apart_and_e2e_falls_back_to_model_only():
    rows = pd.DataFrame([
        dict(run_id="r", rank=0, process=0, status="ok", mode="model", pipeline="none", model="m", step="eager",
             image_size=32, batch_size=100, busy_ms=0.0, cpus=2.0, gpu="", device="cpu", img_per_s=1_000.0,
             seconds=1.0, timestamp="2026-12-02T10:00:00+00:00", slot=float("nan"))])
    costs = Costs(rows, cuda=False)
    e2e = Member("e2e", "p", "m", "eager", 32, 100, 2.0, samples=1_000)
    unknown = Member("e2e", "p", "other", "eager", 32, 100, 2.0, samples=1_000)
    found = costs.predict([[e2e], [unknown]], "")
    assert (found.bounds, found.unknown) == (1, 1)
    assert found.processes[0] == pytest.approx(2 * 1.0)   # 2 windows of one epoch (1,000 images at 1,000 img/s)
    fed = pd.DataFrame([{**rows.iloc[0], "mode": "e2e", "pipeline": "p", "img_per_s": 900.0}])
    found = Costs(pd.concat([rows, fed]), cuda=False).predict([[unknown]], "")   # p fed m: a model never
    assert found.unknown == 1                                                     # measured is still unknown


def test_a_variant_is_priced_by_its_own_rows_and_other_cores_by_how_its_rate_follows_its_workers():
    """DALI's CPU and GPU decoders are priced apart; a member with no rows at its cores is priced from
    the nearest cores' rows scaled by (workers ratio) ** elasticity, the elasticity from a GPU where it
    ran at several core counts (here 1: 15 workers decode twice as fast as 7), of its variant else of its
    pipeline (0 where nothing tells: a GPU-side rate), and never above model-only's rate."""
    def row(pipeline, cpus, rate, gpu="H", mode="e2e", **knobs):
        return dict(run_id="r", rank=0, process=0, status="ok", mode=mode, pipeline=pipeline, model="m", step="compile",
                    image_size=224, batch_size=256, busy_ms=0.0, cpus=float(cpus), gpu=gpu, device="cuda",
                    img_per_s=float(rate), seconds=1.0, timestamp="2026-12-02T10:00:00+00:00", slot=float("nan"), **knobs)
    rows = pd.DataFrame([
        row("none", 16, 6_000, mode="model"),
        row("dali", 16, 5_800, dali_decoder="cpu"), row("dali", 16, 5_000, dali_decoder="mixed"),
        row("dataloader", 16, 2_000, pin_memory=True, non_blocking=True),
        row("dataloader", 16, 1_500, gpu="old", pin_memory=False), row("dataloader", 8, 700, gpu="old", pin_memory=False),
        row("resident", 16, 5_900)])
    costs = Costs(rows, cuda=True)

    def rate(pipeline, cpus, **knobs):
        config = {"dali_decoder": "mixed", "pin_memory": False, "non_blocking": False, **knobs}
        m = Member("e2e", pipeline, "m", "compile", 224, 256, float(cpus),
                   variant=estimate.variant_of(pipeline, config.get))
        return costs.rate(m, 0.0, "H")[0]
    assert (rate("dali", 16, dali_decoder="cpu"), rate("dali", 16)) == (5_800, 5_000)
    # pinned at 8 cores: no rows of its own there; the plain dataloader's rows on "old" say its rate
    # follows its workers (elasticity log(1500 / 700) / log(15 / 7) = 1): 2,000 x 7 / 15
    assert rate("dataloader", 8, pin_memory=True, non_blocking=True) == pytest.approx(2_000 * 7 / 15)
    assert rate("resident", 4) == pytest.approx(5_900)   # no core count tells: the nearest cores' as it is
    assert rate("dataloader", 64, pin_memory=True, non_blocking=True) == pytest.approx(6_000)   # 8,400: model-only's at most


def test_a_variant_never_run_with_the_model_is_priced_by_the_fastest_model_it_fed_at_most_model_only():
    """Photo part 2 (ViT-B/16) was priced 31 % over the time its rows span: its pinned `dataloader` had
    no rows beside ViT-B/16 and was priced by a plain one's beside it on another GPU (935 img/s; it
    delivered 2,402), while the pinned one's rows beside ResNet-50 on the same GPU said 2,299. Now a
    variant with no rows of its model takes, per GPU and cores, the fastest rate its rows show feeding
    another model (same mode, step, size, batch and busy level), and where that reaches model-only's
    rate for its own model, model-only's rate as a bound; other variants' rows of its model only where
    neither has rows."""
    def row(model, rate, mode="e2e", pipeline="dataloader", gpu="H", **knobs):
        return dict(run_id="r", rank=0, process=0, status="ok", mode=mode, pipeline=pipeline, model=model,
                    step="compile", image_size=224, batch_size=256, busy_ms=0.0, cpus=16.0, gpu=gpu, device="cuda",
                    img_per_s=float(rate), seconds=1.0, timestamp="2026-12-02T10:00:00+00:00", slot=float("nan"),
                    **knobs)
    pinned = dict(pin_memory=True, non_blocking=True)
    rows = pd.DataFrame([row("vit", 3_000, mode="model", pipeline="none"),
                         row("small", 9_000, mode="model", pipeline="none"),
                         row("vit", 900, gpu="old", pin_memory=False),
                         row("resnet", 2_300, **pinned), row("wide", 1_700, **pinned), row("small", 8_800, **pinned)])
    costs = Costs(rows, cuda=True)

    def rate(model, **knobs):
        m = Member("e2e", "dataloader", model, "compile", 224, 256, 16.0,
                   variant=estimate.variant_of("dataloader", {"pin_memory": False, "non_blocking": False, **knobs}.get))
        return costs.rate(m, 0.0, "H")
    assert rate("resnet", **pinned) == (2_300, False)   # its own rows first
    assert rate("vit", **pinned) == (3_000, True)       # fastest it fed (8,800 beside "small"): vit's model-only, a bound
    assert rate("vit") == (900, False)                  # plain: its own model's rows (on another GPU)
    assert rate("vit", pin_memory=True) == (900, False)   # a variant with no rows anywhere: its model's other variants'
    elsewhere = row("tiny", 50_000, **pinned) | {"image_size": 32}   # another image size: not the same key
    costs = Costs(pd.DataFrame([r for r in rows.to_dict("records") if r["model"] != "small"] + [elsewhere]), cuda=True)
    assert rate("vit", **pinned) == (2_300, False)      # fastest it fed: resnet's 2,300, not wide's 1,700 (sorted after)


def test_a_process_start_and_a_strange_member_s_time_outside_are_priced_from_runs_of_its_image_size():
    """Adding photo part 2 (compiling ViT-B/16 at 224 px at each process's start, building DALI over
    photographs) raised the price of the 32-px null-step run (priced from the newest runs' starts and,
    for members of a pipeline and mode no recent run had, their gaps, whatever their size) to 53 % over
    what it took: both are now priced from runs of its image size where there are any."""
    def run(run_id: str, hour: int, size: int, start_gap_s: int) -> list[dict]:
        t0 = pd.Timestamp(f"2026-12-0{1 + (size == 224)}T{hour}:00:00+00:00")
        member = dict(run_id=run_id, rank=0, status="ok", mode="e2e", model="m", step="eager", image_size=size,
                      batch_size=100, busy_ms=0.0, cpus=2.0, gpu="", device="cpu", img_per_s=100.0)
        gap = 8 if size == 32 else 28   # the second member's time outside its windows
        members = ((0, 0, 0), (0, 1, gap + 2), (1, 0, gap + 4 + start_gap_s))   # (process, slot, end): 2 s windows
        return [{**member, "pipeline": "ab"[slot], "process": process, "slot": slot, "repeat": repeat,
                 "seconds": 1.0, "timestamp": (t0 + pd.Timedelta(seconds=end)).isoformat()}
                for process, slot, end in members for repeat in (0, 1)]
    small = [row for i in range(RECENT) for row in run(f"small{i}", 10 + i, 32, start_gap_s=15)]
    photos = [row for i in range(RECENT) for row in run(f"photo{i}", 10 + i, 224, start_gap_s=60)]
    costs = Costs(pd.DataFrame(small + photos), cuda=False)
    # a start: the time before a process's first member less what such a member takes outside its windows
    # elsewhere (no run had "a" after another member: the median of its size's members, 8 s or 28 s)
    assert (costs.start(32), costs.start(224)) == (pytest.approx(15 - 8), pytest.approx(60 - 28))
    assert costs.start(32) == pytest.approx(costs.without({f"photo{i}" for i in range(RECENT)}).start(32))
    assert costs.start(96) == pytest.approx(60 - 18)   # no run of its size: the newest runs', less all members' median
    strange = [Member("loader", "z", "none", "", size, 100, 2.0) for size in (32, 224)]   # no run had one
    assert [costs.outside(m) for m in strange] == [pytest.approx(8.0), pytest.approx(28.0)]


def test_a_plan_s_members_name_their_variants_as_the_rows_of_their_run_do():
    """A plan is priced before it runs (`Member.of`, from its configurations) by rows runs wrote
    (`ran`): both name a member's variant alike, a knob set when the pipeline is built ("*" in the
    plan: DALI's hardware decoder share) matching the value its rows record. The photo ladder's part 3,
    from its plan and from its committed rows: six members, each matching one member of the other."""
    _, grids = _parse(["sweep", "--config", str(ROOT / "bench/plans/photos-ladder-best.json"),
                       "--part", "3/6", "--out", "unused"])
    planned = {(s.mode, s.pipeline, Member.of(s, 1).variant)
               for s in measure.specs_for(grids, torch.device("cuda"), priced_only=True)}
    rows = load([ROOT / "results/2026-12-04-h200-photos-ladder/part3of6/results.csv"])
    ran = {(m.mode, m.pipeline, m.variant) for members in estimate.ran(rows) for m in members}
    assert len(planned) == len(ran) == 6
    for one, others in ((planned, ran), (ran, planned)):
        for mode, pipeline, variant in one:
            assert len([v for o, p, v in others if (o, p) == (mode, pipeline) and estimate._matches(variant, v)]) == 1, \
                (mode, pipeline, variant)
    assert any("dali_decoder=cpu" in v for *_, v in planned) and any("dali_cpu_share=0.45" in v for *_, v in ran)


def test_a_members_time_outside_is_since_the_previous_member_less_all_its_windows_in_the_newest_runs():
    """A member's rows are written together when it ends (one timestamp): its time outside is the time
    since the previous member's rows less every window of it, and the newest RECENT runs price it."""
    def run(run_id: str, start: str, gap_s: int) -> list[dict]:
        t0 = pd.Timestamp(start)
        member = dict(run_id=run_id, rank=0, process=0, status="ok", mode="e2e", model="m", step="eager",
                      image_size=32, batch_size=100, busy_ms=0.0, cpus=2.0, gpu="", device="cpu", img_per_s=100.0)
        return [{**member, "pipeline": pipeline, "slot": slot, "repeat": repeat, "seconds": 2.0,
                 "timestamp": (t0 + pd.Timedelta(seconds=end)).isoformat()}
                for slot, pipeline, end in ((0, "a", 0), (1, "b", 4 + gap_s)) for repeat in (0, 1)]
    old = [row for i in range(RECENT) for row in run(f"old{i}", f"2026-12-01T{10 + i}:00:00+00:00", gap_s=30)]
    new = [row for i in range(RECENT) for row in run(f"new{i}", f"2026-12-02T{10 + i}:00:00+00:00", gap_s=6)]
    costs = Costs(pd.DataFrame(old + new), cuda=False)
    b = Member("e2e", "b", "m", "eager", 32, 100, 2.0, samples=100)
    assert costs.outside(b) == pytest.approx(6.0)   # the newest runs', not the median of all (18 s)
    assert costs.without({f"new{i}" for i in range(RECENT)}).outside(b) == pytest.approx(30.0)
    assert costs.member_seconds(b, "")[0] == pytest.approx(2 * 1.0 + 6.0)   # 2 windows of an epoch: 100 img at 100 img/s


def test_estimate_prints_the_plan_s_cost_and_runs_nothing(tmp_path, synthetic_root, capsys):
    out = tmp_path / "run"
    assert cli.main(["sweep", "--estimate", "--device", "cpu", "--pipelines", "resident", "--modes", "loader",
                     "--max-samples", "64", "--batch-size", "16", "--data-root", str(synthetic_root),
                     "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "the plan is predicted" in err and "min of device time" in err and "loader resident" in err
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="prices a GPU plan on a machine without one")
def test_a_gpu_plan_is_priced_on_a_machine_without_its_gpu_or_cores(tmp_path, capsys):
    """Issue 70: a plan is priced before a lease, on the machine where it is written: `--estimate
    --device cuda` with more cores than this machine has is priced (from rows of any GPU), a photo folder
    absent here said, and nothing run; without --estimate the same cores are refused."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"source": f"imagefolder:{tmp_path / 'absent'}", "image_size": [224],
                                "batch_size": [256], "models": ["torchvision:resnet18"], "step": ["compile"],
                                "modes": ["model", "e2e"], "cpus": [200], "pipelines": ["dali"]}))
    out = tmp_path / "run"
    assert cli.main(["sweep", "--config", str(plan), "--estimate", "--device", "cuda", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "the plan is predicted" in err and "no GPU here: priced from rows of any GPU" in err, err
    assert f"{tmp_path / 'absent'} not here: an epoch of 50,000 samples assumed" in err and "200 cores" in err
    assert "before the sweep, on a fresh machine" in err   # on-gpu.sh's prelude, priced apart (test_prelude_*)
    assert not out.exists()
    with pytest.raises(SystemExit, match="--cpus 200: this process may use"):   # run, not priced: refused first
        cli.main(["sweep", "--config", str(plan), "--device", "cpu", "--out", str(out)])
    assert not out.exists()


def _before(folder: Path, data_s: int, compiled: str | None, compile_s: int = 100, source: str = "imagefolder",
            boot: str = "", started: str = "2026-12-01T00:00:00+00:00") -> None:
    """A run folder as bench/plans/on-gpu.sh leaves it: before.txt and the sweep's rows (its machine's boot:
    the folder's name unless given)."""
    (folder / "sweep").mkdir(parents=True)
    lines = [f"the checks, the data and nvidia-smi: {data_s} s since the start"]
    lines += [f"the compile into inductor's cache ({compiled}): {data_s + compile_s} s since the start"] if compiled else []
    (folder / "before.txt").write_text("\n".join(lines) + "\n")
    pd.DataFrame([{"run_id": folder.name, "pipeline": "resident", "mode": "loader", "status": "ok", "img_per_s": 1.0,
                   "image_size": 224, "seconds": 1.0, "data_source": source,
                   "boot_id": boot or folder.name, "timestamp": started}]).to_csv(folder / "sweep" / "results.csv", index=False)


def test_prelude_is_the_median_data_step_of_the_same_kind_of_data_plus_the_slowest_compiled_model(tmp_path):
    """Issue 70: what bench/plans/on-gpu.sh does before a sweep (the data, the compile into inductor's cache)
    is priced from the before.txt it left beside earlier runs: the data step only from runs that read the
    same kind of data on a fresh machine, each compiled model from those that compiled it alone (models
    compile at once: the slowest counts), a model none did said; other files named before.txt, and runs
    whose rows do not say their data, are not read."""
    _before(tmp_path / "a", 40, "m1")
    _before(tmp_path / "b", 60, "m2", compile_s=70)
    _before(tmp_path / "c", 200, "m1 m2", compile_s=300)   # two models at once: no model's own time
    _before(tmp_path / "f", 50, "m1", compile_s=130)
    _before(tmp_path / "g", 1, "m1", compile_s=10, boot="f", started="2026-12-02T00:00:00+00:00")   # after f
    _before(tmp_path / "d", 5, None, source="synthetic-seed0")   # 32 px: not a photo plan's data step
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "before.txt").write_text("the checks, the data and nvidia-smi: 1 s since the start\n")  # no rows
    (tmp_path / "h" / "before.txt").mkdir(parents=True)   # a folder of that name
    found = prelude.before_sweep(["m1", "m2", "m3"], True, [tmp_path, tmp_path / "a"])   # each file once
    assert (found.seconds, found.sources, found.unpriced) == (55 + 115, 4, ["m3"])   # medians: 40..200, (100, 130)
    assert "2.8 min more (from 4 before.txt of earlier runs; the compile of m3 not priced" in found.text()
    assert prelude.before_sweep([], False, [tmp_path]).seconds == 5
    assert "not predicted" in prelude.before_sweep(["m1"], False, [tmp_path / "a"]).text()


LADDER = ROOT / "results" / "2026-12-04-h200-photos-ladder"


@functools.cache
def photo_parts() -> tuple[Path, ...]:
    """The photo ladder's committed parts with on-gpu.sh's before.txt, in the order they began (read once)."""
    return tuple(sorted((p.parent for p in LADDER.glob("part*of6*/before.txt")),
                        key=lambda p: prelude.records([p])[0].started))


def prelude_predicted(part: Path) -> tuple[str, prelude.Prelude, float, bool]:
    """(the model `part` compiled, its prelude predicted as `--estimate` would have before its lease: from the
    parts that began before it, the seconds its before.txt says it took, whether it began on a fresh machine)."""
    parts = photo_parts()
    (mine,), earlier = prelude.records([part]), list(parts[:parts.index(part)])
    return mine.compiled, prelude.before_sweep([mine.compiled], True, earlier), mine.data_s + mine.compile_s, \
        prelude.fresh(mine, prelude.records(earlier))


def test_prelude_of_each_committed_photo_part_as_before_its_lease():
    """Each committed photo part's before.txt predicted from the parts that began before it: not at all for
    the first, its compile said unpriced where no earlier part compiled its model on a fresh machine, and
    within PART_ERROR where one had and it began on a fresh machine itself (part 6's stopped rows did not:
    their compile found part 4's cache)."""
    said = {"not predicted": 0, "unpriced": 0, "priced": 0}
    for part in photo_parts():
        model, found, measured, fresh = prelude_predicted(part)
        if found.seconds is None:
            said["not predicted"] += 1
        elif found.unpriced:
            assert found.unpriced == [model]
            said["unpriced"] += 1
        elif fresh:
            assert abs(found.seconds / measured - 1) <= PART_ERROR, (part.name, found.seconds, measured)
            said["priced"] += 1
    assert said["not predicted"] == 1 and said["priced"] >= 1, said


def test_a_plan_past_the_lease_is_refused_naming_the_flag_that_lifts_it(monkeypatch):
    found = estimate.Estimate(processes=[1_900.0], cells=["c"], sources=1)
    monkeypatch.setattr(estimate, "plan_estimate", lambda *a: found)
    args = argparse.Namespace(command="sweep", out=None, estimate=False, past_lease=False, lease_minutes=30.0)
    with pytest.raises(ValueError, match=r"predicted to take 32 min, more than --lease-minutes 30: .* --past-lease"):
        measure.predicted(args, [], torch.device("cpu"), World())
    assert measure.predicted(argparse.Namespace(**{**vars(args), "past_lease": True}), [], torch.device("cpu"),
                             World())


def test_without_earlier_rows_a_plan_is_not_predicted_and_not_refused():
    found = Costs(pd.DataFrame(columns=["status", "img_per_s", "seconds", "timestamp", "run_id", "rank", "device"]),
                  cuda=True).predict([[Member("e2e", "p", "m", "eager", 32, 100, 2.0)]], "")
    assert found.text().startswith("not predicted") and found.unknown == 1
