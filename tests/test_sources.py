"""Sources: the safe CIFAR-10 loader, the synthetic set and the JPEG copy."""
from __future__ import annotations

import io
import os
import pickle
import struct

import numpy as np
import pytest
import torch
from PIL import Image

from pipelines import sources


def py2_pickle(data: np.ndarray, labels: list[int]) -> bytes:
    """A batch as Python 2's cPickle (protocol 2) writes it: str keys as SHORT_BINSTRING and the
    array through numpy.core.multiarray._reconstruct with a BINSTRING payload."""
    def s(text) -> bytes:
        b = text if isinstance(text, bytes) else text.encode("latin1")
        return b"U" + bytes([len(b)]) + b if len(b) < 256 else b"T" + struct.pack("<i", len(b)) + b

    def i(v: int) -> bytes:
        return b"K" + bytes([v]) if v < 256 else b"J" + struct.pack("<i", v)

    dtype = b"cnumpy\ndtype\n" + s("u1") + i(0) + i(1) + b"\x87R" + \
        b"(" + i(3) + s("|") + b"NNN" + b"J\xff\xff\xff\xff" * 2 + i(0) + b"tb"
    array = (b"cnumpy.core.multiarray\n_reconstruct\n" + b"cnumpy\nndarray\n" + i(0) + b"\x85" + s("b")
             + b"\x87R" + b"(" + i(1) + i(data.shape[0]) + i(data.shape[1]) + b"\x86" + dtype
             + b"\x89" + s(data.tobytes()) + b"tb")
    items = (s("batch_label") + s("training batch 1 of 5") + s("labels")
             + b"](" + b"".join(i(v) for v in labels) + b"e" + s("data") + array)
    return b"\x80\x02}(" + items + b"u."


def valid_batch(rng) -> tuple[np.ndarray, list[int]]:
    return rng.integers(0, 256, (10_000, 3072), dtype=np.uint8), rng.integers(0, 10, 10_000).tolist()


def test_loads_python2_written_batch(tmp_path):
    data, labels = valid_batch(np.random.default_rng(0))
    path = tmp_path / "data_batch_1"
    path.write_bytes(py2_pickle(data, labels))
    got_data, got_labels = sources.load_batch(path)
    assert np.array_equal(got_data, data) and got_labels.tolist() == labels


def test_loads_python3_written_split_round_trip(tmp_path):
    images, labels = sources.synthesize(10_000, seed=3)
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


def test_missing_real_data_says_how_to_get_it(tmp_path):
    from pipelines.config import PipelineConfig
    with pytest.raises(FileNotFoundError, match="pipebench download"):
        sources.resolve_folder(PipelineConfig(data_root=str(tmp_path), source="cifar10"))


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


def test_synthetic_is_learnable_within_one_epoch():
    torch.manual_seed(0)
    train_x, train_y = sources.synthesize(6000, seed=0, stream=0)
    test_x, test_y = sources.synthesize(1000, seed=0, stream=1)

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
