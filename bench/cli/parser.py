"""The command line: every command's options (compare's and sweep's from `bench.running.options`, in
groups, what a first run gives first), their one-line checks (`build_parser`, on the commands of
`top.top_parser`), and a sweep's --config file as options (`config_grids`).

Their shape, types as `bench.values` describes them, is in `shapes` (`light`: help and usage errors
without torch): after changing an option, or a setting or knob it is made from, `python -m
bench.cli.light` rewrites it.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pipelines
from pipelines.options import clip, echo
from pipelines.config import default_data_root

from ..values import Choices, Folder, once, pieces, positive
from ..running.options import RUN_HELP, add_data_options, add_device, run_options
from .top import top_parser

def _claim_list(text: str) -> list:
    from .. import claims
    if not pieces(text):
        raise argparse.ArgumentTypeError(f"{echo(text)}: expected a comma-separated list of claims (numbers 1-"
                                         f"{len(claims.CLAIMS)} or names)")
    try:
        chosen = claims.select(pieces(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    once(text, [claim.key for claim in chosen])
    return chosen


def build_parser() -> argparse.ArgumentParser:
    """`pipebench`'s parser: the commands (`top.top_parser`), each with its options."""
    from .. import report
    parser, sub = top_parser()
    commands = sub.choices
    run_options(commands["compare"], RUN_HELP)
    p = run_options(commands["sweep"], RUN_HELP + " A sweep resumes: configurations that already have --repeats ok "
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
                     "OUT/COMMAND.txt. Rows of different files, commits or machines are never pooled; several runs "
                     "(a plan's parts, sweep --part) also give one table of their e2e cells, each cell naming its run.")
    p.add_argument("csv", nargs="+", type=Path, metavar="RUN", help="run folders (holding results.csv) or "
                   "results CSV files")
    p.add_argument("--out", type=Folder(), help="folder for REPORT.md, SUMMARY.md, ANSWER.md, the PNGs and COMMAND.txt "
                   "(default: the run folder, where one is given)")
    p.add_argument("--readme", type=Path, help="also fill every block of this report that this Markdown file "
                   "holds: of one run the summary, its answer (ANSWER.md's sentences) and its several-GPU answer (what "
                   "it measured at each GPU count, where the shared bus binds, the prediction for more GPUs per "
                   "host); of several runs the table gathered from them; each between its lines "
                   f"{report.marks('summary', 'OUT')[0]} (or 'answer', 'hosts' or 'table' for 'summary'; OUT: --out "
                   "relative to the file) and its end line; links relative to the file")
    p.add_argument("--prediction-only", action="store_true", help="write only OUT/PREDICTION.md: the prediction "
                   "for 2, 4 and 8 GPUs per host from the run's one-GPU rows alone (its rows of several GPUs are "
                   "never read), so it can be written before they are measured")
    _claims_options(commands["claims"])
    _stability_options(commands["stability"])
    _prepare_options(commands["prepare"])
    p = commands["download"]
    p.add_argument("--data-root", default=default_data_root(),
                   help="where cifar-10-batches-py/ goes (default: %(default)s, or $PIPEBENCH_DATA)")
    p.add_argument("--root", dest="data_root", help=argparse.SUPPRESS)   # its former name
    for command in commands.values():
        command.add_argument("--debug", action="store_true", help="print the traceback of an error (else one "
                             "line) and keep whole tracebacks in error rows")
    return parser


def _claims_options(p: argparse.ArgumentParser) -> None:
    """`pipebench claims`'s options."""
    from .. import claims
    p.description = ("Run one small experiment per claim (pageable/pinned copies, non_blocking, pin_memory, "
                     "workers, collate_fn to GPU, AMP, OOM fixes), append tidy rows to OUT/claims.csv and write "
                     "OUT/CLAIMS.md with a verdict per claim generated from the numbers. Claims about CUDA are "
                     "skipped, with the reason, without a GPU. Running again into the same OUT appends; CLAIMS.md "
                     "uses each claim's latest run.")
    p.add_argument("--claims", type=_claim_list, default=claims.CLAIMS,
                   help=f"comma-separated numbers 1-{len(claims.CLAIMS)} or names {','.join(claims.KEYS)} (default: all)")
    add_device(p)
    p.add_argument("--workers", type=int, help="DataLoader workers / prefetch threads where a claim does not "
                   "vary them (default: cores - 1)")
    p.add_argument("--quick", action="store_true", help="tiny sizes (seconds on a CPU): checks that every "
                   "experiment runs; the numbers mean little")
    p.add_argument("--report-only", action="store_true", help="rebuild OUT/CLAIMS.md from OUT/claims.csv, measure nothing")
    p.add_argument("--seed", type=int, default=0, help="shuffle / augmentation seed (default: 0)")
    p.add_argument("--out", type=Folder(), help="output folder (default: runs/claims-<UTC time>-<device>)")
    add_data_options(p)


