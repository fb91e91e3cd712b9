"""The busy step as a stand-in for a training step: `python -m bench.studies.standin --out DIR [--quick]`.

Loader mode's busy step (`bench.measuring.busy.BusyStep`) stands in for a model's training step beside a
pipeline. This measures, once per GPU, how far its contention with GPU-side pipeline work is from
a real step's. Real steps (REAL): torchvision ResNet-50 at 224 px, batch 256, and `resnet18` at 32
px, batch 512 (`bench.measuring.models`), bf16 autocast, channels_last, SGD, captured whole by the project's
`Trainer(step="graph")`, fed a bf16 channels_last batch already on the GPU; beside each, a busy
step sized to the time that real step took alone. For each step and side workload it times the
step alone, the side workload alone, then both at once. Side workloads (SIDES), on a side stream as
a GPU-side pipeline runs its work:
  copies   back-to-back device copies of COPY_BYTES (memory-bound);
  resizes  per-image resizes: crops of varied sizes (CROPS) of a float image, each resized to
           RESIZE px by its own `F.interpolate` (bilinear, antialiased): small kernels, one image
           at a time.
Each lane (the step, the side work) keeps DEPTH events' worth of work queued on its stream, a CUDA
event after each step or CHUNK side units; the host only polls, so neither lane waits for the
other. A lane's time per unit is the span between its end events, over the units that ended after
both lanes had run SKIP events' worth and before either stopped. Per (model, step kind, side,
repeat) a row: the step alone and beside the side work (ms; `stretch` = beside / alone) and the
side work's rate alone and beside the step (units/s; `retention` = beside / alone). REPORT.md:
medians with min-max over repeats, and a conclusion computed from the rows: the busy step's stretch
and the side work it leaves, against the real step's. Without CUDA: one line, exit 2.
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path
from typing import Callable

import pandas as pd
import torch
import torch.nn.functional as F

from .. import results
from ..measuring.busy import BusyStep
from ..measuring.machine import release
from ..measuring.training import Trainer
from ..report.formatting import machine_text

REAL = (("torchvision:resnet50", 224, 256), ("resnet18", 32, 512))   # model, image size, batch
SIDES = ("copies", "resizes")
UNITS = {"copies": "copies of 256 MiB", "resizes": "images"}   # what a side unit is, as the table says
COPY_BYTES = 256 * 2**20
RESIZE = 224
CROPS = ((96, 128), (160, 200), (224, 224), (320, 256), (448, 400), (512, 384))   # crop height, width (px)
CHUNK = {"copies": 8, "resizes": 32}   # side units between two events
DEPTH = 2      # events' worth of work queued per lane
SKIP = 2       # events left out at a lane's start (its queue filling)
SECONDS, REPEATS = 1.0, 3          # per timing, and how many times each is repeated
QUICK_SECONDS, QUICK_REPEATS = 0.3, 2


class Lane:
    """One stream's work (module docstring): `unit()` called `per` times between two events."""

    def __init__(self, unit: Callable[[], None], stream: torch.cuda.Stream, per: int = 1):
        self.unit, self.stream, self.per = unit, stream, per
        self.ends: list[torch.cuda.Event] = []
        self.pending: list[torch.cuda.Event] = []

    def pump(self) -> None:
        while self.pending and self.pending[0].query():
            self.pending.pop(0)
        while len(self.pending) < DEPTH:
            with torch.cuda.stream(self.stream):
                for _ in range(self.per):
                    self.unit()
                end = torch.cuda.Event(enable_timing=True)
                end.record()
            self.pending.append(end)
            self.ends.append(end)

    def ms_per_unit(self, start: torch.cuda.Event, stop: torch.cuda.Event) -> float:
        inside = [e for e in self.ends if start.elapsed_time(e) >= 0 and e.elapsed_time(stop) >= 0]
        if len(inside) < 2:
            raise RuntimeError(f"{len(inside)} event(s) of a lane inside the timing: lengthen it (SECONDS)")
        return inside[0].elapsed_time(inside[-1]) / ((len(inside) - 1) * self.per)


def timed(lanes: list[Lane], seconds: float) -> list[float]:
    """Run the lanes together for `seconds`; each one's ms per unit over their common span."""
    for lane in lanes:
        lane.ends.clear()
        lane.pending.clear()   # the last timing ended synchronized: nothing of it is queued
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or any(len(lane.ends) - len(lane.pending) < SKIP + 2 for lane in lanes):
        for lane in lanes:
            lane.pump()
        time.sleep(20e-6)
    torch.cuda.synchronize()
    start = max((lane.ends[SKIP] for lane in lanes), key=lambda e: lanes[0].ends[0].elapsed_time(e))
    stop = min((lane.ends[-1] for lane in lanes), key=lambda e: lanes[0].ends[0].elapsed_time(e))
    return [lane.ms_per_unit(start, stop) for lane in lanes]


def side_work(side: str, device: torch.device) -> Callable[[], None]:
    """One unit of a side workload (module docstring)."""
    if side == "copies":
        src = torch.randint(0, 255, (COPY_BYTES,), device=device, dtype=torch.uint8)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)
    image = torch.rand(3, 512, 512, device=device)
    crops = itertools.cycle([image[None, :, :h, :w].contiguous() for h, w in CROPS])
    return lambda: F.interpolate(next(crops), size=(RESIZE, RESIZE), mode="bilinear", antialias=True,
                                 align_corners=False)


