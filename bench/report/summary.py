"""The summary of one run (SUMMARY.md, the top of REPORT.md and the README block), under its
epoch length: the bus, several GPUs, which pipeline keeps which model speed fed at which CPU
budget (and which only without epoch restarts), large JPEG images and time to accuracy.
"""
from __future__ import annotations

import pandas as pd

from ..running.plan import MIN_PROCESSES, MIN_WINDOWS
from .analysis import RunView, SETTING, at_setting
from .verdicts import FED, FLOOR, NO_VERDICT, NOISY, TOO_FEW
from .answers import above_text, base_name, baseline, fed_only_restart_free, restart_free_text
from .formatting import code, epoch_text, escape, pct, per_gpu, plural, table
from .sections import trained

LADDER = (2_000_000, 1_000_000, 500_000, 250_000, 100_000, 50_000, 25_000, 10_000, 5_000, 2_500, 1_000, 500, 250,
          100)   # model step speeds (img/s) the summary's table may be keyed by
ROWS = (4, 7)    # the fewest and most rows of that table
SHOWN = 3   # pipelines named per cell of the summary's table (the cheapest in CPU time first)


def speed_text(v: float) -> str:
    """A rate in three significant digits: 14.1M, 332k, 3.96k, 131."""
    return f"{v / 1e6:.3g}M" if v >= 1e6 else f"{v / 1e3:.3g}k" if v >= 999.5 else f"{v:.3g}"


def short(label: str) -> str:
    """A pipeline label with option values only, a switch by its name where on and left out where off:
    "prefetch (prefetch_augment=host)" -> "prefetch (host)", "dataloader (pin_memory=True,
    non_blocking=False)" -> "dataloader (pin_memory)", "dataloader (pin_memory=False)" -> "dataloader"."""
    name, _, options = label.partition(" (")
    if not options:
        return label
    pairs = [part.partition("=") for part in options.rstrip(")").split(", ")]
    values = [key if value == "True" else value for key, _, value in pairs if value != "False"]
    return f"{name} ({', '.join(values)})" if values else name


def bus_sentence(c: pd.DataFrame) -> str | None:
    """Where host transfer binds: the measured copy rates by image size and payload against the
    fastest model step measured at that size."""
    copies = c[c["mode"] == "copy"]
    models = c[c["mode"] == "model"]
    if copies.empty or models.empty:
        return None
    parts, binds, alone = [], [], []
    for size, rows in copies.groupby("image_size"):
        rates = ", ".join(f"{r.payload} {speed_text(r.img_per_s)} ({r.stage.removeprefix('h2d-')})"
                          for r in rows.sort_values(["payload", "stage"], ascending=[False, False]).itertuples())
        fast = models[models.image_size == size]
        if fast.empty:
            parts.append(f"{size} px: {rates} img/s")
            alone.append(size)
            continue
        top = fast.loc[fast.img_per_s.idxmax()]
        slower = rows[rows.img_per_s < top.img_per_s]
        binds += [f"{r.payload} {r.stage.removeprefix('h2d-')} at {size} px" for r in slower.itertuples()]
        parts.append(f"{size} px: {rates} img/s, against the fastest step measured there, {code(top.model)} "
                     f"{escape(top.step)} at {speed_text(top.img_per_s)} img/s")
    verdict = _bus_verdict(binds, alone, copies.image_size.nunique(), "it binds only for ",
                           "every copy is faster than every model step at its size")
    return ("**Host transfer**: one GPU's host-to-device copies (the bus alone) move " + "; ".join(parts)
            + f" — {verdict}.")


def _bus_verdict(binds: list[str], alone: list[int], sizes: int, bound: str, nowhere: str) -> str:
    """Where copies bind (`binds`), else `nowhere` with what it rests on: copies timed alone (no
    row times a copy beside a step); the image sizes `alone` had no model step to compare with, and
    are named as such."""
    unmeasured = f"no model step ran at {' and '.join(f'{s} px' for s in alone)} to compare with"
    if binds:
        return bound + ", ".join(binds) + (f" ({unmeasured})" if alone else "")
    if len(alone) == sizes:
        return unmeasured
    return f"{nowhere} (copies timed alone{'; ' + unmeasured if alone else ''})"


