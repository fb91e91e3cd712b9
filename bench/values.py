"""The command line's value types, without torch: each a small frozen class whose call parses one
option's text (a bad value is an `argparse.ArgumentTypeError` in one line naming it) and whose `spec`
says, as data, what it accepts, so that `bench.cli.light` makes the same check again from
`bench/cli/shapes.py` and refuses a bad value before torch and the pipelines are imported (issue 69:
`sweep --steps -1` took 7.8 s to say so). The settings (`bench.results.settings`), the run options
(`bench.running.options`) and the parsers take their types from here.

A knob's values are its `pipelines.options.Option`'s. That module and `pipelines.config`, which it
imports, import the standard library alone, but importing them as `pipelines.*` runs the package's
`__init__`, which imports torch: so, until the package is imported, they are read from their files
as `bench._pipelines.*` (`pipelines_module`; tests/test_cli.py checks that a bad knob value is refused
with torch never imported).
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import math
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KINDS = {"int": int, "float": float, "str": str, "bool": bool}
MAX_PARTS = 100   # --part K/N: N at most this


def pipelines_module(name: str):
    """`pipelines.<name>` (`options` or `config`): the package's where it is imported, else read from
    its file without the package's __init__ (module docstring)."""
    if f"pipelines.{name}" in sys.modules:
        return sys.modules[f"pipelines.{name}"]
    package = f"{__package__}._pipelines"
    if package not in sys.modules:
        module = types.ModuleType(package)
        module.__path__ = list(importlib.util.find_spec("pipelines").submodule_search_locations)
        sys.modules[package] = module
    return importlib.import_module(f"{package}.{name}")


def echo(value) -> str:
    return pipelines_module("options").echo(value)


def clip(text: str, *limit: int) -> str:
    return pipelines_module("options").clip(text, *limit)


def pieces(text: str) -> list[str]:
    """The comma-separated pieces of `text`, stripped, empty ones left out."""
    return [t.strip() for t in text.split(",") if t.strip()]


def once(text: str, items: list) -> list:
    """`items` (parsed from `text`) if no value is given twice (it would run the same configurations
    again), else a usage error naming it."""
    seen = set()
    for item in items:
        if item in seen:
            raise argparse.ArgumentTypeError(f"{echo(text)}: {clip(str(item))} is given twice; give each value once")
        seen.add(item)
    return items


def build(spec: tuple):
    """The value type `spec` (a type's `spec()`, or `("int", {})`) describes."""
    name, fields = spec
    if name == "int":
        return int
    if name == "Knob":
        return Knob.of(**fields)
    return {cls.__name__: cls for cls in _Value.__subclasses__()}[name](**fields)


def positive(kind: type, minimum: int = 1, maximum: float | None = None) -> Positive:
    """A number of `kind` (int or float) >= minimum (> 0 and finite for floats), at most `maximum`."""
    return Positive(kind.__name__, minimum, maximum)


class _Value:
    """A value type (frozen, compared and hashed by identity: argparse looks a type up in a dict)."""

    def spec(self) -> tuple:
        """(its class's name, its fields): what `build` makes it again from."""
        return type(self).__name__, dataclasses.asdict(self)


@dataclass(frozen=True, eq=False)
class Choices(_Value):
    """A comma-separated list of values from `allowed` (a sequence, or a callable returning one: the
    registry's pipelines, read when a value is parsed)."""
    allowed: Any

    def known(self) -> list:
        return list(self.allowed() if callable(self.allowed) else self.allowed)

    def spec(self) -> tuple:
        return "Choices", {"allowed": self.known()}

    def __call__(self, text: str) -> list[str]:
        known = self.known()
        items = pieces(text)
        if not items or any(t not in known for t in items):
            raise argparse.ArgumentTypeError(f"{echo(text)}: expected a comma-separated list of {known}")
        return once(text, items)


@dataclass(frozen=True, eq=False)
class Positive(_Value):
    """A number of `kind` ("int" or "float") >= minimum (> 0 and finite for floats), at most `maximum`."""
    kind: str
    minimum: int = 1
    maximum: float | None = None

    def __call__(self, text: str):
        kind = KINDS[self.kind]
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or (value < self.minimum if kind is int else value <= 0) \
                or (self.maximum is not None and value > self.maximum):
            expected = (f"an integer from {self.minimum:,} to {self.maximum:,}" if kind is int and self.maximum is not None
                        else f"an integer >= {self.minimum}" if kind is int else
                        f"a number > 0, at most {self.maximum:,g}" if self.maximum is not None else "a number > 0")
            raise argparse.ArgumentTypeError(f"{echo(text)}: expected {expected}")
        return value


