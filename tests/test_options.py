"""Pipelines describe their own knobs (`pipelines.options`): a new pipeline with a knob of its own,
in a module outside the project and one registry line, gets its flag, its plan variants, its results
column and its report label without a change to `bench/`."""
from __future__ import annotations

import textwrap

import pandas as pd
import pytest

import pipelines
from bench import cli, results
from bench.cli.parser import build_parser
from bench.running import plan
from pipelines import PipelineConfig

TOY = '''
    """A toy pipeline: `resident` with one knob of its own."""
    from pipelines.options import Option
    from pipelines.resident import ResidentPipeline

    KNOB = Option("toy_knob", 3, "how toy the toy is", low=1, high=9, listed=True)


    class ToyPipeline(ResidentPipeline):
        name = "toy"
        options = ResidentPipeline.options + (KNOB,)
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    (tmp_path / "toy_pipeline.py").write_text(textwrap.dedent(TOY))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(pipelines._REGISTRY, "toy", ("toy_pipeline", "ToyPipeline"))   # the one registry line
    return "toy"


def test_a_toy_pipelines_knob_is_a_config_keyword_with_its_bounds(toy):
    assert PipelineConfig().toy_knob == 3
    assert PipelineConfig(toy_knob=5).replace(batch_size=8).toy_knob == 5
    with pytest.raises(ValueError, match=r"^PipelineConfig\.toy_knob=10: expected an integer from 1 to 9$"):
        PipelineConfig(toy_knob=10)
    assert pipelines.reads("toy") == ("prefetch_depth", "batches_per_launch", "toy_knob")


def test_a_toy_pipelines_knob_appears_in_help_plan_columns_and_report(toy, tmp_path, synthetic_root, capsys):
    help_text = build_parser()._subparsers._group_actions[0].choices["sweep"].format_help()
    assert "--toy-knob" in help_text and "toy: how toy the toy is (default: 3)" in " ".join(help_text.split())
    assert "toy_knob" in results.config_columns()

    out = tmp_path / "run"
    cli.main(["sweep", "--data-root", str(synthetic_root), "--max-samples", "256", "--steps", "2", "--warmup", "1",
              "--repeats", "1", "--processes", "1", "--no-isolate", "--pipelines", "toy,resident", "--modes", "loader",
              "--batch-size", "32", "--toy-knob", "2,5", "--out", str(out)])
    df = pd.read_csv(out / "results.csv")
    ok = df[df.status == "ok"]
    # two variants of the toy, one of the pipeline that does not read the knob (recorded empty)
    assert sorted(ok[ok.pipeline == "toy"].toy_knob.unique()) == [2, 5]
    assert ok[ok.pipeline == "resident"].toy_knob.isna().all() and len(ok[ok.pipeline == "resident"]) == 1
    assert "toy_knob" in df.columns

    cli.main(["report", str(out), "--out", str(out)])
    report = (out / "REPORT.md").read_text()
    assert "toy (toy_knob=2)" in report and "toy (toy_knob=5)" in report
    assert "resident (toy_knob" not in report
    capsys.readouterr()


def test_two_pipelines_declaring_one_knob_differently_is_an_error(toy, tmp_path, monkeypatch):
    (tmp_path / "toy_clash.py").write_text(textwrap.dedent('''
        from pipelines.options import Option
        from pipelines.resident import ResidentPipeline

        class Clash(ResidentPipeline):
            name = "clash"
            options = (Option("toy_knob", 4, "another default"),)
    '''))
    monkeypatch.setitem(pipelines._REGISTRY, "clash", ("toy_clash", "Clash"))
    with pytest.raises(TypeError, match="'clash' declares option 'toy_knob' unlike another pipeline"):
        pipelines.declared_options()


def test_every_pipeline_reads_only_declared_knobs_and_the_plan_keeps_the_others_at_their_defaults():
    declared = pipelines.declared_options()
    for name in pipelines.names():
        assert set(pipelines.reads(name)) <= set(declared)
    assert set(plan.knobs()) == set(declared) - {"num_workers"}
