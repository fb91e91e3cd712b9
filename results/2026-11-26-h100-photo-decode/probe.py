"""Probe: what the photo set (`pipelines.sources.photos`) costs to decode, before any pipeline reads it.

Makes the photo set (`make_photos`, from the photographs in --photos-from), prints its size and
bytes, then times, each over the same files:
  pil        one process, one core: PIL decode + RandomResizedCrop (`crops.rrc_boxes`, resized to
             224 x 224 with `TF.resized_crop`) + flip + `to_tensor` + `normalize`, the torchvision
             reference example's per-image work
  pil-draft  the same with PIL's draft mode (libjpeg decodes at 1/2, 1/4 or 1/8 scale where the crop
             allows), which torchvision does not use
  tv-cpu     `torchvision.io.decode_jpeg` on the CPU, one image at a time, one thread
  tv-gpu     `torchvision.io.decode_jpeg(device="cuda")` on batches of --batch files (nvJPEG), the
             bytes copied to the GPU inside the timer, CUDA-synchronized
Each timer runs --repeats times over the whole set after one untimed pass; img/s median [min-max].

    PYTHONPATH=. python results/2026-11-26-h100-photo-decode/probe.py --photos-from DIR --count 2000
"""
from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torchvision.io import decode_jpeg
from torchvision.transforms import functional as TF

from pipelines import crops
from pipelines.config import MEAN, STD
from pipelines.sources import photos


def pil(files, sizes, boxes, flips, draft: bool) -> None:
    for data, (width, _), (y, x, h, w), flip in zip(files, sizes, boxes, flips):
        image = Image.open(io.BytesIO(data))
        if draft:   # libjpeg's smallest scale (1/2, 1/4, 1/8) that leaves the crop at least 224 px
            scale = max(1, min(h, w) // 224)
            image.draft("RGB", (-(-image.width // scale), -(-image.height // scale)))
        image = image.convert("RGB")
        s = image.width / width   # the box in the decoded image's pixels
        image = TF.resized_crop(image, round(y * s), round(x * s), max(1, round(h * s)), max(1, round(w * s)),
                                [224, 224])
        if flip:
            image = TF.hflip(image)
        TF.normalize(TF.to_tensor(image), MEAN, STD)


def tv_cpu(tensors) -> None:
    for t in tensors:
        decode_jpeg(t)


def tv_gpu(tensors, batch: int) -> None:
    for k in range(0, len(tensors), batch):
        decode_jpeg(tensors[k:k + batch], device="cuda")
    torch.cuda.synchronize()


def timed(name: str, run, n: int, repeats: int) -> None:
    run()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        rates.append(n / (time.perf_counter() - start))
    print(f"{name:10s} {statistics.median(rates):10,.0f} img/s [{min(rates):,.0f}-{max(rates):,.0f}] n={repeats}",
          flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--photos-from", type=Path, required=True)
    p.add_argument("--count", type=int, default=2000)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(1)
    folder = Path(tempfile.mkdtemp()) / "photos"
    start = time.perf_counter()
    meta = photos.make_photos(folder, a.count, 0, a.photos_from)
    print(f"photo set: {a.count} files in {time.perf_counter() - start:.1f} s; mean {meta['bytes_mean']:,.0f} B, "
          f"median {meta['bytes_median']:,.0f} B; sides median {meta['side_median']:g} px, "
          f"{meta['side_min']}-{meta['side_max']}", flush=True)
    paths = sorted(folder.rglob("*.jpg"))
    files = [path.read_bytes() for path in paths]
    sizes = [Image.open(io.BytesIO(data)).size for data in files]
    y, x, h, w = crops.rrc_boxes([s[1] for s in sizes], [s[0] for s in sizes], np.random.default_rng(0))
    boxes = list(zip(y.tolist(), x.tolist(), h.tolist(), w.tolist()))
    flips = crops.flips(len(files), np.random.default_rng(1)).tolist()
    tensors = [torch.frombuffer(bytearray(data), dtype=torch.uint8) for data in files]
    timed("pil", lambda: pil(files, sizes, boxes, flips, False), len(files), a.repeats)
    timed("pil-draft", lambda: pil(files, sizes, boxes, flips, True), len(files), a.repeats)
    timed("tv-cpu", lambda: tv_cpu(tensors), len(files), a.repeats)
    if torch.cuda.is_available():
        timed("tv-gpu", lambda: tv_gpu(tensors, a.batch), len(files), a.repeats)


if __name__ == "__main__":
    main()
