"""Naming the sample whose JPEG does not decode: a decoder's own error names no file, so the JPEG
pipelines look for the first undecodable one on their error path (`undecodable_jpeg`) and say
which sample of which split it is (`undecodable_sample`): for the suite's own JPEG copy, rebuild it;
for photographs of your own (`imagefolder:PATH`, whose `JpegSet.paths` name their files), the file,
to remove or re-encode.
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
