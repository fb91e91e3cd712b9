"""`pipebench`: the command line. Parsing lives here and nowhere else.

    pipebench compare            # every available pipeline, loader / model / e2e, on the default data
    pipebench sweep --out DIR    # a grid (lists or --config FILE.json), resumable in DIR
    pipebench report CSV... --out DIR   # REPORT.md + plots from result CSVs
    pipebench claims             # test the common advice (pin_memory, non_blocking, workers, AMP...): CLAIMS.md
    pipebench stability          # many epochs per pipeline, host and GPU memory per epoch (leaks)
    pipebench prepare            # generate the default data and its JPEG copy ahead of time
    pipebench download --root D  # fetch the genuine CIFAR-10 (network) into D/cifar-10-batches-py
    pipebench list               # registered pipelines and whether each can run here
    pipebench env                # the environment every result row records
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shlex
import signal
import sys
import traceback
import uuid
from pathlib import Path

import torch
from tqdm import tqdm

import pipelines
from pipelines import sources
from pipelines.base import resolve_device
from pipelines.config import (DALI_DECODERS, DALI_READERS, DTYPES, ENCODINGS, LAST_BATCH, SOURCES,
                              WORKER_START_METHODS, PipelineConfig, default_cache_root, default_data_root)

from . import claims, distributed, harness, report, results, runner, stability
from .models import check_model


def _csv_list(allowed):
    def parse(text: str) -> list[str]:
        items = [t.strip() for t in text.split(",") if t.strip()]
        bad = [t for t in items if t not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated list of {list(allowed)}")
        return items
    return parse


def _positive(kind, minimum=1):
    """argparse type: a number of `kind` >= minimum (> 0 for floats)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or (value < minimum if kind is int else value <= 0):
            raise argparse.ArgumentTypeError(f"{text!r}: expected {'an integer >= ' + str(minimum) if kind is int else 'a number > 0'}")
        return value
    return parse


def _int_list(text: str) -> list[int]:
    try:
        items = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        items = []
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated list of integers")
    return items


def _model_list(text: str) -> list[str]:
    try:
        return [check_model(t.strip()) for t in text.split(",") if t.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _claim_list(text: str) -> list:
    try:
        return claims.select(t.strip() for t in text.split(",") if t.strip())
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-root", default=default_data_root(),
                   help="folder holding cifar-10-batches-py/ or the synthetic cache (default: %(default)s, "
                        "or $PIPEBENCH_DATA)")
    p.add_argument("--source", choices=SOURCES, default="auto",
                   help="auto = real CIFAR-10 under --data-root if present, else synthetic (default: auto)")
    p.add_argument("--data-seed", type=int, default=0, help="seed of the synthetic set (default: 0)")
    p.add_argument("--cache-dir", default=default_cache_root(),
                   help="where the JPEG copies (and a synthetic set not under --data-root) are written, "
                        "under DIR/<source>/, so --data-root may be read-only (default: $PIPEBENCH_CACHE, "
                        "else beside the data)")


RUN_HELP = ("Run each pipeline loader-only, stage by stage and end-to-end and each model on a "
            "synthetic batch (model-only), for every combination of the listed image sizes, batch "
            "sizes, worker counts, models and dtypes; append one CSV row per repeat to "
            "OUT/results.csv and print a summary. "
            "Defaults adapt to the device: on CUDA bs 512, bf16, channels_last, one epoch per "
            "repeat; on CPU bs 64, float32, a few steps per repeat.")


