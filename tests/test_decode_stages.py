"""`bench.studies.decode_stages`: refuses without CUDA in one line; its table is its rows' medians;
on a GPU, every counted batch of each condition has its three stages."""
from __future__ import annotations

import time

import pandas as pd
import pytest
import torch

from bench.studies import decode_stages
from pipelines import PipelineConfig


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_without_cuda_it_says_so_in_one_line(tmp_path, capsys):
    assert decode_stages.main(["--out", str(tmp_path / "s"), "--source", "imagefolder:x"]) == 2
    assert capsys.readouterr().err.strip() == "decode_stages: needs a CUDA device"
    assert not (tmp_path / "s").exists()


def test_the_table_gives_each_stage_its_median_and_range():
    rows = pd.DataFrame(dict(pipeline="tvjpeg", condition=["idle"] * 3, batch=[0, 1, 2], wait_ms=[1.0, 2.0, 9.0],
                             decode_ms=[10.0, 12.0, 11.0], resize_ms=[0.5, 0.5, 0.7], img_per_s=8000.0))
    text = decode_stages.report(rows, "python -m bench.studies.decode_stages --out x", "a GPU")
    assert "| `tvjpeg` | idle | 3 | 2.0 [1.0–9.0] | 11.0 [10.0–12.0] | 0.5 [0.5–0.7] | 8,000 |" in text


def test_the_producer_s_batches_are_timed_on_a_cpu_too(monkeypatch, photo_folder_for_stages):
    """The wrapper around the producer's batch (its lane's wait, the decode, the rest) on the CPU's
    decoder, the device's synchronizations left out: what the GPU test times, without a GPU."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: None)
    config = PipelineConfig(source=f"imagefolder:{photo_folder_for_stages}", image_size=64, batch_size=64,
                            num_workers=1, device="cpu")
    rows = pd.DataFrame(decode_stages.run("tvjpeg", config, "idle", 2))
    assert len(rows) == 2 and (rows.decode_ms > 0).all() and (rows.wait_ms == 0).all()

def test_the_batches_counted_are_those_taken_after_the_warm_ones_however_far_ahead_they_were_made(
        monkeypatch, photo_folder_for_stages):
    """A slow consumer (1 s a batch, as beside a busy step): the producer makes the epoch's last
    batches before the warm ones are taken, and those are still the ones counted (the GPU test's
    failure at 11c3086: none were)."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: None)
    monkeypatch.setattr(decode_stages.busy, "BusyStep", lambda device, ms: lambda: time.sleep(1.0))
    config = PipelineConfig(source=f"imagefolder:{photo_folder_for_stages}", image_size=64, batch_size=290,
                            num_workers=1, device="cpu")   # 1,792 photographs: 6 batches, WARM + 2
    rows = pd.DataFrame(decode_stages.run("tvjpeg", config, "beside the busy step", 2))
    assert list(rows.batch) == [0, 1] and (rows.decode_ms > 0).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_each_counted_batch_has_its_stages(tmp_path, photo_folder_for_stages):
    source = f"imagefolder:{photo_folder_for_stages}"
    assert decode_stages.main(["--out", str(tmp_path), "--source", source, "--batches", "2"]) == 0
    rows = pd.read_csv(tmp_path / "stages.csv")
    assert len(rows) == 4 and (rows.decode_ms > 0).all() and (rows.img_per_s > 0).all()


@pytest.fixture(scope="module")
def photo_folder_for_stages(tmp_path_factory):
    """Written once for the module's tests, which only read it."""
    from conftest import write_photographs
    return write_photographs(tmp_path_factory.mktemp("stages") / "photos", 256 * 7, classes=2, sides=(100, 200),
                             detail=4, seed=2)