def gpus_sentence(group: pd.DataFrame, c: pd.DataFrame, lead: str = "**Several GPUs of one host** copying at once") -> str | None:
    """Where the host's bus binds with several GPUs copying at once: per payload, copy kind and image
    size, the per-GPU copy rate at each GPU count (the job's rate over its GPUs, median of windows),
    and the fewest GPUs at which it falls below the fastest model step measured at that size."""
    copies = group[(group.status == "ok") & (group["mode"] == "copy") & (group["rank"] == 0)]
    if copies.empty or copies.world_size.max() <= 1:
        return None
    copies = copies.assign(per_gpu=copies.world_img_per_s / copies.world_size)   # load(): the rank's rate alone
    models = c[c["mode"] == "model"]
    parts, binds = [], []
    alone = sorted({int(s) for s in copies.image_size} - {int(s) for s in models.image_size})
    for (size, payload, stage), rows in copies.groupby(["image_size", "payload", "stage"], sort=True):
        per = rows.groupby("world_size").per_gpu.median()
        parts.append(f"{payload} {stage.removeprefix('h2d-')} {size} px "
                     + ", ".join(f"{speed_text(v)} ({plural(int(n), 'GPU')})" for n, v in per.items()))
        fast = models[models.image_size == size]
        if len(fast):
            top = fast.img_per_s.max()
            short_of = per[per < top]
            if len(short_of):
                binds.append(f"{payload} {stage.removeprefix('h2d-')} at {size} px from {plural(int(short_of.index[0]), 'GPU')}")
    verdict = _bus_verdict(binds, alone, copies.image_size.nunique(), "it binds for ",
                           "every per-GPU copy rate stays above the fastest model step at its size")
    return (f"{lead}, per GPU (img/s): " + "; ".join(parts)
            + f" — {verdict}.")


def fed_at(cap: pd.DataFrame, speed: float) -> pd.DataFrame:
    """The pipelines whose loader ceiling keeps a model of `speed` img/s fed (at least FED of it)."""
    return cap[cap.img_per_s >= FED * speed]


def speeds(cap: pd.DataFrame, models: pd.DataFrame) -> list[float]:
    """The table's rows: LADDER speeds from one step above the fastest model measured down to the
    first speed `dataloader` keeps fed at every CPU budget, at least ROWS[0] (extended upwards), at
    most ROWS[1]."""
    top = models.img_per_s.max() if len(models) else cap.img_per_s.max()
    start = max([i for i, v in enumerate(LADDER) if v > top] or [0])
    bases = [baseline(here) for _, here in cap.groupby("cpus")]
    end = start
    while end < len(LADDER) - 1 and not all(b is not None and b.img_per_s >= FED * LADDER[end] for b in bases):
        end += 1
    end = min(end, start + ROWS[1] - 1)
    start = max(0, min(start, end - ROWS[0] + 1))
    return list(LADDER[start:end + 1])


