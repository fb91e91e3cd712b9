"""The photo set (`pipelines.sources.photos`): deterministic, in the ImageFolder layout, ImageNet-like
sizes, its sources and licences recorded, one-line errors for what cannot be used."""
from __future__ import annotations

import importlib.util
import io
import json
import os
import sys

import numpy as np
import pytest
from PIL import Image

from bench import cli
from pipelines.sources import photos
from tests.test_imagefolder import bomb


@pytest.fixture
def own_photos(tmp_path):
    """Three 'photographs' of your own: smooth colour fields with some texture."""
    folder = tmp_path / "mine"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in ("beach", "cat", "dog"):
        small = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
        Image.fromarray(small).resize((640, 480), Image.Resampling.BICUBIC).save(folder / f"{name}.png")
    (folder / "notes.txt").write_text("not a photograph")
    return folder


def test_the_set_is_an_image_folder_of_jpegs_with_imagenet_like_sizes(own_photos, tmp_path):
    meta = photos.make_photos(tmp_path / "set", 30, seed=3, photos_from=own_photos)
    classes = sorted(p.name for p in (tmp_path / "set").iterdir() if p.is_dir())
    assert classes == ["beach", "cat", "dog"]
    files = sorted((tmp_path / "set").rglob("*.jpg"))
    assert len(files) == 30 and all(len(list((tmp_path / "set" / c).glob("*.jpg"))) == 10 for c in classes)
    for f in files:
        with Image.open(io.BytesIO(f.read_bytes())) as image:
            assert image.format == "JPEG" and image.mode == "RGB"
            assert all(photos.SIDES[0] <= side <= photos.SIDES[1] for side in image.size)
    recorded = json.loads((tmp_path / "set" / photos.META).read_text())
    assert recorded == meta and meta["count"] == 30 and meta["seed"] == 3
    assert [s["licence"] for s in meta["sources"]] == ["given by the user"] * 3
    assert meta["bytes_mean"] == pytest.approx(np.mean([f.stat().st_size for f in files]))
    assert photos.SIDES[0] <= meta["side_min"] <= meta["side_median"] <= meta["side_max"] <= photos.SIDES[1]


def test_the_same_seed_makes_the_same_bytes_and_another_seed_other_ones(own_photos, tmp_path):
    def files(folder):
        return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*.jpg"))}
    photos.make_photos(tmp_path / "a", 9, seed=1, photos_from=own_photos)
    photos.make_photos(tmp_path / "b", 9, seed=1, photos_from=own_photos)
    photos.make_photos(tmp_path / "c", 9, seed=2, photos_from=own_photos)
    assert files(tmp_path / "a") == files(tmp_path / "b")
    assert files(tmp_path / "a").keys() == files(tmp_path / "c").keys() and files(tmp_path / "a") != files(tmp_path / "c")


def test_worker_processes_make_the_same_set_as_this_process(own_photos, tmp_path, monkeypatch):
    def files(folder):
        return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    here = photos.make_photos(tmp_path / "here", 9, seed=1, photos_from=own_photos)
    monkeypatch.setattr(photos, "PER_WORKER", 3)   # 9 images: a process per core, up to 3
    monkeypatch.setattr(photos.os, "sched_getaffinity", lambda pid: {0, 1})
    made = []
    pooled = photos.make_photos(tmp_path / "pooled", 9, seed=1, photos_from=own_photos, progress=lambda: made.append(1))
    assert pooled == here and len(made) == 9
    assert files(tmp_path / "pooled") == files(tmp_path / "here")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")
def test_worker_processes_start_from_this_process_without_importing_anew(own_photos, tmp_path, monkeypatch):
    # A spawned worker would import this package (and torch) again: minutes for 64 workers. A forked one
    # starts from this process's modules, so a setting changed here reaches the set it makes.
    monkeypatch.setattr(photos, "NOISE_SIGMA", 0.0)
    monkeypatch.setattr(photos, "QUALITY", (50, 50))
    here = photos.make_photos(tmp_path / "here", 6, seed=1, photos_from=own_photos)
    monkeypatch.setattr(photos, "PER_WORKER", 3)
    monkeypatch.setattr(photos.os, "sched_getaffinity", lambda pid: {0, 1})
    assert photos.make_photos(tmp_path / "pooled", 6, seed=1, photos_from=own_photos) == here


