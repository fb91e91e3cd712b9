"""The one-line answers per situation (`answers`) that ANSWER.md, the report and the printed
summary give: which pipeline keeps the model fed, and what limits the others; and per model measured
at several CPU budgets, how many cores per GPU it needs to be kept fed (`cores_needed`). Every share of
model-only shown has its restart-free share beside it (`restart_free`); the verdicts rest on the
rate with epoch restarts (what training gets), and the pipelines short of FED only with them are
named (`fed_only_restart_free`). On a CPU run the cores are the machine's (no "per GPU"); pipelines
set aside because e2e ran above model-only are named with model-only's process range where those
processes disagree: a noisy machine (`above_text`).
"""
from __future__ import annotations

import pandas as pd

import pipelines

from ..running.plan import MIN_PROCESSES, MIN_WINDOWS
from .analysis import STEP_ORDER, knob, situations, ties
from .verdicts import ABOVE, FED, NO_VERDICT, NOISY, TOO_FEW
from .formatting import code, escape, pct, per_gpu, plural


def restart_free(r) -> float:
    """A situation's (or each of a frame's) restart-free share: its e2e rate over the steps that began
    no epoch (`steady`: the median of its windows' `steady_img_per_s`) over model-only's median; NaN
    where not recorded."""
    return r.steady / r.model_rate


def restart_free_text(r) -> str:
    """"96.3% restart-free", or "" where the rows do not record it."""
    free = restart_free(r)
    return "" if pd.isna(free) else f"{pct(free)} restart-free"


def share_text(r) -> str:
    """e2e's share of model-only with its restart-free share beside it: "94.6% (96.3% restart-free)"."""
    free = restart_free_text(r)
    return pct(r.share) + (f" ({free})" if free else "")


def fed_only_restart_free(rows: pd.DataFrame) -> pd.DataFrame:
    """The situations with a verdict (`NO_VERDICT` left out) whose share is under FED but whose
    restart-free share reaches it: epoch restarts decide them."""
    compared = rows[~rows.verdict.isin(["fed", *NO_VERDICT]) & (rows.share < FED)]
    return compared[restart_free(compared) >= FED]


def base_name(pipeline: str) -> str:
    return pipeline.split(" (", 1)[0]


def plain(pipeline: str) -> bool:
    """Whether a variant label (`label_variants`) names only its pipeline's knobs at their defaults."""
    options = pipelines.declared_options()
    pairs = pipeline.split(" (", 1)[1].rstrip(")").split(", ") if " (" in pipeline else []
    return all(name not in options or value == str(knob(options[name].default))
               for name, _, value in (pair.partition("=") for pair in pairs))


def baseline(rows: pd.DataFrame):
    """The `dataloader` row among one situation's rows: the plain variant (every knob at its default)
    if measured, else the one with the fewest options named; None if none."""
    found = rows[rows.pipeline.map(base_name) == "dataloader"]
    if found.empty:
        return None
    defaults = found[found.pipeline.map(plain)]
    found = defaults if len(defaults) else found
    return found.loc[found.pipeline.str.len().idxmin()]


def above_text(r) -> str:
    """Why a pipeline whose e2e ran above model-only (a situation `r`) is set aside, where model-only's
    own processes disagree by more than a verdict's margin (1 - FED): ", whose processes read 110 to
    146 img/s: the machine was noisy" (its lowest and highest process; one process: its windows);
    "" where they agree."""
    if r.model_lo >= FED * r.model_hi:
        return ""
    what = "processes" if r.model_p > 1 else "windows"
    join = " and " if r.model_p == 2 else " to "
    return f", whose {what} read {r.model_lo:,.0f}{join}{r.model_hi:,.0f} img/s: the machine was noisy"


def reads_text(every: int) -> str:
    """How often a situation's step reads the loss, for its heading ('' for never)."""
    return "" if not every else ", loss read every step" if every == 1 else f", loss read every {int(every)} steps"


