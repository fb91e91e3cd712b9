"""What pipebench does as it exits: end every process it started (`reap_children`, registered with atexit
by `bench.cli.main`), so that none is still running once its exit code is known, and a Ctrl-C or SIGTERM
meanwhile is one line and exit code 130 (143)."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

from ..measuring import interrupts, machine
from .children import POLL_S, _alive

REAP_GRACE_S = 10.0   # how long the resource tracker (and what else is left) has to exit, then killed


def reap_children() -> None:
    """End every process this one started, before it exits (pipebench registers it with atexit):
    multiprocessing's resource tracker asked to stop as at exit (its pipe closed: it still unlinks what
    children left) and waited for up to REAP_GRACE_S, the forkserver killed at once (it exited as the
    tracker does, but took about a second unloading torch, after the work, at every exit), then what
    is still running of every process seen below this one killed (SIGKILL, stopped ones too) and this
    process's own children reaped (without it the forkserver outlived pipebench by seconds on a loaded
    machine: issue 54).

    The work is done by then: a Ctrl-C or SIGTERM meanwhile (it printed "Exception ignored in atexit
    callback" and a traceback, exit 0) ends the wait (what is left is killed at once), says so in one
    line and exits 130 (143); after it the signals are ignored for the rest of the exit (a Ctrl-C while
    the interpreter finalized killed the process by its signal), as one the process inherited ignored is
    throughout (`interrupts.taken_signals`)."""
    from multiprocessing import forkserver, resource_tracker

    stopped: list[int] = []
    signals = interrupts.taken_signals()
    for s in signals:   # atexit runs in the main thread, where a handler can be set
        signal.signal(s, lambda signum, frame: stopped.append(signum))
    started = machine.descendants(os.getpid())   # before the forkserver ends: its orphans would leave this tree
    helpers = [(forkserver._forkserver, "_forkserver_alive_fd", "_forkserver_pid"),
               (resource_tracker._resource_tracker, "_fd", "_pid")]
    for helper, fd, pid in helpers:
        if getattr(helper, fd, None) is not None and getattr(helper, pid, None) is not None:
            with contextlib.suppress(OSError):
                os.close(getattr(helper, fd))
            if helper is forkserver._forkserver:   # it holds nothing to clean up, only torch to unload: ~1 s
                with contextlib.suppress(ProcessLookupError):
                    os.kill(getattr(helper, pid), signal.SIGKILL)
            setattr(helper, fd, None)   # multiprocessing starts a new one if anything asks again
            setattr(helper, pid, None)
    _wait(started, stopped)
    for pid in filter(_alive, started):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _wait(started)   # SIGKILL takes effect at once; a bound all the same
    _reap(started)
    for s in signals:
        signal.signal(s, signal.SIG_IGN)
    if stopped:
        with contextlib.suppress(Exception):   # what was printed is not lost (os._exit flushes nothing)
            sys.stdout.flush()
            sys.stderr.flush()
        name = signal.Signals(stopped[0]).name
        os.write(2, f"pipebench: stopped by {name} as it ended the processes it had started, after its work: "
                    f"none is left running\n".encode())
        os._exit(128 + stopped[0])


def _wait(pids: list[int], stopped=()) -> None:
    """Reap `pids` as they end, until none runs, REAP_GRACE_S have passed or `stopped` holds a signal."""
    deadline = time.monotonic() + REAP_GRACE_S
    while any(map(_alive, pids)) and time.monotonic() < deadline and not stopped:
        _reap(pids)
        time.sleep(POLL_S)


def _reap(pids: list[int]) -> None:
    """Collect the exit status of those of `pids` that are this process's children and have ended."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
