"""PipelineConfig validation: bad values raise ValueError naming the field and the value."""
import ast
import dataclasses
from pathlib import Path

import pytest

import pipelines.config
from pipelines import PipelineConfig, build, declared_options
from pipelines.config import MAX_SAMPLES, MAXIMUM, default_data_root


@pytest.mark.parametrize("changes,message", [
    ({"batch_size": 0}, "batch_size=0"),
    ({"batch_size": True}, "batch_size=True"),
    ({"dtype": "float16"}, "dtype='float16'"),
    ({"split": "val"}, "split='val'"),
    ({"last_batch": "fill"}, "last_batch='fill'"),
    ({"source": "imagenet"}, "source='imagenet'"),
    ({"rank": 2, "world_size": 2}, "rank=2"),
    ({"max_samples": 0}, "max_samples=0"),
    ({"device": "tpu"}, "device='tpu'"),
    ({"jpeg_quality": 101}, "jpeg_quality=101"),
    ({"augment": "yes"}, "augment='yes'"),
    ({"prefetch_depth": 0}, "prefetch_depth=0"),
])
def test_bad_values_raise_naming_field_and_value(changes, message):
    with pytest.raises(ValueError, match=f"PipelineConfig.{message}"):
        PipelineConfig(**changes)


def test_config_is_frozen_and_replace_validates():
    config = PipelineConfig()
    with pytest.raises(AttributeError):
        config.batch_size = 1
    assert config.replace(batch_size=7).batch_size == 7
    with pytest.raises(ValueError, match="batch_size=-1"):
        config.replace(batch_size=-1)


def test_unknown_pipeline_names_the_choices():
    with pytest.raises(ValueError, match="unknown pipeline 'fast'.*dataloader"):
        build("fast")


@pytest.mark.parametrize("size", [16, 48, 544, True, 64.0])
def test_image_size_must_be_a_multiple_of_32(size):
    with pytest.raises(ValueError, match=f"PipelineConfig.image_size={size!r}"):
        PipelineConfig(image_size=size)


def test_crop_padding_scales_with_image_size():
    assert [PipelineConfig(image_size=s).pad for s in (32, 64, 224)] == [4, 8, 28]


def test_the_default_data_root_is_one_per_user_whatever_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PIPEBENCH_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert PipelineConfig().data_root == default_data_root() == str(tmp_path / "home" / ".cache" / "pipebench")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")   # ignored, as the XDG spec says
    assert PipelineConfig().data_root == str(tmp_path / "home" / ".cache" / "pipebench")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert PipelineConfig().data_root == str(tmp_path / "xdg" / "pipebench")
    monkeypatch.setenv("PIPEBENCH_DATA", str(tmp_path / "mine"))
    assert PipelineConfig().data_root == str(tmp_path / "mine")


KNOB_BOUNDS = [(name, o.high) for name, o in declared_options().items() if o.kind is int and o.high is not None
               and name not in MAXIMUM]


@pytest.mark.parametrize("name,high", [*MAXIMUM.items(), ("max_samples", MAX_SAMPLES), *KNOB_BOUNDS])
def test_absurd_sizes_are_refused_up_front(name, high):
    PipelineConfig(**{name: high})
    for absurd in (high + 1, 10 ** 30):
        with pytest.raises(ValueError, match=rf"^PipelineConfig\.{name}={absurd}: expected (None or )?an integer "
                                             rf"from [01] to {high}$"):
            PipelineConfig(**{name: absurd})


@pytest.mark.parametrize("load", [float("nan"), float("inf"), -0.5, 1.5, "0.5", True])
def test_the_hardware_decoder_load_is_a_share_from_0_to_1(load):
    with pytest.raises(ValueError, match=rf"^PipelineConfig\.dali_hw_decoder_load={load!r}: expected None or a number from 0 to 1$"):
        PipelineConfig(dali_hw_decoder_load=load)


def test_the_config_reads_no_pipelines_knob():
    """A knob belongs to the pipelines that declare it (`pipelines.options`): config.py reads none
    of those that are no field (as `round_batches` once read `batches_per_launch`)."""
    tree = ast.parse(Path(pipelines.config.__file__).read_text())
    read = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    knobs = set(declared_options()) - {f.name for f in dataclasses.fields(PipelineConfig)}
    assert knobs and read & knobs == set()
