"""When the suite's time passes. As a pytest plugin: a line per event, seconds since $TIMELINE_T0 (the
shell's clock as the command began), in /tmp/timeline/PROCESS.txt (the controller's: main.txt; each
xdist worker's: gwN.txt): the controller's and each worker's start, configuration, collection, session end
and exit, each test's start and end, and as the controller's session ends (before pytest removes its
temporary folder) how many files and bytes that folder holds; as a script: the summary.

    rm -rf /tmp/timeline; TIMELINE_T0=$(date +%s.%N) PYTHONPATH=results/2026-12-02-tests \
        python -m pytest -n auto --dist worksteal -p suite_timeline -q -p no:cacheprovider
    cat /tmp/timeline/*.txt | gzip -9n > RAW.gz; python results/2026-12-02-tests/suite_timeline.py RAW.gz
"""
import atexit
import fileinput
import os
import sys
import time
from collections import defaultdict

import pytest

OUT = "/tmp/timeline"
T0 = float(os.environ.get("TIMELINE_T0") or time.time())
WHO = os.environ.get("PYTEST_XDIST_WORKER", "main")


def _log(what: str) -> None:
    os.makedirs(OUT, exist_ok=True)
    with open(f"{OUT}/{WHO}.txt", "a") as f:
        f.write(f"{time.time() - T0:.2f} {WHO} {what}\n")


if __name__ != "__main__":   # loaded as the plugin (run as the summary script, it logs nothing)
    _log("started")
    atexit.register(_log, "exit")


def pytest_configure(config):
    _log("configured")


def pytest_collection_finish(session):
    _log("collected")


def pytest_runtest_logstart(nodeid, location):
    _log(f"start {nodeid}")


def pytest_runtest_logfinish(nodeid, location):
    _log(f"end {nodeid}")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    if WHO == "main":   # the run's temporary folder, the workers' and the shared data roots, before its removal
        _log("counting files")
        base = session.config._tmp_path_factory.getbasetemp()
        sizes = [os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(base) for f in files]
        _log(f"files {len(sizes)} bytes {sum(sizes)}")
    _log("session end")


def summary(path: str) -> None:
    """The phases of the run, per worker its time in tests and between them, and its last test."""
    events = defaultdict(list)
    for line in fileinput.hook_compressed(path, "r"):   # gzip-compressed where its name ends in .gz
        t, who, what = line.rstrip("\n").split(" ", 2)
        events[who].append((float(t), what))
    first = {who: dict((what, t) for t, what in reversed(e)) for who, e in events.items()}   # first time of each
    last = {who: dict(((what, t) for t, what in e)) for who, e in events.items()}
    workers = sorted(w for w in events if w != "main")
    tests = {w: [(t, what.split(" ", 1)) for t, what in events[w] if what.startswith(("start ", "end "))] for w in workers}
    begun = sorted(tests[w][0][0] for w in workers)   # each worker's first test: it has collected every test
    ended = max(t for w in workers for t, _ in tests[w][-1:])
    files = next(what.split() for _, what in events["main"] if what.startswith("files "))
    print(f"# {len(workers)} workers, {sum(len(tests[w]) // 2 for w in workers)} tests; seconds from the command's start")
    print(f"{first['main']['started']:7.2f}  the controller's plugin imported (Python, pytest and the plugins before it)")
    print(f"{first['main']['configured']:7.2f}  the controller configured (tests/conftest.py imported)")
    print(f"{min(first[w]['started'] for w in workers):7.2f}  the first worker started")
    print(f"{max(first[w]['configured'] for w in workers):7.2f}  the last worker configured")
    print(f"{begun[0]:7.2f}  the first test began (its worker had collected every test)")
    print(f"{begun[-1]:7.2f}  the last worker's first test began")
    print(f"{ended:7.2f}  the last test ended")
    counted = last['main']['session end'] - first['main']['counting files']
    print(f"{last['main']['session end']:7.2f}  the controller's session ended: {int(files[1]):,} files, "
          f"{int(files[3]) / 2**30:.1f} GiB in the run's temporary folder (counted by this plugin in {counted:.1f} s), "
          "removed before the controller exits")
    print(f"{max(last[w]['exit'] for w in workers):7.2f}  the last worker exited (its temporary folder removed)")
    print(f"{last['main']['exit']:7.2f}  the controller exited")
    print("# per worker: seconds in tests, between tests, tests")
    for w in workers:
        busy = gaps = 0.0
        for (t0, (kind0, _)), (t1, (kind1, _)) in zip(tests[w], tests[w][1:]):
            busy += (t1 - t0) * (kind0 == "start" and kind1 == "end")
            gaps += (t1 - t0) * (kind0 == "end" and kind1 == "start")
        print(f"{w}  {busy:6.1f}  {gaps:5.1f}  {len(tests[w]) // 2}")
    print("# the run's end: each worker's last test (seconds it began and ended) and how long the worker then")
    print("# waited for the last test of the run to end")
    for w in workers:
        (began, (_, nodeid)), (done, _) = tests[w][-2:]
        print(f"{w}  {began:7.2f}  {done:7.2f}  {ended - done:5.1f}  {nodeid}")


if __name__ == "__main__":
    summary(sys.argv[1])
