# runs at commit 4720982f52a2
"""What inductor's pool of compile worker processes costs `prefetch` on a budget of two cores.

By default the first `torch.compile` in a process starts that pool (`maybe_warm_pool`: a sidecar
process that forks workers, each importing torch), and the pool starts on the cores the process
may use. `prefetch` compiles its crop + normalize kernel in its constructor, in its own process
(`compile_threads=1`, so no pool); the variant `worker-pool` starts the pool right after the
constructor, as a default compile did before. Each process measures loader-only windows as the
harness does (`bench.harness.time_window`, its consumer that touches each batch), the variants alternating
process by process.

    python results/2026-11-24-h100-compile-workers/compile_workers.py --data-root DIR --out DIR
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

VARIANTS = ("compiled-here", "worker-pool")


def measure(variant: str, data_root: str, cpus: int, steps: int, repeats: int) -> list[dict]:
    """One process: `prefetch` loader-only windows on `cpus` cores."""
    import pipelines
    from bench import harness, machine
    from pipelines.config import PipelineConfig
    with machine.cpu_budget(cpus):
        config = PipelineConfig(data_root=data_root, batch_size=512, dtype="bfloat16")
        with pipelines.build("prefetch", config) as pipeline:
            if variant == "worker-pool":   # what the inductor backend does at a process's first compile
                from torch._inductor.async_compile import maybe_warm_pool
                maybe_warm_pool()
            device = pipeline.device
            batches, step = harness.endless(pipeline), harness.Touch(device)
            for _ in range(300):
                step(*next(batches))
            rows = []
            for repeat in range(repeats):
                window = harness.time_window(batches, step, steps, device)
                rows.append({"variant": variant, "repeat": repeat, "img_per_s": window.images / window.seconds,
                             "cpu_s_per_1k_images": window.cpu_s / window.images * 1e3,
                             "child_processes": len(machine.descendants(os.getpid()))})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--out", required=True, help="folder for results.csv")
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--processes", type=int, default=3, help="processes per variant (default: 3)")
    parser.add_argument("--steps", type=int, default=2000, help="batches per window (default: 2000)")
    parser.add_argument("--repeats", type=int, default=3, help="windows per process (default: 3)")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.data_root, args.cpus, args.steps, args.repeats)))
        return
    import pandas as pd
    rows = []
    for process in range(args.processes):
        for variant in VARIANTS:
            done = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--child", variant],
                                  stdout=subprocess.PIPE, text=True, check=True)
            got = [dict(row, process=process) for row in json.loads(done.stdout.strip().splitlines()[-1])]
            rows += got
            print(variant, process, [f"{row['img_per_s']:,.0f}" for row in got], flush=True)
    table = pd.DataFrame(rows)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    table.to_csv(Path(args.out) / "results.csv", index=False)
    summary = table.groupby("variant").agg(
        img_per_s=("img_per_s", "median"), low=("img_per_s", "min"), high=("img_per_s", "max"),
        windows=("img_per_s", "size"), cpu_s_per_1k_images=("cpu_s_per_1k_images", "median"),
        child_processes=("child_processes", "max"))
    print(summary.reset_index().round(4).to_string(index=False))


if __name__ == "__main__":
    main()
