"""The grid runner: measure a list of RunSpecs into one results folder, surviving what goes wrong.

- **One configuration, one process, one deadline.** Each configuration runs in a fresh child
  process (forked from a `forkserver` that has imported torch but never touched CUDA, so a child
  starts in well under a second and can use the GPU). The child leads its own process group and
  streams its rows as JSON lines to a journal; the parent shows progress and, past `timeout`
  seconds, has the child dump every thread's stack (`faulthandler`) into `OUT/timeouts/`, kills the
  whole group (DataLoader workers included) and writes a `timeout` row. A CUDA error that poisons
  a context, a crash or a hang costs one row, not the sweep.
- **Or several configurations, one process** (`--share-process`, `plan.shared`): model-only and e2e
  configurations of one cell (or copy configurations of one setting) run one after another in one
  child, sharing its trainer (`harness.Shared`), what each left released before the next
  (`machine.release`), each with its deadline counted from the end of the one before. One that
  fails, hangs or kills the child leaves its row, and the rest run in a new child.
- **Exits cost nothing.** A child leaves with `os._exit` right after its last record (no joining of
  library threads, no interpreter finalizers), and the parent then kills its process group, so
  nothing it started outlives it; its rows count.
- **Nothing outlives the parent.** A watchdog thread in the child kills its whole process group
  within PARENT_POLL_S once the pipebench process is gone (even SIGKILLed, when nothing else could
  clean up). Before pipebench exits (`bench.running.reaping`, at interpreter exit) multiprocessing's resource
  tracker is stopped and waited for, its forkserver killed, and any process it started that is still there
  is killed: none outlives its exit.
- **Nothing counted twice.** A configuration's rows are committed to `results.csv` only when it
  finishes; a configuration that fails, times out or is interrupted leaves one `error` / `timeout`
  row or nothing, never partial `ok` rows, so a resumed sweep reruns it cleanly.
- **One writer per folder.** `OUT/.lock` is held (flock) for the whole run and removed at its end
  (while still held; whoever locks it checks that the path still names the file it locked); a
  second run into the same folder is refused with the holder's pid.
- **Honest endings.** Ctrl-C or SIGTERM ends the child's group at once, keeps every finished
  configuration's rows and raises `interrupts.Interrupted`, a BaseException like KeyboardInterrupt, so no
  `except Exception` on the way (a pipeline's, a data loader's) turns it into an error row; the
  caller exits 130 (143 for SIGTERM). `Outcome` counts the configurations that errored or timed
  out and says why, one line each, and once for all when they share a cause.

A configuration on several GPUs of this host (`--ranks N`; with `--share-process`, a cell's
configurations) runs in N such processes at once, one per GPU, each with the environment torchrun would give it (`rank_environments`); they join one
process group through a rendezvous store this process hosts for as long as they run (as torchrun's
agent does: its port is bound before they start, so nothing can take it in between), and are
followed, timed out and ended together. A rank's death is read from /proc as soon as its exit begins
(the forkserver reports it late on a busy machine), so the row blames the rank that died, not the peer
whose collective it broke.

What runs inside a child (its journal, its watchdog, a call of user code) and the forkserver it is
forked from are in `bench.running.children`; this module starts, follows, times out and ends them.

Under torchrun (several processes), and with `--no-isolate`, configurations run in this process
(no deadline): under torchrun a failure ends the job (the other ranks may be inside a collective);
rows are still committed per configuration, and an interruption discards the one in flight.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from torch.distributed import TCPStore

import pipelines
from pipelines.contract import resolve_device

from .. import results
from ..measuring import distributed, harness, interrupts, machine, workloads
from ..measuring.spec import RunSpec
from .children import POLL_S, _call_child, _child, _context, _exit_begun, _innermost

DEFAULT_TIMEOUT_S = 1800.0   # per configuration; compilation and a slow DataLoader epoch fit well inside
STARTUP_S = 120.0   # a child's start (the forkserver importing torch, once) before its deadline runs
EXIT_GRACE_S = 15.0   # call_isolated: after its reply, a child stuck exiting (library threads) is killed


@dataclass
class Outcome:
    configurations: int = 0
    failed: int = 0      # configurations that errored or timed out in this run
    ok: int = 0          # configurations with all their windows measured
    written: int = 0     # configurations whose rows are in the results file
    causes: list[str] = field(default_factory=list)   # each failed configuration's error

    def record(self, spec: RunSpec, rows: list[dict]) -> str | None:
        """Count one configuration by its rows; if it errored or timed out, one line saying which
        and why (for the terminal), else None."""
        self.ok += all(row["status"] == "ok" for row in rows)
        failure = next((row for row in rows if row["status"] in ("error", "timeout")), None)
        if failure is None:
            return None
        self.failed += 1
        self.causes.append(failure["error"])
        return (f"{failure['status']}: {spec.pipeline} {spec.stage or spec.mode} {spec.model} "
                f"{spec.config.image_size}px batch {spec.config.batch_size}: {failure['error']}")

    def summary_lines(self) -> list[str]:
        """The end of a run with failures: how many, and their cause once if they all share it."""
        if not self.failed:
            return []
        counted = f"{self.failed} of {self.configurations} configurations failed or timed out"
        if len(set(self.causes)) > 1:
            return [counted + " (each one's cause is printed above and in its row)"]
        if self.failed == 1:
            return [f"{counted}: {self.causes[0]}"]
        return [counted, f"all {self.failed} failed: {self.causes[0]}"]


@contextlib.contextmanager
def folder_lock(out: Path):
    """Hold OUT/.lock for the block and remove it at the end; refuse (ValueError) if another
    process holds it."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / ".lock"
    while True:
        f = open(path, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            f.close()
            raise ValueError(f"{out} is in use by another pipebench run (pid {holder}): "
                             "wait for it or choose another --out") from None
        try:
            locked = os.fstat(f.fileno()).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            locked = False
        if locked:
            break
        f.close()   # its holder removed it between our open and flock: lock the one there now
    with f:
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        try:
            yield
        finally:
            path.unlink(missing_ok=True)   # still held: a process that opened it meanwhile sees it gone


def call_isolated(fn, args: tuple, timeout: float) -> str:
    """Run `fn(*args)` in a child process of its own process group (forked from the forkserver,
    like a configuration) and return '' if it returned, else one line saying why not: what it
    raised, sys.exit, the signal or exit code that ended the process, or no end within `timeout`
    seconds (then the group is killed). For user code that runs before the first configuration
    (a model's builder): none of that can end, hang or kill pipebench."""
    ctx = _context()
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_call_child, args=(fn, args, os.getpid(), list(sys.path), os.getcwd(), send))
    child.start()
    send.close()
    try:
        for wait in (STARTUP_S, timeout):   # its start, then the call
            if not receive.poll(wait):
                return f"it did not end within {timeout:g} s"
            try:
                reason = receive.recv()
            except EOFError:   # ended without a word: aborted, killed, os._exit
                child.join(EXIT_GRACE_S)
                code = child.exitcode
                return (f"its process was killed by {signal.Signals(-code).name}" if code is not None and code < 0
                        else f"its process ended with exit code {code}")
        return reason
    finally:
        receive.close()
        _kill_group(child)


