"""pipebench's harness: timing, sweeps, reports and the command line (`bench.cli`).

One folder per role, each with a docstring saying why its files are split: `measuring/` (one
configuration timed in one process), `running/` (which configurations, in which order and which
processes), `results/` (the rows and the settings they record), `report/` (rows to REPORT.md, the
summary, the README's blocks), `claims/` (the common advice, each claim an experiment), `studies/`
(the timeline, the busy step's stand-in check, stability, side-stream priority, a GPU decoder's stages) and
`cli/` (the `pipebench` command).
Each imports only from folders listed before it (`report/` and `claims/` from `measuring/`,
`running/` and `results/`); nothing imports `cli/` (tests/test_imports.py).

Every pipebench process (and its children) runs OpenMP's threads, torch's intra-op pool, with
`OMP_WAIT_POLICY=PASSIVE` unless it is set: they sleep between parallel regions instead of
spinning, which on a small CPU budget took the cores the pipelines' own threads need. It is set
here, before torch loads the OpenMP runtime (which reads it once).
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
