"""Seconds of test time per test file, from a `pytest --durations=0` log (setup, call and teardown of every
test summed; under xdist the two workers' times, about twice the wall time), from the log as committed (gzip):

    python results/2026-12-02-tests/durations.py results/2026-12-02-tests/durations-ce1747d.txt.gz
"""
import collections
import fileinput
import re
import sys

per_file = collections.Counter()
for line in fileinput.hook_compressed(sys.argv[1], "r"):   # gzip-compressed where its name ends in .gz
    found = re.match(r"([\d.]+)s (?:setup|call|teardown)\s+(tests/\S+?)::", line)
    if found:
        per_file[found.group(2)] += float(found.group(1))
print(f"{sum(per_file.values()):.0f} s in all")
for name, seconds in per_file.most_common(10):
    print(f"{seconds:6.1f} s  {name}")