@contextlib.contextmanager
def rank_environments(ranks: int):
    """The environment of each of `ranks` processes on this host, as `torchrun --nproc-per-node`
    sets it ({} for one process: nothing to join), while this process hosts their rendezvous store
    as torchrun's agent does: bound on a free local port before the ranks start and held until the
    block ends, so nothing else can take the port in between. `TORCHELASTIC_USE_AGENT_STORE` makes
    every rank, rank 0 too, join that store as a client instead of binding the port itself (torch's
    env:// rendezvous; older torch also reads `TORCHELASTIC_RESTART_COUNT` beside it)."""
    if ranks == 1:
        yield [{}]
        return
    store = TCPStore("127.0.0.1", 0, ranks, is_master=True, wait_for_workers=False)
    try:
        yield [{"RANK": str(r), "WORLD_SIZE": str(ranks), "LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": str(ranks),
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(store.port), "TORCHELASTIC_USE_AGENT_STORE": "True",
                "TORCHELASTIC_RESTART_COUNT": "0"} for r in range(ranks)]
    finally:
        del store   # its server stops with it


class _Rank:
    """One process of a configuration (or of several run in one process), as the parent follows it:
    its journal's records so far."""

    def __init__(self, process, journal: Path, stacks: Path):
        self.process, self.journal, self.stacks = process, journal, stacks
        self.feed = None
        self.records: list[dict] = []
        self.ready = self.finished = False   # it started measuring; it wrote its last record
        self.ended = 0   # how many of its configurations it has ended

    def read(self, on_row=None) -> None:
        """The journal's new complete lines (a line still being written is read next time)."""
        if self.feed is None:
            self.feed = open(self.journal)
        for line in iter(self.feed.readline, ""):
            if not line.endswith("\n"):
                self.feed.seek(self.feed.tell() - len(line))
                break
            record = json.loads(line)
            self.ready = self.ready or "ready" in record
            self.finished = self.finished or "done" in record
            self.ended += "ended" in record
            if "member" in record and "ended" not in record:
                self.records.append(record)
                if "row" in record and on_row is not None:
                    on_row(record["row"])

    def rows(self, member: int) -> list[dict]:
        return [r["row"] for r in self.records if r["member"] == member and "row" in r]

    def failure(self, member: int) -> dict | None:
        return next((r for r in self.records if r["member"] == member and "status" in r), None)


