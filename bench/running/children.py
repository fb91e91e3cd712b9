"""The child processes a run starts, apart from the runner (`bench.running.runner`) that starts, follows and
ends them: the forkserver context they are forked from (`_context`), what runs inside each — a
configuration's windows streamed to its journal (`_child`), a call of user code (`_call_child`) —
the watchdog that ends a child's process group once the pipebench process is gone (`_watch`), and
the reading of the stacks a child dumps when its deadline passes (`_innermost`).
"""
from __future__ import annotations

import dataclasses
import faulthandler
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

import pipelines
from pipelines.contract import resolve_device
from pipelines.workers import start_forkserver, start_forkserver_early

from .. import results
from ..measuring import distributed, harness, machine, workloads
from ..measuring.spec import RunSpec

PARENT_POLL_S = 0.5   # how often a child checks that the pipebench process is still there
POLL_S = 0.05   # how often the pipebench process looks again at a process it waits for
PF_EXITING = 0x4       # include/linux/sched.h: a task whose exit (do_exit) has begun


# Children leave by os._exit (module docstring), so the named semaphores of their DataLoader queues
# are unlinked by multiprocessing's resource tracker instead of their finalizers, and the tracker
# would warn at the end of every run about semaphores "leaked" (and then cleaned up). Silenced in the
# tracker only: it starts with this process's -W options (set before it starts).
QUIET_TRACKER = "ignore:resource_tracker:UserWarning"
MAIN_THREAD = "main thread:"   # the first line of a child's stacks file names its main thread
# what the forkserver the children fork from imports: torch once, and torchvision's models, which the
# harness imports only where it builds one (resnet18, the ViTs, torchvision:<name>); nothing there may
# initialize CUDA (importing torch._inductor does), or no child forked from it could use the GPU
PRELOAD = ("bench.measuring.harness", "torchvision.models")


def _context():
    if QUIET_TRACKER not in sys.warnoptions:
        sys.warnoptions.append(QUIET_TRACKER)
    start_forkserver(PRELOAD)
    return multiprocessing.get_context("forkserver")


