"""A pytest plugin: the machine's CPU seconds (user, nice, system, irq, softirq of /proc/stat) and the wall
seconds of each test, its setup and teardown included, one line per test in $CPU_PER_TEST_OUT (emptied as the session starts). Meant for
the suite in one process (no xdist), so that what the machine spent while a test ran is that test's:
its own CPU and that of every process it started, forked ones included, which no rusage of the test's
process counts once their parent is killed. Then `python results/2026-12-02-tests/machine_cpu_per_test.py FILE`
prints the total, the sum per file and the 40 dearest tests.

    CPU_PER_TEST_OUT=/tmp/cpu.tsv PYTHONPATH=results/2026-12-02-tests python -m pytest -p machine_cpu_per_test \\
        -p no:xdist -q -p no:cacheprovider
"""
from __future__ import annotations

import collections
import os
import sys
import time

import pytest


def _machine_cpu_s() -> float:
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    return (ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]) / os.sysconf("SC_CLK_TCK")


def pytest_sessionstart(session):
    open(os.environ["CPU_PER_TEST_OUT"], "w").close()   # a rerun into the same file starts it again


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = _machine_cpu_s(), time.monotonic()
    yield
    with open(os.environ["CPU_PER_TEST_OUT"], "a") as out:
        out.write(f"{_machine_cpu_s() - cpu:.2f}\t{time.monotonic() - wall:.2f}\t{item.nodeid}\n")


def summary(path: str) -> None:
    rows = [line.rstrip("\n").split("\t") for line in open(path)]
    rows = [(float(cpu), float(wall), test) for cpu, wall, test in rows]
    print(f"{len(rows)} tests: {sum(r[0] for r in rows):.0f} CPU s, {sum(r[1] for r in rows):.0f} wall s")
    per_file = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for cpu, wall, test in rows:
        entry = per_file[test.split("::")[0]]
        entry[0] += cpu
        entry[1] += wall
        entry[2] += 1
    print("\nper file: CPU s, wall s, tests")
    for name, (cpu, wall, n) in sorted(per_file.items(), key=lambda kv: -kv[1][0]):
        print(f"{cpu:7.1f} {wall:7.1f} {n:5d}  {name}")
    print("\nthe 40 dearest tests: CPU s, wall s")
    for cpu, wall, test in sorted(rows, reverse=True)[:40]:
        print(f"{cpu:7.2f} {wall:7.2f}  {test}")


if __name__ == "__main__":
    summary(sys.argv[1])