def run_isolated(specs: list[RunSpec], timeout: float, out: Path, on_window, on_done) -> int:
    """Run configurations in a child process, one after another (several share its trainer:
    `harness.Shared`), in one such process per rank when they run on several GPUs (`config.world_size`,
    the same for all: the ranks join one process group, as under torchrun, each on its own GPU, shard
    and cores). `on_done(spec, rows)` gets each configuration's rows to commit as it ends
    (every rank's windows, each with the job's rate, or one error / timeout / not-applicable row);
    returns how many ended: a process that died or ran past the deadline ends the configuration it
    was running, and the caller runs the rest again. One rank that fails ends them all at once: the
    others would wait in a collective. `on_window(row)` is called as rank 0's windows arrive."""
    ranks = specs[0].config.world_size
    with tempfile.TemporaryDirectory(prefix="pipebench-") as tmp, rank_environments(ranks) as environments:
        entries = {s.pipeline: pipelines._REGISTRY[s.pipeline] for s in specs if s.pipeline in pipelines._REGISTRY}
        ctx, children = _context(), []
        for r, extra in enumerate(environments):
            journal, stacks = Path(tmp) / f"rows-{r}.jsonl", Path(tmp) / f"stacks-{r}.txt"
            journal.touch()
            process = ctx.Process(target=_child, args=(specs, entries, os.getpid(), list(sys.path),
                                                       {**os.environ, **extra}, os.getcwd(), str(journal), str(stacks)))
            children.append(_Rank(process, journal, stacks))
        try:
            with interrupts.deferred():   # a child half started (its data half sent) printed an EOFError traceback
                for child in children:
                    child.process.start()
            return _follow(specs, children, timeout, out, on_window, on_done)
        finally:   # measured, failed, Ctrl-C, a parent-side bug: nothing of the configuration keeps running
            for child in children:
                if child.process.pid is not None:
                    _kill_group(child.process)
                if child.feed is not None:
                    child.feed.close()


def _follow(specs: list[RunSpec], children: list[_Rank], timeout: float, out: Path, on_window,
            on_done) -> int:
    """Follow the processes (`run_isolated`): each configuration's rows to `on_done` once every
    process has ended it; stop when one process has failed (several ranks) or died, or the deadline
    passed (STARTUP_S + `timeout` s, then `timeout` s from when every process said it was ready, and
    again from each configuration's end). The number of configurations ended."""
    deadline, all_ready, done, named = time.monotonic() + STARTUP_S + timeout, False, 0, len(children) > 1
    while done < len(specs):
        for r, child in enumerate(children):
            child.read(on_window if r == 0 else None)
        if all(c.ended > done for c in children):
            on_done(specs[done], _rows(specs[done], done, children, named))
            done += 1
            deadline = time.monotonic() + timeout
            continue
        if all(c.finished for c in children):   # it stopped after a failure: the rest in a new process
            return done
        # /proc, not is_alive(): the forkserver reports a death late on a busy machine, after a peer's
        # error that the death caused has arrived; and an exit begun, not a zombie: a dying rank's
        # sockets close (its peer's collective fails) before it turns zombie
        dead = [r for r, c in enumerate(children) if not c.finished and _exit_begun(c.process.pid)]
        if dead or (named and any(c.failure(done) for c in children)):
            for r, child in enumerate(children):
                child.read(on_window if r == 0 else None)   # what the last poll left unread
            dead = [r for r in dead if not children[r].finished]   # one that wrote its last record, then exited
            if all(c.ended > done for c in children) or not (dead or named and any(c.failure(done) for c in children)):
                continue
            on_done(specs[done], [_failed(specs[done], done, children, dead, named)])
            return done + 1
        if not all_ready and all(c.ready for c in children):
            deadline, all_ready = time.monotonic() + timeout, True
        if time.monotonic() > deadline:
            on_done(specs[done], [_timed_out(specs[done], children, timeout, out)])
            return done + 1
        time.sleep(POLL_S)   # not a join: a rank that has already exited would make this loop spin
    return done


def _rows(spec: RunSpec, member: int, children: list[_Rank], named: bool) -> list[dict]:
    """The rows of a configuration every process ended: its windows, else one failure row."""
    first = _first_failure(member, children)
    if first is not None:
        return [_failure_row(spec, *first, named)]
    for r, child in enumerate(children):
        if len(child.rows(member)) < spec.repeats:   # a harness that yielded fewer windows than asked
            return [results.failed_row(spec, "error", (f"rank {r}" if named else "its process") + " ended it after "
                                       f"{len(child.rows(member))} of {spec.repeats} windows")]
    return job_rows([child.rows(member) for child in children])


