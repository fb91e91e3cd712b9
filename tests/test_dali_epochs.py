"""`dali`'s input runs across epochs (issue 51): consecutive epochs continue one DALI stream, so
DALI's prefetch queue holds the next epoch's first batches while an epoch ends, with no pipeline
built again; each epoch still yields what a pipeline started at that epoch yields, batch by batch
in the epoch's plan; a jump, a repeat or an abandoned epoch still gives the epoch asked for; the
files checked after a DALI error reach into the next epoch's batches made ahead.
CPU-only DALI where there is no GPU, on the index-encoded images of `test_contract`.
"""
from __future__ import annotations

import pytest
import torch

import pipelines
from pipelines import PipelineConfig, dali, dali_sources

from test_contract import decode_index, make, to_pixels
from test_imagefolder import jpeg

SMALL = dict(max_samples=300, batch_size=32, dali_queue_depth=2)   # 10 batches, 3 DALI batches an epoch
EXTERNAL = [("dali", {}), ("dali-raw", {})]


@pytest.fixture
def spied(monkeypatch):
    """What the external source served, call by call (its epoch, or "stop" for a StopIteration),
    and how many DALI pipelines were built."""
    seen = {"served": [], "builds": 0}
    call, start = dali_sources.EpochSource.__call__, dali.DaliPipeline._start

    def spy_call(self, info):
        try:
            out = call(self, info)
        except StopIteration:
            seen["served"].append("stop")
            raise
        seen["served"].append(self.epoch)
        return out

    def spy_start(self, first_epoch):
        seen["builds"] += 1
        start(self, first_epoch)

    monkeypatch.setattr(dali_sources.EpochSource, "__call__", spy_call)
    monkeypatch.setattr(dali.DaliPipeline, "_start", spy_start)
    return seen