def which_table(cap: pd.DataFrame, models: pd.DataFrame) -> pd.DataFrame:
    """Model step speed x CPU cores per GPU (one setting's ceilings and model-only cells): the
    pipelines whose loader ceiling keeps that speed fed, the cheapest in CPU time first (`cheapest`), and their
    speed-up over `dataloader` at that speed."""
    rows = []
    for speed in speeds(cap, models):
        row = {"model trains at": f"{speed_text(speed)} img/s"}
        for cpus in sorted(cap.cpus.unique(), reverse=True):
            here = cap[cap.cpus == cpus]
            fed = cheapest(fed_at(here, speed))
            base = baseline(here)
            if base is not None and base.img_per_s >= FED * speed:
                cell = "any (`dataloader` too)"
            elif fed.empty:
                best = here.loc[here.img_per_s.idxmax()]
                cell = f"none ({code(short(best.pipeline))} {pct(best.img_per_s / speed)})"
            else:
                names = (", ".join(code(short(p)) for p in fed.pipeline[:SHOWN])
                         + (f" +{len(fed) - SHOWN}" if len(fed) > SHOWN else ""))
                gain = f" ×{speed / base.img_per_s:.1f}" if base is not None else ""
                cell = names + gain
            row[f"{int(cpus)} cores"] = cell
        rows.append(row)
    return pd.DataFrame(rows)