def test_crops_vary_in_size_and_aspect_like_imagenet():
    source = Image.fromarray(np.random.default_rng(0).integers(0, 256, (600, 800, 3), dtype=np.uint8))
    sizes = [photos.cut(source, np.random.default_rng([0, k])).size for k in range(100)]
    short = np.array([min(s) for s in sizes])
    aspect = np.array([max(s) / min(s) for s in sizes])
    assert 300 <= np.median(short) <= 450 and short.min() >= photos.SIDES[0]
    assert aspect.min() >= 1.0 and 1.1 <= np.median(aspect) <= 1.34 and aspect.max() > 1.25


def test_what_cannot_be_used_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"empty: no \.jpg, \.jpeg or \.png photographs in it$"):
        photos.make_photos(tmp_path / "set", 3, photos_from=tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(ValueError, match=r"x\.jpg: not a readable photograph"):
        photos.make_photos(tmp_path / "set", 3, photos_from=tmp_path / "bad")
    with pytest.raises(ValueError, match=r"^count=0: expected an integer >= 1$"):
        photos.make_photos(tmp_path / "set", 0, photos_from=tmp_path / "bad")
    with pytest.raises(ValueError, match=r"missing: no such folder$"):
        photos.make_photos(tmp_path / "set", 3, photos_from=tmp_path / "missing")
    (tmp_path / "eleven").mkdir()
    for k in range(11):
        Image.new("RGB", (64, 48), (20 * k, 0, 0)).save(tmp_path / "eleven" / f"{k:02d}.png")
    with pytest.raises(ValueError, match=r"eleven: 11 photographs would make 11 classes; the models here have 10 "
                                         r"outputs: use at most 10$"):
        photos.make_photos(tmp_path / "set", 3, photos_from=tmp_path / "eleven")
    (tmp_path / "bomb").mkdir()
    bomb(tmp_path / "bomb" / "big.jpg")
    with pytest.raises(ValueError, match=r"big\.jpg: its header claims more pixels than PIL's decompression-bomb "
                                         r"bound \(Image size \(400000000 pixels\)"):
        photos.make_photos(tmp_path / "set", 3, photos_from=tmp_path / "bomb")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "skimage" else real(name, *a))
    with pytest.raises(ValueError, match=r"pip install -e '\.\[photos\]'"):
        photos.source_photos()
    assert not (tmp_path / "set").exists()   # nothing half-written


def test_the_catalog_uses_only_photographs_with_permissive_licences():
    assert len({p.name for p in photos.CATALOG}) == len(photos.CATALOG) >= 7
    permissive = ("public domain", "CC0", "no known copyright restrictions")
    assert all(p.licence.startswith(permissive) for p in photos.CATALOG)


def test_prepare_writes_the_photo_set_beside_the_data(own_photos, synthetic_root, capsys):
    from bench import cli
    assert cli.main(["prepare", "--data-root", str(synthetic_root), "--photos", "6", "--photos-from",
                     str(own_photos), "--data-seed", "0"]) in (0, None)
    out = capsys.readouterr().out
    folder = synthetic_root / "photos-seed0"
    assert f"photos: {folder} (6 JPEGs in 3 classes" in out
    assert len(list(folder.rglob("*.jpg"))) == 6 and (folder / photos.META).is_file()


