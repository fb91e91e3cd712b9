"""pipebench's top level, light: the commands, `pipebench --help` and `--version` (`top_parser`),
answered without importing torch or a pipeline; `parser.build_parser` adds each command's options
(`light.light_parser` the same options without torch, for help and usage errors).

`LINE_LIMIT` and `clip` are `pipelines.options`' own, read without the package's torch
(`bench.values.pipelines_module`).
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from ..values import pipelines_module

DESCRIPTION = ("How fast can PyTorch input pipelines feed a training loop? Each pipeline timed alone, the model "
               "alone and both together, on CIFAR-10 or your photographs; the answer says which keeps each model fed.")
COMMANDS = {   # what `pipebench --help` says of each command
    "compare": "time every available pipeline loader-only, model-only and end-to-end",
    "sweep": "run a grid of configurations (lists, or --config plan.json), resumable in --out DIR",
    "report": "write REPORT.md and plots from runs' results",
    "claims": "test the common advice on feeding a GPU (pin_memory, non_blocking, workers, AMP...), one "
              "experiment per claim: CLAIMS.md",
    "stability": "many epochs per pipeline, memory after each: leaks show as climbing lines",
    "prepare": "generate/validate the data and write its JPEG copy (and a photo set)",
    "download": "download the genuine CIFAR-10 with torchvision (network)",
    "list": "registered pipelines and whether each can run here",
    "env": "print the environment recorded with every result",
}
EPILOG = "`pipebench COMMAND --help` for a command's options; errors are one line, --debug shows the traceback."
LINE_LIMIT = pipelines_module("options").LINE_LIMIT   # characters of a whole error line
clip = pipelines_module("options").clip


class Parser(argparse.ArgumentParser):
    """argparse's parser, its own messages ("unrecognized arguments: ...") cut short
    (`pipelines.options.clip`): a megabyte value is not printed back."""

    def error(self, message: str):
        super().error(clip(message, LINE_LIMIT))


def version() -> str:
    """The installed pipebench's version, else (run from a checkout) the one in its pyproject.toml."""
    import importlib.metadata   # here: it takes longer to import than the rest of `pipebench` before `main`
    try:
        return importlib.metadata.version("pipebench")
    except importlib.metadata.PackageNotFoundError:
        text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
        return re.search(r'^version = "(.+)"', text, re.M)[1]


def top_parser() -> tuple[Parser, argparse._SubParsersAction]:
    """The parser of `pipebench` and its commands, each without its options yet (`parser.build_parser`
    adds them); compare and sweep take no abbreviated option."""
    parser = Parser(prog="pipebench", description=DESCRIPTION, allow_abbrev=False, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(title="commands", dest="command", required=True, metavar="COMMAND")
    for name, text in COMMANDS.items():
        sub.add_parser(name, help=text, description=text, allow_abbrev=name not in ("compare", "sweep"))
    return parser, sub
