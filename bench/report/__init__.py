"""Turn result CSVs into REPORT.md, SUMMARY.md and plots, reproducibly (same CSVs -> same bytes); every
file it writes (the README's block too) is replaced whole (`results.replace_file`): a full disk or
Ctrl-C leaves the previous one as it was.

What a report never does: pool runs. A run is one results file, one commit and one machine (its
boot id; the host name for rows that have none). Each run gets its own sections, and the summary
(and the README block made from it) comes from exactly one run.

One module per concern: `analysis` (rows to numbers and verdicts; its RULES say how, in every
REPORT.md), `formatting` (numbers as text), `answers` (one line per situation), `plots`,
`sections` (REPORT.md's per-run sections), `summary` (SUMMARY.md and the README block's text),
`scaling` (several GPUs of one host, as measured), `hosts` (the prediction per host and the
several-GPU answer), `readme` (finding and replacing the README's blocks), `files` (writing
REPORT.md, SUMMARY.md, ANSWER.md and PREDICTION.md) and `docs` (docs/' knob and column lists, made
from the code). What the command line and the tests use is imported here.

`index` writes results/README.md, the table of the committed runs (`python -m bench.report.index
results`), and `slim` keeps committed logs and plots small (`python -m bench.report.slim results`);
nothing here imports them.
"""
from .analysis import cells, ceilings, label_variants, levels, load, runs, situations, ties, view_of
from .verdicts import TOO_FEW, verdict
from .answers import answers
from .files import write, write_answers, write_prediction
from .formatting import pct, plural, rate
from .readme import KINDS, marks
from .summary import speeds

__all__ = ["KINDS", "TOO_FEW", "answers", "cells", "ceilings", "label_variants", "levels", "load",
           "pct", "plural", "rate", "runs", "situations", "speeds", "ties", "verdict", "view_of", "marks", "write",
           "write_answers", "write_prediction"]
