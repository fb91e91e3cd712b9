"""Memory a library lends the consumer's stream without tracking its use there (`Borrowed`).

DALI's iterator hands its outputs over without a copy (DLPack). Once torch drops them, DALI takes
the buffers back into its pool and may reuse them at once on its own stream, whatever is still
queued to read them on the consumer's stream: in a training loop whose step is captured in a CUDA
graph, the training thread runs many steps ahead of the GPU, so the copy that makes a batch torch's
may run after DALI wrote the next one there. `Borrowed` holds each batch's outputs until an event
recorded on the consumer's stream after its copies has completed; it holds at most `most`, waiting
on the host for the oldest beyond that (the GPU then has that many batches queued: nothing is lost).
"""
from __future__ import annotations

from collections import deque

import torch


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
