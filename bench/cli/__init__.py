"""pipebench: how fast can PyTorch input pipelines feed a training loop? CIFAR-10, measured.

The commands: `parser.COMMANDS` (what `pipebench --help` shows).

One module per command: `measure` (compare, sweep), `claims`, `stability`, and `main` (dispatch,
and the small commands); `parser` holds every command's options, `common` what they share.
Light imports only: DataLoader workers and configuration processes import the main module again
(multiprocessing's start-up runs the main script); claims, report and stability are imported
where they are used.
"""
from .main import main
from .measure import resume_command, specs_for, summary
from .parser import build_parser, config_grids, version

__all__ = ["build_parser", "config_grids", "main", "resume_command", "specs_for", "summary", "version"]
