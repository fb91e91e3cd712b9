"""A JPEG in the packed copy (or DALI's file tree) that cannot be decoded is named, on one line:
its sample index and split, not a decoder's batch-wide error (issue 13). CPU only: DALI runs its
graph CPU-only, tvjpeg decodes with libjpeg-turbo.

Corruptions: a file cut short inside its entropy-coded data (DALI CPU: "Failed to decode sample
#k"; torchvision: "Image is incomplete or truncated"), and a file that is not a JPEG at all
(DALI: "nvImageCodec failure: '#4'", the message of the issue), and a frame header whose height
was changed (it decodes, to another size: DALI's "Assert on IsDenseTensor() failed"). Garbage written over the
entropy-coded data is not tested: libjpeg-turbo, DALI's CPU decoder and nvJPEG mostly decode it to
wrong pixels with a warning only, so there is no error to name (see `jpeg_errors.undecodable_jpeg`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench import results
from bench.measuring.spec import RunSpec
from pipelines import sources
from pipelines.epochs import epoch_batches
from pipelines.jpeg_errors import undecodable_jpeg
from pipelines.config import PipelineConfig

from conftest import indexed_images

N, BATCH, EPOCH = 256, 16, 1


def _config(**changes) -> PipelineConfig:
    # One batch per DALI batch: with DALI 2.4 CPU-only, a decoding error while larger DALI batches are
    # in flight crashed the process now and then (a DALI buffer freed under its consumer; 1 run in 3
    # with 4 batches, none in 14 with 1), so the error path is tested where DALI survives it.
    return PipelineConfig(device="cpu", encoding="jpeg", batch_size=BATCH, num_workers=1, dali_threads=1,
                          dali_queue_depth=2, dali_batch_multiple=1, **changes)


def _bad_sample(config: PipelineConfig) -> int:
    """A sample in the middle of epoch EPOCH, several batches past DALI's prefetch of its start."""
    return int(epoch_batches(N, config, EPOCH)[9][5])


def _corrupt(good: bytes, how: str) -> bytes:
    if how == "truncated":   # cut in the middle of the entropy-coded data
        sos = good.index(b"\xff\xda")
        start = sos + 2 + int.from_bytes(good[sos + 2:sos + 4], "big")
        return good[:(start + len(good)) // 2]
    if how == "header":   # the frame header's height changed: it decodes, to 40 x 32 px
        sof = good.index(b"\xff\xc0")
        return good[:sof + 5] + (40).to_bytes(2, "big") + good[sof + 7:]
    return b"this is not a JPEG file at all"


def _split(tmp_path: Path, bad: int, how: str) -> sources.Split:
    images, labels = indexed_images(0, N)
    files = [sources.encode_jpeg(image, 90) for image in images]
    files[bad] = _corrupt(files[bad], how)
    offsets = np.zeros(N + 1, np.int64)
    np.cumsum([len(f) for f in files], out=offsets[1:])
    jpeg = sources.JpegSet(np.frombuffer(b"".join(files), np.uint8).copy(), offsets, 90)
    return sources.Split(images, labels.astype(np.int64), "test-corrupt", tmp_path / sources.BATCH_FOLDER, jpeg)


def _file_tree(monkeypatch, tmp_path: Path, data: sources.Split) -> None:
    """The split's files as DALI's readers.file reads them, where the pipeline looks for them."""
    root = tmp_path / "tree"
    for i, label in enumerate(data.labels):
        path = root / sources.tree_path("train", i, label)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.jpeg[i])
    monkeypatch.setattr(sources, "prepare_jpeg_tree", lambda *args, **kwargs: root)


def _error_of_an_epoch(make) -> str:
    """The ValueError of building `make()` or of running its epoch EPOCH."""
    with pytest.raises(ValueError) as caught:
        with make() as pipeline:
            pipeline.set_epoch(EPOCH)
            for _ in pipeline:
                pass
    return str(caught.value)


