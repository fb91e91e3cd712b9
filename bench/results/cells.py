"""A results file's text: what makes it damaged (`records`: bytes that are not UTF-8, a row of more or
fewer fields than its header), said in one line naming the file and the line; and its cells kept
from being read as formulas by a spreadsheet (`guard`, undone by `unguard` as the file is read).

A cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return (a run id from an `--out`
folder named `=cmd|...`, a model spec `@evil.py:build`) is written with a `'` before it, which a
spreadsheet takes as "text" and `unguard` removes again, so the suite reads back the name as it was
given; a number (`-0.5`, `+1e-3`) is written as it is. A cell that starts with `'` followed by one of
those characters (or by another `'`) gets one `'` more, so every cell reads back exactly.
"""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pandas as pd

FORMULA = "=+-@\t\r"   # what a spreadsheet reads as the start of a formula (OWASP's CSV injection list)
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)", re.I)
MAY_BE_GUARDED = re.compile(rb'(?:^|,)"?\'', re.M)   # a CSV cell (quoted or not) that starts with '


def guard(value: object) -> object:
    """`value` as a results cell: a text a spreadsheet would read as a formula with a `'` before it
    (module docstring); anything else as it is."""
    if not isinstance(value, str) or not value:
        return value
    if value[0] in FORMULA and not NUMBER.fullmatch(value) or value[0] == "'" and value[1:2] and value[1] in FORMULA + "'":
        return "'" + value
    return value


def may_be_guarded(data: bytes) -> bool:
    """Whether a results file's `data` may hold a cell that `guard` marked: one that starts with `'`.
    Where not, `unguard` has nothing to do (it costs tens of ms a file, the report reads hundreds)."""
    return MAY_BE_GUARDED.search(data) is not None


def unguard(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` (rows as read) with the `'` that `guard` put before a cell removed: every cell as written."""
    for column in frame.columns:
        cells = frame[column]
        if not (pd.api.types.is_string_dtype(cells) or cells.dtype == object):
            continue
        text = cells.where(cells.map(lambda v: isinstance(v, str)), "")
        marked = text.str.startswith("'") & text.str[1:2].isin(list(FORMULA + "'"))
        if marked.any():
            frame.loc[marked, column] = text[marked].str[1:]
    return frame


def guarded_csv(frame: pd.DataFrame, **options) -> str:
    """`frame` as CSV text, every cell `guard`ed."""
    return frame.map(guard).to_csv(index=False, lineterminator="\n", **options)


def records(path: str | Path, data: bytes, required: list[str]) -> list[int]:
    """The line of each row (blank lines left out, as pandas does) of a results file's `data`;
    ValueError in one line naming the file where it is not UTF-8 text, its header lacks a `required`
    column (not pipebench's), or a row has more or fewer fields than the header (damaged)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ValueError(f"{path}, line {line:,}: not UTF-8 text ({e.reason} at byte {e.start:,}): a damaged "
                         "results file, or not one") from None
    reader, lines, header = csv.reader(io.StringIO(text, newline="")), [], None
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, len(data) + 1))   # a long error cell is no damage
    try:
        for row in reader:
            if not row or len(row) == 1 and not row[0].strip():   # a blank line: pandas skips it too
                continue
            if header is None:
                header = row
                missing = [c for c in required if c not in header]
                if missing:
                    raise ValueError(f"{path} is not a pipebench results file (no column {', '.join(missing)})")
            elif len(row) != len(header):
                raise ValueError(f"{path}, line {reader.line_num:,}: {len(row)} field{'s' * (len(row) != 1)} where "
                                 f"its header has {len(header)}: a damaged results file")
            else:
                lines.append(reader.line_num)
    except csv.Error as e:
        raise ValueError(f"{path}, line {reader.line_num:,}: {e}: a damaged results file") from None
    finally:
        csv.field_size_limit(limit)
    return lines
