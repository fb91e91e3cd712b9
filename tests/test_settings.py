"""The harness's settings are declared once (`bench.results.settings`): a toy setting added to the
declarations in this test alone, as tests/test_options.py adds a toy pipeline, becomes a flag, a
`Sweep` attribute, a value every configuration carries, a results column, part of a shared
process's cell and of the report's cell key, and a report label, without a change to another file."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from bench import cli, results
from bench.cli.parser import build_parser
from bench.measuring.spec import RunSpec
from bench.report import analysis
from bench.results import settings
from bench.running import plan
from pipelines import PipelineConfig

TOY = settings.Setting("toy_level", "how toy the run is (default: %(default)s)", settings.TIMING,
                       type=settings.positive(int), default=3, cell=True, key=99, variant=True)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(settings, "SETTINGS", [*settings.SETTINGS, TOY])   # the one declaration
    return TOY


def sweep_help() -> str:
    return " ".join(build_parser()._subparsers._group_actions[0].choices["sweep"].format_help().split())


def test_the_declarations_are_every_layer_s_names():
    """The columns, the cell members and the report's key, as the layers had them written by hand."""
    assert settings.columns() == [
        "pipeline", "mode", "stage", "model", "image_size", "batch_size", "cpus", "dtype", "channels_last", "augment",
        "split", "last_batch", "max_samples", "seed", "world_size", "rank", "parallel", "step", "sync_every",
        "busy_levels", "payload", "train_epochs", "source", "data_seed", "requested_steps", "min_window_s", "warmup"]
    assert set(settings.cell()) == {"model", "step", "sync_every", "cpus", "warmup", "repeats", "requested_steps",
                                    "min_window_s"}
    assert analysis.key() == ["mode", "stage", "payload", "pipeline", "model", "step", "sync_every", "image_size",
                              "batch_size", "dtype", "cpus", "busy_ms"]
    assert settings.carried() == []   # every built-in setting has a field, or the plan expands it
    sweep = plan.sweep(cli.build_parser().parse_args(["sweep"]))
    for s in settings.SETTINGS:   # a setting with a flag is stored under its name
        if s.flag is not None:
            assert hasattr(sweep, s.name)


def test_a_toy_setting_is_a_flag_a_sweep_value_and_a_value_of_every_configuration(toy):
    assert "--toy-level TOY_LEVEL how toy the run is (default: 3)" in sweep_help()
    options = build_parser().parse_args(["compare", "--device", "cpu", "--cpus", "1", "--pipelines", "resident",
                                         "--modes", "loader,model,e2e", "--models", "resnet9-w0.25",
                                         "--toy-level", "5"])
    sweep = plan.sweep(options)
    assert sweep.toy_level == 5
    specs = plan.grid(sweep, torch.device("cpu"))
    assert specs and all(settings.value(s, "toy_level") == 5 for s in specs)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["compare", "--toy-level", "0"])


def test_a_toy_setting_is_a_results_column_and_a_member_of_the_cell(toy):
    assert "toy_level" in results.config_columns()
    config = PipelineConfig(device="cpu")

    def spec(pipeline: str, level: int) -> RunSpec:
        mode = "model" if pipeline == "none" else "e2e"
        return RunSpec(pipeline, mode, "resnet9-w0.25", config, requested_steps=2, repeats=1, share=True,
                       more=(("toy_level", level),))

    assert results.failed_row(spec("resident", 7), "skipped", "why")["toy_level"] == 7
    assert results.config_key(spec("resident", 7)) != results.config_key(spec("resident", 8))
    together = plan.shared([spec("none", 1), spec("resident", 1)])
    apart = plan.shared([spec("none", 1), spec("resident", 2)])
    assert [len(g) for g in together] == [2] and [len(g) for g in apart] == [1, 1]


def test_a_toy_setting_is_in_the_report_s_key_and_names_variants(toy, tmp_path, synthetic_root, capsys):
    assert analysis.key()[-2:] == ["toy_level", "busy_ms"] and "toy_level" in analysis.variant_options()[0]
    out = tmp_path / "run"
    for level in ("2", "5"):   # two runs into one folder: the rows of two values of the setting
        assert cli.main(["sweep", "--data-root", str(synthetic_root), "--max-samples", "256", "--steps", "2",
                         "--warmup", "1", "--repeats", "1", "--processes", "1", "--no-isolate", "--pipelines",
                         "resident", "--modes", "loader", "--batch-size", "32", "--toy-level", level,
                         "--out", str(out)]) == 0
    rows = pd.read_csv(out / "results.csv")
    assert sorted(rows[rows.status == "ok"].toy_level) == [2, 5]
    cli.main(["report", str(out), "--out", str(out)])
    report = (out / "REPORT.md").read_text()
    assert "resident (toy_level=2)" in report and "resident (toy_level=5)" in report
    capsys.readouterr()