def _run_parser(sub, name: str, help: str, description: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help, description=description, allow_abbrev=False)
    p.add_argument("--pipelines", type=_csv_list(pipelines.names()), default=pipelines.names(),
                   help=f"comma-separated, from {pipelines.names()} (default: all)")
    p.add_argument("--modes", type=_csv_list(harness.MODES), default=list(harness.MODES),
                   help="comma-separated, from loader,model,e2e,stage (default: all)")
    p.add_argument("--stages", type=_csv_list(harness.STAGES), default=list(harness.STAGES),
                   help=f"stage mode: which of {','.join(harness.STAGES)} (default: all)")
    p.add_argument("--models", type=_model_list, default=["resnet18"],
                   help="models for model-only and e2e: resnet18, resnet9, resnet9-w<F> (width x F, "
                        "the compute knob) (default: resnet18)")
    p.add_argument("--step", type=_csv_list(harness.STEPS),
                   help="list; the training step of model-only and e2e: eager (as written), graph (the whole "
                        "step captured in one CUDA graph and replayed), compile (torch.compile, then the same "
                        "capture); every kind runs model-only and e2e. graph / compile need CUDA (skipped rows "
                        "elsewhere), last-batch drop, no --parallel dp, no torchrun, no float16 "
                        "(default: eager,graph on CUDA, eager on CPU)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default: auto)")
    p.add_argument("--image-size", type=_int_list, default=[32],
                   help="list; px per side, multiples of 32: the set upscaled (default: 32)")
    p.add_argument("--batch-size", type=_int_list, help="list; default: 512 on CUDA, 64 on CPU")
    p.add_argument("--workers", type=_int_list,
                   help="list; DataLoader workers / prefetch threads / parallel DALI sources "
                        "(default: cores - 1)")
    p.add_argument("--dtype", type=_csv_list(DTYPES), help="list; batch dtype and autocast (default: "
                                                           "bfloat16 on CUDA, float32 on CPU)")
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction,
                   help="channels_last batches and model (default: on for CUDA)")
    p.add_argument("--pin-memory", action="store_true", help="dataloader: DataLoader(pin_memory=True)")
    p.add_argument("--non-blocking", action="store_true", help="dataloader: .to(device, non_blocking=True)")
    p.add_argument("--prefetch-depth", type=int, default=2, help="prefetch: batches in flight (default: 2)")
    p.add_argument("--worker-start", choices=WORKER_START_METHODS, default=PipelineConfig.worker_start,
                   help="dataloader, timm: how DataLoader workers start; forkserver and spawn are safe in a "
                        "process running threads, fork is Linux's default before Python 3.14 (default: %(default)s)")
    p.add_argument("--parallel", choices=("none", "dp"), default="none",
                   help="model and e2e over several GPUs in one process: dp = torch.nn.DataParallel over "
                        "every visible GPU, fed batch-size x GPUs. For DistributedDataParallel launch the "
                        "same command under torchrun (--nproc-per-node N -m bench.cli ...) instead: each "
                        "process takes one GPU and a 1/N shard of every epoch (default: none)")
    defaults = PipelineConfig
    p.add_argument("--dali-reader", choices=DALI_READERS, default=defaults.dali_reader,
                   help="dali: external_source in the shared epoch plan, or fn.readers.file (default: %(default)s)")
    p.add_argument("--dali-threads", type=int, help="dali: CPU threads (default: cores - 1)")
    p.add_argument("--dali-queue-depth", type=int, default=defaults.dali_queue_depth,
                   help="dali: prefetch queue depth (default: %(default)s)")
    p.add_argument("--dali-hw-decoder-load", type=float, default=defaults.dali_hw_decoder_load,
                   help="dali: share of JPEGs for the hardware decoder, 0..1 (default: %(default)s)")
    p.add_argument("--dali-decoder", choices=DALI_DECODERS, default=defaults.dali_decoder,
                   help="dali: mixed = nvJPEG (GPU decode, Huffman on DALI's threads), cpu = libjpeg-turbo on DALI's "
                        "threads, then the pixels are copied (default: %(default)s)")
    p.add_argument("--dali-batch-multiple", type=_positive(int), default=defaults.dali_batch_multiple,
                   help="dali, dali-raw (external / parallel reader): DALI runs batches of this many training "
                        "batches, which the pipeline splits (default: %(default)s)")
    p.add_argument("--encoding", choices=ENCODINGS, default="raw",
                   help="raw pixels, or decode the cached JPEG copy (dataloader) (default: raw)")
    p.add_argument("--last-batch", choices=LAST_BATCH, default="drop",
                   help="drop = every timed step has a full batch (default: drop)")
    p.add_argument("--max-samples", type=_positive(int), help="use only the first N samples of the split")
    p.add_argument("--steps", type=_positive(int), help="timed steps per repeat (default: whole epochs lasting "
                   "--min-window-s on CUDA, 3 on CPU)")
    p.add_argument("--min-window-s", type=_positive(float),
                   help="without --steps: each window is the fewest whole epochs (model-only: blocks of "
                        f"{harness.MODEL_BLOCK} steps) lasting at least this many seconds, sized by an untimed "
                        "window first (default: 2 on CUDA; on CPU --steps 3 instead)")
    p.add_argument("--warmup", type=_positive(int, 0), help="untimed steps first (default: 10 on CUDA, 1 on CPU)")
    p.add_argument("--repeats", type=_positive(int), help="timed windows per config (default: 5 on CUDA, 2 on CPU)")
    p.add_argument("--seed", type=int, default=0, help="shuffle / augmentation seed (default: 0)")
    p.add_argument("--timeout", type=_positive(float), default=runner.DEFAULT_TIMEOUT_S,
                   help="seconds one configuration may take (its own process; on expiry its stacks are saved "
                        "under OUT/timeouts/, it is killed with its workers and a `timeout` row written) "
                        "(default: %(default)g)")
    p.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                   help="each configuration in its own process with the --timeout deadline; --no-isolate runs "
                        "them in this one (starts faster, no deadline; always so under torchrun) (default: on)")
    p.add_argument("--out", type=Path, help="output folder (default: runs/<UTC time>-<device>)")
    _add_data_args(p)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pipebench", description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub, "compare", "time every pipeline loader-only, model-only and end-to-end", RUN_HELP)
    p = _run_parser(sub, "sweep", "run a grid of configurations, resumable",
                    RUN_HELP + " A sweep resumes: configurations that already have --repeats ok rows "
                    "for this environment in OUT/results.csv are skipped.")
    p.add_argument("--config", type=Path, help="JSON file whose keys are these options' names "
                   "(e.g. {\"batch_size\": [256, 512], \"models\": [\"resnet9-w0.5\"]}); "
                   "options given on the command line win")
    p = sub.add_parser("report", help="write REPORT.md and plots from result CSVs")
    p.add_argument("csv", nargs="+", type=Path, help="results.csv files")
    p.add_argument("--out", type=Path, required=True, help="folder for REPORT.md, SUMMARY.md and the PNGs")
    p.add_argument("--readme", type=Path, help="also replace the summary block of this Markdown file (between "
                   "the markers report.README_START / README_END) with the summary, links relative to it")
    p = sub.add_parser("claims", help="test the common advice on feeding a GPU, one experiment per claim",
                       description="Run one small experiment per claim (pageable/pinned copies, non_blocking, "
                       "pin_memory, workers, collate_fn to GPU, AMP, OOM fixes), append tidy rows to "
                       "OUT/claims.csv and write OUT/CLAIMS.md with a verdict per claim generated from "
                       "the numbers. Claims about CUDA are skipped, with the reason, without a GPU. "
                       "Running again into the same OUT appends; CLAIMS.md uses each claim's latest run.")
    p.add_argument("--claims", type=_claim_list, default=claims.CLAIMS,
                   help=f"comma-separated numbers 1-{len(claims.CLAIMS)} or names {','.join(claims.KEYS)} (default: all)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default: auto)")
    p.add_argument("--workers", type=int, help="DataLoader workers / prefetch threads where a claim does not "
                   "vary them (default: cores - 1)")
    p.add_argument("--quick", action="store_true", help="tiny sizes (seconds on a CPU): checks that every "
                   "experiment runs; the numbers mean little")
    p.add_argument("--report-only", action="store_true", help="rebuild OUT/CLAIMS.md from OUT/claims.csv, measure nothing")
    p.add_argument("--seed", type=int, default=0, help="shuffle / augmentation seed (default: 0)")
    p.add_argument("--out", type=Path, help="output folder (default: runs/claims-<UTC time>-<device>)")
    _add_data_args(p)
    p = sub.add_parser("stability", help="many epochs per pipeline, memory after each: leaks show as climbing lines",
                       description=stability.__doc__.split("\n\n")[1].replace("\n", " "))
    p.add_argument("--pipelines", type=_csv_list(pipelines.names()), default=pipelines.names(),
                   help="comma-separated (default: all; unavailable ones are left out)")
    p.add_argument("--epochs", type=_positive(int), default=20, help="epochs per pipeline (default: %(default)s)")
    p.add_argument("--batch-size", type=_positive(int), help="default: 512 on CUDA, 64 on CPU")
    p.add_argument("--workers", type=_positive(int), help="default: cores - 1")
    p.add_argument("--max-samples", type=_positive(int), help="use only the first N samples of the split")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default: auto)")
    p.add_argument("--out", type=Path, required=True, help="folder for stability.csv, STABILITY.md, stability.png")
    _add_data_args(p)
    p = sub.add_parser("prepare", help="generate/validate the data and write its JPEG copy")
    _add_data_args(p)
    p.add_argument("--jpeg-quality", type=int, default=90, help="JPEG quality (default: 90)")
    p = sub.add_parser("download", help="download the genuine CIFAR-10 with torchvision (network)")
    p.add_argument("--root", default=default_data_root(), help="destination (default: %(default)s)")
    sub.add_parser("list", help="registered pipelines and whether each can run here")
    sub.add_parser("env", help="print the environment recorded with every result")
    for command in sub.choices.values():
        command.add_argument("--debug", action="store_true", help="print the traceback of an error (else one "
                             "line) and keep whole tracebacks in error rows")
    return parser


