"""The reference lists of docs/ made from the code, so they cannot drift from it: the pipelines' knobs
(docs/pipelines.md, from each pipeline's declared `options`: which pipelines read each) and the
columns of a results file (docs/columns.md, from `bench.results`' column lists), each between its
marker lines (`readme.KNOBS`, `readme.COLUMNS`).

    python -m bench.report.docs [DOCS_FOLDER]   # rewrites the blocks (default: ./docs)

`regenerated` gives each file's text as the code makes it now; a test checks the committed files
equal it.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pipelines

from .. import results, settings
from .readme import COLUMNS, KNOBS, readme_block


def cell(text: str) -> str:
    """`text` as one markdown table cell: no `|` splits the row."""
    return text.replace("|", "\\|")


def knob_lines() -> list[str]:
    """One table row per knob a registered pipeline declares: its `PipelineConfig` keyword, flag,
    default, accepted values, whether a list of values makes variants, the pipelines that read it
    (`pipelines.reads`) and its help."""
    lines = ["| knob | flag | default | values | a list makes variants | read by | what |",
             "|---|---|---|---|---|---|---|"]
    for name, option in pipelines.declared_options().items():
        readers = ", ".join(f"`{p}`" for p in pipelines.names() if name in pipelines.reads(p))
        default = f"None ({option.none})" if option.none else repr(option.default)
        flag = f"`{option.flag}`" if option.cli else "(none: set per CPU budget)"
        lines.append(f"| `{name}` | {flag} | {cell(default)} | {cell(option.expected())} | "
                     f"{'yes' if option.listed else ''} | {readers} | {cell(option.help)} |")
    return lines


def column_kind(column: str) -> str:
    """What kind of column of a results file `column` is, by the list of `bench.results` holding it."""
    if column in settings.columns():
        return "setting: what ran (`bench.settings.SETTINGS`)"
    if column in pipelines.declared_options():
        return "pipeline knob: empty where the row's pipeline does not read it ([the knobs](pipelines.md#knobs))"
    if column in results.MEASURE_COLUMNS:
        return "measured: the process, window and what it recorded (`results.MEASURE_COLUMNS`)"
    if column in results.ENV_COLUMNS:
        return "environment, in every row (`results.ENV_COLUMNS`)"
    return "the row: the invocation, what it found, its outcome"


def column_lines() -> list[str]:
    """The columns of a results file in their order (`results.all_columns`), a table row per run of
    columns of one kind."""
    runs: list[tuple[str, list[str]]] = []
    for column in results.all_columns():
        kind = column_kind(column)
        if runs and runs[-1][0] == kind:
            runs[-1][1].append(column)
        else:
            runs.append((kind, [column]))
    return (["| columns, in the file's order | kind |", "|---|---|"]
            + [f"| {', '.join(f'`{c}`' for c in columns)} | {kind} |" for kind, columns in runs])


GENERATED = {"pipelines.md": (KNOBS, knob_lines), "columns.md": (COLUMNS, column_lines)}


def regenerated(docs: Path) -> dict[Path, str]:
    """Each generated file of the folder `docs` with its block as the code makes it now."""
    texts = {}
    for name, (block, lines) in GENERATED.items():
        path = docs / name
        head, tail = readme_block(path.read_text(), path, block)
        texts[path] = head + block[0] + "\n" + "\n".join(lines()) + "\n" + block[1] + tail
    return texts


def main(argv: list[str]) -> None:
    try:
        texts = regenerated(Path(argv[0] if argv else "docs"))
    except (OSError, ValueError) as e:   # no such folder, a file without its markers: one line
        sys.exit(str(e))
    for path, text in texts.items():
        if path.read_text() != text:
            results.replace_file(path, text)
            print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
