"""The one verdict rule every answer, summary, report line and several-GPU sentence uses (`judge`,
`verdict`): fed / not fed (with its cause where loader-only was measured beside the step) /
inconclusive / no verdict, from an e2e cell and its model-only cell (median, range of the processes'
medians, processes, windows, the largest move of one process's windows), as RULES in
`bench.report.analysis` states it.
"""
from __future__ import annotations

import math

from ..running.plan import MIN_PROCESSES, MIN_WINDOWS
from .formatting import pct, plural

FED = 0.95    # e2e / model-only at or above this: the model is kept fed
FLOOR = 0.93  # and e2e's lowest process / model-only at or above this
AT = 0.95     # e2e at least this share of what loader-only delivered (its range's low end): e2e is at it
DRIFT = 0.05  # a process whose windows moved more than this (last vs first) is listed
ABOVE_BY = 0.01  # e2e's lowest process above model-only's highest by more than this: the timings disagree
TOO_FEW = "too few measurements"
ABOVE = "inconclusive (e2e above model-only)"
NOISY = "inconclusive (noisy)"
NO_VERDICT = (TOO_FEW, ABOVE, NOISY)   # the labels of cells left out of every comparison


def overlaps(a, b) -> bool:
    return a.lo <= b.hi and b.lo <= a.hi


def thin(e2e, model) -> str:
    """What two cells (e2e and its model-only) had too little of for a verdict ('' where enough): per
    shortfall (processes, then windows) said once where both fell short alike ("2 processes, 1 window
    per process"), else for the cell that did ("e2e 2 processes, model-only a process of 1 window")."""
    found = []
    for mine, theirs in zip(shortfall(e2e), shortfall(model)):
        if mine == theirs:
            found += [mine] if mine else []
        else:
            found += [f"{who} {text}" for who, text in (("e2e", mine), ("model-only", theirs)) if text]
    return ", ".join(found)


def shortfall(cell) -> tuple[str, str]:
    """A cell's processes under MIN_PROCESSES and windows of a process under MIN_WINDOWS, as text
    ('' where enough)."""
    windows = plural(int(cell.w), "window")
    return (plural(int(cell.p), "process", "processes") if cell.p < MIN_PROCESSES else "",
            "" if cell.w >= MIN_WINDOWS else f"{windows} per process" if cell.w_hi == cell.w else
            f"a process of {windows}")


def verdict(e2e, model, loader) -> tuple[str, str]:
    """(label, reason) for one pipeline and model (module docstring); `loader`: `loader_at` the
    model's step time, None where not measured. The reason says how many short windows were left out."""
    label, why = judge(e2e, model, loader)
    dropped = int(e2e.dropped + model.dropped)
    return label, why + (f" ({plural(dropped, 'window')} shorter than the run's minimum left out)" if dropped else "")


def judge(e2e, model, loader) -> tuple[str, str]:
    """`verdict`'s label and reason from the cells' numbers."""
    share = e2e.img_per_s / model.img_per_s
    few = thin(e2e, model)
    if few:
        return TOO_FEW, (f"thin: {few}; a verdict needs {MIN_PROCESSES} processes of {MIN_WINDOWS} windows each, "
                         "e2e and model-only")
    if e2e.lo > model.hi * (1 + ABOVE_BY):
        return ABOVE, (f"e2e is {pct(share)} of model-only, its lowest process ({e2e.lo:,.0f}) above model-only's "
                       f"highest ({model.hi:,.0f}) by more than {ABOVE_BY:.0%}: the two timings disagree")
    moved = noisy(e2e, model, share)
    if moved:
        return NOISY, f"e2e is {pct(share)} of model-only, but {moved}: not steady enough for a verdict"
    lowest = e2e.lo / model.img_per_s
    if share >= FED and lowest >= FLOOR:
        return "fed", f"e2e is {pct(share)} of model-only, its lowest process {pct(lowest)}"
    if share >= FED:
        return "inconclusive", (f"e2e is {pct(share)} of model-only, but its lowest process {pct(lowest)}, "
                                f"under {FLOOR:.0%}")
    if overlaps(e2e, model):
        return "inconclusive", f"e2e is {pct(share)} of model-only, but their process ranges overlap"
    if loader is None:
        return "not fed, cause not measured", (f"e2e is {pct(share)} of model-only; loader-only not measured at its "
                                               "step time")
    at = (f"what loader-only delivered alone ({loader.img_per_s:,.0f})" if math.isnan(loader.step_ms) else
          f"what loader-only delivered at the model's step time ({loader.step_ms:.3g} ms: {loader.img_per_s:,.0f})")
    if e2e.img_per_s > loader.hi:
        return "inconclusive", f"e2e ({e2e.img_per_s:,.0f}) is above {at}: the loader-only rows do not hold"
    if not loader.kept_up and e2e.img_per_s >= AT * loader.lo:
        return "input-bound", f"e2e ({e2e.img_per_s:,.0f}) is at {at}, below model-only ({model.img_per_s:,.0f})"
    return "slower than both", (f"e2e ({e2e.img_per_s:,.0f}) is below {at} and model-only ({model.img_per_s:,.0f}): "
                                "the pipeline's work slows the step")


def noisy(e2e, model, share: float) -> str:
    """Which of the two cells had a process whose windows moved by more than DRIFT, so far that e2e's
    `share` of model-only could lie on either side of FED, as text ("" where not): "e2e's windows
    moved +92% within a process"."""
    move = max(abs(e2e.drift), abs(model.drift))
    if move <= DRIFT or not FED / (1 + move) <= share <= FED * (1 + move):
        return ""
    return " and ".join(f"{who}'s windows moved {cell.drift:+.0%} within a process"
                        for who, cell in (("e2e", e2e), ("model-only", model)) if abs(cell.drift) > DRIFT)


