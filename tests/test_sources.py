"""Sources: the safe CIFAR-10 loader, downloads, the synthetic set, the JPEG copies, what a split says it
holds and splits of your own arrays."""
from __future__ import annotations

import errno
import io
import json
import os
import pickle
import re
import socket
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision.datasets.utils
from PIL import Image

from bench import cli
from pipelines import sources
from pipelines.config import PipelineConfig
from pipelines.sources import synthetic


# Pickle opcodes as Python 2's cPickle (protocol 2) writes them, to build batches byte by byte.
def py2_str(text) -> bytes:
    """A str as SHORT_BINSTRING / BINSTRING (bytes when read with encoding="bytes")."""
    b = text if isinstance(text, bytes) else text.encode("latin1")
    return b"U" + bytes([len(b)]) + b if len(b) < 256 else b"T" + struct.pack("<i", len(b)) + b


def py2_int(v: int) -> bytes:
    if 0 <= v < 256:
        return b"K" + bytes([v])
    if -2 ** 31 <= v < 2 ** 31:
        return b"J" + struct.pack("<i", v)
    long = pickle.encode_long(v)
    return b"\x8a" + bytes([len(long)]) + long


def py2_tuple(items: list[bytes]) -> bytes:
    return b"".join(items) + b"\x85\x86\x87"[len(items) - 1:len(items)] if 1 <= len(items) <= 3 \
        else b"(" + b"".join(items) + b"t"


def py2_dtype(spec: str, order: str = "|", flags: int = 0) -> bytes:
    """numpy.dtype(spec, 0, 1) and its state (3, order, None, None, None, -1, -1, flags)."""
    return (b"cnumpy\ndtype\n" + py2_str(spec) + py2_int(0) + py2_int(1) + b"\x87R"
            + b"(" + py2_int(3) + py2_str(order) + b"NNN" + py2_int(-1) * 2 + py2_int(flags) + b"tb")


def py2_array(shape: tuple[int, ...], dtype: bytes, data: bytes) -> bytes:
    """numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), 'b') and its state
    (1, shape, dtype, False, data); `data` an opcode (a string's bytes, or ']' an empty list)."""
    return (b"cnumpy.core.multiarray\n_reconstruct\n" + b"cnumpy\nndarray\n" + py2_tuple([py2_int(0)])
            + py2_str("b") + b"\x87R" + b"(" + py2_int(1) + py2_tuple([py2_int(n) for n in shape]) + dtype
            + b"\x89" + data + b"tb")


def py2_batch(array: bytes, labels: list[int]) -> bytes:
    """A batch dict holding `array` (opcodes) as 'data'."""
    items = (py2_str("batch_label") + py2_str("training batch 1 of 5") + py2_str("labels")
             + b"](" + b"".join(py2_int(v) for v in labels) + b"e" + py2_str("data") + array)
    return b"\x80\x02}(" + items + b"u."


def py2_pickle(data: np.ndarray, labels: list[int]) -> bytes:
    """A batch as Python 2's cPickle (protocol 2) writes it: str keys as SHORT_BINSTRING and the
    array through numpy.core.multiarray._reconstruct with a BINSTRING payload."""
    return py2_batch(py2_array(data.shape, py2_dtype("u1"), py2_str(data.tobytes())), labels)


def valid_batch(rng) -> tuple[np.ndarray, list[int]]:
    return rng.integers(0, 256, (10_000, 3072), dtype=np.uint8), rng.integers(0, 10, 10_000).tolist()


def test_loads_python2_written_batch(tmp_path):
    data, labels = valid_batch(np.random.default_rng(0))
    path = tmp_path / "data_batch_1"
    path.write_bytes(py2_pickle(data, labels))
    got_data, got_labels = sources.load_batch(path)
    assert np.array_equal(got_data, data) and got_labels.tolist() == labels


def test_loads_python3_written_split_round_trip(tmp_path, monkeypatch):
    monkeypatch.setattr(sources.layout, "PER_FILE", 100)   # a test split of 100 images, read as it is written
    images, labels = sources.synthesize(100, seed=3)
    sources.write_split(tmp_path, "test", images, labels)
    got_images, got_labels = sources.load_split(tmp_path, "test")
    assert np.array_equal(got_images, images) and np.array_equal(got_labels, labels)


class _RunsCode:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_refuses_pickle_that_runs_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({"data": _RunsCode(), "labels": []}))
    with pytest.raises(sources.CifarFormatError, match=r"data_batch_1.*refusing global (posix|os)\.system"):
        sources.load_batch(path)
    assert not (tmp_path / "pwned").exists()