def specs_for(args, device: torch.device, world: distributed.World = distributed.World()) -> list[harness.RunSpec]:
    """Every configuration of the grid, loader-only first, then per model: model-only, e2e. Under
    torchrun each process gets its rank's share and trains a DDP replica; `--batch-size` is per GPU."""
    cuda = device.type == "cuda"
    if args.parallel == "dp" and (world.distributed or not cuda):
        raise ValueError("--parallel dp runs in one process on CUDA devices: not under torchrun, not on a CPU")
    base = PipelineConfig(
        data_root=args.data_root, source=args.source, data_seed=args.data_seed, encoding=args.encoding,
        cache_root=args.cache_dir,
        last_batch=args.last_batch, max_samples=args.max_samples, seed=args.seed, device=str(device),
        channels_last=cuda if args.channels_last is None else args.channels_last,
        pin_memory=args.pin_memory, non_blocking=args.non_blocking, prefetch_depth=args.prefetch_depth,
        worker_start=args.worker_start,
        rank=world.rank, world_size=world.world_size,
        dali_reader=args.dali_reader, dali_queue_depth=args.dali_queue_depth,
        dali_hw_decoder_load=args.dali_hw_decoder_load, dali_decoder=args.dali_decoder,
        dali_batch_multiple=args.dali_batch_multiple,
        **({} if args.dali_threads is None else {"dali_threads": args.dali_threads}))
    if args.steps is not None and args.min_window_s is not None:
        raise ValueError("--steps and --min-window-s: give one (a fixed step count, or windows sized by time)")
    steps = args.steps or (None if cuda or args.min_window_s else 3)
    timing = dict(steps=steps,
                  min_seconds=0.0 if steps else args.min_window_s if args.min_window_s is not None else 2.0,
                  warmup=args.warmup if args.warmup is not None else (10 if cuda else 1),
                  repeats=args.repeats or (5 if cuda else 2))
    kinds = args.step or (["eager", "graph"] if cuda else ["eager"])
    grid = [(size, dtype, bs, workers)
            for size in args.image_size
            for dtype in args.dtype or ["bfloat16" if cuda else "float32"]
            for bs in args.batch_size or [512 if cuda else 64]
            for workers in args.workers or [base.num_workers]]
    configs = [base.replace(image_size=size, dtype=dtype, batch_size=bs, num_workers=workers)
               for size, dtype, bs, workers in grid]
    reasons = pipelines.available()

    parallel = "ddp" if world.distributed else args.parallel
    replicas = torch.cuda.device_count() if parallel == "dp" else 1
    for kind in kinds:   # what a captured step refuses on this GPU is refused here (no CUDA: skipped rows)
        for dtype in args.dtype or ["bfloat16"]:
            refusal = harness.step_refusal(kind, device, dtype, parallel, args.last_batch)
            if refusal and cuda:
                raise ValueError(refusal)

    def spec(pipeline: str, mode: str, model: str, config: PipelineConfig, stage: str = "",
             step: str = "eager") -> harness.RunSpec:
        """Rows record, and resume matches, the config a pipeline really runs with."""
        if pipeline in reasons and not reasons[pipeline]:
            config = pipelines.resolve_config(pipeline, config)
        if mode in ("model", "e2e") and replicas > 1:   # DataParallel: the whole batch on one GPU
            config = config.replace(batch_size=config.batch_size * replicas)
        return harness.RunSpec(pipeline, mode, model, config, stage=stage, step=step,
                               parallel=parallel if mode in ("model", "e2e") else "none", **timing)

    specs = []
    if "loader" in args.modes:
        specs += [spec(p, "loader", "none", c) for c in configs for p in args.pipelines]
    if "stage" in args.modes:
        specs += [spec(p, "stage", "none", c, s) for c in configs for p in args.pipelines for s in args.stages]
    for model in args.models:
        for kind in kinds:   # model-only and e2e of one setting use the same step kind
            if "model" in args.modes:   # no pipeline: once per image size, dtype and batch size
                seen = {(c.image_size, c.dtype, c.batch_size): c for c in configs}
                specs += [spec("none", "model", model, c, step=kind) for c in seen.values()]
            if "e2e" in args.modes:
                specs += [spec(p, "e2e", model, c, step=kind) for c in configs for p in args.pipelines]
    return specs


