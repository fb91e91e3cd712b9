"""pipebench pipelines: CIFAR-10 input pipelines behind one contract (see `pipelines.contract`).

    import pipelines
    cfg = pipelines.PipelineConfig(batch_size=512, dtype="bfloat16", channels_last=True)
    with pipelines.build("prefetch", cfg) as loader:
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            for images, labels in loader:      # already on the GPU, normalized
                ...

`names()` lists every registered pipeline, `available()` says which can be built here and why
not. Pipeline modules are imported only when built, so a missing optional dependency (DALI,
timm, SPDL, torchcodec) affects only its own pipeline.
"""
from __future__ import annotations

import importlib

from .contract import Pipeline
from .config import PipelineConfig
from .sources import Split

_REGISTRY = {
    "dataloader": ("pipelines.dataloader", "DataLoaderPipeline"),
    "prefetch": ("pipelines.prefetch", "PrefetchPipeline"),
    "resident": ("pipelines.resident", "ResidentPipeline"),
    "dali": ("pipelines.dali", "DaliPipeline"),
    "dali-raw": ("pipelines.dali", "DaliRawPipeline"),
    "tvjpeg": ("pipelines.tvjpeg", "TorchvisionJpegPipeline"),
    "torchcodec": ("pipelines.torchcodec", "TorchcodecJpegPipeline"),
    "timm": ("pipelines.timm", "TimmPrefetchPipeline"),
    "spdl": ("pipelines.spdl", "SpdlPipeline"),
}

__all__ = ["Pipeline", "PipelineConfig", "available", "build", "names", "resolve_config"]


def names() -> list[str]:
    return list(_REGISTRY)


def _pipeline_class(name: str) -> type[Pipeline]:
    if name not in _REGISTRY:
        raise ValueError(f"unknown pipeline {name!r}: expected one of {names()}")
    module, cls = _REGISTRY[name]
    return getattr(importlib.import_module(module), cls)


def available() -> dict[str, str | None]:
    """name -> None if it can be built here, else the reason it cannot."""
    reasons = {}
    for name in _REGISTRY:
        try:
            _pipeline_class(name)
            reasons[name] = None
        except ImportError as e:
            reasons[name] = str(e)
    return reasons


def resolve_config(name: str, config: PipelineConfig) -> PipelineConfig:
    """The config pipeline `name` would run with (e.g. the encoding it always reads)."""
    return _pipeline_class(name).resolve(config)


def build(name: str, config: PipelineConfig | None = None, data: Split | None = None, **changes) -> Pipeline:
    """Construct pipeline `name` from `config` (default config if None) with `changes` applied.
    `data`: the split already in memory (`sources.open_split` of the config the pipeline resolves
    to), shared by several pipelines instead of each loading it again."""
    config = config or PipelineConfig()
    if changes:
        config = config.replace(**changes)
    return _pipeline_class(name)(config, data)
