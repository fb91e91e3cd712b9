"""A pytest plugin that logs every read of a CIFAR-layout split (`pipelines.sources.load_split`) in the
test processes: the xdist worker, the folder, split, cache root and limit, the seconds it took and the
test that was running (issue 69: the costliest work in the tests' own processes in profile-top-afe04fb.txt,
304 reads, 36 s with what they called). Under tests/conftest.py's read-once cache only the reads it makes are
logged. The processes the tests start (pipebench, configuration processes) are not pytest's.

    SPLIT_READS=reads.txt PYTHONPATH=results/2026-12-02-tests \\
        python -m pytest -n auto --dist worksteal -q -p no:cacheprovider -p split_reads
    python results/2026-12-02-tests/split_reads.py reads.txt   # reads, distinct splits, seconds, seconds read again
"""
import json
import os
import sys
import time

import pipelines.sources as sources

RUNNING = ["(between tests)"]
_load_split = sources.load_split


def load_split(folder, split, cache_root=None, limit=None):
    start = time.perf_counter()
    out = _load_split(folder, split, cache_root, limit)
    with open(os.environ["SPLIT_READS"], "a") as log:
        log.write(json.dumps([os.environ.get("PYTEST_XDIST_WORKER", "-"), str(folder), split, str(cache_root),
                              limit, round(time.perf_counter() - start, 4), RUNNING[0]]) + "\n")
    return out


# every name it is called by; tests/conftest.py, imported later, keeps `sources.load_split` as the read
sources.load_split = sources.split.load_split = sources.jpeg.load_split = load_split


def pytest_runtest_protocol(item, nextitem):
    RUNNING[0] = item.nodeid


if __name__ == "__main__":
    reads = [json.loads(line) for line in open(sys.argv[1])]
    seen, again = set(), 0.0
    for worker, *key, seconds, _ in reads:
        if (worker, *key) in seen:
            again += seconds
        seen.add((worker, *key))
    print(f"{len(reads)} reads of {len({tuple(r[1:5]) for r in reads})} distinct splits "
          f"(folder, split, cache root, limit) in {sum(r[5] for r in reads):.1f} s, "
          f"{again:.1f} s of it reading again what the same worker had read")
