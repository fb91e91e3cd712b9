"""What a plan will cost in device time, predicted before it runs from the rows the suite already has
(issue 70: results/2026-11-28-ladder-cost's model, made part of the suite).

A plan is configuration processes, each running its members (`Member`: one configuration) one after
another; processes run one after another. Predicted, from rows of earlier runs (`rows_under`: every
`results.csv` under the given folders, ok rows):
  - a member's timed windows: `repeats` windows per busy level, each as long as the harness sizes it
    (`bench.measuring.harness.window_steps`: whole epochs, or blocks of MODEL_BLOCK steps for model-only,
    lasting at least WINDOW_MARGIN x min_window_s; `requested_steps` where given) at the member's rate:
    the median img/s of rows of the same mode, pipeline, model, step, image size, batch and busy level,
    and of its pipeline's variant (`variant_of`: DALI's decoder and split, a copy path) where there are
    such rows, else (e2e) the fastest rate that variant's rows show feeding another model
    (`_fed_elsewhere`), else of any variant; on the same GPU and cores where there are such rows, else
    any GPU; where no rows have its cores, a member that reads data (not model-only) at the nearest
    cores' rate times the ratio of worker counts (cores less the one that trains) raised to its
    elasticity (`_elasticity`: 1 where its CPU work spreads over the workers, 0 where its rate is the
    GPU's; its variant's, else the median of its pipeline's variants'); model-only at any cores'. An e2e
    member with no rows at all, or inferred (from other models or cores) at model-only's rate or above,
    at model-only's rate, which nothing trains faster than (its time then a lower bound, counted so);
  - a member's time outside its windows (construction, compile or cache load, warm-up, drains, the
    previous member's teardown): the median, over members of the same pipeline, mode and image size
    (else pipeline and mode, else image size, else all) in the RECENT most recent runs holding any, of the
    time from the previous member's rows to its own less its windows (`gap`). A member's rows are
    written together when it ends, so a member, not a window, is the unit; the newest runs, because
    this time is the harness's and the harness changes it (commit 68228c8 cut it:
    results/2026-12-03-h200-ladder-v2/README.md), while a rate is the model's and the GPU's;
  - a process's start before its first member (interpreter, imports, CUDA, the first model's compile):
    the median, over the RECENT most recent runs that began a process after their first at its first
    member's image size (else at any: a 224-px model compiles slower), of the time from a process's last
    member to the next process's first less that member's windows and its gap.
What is not predicted: a member with no rate at all (a model never measured) is counted apart; a plan
with several ranks is predicted as one rank (the ranks run at once).

How good this is, on committed runs predicted from the others' rows: tests/test_estimate.py.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

import pipelines
from pipelines.config import IMAGEFOLDER
from pipelines.sources.imagefolder import split_folder

from ..measuring.harness import MODEL_BLOCK, window_steps
from ..measuring.spec import RunSpec
from ..results import config_columns

PHOTO_SUFFIXES = {".jpg", ".jpeg", ".png"}
RECENT = 3   # runs whose time outside the windows prices a member's (module docstring)
KEY = ["mode", "pipeline", "model", "step", "image_size", "batch_size", "busy_ms"]


@dataclass(frozen=True)
class Member:
    """One configuration of a plan, as the estimate needs it."""
    mode: str
    pipeline: str
    model: str
    step: str
    image_size: int
    batch_size: int
    cpus: float
    busy_levels: tuple[float, ...] = (0.0,)
    repeats: int = 2
    min_window_s: float = 0.5
    requested_steps: int | None = None
    samples: int = 50_000   # per epoch (per rank)
    variant: str = ""   # its pipeline's knobs that set what it does (`variant_of`)

    @classmethod
    def of(cls, spec: RunSpec, samples: int) -> "Member":
        c = spec.config
        return cls(spec.mode, spec.pipeline, spec.model if spec.mode in ("model", "e2e", "train") else "none",
                   spec.step if spec.mode in ("model", "e2e", "train") else "", c.image_size, c.batch_size,
                   float(spec.cpus) if spec.cpus else math.nan, tuple(spec.busy_levels), spec.repeats,
                   spec.min_window_s or 0.0, spec.requested_steps, samples,
                   variant_of(spec.pipeline, lambda name: getattr(c, name, None)))


@functools.cache
def _variant_knobs(pipeline: str) -> tuple[tuple[str, object], ...]:
    """The knobs of `pipeline` that name its variants in the report (`report.analysis.variant_options`:
    not those sized per CPU budget), with their defaults; a default of None is a knob set when the
    pipeline is built unless the plan sets it (DALI's hardware decoder share)."""
    from ..report.analysis import variant_options
    if pipeline not in pipelines.names():   # model-only ("none"), or a pipeline no longer here
        return ()
    options, reads = pipelines.declared_options(), pipelines.reads(pipeline)
    return tuple((name, options[name].default) for name in variant_options()[0] if name in reads)


def variant_of(pipeline: str, value) -> str:
    """`pipeline`'s variant as one text, e.g. "dali_decoder=cpu dali_cpu_share=0 ...": each knob of
    `_variant_knobs` at `value(name)`, its default where that is None or NaN (rows written before the
    knob existed ran at its default), "*" (any value: `_matches`) where the default is None too;
    numbers and switches written alike whether read from a plan or from rows ("0.45", "True")."""
    def text(v, default) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)) or str(v) in ("", "None", "nan"):
            v = "*" if default is None else default
        if isinstance(v, bool) or str(v) in ("True", "False"):
            return str(v)
        try:
            return f"{float(v):g}"
        except (TypeError, ValueError):
            return str(v)
    return " ".join(f"{name}={text(value(name), default)}" for name, default in _variant_knobs(pipeline))


