"""Where pipebench writes data and copies of it, and how, so that no reader sees half a folder.

Copies of a standard-layout folder (the JPEG copies, the record of a download's verified
checksums) go beside it, or, with `cache_root` (`PipelineConfig.cache_root`, `--cache-dir`,
`$PIPEBENCH_CACHE`), under `<cache_root>/<source>/`: `synthetic-seed<S>` (its content follows from
the seed), or `cifar10-<hash of the data folder's path>` for any other folder, so that two folders
never share a copy and the data folder may be read-only.

Every folder is written as a temporary folder beside its final place and renamed into place
(`writing`); a stale folder there is first renamed aside (`publish`), so an interrupted run leaves
no half folder and a reader sees the old or the new one, never a mix. A folder that cannot be
written is a one-line `CacheWriteError` naming it and what to do. Folders get the mode `mkdir` gives
(`0o777 & ~umask`), not `tempfile.mkdtemp`'s 0o700, so a shared cache is readable by others as the
user's umask says.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .layout import SYNTHETIC_META

WRITABLE_HINT = "pass --cache-dir DIR or set $PIPEBENCH_CACHE to a writable folder"


def _umask() -> int:
    """The process's umask, read by setting it and setting it back."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


UMASK = _umask()


class CacheWriteError(OSError):
    """A folder where data or a copy of it must be written cannot be; the message names it."""


def read_json(path: Path) -> dict | None:
    """A JSON object from a file; None if it is missing or not a JSON object."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def cache_dir(folder: Path, cache_root: str | Path | None) -> Path:
    """Where copies of a standard-layout folder go: beside it, or `<cache_root>/<source name>`: the
    synthetic set's folder name (its content follows from the seed), or one per other folder."""
    if cache_root is None:
        return folder.parent
    if (folder / SYNTHETIC_META).exists():
        return Path(cache_root) / folder.parent.name
    return Path(cache_root) / f"cifar10-{hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:8]}"


@contextlib.contextmanager
def writing(final: Path, what: str):
    """A temporary folder beside `final`, published as `final` when the block ends; a folder that
    cannot be written is a one-line `CacheWriteError` saying what to do."""
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
        tmp.chmod(0o777 & ~UMASK)
    except OSError as e:
        raise CacheWriteError(f"cannot write {what} to {final} ({e.strerror or e}): {WRITABLE_HINT}") from None
    try:
        yield tmp
        publish(tmp, final)
    except OSError as e:   # numpy says "Not enough free space to write N bytes" with no errno
        if e.errno in (errno.ENOSPC, errno.EDQUOT) or "free space" in str(e):
            raise CacheWriteError(f"cannot write {what} to {final}: its disk is full ({e.strerror or e}): free space "
                                  "there, or put it elsewhere (--data-root or $PIPEBENCH_DATA for data, --cache-dir "
                                  "or $PIPEBENCH_CACHE for copies)") from None
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def publish(tmp: Path, final: Path) -> None:
    """Move a finished temporary folder into place. An old folder there is renamed aside first, so
    a reader finds the old or the new one, never a mix; a concurrent writer may win."""
    aside = None
    if final.exists():
        aside = Path(tempfile.mkdtemp(prefix=".old-", dir=final.parent))
        with contextlib.suppress(FileNotFoundError):   # a concurrent writer moved it
            os.replace(final, aside / final.name)
    try:
        os.replace(tmp, final)
    except OSError:
        if not final.exists():
            raise
    finally:
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)


def note(final: Path, stale: str, action: str) -> None:
    """One line on stderr saying why an existing copy is written again (nothing for a new one)."""
    if stale != "missing":
        print(f"{final}: {stale}; {action}", file=sys.stderr)