def _failed(spec: RunSpec, member: int, children: list[_Rank], dead: list[int], named: bool) -> dict:
    """The row of the configuration a process died in, or a rank failed in: a rank that died is the
    cause; its peers' errors (a collective's peer gone) follow from it."""
    for r in dead:
        if children[r].failure(member) is None:
            return _ended(spec, member, r, children[r], named)
    return _failure_row(spec, *_first_failure(member, children), named)


def _first_failure(member: int, children: list[_Rank]) -> tuple[int, dict] | None:
    """(rank, failure) of the rank whose process reported its failure first (the system-wide
    monotonic clock): a peer's error in a collective follows from it, and may be read in the same
    poll; None if none failed."""
    failed = {r: f for r, f in enumerate(c.failure(member) for c in children) if f is not None}
    first = min(failed, key=lambda r: (failed[r]["at"], r), default=None)
    return None if first is None else (first, failed[first])


def _failure_row(spec: RunSpec, r: int, failure: dict, named: bool) -> dict:
    """The row of a failure a process reported (rank `r`'s, named when there are several)."""
    return results.failed_row(spec, failure["status"], (f"rank {r}: " if named else "") + failure["error"])


def _ended(spec: RunSpec, member: int, r: int, child: _Rank, named: bool) -> dict:
    """The error row of a configuration whose process (rank `r`'s) ended before its last record."""
    child.process.join(EXIT_GRACE_S)   # it has ended: as soon as the forkserver reports it
    code = child.process.exitcode
    count = len(child.rows(member))
    how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
    return results.failed_row(spec, "error", (f"rank {r}'s" if named else "the configuration's")
                              + f" process ended ({how}) after {count} of {spec.repeats} windows")


def job_rows(per_rank: list[list[dict]]) -> list[dict]:
    """Each window's rows of every rank (rank 0 first), each with the job's rate: the ranks' images
    over the slowest rank's seconds."""
    rows = []
    for window in zip(*per_rank):
        job = sum(row["images"] for row in window) / max(row["seconds"] for row in window)
        rows += [{**row, "world_img_per_s": job} for row in window]
    return rows


def _timed_out(spec: RunSpec, children: list[_Rank], timeout: float, out: Path) -> dict:
    """Past the deadline: every process's stacks into OUT/timeouts/, then the processes killed; the
    timeout row, naming the main thread's innermost frame of the first rank still running."""
    running = [(r, c) for r, c in enumerate(children) if c.process.is_alive()]
    for _, child in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.process.pid, signal.SIGUSR1)
    time.sleep(1.0)
    for child in children:
        _kill_group(child.process)
    named = len(children) > 1
    dumps = [(r, c.stacks.read_text() if c.stacks.exists() else "") for r, c in running]
    folder = out / "timeouts"
    folder.mkdir(exist_ok=True)
    name = f"{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}-{spec.pipeline}-{spec.stage or spec.mode}.txt"
    (folder / name).write_text("".join((f"=== rank {r}\n" if named else "") + dump for r, dump in dumps))
    frames = [(r, w) for r, dump in dumps if (w := _innermost(dump))]
    # the rank that hangs, not one waiting for it in a collective
    r, w = next((f for f in frames if "torch/distributed" not in f[1]), frames[0] if frames else (0, ""))
    where = f"rank {r}: {w}" if named and w else w
    return results.failed_row(spec, "timeout", f"no result within {timeout:g} s; stacks of every thread in "
                              f"timeouts/{name}" + (f"; main thread in {where}" if where else ""))


def _kill_group(child) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:   # not yet its own group (ended before its os.setsid): the process alone
            os.kill(child.pid, signal.SIGKILL)
    child.join(5)


def run_in_process(spec: RunSpec, world: distributed.World, on_window=None,
                   shared: harness.Shared | None = None) -> list[dict]:
    """Run one configuration in this process (`--no-isolate`, or every rank of a torchrun job);
    the rows of every rank. A failure becomes one error row, except under torchrun, where it prints
    the rank and raises: the other ranks may be inside a collective. No deadline here. `shared`:
    what it shares with the configurations run before it (`harness.Shared`)."""
    rows = []
    try:
        for repeat, (facts, window) in enumerate(harness.run(spec, shared)):
            ranks = distributed.gather((spec, facts, window))
            rows += job_rows([[results.measured_row(s, f, repeat, w)] for s, f, w in ranks])
            if on_window is not None:
                on_window(rows[-1])
    except workloads.NotApplicable as e:
        return [results.failed_row(spec, "not-applicable", str(e))]
    except Exception as e:
        if not world.distributed:
            return [results.failed_row(spec, "error", f"{type(e).__name__}: {e}")]
        print(f"rank {world.rank}: {spec.pipeline} {spec.mode} {spec.model}: {type(e).__name__}: {e}", file=sys.stderr)
        raise
    finally:   # drop what a failed config still references before the next one
        machine.release(resolve_device(spec.config.device))
    return rows
