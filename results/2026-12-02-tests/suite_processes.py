"""Where the suite's CPU goes, by the role of each process: `poll OUT.json` samples /proc every 50 ms until
SIGTERM (each process seen: its command line, parent, CPU seconds when first and last seen) and writes OUT;
`summary OUT.json` prints the CPU of each role, the xdist workers' own and what the processes they started
took, forked or exec'd (a process forked keeps its parent's command line). A process ended within 50 ms of its
start, or its last 50 ms, is missed: the sums are lower bounds.

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
                cpu = (int(fields[11]) + int(fields[12])) / TICK
                entry = seen.get(pid)
                if entry is None or not entry["cmd"]:
                    cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ")[:200].decode(errors="replace")
                    entry = seen.setdefault(pid, {"ppid": int(fields[1]), "cpu0": cpu, "first": time.time()})
                    entry["cmd"] = cmd
                entry["cpu"] = cpu
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
        time.sleep(0.05)
    json.dump(seen, open(out, "w"))


def role(seen: dict, pid: str) -> str:
    entry = seen[pid]
    cmd, parent = entry["cmd"], seen.get(str(entry["ppid"]))
    forked = parent is not None and parent["cmd"] == cmd
    if "exec(eval(sys.stdin" in cmd:   # execnet's bootstrap: an xdist worker
        return "a fork of an xdist worker" if forked else "xdist worker"
    if "forkserver import main" in cmd:
        return "forked from a forkserver (a configuration's process, a DataLoader worker)" if forked else \
            "forkserver interpreter (imports torch and its preload)"
    if "spawn_main" in cmd:
        return "spawned by multiprocessing (DALI's parallel reader, mp.spawn)"
    if "bench.cli" in cmd or "from bench import cli" in cmd:
        return "pipebench interpreter"
    if " -m pytest" in cmd:
        return "pytest (controller)"
    if "python" in cmd:
        return "other Python process (a script, `python -c`, pip)"
    return ""


def summary(path: str) -> None:
    seen = json.load(open(path))
    suite = {pid for pid, e in seen.items() if " -m pytest" in e["cmd"] and " -n " in e["cmd"]}
    while True:   # everything below the pytest controller
        more = {pid for pid, e in seen.items() if str(e["ppid"]) in suite} - suite
        if not more:
            break
        suite |= more
    cpu, count = collections.Counter(), collections.Counter()
    for pid in suite:
        name = role(seen, pid) or "other"
        cpu[name] += seen[pid]["cpu"] - seen[pid]["cpu0"] * (name == "pytest (controller)")
        count[name] += 1
    total = sum(cpu.values())
    print(f"{len(suite)} processes below the pytest controller, {total:.0f} CPU s (each process's own user + system)")
    for name, seconds in cpu.most_common():
        print(f"{seconds:7.1f} s {100 * seconds / total:5.1f} % {count[name]:5d}  {name}")


if __name__ == "__main__":
    {"poll": poll, "summary": summary}[sys.argv[1]](sys.argv[2])