def real_step(model: str, size: int, batch: int, device: torch.device) -> Callable[[], None]:
    trainer = Trainer(model, device, "bfloat16", channels_last=True, step="graph")
    images = torch.randn(batch, 3, size, size, device=device).to(torch.bfloat16, memory_format=torch.channels_last)
    labels = torch.randint(0, 10, (batch,), device=device)
    trainer(images, labels)   # the capture, outside every timing
    return lambda: trainer(images, labels)


def measure(seconds: float, repeats: int) -> list[dict]:
    device = torch.device("cuda")
    main, aside = torch.cuda.current_stream(device), torch.cuda.Stream(device)
    sides = {side: Lane(side_work(side, device), aside, CHUNK[side]) for side in SIDES}
    rows = []
    for model, size, batch in REAL:
        real = Lane(real_step(model, size, batch, device), main)
        timed([real], seconds)   # the clocks settle where sustained work holds them
        busy = BusyStep(device, timed([real], seconds)[0])
        steps = {"real": real, "busy": Lane(busy, main)}
        for repeat in range(repeats):
            for side, lane in sides.items():
                for kind, step in steps.items():
                    (alone,), (side_alone,) = timed([step], seconds), timed([lane], seconds)
                    beside, side_beside = timed([step, lane], seconds)
                    rows.append({"model": model, "image_size": size, "batch_size": batch, "step": kind,
                                 "busy_units": busy.units if kind == "busy" else float("nan"),
                                 "side": side, "side_unit": UNITS[side], "repeat": repeat, "seconds": seconds,
                                 "step_alone_ms": alone, "step_beside_ms": beside, "stretch": beside / alone,
                                 "side_alone_per_s": 1e3 / side_alone, "side_beside_per_s": 1e3 / side_beside,
                                 "retention": side_alone / side_beside})
        del real, steps, busy
        release(device)
    return rows


def spread(values: pd.Series, form: str) -> str:
    return f"{values.median():{form}} [{values.min():{form}}–{values.max():{form}}]"


def table(df: pd.DataFrame) -> pd.DataFrame:
    """Per model, side workload and step kind: medians [min–max] over the repeats, and n."""
    keys = ["model", "image_size", "batch_size", "side", "step"]
    rows = [{"model": f"`{model}` {size} px, batch {batch}", "side work": f"{side} ({g.side_unit.iloc[0]})",
             "step": kind, "step alone ms": spread(g.step_alone_ms, ".3g"),
             "step beside ms": spread(g.step_beside_ms, ".3g"), "stretch": spread(g.stretch, ".2f"),
             "side alone /s": spread(g.side_alone_per_s, ",.0f"), "side beside /s": spread(g.side_beside_per_s, ",.0f"),
             "side kept": spread(100 * g.retention, ".0f") + " %", "n": len(g)}
            for (model, size, batch, side, kind), g in df.groupby(keys, sort=False)]
    return pd.DataFrame(rows)


def conclusion(df: pd.DataFrame) -> str:
    """One line from the rows: the busy step's median stretch over the real step's, and the side
    work it leaves less the real step's (points of its rate alone), ranged over models and sides."""
    med = df.groupby(["model", "side", "step"])[["stretch", "retention"]].median().unstack("step")
    ratio = med["stretch"]["busy"] / med["stretch"]["real"]
    points = 100 * (med["retention"]["busy"] - med["retention"]["real"])
    return (f"Over {len(med)} pairs of a real step and a side workload, the busy step's stretch is "
            f"{ratio.min():.2f}–{ratio.max():.2f} × the real step's, and beside it the side work keeps "
            f"{points.min():+.0f} to {points.max():+.0f} points of its rate alone more than beside the real step.")


def report(df: pd.DataFrame) -> str:
    first = df.iloc[0]
    return "\n".join([
        "# The busy step beside side work, against real captured training steps", "",
        f"Generated by `python -m bench.studies.standin` (module docstring: what is measured and how). "
        f"{machine_text(first)}; "
        f"each timing {first.seconds:g} s. Stretch: the step beside the side work over the step alone; side kept: "
        "the side work's rate beside the step over its rate alone. Medians [min–max] over n repeats.", "",
        table(df).to_markdown(index=False), "", conclusion(df), ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.standin", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for results.csv and REPORT.md")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SECONDS:g} s per timing, {QUICK_REPEATS} "
                        f"repeats (default {SECONDS:g} s, {REPEATS})")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench.studies.standin: needs a CUDA device (it times real and busy steps on a GPU); none here", file=sys.stderr)
        return 2
    seconds, repeats = (QUICK_SECONDS, QUICK_REPEATS) if args.quick else (SECONDS, REPEATS)
    environment = results.environment()
    df = pd.DataFrame([{**row, **environment} for row in measure(seconds, repeats)])
    args.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out / "results.csv", index=False)
    (args.out / "REPORT.md").write_text(report(df))
    print(conclusion(df))
    return 0


if __name__ == "__main__":
    sys.exit(main())