def batches(p, e: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    p.set_epoch(e)
    return [(x.float().cpu(), y.cpu()) for x, y in p]


@pytest.mark.parametrize("variant", EXTERNAL + [("dali", {"dali_reader": "file"})],
                         ids=["dali", "dali-raw", "dali-file"])
def test_consecutive_epochs_run_on_without_the_source_stopping(variant, indexed_root, spied):
    with make(variant, indexed_root, **SMALL) as p:
        for e in range(3):
            assert len(batches(p, e)) == len(p)
            assert not p.pipes[0].empty(), e   # DALI already works on the next epoch's first batches
            if not p.file_reader:
                assert e + 1 in spied["served"], (e, spied["served"])
    assert "stop" not in spied["served"] and spied["builds"] == 1


# DALI's parallel reader (worker processes that take seconds to start) once: its workers serve any
# iteration of the stream
ACROSS = [(v, *policy) for v in EXTERNAL for policy in [("partial", 0, 1), ("drop", 1, 2)]] + [
    (("dali", {"dali_reader": "parallel"}), "drop", 1, 2)]
ACROSS_IDS = ["dali-partial", "dali-drop-rank1of2", "dali-raw-partial", "dali-raw-drop-rank1of2",
              "dali-parallel-drop-rank1of2"]


@pytest.mark.parametrize("variant,policy,rank,world", ACROSS, ids=ACROSS_IDS)
def test_each_epoch_yields_what_a_pipeline_started_at_it_yields(variant, policy, rank, world, indexed_root):
    """Epochs 0, 1, 2 run on one stream; each equals, batch by batch, its plan (the samples' indices
    and labels) and what a pipeline that starts at that epoch (the path of a restart) yields. The
    parallel reader's restart is its serial twin's (the same callback, without worker processes that
    take seconds to start each time), so its stream also equals the serial reader's."""
    config = dict(SMALL, last_batch=policy, rank=rank, world_size=world)
    with make(variant, indexed_root, **config) as p:
        run = [batches(p, e) for e in range(3)]
        plans = [p.batches(e) for e in range(3)]
    restart = (variant[0], {k: v for k, v in variant[1].items() if (k, v) != ("dali_reader", "parallel")})
    for e, (got, plan) in enumerate(zip(run, plans)):
        assert [decode_index(to_pixels(x)).tolist() for x, _ in got] == [b.tolist() for b in plan], e
        assert all(torch.equal(y, torch.from_numpy((7 * b + 3) % 10)) for (_, y), b in zip(got, plan)), e
        with make(restart, indexed_root, **config) as fresh:
            want = batches(fresh, e)
        assert len(got) == len(want) and all(torch.equal(g[0], w[0]) and torch.equal(g[1], w[1])
                                             for g, w in zip(got, want)), e


@pytest.mark.parametrize("variant", EXTERNAL, ids=["dali", "dali-raw"])
def test_a_jump_a_repeat_or_an_abandoned_epoch_gives_the_epoch_asked_for(variant, indexed_root, spied):
    """A jump or a repeat starts a new source at the epoch asked for; an epoch left after one batch
    is run out when the next one follows it; each epoch then yields what a fresh pipeline yields."""
    with make(variant, indexed_root, **SMALL) as p:
        seen = [(0, batches(p, 0)), (2, batches(p, 2))]   # a jump
        p.set_epoch(3)
        next(iter(p))   # left after its first batch
        seen.append((4, batches(p, 4)))   # consecutive: epoch 3 is run out, the stream goes on
        assert spied["builds"] == 2
        seen.append((4, batches(p, 4)))   # a repeat
        p.set_epoch(5)
        next(iter(p))
        seen.append((5, batches(p, 5)))   # a repeat after one batch
        seen.append((1, batches(p, 1)))   # backwards
        assert spied["builds"] == 5
    for e, got in seen:
        with make(variant, indexed_root, **SMALL) as fresh:
            want = batches(fresh, e)
        assert len(got) == len(want) and all(torch.equal(g[0], w[0]) and torch.equal(g[1], w[1])
                                             for g, w in zip(got, want)), e


def test_photographs_boxes_run_across_epochs_as_a_pipeline_started_at_each_epoch_cuts_them(tmp_path):
    """Photographs: the external source hands DALI each file with its box and flip; on one stream
    those of epochs 0, 1, 2 equal those of a pipeline that starts at each."""
    if pipelines.available()["dali"]:
        pytest.skip(pipelines.available()["dali"])
    for k in range(12):
        jpeg(tmp_path / f"c{k % 3}" / f"{k}.jpg", size=(260 + 10 * k, 230 + 20 * (k % 3)), seed=k)
    config = PipelineConfig(source=f"imagefolder:{tmp_path}", image_size=64, batch_size=2, num_workers=1,
                            device="cpu", last_batch="partial", dali_batch_multiple=2, dali_queue_depth=2)
    with pipelines.build("dali", config) as p:
        run = [batches(p, e) for e in range(3)]
        assert not p.pipes[0].empty()   # DALI already works on epoch 3
    for e, got in enumerate(run):
        with pipelines.build("dali", config) as fresh:
            want = batches(fresh, e)
        assert len(got) == len(want) == 6 and all(torch.equal(g[0], w[0]) and torch.equal(g[1], w[1])
                                                  for g, w in zip(got, want)), e


def test_the_files_checked_after_a_dali_error_reach_into_the_next_epoch(indexed_root):
    """After a DALI error the files checked are those of the DALI batches DALI can have made: at an
    epoch's end, the next epoch's first ones (`_upcoming`)."""
    with make(("dali", {}), indexed_root, **SMALL) as p:
        p.set_epoch(0)
        live = iter(p)
        while p.fetched < p.dali_batches - 1:   # the last DALI batch of the epoch is due next
            next(live)
        window = p._upcoming(SMALL["dali_queue_depth"] + 2)
        due = [dali_sources.grouped(p.batches(e), p.multiple) for e in (0, 1)]
    assert [w.tolist() for w in window] == [g.tolist() for g in [due[0][-1], *due[1][:3]]]
