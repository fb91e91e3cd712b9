"""Where the suite's time goes by process: py-spy's samples of the README's test command, every
Python process it starts included, grouped by what each process is.

    py-spy record -r 25 -f raw -o RAW --subprocesses -- python -m pytest -n auto --dist worksteal -q -p no:cacheprovider
    python results/2026-12-02-tests/suite_profile.py reduce RAW | gzip -9n > REDUCED.tsv.gz   # a line per (process, test, what)
    python results/2026-12-02-tests/suite_profile.py summary REDUCED.tsv.gz

A sample is a thread py-spy found running (its default: idle threads left out), 25 a second; a
thread waiting inside C code may still count. `reduce` keeps, per sample stack: the process (pid),
its kind (from its command line and stacks), the test it ran under (xdist workers), and whether it
was importing a module and whether torch's own import."""
import collections
import fileinput
import re
import sys

KINDS = [   # (kind, pattern of the command line), first match wins
    ("xdist worker", r"exec\(eval\(sys\.stdin"),
    ("pytest (main process)", r"-m pytest"),
    ("forkserver", r"multiprocessing\.forkserver import main"),
    ("spawned (multiprocessing spawn)", r"multiprocessing\.spawn import spawn_main"),
    ("resource tracker", r"multiprocessing\.resource_tracker"),
    ("pipebench (bench.cli)", r"bench[./]cli|pipebench|torch\.distributed\.run"),
    ("pip", r"\bpip\b"),
]
TEST = re.compile(r"(test_\w+) \((?:.*/)?(test_\w+\.py):\d+\)")


def kind(command: str, stacks: str) -> str:
    for name, pattern in KINDS:
        if re.search(pattern, command):
            if name == "forkserver" and "_serve_one (multiprocessing/forkserver.py" in stacks:
                return "forked by a forkserver"
            if name == "xdist worker" and "xdist/remote.py" not in stacks:
                return "forked by an xdist worker"
            return name
    return "other Python processes the tests start"


def reduce(path: str) -> None:
    text = open(path, encoding="utf-8", errors="replace").read()
    per: dict[str, list] = collections.defaultdict(list)   # pid -> [(frames, n)]
    command: dict[str, str] = {}
    for stack, n in re.findall(r"^(process \d+:.*?) (\d+)$", text, re.S | re.M):
        processes = list(re.finditer(r'process (\d+):"(.*?)";', stack, re.S))
        if not processes:
            continue
        pid, rest = processes[-1].group(1), stack[processes[-1].end():]
        command[pid] = " ".join(processes[-1].group(2).split())
        if rest.strip(";"):
            per[pid].append((rest, int(n)))
    counts: collections.Counter = collections.Counter()
    for pid, stacks in per.items():
        what = kind(command[pid], "".join(s for s, _ in stacks))
        for rest, n in stacks:
            test = TEST.search(rest) if what == "xdist worker" else None
            counts[(pid, what, f"{test.group(2)}::{test.group(1)}" if test else "-",
                    int("_find_and_load" in rest), int("<module> (torch/__init__.py" in rest))] += n
    print("pid\tkind\ttest\timporting\ttorch_import\tsamples")
    for key, n in sorted(counts.items()):
        print("\t".join(map(str, key)) + f"\t{n}")


def summary(path: str, top: int = 15) -> None:
    lines = fileinput.hook_compressed(path, "r")   # gzip-compressed where its name ends in .gz
    rows = [line.rstrip("\n").split("\t") for line in lines][1:]
    total = sum(int(r[5]) for r in rows)
    by_kind = collections.defaultdict(lambda: [0, 0, set(), set()])
    tests: collections.Counter = collections.Counter()
    for pid, what, test, importing, torch_import, n in rows:
        k = by_kind[what]
        k[0] += int(n)
        k[1] += int(n) * int(importing)
        k[2].add(pid)
        if int(torch_import):
            k[3].add(pid)
        if test != "-":
            tests[test] += int(n)
    importing = sum(k[1] for k in by_kind.values())
    torch_processes = sum(len(k[3]) for k in by_kind.values())
    print(f"# {total} samples (25 a second) in {len({r[0] for r in rows})} processes; importing modules: "
          f"{importing} ({importing / total:.0%}); {torch_processes} processes imported torch")
    print("# samples, share, of them importing, processes, of them importing torch: kind")
    for what, (n, imp, pids, torch_pids) in sorted(by_kind.items(), key=lambda kv: -kv[1][0]):
        print(f"{n:6d} {n / total:4.0%} {imp:6d} {len(pids):4d} {len(torch_pids):4d}  {what}")
    print(f"# the {top} tests of most samples in the xdist workers (their own process only)")
    for test, n in tests.most_common(top):
        print(f"{n:6d}  {test}")


if __name__ == "__main__":
    {"reduce": reduce, "summary": summary}[sys.argv[1]](sys.argv[2])