@dataclass(frozen=True, eq=False)
class Integers(_Value):
    """Comma-separated integers, each from `low` to `high` (where given) and a multiple of `step`."""
    low: int | None = None
    high: int | None = None
    step: int = 1

    def __call__(self, text: str) -> list[int]:
        try:
            items = [int(t) for t in pieces(text)]
        except ValueError:
            items = []
        if not items or any((self.low is not None and v < self.low) or (self.high is not None and v > self.high)
                            or v % self.step for v in items):
            bounds = (f" from {self.low:,}" if self.low is not None else "") + \
                     (f" to {self.high:,}" if self.high is not None else "")
            kind = f"multiples of {self.step}" if self.step > 1 else "integers"
            raise argparse.ArgumentTypeError(f"{echo(text)}: expected a comma-separated list of {kind}{bounds}")
        return once(text, items)


@dataclass(frozen=True, eq=False)
class Milliseconds(_Value):
    """A comma-separated list of numbers from 0 to `maximum` (ms per batch)."""
    maximum: float

    def __call__(self, text: str) -> list[float]:
        try:
            items = [float(t) for t in pieces(text)]
        except ValueError:
            items = []
        if not items or any(not 0 <= v <= self.maximum for v in items):   # NaN fails this too
            raise argparse.ArgumentTypeError(f"{echo(text)}: expected a comma-separated list of numbers from 0 to "
                                             f"{self.maximum:g} (ms per batch)")
        return once(text, items)


@dataclass(frozen=True, eq=False)
class Models(_Value):
    """Model specs (checked once the image sizes are known, `plan.grid`); ':' may appear in a spec."""

    def __call__(self, text: str) -> list[str]:
        items = pieces(text)
        if not items:
            raise argparse.ArgumentTypeError(f"{echo(text)}: expected a comma-separated list of models")
        return once(text, items)


@dataclass(frozen=True, eq=False)
class Source(_Value):
    """--source: one of `sources`, or `prefix` + a path (imagefolder:PATH)."""
    sources: tuple
    prefix: str

    def __call__(self, text: str) -> str:
        if text in self.sources or (text.startswith(self.prefix) and len(text) > len(self.prefix)):
            return text
        raise argparse.ArgumentTypeError(f"{echo(text)}: expected one of {', '.join(self.sources)} or "
                                         f"{self.prefix}PATH")


@dataclass(frozen=True, eq=False)
class Device(_Value):
    """--device: auto, cpu, cuda or cuda:N (N a GPU's index); checked before torch reads it, which
    takes names such as `mps` or `meta` the suite cannot run on and fails on others with a traceback."""

    def __call__(self, text: str) -> str:
        kind, colon, index = text.partition(":")
        if text in ("auto", "cpu", "cuda") or (kind == "cuda" and colon and index.isdigit() and index.isascii()):
            return text
        raise argparse.ArgumentTypeError(f"{echo(text)}: expected auto, cpu, cuda or cuda:N (N a GPU's index)")


@dataclass(frozen=True, eq=False)
class Folder(_Value):
    """--out: a folder to write into, any path but the empty one (which `Path` reads as the current
    folder: a run's files would land there)."""

    def __call__(self, text: str) -> Path:
        if not text:
            raise argparse.ArgumentTypeError("'': expected a folder (an empty path would be the current folder)")
        return Path(text)


@dataclass(frozen=True, eq=False)
class PartOf(_Value):
    """K/N, 1 <= K <= N <= MAX_PARTS: part K of a plan cut in N."""

    def __call__(self, text: str) -> tuple[int, int]:
        k, _, n = text.partition("/")
        if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n) <= MAX_PARTS):
            raise argparse.ArgumentTypeError(f"{echo(text)}: expected K/N, part K of N (1 <= K <= N <= {MAX_PARTS}), "
                                             "e.g. 1/3")
        return int(k), int(n)


@dataclass(frozen=True, eq=False)
class Knob(_Value):
    """A pipeline knob's flag (`pipelines.options.Option`): one value, or (a listed knob) a
    comma-separated list of them."""
    option: Any

    FIELDS = ("name", "kind", "choices", "low", "high", "none", "listed")   # what its values depend on

    @classmethod
    def of(cls, **fields) -> Knob:
        fields.update(kind=KINDS[fields["kind"]], choices=tuple(fields["choices"]))
        return cls(pipelines_module("options").Option(default=None, help="", **fields))

    def spec(self) -> tuple:
        fields = {f: getattr(self.option, f) for f in self.FIELDS}
        return "Knob", {**fields, "kind": self.option.kind.__name__, "choices": list(self.option.choices)}

    def one(self, text: str):
        try:
            return self.option.parse(text.strip())
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    def __call__(self, text: str):
        if not self.option.listed:
            return self.one(text)
        items = [self.one(t) for t in pieces(text)]
        if not items:
            raise argparse.ArgumentTypeError(f"{echo(text)}: expected a comma-separated list, each "
                                             f"{self.option.expected()}")
        return once(text, items)
