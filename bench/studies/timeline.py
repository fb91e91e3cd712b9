"""Where the GPU's time goes when pipelines feed the training step: `python -m bench.studies.timeline --out DIR
--pipelines VARIANT [VARIANT ...] [sweep options]`.

A variant is a pipeline's name, or `name:knob=value,knob=value` with knobs it reads (`EXAMPLE`:
`dali:dali_decoder=cpu`). The other options are the sweep's (`pipebench sweep --help`,
`bench.running.options`), one value each: model, step kind (default compile), image size, batch,
dtype, source, CPU budget, `--warmup`, and `--steps` (steps recorded, default STEPS). The
configurations are made as a sweep makes them (`bench.running.plan.grid`) and run as the harness runs
model-only and e2e (`bench.measuring.harness`): in this one process, under the CPU budget, one
trainer shared by all (built and compiled once: `harness.Shared`),
model-only first (real batches already on the device), then per variant its pipeline built, the
first training call, the warm-up steps and the drain (`bench.measuring.drain`), the pipeline closed and its
memory released before the next.

Each configuration then runs PROFILER_WARMUP + steps + 1 steps under `torch.profiler` (CPU and CUDA
activities, the profiler first started before the step is captured so the graph's kernels are traced;
the first PROFILER_WARMUP steps unmarked, the profiler starting), each recorded step's
training call inside a `record_function`. From the exported Chrome trace every piece of GPU work
(kernel, memset, copy) is given to the recorded step whose call launched it (its CUDA runtime or
driver call's correlation, on the step's thread, inside the step's range) or to none (the
pipeline's work: DALI's streams, side streams, copies started in `next()`). The training stream
is the CUDA stream that carries most of the steps' own GPU time: the harness's step runs on the
training thread's current stream (the default stream), and a captured (graph, compile) step
replays there. Per recorded step, its period running from its first work on the training stream to
the next step's (so each configuration gives `steps` rows):
  step_kernel_ms     the union of the step's own work on the training stream (its kernels, memsets and
                     the batch's copy into a captured step's input): its GPU busy time;
  step_span_ms       from the first start to the last end of that work;
  period_ms          the step's period;
  idle_ms, idle_share  the period less the union of all work on the training stream in it (the
                     stream waiting for the host or for the input), and that over the period;
  other_in_step_ms   kernels and memsets on the other streams inside the step's span, summed over
                     streams: the pipeline's work that contends with the step for the SMs;
  other_ms           the same over the whole period: the pipeline's kernel time per step;
  other_copy_ms      copies on the other streams in the period;
  stretch            step_kernel_ms over the median of model-only's (SM contention makes it > 1);
  gpu_jpg_util       the hardware JPEG decoder's utilization at the recording's end
                     (`machine.GpuMonitor`; empty where NVML cannot give it).
Each recorded step's batch fetch (`next()`) is marked too; `bench.studies.host_waits` reads from the trace
every thread's CUDA calls, the training thread's wait for its batch and the pipeline's GPU queueing.
Written into DIR: timeline.csv (a row per configuration and recorded step), host-calls.csv and
host-syncs.csv (per configuration, thread and kind of CUDA call; synchronizing call's name), TIMELINE.md (medians [min-max] over the steps, what
each timer includes, a sentence per configuration; then the host's and the queues' tables), timeline.png
(`bench.studies.timeline_plot`: a few consecutive steps per configuration, model-only on top: a lane per
CUDA stream, the training stream first); with --traces also each configuration's trace as
trace-<variant>.json.gz where it compresses under TRACE_MAX_BYTES (off by default: three files
come back from a machine that returns few). Without CUDA, or given a bad variant or option: one line, exit 2.
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

import pipelines
from pipelines.dali_options import DECODER

from .. import results
from ..measuring import machine
from ..measuring.drain import drain, sync
from ..measuring.harness import Shared
from ..measuring.spec import RunSpec
from ..measuring.training import reading
from ..measuring.workloads import endless, real_batches
from ..report.formatting import machine_text
from ..running import plan
from ..running.options import run_options
from . import host_waits
from .timeline_plot import draw

STEPS = 20                # recorded steps per configuration (--steps)
PROFILER_WARMUP = 3       # steps under the profiler before the recorded ones (its start-up)
MARK = "timeline step "   # the record_function name of recorded step i: MARK + str(i)
TRACE_MAX_BYTES = 2 * 2**20   # a configuration's gzipped Chrome trace is kept only below this
MODEL_ONLY = "model-only"
GPU_WORK = {"kernel": False, "gpu_memset": False, "gpu_memcpy": True}   # trace category -> is a copy
LAUNCHES = ("cuda_runtime", "cuda_driver")   # trace categories of the host's CUDA calls
# a variant with a knob, for the help: DALI's other decoder, from the knob's declaration
EXAMPLE = f"dali:{DECODER.name}={next(c for c in DECODER.choices if c != DECODER.default)}"


@dataclass(frozen=True)
class Work:
    """One piece of GPU work of a trace: its stream, start and duration (µs), the recorded step
    whose training call launched it (None: not a step's), and whether it is a copy."""
    stream: int
    start: float
    dur: float
    step: int | None = None
    copy: bool = False

    @property
    def end(self) -> float:
        return self.start + self.dur


def parse_variant(text: str) -> tuple[str, dict[str, object]]:
    """`name` or `name:knob=value,...` -> (name, {knob: value}); a one-line ValueError naming the
    text for an unknown pipeline, a knob it does not read or a bad value."""
    name, _, knobs = text.partition(":")
    if name not in pipelines.names():
        raise ValueError(f"{text!r}: unknown pipeline {name!r}: expected one of {', '.join(pipelines.names())}")
    values: dict[str, object] = {}
    for item in filter(None, knobs.split(",")):
        knob, equals, value = item.partition("=")
        if not equals or knob not in pipelines.reads(name):
            raise ValueError(f"{text!r}: {item!r} is not knob=value with a knob {name} reads "
                             f"({', '.join(pipelines.reads(name)) or 'none'})")
        option = pipelines.declared_options()[knob]
        if option.kind is bool:
            if value not in ("true", "false"):
                raise ValueError(f"{text!r}: {knob}={value!r}: expected true or false")
            values[knob] = value == "true"
        else:
            try:
                values[knob] = option.parse(value)
            except ValueError as e:
                raise ValueError(f"{text!r}: {knob}={e}") from None
    return name, values


def knob_tokens(knobs: dict[str, object]) -> list[str]:
    """A variant's knobs as the sweep's flags (the worker count is its --workers)."""
    tokens = []
    for knob, value in knobs.items():
        flag = "--workers" if knob == "num_workers" else pipelines.declared_options()[knob].flag
        tokens += [flag] if value is True else [] if value is False else [flag, str(value)]
    return tokens


def sweep_options() -> argparse.ArgumentParser:
    """The sweep's options (`bench.running.options`), a bad one an ArgumentError (one line), none
    abbreviated."""
    parser = argparse.ArgumentParser(prog="python -m bench.studies.timeline", allow_abbrev=False, add_help=False,
                                     exit_on_error=False)
    return run_options(parser, "the sweep's options, one value each")


def configurations(variants: list[str], options: list[str],
                   device: torch.device) -> tuple[RunSpec, list[tuple[str, RunSpec]]]:
    """The model-only configuration and (variant, e2e configuration) per variant, made by the
    sweep's parser and `plan.grid` from `options` (module docstring); one-line ValueErrors."""
    if len(set(variants)) != len(variants):
        raise ValueError(f"--pipelines {' '.join(variants)}: give each variant once")
    sweep, model, found = sweep_options(), None, []
    for text in variants:
        name, knobs = parse_variant(text)
        tokens = ["--step", "compile", "--steps", str(STEPS), *options, "--pipelines", name, "--modes", "model,e2e",
                  *knob_tokens(knobs)]
        try:
            o, unknown = sweep.parse_known_args(tokens)
        except argparse.ArgumentError as e:
            raise ValueError(str(e)) from None
        if unknown:
            raise ValueError(f"unknown option(s) {' '.join(unknown)}: give the sweep's options "
                             "(pipebench sweep --help)")
        specs = plan.grid(plan.sweep(o), device)
        models, e2e = [s for s in specs if s.mode == "model"], [s for s in specs if s.mode == "e2e"]
        if len(models) != 1 or len(e2e) != 1:
            raise ValueError(f"the options make {len(models)} model-only and {len(e2e)} e2e configurations of {text}: "
                             "give one value each of --models, --step, --image-size, --batch-size, --dtype, --cpus, "
                             "--workers, --seed and --sync-every")
        reason = pipelines.available([name])[name] or pipelines.source_refusal(name, e2e[0].config)
        if reason:
            raise ValueError(f"{text}: cannot run here: {reason}")
        model = models[0]
        found.append((text, e2e[0]))
    return model, found


def work_from_trace(events: list[dict]) -> list[Work]:
    """The GPU work of a Chrome trace's events, each given to the recorded step that launched it
    (module docstring)."""
    ranges: dict[object, list[tuple[float, float, int]]] = {}
    launches, found = [], []
    for e in events:
        category = str(e.get("cat", "")).lower()
        if category == "user_annotation" and str(e.get("name", "")).startswith(MARK):
            ranges.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"], int(e["name"][len(MARK):])))
        elif category in LAUNCHES and "correlation" in e.get("args", {}):
            launches.append(e)
        elif category in GPU_WORK and e.get("ph") == "X":
            found.append((e, GPU_WORK[category]))
    launched = {}
    for e in launches:
        step = next((i for start, end, i in ranges.get(e["tid"], ()) if start <= e["ts"] <= end), None)
        if step is not None:
            launched[e["args"]["correlation"]] = step
    return [Work(int(e["args"]["stream"]), float(e["ts"]), float(e["dur"]), launched.get(e["args"].get("correlation")),
                 copy) for e, copy in found]


def training_stream(work: list[Work]) -> int:
    """The stream carrying most of the recorded steps' own GPU time."""
    time_on: dict[int, float] = {}
    for w in work:
        if w.step is not None:
            time_on[w.stream] = time_on.get(w.stream, 0.0) + w.dur
    if not time_on:
        raise ValueError("the trace holds no GPU work launched by a recorded step")
    return max(time_on, key=time_on.get)


def union(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by the intervals (overlaps counted once)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def clipped(work: list[Work], low: float, high: float) -> list[tuple[float, float]]:
    """The parts of `work` inside [low, high)."""
    return [(max(w.start, low), min(w.end, high)) for w in work if w.end > low and w.start < high]


def step_rows(work: list[Work], stream: int) -> list[dict]:
    """Per recorded step but the last (whose period has no end), the timers of the module docstring
    (ms); ValueError if a recorded step launched nothing on the training stream."""
    own: dict[int, list[Work]] = {}
    for w in work:
        if w.step is not None and w.stream == stream:
            own.setdefault(w.step, []).append(w)
    if sorted(own) != list(range(len(own))) or len(own) < 2:
        raise ValueError(f"steps {sorted(own)} launched work on the training stream {stream}: expected 0, 1, 2, ...")
    on_stream = [w for w in work if w.stream == stream]
    kernels = [w for w in work if w.stream != stream and not w.copy]
    copies = [w for w in work if w.stream != stream and w.copy]
    first = min(w.start for w in own[0])
    rows = []
    for i in range(len(own) - 1):
        start, end = min(w.start for w in own[i]), max(w.end for w in own[i])
        following = min(w.start for w in own[i + 1])
        period = following - start
        idle = period - union(clipped(on_stream, start, following))
        rows.append({"step": i, "stream": stream, "start_ms": (start - first) / 1e3,
                     "step_kernel_ms": union([(w.start, w.end) for w in own[i]]) / 1e3,
                     "step_span_ms": (end - start) / 1e3, "period_ms": period / 1e3, "idle_ms": idle / 1e3,
                     "idle_share": idle / period,
                     "other_in_step_ms": sum(b - a for a, b in clipped(kernels, start, end)) / 1e3,
                     "other_ms": sum(b - a for a, b in clipped(kernels, start, following)) / 1e3,
                     "other_copy_ms": sum(b - a for a, b in clipped(copies, start, following)) / 1e3})
    return rows


def with_stretch(df: pd.DataFrame) -> pd.DataFrame:
    """The rows with `stretch`: each step's kernel time over model-only's median."""
    alone = df.loc[df.pipeline == MODEL_ONLY, "step_kernel_ms"].median()
    return df.assign(stretch=df.step_kernel_ms / alone)


def spread(values: pd.Series, form: str) -> str:
    if values.isna().all():
        return ""
    return f"{values.median():{form}} [{values.min():{form}}–{values.max():{form}}]"


def table(df: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: medians [min–max] over its recorded steps, and n."""
    return pd.DataFrame([{
        "configuration": f"`{label}`", "n": len(g), "training stream": g.stream.iloc[0],
        "step kernels ms": spread(g.step_kernel_ms, ".2f"), "stretch": spread(g.stretch, ".2f"),
        "step span ms": spread(g.step_span_ms, ".2f"), "period ms": spread(g.period_ms, ".2f"),
        "idle %": spread(100 * g.idle_share, ".0f"), "other streams in step ms": spread(g.other_in_step_ms, ".2f"),
        "other streams ms": spread(g.other_ms, ".2f"), "other copies ms": spread(g.other_copy_ms, ".2f"),
        "JPEG engine %": spread(g.gpu_jpg_util.astype(float), ".0f")}
        for label, g in df.groupby("pipeline", sort=False)])


def sentences(df: pd.DataFrame) -> list[str]:
    """A sentence per configuration from the medians: stretch, idle share, the other streams' work."""
    found = []
    for label, g in df.groupby("pipeline", sort=False):
        idle = f"the training stream idled {100 * g.idle_share.median():.0f} % of each step's period"
        if label == MODEL_ONLY:
            found.append(f"Alone, the step's own GPU work took {g.step_kernel_ms.median():.2f} ms per step and {idle}.")
            continue
        found.append(f"Beside `{label}` the step's own GPU work took {g.stretch.median():.2f} × its time alone and "
                     f"{idle}; other streams ran {g.other_ms.median():.2f} ms of kernels per step, "
                     f"{g.other_in_step_ms.median():.2f} ms of them during the step.")
    return found


def report(df: pd.DataFrame, command: str, waits: list[dict], syncs: pd.DataFrame) -> str:
    first = df.iloc[0]
    return "\n".join([
        "# Where the GPU's time goes: the training step alone and beside each pipeline", "",
        f"Generated by `{command}` (`bench.studies.timeline`'s docstring says how). `{first['model']}`, {first['step_kind']} "
        f"step, {first['image_size']} px, batch {first['batch_size']}, {first['dtype']}, {first['cpus']} cores, "
        f"{first['source']}; "
        f"{machine_text(first)}.", "",
        "Per recorded step of each configuration, medians [min–max] over its n steps. A step's period runs from "
        "its first GPU work on the training stream (the stream carrying most of the steps' own work) to the next "
        "step's. *step kernels*: the union of the step's own kernels, memsets and copies on the training stream; "
        "*stretch*: that over model-only's median (SM contention makes it > 1); *step span*: its first start to "
        "its last end; *idle*: the share of the period the training stream ran nothing (waiting for the host or "
        "the input); *other streams in step* / *other streams*: kernels and memsets on the other streams (the "
        "pipeline's), summed over streams, inside the step's span / over the period; *other copies*: copies on "
        "the other streams in the period; *JPEG engine*: NVML's utilization of the hardware JPEG decoder at the "
        "recording's end.", "",
        table(df).to_markdown(index=False), "", *sentences(df), "", "![timeline](timeline.png)", "",
        "## On the host and in the GPU's queues", "",
        "Per configuration, over its recorded steps (`bench.studies.host_waits`'s docstring says how): *batch wait*: "
        "the training thread's time in the pipeline's `next()`, ms per step; *sync* / *alloc*: ms per step in "
        "CUDA calls that synchronize / allocate or free, on the training thread and, most among the pipeline's "
        "threads, on one of them ([host-calls.csv](host-calls.csv): every thread and kind); *queued*: the "
        "pipeline's GPU work from its launching call to its start, for work launched while the training stream "
        "ran a step's work and while it idled: n pieces, median [p90] ms.", "",
        host_waits.table(waits), "", *[host_waits.sentence(w) for w in waits], "",
        "The pipeline threads' synchronizing calls by name, each configuration's three costliest "
        "([host-syncs.csv](host-syncs.csv): every name): calls and ms per recorded step, median [longest] call, "
        f"and the share of calls that ended within {host_waits.ENDED_WITH_STEP_MS:g} ms after a step's GPU work "
        "ended (beside it, the share a call ending at a random moment would reach).", "",
        host_waits.sync_table(syncs), ""])


def profiled(batches, step, steps: int, device: torch.device, monitor: machine.GpuMonitor) -> tuple[list[dict], dict]:
    """PROFILER_WARMUP + steps + 1 steps under the profiler, the last steps + 1 marked (module
    docstring): the Chrome trace's events, and the NVML readings at the end."""
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for i in range(-PROFILER_WARMUP, steps + 1):
            if i < 0:
                step(*next(batches))
                continue
            with torch.profiler.record_function(f"{host_waits.NEXT_MARK}{i}"):
                images, labels = next(batches)
            with torch.profiler.record_function(f"{MARK}{i}"):
                step(images, labels)
        gpu = monitor.sample()
        sync(device)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(path))
        return json.loads(path.read_text())["traceEvents"], gpu


def record(label: str, spec: RunSpec, shared: Shared, device: torch.device,
           out: Path | None) -> tuple[list[dict], list[Work], dict]:
    """One configuration built and warmed up as the harness does (module docstring), then
    profiled: its trace's events, their GPU work and the NVML readings; the trace kept gzipped in
    `out` (None: not kept) where small enough."""
    t0 = time.perf_counter()
    print(f"bench.studies.timeline: {label}: building; the first training call (compiles the step the first time), "
          f"{spec.warmup} warm-up steps, then {spec.requested_steps} recorded", flush=True)
    pipeline = None
    try:
        if spec.mode == "model":
            batches = real_batches(spec.config, device)
        else:
            pipeline = pipelines.build(spec.pipeline, spec.config)
            batches = endless(pipeline)
        trainer = shared.trainer(spec, device)
        trainer(*next(batches))   # compilation and capture the first time, then a step
        step = reading(trainer, spec.sync_every)
        for _ in range(spec.warmup):
            step(*next(batches))
        if pipeline is not None:
            drain(batches, pipeline.queue_capacity, device)
        events, gpu = profiled(batches, step, spec.requested_steps, device, machine.GpuMonitor(device))
    finally:
        if pipeline is not None:
            pipeline.close()
        machine.release(device)
    packed = gzip.compress(json.dumps({"traceEvents": events}).encode()) if out is not None else b""
    if out is not None and len(packed) < TRACE_MAX_BYTES:
        (out / f"trace-{re.sub(r'[^A-Za-z0-9_.-]+', '-', label)}.json.gz").write_bytes(packed)
    print(f"bench.studies.timeline: {label}: {spec.requested_steps} steps recorded ({time.perf_counter() - t0:.0f} s)", flush=True)
    return events, work_from_trace(events), gpu


def measure(model: RunSpec, variants: list[tuple[str, RunSpec]], device: torch.device, out: Path,
            traces_kept: bool = False) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, list[dict]]:
    """Every configuration recorded in this process (module docstring): a row per recorded step; a
    row per configuration, thread and kind of host call; per configuration and synchronizing call's name;
    and a summary per configuration (`host_waits`)."""
    rows, calls, syncs, waits, traces, shared = [], [], [], [], {}, Shared()
    with machine.cpu_budget(model.cpus):
        machine.blocking_waits(device)
        # the profiler started once before any CUDA graph is captured: PyTorch's workaround for the kernels of a
        # graph made before the profiler's first use, which traces may otherwise lack (pytorch/pytorch#100441)
        torch.profiler._utils._init_for_cuda_graphs()
        for label, spec in [(MODEL_ONLY, model), *variants]:
            events, work, gpu = record(label, spec, shared, device, out if traces_kept else None)
            stream = training_stream(work)
            found = host_waits.host_calls(events, MARK)
            calls.append(found.assign(pipeline=label))
            syncs.append(host_waits.sync_calls(events, MARK, host_waits.step_ends(work, stream)).assign(pipeline=label))
            waits.append({"configuration": label, **host_waits.summary(found, host_waits.queueing(events, stream))})
            del events
            steps = step_rows(work, stream)
            traces[label] = (work, stream, steps)
            c = spec.config
            rows += [{"pipeline": label, "model": spec.model, "step_kind": spec.step, "image_size": c.image_size,
                      "batch_size": c.batch_size, "dtype": c.dtype, "cpus": spec.cpus, "source": c.source,
                      **row, "gpu_jpg_util": gpu.get("gpu_jpg_util")} for row in steps]
    draw(traces, out / "timeline.png")
    return with_stretch(pd.DataFrame(rows)), pd.concat(calls, ignore_index=True), pd.concat(syncs, ignore_index=True), waits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.timeline", description=__doc__.splitlines()[0],
                                     allow_abbrev=False, epilog="Other options: the sweep's, one value each "
                                     "(pipebench sweep --help); --step defaults to compile, --steps to "
                                     f"{STEPS} (recorded steps).")
    parser.add_argument("--out", required=True, type=Path, help="folder for timeline.csv, TIMELINE.md, timeline.png")
    parser.add_argument("--pipelines", required=True, nargs="+", metavar="VARIANT",
                        help=f"pipeline variants: name or name:knob=value,knob=value (e.g. dali {EXAMPLE})")
    parser.add_argument("--traces", action="store_true",
                        help="also keep each configuration's Chrome trace, gzipped, where under 2 MiB")
    args, options = parser.parse_known_args(argv)
    try:
        for text in args.pipelines:
            parse_variant(text)
        if not torch.cuda.is_available():
            raise ValueError("the timeline needs a CUDA device (it records the GPU's work); none here")
        device = torch.device("cuda")
        model, variants = configurations(args.pipelines, options, device)
    except ValueError as e:
        print(f"bench.studies.timeline: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    environment = results.environment()
    df, calls, syncs, waits = measure(model, variants, device, args.out, args.traces)
    calls.to_csv(args.out / "host-calls.csv", index=False)
    syncs.to_csv(args.out / "host-syncs.csv", index=False)
    df = df.assign(**{k: v for k, v in environment.items() if k not in df.columns})
    df.to_csv(args.out / "timeline.csv", index=False)
    command = shlex.join(["python", "-m", "bench.studies.timeline", *(argv if argv is not None else sys.argv[1:])])
    (args.out / "TIMELINE.md").write_text(report(df, command, waits, syncs))
    print("\n".join(sentences(df) + [host_waits.sentence(w) for w in waits]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
