"""The 40-photograph folder the photo run read: python make_photos.py DIR (two classes, 300-500 px a side)."""
import sys
from pathlib import Path

import numpy as np
from PIL import Image

rng = np.random.default_rng(0)
for k in range(40):
    h, w = (int(v) for v in rng.integers(300, 500, 2))
    small = Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8))
    path = Path(sys.argv[1]) / f"class{k % 2}" / f"{k}.jpg"
    path.parent.mkdir(parents=True, exist_ok=True)
    small.resize((w, h), Image.Resampling.BICUBIC).save(path, quality=90)
