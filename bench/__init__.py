"""pipebench's harness: timing, sweeps, reports and the command line (`bench.cli`).

Every pipebench process (and its children) runs OpenMP's threads, torch's intra-op pool, with
`OMP_WAIT_POLICY=PASSIVE` unless it is set: they sleep between parallel regions instead of
spinning, which on a small CPU budget took the cores the pipelines' own threads need. It is set
here, before torch loads the OpenMP runtime (which reads it once).
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