# Files made only of the globals a genuine batch uses, each holding an array numpy must not be handed.
# The first crashed the process (SIGSEGV) when numpy rebuilt it: an object array of 10,000 x 3,072
# pointers whose data is an empty list, so numpy read heap memory as Python objects.
HOSTILE = {
    "object": (py2_batch(py2_array((10_000, 3072), py2_dtype("O8", flags=63), b"]"), []),
               r"refusing numpy\.dtype\('O8'\)"),
    "structured": (pickle.dumps({"data": np.zeros(2, [("a", "u1"), ("b", "O")]), "labels": []}, protocol=2),
                   r"refusing numpy\.dtype\('V9'\)"),
    "float": (pickle.dumps({"data": np.zeros((2, 3), np.float32), "labels": []}, protocol=4),
              r"refusing numpy\.dtype\('f4'\)"),
    "length": (py2_batch(py2_array((10_000, 3072), py2_dtype("u1"), py2_str(b"abc")), []),
               r"refusing an array of shape \(10000, 3072\) uint8 with 3 bytes of data \(expected 30720000\)"),
    "negative": (py2_batch(py2_array((-1, 3072), py2_dtype("u1"), py2_str(b"")), []),
                 r"refusing an array of shape \(-1, 3072\): expected a tuple of non-negative integers"),
    "huge": (py2_batch(py2_array((2 ** 40, 2 ** 40), py2_dtype("u1"), py2_str(b"")), []),
             r"refusing an array of shape \(1099511627776, 1099511627776\) uint8 with 0 bytes of data"),
}
LOAD_EACH = """
import sys
from pipelines import sources
for path in sys.argv[1:]:
    try:
        sources.load_batch(path)
        print("loaded", flush=True)
    except sources.CifarFormatError as e:
        print(e, flush=True)
"""


@pytest.fixture(scope="module")
def hostile_loads(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    """Each HOSTILE file loaded by `load_batch` in one child process (a crash fails the tests instead
    of killing pytest): form -> (its path, the line the child printed)."""
    folder = tmp_path_factory.mktemp("hostile")
    for form, (raw, _) in HOSTILE.items():
        (folder / form).write_bytes(raw)
    repo = Path(__file__).resolve().parents[1]
    child = subprocess.run([sys.executable, "-c", LOAD_EACH, *(str(folder / form) for form in HOSTILE)],
                           capture_output=True, text=True, cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)},
                           timeout=300)
    lines = child.stdout.splitlines()
    assert child.returncode == 0 and len(lines) == len(HOSTILE), (child.returncode, child.stdout, child.stderr[-2000:])
    return {form: (folder / form, line) for form, line in zip(HOSTILE, lines)}


@pytest.mark.parametrize("form", HOSTILE)
def test_an_array_numpy_must_not_build_is_refused_in_one_line(hostile_loads, form):
    path, line = hostile_loads[form]
    assert line.startswith(f"{path}: ") and re.search(HOSTILE[form][1], line), line


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize("order", ["C", "F"])
def test_loads_arrays_as_each_protocol_writes_them(tmp_path, small, protocol, order):
    data = np.asarray(np.random.default_rng(5).integers(0, 256, (100, 3072), dtype=np.uint8), order=order)
    labels = np.arange(100) % 10
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({"data": data, "labels": labels.astype(np.int64)}, protocol=protocol))
    got_data, got_labels = sources.load_batch(path)
    assert np.array_equal(got_data, data) and np.array_equal(got_labels, labels) and got_data.flags.writeable


@pytest.mark.parametrize("damage,message", [
    (lambda d, l: (d[:, :3000], l), r"'data' is \(10000, 3000\) uint8, expected \(10000, 3072\) uint8"),
    (lambda d, l: (d.astype(np.int16), l), r"'data' is \(10000, 3072\) int16"),
    (lambda d, l: (d, l[:-1]), r"'labels' has shape \(9999,\)"),
    (lambda d, l: (d, [10] + l[1:]), r"labels span 0\.\.10, expected 0\.\.9"),
])
def test_rejects_misshaped_batch_naming_file(tmp_path, damage, message):
    data, labels = damage(*valid_batch(np.random.default_rng(1)))
    path = tmp_path / "data_batch_2"
    path.write_bytes(pickle.dumps({"data": np.ascontiguousarray(data), "labels": labels}))
    with pytest.raises(sources.CifarFormatError, match="data_batch_2: " + message):
        sources.load_batch(path)


def test_rejects_truncated_and_missing_files(tmp_path):
    path = tmp_path / "test_batch"
    path.write_bytes(py2_pickle(*valid_batch(np.random.default_rng(2)))[:50_000])
    with pytest.raises(sources.CifarFormatError, match="test_batch: not a readable CIFAR-10 pickle"):
        sources.load_batch(path)
    with pytest.raises(FileNotFoundError, match="data_batch_1: missing"):
        sources.load_split(tmp_path, "train")


# --- downloads (never the network: torchvision's download_url is replaced) ------------------------

