"""pipebench: how fast can PyTorch input pipelines feed a training loop? CIFAR-10, measured.

commands:
    pipebench compare            # every available pipeline, loader / model / e2e, on the default data
    pipebench sweep --out DIR    # a grid (lists or --config FILE.json), resumable in DIR
    pipebench report DIR|CSV... --out DIR   # REPORT.md + plots from runs' results
    pipebench claims             # test the common advice (pin_memory, non_blocking, workers, AMP...): CLAIMS.md
    pipebench stability          # many epochs per pipeline, host and GPU memory per epoch (leaks)
    pipebench prepare            # generate the default data and its JPEG copy ahead of time
    pipebench download           # fetch the genuine CIFAR-10 (network) into --data-root
    pipebench list               # registered pipelines and whether each can run here
    pipebench env                # the environment every result row records

`pipebench COMMAND --help` for a command's options; errors are one line, --debug shows the traceback.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import json
import math
import os
import re
import shlex
import signal
import sys
import time
import traceback
import uuid
from pathlib import Path

import torch
from tqdm import tqdm

import pipelines
from pipelines import sources
from pipelines.contract import resolve_device
from pipelines.config import (DALI_DECODERS, DALI_READERS, DTYPES, ENCODINGS, IMAGE_SIZE, LAST_BATCH, MAX_IMAGE_SIZE,
                              MAXIMUM, PREFETCH_AUGMENT, SOURCES, WORKER_START_METHODS, PipelineConfig,
                              default_cache_root, default_data_root)

# Light imports only: DataLoader workers and configuration processes import this module again
# (multiprocessing's start-up runs the main script); claims, report and stability are imported
# where they are used.
from . import distributed, harness, interrupts, plan, results, runner

MAX_PROCESSES = 1000   # --processes: far above any real use (a typo is one line, not minutes of planning)
MAX_BUSY_MS = 1000.0   # --busy-ms: a second of GPU work per batch is already no training step


def _once(text: str, items: list) -> list:
    """`items` (parsed from `text`) if no value is given twice (it would run the same configurations
    again), else a usage error naming it."""
    twice = next((t for i, t in enumerate(items) if t in items[:i]), None)
    if twice is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: {twice} is given twice; give each value once")
    return items


def _csv_list(allowed):
    def parse(text: str) -> list[str]:
        items = [t.strip() for t in text.split(",") if t.strip()]
        bad = [t for t in items if t not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated list of {list(allowed)}")
        return _once(text, items)
    return parse


def _positive(kind, minimum=1, maximum=None):
    """argparse type: a number of `kind` >= minimum (> 0 and finite for floats), at most `maximum`."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or (value < minimum if kind is int else value <= 0) \
                or (maximum is not None and value > maximum):
            expected = (f"an integer from {minimum:,} to {maximum:,}" if kind is int and maximum is not None else
                        f"an integer >= {minimum}" if kind is int else "a number > 0")
            raise argparse.ArgumentTypeError(f"{text!r}: expected {expected}")
        return value
    return parse


def _fraction(text: str) -> float:
    """argparse type: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 1:   # nan fails this too
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number from 0 to 1")
    return value


def _int_list(text: str, low: int | None = None, high: int | None = None, step: int = 1) -> list[int]:
    """argparse type: comma-separated integers, each from `low` to `high` (where given) and a
    multiple of `step`."""
    try:
        items = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        items = []
    bad = [v for v in items if (low is not None and v < low) or (high is not None and v > high) or v % step]
    if not items or bad:
        bounds = (f" from {low:,}" if low is not None else "") + (f" to {high:,}" if high is not None else "")
        kind = f"multiples of {step}" if step > 1 else "integers"
        raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated list of {kind}{bounds}")
    return _once(text, items)


def _bounded_list(low: int | None = None, high: int | None = None, step: int = 1):
    return lambda text: _int_list(text, low, high, step)


def _model_list(text: str) -> list[str]:
    """Model specs (checked once the image sizes are known, `plan.grid`); ':' may appear in a spec."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated list of models")
    return _once(text, items)


