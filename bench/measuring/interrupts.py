"""Ctrl-C and SIGTERM as an exception in the main thread, held back while an iterator starts.

`signals_as_interrupts()` makes SIGINT and SIGTERM raise `Interrupted` (a BaseException, so no
`except Exception` on the way turns a stop into an error), but for one the process inherited ignored
(`taken_signals`). Raised in the middle of a DataLoader iterator's construction, it left workers and
queues half built, whose clean-up then printed a FileNotFoundError traceback (a semaphore already
unlinked) after the stop message. So the harness
starts every pipeline iterator inside `deferred()`: a signal that arrives there is raised when the
block ends, once the iterator is whole and can be shut down, or after HOLD_S if the block has not
ended by then (a pipeline stuck in its start, a blocked read, still stops on one signal); a second
signal meanwhile is raised at once. Without the handler installed, `deferred()` changes nothing.

A signal that lands in a finalizer (`__del__`: a DataLoader iterator's, shutting its workers down)
is not raised there, where Python prints the exception and drops it (a Ctrl-C at the end of a
`stability` run was lost, exit 0): it is sent again RESEND_S later, once the finalizer has returned.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading


class Interrupted(BaseException):
    """The run was stopped by a signal (SIGINT: exit code 130, SIGTERM: 143)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.exit_code = 128 + signum


HOLD_S = 20.0   # the longest a signal is held back (module docstring): a DataLoader's first worker waits for the
               # forkserver's import of torch, over 5 s on a loaded 2-core machine (5 s let 3 of 12 stops of
               # `stability` as it started print a worker's traceback: results/2026-12-02-tests/ctrl-c-stability-*.txt)
RESEND_S = 0.1   # a signal that landed in a finalizer is sent again this much later
_held = {"depth": 0, "signum": None, "timer": None}   # deferred blocks entered; the signal held back, if any


def _handler(signum, frame):
    if _held["depth"] and _held["signum"] is None:
        _held["signum"] = signum
        _held["timer"] = threading.Timer(HOLD_S, os.kill, (os.getpid(), signum))   # sent again: then raised
        _held["timer"].daemon = True
        _held["timer"].start()
        return
    if _in_finalizer(frame):
        again = threading.Timer(RESEND_S, os.kill, (os.getpid(), signum))
        again.daemon = True
        again.start()
        return
    raise Interrupted(signum)


def _in_finalizer(frame) -> bool:
    """Whether `frame` runs inside a `__del__` (an exception raised there would be dropped)."""
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def taken_signals() -> list[int]:
    """SIGINT and SIGTERM, but for one this process inherited ignored (a background job, `&`, of a script:
    the Ctrl-C meant for the foreground job does not stop it), which pipebench leaves ignored as Python does."""
    return [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) is not signal.SIG_IGN]


@contextlib.contextmanager
def signals_as_interrupts():
    """The `taken_signals` raise Interrupted in the main thread for the duration of the block."""
    saved = {s: signal.signal(s, _handler) for s in taken_signals()}
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


@contextlib.contextmanager
def deferred():
    """A signal arriving in the block is raised as Interrupted when the block ends (module docstring)."""
    _held["depth"] += 1
    try:
        yield
    finally:
        _held["depth"] -= 1
        if not _held["depth"] and _held["signum"] is not None:
            _held["timer"].cancel()
            signum, _held["signum"], _held["timer"] = _held["signum"], None, None
            raise Interrupted(signum)
