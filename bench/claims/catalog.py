"""The ten claims in their published order, and picking them by number or name."""
from __future__ import annotations

from typing import Iterable

from pipelines.options import echo

from . import copies, loaders, training
from .framework import Claim

CLAIMS = [*copies.CLAIMS, *loaders.CLAIMS, *training.CLAIMS]
KEYS = [c.key for c in CLAIMS]


def select(names: Iterable[str]) -> list[Claim]:
    """Claims by key or by number (1-based), in the order given."""
    chosen = []
    for name in names:
        if name.isdigit() and 1 <= int(name) <= len(CLAIMS):
            chosen.append(CLAIMS[int(name) - 1])
        elif name in KEYS:
            chosen.append(CLAIMS[KEYS.index(name)])
        else:
            raise ValueError(f"claim {echo(name)}: expected a number 1-{len(CLAIMS)} or one of {KEYS}")
    return chosen
