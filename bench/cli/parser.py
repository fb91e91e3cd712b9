"""The command line: every command's options (compare's and sweep's in groups), their one-line
checks (`build_parser`, on the commands of `top.top_parser`), and a sweep's --config file as options
(`config_grids`).
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pipelines
from pipelines.options import clip, echo
from pipelines.config import (DTYPES, IMAGE_SIZE, IMAGEFOLDER, LAST_BATCH, MAX_IMAGE_SIZE, MAXIMUM, SOURCES, PipelineConfig,
                              default_cache_root, default_data_root)

from .. import harness, plan, runner
from ..spec import BUSY_MS, COPIES, MODES, PAYLOADS, STAGES
from ..training import STEPS
from .top import top_parser

MAX_PROCESSES = 1000   # --processes: far above any real use (a typo is one line, not minutes of planning)
MAX_CONFIGURATIONS = 10_000   # --max-configurations: days of measuring at seconds each; a typo's millions, refused
MAX_RANKS = 64   # --ranks: GPUs of one host
MAX_BUSY_MS = 1000.0   # --busy-ms: a second of GPU work per batch is already no training step


def _once(text: str, items: list) -> list:
    """`items` (parsed from `text`) if no value is given twice (it would run the same configurations
    again), else a usage error naming it."""
    seen = set()
    for item in items:
        if item in seen:
            raise argparse.ArgumentTypeError(f"{echo(text)}: {clip(str(item))} is given twice; give each value once")
        seen.add(item)
    return items


def _csv_list(allowed):
    def parse(text: str) -> list[str]:
        items = [t.strip() for t in text.split(",") if t.strip()]
        bad = [t for t in items if t not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"{echo(text)}: expected a comma-separated list of {list(allowed)}")
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
            raise argparse.ArgumentTypeError(f"{echo(text)}: expected {expected}")
        return value
    return parse


def _fraction(text: str) -> float:
    """argparse type: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 1:   # nan fails this too
        raise argparse.ArgumentTypeError(f"{echo(text)}: expected a number from 0 to 1")
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
        raise argparse.ArgumentTypeError(f"{echo(text)}: expected a comma-separated list of {kind}{bounds}")
    return _once(text, items)


def _bounded_list(low: int | None = None, high: int | None = None, step: int = 1):
    return lambda text: _int_list(text, low, high, step)


def _model_list(text: str) -> list[str]:
    """Model specs (checked once the image sizes are known, `plan.grid`); ':' may appear in a spec."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"{echo(text)}: expected a comma-separated list of models")
    return _once(text, items)


def _ms_list(text: str) -> list[float]:
    """argparse type: a list of numbers from 0 to MAX_BUSY_MS (ms)."""
    try:
        items = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        items = []
    if not items or any(not 0 <= v <= MAX_BUSY_MS for v in items):   # NaN fails this too
        raise argparse.ArgumentTypeError(f"{echo(text)}: expected a comma-separated list of numbers from 0 to "
                                         f"{MAX_BUSY_MS:g} (ms per batch)")
    return _once(text, items)


def _claim_list(text: str) -> list:
    from .. import claims
    try:
        chosen = claims.select(t.strip() for t in text.split(",") if t.strip())
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    _once(text, [claim.key for claim in chosen])
    return chosen


def _knob_type(option: pipelines.Option):
    """argparse type of a knob's flag: one value, or (a listed knob) a comma-separated list of them."""
    def one(text: str):
        try:
            return option.parse(text.strip())
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    def many(text: str) -> list:
        items = [one(t) for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"{echo(text)}: expected a comma-separated list, each {option.expected()}")
        return _once(text, items)
    return many if option.listed else one


def _add_knobs(p: argparse.ArgumentParser) -> None:
    """A flag per pipeline knob (`pipelines.options`), its help naming the pipelines that read it."""
    for name, option in plan.knobs().items():
        if not option.cli:
            continue
        readers = ", ".join(n for n in pipelines.names() if name in pipelines.reads(n))
        default = option.none if option.default is None else option.default
        text = f"{'list; ' if option.listed else ''}{readers}: {option.help} (default: {default})"
        if option.kind is bool:
            p.add_argument(option.flag, action="store_true", help=text)
        else:
            p.add_argument(option.flag, type=_knob_type(option), help=text,
                           default=[option.default] if option.listed else option.default)


def _source(text: str) -> str:
    """argparse type of --source: one of SOURCES, or imagefolder:PATH."""
    if text in SOURCES or (text.startswith(IMAGEFOLDER) and len(text) > len(IMAGEFOLDER)):
        return text
    raise argparse.ArgumentTypeError(f"{echo(text)}: expected one of {', '.join(SOURCES)} or imagefolder:PATH")