def _matches(one: str, other: str) -> bool:
    """Whether two `variant_of` texts of one pipeline agree on every knob ("*" agreeing with any value)."""
    return all(a == b or a.endswith("=*") or b.endswith("=*") for a, b in zip(one.split(), other.split()))


@dataclass
class Estimate:
    """Predicted seconds per process (in plan order), members priced at model-only's rate (`bounds`) and
    members with no rate (`unknown`)."""
    processes: list[float] = field(default_factory=list)
    cells: list[str] = field(default_factory=list)   # each process's cell, as `cell_text` names it
    bounds: int = 0
    unknown: int = 0
    sources: int = 0   # runs whose rows it rests on
    absent: list[str] = field(default_factory=list)   # photo folders not on this machine (an epoch: 50,000)
    anywhere: bool = False   # priced for a GPU this machine lacks: from rows of any GPU

    @property
    def seconds(self) -> float:
        return sum(self.processes)

    def text(self) -> str:
        if not self.sources:
            return "not predicted: no rows of earlier runs to predict it from (results/, OUT)"
        minutes = self.seconds / 60
        notes = [f"from the rows of {self.sources} committed runs"]
        if self.bounds:
            notes.append(f"{self.bounds} members priced at model-only's rate, a lower bound")
        if self.unknown:
            notes.append(f"{self.unknown} members with no rows to price them: left out")
        if self.anywhere:
            notes.append("no GPU here: priced from rows of any GPU")
        if self.absent:
            notes.append(f"{', '.join(self.absent)} not here: an epoch of 50,000 samples assumed")
        return f"predicted {minutes:.1f} min of device time ({len(self.processes)} configuration processes; " \
               f"{'; '.join(notes)})"

    def per_cell(self) -> list[str]:
        """A line per cell, in plan order: its processes and their predicted minutes."""
        seconds: dict[str, list[float]] = {}
        for cell, s in zip(self.cells, self.processes):
            seconds.setdefault(cell, []).append(s)
        return [f"{cell}: {len(s)} process{'es' if len(s) > 1 else ''}, {sum(s) / 60:.1f} min"
                for cell, s in seconds.items()]


