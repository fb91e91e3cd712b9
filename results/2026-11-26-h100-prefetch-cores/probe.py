# runs at commit 4720982f52a2
"""Probe: why 224-px `prefetch` can deliver less with 16 cores than with 4 (issue 31).

Runs the harness's own loader-only measurement (`bench.harness.run`) of 224-px `prefetch`, one
process per configuration, configurations interleaved round after round (A B C ... A B C ...), and
prints one line per window: img/s and the CPU seconds of each of the process's threads over the
window (the busiest first, with the core each last ran on; a process's first window also holds
its setup, left out of the summary's CPU cost). Variants, each a change inside this probe only:

  base      the pipeline and harness as committed
  bare      no busy step is built (busy level 0 only), so no busy-step memory or graphs exist
  numpy     the gather split over `--gather-threads` Python threads, each `np.take` of a share of the
            rows (numpy releases the GIL; no OpenMP at all)
  chunks    the gather split over `--gather-threads` Python threads, each `torch.index_select` of a
            share of the rows with one intra-op thread (no OpenMP team: one wake-up per thread
            per gather)
  spin      CUDA's default waits (spin) instead of the harness's blocking waits
  default   OpenMP's own default wait (spin a while, then sleep): torch loaded before bench sets
            OMP_WAIT_POLICY, so the setting comes too late
  active    OpenMP's threads spin between parallel regions (OMP_WAIT_POLICY=ACTIVE) instead of
            sleeping (bench sets PASSIVE unless the variable is set)
  pin       the producer thread, and so the OpenMP team its gather starts, pinned to the budget's
            last GATHER_THREADS cores
  pinfirst  the same, pinned to the budget's first GATHER_THREADS cores (those a 4-core budget has)
  pinspin   pinfirst with OpenMP's default wait (as `default`)
  gN        the committed gather with N intra-op threads instead of GATHER_THREADS

    PYTHONPATH=. python results/2026-11-26-h100-prefetch-cores/probe.py --cells 16:base,4:base --processes 5

    python results/2026-11-26-h100-prefetch-cores/probe.py --summarize probe-4.txt

At the end (or from a saved output): per configuration the median [min-max] img/s of every window at each busy level and n.
The machine's CPU topology is printed first.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np


def threads() -> dict[str, tuple[float, int]]:
    """name:tid -> (CPU seconds, core it last ran on) for every thread of this process."""
    tick = os.sysconf("SC_CLK_TCK")
    names = {t.native_id: t.name for t in threading.enumerate()}   # the rest: OpenMP's, CUDA's
    found = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[f"{names.get(int(task.name), name)}:{task.name}"] = ((int(fields[11]) + int(fields[12])) / tick, int(fields[36]))
    return found


def numpy_gather(count: int):
    """A replacement for PrefetchPipeline._gather: the rows split over `count` Python threads."""
    pool = ThreadPoolExecutor(count, thread_name_prefix="gather")

    def gather(self, slot, index, start, draws):
        if slot.copied is not None:
            slot.copied.synchronize()
        n = len(index)
        out = slot.images[:n].numpy()
        source = self.data.images
        cuts = np.linspace(0, n, count + 1).astype(int)
        jobs = [pool.submit(np.take, source, index[a:b], 0, out[a:b]) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
        for job in jobs:
            job.result()
        return n
    return gather


def chunks_gather(count: int):
    """A replacement for PrefetchPipeline._gather: `torch.index_select` of a share of the rows on
    each of `count` Python threads, each with one intra-op thread."""
    import torch
    pool = ThreadPoolExecutor(count, thread_name_prefix="gather", initializer=torch.set_num_threads, initargs=(1,))

    def gather(self, slot, index, start, draws):
        if slot.copied is not None:
            slot.copied.synchronize()
        n = len(index)
        rows = torch.from_numpy(index)
        cuts = np.linspace(0, n, count + 1).astype(int)
        jobs = [pool.submit(torch.index_select, self.source, 0, rows[a:b], out=slot.images[a:b])
                for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
        for job in jobs:
            job.result()
        return n
    return gather


def one(cpus: int, variant: str, seconds: float, samples: int, gather_threads: int, device: str,
        busy: tuple[float, ...]) -> None:
    if variant == "active":
        os.environ["OMP_WAIT_POLICY"] = "ACTIVE"
    if variant in ("default", "pinspin"):
        import torch   # noqa: F401  OpenMP reads OMP_WAIT_POLICY when torch loads it, before bench sets it
    from bench import harness, machine   # first: bench sets OMP_WAIT_POLICY before torch loads OpenMP
    from pipelines import prefetch
    from pipelines.config import PipelineConfig
    if variant == "numpy":
        prefetch.PrefetchPipeline._gather = numpy_gather(gather_threads)
    if variant == "chunks":
        prefetch.PrefetchPipeline._gather = chunks_gather(gather_threads)
    if variant.startswith("g") and variant[1:].isdigit():
        prefetch.GATHER_THREADS = int(variant[1:])
    if variant in ("pin", "pinfirst", "pinspin"):
        bound, count = prefetch.bound_gather_threads, prefetch.GATHER_THREADS

        def pinned(pool):
            bound(pool)
            cores = sorted(os.sched_getaffinity(0))
            pool.submit(os.sched_setaffinity, 0, cores[-count:] if variant == "pin" else cores[:count]).result()
        prefetch.bound_gather_threads = pinned
    if variant == "spin":
        machine.blocking_waits = lambda device: False
    config = PipelineConfig(image_size=224, batch_size=256, max_samples=samples, device=device, dtype="bfloat16")
    spec = harness.RunSpec("prefetch", "loader", "none", config, warmup=3, repeats=2, min_seconds=seconds,
                           busy_ms=(0.0,) if variant == "bare" else busy, cpus=cpus)
    before = threads()
    for count, (facts, window) in enumerate(harness.run(spec)):
        after = threads()
        used = sorted(((after[k][0] - before.get(k, (0, 0))[0], k, after[k][1]) for k in after), reverse=True)
        before = after
        busiest = ";".join(f"{k}@{core}={cpu:.2f}" for cpu, k, core in used[:6] if cpu > 0)
        print("window " + json.dumps({"cpus": cpus, "variant": variant, "busy_ms": window.busy_ms,
                                      "img_per_s": round(window.images / window.seconds),
                                      "seconds": round(window.seconds, 3), "cpu_s": round(sum(u[0] for u in used), 2),
                                      "blocking_waits": facts["blocking_waits"],
                                      "omp_wait_policy": "default" if variant in ("default", "pinspin") else os.environ.get("OMP_WAIT_POLICY"), "first": count == 0, "threads": busiest}),
              flush=True)


def topology() -> None:
    for command in (["lscpu"], ["nproc"]):
        subprocess.run(command, check=False)
    for cpu in sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*"), key=lambda p: int(p.name[3:])):
        siblings = cpu / "topology" / "thread_siblings_list"
        if siblings.exists():
            print(f"{cpu.name} siblings={siblings.read_text().strip()}")
    print("numa nodes:", " ".join(p.name for p in Path("/sys/devices/system/node").glob("node[0-9]*")), flush=True)
    for line in Path("/proc/interrupts").read_text().splitlines():   # where the GPU's interrupts land
        if "nvidia" in line:
            irq = line.split(":")[0].strip()
            spread = Path(f"/proc/irq/{irq}/effective_affinity_list")
            print(f"irq {irq} effective cores {spread.read_text().strip() if spread.exists() else '?'}: {line.strip()[:200]}")


def summary(lines: list[str]) -> None:
    rows = [json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith("window ")]
    print("\nsummary: img/s per window, median [min-max] n (all windows of all processes)")
    for key in sorted({(r["variant"], r["cpus"], r["busy_ms"]) for r in rows}, key=lambda k: (k[0], -k[1], k[2])):
        got = [r["img_per_s"] for r in rows if (r["variant"], r["cpus"], r["busy_ms"]) == key]
        cpu = [r["cpu_s"] / r["img_per_s"] / r["seconds"] * 1000 for r in rows
               if (r["variant"], r["cpus"], r["busy_ms"]) == key and not r["first"]]
        print(f"  {key[0]:6s} cpus={key[1]:2d} busy_ms={key[2]:4g}: {statistics.median(got):,.0f} "
              f"[{min(got):,}-{max(got):,}] n={len(got)}  cpu_s_per_kimg median {statistics.median(cpu):.3f}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--cells", default="16:base,4:base", help="cpus:variant,... (one process each per round)")
    p.add_argument("--processes", type=int, default=5)
    p.add_argument("--seconds", type=float, default=1.0, help="minimum window length")
    p.add_argument("--samples", type=int, default=10_000)
    p.add_argument("--gather-threads", type=int, default=4)
    p.add_argument("--device", default="cuda")
    p.add_argument("--busy", default="0,8,32", help="busy levels, ms")
    p.add_argument("--summarize", type=Path, help="print the summary of a saved output and stop")
    p.add_argument("--one", help="internal: cpus:variant of this process")
    a = p.parse_args()
    if a.summarize:
        summary(a.summarize.read_text().splitlines())
        return
    if a.one:
        cpus, variant = a.one.split(":")
        one(int(cpus), variant, a.seconds, a.samples, a.gather_threads, a.device,
            tuple(float(b) for b in a.busy.split(",")))
        return
    topology()
    lines = []
    for _ in range(a.processes):
        for cell in a.cells.split(","):
            run = subprocess.run([sys.executable, __file__, "--one", cell, "--seconds", str(a.seconds),
                                  "--samples", str(a.samples), "--gather-threads", str(a.gather_threads),
                                  "--device", a.device, "--busy", a.busy],
                                 capture_output=True, text=True, check=False)
            print(run.stdout, end="", flush=True)
            if run.returncode:
                print(f"{cell}: exit {run.returncode}: {run.stderr[-2000:]}", flush=True)
            lines += run.stdout.splitlines()
    summary(lines)


if __name__ == "__main__":
    main()
