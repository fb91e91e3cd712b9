"""Where the suite's CPU goes. As a pytest plugin: each test's CPU seconds (this process's, and its
children's reaped meanwhile, from getrusage before and after it) and wall seconds, a line per test in
/tmp/cpuplug/out-PID.txt (one file per xdist worker); as a script: their summary.

    rm -rf /tmp/cpuplug; PYTHONPATH=results/2026-12-02-tests python -m pytest -n auto --dist worksteal \
        -p cpu_per_test -q -p no:cacheprovider
    cat /tmp/cpuplug/out-*.txt | gzip -9n > RAW.gz; python results/2026-12-02-tests/cpu_per_test.py RAW.gz

A child's CPU lands on the test during which it is reaped: a forkserver's whole life on the test that
ends it, or on none where it outlives the worker's last test."""
import fileinput
import os
import resource
import sys
import time
from collections import defaultdict

import pytest

OUT = "/tmp/cpuplug"
TOP = 40


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before, start = _cpu(), time.monotonic()
    yield
    after = _cpu()
    os.makedirs(OUT, exist_ok=True)
    with open(f"{OUT}/out-{os.getpid()}.txt", "a") as f:
        f.write(f"{after[0] - before[0]:.2f} {after[1] - before[1]:.2f} {time.monotonic() - start:.2f} {item.nodeid}\n")


def summary(path: str) -> None:
    """Totals, the TOP tests of most CPU, and CPU per test file, of the plugin's lines in `path`."""
    lines = fileinput.hook_compressed(path, "r")   # gzip-compressed where its name ends in .gz
    tests = [(float(own), float(children), float(wall), test)
             for own, children, wall, test in (line.split(maxsplit=3) for line in lines if line.strip())]
    own, children = sum(t[0] for t in tests), sum(t[1] for t in tests)
    print(f"# {len(tests)} tests: {own + children:.0f} s CPU (own {own:.0f}, children {children:.0f}), "
          f"{sum(t[2] for t in tests):.0f} s wall summed over the workers")
    ranked = sorted(tests, key=lambda t: -(t[0] + t[1]))[:TOP]
    print(f"# the {TOP} tests of most CPU ({sum(t[0] + t[1] for t in ranked):.0f} s): CPU s, own, children's, wall s, test")
    for o, c, w, test in ranked:
        print(f"{o + c:6.1f} {o:6.1f} {c:6.1f} {w:6.1f} {test.strip()}")
    files: dict[str, list[float]] = defaultdict(list)
    for o, c, _, test in tests:
        files[test.split("::")[0]].append(o + c)
    print("# per file: CPU s, tests, file")
    for name, cpu in sorted(files.items(), key=lambda f: -sum(f[1])):
        print(f"{sum(cpu):6.1f} {len(cpu):4d} {name}")


if __name__ == "__main__":
    summary(sys.argv[1])