def _ms_list(text: str) -> list[float]:
    """argparse type: a list of numbers from 0 to MAX_BUSY_MS (ms)."""
    try:
        items = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        items = []
    if not items or any(not 0 <= v <= MAX_BUSY_MS for v in items):   # NaN fails this too
        raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated list of numbers from 0 to "
                                         f"{MAX_BUSY_MS:g} (ms per batch)")
    return _once(text, items)


def _claim_list(text: str) -> list:
    from . import claims
    try:
        chosen = claims.select(t.strip() for t in text.split(",") if t.strip())
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    _once(text, [claim.key for claim in chosen])
    return chosen


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


RUN_HELP = ("Measure each pipeline loader-only (at each headspace level), stage by stage and end-to-end, each "
            "model on real batches already on the device (model-only) and the bus alone (copies), for every combination of the "
            "listed image sizes, batch sizes, CPU budgets, worker counts, models and dtypes, each configuration "
            "in --processes independent processes; append one CSV row per window to OUT/results.csv, print a "
            "summary and the answer (which pipeline keeps each model fed), also written to OUT/ANSWER.md. "
            "Defaults adapt to the device: on CUDA bs 512, bf16, channels_last, resnet18, windows of 2 s; on CPU "
            "bs 64, float32, resnet9-w0.25, windows of 0.5 s.")


