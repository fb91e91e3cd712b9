"""A pytest plugin: each test's CPU seconds (this process's, and its children's reaped meanwhile, from
getrusage before and after it) and wall seconds, a line per test in /tmp/cpuplug/out-PID.txt (one file
per xdist worker), for finding where the suite's CPU goes:

    rm -rf /tmp/cpuplug; PYTHONPATH=results/2026-12-02-tests python -m pytest -n auto --dist worksteal \
        -p cpu_per_test -q -p no:cacheprovider

A child's CPU lands on the test during which it is reaped: a forkserver's whole life on the test that
ends it, or on none where it outlives the worker's last test."""
import os
import resource
import time

import pytest

OUT = "/tmp/cpuplug"


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