def record(out: Path, command: list[str], env: dict | None = None) -> None:
    """Append the command that wrote into `out` to its COMMAND.txt (and write environment.json)."""
    if env is not None:
        (out / "environment.json").write_text(json.dumps(env, indent=2) + "\n")
    with open(out / "COMMAND.txt", "a") as f:
        f.write(shlex.join(command) + "\n")


def _fail(command: str, error: BaseException) -> SystemExit:
    """A user-facing error as one line (`pipebench COMMAND: message`); with --debug its traceback first."""
    if os.environ.get("PIPEBENCH_DEBUG"):
        traceback.print_exception(error)
    return SystemExit(f"pipebench {command}: {error}")


def run_grid(args, argv: list[str]) -> int:
    """Measure the grid into OUT/results.csv; the exit code (1 if a configuration failed or timed
    out). Under torchrun every process runs the same specs on its own GPU and shard; rank 0 alone
    writes files, one row per rank and window."""
    try:
        world, device_name = distributed.setup(args.device)
        device = resolve_device(device_name)
        specs = specs_for(args, device, world)
    except ValueError as e:
        raise _fail(args.command, e) from None
    lead = world.rank == 0
    out = args.out or Path("runs") / f"{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}-{device.type}"
    out = distributed.broadcast(out)
    try:
        with runner.folder_lock(out) if lead else contextlib.nullcontext(), runner.signals_as_interrupts():
            outcome = _run_specs(args, argv, specs, device, world, lead, out)
    except ValueError as e:   # the folder is locked by another run
        raise _fail(args.command, e) from None
    except (runner.Interrupted, KeyboardInterrupt) as e:
        if isinstance(e, KeyboardInterrupt):
            e = runner.Interrupted(signal.SIGINT)
        print(f"pipebench {args.command}: stopped by {e}; the rows of every finished configuration are in "
              f"{out}/results.csv (the one running was discarded; `pipebench sweep --out {out}` resumes)",
              file=sys.stderr)
        return e.exit_code
    finally:
        distributed.teardown()
    if lead and outcome.failed:
        print(f"pipebench {args.command}: {outcome.failed} of {outcome.configurations} configurations failed or "
              "timed out (their rows say why)", file=sys.stderr)
    return 1 if outcome.failed else 0


