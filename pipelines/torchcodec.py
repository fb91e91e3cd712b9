"""`torchcodec`: the successor torchvision points to for image decoding (torchvision 0.29 deprecates
`torchvision.io.decode_jpeg` in favour of TorchCodec), `torchcodec.decoders.decode_jpeg`.

Bytes: exactly as `tvjpeg` (this pipeline is `tvjpeg` with the decode call swapped): the packed JPEG
copy in host memory, one uint8 tensor per file -> on `tvjpeg`'s producer thread and side stream,
a few batches ahead of the consumer, per batch one `decode_jpeg(list, device="cuda")` (nvJPEG
batched decode; the torchcodec wheel bundles its own nvJPEG and needs no FFmpeg for JPEG) -> stack
-> the shared GPU crop/flip gather -> normalize (photographs: every box resized in one batched
resize, `kernels.resized_crops`) -> an event the consumer's stream waits on. Without a GPU it
decodes on the CPU (libjpeg-turbo), on the same thread.

Measured loader ceilings next to `tvjpeg`'s, on the same machine: the reference run,
results/2026-11-24-h100-reference/REPORT.md.

Needs torchcodec >= 0.17 (`pip install -e '.[peers]'`); without it the pipeline is unavailable with
that reason.
"""
from __future__ import annotations

import torch

from .peers import Peer
from .tvjpeg import TorchvisionJpegPipeline


def _import_decode_jpeg():
    """torchcodec's batched JPEG decoder (its native libraries load here)."""
    from torchcodec.decoders import decode_jpeg
    return decode_jpeg


DECODE_JPEG = Peer(_import_decode_jpeg, lambda e: f"torchcodec is not installed or cannot load: pip install -e "
                   f"'.[peers]' ({e})", errors=(ImportError, OSError, RuntimeError))   # a native library may fail


class TorchcodecJpegPipeline(TorchvisionJpegPipeline):
    name = "torchcodec"
    missing = DECODE_JPEG

    def decode_files(self, files: list[torch.Tensor], index, lane: int = 0) -> list[torch.Tensor]:
        return DECODE_JPEG.get()(files, mode="RGB", device=self.device)