class Costs:
    """What earlier rows say a member costs (module docstring)."""

    def __init__(self, rows: pd.DataFrame, cuda: bool, gaps: pd.DataFrame | None = None):
        """From `rows` of runs on a GPU (`cuda`) or on a CPU alone: a CPU run's processes start, warm up
        and time otherwise. `gaps`: those of these rows (`_gaps`), where already known."""
        on_gpu = rows.device.astype(str).str.startswith("cuda") if "device" in rows else False
        rows = rows[on_gpu == cuda]
        ok = rows[(rows.status == "ok") & rows.img_per_s.notna() & rows.seconds.notna()].copy()
        ok["t"] = pd.to_datetime(ok.timestamp, utc=True, errors="coerce", format="ISO8601")
        self.rows, self.cuda = ok[ok.t.notna()], cuda
        self.sources = self.rows.run_id.nunique() if len(self.rows) else 0
        self.gaps = _gaps(self.rows) if gaps is None else gaps
        # per key, per variant, every (gpu, cores) with rows and their median, once
        self.variants: dict[tuple, dict[str, dict[tuple, float]]] = {}
        if len(self.rows):
            rows = self.rows.assign(_variant=_variants(self.rows))
            for key, rate in rows.groupby(KEY + ["_variant", "gpu", "cpus"], dropna=False).img_per_s.median().items():
                self.variants.setdefault(key[:-3], {}).setdefault(key[-3], {})[key[-2:]] = rate

    def without(self, run_ids: set[str]) -> "Costs":
        """These costs less the rows of the runs `run_ids` (a run predicted from the others' rows)."""
        return Costs(self.rows[~self.rows.run_id.isin(run_ids)], self.cuda,
                     self.gaps[~self.gaps.run_id.isin(run_ids)])

    def rate(self, m: Member, busy: float, gpu: str) -> tuple[float, bool]:
        """The member's img/s at busy level `busy` and whether it is model-only's (a bound); nan if unknown."""
        key = (m.mode, m.pipeline, m.model, m.step, m.image_size, m.batch_size, busy)
        model = self._median(("model", "none", *key[2:]), "", m.cpus, gpu)[0]
        found, inferred = self._median(key, m.variant, m.cpus, gpu, model)
        if math.isnan(found) and m.mode == "e2e" or inferred and found >= model:
            return model, True
        return found, False

    def _median(self, key: tuple, variant: str, cpus: float, gpu: str, model: float = math.nan) -> tuple[float, bool]:
        """The rate of rows like `key` (module docstring), and whether it was inferred (from other models'
        rows or other cores'): of the variants `variant` matches, else (e2e, `model` known) of the same
        variant feeding other models, else of all; each (GPU, cores)'s median, the median of those of
        several variants or GPUs: on this GPU and cores, else these cores on any GPU; else model-only the
        median at any cores (on this GPU where it ran), and a member reading data the nearest cores'
        (this GPU's where it ran) times the ratio of worker counts to the power of its elasticity."""
        variants = self.variants.get(key, {})
        own = _merged([places for text, places in variants.items() if _matches(variant, text)])
        elsewhere = {} if own or key[0] != "e2e" or math.isnan(model) else self._fed_elsewhere(key, variant)
        own, borrowed = own or elsewhere, bool(elsewhere)
        found = own or _merged(list(variants.values()))
        if not found:
            return math.nan, False
        if (gpu, cpus) in found:
            return float(found[gpu, cpus]), borrowed
        same = [rate for (_, c), rate in found.items() if c == cpus]
        if same:
            return float(pd.Series(same).median()), borrowed
        places = [p for p in found if p[0] == gpu] or list(found)
        if key[0] == "model" or math.isnan(cpus) or all(pd.isna(c) for _, c in places):
            return float(pd.Series([found[p] for p in places]).median()), borrowed
        near = min({c for _, c in places if pd.notna(c)}, key=lambda c: (abs(math.log(c / cpus)), c))
        elasticity = _elasticity(own) if own else None
        if elasticity is None:   # the median of what its pipeline's variants tell, else none
            told = [e for e in map(_elasticity, variants.values()) if e is not None]
            elasticity = float(pd.Series(told).median()) if told else 0.0
        rate = pd.Series([found[p] for p in places if p[1] == near]).median() * (
            _workers(cpus) / _workers(near)) ** elasticity
        return float(rate), True

    def _fed_elsewhere(self, key: tuple, variant: str) -> dict[tuple, float]:
        """Per (GPU, cores), the fastest e2e rate of `variant` feeding another model (`key` otherwise the
        same): what it delivered beside one model it can deliver beside another (module docstring)."""
        places: dict[tuple, float] = {}
        for other, variants in self.variants.items():
            if other[:2] == key[:2] and other[3:] == key[3:]:
                for place, rate in _merged([p for text, p in variants.items() if _matches(variant, text)]).items():
                    places[place] = max(places.get(place, 0.0), rate)
        return places

    def start(self, image_size: int) -> float:
        """A process's start before its first member, a member of `image_size` (module docstring)."""
        return _process_start(self.gaps, image_size)

    def outside(self, m: Member) -> float:
        """A member's time outside its windows (module docstring): members of its pipeline, mode and
        image size, else of its pipeline and mode, else of its image size, else all, in the RECENT most
        recent runs holding any."""
        gaps = self.gaps[~self.gaps.start] if len(self.gaps) else self.gaps
        if not len(gaps):
            return 0.0
        own = gaps[(gaps.pipeline == m.pipeline) & (gaps["mode"] == m.mode)]
        alike = [own[own.image_size == m.image_size], own, gaps[gaps.image_size == m.image_size], gaps]
        return float(_recent(next(g for g in alike if len(g))).gap.median())

    def member_seconds(self, m: Member, gpu: str) -> tuple[float, bool]:
        """A member's predicted seconds and whether they are a lower bound; nan if it has no rate."""
        total, bound = 0.0, False
        for busy in m.busy_levels:
            rate, at_model = self.rate(m, busy, gpu)
            if math.isnan(rate):
                return math.nan, False
            bound |= at_model
            total += m.repeats * _window_s(m, rate, busy)
        return total + self.outside(m), bound

    def predict(self, processes: list[list[Member]], gpu: str) -> Estimate:
        estimate = Estimate(sources=self.sources)
        for members in processes:
            seconds = self.start(members[0].image_size) if members else 0.0
            for m in members:
                s, bound = self.member_seconds(m, gpu)
                if math.isnan(s):
                    estimate.unknown += 1
                    continue
                estimate.bounds += bound
                seconds += s
            estimate.processes.append(seconds)
            estimate.cells.append(cell_text(members[0]) if members else "")
        return estimate