def _run_specs(args, argv, specs, device, world, lead: bool, out: Path) -> runner.Outcome:
    env = results.environment()
    run_id = distributed.broadcast(f"{out.name}@{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}")
    writer = results.CsvWriter(out / "results.csv", env, run_id=run_id) if lead else None   # rank 0 writes; one id per invocation
    todo = list(range(len(specs)))
    if lead:
        launcher = ["torchrun", f"--nnodes={world.world_size // world.local_world_size}",
                    f"--nproc-per-node={world.local_world_size}", "-m", "bench.cli"] if world.distributed else ["pipebench"]
        record(out, [*launcher, *argv], env)
        if getattr(args, "config", None) is not None:   # the command names it: keep a copy beside
            (out / args.config.name).write_text(args.config.read_text())
        if args.command == "sweep":
            done = results.completed(out / "results.csv", env)
            todo = [i for i, s in enumerate(specs) if done.get(results.config_key(s), 0) < s.repeats]
            print(f"resume: {len(specs) - len(todo)} of {len(specs)} configurations already done", file=sys.stderr)
    specs = [specs[i] for i in distributed.broadcast(todo)]   # rank 0's choice, the ranks' own configs
    outcome = runner.Outcome(len(specs))
    if not specs:
        if lead:
            print(summary(out / "results.csv"))
        return outcome

    # Data generation and JPEG encoding happen here, outside every timer, only where read, rank 0 first.
    for turn in (True, False):
        if lead == turn:
            try:
                source, folder = sources.resolve_folder(specs[0].config)
                quality, cache = specs[0].config.jpeg_quality, specs[0].config.cache_root
                for size in sorted({s.config.image_size for s in specs if s.config.encoding == "jpeg"}):
                    sources.prepare_jpeg(folder, quality, size, cache)
                for size in sorted({s.config.image_size for s in specs
                                    if s.pipeline == "dali" and s.config.dali_reader == "file"}):
                    sources.prepare_jpeg_tree(folder, quality, size, cache)
            except OSError as e:   # a missing root, a folder that cannot be written: one line, no traceback
                hint = (" (choose a writable --data-root or $PIPEBENCH_DATA)"
                        if isinstance(e, PermissionError) else "")
                raise SystemExit(f"pipebench {args.command}: {e}{hint}") from None
        distributed.barrier()
    if lead:
        ranks = f"; {world.world_size} processes" if world.distributed else ""
        print(f"data: {source} ({folder}); device: {device}{ranks}; output: {out}/results.csv", file=sys.stderr)

    reasons = pipelines.available()
    with tqdm(total=sum(s.repeats for s in specs), unit="window", desc=args.command, disable=not lead) as bar:
        for spec in specs:
            bar.set_description(f"{spec.pipeline} {spec.stage or spec.mode} {spec.model} {spec.config.image_size}px")
            start = bar.n

            def on_window(row: dict) -> None:
                bar.update(1)
                bar.set_postfix(img_per_s=f"{row['world_img_per_s']:,.0f}")

            skip = reasons.get(spec.pipeline) or harness.step_refusal(spec.step, device)
            if skip:
                rows = [results.failed_row(spec, "skipped", skip)]
            elif world.distributed or not args.isolate:
                rows = runner.run_in_process(spec, world, on_window)
            else:
                rows = runner.run_isolated(spec, args.timeout, out, on_window)
            bar.update(spec.repeats - (bar.n - start))
            if lead:
                for row in rows:
                    writer.write(row)
            statuses = {row["status"] for row in rows}
            outcome.failed += bool(statuses & {"error", "timeout"})
            outcome.ok += statuses == {"ok"}
    if lead:
        print(summary(out / "results.csv"))
    return outcome