def fake_download(monkeypatch, members: dict[str, bytes]) -> None:
    """download_url writes, instead of fetching it, an archive holding `members` (name -> bytes)."""
    def download_url(url, root, filename, md5):
        assert (url, md5) == (sources.URL, "c58f30108f718f92721af3b95e74349a")
        Path(root).mkdir(parents=True, exist_ok=True)   # as download_url does
        with tarfile.open(Path(root) / filename, "w:gz") as archive:
            for name, raw in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(raw)
                archive.addfile(info, io.BytesIO(raw))
    monkeypatch.setattr(torchvision.datasets.utils, "download_url", download_url)


def test_download_extracts_the_archive_into_place(tmp_path, monkeypatch):
    fake_download(monkeypatch, {f"{sources.BATCH_FOLDER}/{name}": name.encode() for name in sources.CIFAR10_MD5})
    folder = sources.download_cifar10(tmp_path)
    assert folder == tmp_path / sources.BATCH_FOLDER
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == {name: name.encode() for name in sources.CIFAR10_MD5}
    assert sorted(p.name for p in tmp_path.iterdir()) == [sources.BATCH_FOLDER, "cifar-10-python.tar.gz"]


def test_download_refuses_an_archive_member_outside_its_folder(tmp_path, monkeypatch):
    root = tmp_path / "data"
    fake_download(monkeypatch, {f"{sources.BATCH_FOLDER}/data_batch_1": b"1", "../escaped": b"pwned"})
    with pytest.raises(sources.DownloadError) as caught:
        sources.download_cifar10(root)
    message = str(caught.value)
    assert message.startswith(f"{root / 'cifar-10-python.tar.gz'}: cannot be extracted (") and "\n" not in message
    assert "'../escaped'" in message and message.endswith(
        f"delete it and download again, or copy {sources.BATCH_FOLDER}/ from a machine that has it to "
        f"{root / sources.BATCH_FOLDER}")
    assert not (tmp_path / "escaped").exists() and not (root / "escaped").exists()
    assert [p.name for p in root.iterdir()] == ["cifar-10-python.tar.gz"]   # no folder, whole or half


def test_no_network_is_one_line_naming_the_url(tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise urllib.error.URLError(socket.gaierror(-3, "Temporary failure in name resolution"))
    monkeypatch.setattr(torchvision.datasets.utils, "download_url", offline)
    with pytest.raises(SystemExit) as caught:
        cli.main(["download", "--root", str(tmp_path)])
    assert str(caught.value) == (
        f"pipebench download: cannot download {sources.URL} (<urlopen error [Errno -3] Temporary failure in "
        f"name resolution>): check the network and run it again, or copy {sources.BATCH_FOLDER}/ from a "
        f"machine that has it to {tmp_path / sources.BATCH_FOLDER}")


def test_missing_real_data_says_how_to_get_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="pipebench download"):
        sources.resolve_folder(PipelineConfig(data_root=str(tmp_path), source="cifar10"))


# `synthesize(2500, seed=0, stream=3)` as pipebench has made it since the set's checksums were recorded
# (these from 014cc4c's whole-array form): its labels' crc32, exact (the random stream alone), and its
# pixels' sum per channel, which other float code paths (numpy's SIMD loops, the BLAS kernel under einsum)
# move by a level at a few pixels: results/2026-12-02-tests/synthetic-float-paths.txt
SYNTHETIC_LABELS_CRC32 = "9744f067"
SYNTHETIC_CHANNEL_SUMS = (319_419_704, 311_711_105, 311_811_264)


def test_synthetic_images_are_those_earlier_versions_made():
    """A set generated again (a new data root, a new version) is the set earlier runs measured: the same
    labels and, but for a level at a few pixels on other float code paths, the same pixels. A change of
    the draws' order or of the drawing moves the sums by thousands."""
    images, labels = sources.synthesize(2500, seed=0, stream=3)
    assert f"{zlib.crc32(labels.tobytes()):08x}" == SYNTHETIC_LABELS_CRC32
    sums = images.reshape(-1, 3).astype(np.int64).sum(axis=0)
    assert np.abs(sums - SYNTHETIC_CHANNEL_SUMS).max() <= 64, sums.tolist()


def test_synthetic_images_are_the_same_bytes_however_many_are_made_at_once(monkeypatch):
    """`synthesize` makes its pixels `synthetic.CHUNK` images at a time; with a CHUNK above n it is the
    whole-array form earlier versions ran: the same bytes either way, a chunk that divides n or not."""
    images, labels = sources.synthesize(2500, seed=0, stream=3)
    assert len(images) > synthetic.CHUNK
    for chunk in (10**9, 333):
        monkeypatch.setattr(synthetic, "CHUNK", chunk)
        again, again_labels = sources.synthesize(2500, seed=0, stream=3)
        assert np.array_equal(again, images) and np.array_equal(again_labels, labels), chunk