def plan_estimate(specs: list[RunSpec], device: torch.device, folders: list[Path]) -> Estimate:
    """The predicted cost of `specs` (their processes: `plan.shared`) on `device` from the rows under
    `folders`."""
    from .plan import shared
    here = device.type != "cuda" or torch.cuda.is_available()   # else priced for a GPU elsewhere (--estimate)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" and here else ""
    counted = functools.cache(samples_of)   # a photo folder counted once per plan, not per member
    processes = [[Member.of(s, counted(s.config)) for s in members] for members in shared(specs)]
    found = Costs(rows_under(folders), device.type == "cuda").predict(processes, gpu)
    found.anywhere = not here
    found.absent = sorted({str(f) for f in map(photo_folder, (s.config for s in specs)) if f and not f.is_dir()})
    return found


def rows_under(folders: list[Path]) -> pd.DataFrame:
    """Every pipebench `results.csv` under `folders`, read as the report does; a study's own or a damaged one skipped."""
    from ..report.analysis import load
    frames = []
    for path in sorted({p for folder in folders for p in Path(folder).rglob("results.csv")}):
        try:
            frames.append(load([path]))
        except ValueError:
            continue
    return pd.concat(frames, ignore_index=True) if frames else \
        pd.DataFrame(columns=["status", "img_per_s", "seconds", "timestamp", "run_id", "rank", "device"])