def run_claims(args, argv: list[str]) -> Path:
    """`pipebench claims`: measure the selected claims into OUT/claims.csv, then write OUT/CLAIMS.md."""
    if args.report_only:
        if args.out is None or not (args.out / "claims.csv").is_file():
            raise SystemExit("pipebench claims --report-only: needs --out DIR holding claims.csv")
    else:
        try:
            device = resolve_device(args.device)
            config = PipelineConfig(data_root=args.data_root, source=args.source, data_seed=args.data_seed,
                                    cache_root=args.cache_dir, seed=args.seed, device=str(device),
                                    **({} if args.workers is None else {"num_workers": args.workers}))
        except (ValueError, RuntimeError) as e:   # a bad or unavailable --device, bad options
            raise _fail("claims", e) from None
        now = dt.datetime.now(dt.timezone.utc)
        args.out = args.out or Path("runs") / f"claims-{now:%Y%m%d-%H%M%S}-{device.type}"
        args.out.mkdir(parents=True, exist_ok=True)
        env = results.environment()
        record(args.out, ["pipebench", *argv], env)
        run_id = f"claims-{now:%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"   # unique: CLAIMS.md takes the latest
        writer = results.CsvWriter(args.out / "claims.csv", env, run_id=run_id,
                                   columns=claims.COLUMNS)
        context = claims.Context(device, config, claims.Scale.tiny() if args.quick else claims.Scale())
        print(f"device: {device}; output: {args.out}/claims.csv", file=sys.stderr)
        with tqdm(total=len(args.claims), unit="claim", desc="claims") as bar:
            claims.run(args.claims, context, writer.write, bar)
    path = claims.write_report(args.out / "claims.csv", args.out)
    if args.report_only:
        record(args.out, ["pipebench", *argv])
    found = claims.verdicts(claims.read(args.out / "claims.csv"))
    print("\n".join(f"{i:>2} {key:22s} {v.verdict}" for i, (key, v) in enumerate(found.items(), 1)))
    print(path)
    return path


