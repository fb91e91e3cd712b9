"""What every command shares: the COMMAND.txt and environment.json it leaves beside its output
(`record`), and errors as one line (`_fail`).
"""
from __future__ import annotations

import json
import os
import shlex
import traceback
from pathlib import Path

from pipelines.options import LINE_LIMIT, clip



def record(out: Path, command: list[str], env: dict | None = None, once: bool = False) -> None:
    """Append the command that wrote into `out` to its COMMAND.txt (and write environment.json);
    `once`: not when the file already holds it (a report made again writes the same files). Bytes
    of an argument that are not UTF-8 (a path's) are written escaped (`\\udcff`)."""
    if env is not None:
        (out / "environment.json").write_text(json.dumps(env, indent=2) + "\n")
    line = shlex.join(command).encode("utf-8", "backslashreplace").decode()
    path = out / "COMMAND.txt"
    if once and path.is_file() and line in path.read_text().splitlines():
        return
    with open(path, "a") as f:
        f.write(line + "\n")


def _fail(command: str, error: BaseException, message: str = "") -> SystemExit:
    """A user-facing error as one line (`pipebench COMMAND: message`, the error's own by default, cut
    short where a value echoed in it is megabytes long: `clip`); with --debug its traceback first."""
    if os.environ.get("PIPEBENCH_DEBUG"):
        traceback.print_exception(error)
    return SystemExit(clip(f"pipebench {command}: {message or error}", LINE_LIMIT))
