"""What one configuration leaves the next in a shared process (`--share-process`): the Williams
order of the members (`bench.running.plan.williams`, `shared`, `carry_over_note`), the memory released
between them (`bench.measuring.machine.release`), and the GPU readings each window records
(`bench.measuring.machine.GpuMonitor`)."""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import pipelines
from bench import cli, results
from bench.measuring import distributed, harness, machine
from bench.measuring.spec import COPIES, PAYLOADS, RunSpec
from bench.running import plan, runner
from pipelines.config import PipelineConfig


def follows(rows: list[list[int]]) -> Counter:
    """How often member b runs right after member a, over the rows: {(a, b): count}."""
    return Counter((a, b) for row in rows for a, b in zip(row, row[1:]))


def balanced(rows: list[list[int]], n: int, times: int) -> bool:
    """Every member right after every other exactly `times` times."""
    return follows(rows) == {(a, b): times for a in range(n) for b in range(n) if a != b}


@pytest.mark.parametrize("n", range(2, 9))
def test_each_member_runs_first_once_in_as_many_processes_as_members(n):
    rows = plan.williams(n)
    assert sorted(row[0] for row in rows[:n]) == list(range(n))
    assert all(sorted(row) == list(range(n)) for row in rows)   # every row runs every member once


@pytest.mark.parametrize("n", [2, 4, 6, 8])
def test_for_an_even_count_every_member_follows_every_other_exactly_once(n):
    assert len(plan.williams(n)) == n and balanced(plan.williams(n), n, 1)


@pytest.mark.parametrize("n", [3, 5, 7])
def test_for_an_odd_count_the_square_and_its_mirror_have_every_pair_twice(n):
    rows = plan.williams(n)
    assert len(rows) == 2 * n and balanced(rows, n, 2)
    assert not balanced(rows[:n], n, 1)   # the square alone cannot be


@pytest.mark.parametrize("n", [3, 5, 7])
def test_an_odd_cell_in_as_many_processes_as_members_is_no_cyclic_shift(n):
    """With n processes for an odd n members (the plans' case), the order is not the old rotation
    (member k always right after member k - 1: n ordered pairs) but runs most pairs, both ways."""
    cyclic = [[(m + r) % n for m in range(n)] for r in range(n)]   # round r started with member r
    assert len(follows(cyclic)) == n
    assert len(follows(plan.williams(n)[:n])) >= n * (n - 1) - (n + 1) // 2


# Plans whose cells share fewer processes than they have members, and why (their runs' READMEs say
# the carry-over is not balanced; the run prints `plan.carry_over_note`).
UNBALANCED = {"photos-best.json": "6 members at 16 cores in 3 processes of 2-4 min each: one session's GPU time",
              "hosts-4-photos.json": "4 members (dali with each decoder) at 1, 2 and 4 ranks in 3 processes: "
                                     "one lease's GPU time",
              "hosts-4-32px.json": "5 members at 1, 2 and 4 ranks in 3 processes: one lease's GPU time",
              "photos-gpu-decode.json": "4 members at 8 and 4 cores in 3 processes: one session's GPU time",
              "ladder.json": "8 members in each of 15 cells in 3 processes: seven parts of a lease each "
                             "(results/2026-12-03-h200-ladder/ESTIMATE.txt); 8 processes a cell, 2.7 times that"}


def test_every_committed_plan_that_shares_a_process_runs_as_many_processes_as_a_cell_has_members():
    """A cell sharing a process (model-only and each pipeline) gets at least as many processes as it
    has members: each runs first once, and the carry-over is balanced for an even count."""
    root = Path(__file__).resolve().parents[1] / "bench" / "plans"
    checked = 0
    for path in sorted(root.glob("*.json")):
        if path.name in UNBALANCED:
            continue
        top = json.loads(path.read_text())
        for grid in ({**top, **g} for g in top.get("grids", [top])):
            if grid.get("share_process"):
                members = (len(grid.get("pipelines", [])) + ("model" in grid["modes"])
                           + len(grid.get("payloads", PAYLOADS)) * len(grid.get("copies", COPIES)) * ("copy" in grid["modes"]))
                assert grid.get("processes", 3) >= members, (path.name, grid)
                checked += 1
    assert checked >= 3


def share_groups(processes: int, pipelines_run: list[str]) -> list[list[RunSpec]]:
    options = cli.build_parser().parse_args(
        ["sweep", "--device", "cpu", "--cpus", "1", "--processes", str(processes), "--share-process",
         "--modes", "model,e2e", "--models", "resnet9-w0.25", "--pipelines", ",".join(pipelines_run)])
    return plan.shared(cli.specs_for([options], torch.device("cpu")))


def test_the_note_names_a_cell_with_fewer_processes_than_its_design_has_rows():
    even = ["dataloader", "prefetch", "resident"]   # with model-only: 4 members, 4 rows
    assert "runs in 2 processes" in plan.carry_over_note(share_groups(2, even))
    assert "--processes 4 or more" in plan.carry_over_note(share_groups(2, even))
    assert plan.carry_over_note(share_groups(4, even)) == ""
    odd = ["dataloader", "resident"]   # 3 members: the square and its mirror, 6 rows
    assert "--processes 6 or more" in plan.carry_over_note(share_groups(3, odd))
    assert plan.carry_over_note(share_groups(6, odd)) == ""


