"""pipebench pipelines: CIFAR-10 input pipelines behind one contract (see `pipelines.contract`).

    import pipelines
    cfg = pipelines.PipelineConfig(batch_size=512, dtype="bfloat16", channels_last=True)
    with pipelines.build("prefetch", cfg) as loader:
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            for images, labels in loader:      # already on the GPU, normalized
                ...

`names()` lists every registered pipeline, `available()` says which can be built here and why
not: a pipeline module imports without its optional dependency (DALI, timm, SPDL, torchcodec, FFCV),
which it imports only when it is built or asked (`peers.Peer`), and says what is missing
(`Pipeline.missing`), so it affects only its own pipeline. `reads(name)` and
`declared_options()` give the knobs the pipelines declare (`pipelines.options`); `PipelineConfig`
accepts them (handed over by `config.use_knobs`: no module here imports this registry), and the
command line, the sweep plan, the results columns and the report labels are made from them.

Adding a pipeline: its module (a `Pipeline` subclass with `name`, `options`, and `missing = Peer(...)`
if it has an optional dependency) and one line in `_REGISTRY`.
"""
from __future__ import annotations

import functools
import importlib

from .contract import Pipeline
from .config import PipelineConfig, use_knobs
from .options import Option
from .sources import Split

_REGISTRY = {
    "dataloader": ("pipelines.dataloader", "DataLoaderPipeline"),
    "prefetch": ("pipelines.prefetch", "PrefetchPipeline"),
    "resident": ("pipelines.resident", "ResidentPipeline"),
    "dali": ("pipelines.dali", "DaliPipeline"),
    "dali-raw": ("pipelines.dali", "DaliRawPipeline"),
    "tvjpeg": ("pipelines.tvjpeg", "TorchvisionJpegPipeline"),
    "torchcodec": ("pipelines.torchcodec", "TorchcodecJpegPipeline"),
    "nvimgcodec": ("pipelines.nvimgcodec", "NvimgcodecJpegPipeline"),
    "timm": ("pipelines.timm", "TimmPrefetchPipeline"),
    "spdl": ("pipelines.spdl", "SpdlPipeline"),
    "ffcv": ("pipelines.ffcv", "FfcvPipeline"),
}

__all__ = ["Option", "Pipeline", "PipelineConfig", "available", "build", "copies", "declared_options", "names", "reads",
           "resolve_config", "worker_modules"]


def names() -> list[str]:
    return list(_REGISTRY)


def _declared_class(name: str) -> type[Pipeline]:
    """The class of pipeline `name`, whether or not it can be built here."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown pipeline {name!r}: expected one of {names()}")
    module, cls = _REGISTRY[name]
    return getattr(importlib.import_module(module), cls)


def _pipeline_class(name: str) -> type[Pipeline]:
    cls = _declared_class(name)
    if cls.missing:
        raise ImportError(cls.missing)
    return cls


def available(among=None) -> dict[str, str | None]:
    """name -> None if it can be built here, else the reason it cannot (its module does not import,
    or says what it misses); of the registered pipelines `among` names (default: all), so only
    their optional dependencies are imported."""
    reasons = {}
    for name in (_REGISTRY if among is None else [n for n in _REGISTRY if n in set(among)]):
        try:
            reasons[name] = _declared_class(name).missing or None
        except ImportError as e:
            reasons[name] = str(e)
    return reasons


def _importable() -> list[type[Pipeline]]:
    """The classes of the registered pipelines whose modules import (one that does not reads nothing)."""
    found = []
    for name in _REGISTRY:
        try:
            found.append(_declared_class(name))
        except ImportError:
            continue
    return found


def worker_modules(name: str, config: PipelineConfig) -> tuple[str, ...]:
    """What the forkserver of pipeline `name`'s DataLoader workers imports under `config`
    (`Pipeline.worker_modules`); none where no worker starts from a forkserver: no workers, another
    start method, or no pipeline ('none', a model-only run)."""
    if name not in _REGISTRY or not config.num_workers or getattr(config, "worker_start", "") != "forkserver":
        return ()
    try:
        return _declared_class(name).worker_modules
    except ImportError:
        return ()


def reads(name: str) -> tuple[str, ...]:
    """The knobs pipeline `name` reads beyond those every pipeline reads, in its declared order (none
    if its module does not import: it cannot be built)."""
    try:
        return tuple(option.name for option in _declared_class(name).options)
    except ImportError:
        return ()


def source_refusal(name: str, config: PipelineConfig) -> str:
    """Why pipeline `name` ("none": copies, the model alone) cannot read `config`'s source ("" if it
    can): `build` raises it, a sweep records it on the rows it skips."""
    if name == "none":
        return ""
    try:
        cls = _declared_class(name)
    except ImportError:
        return ""   # `available` says why
    if config.photos and not cls.photos:
        return f"{name}: reads CIFAR-like images of one size, not photographs (those: {', '.join(photo_readers())})"
    if not config.photos and not cls.cifar:
        return f"{name}: reads photographs only (source='imagefolder:PATH'), not CIFAR-like images"
    return ""


def photo_readers() -> list[str]:
    """The registered pipelines that read photographs (`imagefolder:PATH`) with ImageNet's crops."""
    return [cls.name for cls in _importable() if cls.photos]


def declared_options() -> dict[str, Option]:
    """name -> Option of every knob some registered pipeline reads, in registry order; one name is
    one knob (two pipelines that read it declare the same `Option`). Cached per registry content:
    `PipelineConfig` reads it on every knob it is asked for."""
    return dict(_declared_options(tuple(_REGISTRY.items())))


@functools.lru_cache(maxsize=16)
def _declared_options(registry: tuple) -> tuple[tuple[str, Option], ...]:
    found: dict[str, Option] = {}
    for cls in _importable():
        for option in cls.options:
            if found.setdefault(option.name, option) != option:
                raise TypeError(f"pipeline {cls.name!r} declares option {option.name!r} unlike another pipeline")
    return tuple(found.items())


use_knobs(declared_options)   # PipelineConfig validates and reads the knobs declared here


def resolve_config(name: str, config: PipelineConfig) -> PipelineConfig:
    """The config pipeline `name` would run with (e.g. the encoding it always reads)."""
    return _pipeline_class(name).resolve(config)


def copies(name: str, config: PipelineConfig) -> tuple[str, ...]:
    """The copies of the data pipeline `name` ("none": no pipeline) reads with `config` (`Pipeline.copies`)."""
    try:
        cls = Pipeline if name == "none" else _declared_class(name)
    except ImportError:   # it cannot be built: the copies its encoding needs, as any pipeline
        cls = Pipeline
    return cls.copies(config)


def build(name: str, config: PipelineConfig | None = None, data: Split | None = None, **changes) -> Pipeline:
    """Construct pipeline `name` from `config` (default config if None) with `changes` applied.
    `data`: the split already in memory (`sources.open_split` of the config the pipeline resolves
    to), shared by several pipelines instead of each loading it again. A source the pipeline does
    not read is a one-line ValueError (`source_refusal`)."""
    config = config or PipelineConfig()
    if changes:
        config = config.replace(**changes)
    cls = _pipeline_class(name)
    refusal = source_refusal(name, config)
    if refusal:
        raise ValueError(refusal)
    return cls(config, data)