def _call_child(fn, args, parent: int, path: list[str], cwd: str, reply) -> None:
    """Child process of `call_isolated`: its own process group, ended with the pipebench process;
    the parent's folder and import path; sends '' or a one-line reason, then leaves at once."""
    os.setsid()
    threading.Thread(target=_watch, args=(parent,), daemon=True).start()
    os.chdir(cwd)
    sys.path[:] = path
    reply.send(None)   # started: the deadline runs from here
    try:
        fn(*args)
        reply.send("")
    except SystemExit as e:
        reply.send(f"it called sys.exit({e.code!r})")
    except BaseException as e:   # user code can raise anything: said in one line
        reply.send(" ".join(str(e).split()) or type(e).__name__)
    reply.close()
    os._exit(0)


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (Linux /proc; a zombie has ended)."""
    found = _stat(pid)
    return found is not None and found[0] != "Z"


def _exit_begun(pid: int) -> bool:
    """Whether process `pid` has ended or begun to: gone, a zombie, or the kernel's PF_EXITING in its
    flags, set before its sockets close (a peer's error that its death caused, a collective's read from
    it, never arrives before this says so)."""
    found = _stat(pid)
    return found is None or found[0] == "Z" or bool(found[1] & PF_EXITING)


def _stat(pid: int) -> tuple[str, int] | None:
    """Process `pid`'s state letter and flags (/proc/PID/stat's 3rd and 9th fields); None if it is gone
    (no file; or ESRCH, "No such process", from a file opened as the process was being reaped: a
    SIGKILLed rank's, read in that instant, ended a sweep of the test suite in an error blaming --out)."""
    try:
        state, *fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return state, int(fields[5])


def _watch(parent: int) -> None:
    """Kill this process group (this process, its workers) once the pipebench process has ended."""
    while _alive(parent):
        time.sleep(PARENT_POLL_S)
    os.killpg(0, signal.SIGKILL)


def _child(specs: list[RunSpec], entries: dict, parent: int, path: list[str], environ: dict, cwd: str,
           journal: str, stacks: str) -> None:
    """Child process: its own process group, ended with the pipebench process `parent`; the
    parent's environment, folder and import path now (the forkserver's are from its start), stacks
    on SIGUSR1, one JSON line per window or failure of each of `specs` (its `member`: the index in
    `specs`), and one when it ended. Several specs run one after another sharing a trainer
    (`harness.Shared`); after one that fails (an error, or not applicable) the process ends and the
    parent runs the rest in a new one. One rank of several (`environ` names it, as torchrun would)
    joins the others' process group first and takes its GPU and shard."""
    os.setsid()
    threading.Thread(target=_watch, args=(parent,), daemon=True).start()
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(cwd)
    try:
        dump, out = open(stacks, "w"), open(journal, "a")
    except FileNotFoundError:   # the run stopped (Ctrl-C) and removed its folder before this child began
        os._exit(0)
    dump.write(f"{MAIN_THREAD} 0x{threading.get_ident():016x}\n")   # which of the dumped threads is the main one
    dump.flush()
    faulthandler.register(signal.SIGUSR1, file=dump, all_threads=True)
    sys.path[:] = path
    pipelines._REGISTRY.update(entries)   # pipelines registered at run time in the parent (tests, plug-ins)
    # the DataLoader workers' forkserver imports while this process starts CUDA and compiles; the
    # harness waits for it before anything is timed (`pipelines.workers.forkserver_ready`)
    start_forkserver_early(list(dict.fromkeys(m for spec in specs for m in pipelines.worker_modules(spec.pipeline,
                                                                                                   spec.config))))
    shared = harness.Shared() if len(specs) > 1 else None
    with out:
        def emit(record: dict) -> None:
            out.write(json.dumps(record, default=str) + "\n")
            out.flush()
        emit({"ready": True})   # the deadline starts now
        for member, spec in enumerate(specs):
            try:
                if spec.config.world_size > 1:   # joined once: the group outlives each spec
                    world, device = distributed.setup(spec.config.device)
                    spec = dataclasses.replace(spec, config=spec.config.replace(rank=world.rank, device=device))
                for repeat, (facts, window) in enumerate(harness.run(spec, shared)):
                    emit({"member": member, "row": results.measured_row(spec, facts, repeat, window)})
            except workloads.NotApplicable as e:
                emit({"member": member, "status": "not-applicable", "error": str(e), "at": time.monotonic()})
                emit({"member": member, "ended": True})
                break
            except Exception as e:
                emit({"member": member, "status": "error", "error": traceback.format_exc()
                      if os.environ.get("PIPEBENCH_DEBUG") else f"{type(e).__name__}: {e}", "at": time.monotonic()})
                emit({"member": member, "ended": True})
                break   # what it left (a half-captured step, a CUDA error) is not the next one's: a new process
            if shared is not None:   # the next one starts without what this one left
                machine.release(resolve_device(spec.config.device))
            emit({"member": member, "ended": True})
        emit({"done": True})
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything is recorded and the pipeline closed: leave now rather than join library threads and
    # run finalizers at interpreter exit, which can wait for minutes; the parent ends the process
    # group (workers, compile processes) once it has read the last record.
    os._exit(0)


def _innermost(stack_dump: str) -> str:
    """The main thread's innermost frame from a faulthandler dump (the thread the file's first line
    names; else the first thread dumped), or ''."""
    lines = stack_dump.splitlines()
    ident = lines[0].split()[-1] if lines and lines[0].startswith(MAIN_THREAD) else None
    headers = [i for i, line in enumerate(lines) if line.startswith(("Current thread", "Thread")) and
               "(most recent call first)" in line and i + 1 < len(lines)]
    main = next((i for i in headers if ident and f" {ident} " in lines[i]), headers[0] if headers else None)
    return lines[main + 1].strip() if main is not None else ""
