"""Naming the sample whose JPEG does not decode: a decoder's own error names no file, so the JPEG
pipelines look for the first undecodable one on their error path (`undecodable_jpeg`) and say
which sample of which split it is (`undecodable_sample`): for the suite's own JPEG copy, rebuild it;
for photographs of your own (`imagefolder:PATH`, whose `JpegSet.paths` name their files), the file,
to remove or re-encode. A decoder that cannot survive a broken file (DALI) is handed none:
`refuse_unframed` checks the whole set for files that are not framed as whole JPEGs first.
"""
from __future__ import annotations


import numpy as np
import torch


def undecodable_jpeg(files, indices, side: int | None = None) -> tuple[int, str] | None:
    """(i, the decoder's message) for the first i of `indices` whose JPEG bytes `files[i]` do not
    decode on the CPU (or cannot be read: the reader's message), or, given the set's `side`, that
    decode to another size than side x side (a damaged header: a batch of unequal images fails in a
    decoder's or stacking's own words); None if every file decodes. For error paths only (a decoder
    rejected a batch and did not say which file): it decodes every file named.

    The check is libjpeg-turbo through `torchvision.io.decode_jpeg`. In our trials it rejected every
    file that nvJPEG (torchvision on an H100), DALI's CPU decoder or PIL rejected: a missing or
    damaged header (all of them reject it), a file cut short (all but nvJPEG, which decodes it to
    wrong pixels without an error); no PIL setting (`ImageFile.LOAD_TRUNCATED_IMAGES`) makes it
    lenient. Its limit: libjpeg-turbo only warns about most garbage inside the entropy-coded data
    ("Corrupt JPEG data" on stderr) and decodes it to wrong pixels, so such a file passes here, as
    it does in DALI's CPU decoder, PIL and nvJPEG."""
    from torchvision.io import ImageReadMode, decode_jpeg
    for i in indices:
        i = int(i)
        try:
            data = torch.from_numpy(np.frombuffer(bytearray(files[i]), np.uint8))   # a copy: bytes or views
        except OSError as e:   # a file of a tree gone missing
            return i, e.strerror or type(e).__name__
        try:
            image = decode_jpeg(data, mode=ImageReadMode.RGB)
        except (RuntimeError, ValueError) as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            where = first.split(", ", 2)   # torchvision's "decode_jpeg, <source file>:<line>, <message>"
            return i, where[2] if len(where) == 3 and where[1].rpartition(":")[2].isdigit() else first
        if side is not None and tuple(image.shape[1:]) != (side, side):
            return i, f"its header says {image.shape[1]} x {image.shape[2]} px, the set's images are {side} x {side}"
    return None


def undecodable_sample(split: str, index: int, reason: str, copy: str = "JPEG copy",
                       remedy: str = "rebuild it with `pipebench prepare`",
                       paths: tuple[str, ...] | None = None) -> ValueError:
    """The one-line error naming a sample that cannot be decoded, and what to do: of the JPEG copy
    (`copy`, `remedy`), or, given the `paths` of the files the samples were read from (a folder of
    your photographs), the file itself."""
    if paths is not None:
        return ValueError(f"{paths[index]}: cannot be decoded ({reason}; sample {index} of the {split} split): "
                          "remove it, or re-encode it from its original")
    return ValueError(f"sample {index} of the {split} {copy} cannot be decoded ({reason}): {remedy}")


def unframed(jpeg) -> np.ndarray:
    """Indices of the packed set's files (`sources.JpegSet`) that do not begin with JPEG's
    start-of-image marker (FF D8) or do not end with its end-of-image marker (FF D9): not a JPEG, or
    cut short. One vectorized pass over the whole set. A whole JPEG may carry bytes after its end
    marker (some cameras append some), so these are candidates for `undecodable_jpeg`, not verdicts."""
    start, end = jpeg.offsets[:-1], jpeg.offsets[1:]
    data, last = jpeg.data, max(len(jpeg.data) - 1, 0)

    def at(i):
        return data[np.clip(i, 0, last)] if len(data) else np.zeros(len(i), np.uint8)
    framed = ((end - start >= 4) & (at(start) == 0xFF) & (at(start + 1) == 0xD8)
              & (at(end - 2) == 0xFF) & (at(end - 1) == 0xD9))
    return np.flatnonzero(~framed)


def refuse_unframed(jpeg, split: str, side: int | None = None) -> None:
    """The one-line ValueError (`undecodable_sample`) for the first file of the set that is not framed
    as a whole JPEG (`unframed`) and does not decode on the CPU either (`undecodable_jpeg`); nothing
    if there is none. For a decoder that cannot survive such a file: DALI 2.4 crashed the process
    now and then on one (tests/test_corrupt_jpeg.py), so it must never see it."""
    bad = undecodable_jpeg(jpeg, unframed(jpeg), side)
    if bad is not None:
        raise undecodable_sample(split, *bad, paths=jpeg.paths)
