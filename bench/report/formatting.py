"""Numbers as text: rates with their ranges, shares, plurals, code spans, Markdown tables, names
from the data made safe in Markdown (`escape`, `code`) and in a UTF-8 file (`shown`), a
run's epoch length (`epoch_text`), a row's GPU, torch and commit (`machine_text`), and words that
depend on the rows: " per GPU" or nothing on a CPU (`per_gpu`).
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


def machine_text(row) -> str:
    """What a study's report names its rows by: their GPU, torch version and commit."""
    return f"{row.get('gpu', '')}, torch {row.get('torch', '')}, commit {row.get('git_commit', '')}"


def per_gpu(devices) -> str:
    """" per GPU" after a core count, "" for rows that ran on no GPU (`device` cpu: the cores are the
    machine's); a row that never ran (skipped: no device) says nothing either way."""
    ran = [str(d) for d in devices if isinstance(d, str) and d]
    return "" if ran and all(d.startswith("cpu") for d in ran) else " per GPU"


def table_cell(text: str) -> str:
    """Markdown of our own (code spans, links) as one table cell: no `|` splits the row (`escape`
    for text from the data)."""
    return text.replace("|", "\\|")


# A word GFM would make a link of by itself (an autolink: `https://…`, `www.…`, `name@host.domain`)
LINKABLE = re.compile(r"[^\s|`]*(?:://|www\.|@[\w-]*\.\w)[^\s|`]*", re.I)


def escape(text: object) -> str:
    """Text from a CSV cell made safe inside a Markdown table: no table breaks, no HTML, no links or
    formatting read from the data, one line; an underscore inside a word (which GFM never reads as
    emphasis) kept as it is, so knob names read plainly. A word GFM would link by itself (a URL, an
    e-mail address: `LINKABLE`) is a code span, shown as written and never a link."""
    text, parts, at = " ".join(str(text).split()), [], 0
    for word in LINKABLE.finditer(text):
        parts += [_escaped(text[at:word.start()]), code(word.group())]
        at = word.end()
    return "".join([*parts, _escaped(text[at:])])


def _escaped(text: str) -> str:
    """`escape` of text that holds no `LINKABLE` word."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = re.sub(r"([\\`*\[\]|#!~])", r"\\\1", text)   # `~`: GFM's strikethrough
    return re.sub(r"(?<!\w)_|_(?!\w)", r"\\_", text)   # inside a word (dali_decoder) `_` makes no emphasis


def code(name: object) -> str:
    """A pipeline or model name from the data as inline code (backticks removed from it): shown as
    written, no formatting and no link (GFM makes no autolink inside one)."""
    return "`" + " ".join(str(name).replace("`", "'").split()) + "`"


def shown(text: str) -> str:
    """Text that can be written as UTF-8: the bytes of a file name that are not UTF-8 (the surrogates
    `os.fsdecode` gives them) written as `\\xff`, as Python escapes them; other text as it is."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:   # a surrogate no file name's byte gives
        raw = text.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


def table(frame: pd.DataFrame) -> str:
    """A Markdown table; a `|` in a cell (code spans too, where a backslash does not escape it outside
    a table) is escaped, so every row keeps its columns."""
    cells = frame.map(lambda v: re.sub(r"(?<!\\)\|", r"\\|", v) if isinstance(v, str) else v)
    return cells.to_markdown(index=False) if len(frame) else ""


def epoch_text(group: pd.DataFrame) -> str | None:
    """A run's epoch length from its pipeline rows' `samples` and `steps_per_epoch`: "an epoch: 25,000
    samples in 48 steps of 512" (per rank under several; every length the run used, "or"-joined);
    "epoch length not recorded" for rows from before those columns; None for a run without pipeline rows."""
    ok = group[(group.status == "ok") & (group.pipeline != "none")]
    if ok.empty:
        return None
    if "steps_per_epoch" not in ok or "samples" not in ok or ok.steps_per_epoch.isna().all():
        return "epoch length not recorded"
    lengths = ok[ok.steps_per_epoch.notna()].groupby(["samples", "world_size", "steps_per_epoch", "batch_size"]).size()
    return "an epoch: " + " or ".join(f"{samples:,.0f} samples{' per rank' if ranks > 1 else ''} in "
                                      f"{plural(int(steps), 'step')} of {batch:.0f}"
                                      for samples, ranks, steps, batch in sorted(lengths.index, reverse=True))