def photo_folder(config) -> Path | None:
    """The folder of photographs a config reads (`imagefolder:PATH`), None for other sources."""
    return Path(config.source.removeprefix(IMAGEFOLDER)) if config.source.startswith(IMAGEFOLDER) else None


def samples_of(config) -> int:
    """Samples per epoch per rank: a folder of photographs' training files (counted), else CIFAR-10's
    50,000; at most `max_samples`."""
    n = 50_000
    folder = photo_folder(config)
    if folder and folder.is_dir():
        train = split_folder(folder, "train")
        n = sum(1 for f in train.rglob("*") if f.suffix.lower() in PHOTO_SUFFIXES) or n
    if config.max_samples:
        n = min(n, config.max_samples)
    return max(1, n // max(1, config.world_size))


def ran(rows: pd.DataFrame) -> list[list[Member]]:
    """The plan a run's rows (rank 0's, ok) say it ran: its processes in the order they began, each its
    members in order (`_gaps`' boundaries)."""
    rows = rows[(rows.status == "ok") & (rows["rank"].fillna(0) == 0)].copy()
    rows["t"] = pd.to_datetime(rows.timestamp, utc=True, errors="coerce", format="ISO8601")
    rows = rows.sort_values("t")
    config = _config_of(rows)
    processes: list[list[Member]] = []
    for _, member in rows.groupby(config, sort=False):
        r = member.iloc[0]
        if not processes or pd.isna(r.slot) or r.slot == 0:
            processes.append([])
        samples = int(r.samples) if pd.notna(r.samples) else 50_000
        processes[-1].append(Member(r["mode"], r.pipeline, r.model, r.step, int(r.image_size), int(r.batch_size),
                                    float(r.cpus), tuple(sorted(member.busy_ms.unique())), int(member.repeat.nunique()),
                                    float(r.min_window_s) if pd.notna(r.min_window_s) else 0.0,
                                    None if pd.isna(r.requested_steps) else int(r.requested_steps), samples,
                                    variant_of(r.pipeline, r.get)))
    return processes


def _config_of(rows: pd.DataFrame) -> pd.Series:
    """Per row, its configuration and process as one hashable value (nan read as empty)."""
    columns = list(dict.fromkeys([c for c in config_columns() if c in rows and c != "busy_levels"] + ["process"]))
    config = rows[columns].astype(object)
    return pd.Series([repr(tuple(r)) for r in config.where(config.notna(), "").itertuples(index=False)],
                     index=rows.index)


def cell_text(m: Member) -> str:
    """A process's cell as the estimate names it."""
    what = f"{m.model} {m.step}" if m.mode in ("model", "e2e", "train") else f"{m.mode} {m.pipeline}"
    return f"{m.image_size} px, batch {m.batch_size}, {m.cpus:g} cores, {what}"


def _variants(rows: pd.DataFrame) -> list[str]:
    """Each row's `variant_of` its pipeline (a knob's column absent: its default), in row order."""
    names = {p: [name for name, _ in _variant_knobs(p)] for p in rows.pipeline.dropna().unique()}
    knobs = sorted({name for found in names.values() for name in found})
    values = rows.reindex(columns=knobs).astype(object).to_dict("records")
    return [variant_of(p, v.get) if p in names else "" for p, v in zip(rows.pipeline, values)]


def _merged(found: list[dict[tuple, float]]) -> dict[tuple, float]:
    """Several variants' (gpu, cores) -> median rate as one: each place's median over them."""
    places: dict[tuple, list[float]] = {}
    for one in found:
        for place, rate in one.items():
            places.setdefault(place, []).append(rate)
    return {place: float(pd.Series(rates).median()) for place, rates in places.items()}


def _elasticity(found: dict[tuple, float]) -> float | None:
    """How a member's rate follows its worker count (`_workers`), from its rates (`found`: (gpu, cores)
    -> rate) on a GPU where it ran with several core counts above one: log(rate ratio) / log(worker
    ratio) between its fewest and most cores, the median over such GPUs, between 0 (its rate is the
    GPU's: a copy or a GPU decoder) and 1 (every worker's work adds up: decoding on the CPU); None where
    no GPU tells."""
    ratios = []
    for gpu in {g for g, _ in found}:
        cores = sorted(c for g, c in found if g == gpu and pd.notna(c) and c > 1 and found[g, c] > 0)
        if len(cores) > 1:
            lo, hi = found[gpu, cores[0]], found[gpu, cores[-1]]
            ratios.append(math.log(hi / lo) / math.log(_workers(cores[-1]) / _workers(cores[0])))
    return min(1.0, max(0.0, float(pd.Series(ratios).median()))) if ratios else None


def _workers(cpus: float) -> float:
    """The processes or threads that read data on `cpus` cores: all but the one that trains."""
    return max(1.0, cpus - 1)


def _window_s(m: Member, rate: float, busy: float) -> float:
    """One timed window's seconds at `rate` (`bench.measuring.harness.window_steps`)."""
    steps_per_epoch = max(1, math.ceil(m.samples / m.batch_size))
    unit = MODEL_BLOCK if m.mode == "model" else steps_per_epoch
    step_s = m.batch_size / rate
    spec = _Sizing(m.mode, m.requested_steps, m.min_window_s)
    return window_steps(spec, unit, step_s, busy) * step_s


@dataclass(frozen=True)
class _Sizing:
    """What `window_steps` reads of a spec."""
    mode: str
    requested_steps: int | None
    min_window_s: float


def _gaps(rows: pd.DataFrame) -> pd.DataFrame:
    """Per member of rank 0 after its run's first (its consecutive rows of one configuration): the time
    from the previous member's last row to its own last less its windows (`gap`: its rows are written
    when it ends, a timestamp to the second), whether a new process began with it (`start`: a process's
    first member, `slot` 0, or a configuration in a process of its own) and when its run began (`t`)."""
    found = []
    for _, run in rows[rows["rank"].fillna(0) == 0].groupby("run_id", sort=False):
        run = run.sort_values("t")
        member = _config_of(run)
        by = run.groupby((member != member.shift()).cumsum().to_numpy(), sort=True)
        first, ends, slot = by[["run_id", "pipeline", "mode", "image_size"]].first(), by.t.max(), by.slot.first()
        found.append(pd.DataFrame({"run_id": first.run_id, "pipeline": first.pipeline, "mode": first["mode"],
                                   "image_size": first.image_size, "start": slot.isna() | (slot == 0),
                                   "gap": (ends - ends.shift()).dt.total_seconds() - by.seconds.sum(),
                                   "t": run.t.min()}).iloc[1:])
    gaps = pd.concat(found) if found else pd.DataFrame(columns=["run_id", "pipeline", "mode", "image_size", "start",
                                                                "gap", "t"])
    return gaps[gaps.gap >= 0]


def _recent(gaps: pd.DataFrame) -> pd.DataFrame:
    """The gaps of the RECENT runs among `gaps`' that began last."""
    runs = gaps.groupby("run_id").t.first().sort_values().index[-RECENT:]
    return gaps[gaps.run_id.isin(runs)]


def _process_start(gaps: pd.DataFrame, image_size: int) -> float:
    """The median time before a process's first member that the member's own gap does not explain
    (module docstring), from the members of `image_size` where a process began with one (else all)
    over the RECENT runs that began a process last; 0 where none began a second."""
    sized = gaps[gaps.image_size == image_size] if len(gaps) else gaps
    gaps = sized if len(sized) and sized.start.any() else gaps
    starts = _recent(gaps[gaps.start]) if len(gaps) else gaps
    if not len(starts):
        return 0.0
    member = gaps[~gaps.start].groupby(["pipeline", "mode"]).gap.median()
    own = [member.get((p, m), member.median() if len(member) else 0.0) for p, m in zip(starts.pipeline, starts["mode"])]
    return float((starts.gap - own).median())
