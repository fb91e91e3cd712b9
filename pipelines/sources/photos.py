"""A set of photographs like ImageNet's, made offline and deterministically from a few real ones.

CIFAR-10 blown up to 224 px compresses far better and decodes far more cheaply than photographs,
so its rates say little about the JPEGs users train on. `make_photos` cuts crops at random scales
and aspect ratios out of real colour photographs, resizes them to an ImageNet-like size
distribution (short side log-normal around 375 px, sides 200-800), jitters brightness and
contrast, adds mild per-pixel sensor noise and encodes them at quality 93-97: photographs this
smooth need both to come near ImageNet's ~110 KB per file (PHOTOS.json records what they came to). The label is the source photograph (a real,
learnable task). The set is written in the `torchvision.datasets.ImageFolder` layout (a folder per
class, named after its photograph), with PHOTOS.json recording the sources, their licences, the
seed and the sizes and bytes of the files made.

The photographs: scikit-image's bundled colour photographs with permissive licences (`CATALOG`; the
optional extra `photos` installs it; its files are read, scikit-image is not imported), or any
folder of JPEG / PNG photographs you name (a machine without a package index), one class each, at
most as many as the models have outputs. Before anything is written, what cannot be used is one
line naming it (a missing folder, too many photographs, a file PIL cannot read or whose header
claims more pixels than PIL's decompression-bomb bound), and so is a set the disk cannot hold
(`check_room`: the first photographs' mean size x the count, with a margin, against the free
space). The images are made in worker processes, a core each, and written as they are made.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import multiprocessing
import os
import shutil
import sys
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from ..config import NUM_CLASSES, usable_cores
from .cache import writing
from .imagefolder import utf8_named

META = "PHOTOS.json"
SHORT_SIDE = (375, 0.3)      # log-normal short side: median (px) and sigma of its log
SIDES = (200, 800)           # every side within these
ASPECT = (3 / 4, 4 / 3)      # long / short of a crop, log-uniform
AREA = (0.1, 1.0)            # share of the photograph a crop covers, uniform
QUALITY = (93, 97)           # JPEG quality, uniform integer
NOISE_SIGMA = 6.0            # per-pixel sensor noise, in uint8 levels
ROOM_SAMPLE = 8              # photographs made to estimate the set's bytes (`check_room`)
ROOM_MARGIN = 1.25           # the estimate's margin over their mean size
PER_WORKER = 250             # images per worker process at least: fewer are made in this process
# The workers are forked where that is safe (Linux): a spawned worker imports this package, and with it
# torch, before its first image: 58 s before the first image with 16 workers on a 16-core GPU machine,
# 3.4 minutes for the set with 64 (results/2026-11-27-h100x4-photos-lost/README.md). They never touch
# CUDA, so a fork is safe.
START = "fork" if sys.platform.startswith("linux") else "spawn"


@dataclass(frozen=True)
class Photo:
    name: str          # the class name: the photograph's
    file: str          # its file in scikit-image's data folder
    licence: str       # as scikit-image's documentation states it
    origin: str


CATALOG = (
    Photo("astronaut", "astronaut.png", "public domain (NASA)", "https://flic.kr/p/r9qvLn"),
    Photo("chelsea", "chelsea.png", "CC0 (Stefan van der Walt)", "scikit-image"),
    Photo("coffee", "coffee.png", "CC0 (Rachel Michetti)", "scikit-image"),
    Photo("hubble_deep_field", "hubble_deep_field.jpg", "public domain (NASA)",
          "http://hubblesite.org/newscenter/archive/releases/2012/37/image/a/"),
    Photo("immunohistochemistry", "ihc.png", "no known copyright restrictions (CMMI)", "scikit-image"),
    Photo("retina", "retina.jpg", "CC0 1.0", "https://commons.wikimedia.org/wiki/File:Fundus_photograph_of_normal_left_eye.jpg"),
    Photo("rocket", "rocket.jpg", "public domain (SpaceX)", "https://www.flickr.com/photos/spacexphotos/16511594820/"),
)
SUFFIXES = (".jpg", ".jpeg", ".png")
MIN_SIDE = 32   # a photograph to cut from has at least this many pixels a side (1 x 1 divided by zero)


def source_photos(folder: str | Path | None = None) -> list[tuple[Photo, Image.Image]]:
    """The photographs to cut from: every JPEG / PNG in `folder` (sorted by name, licence unknown:
    yours), else `CATALOG` from scikit-image's data folder. A missing source is a one-line
    ValueError saying what to do."""
    if folder is not None:
        if not Path(folder).is_dir():
            raise ValueError(f"{folder}: no such folder")
        files = sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in SUFFIXES
                       and not p.name.startswith(".") and p.is_file())   # hidden files and FIFOs are no photographs
        if not files:
            raise ValueError(f"{folder}: no .jpg, .jpeg or .png photographs in it")
        for p in files:   # its name names a class folder, which every reader refuses unless UTF-8
            utf8_named(p)
        stems = [p.stem for p in files]
        twice = sorted({stem for stem in stems if stems.count(stem) > 1})
        if twice:   # a class is named by its photograph's name
            raise ValueError(f"{folder}: {', '.join(p.name for p in files if p.stem in twice)}: one class per name; "
                             "rename one of each")
        if len(files) > NUM_CLASSES:
            raise ValueError(f"{folder}: {len(files)} photographs would make {len(files)} classes; the models here "
                             f"have {NUM_CLASSES} outputs: use at most {NUM_CLASSES}")
        photos = [(Photo(p.stem, p.name, "given by the user", str(p)), p) for p in files]
    else:
        spec = importlib.util.find_spec("skimage")
        if spec is None or not spec.submodule_search_locations:
            raise ValueError("the photo set is cut from scikit-image's bundled photographs: pip install -e "
                             "'.[photos]', or name a folder of your own photographs")
        data = Path(next(iter(spec.submodule_search_locations))) / "data"
        photos = [(photo, data / photo.file) for photo in CATALOG]
    found = []
    for photo, path in photos:
        try:
            with warnings.catch_warnings():   # PIL only warns up to twice its bound
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                with Image.open(path) as image:
                    if min(image.size) < MIN_SIDE:
                        raise ValueError(f"{path}: {image.size[0]} x {image.size[1]} px, too small to cut "
                                         f"ImageNet-like crops from: at least {MIN_SIDE} px a side")
                    found.append((photo, image.convert("RGB")))
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
            raise ValueError(f"{path}: its header claims more pixels than PIL's decompression-bomb bound ({e})") \
                from None
        except OSError as e:
            raise ValueError(f"{path}: not a readable photograph ({e})") from None
    return found


def cut(photo: Image.Image, rng: np.random.Generator) -> Image.Image:
    """One crop of `photo` (area and aspect ratio at random), resized to an ImageNet-like size,
    maybe mirrored, brightness and contrast jittered."""
    width, height = photo.size
    aspect = float(np.exp(rng.uniform(*np.log(ASPECT))))
    area = rng.uniform(*AREA) * width * height
    w = int(min(width, round(np.sqrt(area * aspect))))
    h = int(min(height, round(np.sqrt(area / aspect))))
    x, y = int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1))
    short = float(np.clip(SHORT_SIDE[0] * np.exp(rng.normal(0, SHORT_SIDE[1])), *SIDES))
    scale = short / min(w, h)
    size = tuple(int(np.clip(round(side * scale), *SIDES)) for side in (w, h))
    image = photo.crop((x, y, x + w, y + h)).resize(size, Image.Resampling.BICUBIC)
    if rng.random() < 0.5:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    pixels = np.asarray(image, dtype=np.float32)
    pixels = (pixels - 128) * rng.uniform(0.9, 1.1) + 128 + rng.uniform(-12, 12)
    return Image.fromarray(pixels.clip(0, 255).astype(np.uint8))


def encode(image: Image.Image, rng: np.random.Generator) -> bytes:
    """`image` with sensor noise, as a JPEG at a quality drawn from QUALITY."""
    pixels = np.asarray(image, dtype=np.float32) + rng.normal(0, NOISE_SIGMA, (image.height, image.width, 3))
    out = io.BytesIO()
    Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(out, format="JPEG",
                                                               quality=int(rng.integers(QUALITY[0], QUALITY[1] + 1)))
    return out.getvalue()


def photo_bytes(photos: list[tuple[Photo, Image.Image]], seed: int, k: int) -> tuple[Photo, bytes, tuple[int, int]]:
    """Image k of the set: (its class's photograph, its JPEG file, its size)."""
    photo, source = photos[k % len(photos)]
    rng = np.random.default_rng([seed, k])
    image = cut(source, rng)
    return photo, encode(image, rng), image.size


_SOURCES: list[tuple[Photo, Image.Image]] = []   # a worker's photographs (`_keep`)


def _keep(photos: list[tuple[Photo, Image.Image]]) -> None:
    _SOURCES[:] = photos


def _make(job: tuple[str, int, int]) -> tuple[int, int, tuple[int, int]]:
    """Write image k of the set into folder `tmp` from the photographs `_keep` kept: (k, its bytes, its size)."""
    tmp, seed, k = job
    photo, data, side = photo_bytes(_SOURCES, seed, k)
    (Path(tmp) / photo.name / f"{k:07d}.jpg").write_bytes(data)
    return k, len(data), side


def check_room(final: str | Path, count: int, seed: int, photos: list[tuple[Photo, Image.Image]]) -> None:
    """A one-line ValueError if `count` photographs would not fit in the free space of `final`'s
    disk: the mean size of the set's first ROOM_SAMPLE photographs x count x ROOM_MARGIN."""
    mean = np.mean([len(photo_bytes(photos, seed, k)[1]) for k in range(min(count, ROOM_SAMPLE))])
    need = count * mean * ROOM_MARGIN
    disk = next(p for p in Path(os.path.abspath(final)).parents if p.exists())
    free = shutil.disk_usage(disk).free
    if need > free:
        raise ValueError(f"--photos {count}: about {need / 1e9:,.1f} GB ({mean / 1e3:.0f} kB a photograph), "
                         f"{free / 1e9:,.1f} GB free on {disk}: ask for fewer")


def make_photos(final: str | Path, count: int, seed: int = 0, photos_from: str | Path | None = None,
                progress=None, photos: list[tuple[Photo, Image.Image]] | None = None) -> dict:
    """Write `count` photographs (the same bytes for the same seed and sources) into `final` in the
    ImageFolder layout, image k from photograph k mod the number of photographs, in a process per
    usable core (one per PER_WORKER images at most; one: this process), image k from its own random
    stream;
    returns what PHOTOS.json records. The sources are `photos` if given (as `source_photos` returns
    them), else `source_photos(photos_from)`; `check_room` first. The folder appears whole or not
    at all (`cache.writing`). `progress`, if given, is called once per image written."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count={count!r}: expected an integer >= 1")
    photos = photos if photos is not None else source_photos(photos_from)
    check_room(final, count, seed, photos)
    sizes, sides = np.zeros(count, np.int64), np.zeros((count, 2), np.int64)
    with writing(Path(final), "the photo set") as tmp:
        for photo, _ in photos:
            (tmp / photo.name).mkdir()

        workers = min(usable_cores(), -(-count // PER_WORKER))
        jobs = ((str(tmp), seed, k) for k in range(count))
        with contextlib.ExitStack() as stack:
            if workers > 1:   # processes: in threads the GIL held it to ~200 a second on 64 cores
                pool = stack.enter_context(ProcessPoolExecutor(workers, multiprocessing.get_context(START),
                                                               initializer=_keep, initargs=(photos,)))
                stack.callback(pool.shutdown, cancel_futures=True)   # an error or Ctrl-C here: no image after it
                made = pool.map(_make, jobs, chunksize=16)
            else:
                _keep(photos)
                stack.callback(_SOURCES.clear)   # the photographs are not kept past the set
                made = map(_make, jobs)
            for k, size, side in made:
                sizes[k], sides[k] = size, side
                if progress is not None:
                    progress()
        meta = {"seed": seed, "count": count, "generator": "pipebench photos v1",
                "sources": [{"class": p.name, "file": p.file, "licence": p.licence, "origin": p.origin,
                             "size": list(image.size)} for p, image in photos],
                "bytes_mean": float(np.mean(sizes)), "bytes_median": float(np.median(sizes)),
                "side_median": float(np.median(sides)), "side_min": int(sides.min()), "side_max": int(sides.max())}
        (tmp / META).write_text(json.dumps(meta, indent=1))
    return meta