def test_synthetic_is_deterministic_balanced_and_natural():
    a_images, a_labels = sources.synthesize(2000, seed=7)
    b_images, b_labels = sources.synthesize(2000, seed=7)
    c_images, _ = sources.synthesize(2000, seed=8)
    assert np.array_equal(a_images, b_images) and np.array_equal(a_labels, b_labels)
    assert not np.array_equal(a_images, c_images)
    assert a_images.shape == (2000, 32, 32, 3) and a_images.dtype == np.uint8
    assert np.bincount(a_labels).tolist() == [200] * 10
    # Natural-image-like: neighbouring pixels strongly correlated (white noise: ~0) and JPEG
    # files of real-CIFAR size at quality 90 (about 1-2 KB).
    x = a_images.astype(np.float64)
    assert np.corrcoef(x[:, :, :-1].ravel(), x[:, :, 1:].ravel())[0, 1] > 0.8
    sizes = [len(sources.encode_jpeg(img, 90)) for img in a_images[:300]]
    assert 800 < np.mean(sizes) < 2500


@pytest.fixture
def one_thread():
    """torch on one thread for the test, then as it was: beside the suite's other xdist worker on a
    2-core machine, two threads a worker oversubscribe the cores and a small model's steps take 3x as
    long."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_synthetic_is_learnable_within_one_epoch(synthetic_root, one_thread):
    """The synthetic set as generated for the benchmark (the session's, not 7000 images of its own)."""
    torch.manual_seed(0)
    folder = sources.ensure_synthetic(synthetic_root, seed=0)
    train_x, train_y = (a[:6000] for a in sources.load_split(folder, "train", limit=6000))
    test_x, test_y = (a[:1000] for a in sources.load_split(folder, "test", limit=1000))

    def tensor(x):
        return torch.from_numpy(x).permute(0, 3, 1, 2).float().div(255).sub(0.5)

    def block(cin, cout):
        return [torch.nn.Conv2d(cin, cout, 3, padding=1, bias=False), torch.nn.BatchNorm2d(cout), torch.nn.ReLU()]

    model = torch.nn.Sequential(*block(3, 16), torch.nn.MaxPool2d(2), *block(16, 32), torch.nn.MaxPool2d(2),
                                *block(32, 64), torch.nn.AdaptiveMaxPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x, y = tensor(train_x), torch.from_numpy(train_y)
    for i in range(0, len(y), 64):   # one epoch
        loss = torch.nn.functional.cross_entropy(model(x[i:i + 64]), y[i:i + 64])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        accuracy = (model(tensor(test_x)).argmax(1).numpy() == test_y).mean()
    assert accuracy > 0.4, accuracy   # chance is 0.1


def test_jpeg_copy_decodes_close_to_the_pixels(indexed_root):
    folder = indexed_root / sources.BATCH_FOLDER
    cache = sources.prepare_jpeg(folder, quality=90)
    assert (cache / "JPEG.json").is_file()
    jpeg = sources.load_jpeg(folder, "test", 90)
    images, _ = sources.load_split(folder, "test")
    assert len(jpeg) == len(images) == 10_000
    for i in (0, 4321, 9999):
        decoded = np.asarray(Image.open(io.BytesIO(jpeg[i])).convert("RGB"))
        assert np.abs(decoded.astype(int) - images[i]).mean() < 4


# --- checksums, rebuilt caches, where caches go (issue 13) ---------------------------------------

@pytest.fixture
def small(monkeypatch):
    """Sets of 100 images per batch file (600 in all): the same code paths in milliseconds."""
    monkeypatch.setattr(sources.layout, "PER_FILE", 100)


def write_set(root: Path, seed: int = 0) -> Path:
    """A standard-layout set written by pipebench (read as source='cifar10'), pixels from `seed`."""
    folder = root / sources.BATCH_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for stream, split in enumerate(("train", "test")):
        n = sources.layout.PER_FILE * len(sources.TRAIN_FILES if split == "train" else sources.TEST_FILES)
        sources.write_split(folder, split, *sources.synthesize(n, seed, stream))
    return folder


def flip_byte(path: Path) -> None:
    """Invert one byte in the middle of the file (pixel data in a batch or a packed JPEG copy)."""
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def files_under(root: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in root.rglob("*")}


def test_a_flipped_byte_in_the_synthetic_set_is_one_line_naming_the_file(tmp_path, small):
    folder = sources.ensure_synthetic(tmp_path, seed=0)
    recorded = json.loads((folder / sources.CHECKSUMS).read_text())["crc32"]
    assert sorted(recorded) == sorted([*sources.TRAIN_FILES, *sources.TEST_FILES, "batches.meta"])
    flip_byte(folder / "data_batch_3")
    sources.load_batch(folder / "data_batch_3")   # still a valid batch: only the checksum tells
    with pytest.raises(sources.CifarFormatError) as caught:
        sources.load_split(folder, "train")
    message = str(caught.value)
    assert message.startswith(f"{folder / 'data_batch_3'}: checksum does not match the one recorded when "
                              f"it was written (crc32 {recorded['data_batch_3']} vs "), message
    assert message.endswith(f"the file changed or is damaged; delete {folder} and it is generated again")
    assert "\n" not in message
    sources.load_split(folder, "test")   # the other split's files are intact
    images, labels = sources.load_split(folder, "train", limit=150)   # files 1-2 alone are checked and read
    assert len(images) == len(labels) == 200
    with pytest.raises(sources.CifarFormatError, match="data_batch_3"):
        sources.load_split(folder, "train", limit=201)


def test_a_synthetic_set_without_checksums_is_generated_again(tmp_path, small):
    folder = sources.ensure_synthetic(tmp_path, seed=0)
    intact = (folder / "test_batch").read_bytes()
    (folder / sources.CHECKSUMS).unlink()   # as an older pipebench wrote it
    flip_byte(folder / "test_batch")
    assert sources.ensure_synthetic(tmp_path, seed=0) == folder
    assert (folder / "test_batch").read_bytes() == intact
    sources.verify(folder, (*sources.TRAIN_FILES, *sources.TEST_FILES, "batches.meta"))


def test_published_md5s_are_torchvision_s():
    from torchvision.datasets import CIFAR10
    published = {name: md5 for name, md5 in CIFAR10.train_list + CIFAR10.test_list}
    assert sources.CIFAR10_MD5 == {**published, CIFAR10.meta["filename"]: CIFAR10.meta["md5"]}


def test_a_download_is_checked_against_the_published_md5_once(tmp_path, small, monkeypatch):
    data, cache = tmp_path / "data", tmp_path / "cache"
    folder = data / sources.BATCH_FOLDER
    folder.mkdir(parents=True)
    rng = np.random.default_rng(4)
    (folder / "test_batch").write_bytes(py2_pickle(rng.integers(0, 256, (100, 3072), dtype=np.uint8),
                                                   rng.integers(0, 10, 100).tolist()))
    with pytest.raises(sources.CifarFormatError) as caught:
        sources.load_split(folder, "test", cache)
    assert str(caught.value) == (
        f"{folder / 'test_batch'}: md5 {sources.checksum(folder / 'test_batch', 'md5')} differs from the "
        f"genuine file's {sources.CIFAR10_MD5['test_batch']} (published by torchvision): the file is damaged "
        f"or not CIFAR-10; run `pipebench download --root {data}` to fetch it again")

    monkeypatch.setitem(sources.CIFAR10_MD5, "test_batch", sources.checksum(folder / "test_batch", "md5"))
    sources.load_split(folder, "test", cache)   # genuine (as far as the table says): recorded
    [verified] = cache.glob(f"cifar10-*/{sources.VERIFIED}")
    record = json.loads(verified.read_text())
    assert record == {"test_batch": sources.checksum(folder / "test_batch")}
    real, md5s = sources.checksum, []
    monkeypatch.setattr(sources.checksums, "checksum", lambda path, algorithm="crc32": (
        md5s.append(path) if algorithm == "md5" else None) or real(path, algorithm))
    sources.load_split(folder, "test", cache)
    assert md5s == []   # the crc32 matched the record: no md5 again
    flip_byte(folder / "test_batch")
    with pytest.raises(sources.CifarFormatError, match="test_batch: md5 .* differs from the genuine file's"):
        sources.load_split(folder, "test", cache)
    assert md5s == [folder / "test_batch"]


def test_a_flipped_byte_in_the_jpeg_copy_has_it_encoded_again(tmp_path, small, capsys):
    folder = write_set(tmp_path)
    cache = sources.prepare_jpeg(folder, 90)
    intact = (cache / "train.data.npy").read_bytes()
    flip_byte(cache / "train.data.npy")
    jpeg = sources.load_jpeg(folder, "train", 90)
    assert (cache / "train.data.npy").read_bytes() == intact and bytes(jpeg.data) == intact[-len(jpeg.data):]
    assert f"{cache}: train.data.npy: crc32" in capsys.readouterr().err


def test_a_jpeg_copy_whose_record_lacks_a_checksum_is_encoded_again(tmp_path, small, capsys):
    folder = write_set(tmp_path)
    cache = sources.prepare_jpeg(folder, 90)
    meta = json.loads((cache / "JPEG.json").read_text())
    del meta["crc32"]["test.data.npy"]
    (cache / "JPEG.json").write_text(json.dumps(meta))
    flip_byte(cache / "test.data.npy")   # unrecorded, so only the missing record can tell
    jpeg = sources.load_jpeg(folder, "test", 90)
    assert f"{cache}: no crc32 recorded for test.data.npy" in capsys.readouterr().err
    assert bytes(jpeg[0]) == sources.encode_jpeg(sources.load_split(folder, "test")[0][0], 90)


def test_two_cifar10_folders_under_one_cache_root_keep_their_own_copies(tmp_path, small, capsys):
    cache = tmp_path / "cache"
    one, two = write_set(tmp_path / "one", seed=1), write_set(tmp_path / "two", seed=2)
    assert sources.prepare_jpeg(one, 90, cache_root=cache) != sources.prepare_jpeg(two, 90, cache_root=cache)
    capsys.readouterr()
    for folder in (one, two):   # neither replaced the other's copy
        images, _ = sources.load_split(folder, "test", cache)
        assert bytes(sources.load_jpeg(folder, "test", 90, cache_root=cache)[0]) == sources.encode_jpeg(images[0], 90)
    assert "encoding it again" not in capsys.readouterr().err


def test_the_jpeg_copy_is_encoded_again_when_its_source_changed(tmp_path, small):
    folder = write_set(tmp_path, seed=1)
    sources.prepare_jpeg(folder, 90)
    new_images, _ = sources.synthesize(sources.layout.PER_FILE, seed=2, stream=1)
    sources.write_split(folder, "test", new_images, np.zeros(len(new_images), np.int64))
    jpeg = sources.load_jpeg(folder, "test", 90)
    assert [bytes(jpeg[i]) for i in range(len(jpeg))] == [sources.encode_jpeg(im, 90) for im in new_images]


def test_the_tree_copy_is_written_again_when_the_packed_copy_changed(tmp_path, small):
    folder = write_set(tmp_path, seed=1)
    sources.prepare_jpeg_tree(folder, 90)
    new_images, labels = sources.synthesize(sources.layout.PER_FILE, seed=2, stream=1)
    sources.write_split(folder, "test", new_images, labels)
    tree = sources.prepare_jpeg_tree(folder, 90)
    assert [(tree / sources.tree_path("test", i, label)).read_bytes() for i, label in enumerate(labels)] == \
        [sources.encode_jpeg(im, 90) for im in new_images]


def test_with_a_cache_root_the_data_folder_is_not_written(tmp_path, small, capsys):
    data, cache = tmp_path / "data", tmp_path / "cache"
    folder = write_set(data)
    before = files_under(data)
    assert cli.main(["prepare", "--data-root", str(data), "--source", "cifar10", "--cache-dir", str(cache)]) == 0
    assert "checksums match the crc32s recorded when written" in capsys.readouterr().out
    [copy] = cache.glob("cifar10-*/jpeg-q90/JPEG.json")
    config = PipelineConfig(data_root=str(data), source="cifar10", encoding="jpeg", cache_root=str(cache))
    assert len(sources.open_split(config).jpeg) == 5 * sources.layout.PER_FILE
    sources.prepare_jpeg_tree(folder, 90, cache_root=cache)
    assert (copy.parent.parent / "jpeg-q90-files" / "TREE.json").is_file()
    assert files_under(data) == before
    # No synthetic set under the data root: it is generated under the cache root.
    config = config.replace(source="synthetic")
    assert sources.resolve_folder(config)[1] == cache / "synthetic-seed0" / sources.BATCH_FOLDER
    assert sources.open_split(config).jpeg is not None
    assert (cache / "synthetic-seed0" / "jpeg-q90" / "JPEG.json").is_file() and files_under(data) == before


def test_cache_root_is_none_or_a_path(monkeypatch):
    monkeypatch.delenv("PIPEBENCH_CACHE", raising=False)
    assert PipelineConfig().cache_root is None
    monkeypatch.setenv("PIPEBENCH_CACHE", "/somewhere")
    assert PipelineConfig().cache_root == "/somewhere"
    for bad in ("", 3):
        with pytest.raises(ValueError, match="PipelineConfig.cache_root="):
            PipelineConfig(cache_root=bad)


@pytest.mark.parametrize("command,source,what,where", [
    (["prepare"], "cifar10", "the JPEG copy", "jpeg-q90"),
    (["prepare"], "synthetic", "the synthetic set", f"synthetic-seed0/{sources.BATCH_FOLDER}"),
    (["compare", "--device", "cpu", "--no-isolate", "--modes", "loader", "--pipelines", "dataloader",
      "--encoding", "jpeg"], "cifar10", "the JPEG copy", "jpeg-q90"),
    (["stability", "--device", "cpu", "--pipelines", "resident", "--epochs", "4"], "synthetic",
     "the synthetic set", f"synthetic-seed0/{sources.BATCH_FOLDER}"),
])
def test_an_unwritable_data_folder_is_one_line_naming_it(tmp_path, small, monkeypatch, command, source, what, where):
    """Simulated (tests run as root, which chmod does not stop): no folder can be made under data/."""
    data = tmp_path / "data"
    write_set(data) if source == "cifar10" else data.mkdir()
    real = tempfile.mkdtemp

    def denied(*args, dir=None, **kwargs):
        if dir is not None and Path(dir).is_relative_to(data):
            raise PermissionError(errno.EACCES, "Permission denied", str(dir))
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkdtemp", denied)
    out = ["--out", str(tmp_path / "run")] if command[0] != "prepare" else []
    with pytest.raises(SystemExit) as caught:
        cli.main([*command, *out, "--data-root", str(data), "--source", source])
    assert str(caught.value) == (f"pipebench {command[0]}: cannot write {what} to {data / where} (Permission "
                                 "denied): pass --cache-dir DIR or set $PIPEBENCH_CACHE to a writable folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_data_folder_is_one_line_and_a_cache_root_gets_round_it(tmp_path, small):
    data = tmp_path / "data"
    folder = write_set(data)
    data.chmod(0o555)
    try:
        with pytest.raises(sources.CacheWriteError) as caught:
            sources.prepare_jpeg(folder, 90)
        assert str(caught.value) == (f"cannot write the JPEG copy to {data / 'jpeg-q90'} (Permission denied): "
                                     "pass --cache-dir DIR or set $PIPEBENCH_CACHE to a writable folder")
        assert sources.prepare_jpeg(folder, 90, cache_root=tmp_path / "cache").is_dir()
    finally:
        data.chmod(0o755)


# --- what a split says it holds; splits of your own arrays --------------------------------------

def test_a_split_is_labelled_with_what_was_read(tmp_path, small, monkeypatch):
    """source="cifar10" reads <data_root>/cifar-10-batches-py whatever it holds; its label says what."""
    def label(folder: Path, **changes) -> str:
        config = PipelineConfig(data_root=str(folder.parent), source="cifar10", split="test", **changes)
        return sources.open_split(config).source

    synthetic = sources.ensure_synthetic(tmp_path / "synthetic", seed=3)
    assert label(synthetic) == "synthetic-seed3" and label(synthetic, image_size=64) == "synthetic-seed3@64px"
    assert label(write_set(tmp_path / "own")) == "custom"
    genuine = tmp_path / "genuine" / sources.BATCH_FOLDER
    genuine.mkdir(parents=True)
    rng = np.random.default_rng(4)
    (genuine / "test_batch").write_bytes(py2_pickle(rng.integers(0, 256, (100, 3072), dtype=np.uint8),
                                                    rng.integers(0, 10, 100).tolist()))
    with pytest.raises(sources.CifarFormatError, match="differs from the genuine file's"):
        label(genuine)
    monkeypatch.setitem(sources.CIFAR10_MD5, "test_batch", sources.checksum(genuine / "test_batch", "md5"))
    assert label(genuine) == "cifar10"


def test_a_split_written_again_in_place_is_read_as_it_now_is(tmp_path, small):
    """open_split reads a split's files as they are now, also under the tests' read-once cache
    (tests/conftest.py `load_split_once`, which keeps a split whose files were written long enough ago),
    also where a file's mtime was set back to what it was."""
    def settled(seconds_ago: float) -> None:   # written that long ago: a split the cache keeps
        for path in folder.iterdir():
            os.utime(path, (time.time() - seconds_ago,) * 2)

    assert sources.split.load_split.__name__ == "load_split_once"   # the cache this checks too
    config = PipelineConfig(data_root=str(tmp_path), source="cifar10", split="test")
    folder = write_set(tmp_path, seed=1)
    settled(7200)
    before = sources.open_split(config).images
    assert np.array_equal(sources.open_split(config).images, before)
    write_set(tmp_path, seed=2)   # in place: the same files, sizes and inodes
    just_written = sources.open_split(config).images
    assert not np.array_equal(just_written, before)
    settled(3600)
    assert np.array_equal(sources.open_split(config).images, just_written)
    write_set(tmp_path, seed=3)
    settled(1800)
    assert not np.array_equal(sources.open_split(config).images, just_written)
    with pytest.MonkeyPatch.context() as patch:   # read as batches of another size: refused, as always
        patch.setattr(sources.layout, "PER_FILE", 50)
        with pytest.raises(sources.CifarFormatError, match=r"expected \(50, 3072\) uint8"):
            sources.open_split(config)
    # a byte changed in place with the file's times set back exactly: only its ctime tells, and it is read again
    batch = folder / sources.layout.split_files("test")[0]
    times = batch.stat()
    time.sleep(0.05)   # past the clock tick a file's ctime is stamped with
    flip_byte(batch)
    os.utime(batch, ns=(times.st_atime_ns, times.st_mtime_ns))
    with pytest.raises(sources.CifarFormatError, match="checksum does not match the one recorded"):
        sources.open_split(config)


@pytest.mark.parametrize("images,labels,message", [
    (np.zeros((4, 3, 32, 32), np.uint8), np.zeros(4, int),
     r"images have shape \(4, 3, 32, 32\) and dtype uint8: expected N x H x W x 3 uint8 \(NHWC, channels last\)"),
    (np.zeros((4, 32, 32, 3), np.float32), np.zeros(4, int), r"images have shape \(4, 32, 32, 3\) and dtype float32"),
    (np.zeros((4, 48, 48, 3), np.uint8), np.zeros(4, int), r"H == W a multiple of 32 from 32 to 512$"),
    (np.zeros((4, 64, 32, 3), np.uint8), np.zeros(4, int), r"images have shape \(4, 64, 32, 3\)"),
    (np.zeros((0, 32, 32, 3), np.uint8), np.zeros(0, int), r"images have shape \(0, 32, 32, 3\)"),
    (np.zeros((4, 32, 32, 3), np.uint8), np.zeros(3, int), r"labels have shape \(3,\) and dtype int64: expected 4 integers"),
    (np.zeros((4, 32, 32, 3), np.uint8), np.zeros(4), r"labels have shape \(4,\) and dtype float64"),
    (np.zeros((4, 32, 32, 3), np.uint8), np.array([0, 1, 2, 10]), r"labels span 0\.\.10: expected 0\.\.9"),
])
def test_a_split_of_arrays_refuses_another_layout_in_one_line(images, labels, message):
    with pytest.raises(ValueError, match=message) as caught:
        sources.Split.from_arrays(images, labels)
    assert "\n" not in str(caught.value)


def test_a_split_of_arrays_keeps_its_pixels_and_split():
    images = np.random.default_rng(0).integers(0, 256, (5, 64, 64, 3), dtype=np.uint8)
    data = sources.Split.from_arrays(images, np.array([0, 9, 3, 3, 1], np.uint8), split="test")
    assert np.array_equal(data.images, images) and data.labels.dtype == np.int64 and data.labels.tolist() == [0, 9, 3, 3, 1]
    assert (len(data), data.split, data.source, data.folder, data.jpeg) == (5, "test", "arrays", None, None)
    with pytest.raises(ValueError, match=r"split='val': expected one of \('train', 'test'\)"):
        sources.Split.from_arrays(images, np.zeros(5, int), split="val")


# --- folders pipebench writes ---------------------------------------------------------------------

def test_published_folders_have_the_mode_the_umask_gives(tmp_path, small, monkeypatch):
    mask = os.umask(0o022)
    os.umask(mask)
    folder = sources.ensure_synthetic(tmp_path / "data", seed=0)
    tree = sources.prepare_jpeg_tree(folder, 90)
    fake_download(monkeypatch, {f"{sources.BATCH_FOLDER}/test_batch": b"1"})
    download = sources.download_cifar10(tmp_path / "download")
    for path in (folder, folder.parent, tree.with_name("jpeg-q90"), tree, tree / "train" / "3", download):
        assert oct(path.stat().st_mode & 0o777) == oct(0o777 & ~mask), path


def test_generating_the_synthetic_set_says_where_once(tmp_path, small, capsys):
    folder = sources.ensure_synthetic(tmp_path, seed=0)
    assert capsys.readouterr().err == (f"generating the synthetic CIFAR-10 set (once) in {folder.parent}; set "
                                       "$PIPEBENCH_DATA or pass --data-root to put it elsewhere\n")
    sources.ensure_synthetic(tmp_path, seed=0)
    assert capsys.readouterr().err == ""
    folder = sources.ensure_synthetic(tmp_path / "empty", seed=0, cache_root=tmp_path / "cache")
    assert folder == tmp_path / "cache" / "synthetic-seed0" / sources.BATCH_FOLDER
    assert "set $PIPEBENCH_CACHE or pass --cache-dir to put it elsewhere" in capsys.readouterr().err


@pytest.mark.parametrize("size", [32, 64, 96, 224])
def test_encoding_in_parallel_gives_the_bytes_of_encoding_one_after_another(size):
    images, _ = sources.synthesize(70, seed=1)   # more than one chunk of 64
    assert sources.encode_jpegs(images, 90, size) == [sources.encode_jpeg(sources.upscale(image[None], size)[0], 90)
                                                     for image in images]


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"),
                                   OSError("Not enough free space to write 3072 bytes")])
def test_a_full_disk_while_writing_names_the_folder_and_leaves_nothing(tmp_path, error):
    """`prepare` on a full disk said "[Errno 28] No space left on device" (numpy: "Not enough free
    space to write ... bytes") without naming the folder."""
    from pipelines.sources.cache import CacheWriteError, writing
    final = tmp_path / "data" / "set"
    with pytest.raises(CacheWriteError) as caught:
        with writing(final, "the photo set"):
            raise error
    said = str(caught.value)
    assert said.startswith(f"cannot write the photo set to {final}: its disk is full (") and "\n" not in said
    assert not final.exists() and list((tmp_path / "data").iterdir()) == []