@pytest.mark.parametrize("public", [True, False])
def test_release_frees_garbage_then_dali_s_pools_then_torch_s_device_and_pinned_caches(monkeypatch, public):
    calls = []
    monkeypatch.setattr(machine.gc, "collect", lambda: calls.append("garbage"))
    monkeypatch.setitem(sys.modules, "nvidia.dali.backend",
                        SimpleNamespace(ReleaseUnusedMemory=lambda: calls.append("dali")))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("cuda"))
    monkeypatch.setattr(torch._C, "_host_emptyCache", lambda: calls.append("pinned"), raising=False)
    if public:
        monkeypatch.setattr(torch.accelerator, "empty_host_cache", lambda: calls.append("pinned"), raising=False)
    else:   # a torch without the public name (before it existed): the private one
        monkeypatch.delattr(torch.accelerator, "empty_host_cache", raising=False)
    machine.release(torch.device("cuda"))
    assert calls == ["garbage", "dali", "cuda", "pinned"]
    calls.clear()
    machine.release(torch.device("cpu"))   # no CUDA caches to free without CUDA
    assert calls == ["garbage", "dali"]


def test_release_leaves_dali_alone_where_it_was_not_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "nvidia.dali.backend", raising=False)
    machine.release(torch.device("cpu"))
    assert "nvidia.dali.backend" not in sys.modules


def test_a_shared_process_releases_between_one_member_s_close_and_the_next_s_build(synthetic_root, monkeypatch):
    events = []
    build, close = pipelines.build, pipelines.Pipeline.close

    def building(name, config):
        events.append(f"build {name}")
        return build(name, config)

    def closing(self):
        events.append("close")
        close(self)

    monkeypatch.setattr(pipelines, "build", building)
    monkeypatch.setattr(pipelines.Pipeline, "close", closing)
    monkeypatch.setattr(machine, "release", lambda device: events.append("release"))
    config = PipelineConfig(data_root=str(synthetic_root), device="cpu", batch_size=16, max_samples=64, num_workers=1)
    shared = harness.Shared()
    for name in ("resident", "dataloader"):
        spec = RunSpec(name, "e2e", "resnet9-w0.25", config, requested_steps=2, warmup=0, repeats=1, share=True)
        assert [r["status"] for r in runner.run_in_process(spec, distributed.World(), shared=shared)] == ["ok"]
    assert events == ["build resident", "close", "release", "build dataloader", "close", "release"]


class FakeNvml:
    """pynvml as an H100 answers it, each reading replaceable by one that fails."""
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    class NVMLError(Exception):
        pass

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        return "handle"

    def nvmlDeviceGetClockInfo(self, handle, clock):
        return {1: 1755, 2: 2619}[clock]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        return 16

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 61

    def nvmlDeviceGetPowerUsage(self, handle):
        return 412_345   # mW

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return 0x4 | 0x20   # software power cap, software thermal slowdown

    def nvmlDeviceGetJpgUtilization(self, handle):
        return [37, 166_667]   # percent, sampling period (µs)


def failing(*args):
    raise FakeNvml.NVMLError("Not Supported")


def monitored_row(monkeypatch, nvml) -> dict:
    """The row of a window timed on this CPU with `nvml` answering as the GPU's NVML."""
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(machine.GpuMonitor, "_bus_id", staticmethod(lambda device: "00000000:19:00.0"))
    monitor = machine.GpuMonitor(torch.device("cuda"))
    config = PipelineConfig(batch_size=8, max_samples=64, device="cpu", source="synthetic")
    cpu = torch.device("cpu")
    window = harness.time_window(iter([(torch.zeros(8, 3, 4, 4), torch.zeros(8))] * 2), lambda x, y: None, 2, cpu,
                                 monitor=monitor)
    spec = RunSpec("none", "model", "resnet9-w0.25", config, requested_steps=2, repeats=1)
    return results.measured_row(spec, {}, 0, window)


def test_each_window_records_temperature_power_the_clock_event_reasons_and_the_jpeg_engine(monkeypatch, tmp_path):
    row = monitored_row(monkeypatch, FakeNvml())
    columns = ("sm_mhz", "mem_mhz", "pcie", "gpu_temp_c", "gpu_power_w", "clock_events", "gpu_jpg_util")
    assert {k: row[k] for k in columns} == {
        "sm_mhz": 1755, "mem_mhz": 2619, "pcie": "gen5 x16", "gpu_temp_c": 61, "gpu_power_w": 412.345,
        "clock_events": "sw-power-cap+sw-thermal", "gpu_jpg_util": 37}
    path = tmp_path / "results.csv"
    results.CsvWriter(path, results.environment(), run_id="r").write(row)
    written = results.read_rows(path).iloc[0]
    assert (written.gpu_power_w, written.clock_events, written.gpu_jpg_util) == (412.345, "sw-power-cap+sw-thermal", 37)


def test_a_reading_nvml_cannot_give_leaves_the_others(monkeypatch):
    nvml = FakeNvml()
    nvml.nvmlDeviceGetPowerUsage = failing
    nvml.nvmlDeviceGetCurrentClocksEventReasons = failing   # an older driver: the older name answers
    nvml.nvmlDeviceGetCurrentClocksThrottleReasons = lambda handle: 0
    nvml.nvmlDeviceGetJpgUtilization = failing   # a GPU without a JPEG engine
    row = monitored_row(monkeypatch, nvml)
    assert "gpu_power_w" not in row and "gpu_jpg_util" not in row
    assert (row["sm_mhz"], row["gpu_temp_c"], row["clock_events"]) == (1755, 61, "none")


def test_clock_event_bits_read_as_names_and_an_unnamed_bit_in_hex():
    assert machine.clock_event_names(0x1 | 0x40) == "idle+hw-thermal"
    assert machine.clock_event_names(0x10000) == "0x10000"
    assert machine.clock_event_names(0) == "none"