def run_stability(args, argv: list[str]) -> int:
    """`pipebench stability`: OUT/stability.csv, OUT/stability.png and OUT/STABILITY.md."""
    import pandas as pd
    try:
        device = resolve_device(args.device)
        config = PipelineConfig(data_root=args.data_root, source=args.source, data_seed=args.data_seed,
                                cache_root=args.cache_dir, device=str(device), max_samples=args.max_samples,
                                last_batch="drop",
                                batch_size=args.batch_size or (512 if device.type == "cuda" else 64),
                                dtype="bfloat16" if device.type == "cuda" else "float32",
                                channels_last=device.type == "cuda",
                                **({} if args.workers is None else {"num_workers": args.workers}))
    except (ValueError, RuntimeError) as e:
        raise _fail("stability", e) from None
    args.out.mkdir(parents=True, exist_ok=True)
    env = results.environment()
    record(args.out, ["pipebench", *argv], env)
    reasons = pipelines.available()
    names = [n for n in args.pipelines if not reasons.get(n)]
    rows = []
    try:
        with tqdm(total=len(names) * args.epochs, unit="epoch", desc="stability") as bar:
            for name in names:
                bar.set_description(name)
                rows += stability.measure(name, pipelines.resolve_config(name, config), args.epochs, bar)
    except OSError as e:   # a missing data root, a folder that cannot be written
        raise _fail("stability", e) from None
    df = pd.DataFrame(rows).assign(**{k: env[k] for k in ("gpu", "torch", "cpu_count", "hostname", "git_commit")})
    df.to_csv(args.out / "stability.csv", index=False)
    title = f"{env['gpu'] or 'CPU'}, batch {config.batch_size}, {config.num_workers} workers, {args.epochs} epochs"
    stability.plot(df, args.out / "stability.png", title)
    table = pd.DataFrame({c: stability.growth(df, c).map(lambda v: "—" if pd.isna(v) else f"{v:+,.1f}")
                          for c in ("host_rss_mb", "children_rss_mb", "gpu_allocated_mb", "gpu_reserved_mb")})
    skipped = [f"- `{n}`: {reasons[n]}" for n in args.pipelines if reasons.get(n)]
    (args.out / "STABILITY.md").write_text("\n".join([
        "# Stability: memory over epochs", "", f"{title}; generated by `pipebench stability` (COMMAND.txt) from "
        "stability.csv. Growth in MB from epoch 2 to the last epoch (the first epochs warm caches and start "
        "workers); flat lines are the pass.", "", table.reset_index().to_markdown(index=False), "",
        "![memory per epoch](stability.png)", "", *(["Not run:", *skipped, ""] if skipped else [])]))
    print(args.out / "STABILITY.md")
    return 0