def test_a_set_the_disk_cannot_hold_is_refused_before_anything_is_written(own_photos, tmp_path, monkeypatch):
    usage = photos.shutil.disk_usage(tmp_path)
    monkeypatch.setattr(photos.shutil, "disk_usage", lambda path: usage._replace(free=10**6))
    with pytest.raises(ValueError, match=r"^--photos 100: about 0\.0 GB \(\d+ kB a photograph\), 0\.0 GB free on "
                                         rf"{tmp_path}: ask for fewer$"):
        photos.make_photos(tmp_path / "set", 100, photos_from=own_photos)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]
    photos.make_photos(tmp_path / "set", 5, photos_from=own_photos)   # a few fit


@pytest.mark.parametrize("argv,said", [
    (["--photos", "0"], "argument --photos: '0': expected an integer >= 1"),
    (["--photos", "1000000000", "--photos-from", "OWN"], "pipebench prepare: --photos 1000000000: about "),
    (["--photos", "3", "--photos-from", "missing"], "pipebench prepare: missing: no such folder"),
])
def test_prepare_refuses_a_photo_set_it_cannot_make_in_one_line_before_writing_anything(own_photos, tmp_path, capsys,
                                                                                        argv, said, monkeypatch):
    from bench import cli
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "data"
    with pytest.raises(SystemExit) as stop:
        cli.main(["prepare", "--data-root", str(root), *[str(own_photos) if a == "OWN" else a for a in argv]])
    err = capsys.readouterr().err + (stop.value.code if isinstance(stop.value.code, str) else "")
    lines = err.strip().splitlines()
    assert said in lines[-1] and "Traceback" not in err and not root.exists()
    if argv[1] == "0":   # as argparse refuses every flag: usage, then the line
        assert stop.value.code == 2 and lines[0].startswith("usage: pipebench prepare")
    else:
        assert len(lines) == 1


def test_photographs_to_cut_from_that_cannot_make_a_set_are_one_line(tmp_path, capsys):
    """Issue 69's campaign: a FIFO named x.jpg hung for good, a 1 x 1 photograph gave a
    ZeroDivisionError traceback, a.jpg beside a.png failed on "[Errno 17] File exists" in a temporary
    folder, a hidden .h.jpg became a class the readers skip, and --photos-from without --photos was
    silently ignored."""
    folder = tmp_path / "own"
    folder.mkdir()
    for name in ("a.png", "b.png"):
        Image.new("RGB", (64, 48), (200, 0, 0)).save(folder / name)
    Image.new("RGB", (64, 48)).save(folder / ".hidden.png")
    os.mkfifo(folder / "x.jpg")
    assert [photo.name for photo, _ in photos.source_photos(folder)] == ["a", "b"]   # no hang, nothing hidden
    Image.new("RGB", (64, 48)).save(folder / "a.jpg")
    with pytest.raises(ValueError, match=r"own: a\.jpg, a\.png: one class per name; rename one of each$"):
        photos.source_photos(folder)
    (folder / "a.jpg").unlink()
    Image.new("RGB", (1, 1)).save(folder / "tiny.png")
    with pytest.raises(ValueError, match=r"tiny\.png: 1 x 1 px, too small to cut ImageNet-like crops from: at least "
                                         r"32 px a side$"):
        photos.make_photos(tmp_path / "set", 3, photos_from=folder)
    assert not (tmp_path / "set").exists()
    with pytest.raises(SystemExit, match=r"--photos-from names what a photo set is cut from: give --photos N too"):
        cli.main(["prepare", "--photos-from", str(folder), "--data-root", str(tmp_path / "data")])


def test_a_photograph_whose_name_is_not_utf8_is_refused_before_it_names_a_class(tmp_path):
    """Its name names a class folder, which every reader refuses: refused by prepare, in one line."""
    folder = tmp_path / "own"
    folder.mkdir()
    Image.new("RGB", (64, 48), (200, 0, 0)).save(folder / "a.png")
    Image.new("RGB", (64, 48)).save(os.fsdecode(bytes(folder) + b"/caf\xe9.png"))
    with pytest.raises(ValueError, match=r"caf\\xe9\.png: a name that is not UTF-8: rename it$"):
        photos.source_photos(folder)
