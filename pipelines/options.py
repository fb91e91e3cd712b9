"""A pipeline's knobs, declared once where the pipeline lives.

Every pipeline class lists the knobs it reads beyond those every pipeline reads (size, batch,
dtype, ...) in its `options` attribute, as `Option`s. Everything else is generated from those
declarations: `PipelineConfig` accepts and validates them (`PipelineConfig(prefetch_depth=4)`),
`pipebench` turns each into a command-line flag, the sweep plan runs a pipeline's variants only
over the knobs it reads, every results row has a column per knob (empty where its pipeline does
not read it), and the report names a variant by the knobs it reads. Adding a knob is one `Option`
in its pipeline's `options`.

Knobs read by several pipelines are declared here; a pipeline's own knobs in its module. A value
a user gave is shown in an error by `echo` (cut after ECHO_LIMIT characters, its length said).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .config import WORKER_START_METHODS

ECHO_LIMIT = 200   # characters of a user's value an error message shows
LINE_LIMIT = 2000   # characters of a whole error line (its values cut to ECHO_LIMIT, the reason whole)


def clip(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text` cut after `limit` characters, its length said (a 50 MB name is not printed back)."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def echo(value) -> str:
    """`value` as an error message shows it: its repr, cut after ECHO_LIMIT characters (`clip`)."""
    if isinstance(value, str) and len(value) > ECHO_LIMIT:
        return f"{value[:ECHO_LIMIT]!r}… ({len(value):,} characters)"
    return clip(repr(value))


@dataclass(frozen=True)
class Option:
    """One knob: its name (a `PipelineConfig` keyword and a results column), default, help line, the
    values it accepts, and how it varies in a sweep.

    `kind`: int, float, str or bool; `choices` (str), `low` / `high` (int, float) bound it; `none`
    (None allowed, with what it means in the help). `listed`: the flag takes a comma-separated list,
    one variant of the pipeline per value. `within`: a label names it only where it varies within one
    CPU budget and image size (worker and queue counts, which a sweep varies per budget) instead of
    wherever it varies. `cli`: False for a knob the command line sets otherwise (the worker count,
    per CPU budget). A knob may be a `PipelineConfig` field every pipeline can be given
    (`num_workers`, `encoding`): declaring it says which pipelines read it."""

    name: str
    default: Any
    help: str
    kind: type = int
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    none: str = ""
    listed: bool = False
    within: bool = False
    cli: bool = True

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def refusal(self, value) -> str:
        """Why `value` is not a value of this knob ("" if it is)."""
        if value is None:
            return "" if self.none else f"PipelineConfig.{self.name}=None: expected {self.expected()}"
        if self.kind is float:
            ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))
        else:
            ok = isinstance(value, self.kind) and (self.kind is bool or not isinstance(value, bool))
        ok = ok and (not self.choices or value in self.choices)
        ok = ok and (self.low is None or value >= self.low) and (self.high is None or value <= self.high)
        return "" if ok else f"PipelineConfig.{self.name}={echo(value)}: expected {self.expected()}"

    def expected(self) -> str:
        if self.choices:
            text = f"one of {self.choices}"
        elif self.kind is bool:
            text = "True or False"
        elif self.kind is float:
            text = f"a number from {self.low:g} to {self.high:g}"
        else:
            text = f"an integer from {self.low} to {self.high}" if self.high is not None else f"an integer >= {self.low}"
        return ("None or " if self.none else "") + text

    def parse(self, text: str):
        """One command-line value of a knob that is no switch (argparse's `type`): a one-line error
        for a bad one; "none" is None where the knob takes None."""
        if self.none and text.lower() == "none":
            return None
        try:
            value = self.kind(text)
        except ValueError:
            value = text
        if self.refusal(value):
            raise ValueError(f"{echo(text)}: expected {self.expected()}")
        return value


# Knobs read by more than one pipeline (which ones: their `options`).
NUM_WORKERS = Option("num_workers", None, "worker processes / threads (a PipelineConfig field; default: the usable "
                     "cores - 1, at least 1)", low=0, high=256, within=True, cli=False)
WORKER_START = Option("worker_start", "forkserver", "how DataLoader workers start (forkserver re-imports your main "
                      "module: keep the loop under `if __name__ == '__main__':`)", kind=str, choices=WORKER_START_METHODS)
PREFETCH_DEPTH = Option("prefetch_depth", 2, "batches in flight ahead of the consumer", low=1, high=64, within=True)
BATCHES_PER_LAUNCH = Option("batches_per_launch", 8, "at most this many batches per round of launches (fewer where "
                            "their images pass 32 MiB)", low=1, high=64, within=True)
ENCODING = Option("encoding", "raw", "what is read per sample: raw uint8 pixels, or the cached JPEG copy (decoded "
                  "per sample)", kind=str, choices=("raw", "jpeg"), listed=True)
