"""Where the suite's CPU goes, by the role of each process: `poll OUT.json` samples /proc every 50 ms until
SIGTERM (each process seen, told apart from a later one with its pid by its start time: its last command line,
its parent, its CPU seconds when last seen) and writes OUT; `summary OUT.json` prints the CPU of each role over
the pytest controller and every process below it: the xdist workers' own, and what the processes they started
took, exec'd or forked (a forked process keeps its parent's command line until it execs). A process that ended
within 50 ms of its start, or its last 50 ms, is missed: the sums are lower bounds.

    python3 results/2026-12-02-tests/suite_processes.py poll /tmp/seen.json & POLLER=$!
    python -m pytest -n auto --dist worksteal -q -p no:cacheprovider; kill $POLLER; wait $POLLER
    python3 results/2026-12-02-tests/suite_processes.py summary /tmp/seen.json
"""
import collections
import json
import os
import signal
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def poll(out: str) -> None:
    seen, stop = {}, []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    while not stop:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
                cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ")[:200].decode(errors="replace")
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            entry = seen.setdefault(f"{pid}@{fields[19]}", {"pid": int(pid), "ppid": int(fields[1]), "cmd": ""})
            entry["cpu"] = (int(fields[11]) + int(fields[12])) / TICK
            entry["cmd"] = cmd or entry["cmd"]   # a zombie's is empty
        time.sleep(0.05)
    json.dump({"poller": os.getpid(), "processes": list(seen.values())}, open(out, "w"))


def _role(process: dict, parent: dict | None) -> str:
    cmd = process["cmd"]
    if parent is not None and parent["cmd"] == cmd:   # forked, not (yet) exec'd
        return "forked from a forkserver (a configuration's process, a DataLoader worker)" \
            if "forkserver import main" in cmd else "a fork of another process (its role's)"
    if "exec(eval(sys.stdin" in cmd:   # execnet's bootstrap: an xdist worker
        return "xdist worker"
    if "forkserver import main" in cmd:
        return "forkserver interpreter (imports torch and its preload)"
    if "spawn_main" in cmd:
        return "spawned by multiprocessing (DALI's parallel reader, mp.spawn)"
    if "torch.distributed" in cmd:
        return "torchrun launcher"
    if "-m bench.cli" in cmd or "from bench import cli" in cmd or "/bin/pipebench" in cmd:
        return "pipebench interpreter"
    if " -m pytest" in cmd:
        return "pytest controller"
    if "python" in cmd:
        return "other Python process (a script, `python -c`, pip)"
    return "other"


def summary(path: str) -> None:
    data = json.load(open(path))
    processes = [p for p in data["processes"] if p["pid"] != data["poller"]]
    by_pid = {}
    for p in processes:   # a reused pid's later process is the parent its children name
        by_pid[p["pid"]] = p
    suite = [p for p in processes if os.path.basename(p["cmd"].split(" ")[0]).startswith("python")
             and " -m pytest" in p["cmd"] and " -n " in p["cmd"]]   # not a shell that runs it
    pids = {p["pid"] for p in suite}
    while True:   # everything below the pytest controller
        more = [p for p in processes if p["ppid"] in pids and p["pid"] not in pids]
        if not more:
            break
        suite += more
        pids |= {p["pid"] for p in more}
    cpu, count = collections.Counter(), collections.Counter()
    for p in suite:
        role = _role(p, by_pid.get(p["ppid"]))
        cpu[role] += p["cpu"]
        count[role] += 1
    total = sum(cpu.values())
    print(f"{len(suite)} processes, the pytest controller and those below it: {total:.0f} CPU s (each one's own "
          f"user + system)")
    for role, seconds in cpu.most_common():
        print(f"{seconds:7.1f} s {100 * seconds / total:5.1f} % {count[role]:5d}  {role}")


if __name__ == "__main__":
    {"poll": poll, "summary": summary}[sys.argv[1]](sys.argv[2])