_TREE_REMEDY = "delete {} (it is written again when next used)"   # the fix for a file of DALI's tree


def _assert_names(message: str, bad: int, copy: str = "JPEG copy",
                  remedy: str = "rebuild it with `pipebench prepare`") -> None:
    assert message.startswith(f"sample {bad} of the train {copy}"), message
    assert "cannot be decoded" in message and message.endswith(remedy), message
    assert "\n" not in message, message


@pytest.mark.parametrize("how", ["truncated", "not-a-jpeg", "header"])
@pytest.mark.parametrize("name", ["tvjpeg", "torchcodec"])
def test_tvjpeg_names_the_sample_it_cannot_decode(tmp_path, how, name):
    """Decoded on its producer thread, the error is raised by the next() of the failing batch (the
    batches before it arrive) and the thread ends."""
    import threading
    import pipelines
    if pipelines.available()[name]:
        pytest.skip(pipelines.available()[name])
    config = _config()
    bad = _bad_sample(config)
    pipeline = pipelines.build(name, config, data=_split(tmp_path, bad, how))
    taken = []
    pipeline.set_epoch(EPOCH)
    with pipeline, pytest.raises(ValueError) as caught:
        for _, labels in pipeline:
            taken.append(labels)
    _assert_names(str(caught.value), bad)
    assert len(taken) == 9   # the bad sample's batch is the tenth
    assert not any(t.name == f"{name}-producer" for t in threading.enumerate())


@pytest.mark.parametrize("how", ["truncated", "not-a-jpeg", "header"])
@pytest.mark.parametrize("reader", ["external", "file"])
def test_dali_names_the_sample_it_cannot_decode(tmp_path, monkeypatch, how, reader):
    pytest.importorskip("nvidia.dali")
    from pipelines.dali import DaliPipeline
    config = _config(dali_reader=reader)
    bad = _bad_sample(config)
    data = _split(tmp_path, bad, how)
    if reader == "file":
        _file_tree(monkeypatch, tmp_path, data)
    path = tmp_path / "tree" / sources.tree_path("train", bad, data.labels[bad])
    if reader == "file":
        _assert_names(_error_of_an_epoch(lambda: DaliPipeline(config, data=data)), bad, f"JPEG file tree ({path})",
                      _TREE_REMEDY.format(tmp_path / "tree"))
    else:
        _assert_names(_error_of_an_epoch(lambda: DaliPipeline(config, data=data)), bad)


@pytest.mark.parametrize("how", ["truncated", "not-a-jpeg"])
def test_dali_is_never_handed_a_file_that_is_not_a_whole_jpeg(tmp_path, monkeypatch, how):
    """Several batches per DALI batch (the default), where DALI 2.4 crashed now and then on such a
    file: it is named before any DALI pipeline is built."""
    pytest.importorskip("nvidia.dali")
    from pipelines.dali import DaliPipeline
    config = _config().replace(dali_batch_multiple=4)
    bad = _bad_sample(config)
    monkeypatch.setattr(DaliPipeline, "_start", lambda *args, **kwargs: pytest.fail("DALI was started"))
    with pytest.raises(ValueError) as caught:
        DaliPipeline(config, data=_split(tmp_path, bad, how))
    _assert_names(str(caught.value), bad)


def test_bytes_after_a_jpeg_s_end_marker_are_no_reason_to_refuse_it(tmp_path):
    """Some cameras append data after the end-of-image marker: such a file is a candidate
    (`unframed`), decodes on the CPU, and is not refused."""
    from pipelines.jpeg_errors import refuse_unframed, unframed
    data = _split(tmp_path, 3, "not-a-jpeg")
    files = [bytes(data.jpeg[i]) for i in range(N)]
    files[3] = bytes(data.jpeg[4]) + b"trailing bytes a camera appended"
    offsets = np.zeros(N + 1, np.int64)
    np.cumsum([len(f) for f in files], out=offsets[1:])
    jpeg = sources.JpegSet(np.frombuffer(b"".join(files), np.uint8).copy(), offsets, 90)
    assert list(unframed(jpeg)) == [3]
    refuse_unframed(jpeg, "train", 32)   # no error


