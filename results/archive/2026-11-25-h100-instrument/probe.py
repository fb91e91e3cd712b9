# runs at commit 4720982f52a2
"""Probe of the instrument's pieces on one GPU (run from the repository root, PYTHONPATH=.):

  busy     the busy step (bench.busy): calibrated unit time, each level's measured time against its
           label, alone and with a second Python thread holding the GIL; the earlier design
           (torch.cuda._sleep timed by events around its launch) beside it, alone and under the GIL.
  waits    CPU time of a thread waiting in torch.cuda.synchronize(), CUDA's default wait against
           bench.machine.blocking_waits.
  gather   224-px `prefetch`, loader-only on an idle GPU: img/s by CPU cores x torch intra-op
           threads, several processes each (one process per row: affinity set before anything),
           and the per-thread CPU time of one of them; `torch.index_select` into pinned memory alone.

    python results/2026-11-25-h100-instrument/probe.py busy
    python results/2026-11-25-h100-instrument/probe.py waits [--blocking]
    python results/2026-11-25-h100-instrument/probe.py gather --grid 16:16,16:4,8:8,4:4 --processes 2

Prints one line per measurement (key=value); used to explain the 224-px anomaly and to check the busy
step before the measured run.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch


def hog(stop: threading.Event) -> None:
    """Hold the GIL as a pure-Python loop does."""
    x = 0
    while not stop.is_set():
        for i in range(10_000):
            x += i


def sleep_rate(device) -> float:
    """The earlier design's calibration: cycles per ms of torch.cuda._sleep, events around the launch."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rates = []
    for _ in range(3):
        start.record()
        torch.cuda._sleep(10_000_000)
        end.record()
        end.synchronize()
        rates.append(10_000_000 / start.elapsed_time(end))
    return float(np.median(rates))


def busy() -> None:
    from bench import busy as b
    device = torch.device("cuda")
    torch.cuda._sleep(20_000_000)
    print(f"busy sleep_cycles_per_ms_alone={sleep_rate(device):,.0f}")
    stop = threading.Event()
    t = threading.Thread(target=hog, args=(stop,), daemon=True)
    t.start()
    print(f"busy sleep_cycles_per_ms_gil={sleep_rate(device):,.0f}")
    w = b.work(device)
    print(f"busy unit_ms_under_gil={w.unit_ms:.5f}")
    for ms in (1.0, 4.0, 16.0):
        step = b.BusyStep(device, ms)
        got = []
        for _ in range(20):
            step()
            got.append(step.measured_ms())
        print(f"busy level_ms={ms:g} units={step.units} measured_ms_under_gil_median={np.median(got):.4f} "
              f"min={min(got):.4f} max={max(got):.4f}")
    stop.set()
    t.join()
    b._WORK.clear()
    w = b.work(device)
    print(f"busy unit_ms_alone={w.unit_ms:.5f}")
    for ms in (1.0, 4.0, 16.0):
        step = b.BusyStep(device, ms)
        got = []
        for _ in range(20):
            step()
            got.append(step.measured_ms())
        # back to back on a full queue: wall time per step against the measured time
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(50):
            step()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / 50 * 1e3
        print(f"busy level_ms={ms:g} units={step.units} measured_ms_median={np.median(got):.4f} "
              f"min={min(got):.4f} max={max(got):.4f} back_to_back_wall_ms={wall:.4f}")


def waits(blocking: bool) -> None:
    """CPU seconds a thread burns in torch.cuda.synchronize() while 0.5 s of GPU work runs, with
    CUDA's default wait and with bench.machine.blocking_waits set before the context exists."""
    from bench import machine
    device = torch.device("cuda")
    took = machine.blocking_waits(device) if blocking else False
    torch.cuda._sleep(1_000_000)
    torch.cuda.synchronize()
    tid = threading.get_native_id()
    cpu = machine.thread_cpu_seconds(tid)
    t0 = time.perf_counter()
    torch.cuda._sleep(1_000_000_000)   # about 0.5 s
    torch.cuda.synchronize()
    print(f"waits blocking={blocking} driver_took_flag={took} wall_s={time.perf_counter() - t0:.3f} "
          f"thread_cpu_s={machine.thread_cpu_seconds(tid) - cpu:.3f}", flush=True)


def thread_cpu() -> dict[str, float]:
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[f"{name}:{task.name}"] = (int(fields[11]) + int(fields[12])) / tick
    return found


def one_gather(cores: int, threads: int, samples: int, seconds: float) -> None:
    """One process: `prefetch` at 224 px on `cores` cores with `threads` intra-op threads."""
    os.sched_setaffinity(0, list(sorted(os.sched_getaffinity(0)))[:cores])
    torch.set_num_threads(threads)
    import pipelines
    from pipelines.config import PipelineConfig
    config = PipelineConfig(image_size=224, batch_size=256, max_samples=samples, device="cuda", dtype="bfloat16",
                            channels_last=True, num_workers=max(1, cores - 1))
    with pipelines.build("prefetch", config) as p:
        acc = torch.zeros(1, device="cuda")
        def batches():
            e = 0
            while True:
                p.set_epoch(e)
                for x, y in p:
                    yield x, y
                e += 1
        it = batches()
        for _ in range(20):
            x, y = next(it)
            torch.add(x[-1, -1, -1, -1:], y[-1:], out=acc)
        rates = []
        before = thread_cpu()
        for _ in range(3):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            n = 0
            while time.perf_counter() - t0 < seconds:
                x, y = next(it)
                torch.add(x[-1, -1, -1, -1:], y[-1:], out=acc)
                n += len(y)
            torch.cuda.synchronize()
            rates.append(n / (time.perf_counter() - t0))
        after = thread_cpu()
        busiest = sorted(((after[k] - before.get(k, 0), k) for k in after), reverse=True)[:4]
        print(f"gather cores={cores} threads={threads} img_per_s=" + ",".join(f"{r:.0f}" for r in rates)
              + " busiest_threads=" + ";".join(f"{k}={v:.2f}s" for v, k in busiest), flush=True)
    src = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (samples, 224, 224, 3), dtype=np.uint8))
    out = torch.empty((256, 224, 224, 3), dtype=torch.uint8).pin_memory()
    idx = torch.from_numpy(np.random.default_rng(1).permutation(samples)[:256])
    for _ in range(3):
        torch.index_select(src, 0, idx, out=out)
    t0 = time.perf_counter()
    for _ in range(20):
        torch.index_select(src, 0, idx, out=out)
    print(f"gather cores={cores} threads={threads} index_select_alone_img_per_s={20 * 256 / (time.perf_counter() - t0):.0f}",
          flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["busy", "gather", "one", "waits"])
    p.add_argument("--blocking", action="store_true")
    p.add_argument("--grid", default="16:16,16:4,8:8,8:4,4:4")
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--samples", type=int, default=10_000)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--cores", type=int)
    p.add_argument("--threads", type=int)
    a = p.parse_args()
    if a.what == "busy":
        busy()
    elif a.what == "waits":
        waits(a.blocking)
    elif a.what == "one":
        one_gather(a.cores, a.threads, a.samples, a.seconds)
    else:
        grid = [tuple(int(v) for v in item.split(":")) for item in a.grid.split(",")]
        for rep in range(a.processes):   # rounds: A B C A B C
            for cores, threads in grid:
                subprocess.run([sys.executable, __file__, "one", "--cores", str(cores), "--threads", str(threads),
                                "--samples", str(a.samples), "--seconds", str(a.seconds)], check=False)


if __name__ == "__main__":
    main()