def _add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-root", default=default_data_root(),
                   help="folder holding cifar-10-batches-py/ or the synthetic cache (default: %(default)s, "
                        "or $PIPEBENCH_DATA)")
    p.add_argument("--source", type=_source, default="auto",
                   help="auto = real CIFAR-10 under --data-root if present, else synthetic; imagefolder:PATH = "
                        "your JPEGs, a folder per class (or train/ and val/ so), read by the pipelines that cut "
                        "ImageNet's crops from photographs (the others: skipped rows) (default: auto)")
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


def _run_parser(p: argparse.ArgumentParser, description: str) -> argparse.ArgumentParser:
    """compare's and sweep's options, in groups (what to measure, the setting, the pipelines' knobs,
    timing, processes and GPUs, data)."""
    p.description = description
    p.usage = "%(prog)s [options]   (below, in groups)"
    g = p.add_argument_group("what to measure")
    g.add_argument("--pipelines", type=_csv_list(pipelines.names()), default=pipelines.names(),
                   help=f"comma-separated, from {','.join(pipelines.names())} (default: all)")
    g.add_argument("--modes", type=_csv_list(MODES),
                   help="comma-separated, from loader (the pipeline alone, at each --busy-ms level), model (the "
                        "training step on one batch), e2e (both), train (--epochs epochs, then test accuracy), stage "
                        "(each stage of a pipeline alone), copy (the bus alone) (default: loader,model,e2e,stage,copy "
                        "on CUDA, loader,model,e2e on CPU)")
    g.add_argument("--models", type=_model_list,
                   help="models for model-only, e2e and train: resnet18, resnet9, resnet9-w<F> (width x F, the "
                        "compute knob), vit-s4, vit-b4 (ViTs on 4x4 patches of 32-px images), torchvision:<name> (e.g. torchvision:resnet50), timm:<name>, "
                        "<module>:<callable> or <file.py>:<callable> returning an nn.Module with 10 outputs "
                        "(default: resnet18 on CUDA, resnet9-w0.25 on CPU; on a CPU above 32 px, "
                        f"{plan.CPU_LARGE['model']})")
    g.add_argument("--stages", type=_csv_list(STAGES), default=list(STAGES),
                   help=f"stage mode: which of {','.join(STAGES)} (default: all)")
    g.add_argument("--copies", type=_csv_list(COPIES), default=list(COPIES),
                   help="copy mode: from pinned and/or pageable memory (default: both)")
    g.add_argument("--payloads", type=_csv_list(PAYLOADS), default=list(PAYLOADS),
                   help="copy mode: images copied as uint8 and/or float32 (default: both)")
    g.add_argument("--busy-ms", type=_ms_list,
                   help="loader mode: the headspace levels, ms per batch the GPU is kept busy by a synthetic "
                        "training step after each batch (bf16 matrix products and memory copies on every SM, "
                        "checked every window; 0: an idle GPU); the report reads each pipeline's loader ceiling "
                        "where it stops keeping up with that step (default: "
                        f"{','.join(f'{b:g}' for b in BUSY_MS)} on CUDA, 0 on CPU)")
    g.add_argument("--sync-every", type=_bounded_list(0),
                   help="list; model-only and e2e: read the loss on the host every N steps (loss.item(), as a loop "
                        "that logs does; it drains the GPU's queue each time), 0 never; each value its own "
                        "configurations (default: 0)")
    g.add_argument("--step", type=_csv_list(STEPS),
                   help="list; the training step of model-only and e2e: eager (as written), graph (the whole "
                        "step captured in one CUDA graph and replayed), compile (torch.compile, then the same "
                        "capture); every kind runs model-only and e2e. graph / compile need CUDA (skipped rows "
                        "elsewhere), last-batch drop, no --parallel dp, no float16 (default: eager,graph on one CUDA GPU; "
                        "eager,compile under torchrun and with --ranks on several GPUs; eager on a CPU and with "
                        "--parallel dp)")
    g.add_argument("--epochs", type=_positive(int), default=10,
                   help="train mode: epochs trained before the test accuracy (default: %(default)s)")
    g = p.add_argument_group("the setting (lists: every combination runs)")
    g.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default: auto)")
    g.add_argument("--image-size", type=_bounded_list(IMAGE_SIZE, MAX_IMAGE_SIZE, IMAGE_SIZE), default=[32],
                   help="list; px per side, multiples of 32: the set upscaled (default: 32)")
    g.add_argument("--batch-size", type=_bounded_list(1, MAXIMUM["batch_size"]),
                   help=f"list; images per batch (default: 512 on CUDA, 64 on CPU, {plan.CPU_LARGE['batch_size']} on "
                        "a CPU above 32 px)")
    g.add_argument("--dtype", type=_csv_list(DTYPES), help="list; batch dtype and autocast (default: "
                                                           "bfloat16 on CUDA, float32 on CPU)")
    g.add_argument("--channels-last", action=argparse.BooleanOptionalAction,
                   help="channels_last batches and model (default: on for CUDA)")
    g.add_argument("--cpus", type=_int_list,
                   help="list; CPU cores per GPU: each configuration (its workers and threads too) runs on that "
                        "many cores, and the worker count follows (cores - 1, at least 1) unless --workers is given "
                        "(default: every core this process may use; under torchrun, an equal share per rank; with "
                        "--ranks, an equal share for the most ranks listed, the same at every rank count)")
    g.add_argument("--workers", type=_int_list,
                   help="list; DataLoader workers / prefetch threads / parallel DALI sources "
                        "(default: cores - 1)")
    g.add_argument("--seed", type=_int_list, default=[0], help="list; shuffle / augmentation seed (default: 0)")
    g.add_argument("--last-batch", choices=LAST_BATCH, default=PipelineConfig.last_batch,
                   help="drop = every timed step has a full batch; partial = each epoch's last, smaller batch "
                        f"too (default: {PipelineConfig.last_batch})")
    g.add_argument("--max-samples", type=_positive(int), help="use only the first N samples of the split "
                   "(default: all on CUDA; 2,048 on a CPU, so an epoch lasts seconds)")
    g = p.add_argument_group("the pipelines' knobs (lists: one variant of the pipelines that read them per value)")
    _add_knobs(g)
    g = p.add_argument_group("timing")
    g.add_argument("--steps", type=_positive(int),
                   help=f"timed steps per window (default: sized by --min-window-s; {plan.CPU_LARGE['steps']} on a CPU "
                        "above 32 px)")
    g.add_argument("--min-window-s", type=_positive(float),
                   help="without --steps: each window lasts at least this many seconds, sized by an untimed run "
                        "first: whole epochs for e2e and stages (model-only: blocks of "
                        f"{harness.MODEL_BLOCK} steps), loader windows too unless an epoch lasts over "
                        f"{harness.LONG_EPOCH} windows "
                        "(default: 2 on CUDA, 0.5 on CPU)")
    g.add_argument("--warmup", type=_positive(int, 0),
                   help=f"untimed steps first (default: 10 on CUDA, 2 on CPU, {plan.CPU_LARGE['warmup']} on a CPU above "
                        "32 px without --steps or --min-window-s)")
    g.add_argument("--repeats", type=_positive(int),
                   help="timed windows per process and configuration (loader: per headspace level) "
                        "(default: 3 on CUDA, 2 on CPU)")
    g.add_argument("--processes", type=_positive(int, maximum=MAX_PROCESSES),
                   help="independent processes per configuration, run in rounds (A B A B), so a range between "
                        "processes shows how much a result moves; the report names no verdict, tie or fastest "
                        f"pipeline from fewer than {plan.MIN_PROCESSES} of {plan.MIN_WINDOWS} windows each (default: "
                        f"{plan.PROCESSES['cuda']} on CUDA, {plan.PROCESSES['cpu']} on CPU)")
    g.add_argument("--timeout", type=_positive(float), default=runner.DEFAULT_TIMEOUT_S,
                   help="seconds one configuration may take (its own process; on expiry its stacks are saved "
                        "under OUT/timeouts/, it is killed with its workers and a `timeout` row written) "
                        "(default: %(default)g)")
    g = p.add_argument_group("processes and GPUs")
    g.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                   help="each configuration (or, with --share-process, each cell's) in its own process with the "
                        "--timeout deadline; --no-isolate runs "
                        "them in this one (starts faster, no deadline; always so under torchrun; --ranks N > 1 always "
                        "in processes of their own) (default: on)")
    g.add_argument("--share-process", action="store_true",
                   help="run the model-only and e2e configurations of one model, step kind, loss reads and CPU "
                        "budget in one process per round (per rank with --ranks or torchrun), sharing its trainer "
                        "(started and compiled once), and the copy configurations of one setting likewise; each "
                        "pipeline still built, warmed up and timed on its own, the one before it released, in the "
                        "order of a Williams design (each right after every other equally often once --processes "
                        "reaches the cell's configurations, twice them for an odd count; fewer: a warning); rows say "
                        "the order (`slot`) (default: each configuration in a process of its own)")
    g.add_argument("--ranks", type=_bounded_list(1, MAX_RANKS),
                   help="list; GPUs of this host each configuration runs on at once, one process per GPU (as "
                        "torchrun --nproc-per-node N would start them; DDP for model and e2e), each rank with its "
                        "1/N shard, its own --cpus cores and the --timeout deadline; 1 = one GPU. On a CPU the "
                        "ranks join over gloo. Under torchrun the job's ranks instead (default: 1)")
    g.add_argument("--parallel", choices=("none", "dp"), default="none",
                   help="model and e2e over several GPUs in one process: dp = torch.nn.DataParallel over "
                        "every visible GPU, fed batch-size x GPUs. For DistributedDataParallel launch the "
                        "same command under torchrun (--nproc-per-node N -m bench.cli ...) instead: each "
                        "process takes one GPU and a 1/N shard of every epoch (default: none)")
    g = p.add_argument_group("output")
    g.add_argument("--out", type=Path, help="output folder (default: runs/<UTC time>-<device>)")
    g.add_argument("--max-configurations", type=_positive(int), default=MAX_CONFIGURATIONS,
                   help="the most configuration processes (configurations x --processes) a run may list; "
                        "more are refused before anything runs, the count said (default: %(default)s)")
    g = p.add_argument_group("data")
    _add_data_args(g)
    return p