def _stability_options(p: argparse.ArgumentParser) -> None:
    """`pipebench stability`'s options."""
    from ..studies import stability
    p.description = stability.__doc__.split("\n\n")[1].replace("\n", " ")
    p.add_argument("--pipelines", type=Choices(pipelines.names()), default=pipelines.names(),
                   help="comma-separated (default: all; unavailable ones are left out)")
    p.add_argument("--epochs", type=positive(int, stability.MIN_EPOCHS), default=20,
                   help=f"epochs per pipeline, at least {stability.MIN_EPOCHS}: memory growth is measured from epoch "
                        f"{stability.SETTLE} (counting from 0) to the last (default: %(default)s)")
    p.add_argument("--batch-size", type=positive(int), help="images per batch (default: 512 on CUDA, 64 on CPU)")
    p.add_argument("--workers", type=positive(int), help="DataLoader workers / prefetch threads / parallel DALI "
                   "sources (default: cores - 1)")
    p.add_argument("--max-samples", type=positive(int), help="use only the first N samples of the split")
    add_device(p)
    p.add_argument("--out", type=Folder(), required=True, help="folder for stability.csv, STABILITY.md, stability.png")
    add_data_options(p)


def _prepare_options(p: argparse.ArgumentParser) -> None:
    """`pipebench prepare`'s options."""
    add_data_options(p)
    p.add_argument("--jpeg-quality", type=positive(int, 1, 100), default=90, help="JPEG quality, 1 to 100 (default: 90)")
    p.add_argument("--photos", type=positive(int),
                   help="also write a set of N photographs like ImageNet's (ImageFolder layout, labels = the "
                        "source photograph) to DATA_ROOT/photos-seed<--data-seed>, cut from scikit-image's "
                        "bundled photographs (pip install -e '.[photos]') or from --photos-from (default: none)")
    p.add_argument("--photos-from", type=Path, help="a folder of your own JPEG / PNG photographs, one class each, "
                   "to cut the photo set from instead")


def config_grids(path: Path, parser: argparse.ArgumentParser) -> list[list[str]]:
    """A sweep --config JSON file as command-line tokens, one list per grid (a key "grids" holds a
    list of objects, each a grid, the other keys shared by all; without it the file is one grid):
    lists joined by commas, true booleans as bare flags, false ones as `--no-X` where the option has
    that form (else left out), everything else as text. Keys must be the sweep options' names in
    full (e.g. "batch_size"); each value is checked as its option checks it, a wrong one refused in
    one line naming the file, the key and what it expects (`_plan_tokens`)."""
    try:
        values = json.loads(path.read_text(), object_pairs_hook=_each_key_once)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SystemExit(f"pipebench sweep: --config {path}: " + (f"not UTF-8 text ({e.reason} at byte {e.start})"
                                                                 if isinstance(e, UnicodeDecodeError) else str(e)))
    except ValueError as e:   # a key given twice (`_each_key_once`)
        raise SystemExit(f"pipebench sweep: --config {path}: {e}") from None
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


def _each_key_once(pairs: list[tuple]) -> dict:
    """A JSON object of a plan, refusing a key given twice (JSON's parser keeps the last one silently)."""
    keys = [key for key, _ in pairs]
    twice = next((key for key in keys if keys.count(key) > 1), None)
    if twice is not None:
        raise ValueError(f"the key {echo(twice)} is given twice in one object; give each key once")
    return dict(pairs)


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
