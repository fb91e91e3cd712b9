"""The sections of REPORT.md for one run: provenance (with the epoch length), bus, CPU cost,
headspace, the share of model-only by model speed, situations (each e2e share with its
restart-free share), stages, accuracy and drift, with the plots they show. Each section is a small
function of the run (`RUN_SECTIONS`) or of one of its settings (`SETTING_SECTIONS`) returning its Markdown
lines, none where it has nothing to show; a new section is one more function in one of the lists
(`run_sections` joins them).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .analysis import READY, RunView, SETTING, at_setting, ceiling_text, label_variants, step_alone
from .verdicts import DRIFT
from .answers import answer, reads_text, share_text
from .formatting import code, epoch_text, escape, pct, per_gpu, plural, rate, table
from .hosts import CHECKED, PREDICTION, prediction, prediction_note
from .scaling import SCALING, scaling
from .plots import cores_plot, headspace_plot, share_plot

TIMERS = """\
What each timer includes (`bench/measuring/harness.py`): every window starts and ends with a device
synchronize and covers exactly its steps; warm-up, the run that sizes the windows and pipeline
construction (including a resident upload) are outside. **loader**: iterate the pipeline with no
model; the consumer reads each batch (one tiny kernel) and, at a headspace level of t ms, gives the
GPU per batch a fixed amount of bf16 matrix products and memory copies on every SM that lasts t ms
on an idle GPU (`bench/measuring/busy.py`: sized before the pipeline exists and never re-sized, so beside the
pipeline it runs longer, as a training step does; that stretch, "step ×s" in the headspace tables,
is the pipeline's contention cost, and the share of batch / t includes it; t is the step's time per
batch in the same loop beside a null pipeline (one batch already on the device), so its own stretch
is not counted against the pipeline, where that was recorded, else its time on an idle GPU; in runs
from before the stretch was recorded the step was re-sized beside the pipeline to last t). A window that delivered
more than its measured step allows is rejected and listed (in those earlier runs, also one whose
step ran more than 5% off t), as is one that lasted under half the run's minimum window (batches
queued before it handed over: a drain, not a rate). Level 0 is an idle GPU; the **loader ceiling**
is the rate at which the pipeline stops keeping up with a busy GPU (the rule
above). **model**: the training step on real batches already on the device (the split's images,
normalized as e2e gets them). **e2e**: the training step on the pipeline's batches, windows of whole
epochs (epoch restarts included); "loss read every N" rows call `loss.item()` every N steps.
**restart**: median host wait of the steps that began an epoch. **restart-free**: beside each e2e
share of model-only, the share without them: e2e's images over the steps that began no epoch per
second of their GPU time (median of the windows' `steady_img_per_s`) over model-only's median; the
verdicts rest on the rate with restarts, what training gets. **host wait**: the share of the
window spent in `next()`; for a pipeline marked "with the copy's device sync" `next()` makes a
blocking copy, which also waits for the model's queued work. **CPU s / 1k img**: user + system CPU
seconds per 1,000 images of the pipeline (its threads, workers and processes, and what the training
thread runs inside `next()`) and, after "+", of the training thread outside `next()` (launching the
step, running ahead of the GPU); "all threads" where the rows do not tell the two apart (before
`next_cpu_s`). **stage**: one stage of a pipeline
alone. **copy**: one batch copied host-to-device, back to back. **train**: whole epochs timed as one
window (the first step, which compiles, before it), then the test split's accuracy."""


STRETCHED = ("Delivered img/s beside a synthetic step that lasts the given ms per batch on an idle GPU "
             "(\"step ×s\": how much longer it ran beside the pipeline, median; the last row, where recorded: "
             "what the step allows in the same loop beside a null pipeline, the rate shares are read against):")
REFIT = "Delivered img/s while the GPU is kept busy the given ms per batch:"   # rows from before the stretch


def provenance(group: pd.DataFrame) -> list[str]:
    """What a run holds: invocations, commit, machine, versions, window lengths; said, never hidden."""
    def values(column: str) -> list[str]:
        found = group[column].dropna() if column in group else []
        return sorted({f"{v:g}" if isinstance(v, float) else str(v) for v in found if str(v) != ""})

    ok = group[group.status == "ok"]
    ids = values("run_id")
    lines = [f"- {plural(len(ids), 'invocation')} ({', '.join(code(r) for r in ids)}); commit "
             f"{escape(', '.join(values('git_commit')) or 'unknown')}; machine: {escape(', '.join(values('gpu')) or 'CPU')}, "
             f"{escape(', '.join(values('cpu_model')) or 'CPU model not recorded')}, "
             f"{', '.join(values('cpu_count')) or '?'} cores, host-speed figure "
             f"{', '.join(values('host_calibration_ms')) or 'not recorded'} ms (lower is faster)."]
    versions = [f"{c} {escape(' / '.join(values(c)))}" for c in ("torch", "torchvision", "dali", "peers", "driver", "cuda")
                if values(c)]
    lines.append("- Versions: " + "; ".join(versions) + ".")
    if len(ok):
        lines.append(f"- Windows: {ok.seconds.min():.2f}–{ok.seconds.max():.2f} s, {ok.steps.min():.0f}–"
                     f"{ok.steps.max():.0f} steps; {plural(int(ok.groupby(['run_id', 'process']).ngroups), 'process', 'processes')}.")
    epochs = epoch_text(group)
    if epochs:
        lines.append(f"- {epochs[0].upper()}{epochs[1:]}.")
    mixed = [f"{c} {' / '.join(values(c))}" for c in ("warmup", "max_samples", "seed", "last_batch", "torch", "dali",
                                                      "peers") if len(values(c)) > 1]
    if mixed:
        lines.append("- **Mixed settings in this run:** " + "; ".join(escape(m) for m in mixed) + ".")
    return lines + [""]


def bus_table(c: pd.DataFrame) -> pd.DataFrame:
    copies = c[c["mode"] == "copy"]
    rows = [{"px": r.image_size, "payload": escape(r.payload), "copy": r.stage.removeprefix("h2d-"), "batch": r.batch_size,
             "img/s": rate(r), "GB/s": f"{r.img_per_s * r.bytes_per_image / 1e9:.1f}"}
            for r in copies.sort_values(["image_size", "payload", "stage"]).itertuples()]
    return pd.DataFrame(rows)


def by_cores(cap: pd.DataFrame, text) -> pd.DataFrame:
    """Pipeline x CPU budget of loader ceilings (one setting's), each cell `text(ceiling)`."""
    if cap.empty:
        return pd.DataFrame()
    view = cap.assign(text=[text(r) for r in cap.itertuples()]).pivot(index="pipeline", columns="cpus", values="text")
    view = view[sorted(view.columns, reverse=True)].fillna("—")
    view.columns = [f"{int(k)} cores" for k in view.columns]
    return view.reset_index().assign(pipeline=lambda d: d.pipeline.map(escape))


def cpu_text(r) -> str:
    """CPU seconds per 1,000 images: the pipeline's (its work inside `next()` included) and, after "+",
    the training thread's outside `next()`; the whole process tree's for rows that cannot tell them
    apart (`cells`)."""
    if pd.isna(r.cpu_pipe):
        return "—" if pd.isna(r.cpu) else f"{seconds(r.cpu)} (all threads)"
    return f"{seconds(r.cpu_pipe)} + {seconds(r.cpu_train)}"


def seconds(value: float) -> str:
    """CPU seconds per 1,000 images, 2 significant digits; floating-point residue as 0 (the pipeline's
    share is a difference of two counters: where it spent nothing, subtraction can leave 1e-16)."""
    return "0" if abs(value) < 1e-9 else f"{value:.2g}"


def cost_text(r) -> str:
    """A ceiling's CPU seconds per 1,000 images and epoch restart (medians over its levels), and the
    levels it rests on."""
    return f"{cpu_text(r)} s, {'—' if pd.isna(r.restart) else f'{r.restart:,.0f} ms'} ({r.levels})"


def headspace_table(loader: pd.DataFrame) -> pd.DataFrame:
    """Pipeline x busy level: the rate and, where recorded, the busy step's median stretch."""
    view = loader.assign(text=[rate(r) + ("" if pd.isna(r.stretch) else f", step ×{r.stretch:.2f}")
                               for r in loader.itertuples()]).pivot(index="pipeline", columns="busy_ms", values="text")
    alone = step_alone(loader)
    if len(alone):   # what the step allows in the harness's loop, and its own stretch there
        view.loc[NULL_ROW] = pd.Series({k: f"{a.img_per_s:,.0f}, step ×{a.stretch:.2f}" for k, a in alone.iterrows()})
    view = view[sorted(view.columns)].fillna("—")
    view.columns = ["idle GPU" if k == 0 else f"{k:g} ms" for k in view.columns]
    return view.reset_index().assign(pipeline=lambda d: d.pipeline.map(escape))


NULL_ROW = "(the step alone, beside a null pipeline)"



def situation_table(s: pd.DataFrame) -> pd.DataFrame:
    rows = [{"pipeline": escape(r.pipeline), "loader-only at the model's step": r.loader_text, "e2e img/s": r.e2e_text,
             "e2e / model": share_text(r), "host wait": wait_text(r),
             "CPU s / 1k img (pipeline + training thread)": cpu_text(r),
             "verdict": r.verdict, "because": escape(r.why)}
            for r in s.sort_values("img_per_s", ascending=False).itertuples()]
    return pd.DataFrame(rows)


def wait_text(r) -> str:
    """The share of an e2e cell's time in `next()`, and whether that includes a blocking copy's wait for
    the model's queued work (`Pipeline.next_syncs`)."""
    if pd.isna(r.wait):
        return "—"
    return pct(r.wait) + (" (with the copy's device sync)" if r.syncs else "")


def model_table(models: pd.DataFrame) -> pd.DataFrame:
    """Model-only cells, fastest first: the step alone and how long its compile took."""
    rows = [{"model": code(r.model), "step": escape(r.step), "loss read every": int(r.sync_every) or "never",
             "cores": int(r.cpus), "model-only img/s": rate(r),
             "compile s": "—" if pd.isna(r.compile) else f"{r.compile:.0f}"}
            for r in models.sort_values("img_per_s", ascending=False).itertuples()]
    return pd.DataFrame(rows)


def stage_table(c: pd.DataFrame) -> pd.DataFrame:
    stages = c[c["mode"] == "stage"]
    rows = []
    for (pipeline, cpus), group in stages.groupby(["pipeline", "cpus"]):
        by_stage = group.set_index("stage")
        row = {"pipeline": escape(pipeline), "cores": int(cpus), "copy": escape(group["copy"].iloc[0]),
               "bytes / image": f"{group.bytes_per_image.max():,.0f}"}
        for stage in ("host", "pin", "h2d-pageable", "h2d-pinned", "device"):
            row[stage] = rate(by_stage.loc[stage]) if stage in by_stage.index else "—"
        rows.append(row)
    return pd.DataFrame(rows)


def trained(df: pd.DataFrame) -> pd.DataFrame:
    """Train rows (one per training run: pipeline, seed, process), fastest first."""
    ok = df[(df.status == "ok") & (df["mode"] == "train")]
    return ok.sort_values(["seconds", "pipeline", "seed"], kind="stable")


def accuracy_table(df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per training run, and a sentence comparing the spread across pipelines with the
    spread of one pipeline's runs (seeds)."""
    runs = trained(df)
    if runs.empty:
        return pd.DataFrame(), ""
    view = pd.DataFrame({"pipeline": runs.pipeline.map(escape), "model": runs.model.map(escape),
                         "step": runs.step.map(escape),
                         "cores": runs.cpus.astype(int), "seed": runs.seed.astype(int),
                         "epochs": runs.train_epochs.map(lambda e: "—" if pd.isna(e) else f"{e:.0f}"),
                         "wall s": runs.seconds.map("{:.2f}".format),
                         "img/s": runs.img_per_s.map("{:,.0f}".format),
                         "test accuracy": runs.test_accuracy.map(lambda a: f"{100 * a:.2f}%")})
    by = runs.groupby("pipeline").test_accuracy
    spread = runs.test_accuracy.max() - runs.test_accuracy.min()
    seeds = (by.max() - by.min())[by.count() > 1]
    note = (f"Test accuracy spans {100 * runs.test_accuracy.min():.2f}–{100 * runs.test_accuracy.max():.2f}% over every "
            f"run ({100 * spread:.2f} points)" + (", and one pipeline's runs with other seeds span up to "
                                                   f"{100 * seeds.max():.2f} points ({', '.join(code(p) for p in seeds.index)})"
                                                   if len(seeds) else "") + ".")
    return view, note


def drift_lines(c: pd.DataFrame) -> list[str]:
    moved = c[c.drift.abs() > DRIFT]
    what = [r["pipeline"] if r["pipeline"] != "none" else f"{r['payload']} {r['stage']}".strip() or r["model"]
            for _, r in moved.iterrows()]
    return [f"- {r['mode']} {code(name)}{f' {code(r.model)}' if r.model != 'none' and r['pipeline'] != 'none' else ''}"
            f" at {r.image_size} px, {int(r.cpus)} cores{f', {r.busy_ms:g} ms busy' if r['mode'] == 'loader' and per_gpu([r.device]) else ''}: "
            f"{r.drift:+.1%} from first to last window"
            for name, (_, r) in zip(what, moved.iterrows())]


def ready_lines(c: pd.DataFrame) -> list[str]:
    """The cells whose windows began with at least READY of their steps' batches ready (`ready_at_start`,
    median over the windows): the drain stopped while the pipeline still held batches made before
    the window (a worker pool's burst, say)."""
    ready = c[c.ready.notna() & (c.ready >= READY * c.steps)]
    return [f"- {r['mode']} {code(r['pipeline'])}{f' {code(r.model)}' if r.model != 'none' else ''} at {r.image_size} px, "
            f"{int(r.cpus)} cores{f', {r.busy_ms:g} ms busy' if r['mode'] == 'loader' and r.busy_ms else ''}: "
            f"{r.ready:g} of {r.steps:g} steps' batches ready at the start (median window)" for _, r in ready.iterrows()]


def share_section(name: str, s: pd.DataFrame, plot: Path, here: str, plots: dict[str, str]) -> list[str]:
    """The share of model-only against the model's speed (`share_plot`) of one setting's situations,
    loss never read; none where they hold fewer than two model speeds. `plots` gets its file name
    ("share")."""
    s = s[s.sync_every.fillna(0) == 0] if len(s) else s
    if s.empty or not share_plot(s, plot, f"{name}: e2e as a share of model-only by model speed, {here}"):
        return []
    plots.setdefault("share", plot.name)
    return [f"### Share of model-only by model speed — {here}", "",
            "Each pipeline's e2e median as a share of model-only against the model's speed alone (model-only "
            "img/s), one panel per CPU budget, bars from its lowest to its highest process, loss never read; "
            "an open marker: no verdict there (the tables below say why); the dashed line: the share of "
            "model-only a median needs to be called fed:", "", f"![share of model-only]({plot.name})",
            ""]


@dataclass
class Run:
    """What every run section reads: the run's name, its rows, their cells, where its plots go (`out`,
    file names from `slug`), and `plots`, which gets the file names of its main plots."""
    name: str
    group: pd.DataFrame
    view: RunView
    out: Path
    slug: str
    plots: dict[str, str]


@dataclass
class AtSetting:
    """One setting (image size, batch, dtype) of a run: its cells, ceilings, model-only cells and
    situations."""
    size: int
    batch: int
    dtype: str
    cells: pd.DataFrame
    ceilings: pd.DataFrame
    models: pd.DataFrame
    situations: pd.DataFrame

    @property
    def here(self) -> str:
        return f"{self.size} px, batch {self.batch}, {self.dtype}"


def at_settings(run: Run) -> list[AtSetting]:
    """The run's settings in order, each with its rows."""
    c, view = run.view.cells, run.view
    found = []
    for setting in sorted({tuple(r) for r in c[SETTING].itertuples(index=False)}):
        at = at_setting(c, setting)
        s = at_setting(view.situations, setting) if len(view.situations) else view.situations
        found.append(AtSetting(*setting, cells=at, ceilings=at_setting(view.ceilings, setting),
                               models=at[at["mode"] == "model"], situations=s))
    return found


def title_section(run: Run) -> list[str]:
    return [f"## Run {escape(run.name)}", "", *provenance(run.group)]


def bus_section(run: Run) -> list[str]:
    bus = bus_table(run.view.cells)
    return ["### Host-to-device copies (the bus alone)", "", table(bus), ""] if len(bus) else []


def ceilings_section(run: Run, at: AtSetting) -> list[str]:
    """Loader ceilings and their CPU cost by CPU budget, with their plot."""
    cap = at.ceilings
    if not len(cap):
        return []
    parts = [f"### Loader ceilings by CPU cores{per_gpu(run.group.device)} — {at.here}", "",
             "The loader ceiling (img/s; the rule above), per pipeline and CPU budget:", "",
             table(by_cores(cap, ceiling_text)), "",
             "CPU seconds per 1,000 images (the pipeline's + the training thread's) and epoch restart, "
             "medians over the levels the ceiling rests on (in brackets):",
             "", table(by_cores(cap, cost_text)), ""]
    plot = run.out / f"cores-{run.slug}-{at.size}px.png"
    if cores_plot(cap, at.models, plot, f"{run.name}: loader ceiling by CPU cores, {at.here}"):
        parts += [f"![loader ceiling by cores]({plot.name})", ""]
        run.plots.setdefault("cores", plot.name)
    return parts


def headspace_section(run: Run, at: AtSetting) -> list[str]:
    """One headspace table and plot per CPU budget with at least two busy levels, most cores first."""
    parts = []
    loaders = at.cells[at.cells["mode"] == "loader"]
    for cpus in sorted(loaders.cpus.unique(), reverse=True):
        loader = loaders[loaders.cpus == cpus]
        if loader.busy_ms.nunique() < 2:
            continue
        plot = run.out / f"headspace-{run.slug}-{at.size}px-{int(cpus)}cores.png"
        headspace_plot(loader, at.batch, at.models[at.models.cpus == cpus], plot,
                       f"{run.name}: headspace, {at.here}, {int(cpus)} cores")
        parts += [f"### Headspace curves — {at.here}, {plural(int(cpus), 'core')}", "",
                  STRETCHED if loader.stretch.notna().any() else REFIT, "",
                  table(headspace_table(loader)), "", f"![headspace]({plot.name})", ""]
    return parts


def shares_section(run: Run, at: AtSetting) -> list[str]:
    return share_section(run.name, at.situations, run.out / f"share-{run.slug}-{at.size}px.png", at.here, run.plots)


def situations_section(run: Run, at: AtSetting) -> list[str]:
    """One section per step, loss reading and CPU budget; in it one table and answer per model."""
    s, parts = at.situations, []
    for (step, every, cpus), rows in (s.groupby(["step", "sync_every", "cpus"], sort=False) if len(s) else []):
        parts += [f"### {escape(step.capitalize())} step{reads_text(every)} — {at.here}, {plural(int(cpus), 'core')}", ""]
        for model, by_model in rows.groupby("model", sort=True):
            parts += [f"{code(model)}: model-only {by_model.model_text.iloc[0]}.", "",
                      table(situation_table(by_model)), "", answer(by_model), ""]
            above = by_model[by_model.above_loader]
            if len(above):
                parts += ["**Loader-only does not hold here:** " + "; ".join(
                    f"{code(r.pipeline)} e2e {r.img_per_s:,.0f} > loader-only {r.loader_text}" for r in above.itertuples())
                    + ".", ""]
    return parts


def models_alone_section(run: Run, at: AtSetting) -> list[str]:
    """Model-only cells no e2e row ran beside."""
    s, models = at.situations, at.models
    beside = set(zip(s.model, s.step, s.sync_every, s.cpus)) if len(s) else set()
    alone = models[[key not in beside for key in zip(models.model, models.step, models.sync_every, models.cpus)]]
    if not len(alone):
        return []
    return [f"### Model-only steps — {at.here}", "",
            "The training step alone on batches already on the GPU, for models no e2e row ran beside:", "",
            table(model_table(alone)), ""]


def stages_section(run: Run, at: AtSetting) -> list[str]:
    stages = stage_table(at.cells)
    return [f"### Stage ceilings (img/s) — {at.here}", "", table(stages), ""] if len(stages) else []


SETTING_SECTIONS = (ceilings_section, headspace_section, shares_section, situations_section, models_alone_section,
                    stages_section)


def settings_section(run: Run) -> list[str]:
    """Each setting's sections (`SETTING_SECTIONS`), setting by setting."""
    return [line for at in at_settings(run) for section in SETTING_SECTIONS for line in section(run, at)]


def accuracy_section(run: Run) -> list[str]:
    accuracy, note = accuracy_table(run.view.rows)
    return ["### Time to accuracy", "", table(accuracy), "", note, ""] if len(accuracy) else []


def drift_section(run: Run) -> list[str]:
    drift = drift_lines(run.view.cells)
    return [f"### Windows that drifted more than {DRIFT:.0%} within a process", "", *drift, ""] if drift else []


def ready_section(run: Run) -> list[str]:
    ready = ready_lines(run.view.cells)
    return [f"### Windows that began with batches ready ({READY:.0%} of their steps or more)", "",
            "The drain before a window stopped while batches made before it were still queued. A pipeline that "
            "keeps ahead of its consumer always has some ready; for one that falls behind, the window's rate "
            "overstates what it makes.", "", *ready, ""] if ready else []


def rejected_section(run: Run) -> list[str]:
    group = run.group
    rejected = label_variants(group[group.status.isin(["ok", "rejected"])])   # named as every table names them
    rejected = rejected[rejected.status == "rejected"]
    if not len(rejected):
        return []
    loader = group[(group["mode"] == "loader") & group.status.isin(["ok", "rejected"])]
    return [f"### Rejected windows ({len(rejected)} of {len(loader)} loader windows)", "",
            "Windows left out of every number above because their busy step ran off its label (rows from "
            "before the step kept its work), they delivered more than it allows, or they lasted under half "
            "the run's minimum window:", ""] + [
        f"- {code(r.pipeline)} {int(r.cpus)} cores, {r.busy_ms:g} ms, process {int(r.process)}, window "
        f"{int(r.repeat)}: {escape(r.error)}" for r in rejected.itertuples()] + [""]


def failed_section(run: Run) -> list[str]:
    group = run.group
    failed = group[~group.status.isin(["ok", "not-applicable", "rejected"])].drop_duplicates(
        ["pipeline", "mode", "stage", "model", "status", "error"])
    if not len(failed):
        return []
    return ["### Not measured", ""] + [
        f"- {code(r.pipeline)} {r.stage or r.mode} {escape(r.model)}: {r.status} — {escape(r.error)}"
        for r in failed.itertuples()] + [""]


def scaling_section(run: Run) -> list[str]:
    table_, sentences = scaling(run.group)
    return ["### Several GPUs", "", SCALING, "", table(table_), "", *sentences, ""] if len(table_) else []


def prediction_section(run: Run) -> list[str]:
    table_, sentences = prediction(run.group)
    if not len(table_):
        return []
    return ["### More GPUs per host, predicted", "", PREDICTION, "", CHECKED, "",
            *prediction_note(run.name, run.group, run.out), table(table_), "", *sentences, ""]


RUN_SECTIONS = (title_section, bus_section, settings_section, accuracy_section, drift_section, ready_section,
                rejected_section,
                failed_section, scaling_section, prediction_section)


def run_sections(name: str, group: pd.DataFrame, view: RunView, out: Path, slug: str,
                 plots: dict[str, str]) -> list[str]:
    """The sections of one run (`RUN_SECTIONS`, each its Markdown lines or none); `plots` gets the file
    names of its main plots ("cores", "share")."""
    run = Run(name, group, view, out, slug, plots)
    return [line for section in RUN_SECTIONS for line in section(run)]
