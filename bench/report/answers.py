"""The one-line answers per situation (`answers`) that ANSWER.md, the report and the printed
summary give: which pipeline keeps the model fed, and what limits the others.
"""
from __future__ import annotations

import pandas as pd

from ..plan import MIN_PROCESSES, MIN_WINDOWS
from .analysis import ABOVE, STEP_ORDER, TOO_FEW, situations, ties
from .formatting import code, pct, plural

def base_name(pipeline: str) -> str:
    return pipeline.split(" (", 1)[0]


def baseline(rows: pd.DataFrame):
    """The `dataloader` row among one situation's rows: the plain variant if measured, else the one
    with the fewest options named; None if none."""
    found = rows[rows.pipeline.map(base_name) == "dataloader"]
    if found.empty:
        return None
    return found.loc[found.pipeline.str.len().idxmin()]


def reads_text(every: int) -> str:
    """How often a situation's step reads the loss, for its heading ('' for never)."""
    return "" if not every else ", loss read every step" if every == 1 else f", loss read every {int(every)} steps"


def answer(rows: pd.DataFrame) -> str:
    """One situation's answer (one model, step kind, loss reads, setting, CPU budget), as a sentence.
    It names a pipeline to use only where one is fed and the others within noise of it are named
    with it; cells with too few measurements are left out of every comparison, and said so."""
    first = rows.iloc[0]
    per_gpu = "" if str(first.device).startswith("cpu") else " per GPU"   # no GPU: the cores are the machine's
    head = (f"With {plural(int(first.cpus), 'core')}{per_gpu}, {code(first.model)} at {first.image_size} px "
            f"({first.step} step{reads_text(first.sync_every)}) trains at {first.model_rate:,.0f} img/s alone")
    thin = rows[rows.verdict == TOO_FEW]
    above = rows[rows.verdict == ABOVE]
    rows = rows[~rows.verdict.isin([TOO_FEW, ABOVE])]
    left = "".join(f" ({what}: {', '.join(code(p) for p in out.pipeline)})" for what, out in (
        ("too few measurements to compare", thin), ("not compared, e2e above model-only", above)) if len(out))
    if rows.empty and len(above):
        return head + (f"; e2e ran faster than model-only ({pct(above.share.min())}–{pct(above.share.max())} of it) "
                       f"for {', '.join(code(p) for p in above.pipeline)}: the two timings disagree, so this run names "
                       "no pipeline (longer windows, --min-window-s, or an idle machine may settle it).")
    if rows.empty:
        had = "; ".join(dict.fromkeys(thin.thin))   # what the cells had, each said once
        return head + (f"; too few measurements to compare pipelines (thin: {had}; a verdict needs {MIN_PROCESSES} "
                       f"processes of {MIN_WINDOWS} windows each per cell).")
    base = baseline(rows)
    parts = [head]
    if base is not None:
        parts.append(f"{code(base.pipeline)} delivers {base.img_per_s:,.0f} ({base.verdict}, {pct(base.share)})")
    fed = rows[rows.verdict == "fed"].sort_values("img_per_s", ascending=False)
    keep = ", ".join(code(p) for p in fed.pipeline)
    verb = "keeps" if len(fed) == 1 else "keep"
    if base is not None and base.verdict == "fed":
        return "; ".join(parts) + f": the model is the limit; {keep} {verb} it fed{left}."
    pool = fed if len(fed) else rows.sort_values("img_per_s", ascending=False)
    best = pool.iloc[0]
    tied = [best.pipeline] + [r.pipeline for r in pool.iloc[1:].itertuples() if ties(r.e2e, best.e2e)]
    names = " or ".join(code(p) for p in tied) if len(tied) < 3 else ", ".join(code(p) for p in tied[:-1]) + f" or {code(tied[-1])}"
    other = base is not None and best.pipeline != base.pipeline   # a speed-up over dataloader, not over itself
    speed = f", {best.img_per_s / base.img_per_s:.1f}× `dataloader`" if other else ""
    within = " (within noise of each other)" if len(tied) > 1 else ""
    if fed.empty:
        return "; ".join(parts) + (f"; no pipeline keeps it fed: the fastest, {names}{within}, "
                                   f"reach{'' if len(tied) > 1 else 'es'} {pct(best.share)} of model-only{speed}{left}.")
    faster = f" ({best.img_per_s / base.img_per_s:.1f}× faster than `dataloader`)" if other else ""
    return "; ".join(parts) + f"; {keep} {verb} it fed: use {names}{within}{faster}{left}."


def answers(c: pd.DataFrame, s: pd.DataFrame | None = None) -> list[str]:
    """The answer for every measured situation (`s`: `situations(c)` if already made), largest CPU
    budget first."""
    s = situations(c) if s is None else s
    if s.empty:
        return []
    order = s.assign(step_rank=s.step.map({k: i for i, k in enumerate(STEP_ORDER)}).fillna(9))
    found = [((-cpus, size, model, rank, every), answer(rows))
             for (size, model, rank, every, cpus), rows in order.groupby(["image_size", "model", "step_rank",
                                                                          "sync_every", "cpus"], sort=True)]
    return [line for _, line in sorted(found, key=lambda item: item[0])]
