"""pipebench: how fast can PyTorch input pipelines feed a training loop? CIFAR-10, measured.

The commands: `top.COMMANDS` (what `pipebench --help` shows).

One module per command: `measure` (compare, sweep), `claims`, `stability`, and `main` (dispatch,
and the small commands); `top` holds the commands, `parser` every command's options, `common` what
they share. `light` makes the same parsers without torch from `shapes` (generated from `parser`'s):
they answer every help, `--version` and usage error in a fraction of a second.
Light imports only: DataLoader workers and configuration processes import the main module again
(multiprocessing's start-up runs the main script); everything but `main` and `top` is imported
where it is used (this package's other names on first use).
"""
import importlib

from .main import main

_LAZY = {"build_parser": "parser", "config_grids": "parser", "resume_command": "measure", "specs_for": "measure",
         "summary": "measure", "version": "top"}

__all__ = ["build_parser", "config_grids", "main", "resume_command", "specs_for", "summary", "version"]


def __getattr__(name: str):
    """`bench.cli.build_parser` and the others, imported on first use (torch with them)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
