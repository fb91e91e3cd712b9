"""Numbers as text: rates with their ranges, shares, plurals, code spans and Markdown tables.
"""
from __future__ import annotations

import math
import re

import pandas as pd


def pct(share: float) -> str:
    """A share as a percentage rounded down to 0.1, so it never shows a threshold it misses."""
    return f"{math.floor(share * 1000 + 1e-9) / 10:.1f}%"


def rate(row) -> str:
    return f"{row.img_per_s:,.0f} [{row.lo:,.0f}–{row.hi:,.0f}] n={row.n}/{row.p}"


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def escape(text: object) -> str:
    """Text from a CSV cell made safe inside a Markdown table: no table breaks, no HTML, no links or
    formatting read from the data, one line."""
    text = " ".join(str(text).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`*_\[\]|#!])", r"\\\1", text)


def code(name: object) -> str:
    """A pipeline or model name from the data as inline code (backticks removed from it)."""
    return "`" + " ".join(str(name).replace("`", "'").split()) + "`"


def table(frame: pd.DataFrame) -> str:
    """A Markdown table; a `|` in a cell (code spans too, where a backslash does not escape it outside
    a table) is escaped, so every row keeps its columns."""
    cells = frame.map(lambda v: re.sub(r"(?<!\\)\|", r"\\|", v) if isinstance(v, str) else v)
    return cells.to_markdown(index=False) if len(frame) else ""