def build_parser() -> argparse.ArgumentParser:
    """`pipebench`'s parser: the commands (`top.top_parser`), each with its options."""
    from .. import claims, report, stability
    parser, sub = top_parser()
    commands = sub.choices
    _run_parser(commands["compare"], RUN_HELP)
    p = _run_parser(commands["sweep"], RUN_HELP + " A sweep resumes: configurations that already have --repeats ok "
                    "rows for this environment in OUT/results.csv are skipped.")
    p.add_argument("--config", type=Path, help="JSON file whose keys are these options' names "
                   "(e.g. {\"batch_size\": [256, 512], \"models\": [\"resnet9-w0.5\"]}); a key \"grids\" holds a "
                   "list of such objects, each a grid of its own (the other keys shared), all measured in one "
                   "invocation; options given on the command line win")
    p.add_argument("--resume-other-commit", action="store_true",
                   help="resume into OUT although its rows were measured at another commit (a reference result "
                        "is one commit: by default this is refused)")
    p = commands["report"]
    p.description = ("Generate the report of one or more runs from their results.csv: REPORT.md (every run's "
                     "summary, then what each timer includes and the rules, then each run's sections), SUMMARY.md, "
                     "ANSWER.md and the plots, the same bytes from the same rows; the command is recorded in "
                     "OUT/COMMAND.txt. Rows of different files, commits or machines are never pooled.")
    p.add_argument("csv", nargs="+", type=Path, metavar="RUN", help="run folders (holding results.csv) or "
                   "results CSV files")
    p.add_argument("--out", type=Path, required=True, help="folder for REPORT.md, SUMMARY.md, ANSWER.md, the PNGs and COMMAND.txt")
    p.add_argument("--readme", type=Path, help="also fill every block of this report that this Markdown file "
                   "holds: the summary, the run's answer (ANSWER.md's sentences) and its several-GPU answer (what "
                   "it measured at each GPU count, where the shared bus binds, the prediction for more GPUs per "
                   f"host), each between its lines {report.marks('summary', 'OUT')[0]} (or 'answer' or 'hosts' "
                   "for 'summary'; OUT: --out relative to the file) and its end line; links relative to the file")
    p.add_argument("--prediction-only", action="store_true", help="write only OUT/PREDICTION.md: the prediction "
                   "for 2, 4 and 8 GPUs per host from the run's one-GPU rows alone (its rows of several GPUs are "
                   "never read), so it can be written before they are measured")
    p = commands["claims"]
    p.description = ("Run one small experiment per claim (pageable/pinned copies, non_blocking, pin_memory, "
                     "workers, collate_fn to GPU, AMP, OOM fixes), append tidy rows to OUT/claims.csv and write "
                     "OUT/CLAIMS.md with a verdict per claim generated from the numbers. Claims about CUDA are "
                     "skipped, with the reason, without a GPU. Running again into the same OUT appends; CLAIMS.md "
                     "uses each claim's latest run.")
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
    p = commands["stability"]
    p.description = stability.__doc__.split("\n\n")[1].replace("\n", " ")
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
    p = commands["prepare"]
    _add_data_args(p)
    p.add_argument("--jpeg-quality", type=int, default=90, help="JPEG quality (default: 90)")
    p.add_argument("--photos", type=_positive(int),
                   help="also write a set of N photographs like ImageNet's (ImageFolder layout, labels = the "
                        "source photograph) to DATA_ROOT/photos-seed<--data-seed>, cut from scikit-image's "
                        "bundled photographs (pip install -e '.[photos]') or from --photos-from (default: none)")
    p.add_argument("--photos-from", type=Path, help="a folder of your own JPEG / PNG photographs, one class each, "
                   "to cut the photo set from instead")
    p = commands["download"]
    p.add_argument("--data-root", default=default_data_root(),
                   help="where cifar-10-batches-py/ goes (default: %(default)s, or $PIPEBENCH_DATA)")
    p.add_argument("--root", dest="data_root", help=argparse.SUPPRESS)   # its former name
    for command in commands.values():
        command.add_argument("--debug", action="store_true", help="print the traceback of an error (else one "
                             "line) and keep whole tracebacks in error rows")
    return parser