def unjudged(thin: pd.DataFrame, above: pd.DataFrame, noisy: pd.DataFrame, aside: str) -> str:
    """The end of an answer whose pipelines all lack a verdict: noisy, above model-only, or thin."""
    if len(noisy):
        return (f"; the windows of one process moved by more than the verdict's margin with "
                f"{', '.join(code(p) for p in noisy.pipeline)} ({noisy.why.iloc[0].split('but ', 1)[-1].split(':')[0]}): "
                "not steady enough for a verdict, so this run names no pipeline"
                + "".join(f" ({what}: {', '.join(code(p) for p in out.pipeline)})" for what, out in (
                    ("too few measurements to compare", thin), (aside, above)) if len(out)) + ".")
    if len(above):
        return (f"; e2e ran faster than model-only ({pct(above.share.min())}–{pct(above.share.max())} of it) "
                f"for {', '.join(code(p) for p in above.pipeline)}: the two timings disagree, so this run names "
                "no pipeline (longer windows, --min-window-s, or an idle machine may settle it).")
    had = "; ".join(dict.fromkeys(thin.thin))   # what the cells had, each said once
    return (f"; too few measurements to compare pipelines (thin: {had}; a verdict needs {MIN_PROCESSES} "
            f"processes of {MIN_WINDOWS} windows each per cell).")


def setting_text(r, named: bool) -> str:
    """A situation's image size, and its batch size and dtype where the run measured several
    settings (`named`): "32 px" or "32 px, batch 16, float32"."""
    return f"{r.image_size} px" + (f", batch {r['batch_size']}, {r['dtype']}" if named else "")   # (a Series' .dtype is its own)


def answer(rows: pd.DataFrame, named: bool = False) -> str:
    """One situation's answer (one model, step kind, loss reads, setting, CPU budget), as a sentence
    (naming the batch size and dtype where `named`: the run measured several settings).
    It names a pipeline to use only where one is fed and the others within noise of it are named
    with it; cells with too few measurements are left out of every comparison, and said so. Each
    share it shows has its restart-free share beside it, and the pipelines below FED only with epoch
    restarts are named (`restarts_clause`)."""
    first = rows.iloc[0]
    head = (f"With {plural(int(first.cpus), 'core')}{per_gpu([first.device])}, {code(first.model)} at {setting_text(first, named)} "
            f"({escape(first.step)} step{reads_text(first.sync_every)}) trains at {first.model_rate:,.0f} img/s alone")
    thin = rows[rows.verdict == TOO_FEW]
    above = rows[rows.verdict == ABOVE]
    noisy = rows[rows.verdict == NOISY]
    rows = rows[~rows.verdict.isin(NO_VERDICT)]
    aside = f"not compared, e2e above model-only{above_text(above.iloc[0])}" if len(above) else ""
    left = "".join(f" ({what}: {', '.join(code(p) for p in out.pipeline)})" for what, out in (
        ("too few measurements to compare", thin), (aside, above),
        ("not compared, the windows of one process moved across the verdict's margin", noisy))
        if len(out))
    if rows.empty:
        return head + unjudged(thin, above, noisy, aside)
    base = baseline(rows)
    parts = [head]
    if base is not None:
        free = restart_free_text(base)
        parts.append(f"{code(base.pipeline)} delivers {base.img_per_s:,.0f} ({base.verdict}, {pct(base.share)}"
                     + (f"; {free})" if free else ")"))
    fed = rows[rows.verdict == "fed"].sort_values("img_per_s", ascending=False)
    keep = ", ".join(code(p) for p in fed.pipeline)
    verb = "keeps" if len(fed) == 1 else "keep"
    if base is not None and base.verdict == "fed":
        return "; ".join(parts) + f": the model is the limit; {keep} {verb} it fed{left}{restarts_clause(rows, [base])}."
    pool = fed if len(fed) else rows.sort_values("img_per_s", ascending=False)
    best = pool.iloc[0]
    tied = [best.pipeline] + [r.pipeline for r in pool.iloc[1:].itertuples() if ties(r.e2e, best.e2e)]
    names = " or ".join(code(p) for p in tied) if len(tied) < 3 else ", ".join(code(p) for p in tied[:-1]) + f" or {code(tied[-1])}"
    other = base is not None and best.pipeline != base.pipeline   # a speed-up over dataloader, not over itself
    speed = f", {best.img_per_s / base.img_per_s:.1f}× `dataloader`" if other else ""
    within = " (within noise of each other)" if len(tied) > 1 else ""
    shown = [r for r in (base,) if r is not None]   # their shares are said already
    if fed.empty:
        free = restart_free_text(best)
        unsure = f", but {best.verdict}: {best.why.split('but ', 1)[-1]}" if best.share >= FED else ""
        shown_to = " is shown to keep" if rows.verdict.str.startswith("inconclusive").any() else " keeps"
        return "; ".join(parts) + (f"; no pipeline{shown_to} it fed: the fastest, {names}{within}, "
                                   f"{'reach up to' if len(tied) > 1 else 'reaches'} {pct(best.share)} of model-only"
                                   f"{f' ({free})' if free else ''}{unsure}{speed}{left}"
                                   f"{restarts_clause(rows, [*shown, best])}.")
    faster = f" ({best.img_per_s / base.img_per_s:.1f}× faster than `dataloader`)" if other else ""
    return "; ".join(parts) + f"; {keep} {verb} it fed: use {names}{within}{faster}{left}{restarts_clause(rows, shown)}."


