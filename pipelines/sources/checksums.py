"""Checksums of the data files and of the copies made from them.

Verified whenever a split is loaded (`load_split`, so every pipeline and `pipebench prepare`); a
file that differs is a one-line `CifarFormatError` naming it and what to do:
- A folder pipebench wrote (`write_split`: the synthetic set, the tests' sets, a user's own)
  holds CHECKSUMS.json, the crc32 of every file written; the files read are checked against it:
  +0.06 s on a 0.43 s load of the 150 MB train split (measured on 2 cores; md5 or blake2b would add
  0.4 s).
- A folder without CHECKSUMS.json is taken as the download and checked against the md5s
  torchvision publishes (`CIFAR10_MD5`), once: the crc32 of each file that matched is recorded in
  `cifar-10-verified.json` in the cache folder (`cache.cache_dir`), and later loads check the crc32
  only, computing the md5 again for a file whose crc32 changed. Where that record cannot be
  written, every load computes the md5 (+0.4 s).
- The JPEG copy records in JPEG.json the crc32 of its own files and the checksums of the source it
  was encoded from (`made_from`); the tree copy records in TREE.json the crc32s of the packed copy
  it was written from. `stale` says why such a copy cannot be used as it is: missing, made from
  other files, or a file whose crc32 differs from its record.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import zlib
from pathlib import Path

from .cache import UMASK, cache_dir, read_json
from .layout import CHECKSUMS, SYNTHETIC_META, CifarFormatError

VERIFIED = "cifar-10-verified.json"   # in the cache folder: crc32 of downloaded files whose md5 matched
# The md5s torchvision publishes for the genuine files (CIFAR10.train_list, test_list, meta).
CIFAR10_MD5 = {"data_batch_1": "c99cafc152244af753f735de768cd75f",
               "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
               "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
               "data_batch_4": "634d18415352ddfa80567beed471001a",
               "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
               "test_batch": "40351d587109b95175f43aff81a1287e",
               "batches.meta": "5ff9c542aee3614f3951f8cda6e48888"}


def checksum(path: str | Path, algorithm: str = "crc32") -> str:
    """A file's crc32 (8 hex digits) or md5, read in 4 MiB chunks."""
    md5, crc = hashlib.md5(usedforsecurity=False), 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(1 << 22):
            if algorithm == "md5":
                md5.update(chunk)
            else:
                crc = zlib.crc32(chunk, crc)
    return md5.hexdigest() if algorithm == "md5" else f"{crc:08x}"


def recorded(folder: Path) -> dict[str, str] | None:
    """The crc32s in the folder's CHECKSUMS.json; None where there is none (a download)."""
    path = folder / CHECKSUMS
    if not path.exists():
        return None
    info = read_json(path)
    if info is None or not isinstance(info.get("crc32"), dict):
        raise CifarFormatError(f"{path}: unreadable; delete {folder} and write it again")
    return info["crc32"]


def checksum_origin(folder: str | Path) -> str:
    """What `verify` checks the folder's files against, in words (for messages)."""
    return ("the crc32s recorded when written" if (Path(folder) / CHECKSUMS).exists()
            else "the md5s torchvision publishes")


def verify(folder: str | Path, names: tuple[str, ...], cache_root: str | Path | None = None) -> None:
    """Check files of a standard-layout folder: against its CHECKSUMS.json if pipebench wrote it,
    else (a download) against `CIFAR10_MD5`, the md5 computed only for a file whose crc32 is not
    already recorded as verified (see the module docstring). Raises `CifarFormatError` naming the
    first file that differs."""
    folder = Path(folder)
    crc32s = recorded(folder)
    if crc32s is not None:
        remedy = (f"delete {folder} and it is generated again" if (folder / SYNTHETIC_META).exists()
                  else f"write {folder} again")
        for name in names:
            expected, found = crc32s.get(name, "none"), checksum(folder / name)
            if found != expected:
                raise CifarFormatError(
                    f"{folder / name}: checksum does not match the one recorded when it was written "
                    f"(crc32 {expected} vs {found}): the file changed or is damaged; {remedy}")
        return
    record = cache_dir(folder, cache_root) / VERIFIED
    verified = read_json(record) or {}
    fresh = {}
    for name in names:
        crc = checksum(folder / name)
        if verified.get(name) == crc:
            continue
        expected, found = CIFAR10_MD5.get(name, "none"), checksum(folder / name, "md5")
        if found != expected:
            raise CifarFormatError(
                f"{folder / name}: md5 {found} differs from the genuine file's {expected} (published by "
                f"torchvision): the file is damaged or not CIFAR-10; run `pipebench download --root "
                f"{folder.parent}` to fetch it again")
        fresh[name] = crc
    if fresh:
        with contextlib.suppress(OSError):   # a read-only folder: the md5 is computed again next time
            record.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=record.parent, prefix=".tmp-", delete=False) as f:
                json.dump({**verified, **fresh}, f)
            os.chmod(f.name, 0o666 & ~UMASK)   # a file's mode under the umask, not NamedTemporaryFile's 0o600
            os.replace(f.name, record)


def stale(copy: Path, meta: str, made_from: dict, files: tuple[str, ...] = ()) -> str | None:
    """Why a copy's folder cannot be used as it is (None: it can): missing, made from other files
    than `made_from`, or one of `files` whose crc32 its metadata `meta` does not record or records
    differently."""
    info = read_json(copy / meta)
    if info is None:
        return "missing"
    if info.get("made_from") != made_from:
        return "made from other files than the current ones"
    crc32s = info.get("crc32") if isinstance(info.get("crc32"), dict) else {}
    unrecorded = [name for name in files if name not in crc32s]
    if unrecorded:
        return f"no crc32 recorded for {', '.join(unrecorded)}"
    for name in files:
        expected = crc32s[name]
        try:
            found = checksum(copy / name)
        except OSError:
            found = "unreadable"
        if found != expected:
            return f"{name}: crc32 {found}, recorded {expected}"
    return None