def _run_parser(sub, name: str, help: str, description: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help, description=description, allow_abbrev=False)
    p.add_argument("--pipelines", type=_csv_list(pipelines.names()), default=pipelines.names(),
                   help=f"comma-separated, from {','.join(pipelines.names())} (default: all)")
    p.add_argument("--modes", type=_csv_list(harness.MODES),
                   help="comma-separated, from loader (the pipeline alone, at each --busy-ms level), model (the "
                        "training step on one batch), e2e (both), train (--epochs epochs, then test accuracy), stage "
                        "(each stage of a pipeline alone), copy (the bus alone) (default: loader,model,e2e,stage,copy "
                        "on CUDA, loader,model,e2e on CPU)")
    p.add_argument("--stages", type=_csv_list(harness.STAGES), default=list(harness.STAGES),
                   help=f"stage mode: which of {','.join(harness.STAGES)} (default: all)")
    p.add_argument("--copies", type=_csv_list(harness.COPIES), default=list(harness.COPIES),
                   help="copy mode: from pinned and/or pageable memory (default: both)")
    p.add_argument("--payloads", type=_csv_list(harness.PAYLOADS), default=list(harness.PAYLOADS),
                   help="copy mode: images copied as uint8 and/or float32 (default: both)")
    p.add_argument("--models", type=_model_list,
                   help="models for model-only, e2e and train: resnet18, resnet9, resnet9-w<F> (width x F, the "
                        "compute knob), torchvision:<name> (e.g. torchvision:resnet50), timm:<name>, "
                        "<module>:<callable> or <file.py>:<callable> returning an nn.Module with 10 outputs "
                        "(default: resnet18 on CUDA, resnet9-w0.25 on CPU)")
    p.add_argument("--cpus", type=_int_list,
                   help="list; CPU cores per GPU: each configuration (its workers and threads too) runs on that "
                        "many cores, and the worker count follows (cores - 1, at least 1) unless --workers is given "
                        "(default: every core this process may use; under torchrun, an equal share per rank)")
    p.add_argument("--processes", type=_positive(int, maximum=MAX_PROCESSES),
                   help="independent processes per configuration, run in rounds (A B A B), so a range between "
                        "processes shows how much a result moves; the report names no verdict, tie or fastest "
                        f"pipeline from fewer than {plan.MIN_PROCESSES} (default: "
                        f"{plan.PROCESSES['cuda']} on CUDA, {plan.PROCESSES['cpu']} on CPU)")
    p.add_argument("--busy-ms", type=_ms_list,
                   help="loader mode: the headspace levels, ms per batch the GPU is kept busy by a synthetic "
                        "training step after each batch (bf16 matrix products and memory copies on every SM, "
                        "checked every window; 0: an idle GPU); the report reads each pipeline's loader ceiling "
                        "where it stops keeping up with that step (default: "
                        f"{','.join(f'{b:g}' for b in harness.BUSY_MS)} on CUDA, 0 on CPU)")
    p.add_argument("--sync-every", type=_bounded_list(0),
                   help="list; model-only and e2e: read the loss on the host every N steps (loss.item(), as a loop "
                        "that logs does; it drains the GPU's queue each time), 0 never; each value its own "
                        "configurations (default: 0)")
    p.add_argument("--epochs", type=_positive(int), default=10,
                   help="train mode: epochs trained before the test accuracy (default: %(default)s)")
    p.add_argument("--step", type=_csv_list(harness.STEPS),
                   help="list; the training step of model-only and e2e: eager (as written), graph (the whole "
                        "step captured in one CUDA graph and replayed), compile (torch.compile, then the same "
                        "capture); every kind runs model-only and e2e. graph / compile need CUDA (skipped rows "
                        "elsewhere), last-batch drop, no --parallel dp, no torchrun, no float16 "
                        "(default: eager,graph on one CUDA GPU; eager on a CPU, under torchrun and with --parallel dp)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default: auto)")
    p.add_argument("--image-size", type=_bounded_list(IMAGE_SIZE, MAX_IMAGE_SIZE, IMAGE_SIZE), default=[32],
                   help="list; px per side, multiples of 32: the set upscaled (default: 32)")
    p.add_argument("--batch-size", type=_bounded_list(1, MAXIMUM["batch_size"]), help="list; images per batch (default: 512 on CUDA, 64 on CPU)")
    p.add_argument("--workers", type=_int_list,
                   help="list; DataLoader workers / prefetch threads / parallel DALI sources "
                        "(default: cores - 1)")
    p.add_argument("--dtype", type=_csv_list(DTYPES), help="list; batch dtype and autocast (default: "
                                                           "bfloat16 on CUDA, float32 on CPU)")
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction,
                   help="channels_last batches and model (default: on for CUDA)")
    p.add_argument("--pin-memory", action="store_true", help="dataloader: workers hand over pinned batches "
                   "(DataLoader pin_memory=True)")
    p.add_argument("--non-blocking", action="store_true", help="dataloader: copy batches to the device "
                   "asynchronously (non_blocking=True)")
    p.add_argument("--prefetch-depth", type=int, default=2, help="prefetch, resident: batches in flight (default: 2)")
    p.add_argument("--prefetch-augment", type=_csv_list(PREFETCH_AUGMENT), default=["device"],
                   help="list; prefetch: crop and flip on the GPU (the host only gathers whole images) or on the "
                        "host; both: two prefetch variants (default: device)")
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
                   help="dali: external = fed the same shuffled batches as every other pipeline, read in DALI's "
                        "thread; parallel = the same, read in --workers processes; file = DALI's own file reader "
                        "over a JPEG file tree (default: %(default)s)")
    p.add_argument("--dali-threads", type=_positive(int), help="dali: CPU threads (default: the worker count)")
    p.add_argument("--dali-queue-depth", type=int, default=defaults.dali_queue_depth,
                   help="dali: prefetch queue depth (default: %(default)s)")
    p.add_argument("--dali-hw-decoder-load", type=_fraction, default=defaults.dali_hw_decoder_load,
                   help="dali: share of JPEGs for the hardware decoder, 0..1 (default: %(default)s)")
    p.add_argument("--dali-decoder", type=_csv_list(DALI_DECODERS), default=[defaults.dali_decoder],
                   help="list; dali: mixed = nvJPEG (GPU decode, Huffman on DALI's threads), cpu = libjpeg-turbo on "
                        "DALI's threads, then the pixels are copied; both: two dali variants (default: mixed)")
    p.add_argument("--dali-batch-multiple", type=_positive(int), default=defaults.dali_batch_multiple,
                   help="dali, dali-raw (external / parallel reader): DALI runs batches of this many training "
                        "batches, which the pipeline splits (default: %(default)s)")
    p.add_argument("--encoding", type=_csv_list(ENCODINGS), default=["raw"],
                   help="list; dataloader: raw pixels, or decode the JPEG copy per sample with PIL (default: raw)")
    p.add_argument("--last-batch", choices=LAST_BATCH, default=PipelineConfig.last_batch,
                   help="drop = every timed step has a full batch; partial = each epoch's last, smaller batch "
                        f"too (default: {PipelineConfig.last_batch})")
    p.add_argument("--max-samples", type=_positive(int), help="use only the first N samples of the split "
                   "(default: all on CUDA; 2,048 on a CPU, so an epoch lasts seconds)")
    p.add_argument("--steps", type=_positive(int), help="timed steps per window (default: sized by --min-window-s)")
    p.add_argument("--min-window-s", type=_positive(float),
                   help="without --steps: each window lasts at least this many seconds, sized by an untimed run "
                        "first: whole epochs for e2e and stages (model-only: blocks of "
                        f"{harness.MODEL_BLOCK} steps), loader windows whole epochs where one fits "
                        "(default: 2 on CUDA, 0.5 on CPU)")
    p.add_argument("--warmup", type=_positive(int, 0), help="untimed steps first (default: 10 on CUDA, 2 on CPU)")
    p.add_argument("--repeats", type=_positive(int),
                   help="timed windows per process and configuration (loader: per headspace level) "
                        "(default: 3 on CUDA, 2 on CPU)")
    p.add_argument("--seed", type=_int_list, default=[0], help="list; shuffle / augmentation seed (default: 0)")
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


