"""A pytest plugin that logs every multiprocessing forkserver the test processes start: the xdist
worker, when, the server's pid, what it imports and the test that was running (issue 69: each start
imports torch, about 3.3 CPU s on the 2-core machine). The processes the tests start (pipebench,
configuration processes) are not pytest's and are not counted.

    FORKSERVER_STARTS=starts.txt PYTHONPATH=results/2026-12-02-tests \\
        python -m pytest -n auto --dist worksteal -q -p no:cacheprovider -p forkserver_starts
    python results/2026-12-02-tests/forkserver_starts.py starts.txt   # a count per worker, then the lines
"""
import collections
import multiprocessing.forkserver as forkserver
import os
import sys
import time

RUNNING = ["(between tests)"]
_ensure_running = forkserver.ForkServer.ensure_running


def ensure_running(self):
    before = self._forkserver_pid
    _ensure_running(self)
    if self._forkserver_pid != before:
        with open(os.environ["FORKSERVER_STARTS"], "a") as out:
            out.write(f"{os.environ.get('PYTEST_XDIST_WORKER', '-')} {time.time():.1f} {self._forkserver_pid} "
                      f"{','.join(sorted(self._preload_modules or [])) or '-'} {RUNNING[0]}\n")


forkserver.ForkServer.ensure_running = ensure_running
forkserver.ensure_running = forkserver._forkserver.ensure_running   # the module's name for it, bound at import


def pytest_runtest_protocol(item, nextitem):
    RUNNING[0] = item.nodeid


if __name__ == "__main__":
    lines = open(sys.argv[1]).read().splitlines()
    print(f"{len(lines)} forkservers started by the test processes; per worker:",
          dict(sorted(collections.Counter(line.split()[0] for line in lines).items())))
    print("\n".join(lines))