def summary(csv: Path) -> str:
    """Median img/s per configuration with its min-max over repeats (of the whole job, under
    torchrun), plus failures."""
    df = report.load([csv])
    ok = df[(df.status == "ok") & (df["rank"] == 0)]
    keys = ["mode", "stage", "step", "pipeline", "model", "image_size", "batch_size", "num_workers", "dtype",
            "world_size", "parallel"]
    table = (ok.groupby(keys, sort=False)["world_img_per_s"]
             .agg(["median", "min", "max", "count"]).round(0).astype(int)
             .rename(columns={"median": "img/s median", "count": "repeats"}))
    lines = [f"\n{csv}", table.to_string() if len(table) else "no successful configuration"]
    for _, row in df[~df.status.isin(["ok", "not-applicable"])].iterrows():
        lines.append(f"{row.status}: {row.pipeline} {row['mode']} {row.model}: {row.error}")
    return "\n".join(lines)


def config_tokens(path: Path, parser: argparse.ArgumentParser) -> list[str]:
    """A sweep --config JSON file as command-line tokens: lists joined by commas, true booleans as
    bare flags, false ones as `--no-X` where the option has that form (else left out), everything
    else as text. Keys must be the sweep options' names in full (e.g. "batch_size")."""
    try:
        values = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"pipebench sweep: --config {path}: {e}")
    if not isinstance(values, dict):
        raise SystemExit(f"pipebench sweep: --config {path}: expected a JSON object")
    sweep = parser._subparsers._group_actions[0].choices["sweep"]
    options = {o for action in sweep._actions for o in action.option_strings}
    tokens = []
    for key, value in values.items():
        flag = "--" + key.replace("_", "-")
        if flag not in options or key in ("config", "out", "help"):
            raise SystemExit(f"pipebench sweep: --config {path}: unknown key {key!r} (keys are the sweep options' "
                             "names in full, with _ for -, e.g. \"batch_size\")")
        if value is True:
            tokens.append(flag)
        elif value is False:
            if "--no-" + flag[2:] in options:
                tokens.append("--no-" + flag[2:])
        else:
            tokens += [flag, ",".join(map(str, value)) if isinstance(value, list) else str(value)]
    return tokens


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.debug:   # the configuration processes inherit it
        os.environ["PIPEBENCH_DEBUG"] = "1"
    if getattr(args, "config", None) is not None:   # the file's options first: typed ones win
        args = parser.parse_args([argv[0], *config_tokens(args.config, parser), *argv[1:]])
    if args.command in ("compare", "sweep"):
        return run_grid(args, argv)
    elif args.command == "claims":
        run_claims(args, argv)
    elif args.command == "report":
        missing = [p for p in args.csv if not p.is_file()]
        if missing:
            raise SystemExit(f"pipebench report: no such file: {', '.join(map(str, missing))}")
        try:
            path = report.write(args.csv, args.out, args.readme)
        except ValueError as e:
            raise _fail("report", e) from None
        record(args.out, ["pipebench", *argv])
        print(path)
    elif args.command == "stability":
        return run_stability(args, argv)
    elif args.command == "prepare":
        try:   # bad data, a folder that cannot be written: one line, no traceback
            config = PipelineConfig(data_root=args.data_root, source=args.source, data_seed=args.data_seed,
                                    cache_root=args.cache_dir)
            source, folder = sources.resolve_folder(config)
            for split in ("train", "test"):
                sources.load_split(folder, split, config.cache_root)   # validates every file and its checksum
            jpeg = sources.prepare_jpeg(folder, args.jpeg_quality, cache_root=config.cache_root)
            sizes = sources.load_jpeg(folder, "train", args.jpeg_quality, cache_root=config.cache_root)
        except (OSError, ValueError) as e:
            raise SystemExit(f"pipebench prepare: {e}") from None
        print(f"{source}: {folder} (validated; checksums match {sources.checksum_origin(folder)})\n"
              f"JPEG q{args.jpeg_quality}: {jpeg} (checksums match JPEG.json; "
              f"mean {len(sizes.data) / len(sizes):.0f} B per train image)")
    elif args.command == "download":
        try:   # no network, a folder that cannot be written: one line, no traceback
            print(sources.download_cifar10(args.root))
        except OSError as e:
            raise SystemExit(f"pipebench download: {e}") from None
    elif args.command == "list":
        for name, reason in pipelines.available().items():
            print(f"{name:12s} {'ok' if reason is None else 'unavailable: ' + reason}")
    elif args.command == "env":
        print(json.dumps(results.environment(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