def version() -> str:
    """The installed pipebench's version, else (run from a checkout) the one in its pyproject.toml."""
    try:
        return importlib.metadata.version("pipebench")
    except importlib.metadata.PackageNotFoundError:
        text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
        return re.search(r'^version = "(.+)"', text, re.M)[1]


def build_parser() -> argparse.ArgumentParser:
    from . import claims, report, stability
    parser = argparse.ArgumentParser(prog="pipebench", description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub, "compare", "time every pipeline loader-only, model-only and end-to-end", RUN_HELP)
    p = _run_parser(sub, "sweep", "run a grid of configurations, resumable",
                    RUN_HELP + " A sweep resumes: configurations that already have --repeats ok rows "
                    "for this environment in OUT/results.csv are skipped.")
    p.add_argument("--config", type=Path, help="JSON file whose keys are these options' names "
                   "(e.g. {\"batch_size\": [256, 512], \"models\": [\"resnet9-w0.5\"]}); a key \"grids\" holds a "
                   "list of such objects, each a grid of its own (the other keys shared), all measured in one "
                   "invocation; options given on the command line win")
    p.add_argument("--resume-other-commit", action="store_true",
                   help="resume into OUT although its rows were measured at another commit (a reference result "
                        "is one commit: by default this is refused)")
    p = sub.add_parser("report", help="write REPORT.md and plots from runs' results",
                       description="Generate the report of one or more runs from their results.csv: REPORT.md "
                                   "(every run's summary, then what each timer includes and the rules, then each run's sections), SUMMARY.md, ANSWER.md and the plots, "
                                   "the same bytes from the same rows; the command is recorded in OUT/COMMAND.txt. "
                                   "Rows of different files, commits or machines are never pooled.")
    p.add_argument("csv", nargs="+", type=Path, metavar="RUN", help="run folders (holding results.csv) or "
                   "results CSV files")
    p.add_argument("--out", type=Path, required=True, help="folder for REPORT.md, SUMMARY.md, ANSWER.md, the PNGs and COMMAND.txt")
    p.add_argument("--readme", type=Path, help="also write the summary into this Markdown file, between its lines "
                   f"{report.README_START} and {report.README_END} (links relative to the file)")
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
    p.add_argument("--batch-size", type=_positive(int), help="images per batch (default: 512 on CUDA, 64 on CPU)")
    p.add_argument("--workers", type=_positive(int), help="DataLoader workers / prefetch threads / parallel DALI "
                   "sources (default: cores - 1)")
    p.add_argument("--max-samples", type=_positive(int), help="use only the first N samples of the split")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default: auto)")
    p.add_argument("--out", type=Path, required=True, help="folder for stability.csv, STABILITY.md, stability.png")
    _add_data_args(p)
    p = sub.add_parser("prepare", help="generate/validate the data and write its JPEG copy")
    _add_data_args(p)
    p.add_argument("--jpeg-quality", type=int, default=90, help="JPEG quality (default: 90)")
    p = sub.add_parser("download", help="download the genuine CIFAR-10 with torchvision (network)")
    p.add_argument("--data-root", default=default_data_root(),
                   help="where cifar-10-batches-py/ goes (default: %(default)s, or $PIPEBENCH_DATA)")
    p.add_argument("--root", dest="data_root", help=argparse.SUPPRESS)   # its former name
    sub.add_parser("list", help="registered pipelines and whether each can run here")
    sub.add_parser("env", help="print the environment recorded with every result")
    for command in sub.choices.values():
        command.add_argument("--debug", action="store_true", help="print the traceback of an error (else one "
                             "line) and keep whole tracebacks in error rows")
    return parser


