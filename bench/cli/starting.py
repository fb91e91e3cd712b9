"""A Ctrl-C while `pipebench` starts: one line, exit code 130, at once (`starting`).

Starting, `pipebench` imports torch, torchvision and the pipelines and builds its parsers: seconds in
which it writes nothing. Python raises a Ctrl-C as KeyboardInterrupt wherever the main thread is, and
there that is mostly inside a module's import: it printed a 30-line traceback; raised in Python code
that C++ had called (torch's initialisation), it aborted the process ("terminate called after throwing
an instance of 'pybind11::error_already_set'"); some code swallowed it and the run went on. So while
`starting` holds, SIGINT raises nothing: its handler writes the one line and the process leaves at once
(`os._exit(130)`: nothing has been written that could be left half-written). `main` holds it while
the parsers import and read the options, and through compare's and sweep's planning, until the run
holds SIGINT itself (`bench.measuring.interrupts.signals_as_interrupts`, as it takes OUT's lock, before
it writes a row); a child the planning started (a model's check) ends with this process
(`bench.running.children`). The run hands SIGINT back to Python just before it takes it
(`Start.release`), so that a Ctrl-C after its work (its last lines, its return) is said as a stop of
the work, not as one while starting (which said "nothing was written", the rows written). Where SIGINT
is not Python's own KeyboardInterrupt (ignored, as in a script's background job, or another handler a caller
installed), or outside the main thread, it is left as it is.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time


def stop_line(command: str, started: float) -> str:
    """What a Ctrl-C while `pipebench COMMAND` starts says (`command`: "pipebench COMMAND")."""
    return f"{command}: stopped by SIGINT while starting, after {time.monotonic() - started:.0f} s; nothing was written"


class Start:
    """What `starting` yields: `release()` hands SIGINT back as it was before the block, for work that
    follows the start in the block (the run); `released` says whether that work began (the block's end
    alone, an exception passing, hands SIGINT back without saying so)."""

    def __init__(self, previous, own: bool):
        self._previous, self._own, self._restored, self.released = previous, own, False, False

    def release(self) -> None:
        self.restore()
        self.released = True

    def restore(self) -> None:
        """SIGINT's handler as it was before the block (once)."""
        if self._own and not self._restored:
            signal.signal(signal.SIGINT, self._previous)
        self._restored = True


@contextlib.contextmanager
def starting(command: str, started: float):
    """SIGINT in the block, until `Start.release`: `stop_line` on stderr, exit code 130, at once (module
    docstring)."""
    def stop(signum, frame):
        with contextlib.suppress(Exception):   # what was printed is not lost (os._exit flushes nothing)
            sys.stdout.flush()
        os.write(2, (stop_line(command, started) + "\n").encode(errors="backslashreplace"))
        os._exit(128 + signum)

    own = threading.current_thread() is threading.main_thread() and \
        signal.getsignal(signal.SIGINT) is signal.default_int_handler
    start = Start(signal.signal(signal.SIGINT, stop) if own else None, own)
    try:
        yield start
    finally:
        start.restore()