def cheapest(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame`'s cells, cheapest in CPU time first: the pipeline's CPU seconds per 1,000 images (its
    work inside `next()` included), the whole process tree's where the rows cannot tell it apart."""
    return frame.assign(cost=lambda d: d.cpu_pipe.fillna(d.cpu)).sort_values("cost")


def cheapest_words(frame: pd.DataFrame) -> str:
    """What `cheapest` ranks `frame`'s cells by, as the sentence above a table says it (with its "+N")."""
    if len(frame) and frame.cpu_pipe.notna().all():
        return "cheapest in pipeline CPU time first (+N: N more in the report)"
    return ("cheapest in CPU time first (of all threads where the rows do not tell the pipeline's apart; +N: N more "
            "in the report)")


def measured_table(s: pd.DataFrame, mark=lambda here: "") -> pd.DataFrame:
    """Model x CPU cores per GPU from one setting's e2e situations alone (`situations`, no loader
    reads): rows each model and step kind it ran with, fastest model-only first, each with its
    model-only rate at the most cores; per cell the pipelines fed (verdict "fed": e2e at least FED
    of model-only, its lowest process FLOOR), the cheapest in CPU time first (`cheapest`), and ×N, the
    fastest of them over `dataloader`, both e2e; "any (`dataloader` too)" only where every pipeline
    measured there is fed; a pipeline with no verdict named with why (`left_out`: thin, or e2e above
    model-only); "—" where the model did not run with those cores; after a cell, the pipelines below
    FED there only with epoch restarts (`restart_free_note`), then `mark(cell's rows)` (a gathered table's
    run: `gathered`). Loss never read."""
    s = s[s.sync_every.fillna(0) == 0]
    if s.empty:
        return pd.DataFrame()
    cores = sorted(s.cpus.unique(), reverse=True)
    speed = s.sort_values("cpus").groupby(["model", "step"]).model_rate.last()   # at the most cores it ran with
    found = []
    for model, step in speed.sort_values(ascending=False).index:
        row = {"model (model-only img/s)": f"{code(model)} {escape(step)} ({speed_text(speed[model, step])})"}
        for cpus in cores:
            here = s[(s.model == model) & (s.step == step) & (s.cpus == cpus)]
            row[f"{int(cpus)} cores"] = measured_cell(here) + restart_free_note(here) + mark(here) if len(here) else "—"
        found.append(row)
    return pd.DataFrame(found)


def which_header(s: pd.DataFrame, measured: pd.DataFrame, how: str, speed: str, devices) -> str:
    """The sentence above a `measured_table` of the e2e situations `s` (one setting): what a cell names,
    how it was made (`how`: "measured", or "gathered from N runs on GPU, measured") and what the first
    column's speed is; "thin" and "—" explained where a cell says it."""
    size, batch = int(s.image_size.iloc[0]), int(s.batch_size.iloc[0])
    return (f"**Which pipeline keeps your model fed**, {how} end to end at {size} px (batch {batch}): per model "
            f"{speed} and CPU cores{per_gpu(devices)}, the pipelines whose e2e rate is at least {FED:.0%} of "
            f"model-only (medians) with no process under {FLOOR:.0%}, {cheapest_words(s)}, and ×N: the fastest of "
            f"them over `dataloader`, both end to end; \"restart-free also\": the pipelines below {FED:.0%} only "
            f"with epoch restarts (at least {FED:.0%} over the steps that began no epoch)"
            + (f"; thin: too few processes or windows for a verdict (it needs {MIN_PROCESSES} processes of "
               f"{MIN_WINDOWS} windows each)" if thin_cells(measured) else "")
            + ("; —: the model not measured with those cores" if (measured == "—").any().any() else ""))


def measured_cell(here: pd.DataFrame) -> str:
    """One cell of `measured_table`: one model's e2e situations at one CPU budget; a pipeline that ran
    but gets no verdict is named with why (`left_out`), never called absent."""
    usable = here[~here.verdict.isin(NO_VERDICT)]
    if usable.empty:
        return left_out(here, here)
    fed = cheapest(usable[usable.verdict == "fed"])
    base = baseline(usable)
    if len(fed) == len(here) and base is not None:
        return "any (`dataloader` too)"
    aside = f" ({left_out(here, here[here.verdict.isin(NO_VERDICT)])})" if len(usable) < len(here) else ""
    if fed.empty:
        best = usable.loc[usable.img_per_s.idxmax()]
        free = restart_free_text(best)
        unsure = f", {best.verdict}" if best.share >= FED else ""   # not fed by the floor: not "none" unqualified
        return (f"none shown (fastest {code(short(best.pipeline))} {pct(best.share)}{unsure}{f', {free}' if free else ''})"
                if unsure else f"none (fastest {code(short(best.pipeline))} {pct(best.share)}{f', {free}' if free else ''})") + aside
    names = ", ".join(code(short(p)) for p in fed.pipeline[:SHOWN]) + (f" +{len(fed) - SHOWN}" if len(fed) > SHOWN else "")
    if base is None:
        return names + (aside if baseline(here) is not None else " (no `dataloader` here)" + aside)
    if base.verdict == "fed":
        return names + aside
    several = (usable.pipeline.map(base_name) == "dataloader").sum() > 1   # then say which one ×N is over
    over = f" over {code(short(base.pipeline))}" if several else ""
    return names + f" ×{fed.img_per_s.max() / base.img_per_s:.1f}{over}" + aside


def left_out(here: pd.DataFrame, out: pd.DataFrame) -> str:
    """The pipelines of a cell (`here`) left out of its verdicts (`out`), with why ("thin: 2
    processes", "e2e above model-only"): where every one is, the most common why alone and the others
    named in brackets ("thin: 1 window per process (`dali-raw`: thin: 2 processes, ...)"); else each
    named ("`dataloader` thin: 2 processes")."""
    why = [f"thin: {r.thin}" if r.verdict == TOO_FEW else
           f"noisy: {r.why.split('but ', 1)[-1].split(':')[0]}" if r.verdict == NOISY else
           f"e2e above model-only{above_text(r)}" for r in out.itertuples()]
    named = [(code(short(p)), w) for p, w in zip(out.pipeline, why)]
    if len(out) < len(here):
        return "; ".join(f"{p} {w}" for p, w in named)
    common = min(set(why), key=lambda w: (-why.count(w), w))
    others = "; ".join(f"{p}: {w}" for p, w in named if w != common)
    return common + (f" ({others})" if others else "")


def thin_cells(measured: pd.DataFrame) -> bool:
    """Whether a cell of `measured_table` names a pipeline thin."""
    return measured.iloc[:, 1:].map(lambda cell: "thin: " in cell).any().any()


def restart_free_note(here: pd.DataFrame) -> str:
    """" (restart-free also `p`)" after a cell of `measured_table`: the pipelines below FED there only
    with epoch restarts (`fed_only_restart_free`), cheapest in CPU time first ("also" where the cell
    names fed pipelines)."""
    held = cheapest(fed_only_restart_free(here))
    if held.empty:
        return ""
    also = "also " if (here.verdict == "fed").any() else ""
    return f" (restart-free {also}{', '.join(code(short(p)) for p in held.pipeline)})"


def jpeg_sentence(c: pd.DataFrame, cap: pd.DataFrame, s: pd.DataFrame | None = None) -> str | None:
    """The loader ceilings (`cap`) at the largest image size measured (JPEG decoders and raw pixels)
    against the model measured there: which would keep it fed by their ceilings (a prediction), or,
    where the model ran end to end at that size (`s`: the run's situations), the e2e verdicts."""
    large = cap[cap.image_size > 32]
    models = c[(c["mode"] == "model") & (c.image_size > 32)]
    if large.empty or models.empty:
        return None
    size = int(large.image_size.max())
    model = models[models.image_size == size]
    if model.empty:
        return None
    m = model.loc[model.img_per_s.idxmax()]
    large = large[large.image_size == size]
    parts = []
    for cpus in sorted(large.cpus.unique(), reverse=True):
        here = large[large.cpus == cpus].sort_values("img_per_s", ascending=False)
        parts.append(f"with {int(cpus)} cores " + ", ".join(f"{code(short(r.pipeline))} {r.bound}{speed_text(r.img_per_s)}"
                                                          for r in here.itertuples()))
    below = large.img_per_s < FED * m.img_per_s
    undecided = large[below & (large.bound != "")]   # a lower bound ("≥") below the model proves no shortfall
    short_of, large = large[below & (large.bound == "")], large[~below | (large.bound == "")]
    missing = ", ".join(f"{code(short(r.pipeline))} with {int(r.cpus)} cores ({pct(r.img_per_s / m.img_per_s)})"
                        for r in short_of.itertuples())
    others = " others" if len(undecided) else ""
    verdict = ("" if large.empty else f"by their ceilings all{others} would keep it fed" if short_of.empty else
               (f"by their ceilings none{' of the others' if others else ''} would keep it fed")
               if len(short_of) == len(large) else f"by their ceilings all{others} would keep it fed except {missing}")
    if len(undecided):   # "≥ x": no busy level slowed it, and x is below the model: not measured far enough
        verdict += ("; " if verdict else "") + "undecided (a lower bound below the model): " + ", ".join(
            f"{code(short(r.pipeline))} with {int(r.cpus)} cores" for r in undecided.itertuples())
    judged = s[(s.image_size == size) & (s.model == m.model) & (s.step == m.step)] if s is not None and len(s) else None
    if judged is not None and len(judged):   # measured end to end: the verdicts, not a prediction
        verdict = "end to end, " + "; ".join(
            f"with {int(cpus)} cores " + (", ".join(code(short(p)) for p in here[here.verdict == "fed"].pipeline)
                                          + " kept it fed" if (here.verdict == "fed").any() else
                                          "none of those measured was shown to keep it fed")
            for cpus, here in judged.sort_values("cpus", ascending=False).groupby("cpus", sort=False))
    return (f"**{size}-px images**: {code(m.model)} ({escape(m.step)} step) trains at {speed_text(m.img_per_s)} img/s; "
            "loader ceilings (img/s) " + "; ".join(parts) + f" — {verdict}.")


def accuracy_sentence(df: pd.DataFrame) -> str | None:
    runs = trained(df)
    if runs.empty:
        return None
    first = runs.iloc[0]
    by = runs.groupby("pipeline").agg(seconds=("seconds", "median"), runs=("seconds", "count")).sort_values("seconds")
    times = ", ".join(f"{code(short(p))} {r.seconds:.1f} s" for p, r in by.iterrows())
    epochs = "" if pd.isna(first.train_epochs) else f"{first.train_epochs:.0f} epochs of "
    source = first.get("data_source")
    data = f"the {escape(str(source).split('-')[0])} data's" if isinstance(source, str) and source else "the"
    return (f"**Time to accuracy** ({epochs}{code(first.model)}, {escape(first.step)} step, "
            f"{first.cpus:.0f} cores; median wall time of the epochs, restarts included): {times}; "
            f"test accuracy on {data} test split "
            f"{pct(runs.test_accuracy.min()).rstrip('%')}–{pct(runs.test_accuracy.max())} over all "
            f"{len(runs)} runs.")


def other_settings_sentence(frame: pd.DataFrame, setting: tuple, report: str, answered: bool) -> str | None:
    """Where a run measured several settings at the summary's image size, the ones its table (of
    `setting`, the first) leaves out, and where their answers are (`answered`: the run has e2e
    answers); None where there are none."""
    others = [tuple(t) for t in frame[SETTING].drop_duplicates().sort_values(SETTING).itertuples(index=False)
              if tuple(t) != setting]
    if not others:
        return None
    said = "; ".join(f"batch {int(batch)}, {dtype}" for _, batch, dtype in others)
    where = "their answers and every number are" if answered else "every number is"
    return (f"The table above is batch {int(setting[1])}, {setting[2]}; this run also measured {said} at "
            f"{int(setting[0])} px: {where} in the [full report]({report}).")


def summary(name: str, group: pd.DataFrame, view: RunView, report: str, plots: dict[str, str]) -> list[str]:
    """The short answer of one run (Markdown lines, at most about 25), for SUMMARY.md and the README
    block: host transfer, which pipeline by model speed and cores, large JPEG images, time to
    accuracy, the bus shared by several GPUs, the share of model-only by model speed and the loader
    ceiling by cores (plots); each only where the run measured it."""
    c, cap = view.cells, view.ceilings
    commit = ", ".join(sorted(set(group.git_commit))) or "?"
    epochs = epoch_text(group)
    lines = [f"From one run, {code(name)} (commit {escape(commit)}; {escape(', '.join(sorted(set(group.gpu))) or 'CPU')}"
             f"{f'; {epochs}' if epochs else ''}); every number is in the [full report]({report})."]
    sentence = bus_sentence(c)
    if sentence:
        lines += ["", sentence]
    s = view.situations
    trained_main = s[s.image_size == s.image_size.min()] if len(s) else s   # the smallest images: CIFAR's own
    main = cap[cap.image_size == cap.image_size.min()] if len(cap) else cap
    measured = pd.DataFrame()
    if len(trained_main):
        setting = tuple(trained_main.iloc[0][SETTING])
        measured = measured_table(at_setting(trained_main, setting))
    if len(measured):
        lines += ["", which_header(at_setting(trained_main, setting), measured, "measured", "(its model-only img/s)",
                                   group.device) + ":", "", table(measured)]
    elif len(main):
        setting = tuple(main.iloc[0][SETTING])
        lines += ["", f"**Which pipeline keeps a model fed** at {int(setting[0])} px (batch {int(setting[1])}), predicted "
                  "from loader ceilings (no e2e row with the loss never read here): the pipelines whose loader ceiling "
                  f"is at least {FED:.0%} of the model's speed, {cheapest_words(main)}, "
                  "and how much faster than `dataloader` the model would then train:", "",
                  table(which_table(at_setting(cap, setting), at_setting(c[c["mode"] == "model"], setting)))]
    shown = trained_main if len(measured) else main
    if len(shown) and (others := other_settings_sentence(shown, setting, report, answered=len(measured) > 0)):
        lines += ["", others]
    for sentence in (jpeg_sentence(c, cap, s), accuracy_sentence(view.rows), gpus_sentence(group, c)):
        if sentence:
            lines += ["", sentence]
    if plots.get("share"):
        lines += ["", f"![e2e as a share of model-only by model speed, per CPU budget]({plots['share']})"]
    if plots.get("cores"):
        lines += ["", f"![loader ceiling by CPU cores{per_gpu(group.device)}]({plots['cores']})"]
    return lines