def specs_for(grids: list, device: torch.device, world: distributed.World = distributed.World()) -> list[harness.RunSpec]:
    """Every configuration of the grids (one per --config grid, else the command line's), each in
    its grid's --processes independent processes, in rounds (`plan.grid`, `plan.rounds`)."""
    return plan.rounds([(plan.grid(options, device, world), options.processes or plan.PROCESSES[device.type])
                        for options in grids])


def record(out: Path, command: list[str], env: dict | None = None, once: bool = False) -> None:
    """Append the command that wrote into `out` to its COMMAND.txt (and write environment.json);
    `once`: not when the file already holds it (a report made again writes the same files)."""
    if env is not None:
        (out / "environment.json").write_text(json.dumps(env, indent=2) + "\n")
    line = shlex.join(command)
    path = out / "COMMAND.txt"
    if once and path.is_file() and line in path.read_text().splitlines():
        return
    with open(path, "a") as f:
        f.write(line + "\n")


def resume_command(argv: list[str], out: Path) -> str:
    """The command that resumes this run: `sweep` with the same options into the same folder."""
    tokens, skip = ["pipebench", "sweep"], False
    for token in argv[1:]:
        if skip:
            skip = False
        elif token == "--out":
            skip = True
        elif not token.startswith("--out="):
            tokens.append(token)
    return shlex.join([*tokens, "--out", str(out)])


def _fail(command: str, error: BaseException, message: str = "") -> SystemExit:
    """A user-facing error as one line (`pipebench COMMAND: message`, the error's own by default);
    with --debug its traceback first."""
    if os.environ.get("PIPEBENCH_DEBUG"):
        traceback.print_exception(error)
    return SystemExit(f"pipebench {command}: {message or error}")


def run_grid(grids: list, argv: list[str]) -> int:
    """Measure the grids (parsed options, each with its own --processes; the first one's run-wide
    options: output, deadline, device) into OUT/results.csv; the exit code (1 if a configuration failed or timed
    out). Under torchrun every process runs the same specs on its own GPU, shard and cores; rank 0
    alone writes files, one row per rank and window."""
    args = grids[0]
    try:
        world, device_name = distributed.setup(args.device)
        device = resolve_device(device_name)
        specs = specs_for(grids, device, world)
    except ValueError as e:
        raise _fail(args.command, e) from None
    lead = world.rank == 0
    out = args.out or Path("runs") / f"{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}-{device.type}"
    out = distributed.broadcast(out)
    outcome = runner.Outcome()
    started = time.monotonic()
    try:
        with runner.folder_lock(out) if lead else contextlib.nullcontext(), interrupts.signals_as_interrupts():
            _run_specs(args, argv, specs, device, world, lead, out, outcome)
    except results.WriteFailed as e:   # the disk is full: what resumes the run
        raise _fail(args.command, e, f"{e}; `{resume_command(argv, out)}` resumes") from None
    except OSError as e:   # --out is a file, under /proc, read-only: nothing was measured
        raise _fail(args.command, e, f"--out {out}: {e.strerror or e}"
                    + (f" ({e.filename})" if e.filename and str(e.filename) != str(out) else "")
                    + ": name a folder this user can write") from None
    except ValueError as e:   # the folder is locked, its results.csv is not pipebench's
        raise _fail(args.command, e) from None
    except (interrupts.Interrupted, KeyboardInterrupt) as e:
        if isinstance(e, KeyboardInterrupt):
            e = interrupts.Interrupted(signal.SIGINT)
        print(f"pipebench {args.command}: stopped by {e} after {time.monotonic() - started:.0f} s; "
              + interrupted_text(outcome, out, resume_command(argv, out)), file=sys.stderr)
        return e.exit_code
    finally:
        distributed.teardown()
    if lead:
        for line in outcome.summary_lines():
            print(f"pipebench {args.command}: {line}", file=sys.stderr)
    return 1 if outcome.failed else 0


