"""How far other float code paths move the synthetic images that tests/test_sources.py's
`test_synthetic_images_are_those_earlier_versions_made` pins: `synthesize(2500, seed=0, stream=3)` made in a
fresh process with this machine's defaults, then with numpy's baseline x86 loops and with OpenBLAS's oldest
x86-64 kernel (einsum's), each compared with the first: the largest difference in levels, the pixels that
differ, the largest move of a channel's sum (the test allows 64), and whether the labels are the same.

    python results/2026-12-02-tests/synthetic-float-paths.py > results/2026-12-02-tests/synthetic-float-paths.txt
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
PATHS = {"this machine's defaults": {},
         "numpy's baseline x86 loops": {"NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL"},
         "OpenBLAS's Prescott kernel": {"OPENBLAS_CORETYPE": "Prescott"}}
MAKE = """import sys, numpy as np
sys.path.insert(0, sys.argv[1])
from pipelines.sources import synthetic
images, labels = synthetic.synthesize(2500, seed=0, stream=3)
np.savez(sys.argv[2], images=images, labels=labels)"""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        made = {}
        for name, env in PATHS.items():
            out = Path(tmp) / f"{len(made)}.npz"
            subprocess.run([sys.executable, "-c", MAKE, str(ROOT), str(out)], check=True, env={**os.environ, **env})
            made[name] = np.load(out)
    first = made["this machine's defaults"]
    images = first["images"].astype(np.int64)
    print(f"synthesize(2500, seed=0, stream=3): {images.size:,} pixel values; numpy {np.__version__}")
    for name, other in made.items():
        diff = other["images"].astype(np.int64) - images
        sums = np.abs(diff.reshape(-1, 3).sum(axis=0)).max()
        print(f"{name} ({' '.join(f'{k}={v}' for k, v in PATHS[name].items()) or 'no variable'}): largest difference "
              f"{np.abs(diff).max()} level, {np.count_nonzero(diff)} values differ, a channel's sum moves by at most "
              f"{sums}; the same labels: {np.array_equal(other['labels'], first['labels'])}")


if __name__ == "__main__":
    main()
