"""The functions a profile of the suite in one process spent most time in, and who called the dearest
(issue 69: which in-process work the tests could be spared). The processes the tests start are not in
it; time in C functions (numpy's sort, a sleep, a wait) is theirs alone, not shared out.

    python -m cProfile -o PROF -m pytest -q -p no:cacheprovider -p no:xdist
    python results/2026-12-02-tests/profile_top.py PROF [N [NAME ...]]

With NAMEs, then each function of that name: its calls, own and cumulative time (s).
"""
import pstats
import sys


def main(path: str, n: int = 25, *names: str) -> None:
    stats = pstats.Stats(path)
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][2])   # (file, line, name) -> (cc, nc, tt, ct, callers)
    print(f"{stats.total_tt:.1f} s profiled in all; the {n} functions of most own time (s), their calls, and the"
          " callers that spent most in them (s):")
    for (file, line, name), (_, calls, own, _, callers) in rows[:n]:
        where = f"{file.split('site-packages/')[-1].replace('/work/main/', '')}:{line}({name})" if file != "~" else name
        top = sorted(callers.items(), key=lambda item: -item[1][2])[:2]
        by = "; ".join(f"{c[0].split('site-packages/')[-1].replace('/work/main/', '')}:{c[1]}({c[2]}) {v[2]:.1f}"
                       for c, v in top)
        print(f"{own:8.1f} {calls:9d}  {where}  <- {by}")
    for (file, line, name), (_, calls, own, cumulative, _) in stats.stats.items():
        if name in names:
            print(f"{name} ({file.replace('/work/main/', '')}:{line}): {calls} calls, {own:.1f} s own, {cumulative:.1f} s"
                  " with what it called")


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]), *sys.argv[3:])