def interrupted_text(outcome: runner.Outcome, out: Path, resume: str) -> str:
    """What an interrupted run kept: the configurations it wrote, or nothing."""
    if not outcome.written:
        return (f"no configuration had finished: nothing of this run was written (the one running was discarded; "
                f"`{resume}` starts it again)")
    from .report import plural
    return (f"the rows of the {plural(outcome.written, 'configuration')} it finished are in {out}/results.csv "
            f"(the one running was discarded; `{resume}` resumes)")


def windows(spec: harness.RunSpec) -> int:
    """Windows (rows) one process of `spec` measures."""
    return spec.repeats * len(spec.busy_ms)


def _run_specs(args, argv, specs, device, world, lead: bool, out: Path, outcome: runner.Outcome) -> None:
    """Run `specs` into OUT (`run_grid`), counting them in `outcome` as they finish."""
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
            others = results.other_commits(out / "results.csv", env)
            if others and not args.resume_other_commit:
                raise ValueError(f"{out}/results.csv holds rows of commit {', '.join(others)}, this is "
                                 f"{env['git_commit']}: a reference result is one commit; choose another --out, "
                                 "or pass --resume-other-commit")
            done = results.completed(out / "results.csv", env)
            cut = {(results.config_key(s), s.process) for s in specs
                   if 0 < done.get((results.config_key(s), s.process), 0) < windows(s)}
            if cut:   # a block cut short (a crash while writing it): measured again, not added to
                removed = results.drop_blocks(out / "results.csv", env, cut)
                done = {block: n for block, n in done.items() if block not in cut}
                print(f"resume: removed {removed} rows of {len(cut)} configuration processes cut short "
                      "(a crash while writing them); they run again", file=sys.stderr)
            todo = [i for i, s in enumerate(specs) if done.get((results.config_key(s), s.process), 0) < windows(s)]
            print(f"resume: {len(specs) - len(todo)} of {len(specs)} configuration processes already done",
                  file=sys.stderr)
    specs = [specs[i] for i in distributed.broadcast(todo)]   # rank 0's choice, the ranks' own configs
    outcome.configurations = len(specs)
    if not specs:
        if lead:
            print(summary(out))
        return

    # Data generation and JPEG encoding happen here, outside every timer, only where read, rank 0 first.
    for turn in (True, False):
        if lead == turn:
            try:
                read = [s for s in specs if s.pipeline != "none"] or specs
                source, folder = sources.resolve_folder(read[0].config)
                quality, cache = read[0].config.jpeg_quality, read[0].config.cache_root
                for size in sorted({s.config.image_size for s in read if s.config.encoding == "jpeg"}):
                    sources.prepare_jpeg(folder, quality, size, cache)
                for size in sorted({s.config.image_size for s in read
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
    with tqdm(total=sum(windows(s) for s in specs), unit="window", desc=args.command, disable=not lead) as bar:
        for spec in specs:
            what = spec.stage or spec.payload or spec.mode
            bar.set_description(f"{spec.pipeline} {what} {spec.model} {spec.config.image_size}px {spec.cpus} cores "
                                f"#{spec.process + 1}")
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
            bar.update(windows(spec) - (bar.n - start))
            if lead:
                writer.write_block(rows)
            outcome.written += 1
            cause = outcome.record(spec, rows)
            if lead and cause:
                bar.write(cause, file=sys.stderr)
    if lead:
        print(summary(out, run_id))


def run_claims(args, argv: list[str]) -> Path:
    """`pipebench claims`: measure the selected claims into OUT/claims.csv, then write OUT/CLAIMS.md."""
    from . import claims
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
    from . import stability
    import pandas as pd
    try:
        device = resolve_device(args.device)
        config = PipelineConfig(data_root=args.data_root, source=args.source, data_seed=args.data_seed,
                                cache_root=args.cache_dir, device=str(device), max_samples=args.max_samples,
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
    rows, stop, name = [], None, ""
    try:
        with tqdm(total=len(names) * args.epochs, unit="epoch", desc="stability") as bar, \
                interrupts.signals_as_interrupts():
            for name in names:
                bar.set_description(name)
                for row in stability.measure(name, pipelines.resolve_config(name, config), args.epochs):
                    rows.append(row)
                    bar.update(1)
    except OSError as e:   # a missing data root, a folder that cannot be written
        raise _fail("stability", e) from None
    except (interrupts.Interrupted, KeyboardInterrupt) as e:   # the epochs measured are written below
        stop = e if isinstance(e, interrupts.Interrupted) else interrupts.Interrupted(signal.SIGINT)
    if stop is not None:
        rest = names[names.index(name) + 1:] if name else names
        ended = (f"stopped by {stop} after {sum(row['pipeline'] == name for row in rows)} of {args.epochs} epochs "
                 f"of `{name}`" + (f" (not run: {', '.join(rest)})" if rest else ""))
        if not rows:
            print(f"pipebench stability: {ended}; no epoch measured, nothing written", file=sys.stderr)
            return stop.exit_code
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
        "workers); flat lines are the pass.", "", *([f"**Interrupted**: {ended}.", ""] if stop else []),
        table.reset_index().to_markdown(index=False), "",
        "![memory per epoch](stability.png)", "", *(["Not run:", *skipped, ""] if skipped else [])]))
    print(args.out / "STABILITY.md")
    if stop is not None:
        print(f"pipebench stability: {ended}; the epochs measured are in {args.out}", file=sys.stderr)
        return stop.exit_code
    return 0


