"""`pipebench claims`: the common advice on feeding a GPU, each claim settled by one small experiment.

A claim (`framework.Claim`) holds the advice as commonly stated, where it is stated, what the
experiment does, a `measure` that returns tidy rows and a `judge` that turns them into a verdict
(holds / does not hold / depends on X) quoting the numbers it rests on. Verdicts are generated from
the rows alone, so CLAIMS.md can be rebuilt from claims.csv. Claims about CUDA behaviour are skipped
on a machine without a GPU, with the reason.

  framework.py  Claim, Scale, Context, Verdict, rows, running claims, shared timing helpers
  copies.py     claims 1-4: pageable copies, non_blocking, pinning on the fly, GPU->CPU copies
  loaders.py    claims 5-7: DataLoader pin_memory, workers vs cores, collate_fn to the GPU
  training.py   claims 8-10: AMP, out-of-memory fixes, torch.compile / CUDA graphs
  catalog.py    the claims in order, `select` by number or name
  report.py     claims.csv -> verdicts -> CLAIMS.md
"""
from .catalog import CLAIMS, KEYS, select  # noqa: F401
from .framework import COLUMNS, Context, Scale, Verdict, combine, median, row, run  # noqa: F401
from .copies import (  # noqa: F401
    COPY_METRICS, PAGEABLE_TO, PIN_VARIANTS, hidden_fraction, judge_d2h_without_sync, judge_non_blocking,
    judge_pageable_blocks, judge_pin_on_the_fly,
)
from .loaders import (  # noqa: F401
    COLLATE_ZERO, WORKERS, exchange_setting, judge_collate_to_gpu, judge_pin_memory_exchange,
    judge_workers_vs_cores, measure_collate_to_gpu, measure_pin_memory_exchange, measure_workers_vs_cores,
    worker_counts,
)
from .training import (  # noqa: F401
    AMP_SETTINGS, FORMATS, judge_amp, judge_fast_step, judge_oom_fixes, measure_amp, measure_oom_fixes,
    oom_settings,
)
from .report import read, verdicts, write_report  # noqa: F401