def test_dali_names_a_file_missing_from_its_tree(tmp_path, monkeypatch):
    pytest.importorskip("nvidia.dali")
    from pipelines.dali import DaliPipeline
    config = _config(dali_reader="file")
    bad = _bad_sample(config)
    data = _split(tmp_path, bad, "truncated")
    _file_tree(monkeypatch, tmp_path, data)
    path = tmp_path / "tree" / sources.tree_path("train", bad, data.labels[bad])
    path.unlink()
    message = _error_of_an_epoch(lambda: DaliPipeline(config, data=data))
    _assert_names(message, bad, f"JPEG file tree ({path})",
                  _TREE_REMEDY.format(tmp_path / "tree"))
    assert "No such file or directory" in message


def test_dali_names_the_sample_when_it_finishes_an_abandoned_epoch(tmp_path):
    pytest.importorskip("nvidia.dali")
    from pipelines.dali import DaliPipeline
    config = _config()
    bad = _bad_sample(config)
    with DaliPipeline(config, data=_split(tmp_path, bad, "header")) as pipeline:   # one DALI decodes
        pipeline.set_epoch(EPOCH)
        next(iter(pipeline))   # left after its first batch: the next epoch first runs this one out
        pipeline.set_epoch(EPOCH + 1)
        with pytest.raises(ValueError) as caught:
            next(iter(pipeline))
    _assert_names(str(caught.value), bad)


def test_the_check_names_the_first_file_that_does_not_decode(tmp_path):
    data = _split(tmp_path, 7, "truncated")
    assert undecodable_jpeg(data.jpeg, range(7)) is None
    assert undecodable_jpeg(data.jpeg, [3, 9, 7, 8]) == (7, "Image is incomplete or truncated")
    index, reason = undecodable_jpeg([b"junk"], [0])
    assert index == 0 and "\n" not in reason and "decode_jpeg.cpp" not in reason


WORKER_ERROR = (
    "ValueError: Caught ValueError in DataLoader worker process 0.\n"
    "Original Traceback (most recent call last):\n"
    '  File "/usr/lib/python3/site-packages/torch/utils/data/_utils/worker.py", line 349, in _worker_loop\n'
    "    data = fetcher.fetch(index)  # type: ignore[possibly-undefined]\n"
    '  File "/work/main/pipelines/dataloader.py", line 46, in __getitem__\n'
    '    raise ValueError(f"sample {index} of the JPEG copy cannot be decoded ({e}): rebuild it with "\n'
    "ValueError: sample 3 of the JPEG copy cannot be decoded (image file is truncated): rebuild it with "
    "`pipebench prepare`\n")


def test_an_error_row_keeps_a_worker_error_without_its_traceback(monkeypatch):
    monkeypatch.delenv("PIPEBENCH_DEBUG", raising=False)
    spec = RunSpec(pipeline="dataloader", mode="loader", model="none", config=PipelineConfig(device="cpu"))
    row = results.failed_row(spec, "error", WORKER_ERROR)
    assert row["error"] == ("ValueError: sample 3 of the JPEG copy cannot be decoded (image file is truncated): "
                            "rebuild it with `pipebench prepare` (in DataLoader worker process 0)")
    assert results.failed_row(spec, "error", "RuntimeError: one\ntwo")["error"] == "RuntimeError: one | two"
    monkeypatch.setenv("PIPEBENCH_DEBUG", "1")   # --debug: the whole traceback, on one line
    row = results.failed_row(spec, "error", WORKER_ERROR)
    assert row["error"] == " | ".join(WORKER_ERROR.splitlines()) and "Original Traceback" in row["error"]