def restarts_clause(rows: pd.DataFrame, shown: list) -> str:
    """"; below 95% only with epoch restarts: `p` 94.6% (96.3% restart-free)": the pipelines epoch
    restarts keep from FED (`fed_only_restart_free`), but those in `shown` (their shares are in the
    answer already)."""
    named = {r.pipeline for r in shown}
    found = [r for r in fed_only_restart_free(rows).itertuples() if r.pipeline not in named]
    return (f"; below {FED:.0%} only with epoch restarts: " + ", ".join(f"{code(r.pipeline)} {share_text(r)}" for r in found)) if found else ""


def cores_needed(rows: pd.DataFrame, named: bool = False) -> str | None:
    """One model's (setting, step kind, loss reads) situations at several CPU budgets -> the fewest
    cores per GPU measured with which some pipeline keeps it fed (the fastest fed there named), and
    the closest pipeline at the budgets below that; None unless at least two budgets have a verdict.
    The batch size and dtype are named where `named` (`answer`)."""
    rows = rows[~rows.verdict.isin(NO_VERDICT)]
    budgets = sorted(rows.cpus.unique())
    if len(budgets) < 2:
        return None
    first = rows.iloc[0]
    head = f"{code(first.model)} at {setting_text(first, named)} ({escape(first.step)} step{reads_text(first.sync_every)})"
    fed = rows[rows.verdict == "fed"]
    short = [b for b in budgets if fed.empty or b < fed.cpus.min()]

    def closest(cpus) -> str:
        best = rows[rows.cpus == cpus].sort_values("img_per_s").iloc[-1]
        return f"{plural(int(cpus), 'core')}: {code(best.pipeline)} {pct(best.share)}"
    below = "; ".join(closest(b) for b in short)
    if fed.empty:
        return f"{head}: no pipeline keeps it fed with any core count measured (closest — {below})."
    fewest = int(fed.cpus.min())
    best = fed[fed.cpus == fewest].sort_values("img_per_s").iloc[-1]
    return (f"{head} needs {plural(fewest, 'core')}{per_gpu([first.device])} of those measured to be kept fed, with "
            f"{code(best.pipeline)} ({pct(best.share)})" + (f"; fewer fall short (closest — {below})." if below else "."))


def answers(c: pd.DataFrame, s: pd.DataFrame | None = None) -> list[str]:
    """The answer for every measured situation (`s`: `situations(c)` if already made), largest CPU
    budget first, then per model measured at several budgets the cores it needs (`cores_needed`).
    Each setting (image size, batch size, dtype) is answered apart, the batch size and dtype named at
    an image size measured with several."""
    s = situations(c) if s is None else s
    if s.empty:
        return []
    order = s.assign(step_rank=s.step.map({k: i for i, k in enumerate(STEP_ORDER)}).fillna(9))
    several = {size for size, rows in order.groupby("image_size") if len(rows.groupby(["batch_size", "dtype"])) > 1}
    model = ["image_size", "batch_size", "dtype", "model", "step_rank", "sync_every"]   # a model's situation
    found = [((-key[-1], *key[:-1]), answer(rows, key[0] in several))
             for key, rows in order.groupby([*model, "cpus"], sort=True)]
    needs = [cores_needed(rows, key[0] in several) for key, rows in order.groupby(model, sort=True)]
    return [line for _, line in sorted(found, key=lambda item: item[0])] + [n for n in needs if n]