def summary(out: Path, run_id: str | None = None) -> str:
    """The run's rates per configuration (median [range between processes] n=windows/processes),
    its failures, and the answer per situation (also written to OUT/ANSWER.md). The run is the one
    `run_id` belongs to (rows of one commit and machine), else the last in the file."""
    from . import report
    try:
        found = report.runs(report.load([out / "results.csv"]))
    except (OSError, ValueError):
        return f"\n{out}/results.csv: no rows"
    name, group = next(((n, g) for n, g in found if run_id in set(g.run_id)), found[-1])
    seen = report.view_of(group)
    c = seen.cells
    view = [f"{r.mode:7s} {r.stage or r.payload or '':12s} {r.pipeline:28s} {r.model:22s} {r.step or '':8s} "
            f"{r.sync_every:>5g} {r.cpus:>5.0f} {r.busy_ms:>7g}  {report.rate(r)}" for r in c.itertuples()]
    header = (f"{'mode':7s} {'stage':12s} {'pipeline':28s} {'model':22s} {'step':8s} {'reads':>5s} {'cores':>5s} "
              f"{'busy ms':>7s}  img/s median [lowest-highest process] n=windows/processes")
    lines = [f"\n{out}/results.csv", header, *view] if view else [f"\n{out}/results.csv", "no successful configuration"]
    for _, row in group[~group.status.isin(["ok", "not-applicable"])].iterrows():
        lines.append(f"{row.status}: {row.pipeline} {row['mode']} {row.model}: {row.error}")
    answers = report.answers(c, seen.situations)
    if answers:
        report.write_answers(out, [(name, answers)], f"`pipebench report {out} --out {out}`")
        lines += ["", "The answer (also in ANSWER.md):", *[f"- {a}" for a in answers]]
    else:
        lines += ["", "No answer: no e2e configuration ran beside its model-only one (the rows above say what "
                      "ran, skipped and failed)"]
    return "\n".join(lines)


