"""A pipeline's optional dependency (a peer: DALI, FFCV, timm, SPDL, torchcodec), imported when the
pipeline is built or asked whether it can be (`pipelines.available`), not when its module is
imported. Every process that reads the pipelines' knobs imports every pipeline module
(`pipelines.declared_options`, which `PipelineConfig` reads): each configuration process of a sweep
and pipebench itself. Importing FFCV there compiled numba functions for about 6 s in every
configuration process on the 2-core development machine, whichever pipeline it measured.

    FFCV = Peer(_import_ffcv, lambda e: f"FFCV is not installed: ... ({e})")

    class FfcvPipeline(Pipeline):
        missing = FFCV          # read on the class: '' if the peer imports, else why not

        def __init__(...):
            ffcv = FFCV.get()   # what _import_ffcv returned (its first call imports)
"""
from __future__ import annotations

import functools
from typing import Any, Callable


class Peer:
    """An optional dependency imported on first use. `load` imports it and returns what the pipeline
    uses; an exception of `errors` it raises makes the pipeline unavailable, `refusal(error)` saying
    why. Read as a class attribute (`missing = PEER`) it is that reason, or '' once `load` worked."""

    def __init__(self, load: Callable[[], Any], refusal: Callable[[Exception], str],
                 errors: tuple[type[Exception], ...] = (ImportError,)):
        self._load, self._refusal, self._errors = load, refusal, errors

    @functools.cached_property
    def _outcome(self) -> tuple[Any, str]:
        try:
            return self._load(), ""
        except self._errors as e:
            return None, self._refusal(e)

    def __get__(self, instance, owner) -> str:
        return self._outcome[1]

    def get(self) -> Any:
        """What `load` returned; ImportError with the reason if the peer cannot be used here."""
        loaded, missing = self._outcome
        if missing:
            raise ImportError(missing)
        return loaded