def config_grids(path: Path, parser: argparse.ArgumentParser) -> list[list[str]]:
    """A sweep --config JSON file as command-line tokens, one list per grid (a key "grids" holds a
    list of objects, each a grid, the other keys shared by all; without it the file is one grid):
    lists joined by commas, true booleans as bare flags, false ones as `--no-X` where the option has
    that form (else left out), everything else as text. Keys must be the sweep options' names in
    full (e.g. "batch_size"); each value is checked as its option checks it, a wrong one refused in
    one line naming the file, the key and what it expects (`_plan_tokens`)."""
    try:
        values = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SystemExit(f"pipebench sweep: --config {path}: " + (f"not UTF-8 text ({e.reason} at byte {e.start})"
                                                                 if isinstance(e, UnicodeDecodeError) else str(e)))
    except RecursionError:   # [[[[...]]]]: a plan nests two levels ("grids", then a list of values)
        raise SystemExit(f"pipebench sweep: --config {path}: nested too deeply for JSON's parser; a plan is an "
                         "object of option names, its values lists at most") from None
    if not isinstance(values, dict):
        raise SystemExit(f"pipebench sweep: --config {path}: expected a JSON object")
    grids = values.pop("grids", [{}])
    if not isinstance(grids, list) or not grids or not all(isinstance(g, dict) for g in grids):
        raise SystemExit(f"pipebench sweep: --config {path}: \"grids\" must be a list of JSON objects")
    sweep = parser._subparsers._group_actions[0].choices["sweep"]
    actions = {o: action for action in sweep._actions for o in action.option_strings}

    def tokens(part: dict, where: str) -> list[str]:
        found = []
        for key, value in part.items():
            flag = "--" + key.replace("_", "-")
            if flag not in actions or key in ("config", "out", "help", "grids"):
                raise SystemExit(f"pipebench sweep: --config {path}: unknown key {echo(key)} (keys are the sweep "
                                 "options' names in full, with _ for -, e.g. \"batch_size\")")
            try:
                found += _plan_tokens(value, actions[flag], flag)
            except ValueError as e:
                raise SystemExit(f"pipebench sweep: --config {path}: {where}{key}: {e}") from None
        return found

    shared = tokens(values, "")
    return [shared + tokens(grid, f"grids[{i}].") for i, grid in enumerate(grids)]


def _plan_tokens(value, action: argparse.Action, flag: str) -> list[str]:
    """One key of a plan as command-line tokens (`config_grids`), checked as its option checks a
    value; a ValueError saying what the option expects and what the plan gave."""
    shown = clip(json.dumps(value))
    if action.nargs == 0:   # a switch: true is the bare flag, false its --no- form where it has one
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {shown}")
        negative = "--no-" + flag[2:]
        return [flag] if value else [negative] * (negative in action.option_strings)
    items = value if isinstance(value, list) else [value]
    if isinstance(value, bool) or not items or any(isinstance(v, (bool, list, dict)) for v in items):
        raise ValueError(f"expected text or a number, or a list of them, got {shown}")
    text = ",".join(map(str, items))
    try:
        parsed = action.type(text) if action.type else text
    except argparse.ArgumentTypeError as e:
        raise ValueError(str(e)) from None
    except ValueError:   # a plain type such as int
        kind = "an integer" if action.type is int else f"a {action.type.__name__}"
        raise ValueError(f"{echo(text)}: expected {kind}") from None
    if action.choices is not None and parsed not in action.choices:
        raise ValueError(f"expected one of {', '.join(map(str, action.choices))}, got {shown}")
    return [flag, text]