def config_grids(path: Path, parser: argparse.ArgumentParser) -> list[list[str]]:
    """A sweep --config JSON file as command-line tokens, one list per grid (a key "grids" holds a
    list of objects, each a grid, the other keys shared by all; without it the file is one grid):
    lists joined by commas, true booleans as bare flags, false ones as `--no-X` where the option has
    that form (else left out), everything else as text. Keys must be the sweep options' names in
    full (e.g. "batch_size")."""
    try:
        values = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SystemExit(f"pipebench sweep: --config {path}: " + (f"not UTF-8 text ({e.reason} at byte {e.start})"
                                                                 if isinstance(e, UnicodeDecodeError) else str(e)))
    if not isinstance(values, dict):
        raise SystemExit(f"pipebench sweep: --config {path}: expected a JSON object")
    grids = values.pop("grids", [{}])
    if not isinstance(grids, list) or not grids or not all(isinstance(g, dict) for g in grids):
        raise SystemExit(f"pipebench sweep: --config {path}: \"grids\" must be a list of JSON objects")
    sweep = parser._subparsers._group_actions[0].choices["sweep"]
    options = {o for action in sweep._actions for o in action.option_strings}

    def tokens(part: dict) -> list[str]:
        found = []
        for key, value in part.items():
            flag = "--" + key.replace("_", "-")
            if flag not in options or key in ("config", "out", "help", "grids"):
                raise SystemExit(f"pipebench sweep: --config {path}: unknown key {key!r} (keys are the sweep "
                                 "options' names in full, with _ for -, e.g. \"batch_size\")")
            if value is True:
                found.append(flag)
            elif value is False:
                if "--no-" + flag[2:] in options:
                    found.append("--no-" + flag[2:])
            else:
                found += [flag, ",".join(map(str, value)) if isinstance(value, list) else str(value)]
        return found

    shared = tokens(values)
    return [shared + tokens(grid) for grid in grids]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.debug:   # the configuration processes inherit it
        os.environ["PIPEBENCH_DEBUG"] = "1"
    grids = [args]
    if getattr(args, "config", None) is not None:   # the file's options first: typed ones win
        grids = [parser.parse_args([argv[0], *tokens, *argv[1:]]) for tokens in config_grids(args.config, parser)]
    if args.command in ("compare", "sweep"):
        return run_grid(grids, argv)
    elif args.command == "claims":
        run_claims(args, argv)
    elif args.command == "report":
        csvs = [p / "results.csv" if p.is_dir() else p for p in args.csv]
        missing = [str(p) for p in csvs if not p.is_file()]
        if missing:
            raise SystemExit(f"pipebench report: no such file: {', '.join(missing)} (give run folders holding "
                             "results.csv, or results CSV files)")
        if args.out.exists() and not args.out.is_dir():
            raise SystemExit(f"pipebench report: --out {args.out} is a file: name a folder")
        try:
            from . import report
            path = report.write(csvs, args.out, args.readme)
            record(args.out, ["pipebench", *argv], once=True)
        except ValueError as e:   # an empty CSV, one that is not pipebench's
            raise _fail("report", e) from None
        except OSError as e:   # a folder that cannot be written, a file that cannot be read, a full disk
            name = Path(e.filename or args.out)
            new = name.name.startswith(".") and name.name.endswith(".new")   # results.replace_file's new file
            name = name.with_name(name.name[1:-4]) if new else name
            read = not new and str(name) in {str(p) for p in [*csvs, args.readme] if p}
            hints = [] if read else [f"{name} is left as it was"] * name.is_file() + [
                "choose a writable --out folder"] * (not args.readme or name != args.readme)
            hint = f": {'; '.join(hints)}" if hints else ""
            raise _fail("report", e, f"cannot {'read' if read else 'write'} {name} ({e.strerror or e}){hint}") from None
        except KeyboardInterrupt:
            print("pipebench report: stopped by SIGINT; every file it had not finished is as it was before",
                  file=sys.stderr)
            return 130
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
            print(sources.download_cifar10(args.data_root))
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
