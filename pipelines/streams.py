"""How a pipeline's GPU work shares the device with its consumer's stream.

`side_stream`: the CUDA stream a pipeline makes its batches on, taken from the high-priority pool
of torch's streams. `torch.cuda.Stream()` at the default priority hands out the 32 streams of one
pool in turn, and a training step captured in a CUDA graph (`torch.cuda.graph`, inductor's
`mode="reduce-overhead"`, the harness's captured steps) is captured on such a stream. Work that a
pipeline's own thread launches on a stream while that stream is being captured is not run: it
becomes part of the step's graph (and is replayed with it), so the batch it was to make is never
made; a side stream from the other pool can never be the capture's. Where both streams have work
ready, the GPU now schedules the pipeline's first: what that does to the rates measured before (at
the default priority) is not measured yet.

`Borrowed`: memory a library lends the consumer's stream without tracking its use there. DALI's
iterator hands its outputs over without a copy (DLPack). Once torch drops them, DALI takes the
buffers back into its pool and may reuse them at once on its own stream, whatever is still queued
to read them on the consumer's stream: in a training loop whose step is captured in a CUDA graph,
the training thread runs many steps ahead of the GPU, so the copy that makes a batch torch's may
run after DALI wrote the next one there. `Borrowed` holds each batch's outputs until an event
recorded on the consumer's stream after its copies has completed; it holds at most `most`, waiting
on the host for the oldest beyond that (the GPU then has that many batches queued: nothing is lost).
"""
from __future__ import annotations

from collections import deque

import torch


def side_stream(device: torch.device) -> torch.cuda.Stream | None:
    """A stream of the high-priority pool on `device` (module docstring), None off CUDA."""
    return torch.cuda.Stream(device, priority=torch.cuda.Stream.priority_range()[1]) if device.type == "cuda" else None


class Borrowed:
    """Outputs held until the consumer's stream is past their copies (module docstring)."""

    def __init__(self, device: torch.device, most: int):
        self.device, self.most = device, max(1, most)
        self.held: deque = deque()

    def hold(self, outputs) -> None:
        """Keep `outputs` until the work queued so far on the current stream has run."""
        if self.device.type != "cuda":
            return
        self.held.append((torch.cuda.current_stream(self.device).record_event(), outputs))
        while self.held and (len(self.held) > self.most or self.held[0][0].query()):
            self.held.popleft()[0].synchronize()

    def release(self) -> None:
        """Wait for every held batch's copies, then let the outputs go."""
        while self.held:
            self.held.popleft()[0].synchronize()
