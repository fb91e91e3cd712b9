"""Plans and flags without bounds (issue 54): a plan of millions of values is counted and refused
before anything is built, a deeply nested one and a megabyte value are one short line each, every
duplicate check is linear, and a value of the wrong type names the plan file, its key and what it
expects."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench import cli, values
from bench.cli import measure
from bench.running import plan
from pipelines.options import LINE_LIMIT


def error_of(argv: list[str], capsys) -> tuple[int, str]:
    """The exit code and the whole message of a command that must fail."""
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err + (e.value.code if isinstance(e.value.code, str) else "")
    return (e.value.code if isinstance(e.value.code, int) else 1), err


def plan_file(tmp_path: Path, values) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(values if isinstance(values, str) else json.dumps(values))
    return path


class Counted:
    """A value that counts the comparisons made with it."""
    compared = 0

    def __init__(self, n: int):
        self.n = n

    def __hash__(self):
        return self.n

    def __eq__(self, other):
        Counted.compared += 1
        return self.n == other.n


def test_the_duplicate_check_compares_each_value_about_once():
    """20,000 seeds took 7.5 s (each compared with every one before it), 6 million never ended."""
    Counted.compared = 0
    items = [Counted(n) for n in range(5000)]
    assert values.once("text", items) == items
    assert Counted.compared < len(items)
    with pytest.raises(Exception, match="is given twice"):
        values.once("text", [*items, Counted(7)])


def test_a_plan_of_many_seeds_is_refused_with_its_size_before_anything_runs(tmp_path, capsys):
    path = plan_file(tmp_path, {"seed": list(range(100_000)), "pipelines": ["resident"], "modes": ["loader"],
                                "processes": 2})
    out = tmp_path / "run"
    code, err = error_of(["sweep", "--device", "cpu", "--cpus", "1", "--config", str(path), "--out", str(out)], capsys)
    assert err == (f"pipebench sweep: --config {path} lists 200,000 configuration processes, more than "
                   "--max-configurations 10,000: list fewer values, or pass --max-configurations 200000 to run them all")
    assert code == 1 and not out.exists()


def test_the_plans_size_counts_what_it_runs_and_the_flag_lifts_the_bound():
    argv = ["sweep", "--device", "cpu", "--cpus", "1", "--pipelines", "dataloader,prefetch", "--seed", "0,1",
            "--modes", "loader,model,e2e,stage,copy,train", "--prefetch-augment", "device,host", "--sync-every",
            "0,3", "--models", "resnet9-w0.25,resnet9-w0.5", "--processes", "2"]
    options = cli.build_parser().parse_args(argv)
    specs = cli.specs_for([options], torch.device("cpu"))
    assert plan.size(plan.sweep(options), torch.device("cpu")) == len(specs)   # nothing listed twice: as many as run
    options.max_configurations = len(specs)
    measure.check_size([options], torch.device("cpu"), plan.distributed.World())
    options.max_configurations = len(specs) - 1
    with pytest.raises(ValueError, match=f"the command line lists {len(specs)} configuration processes, more than "
                                         f"--max-configurations {len(specs) - 1}: .* --max-configurations {len(specs)} "):
        measure.check_size([options], torch.device("cpu"), plan.distributed.World())


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"seed": ' + "[" * 100_000 + "]" * 100_000 + "}"])
def test_a_deeply_nested_plan_is_one_line(tmp_path, capsys, text):
    path = plan_file(tmp_path, text)
    code, err = error_of(["sweep", "--config", str(path), "--out", str(tmp_path / "run")], capsys)
    assert err == f"pipebench sweep: --config {path}: nested too deeply for JSON's parser; a plan is an object of " \
                  "option names, its values lists at most"


def test_a_megabyte_model_name_in_a_plan_is_not_echoed_back(tmp_path, capsys):
    path = plan_file(tmp_path, {"models": ["x" * 5_000_000]})
    code, err = error_of(["sweep", "--device", "cpu", "--config", str(path), "--out", str(tmp_path / "run")], capsys)
    assert err.startswith("pipebench sweep: model 'xxxx") and "… (5,000,000 characters): expected resnet18" in err
    assert code == 1 and len(err) < 600 and "\n" not in err.strip()


@pytest.mark.parametrize("argv,shown", [
    (["--batch-size", "7" * 1_000_000], "'7777"), (["--pipelines", "p" * 1_000_000], "'pppp"),
    (["--prefetch-depth", "9" * 1_000_000], "'9999"), (["--source", "s" * 1_000_000], "'ssss"),
    (["unexpected" * 100_000], "unrecognized arguments: unexpected"),
])
def test_a_megabyte_flag_value_is_clipped_in_its_error(tmp_path, capsys, argv, shown):
    code, err = error_of(["compare", *argv], capsys)
    assert code == 2 and shown in err and "characters)" in err
    assert len(err.splitlines()[-1]) <= LINE_LIMIT + 50


@pytest.mark.parametrize("values,message", [
    ({"share_process": "yes"}, 'share_process: expected true or false, got "yes"'),
    ({"isolate": 1}, "isolate: expected true or false, got 1"),
    ({"batch_size": [0]}, "batch_size: '0': expected a comma-separated list of integers from 1 to 65,536"),
    ({"batch_size": True}, "batch_size: expected text or a number, or a list of them, got true"),
    ({"seed": [[1]]}, "seed: expected text or a number, or a list of them, got [[1]]"),
    ({"parallel": "x"}, 'parallel: expected one of none, dp, got "x"'),
    ({"data_seed": "a"}, "data_seed: 'a': expected an integer"),
    ({"modes": ["loader"], "grids": [{"batch_size": [8]}, {"processes": [2, 3]}]},
     "grids[1].processes: '2,3': expected an integer from 1 to 1,000"),
])
def test_a_value_of_the_wrong_type_in_a_plan_names_the_file_the_key_and_what_it_expects(tmp_path, capsys, values,
                                                                                       message):
    path = plan_file(tmp_path, values)
    code, err = error_of(["sweep", "--config", str(path), "--out", str(tmp_path / "run")], capsys)
    assert err == f"pipebench sweep: --config {path}: {message}"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("text,key", [('{"batch_size": 32, "batch_size": 0}', "batch_size"),   # (the last one,
                                      ('{"grids": [{"seed": 1, "cpus": 1, "seed": "x"}]}', "seed")])   # kept, is bad)
def test_a_key_given_twice_in_a_plan_is_refused_not_the_last_one_kept(tmp_path, capsys, text, key):
    path = tmp_path / "plan.json"
    path.write_text(text)
    code, err = error_of(["sweep", "--config", str(path), "--out", str(tmp_path / "run")], capsys)
    assert err == f"pipebench sweep: --config {path}: the key '{key}' is given twice in one object; give each key once"
    assert not (tmp_path / "run").exists()


def test_a_plans_switches_and_none_still_become_their_flags(tmp_path):
    path = plan_file(tmp_path, {"channels_last": False, "share_process": True, "pin_memory": False,
                                "dali_hw_decoder_load": [None, 0.5], "parallel": "dp", "modes": "loader,model"})
    assert cli.config_grids(path, cli.build_parser()) == [[
        "--no-channels-last", "--share-process", "--dali-hw-decoder-load", "None,0.5", "--parallel", "dp",
        "--modes", "loader,model"]]


def test_a_megabyte_path_in_a_plan_is_cut_in_the_error_whatever_raises_it(tmp_path, capsys):
    path = plan_file(tmp_path, {"data_root": str(tmp_path / ("d" * 300_000)), "pipelines": ["resident"],
                                "modes": ["loader"], "processes": 1})
    code, err = error_of(["sweep", "--device", "cpu", "--config", str(path), "--out", str(tmp_path / "run")], capsys)
    line = err.splitlines()[-1]
    assert line.startswith("pipebench sweep: ") and "File name too long" in line
    assert line.endswith(" characters)") and len(line) <= LINE_LIMIT + 40


def test_a_cpu_above_32_px_defaults_to_short_windows_of_a_smaller_model():
    """`compare` on a CPU at 224 px ran 20-50 minutes with 32-px defaults (50-step model-only
    blocks, whole-epoch e2e windows of resnet9-w0.25 at a few img/s): above 32 px a CPU's defaults are
    a smaller model, smaller batches and short fixed windows (`plan.CPU_LARGE`); what is given wins,
    and 32 px keeps its defaults."""
    def specs(*argv):
        options = cli.build_parser().parse_args(["compare", "--device", "cpu", "--cpus", "1", "--pipelines",
                                                 "dataloader", "--processes", "1", *argv])
        return [s for s in cli.specs_for([options], torch.device("cpu")) if s.mode in ("model", "e2e")]
    large = specs("--image-size", "224")
    assert {(s.model, s.config.batch_size, s.requested_steps, s.warmup, s.min_window_s) for s in large} == {
        (plan.CPU_LARGE["model"], plan.CPU_LARGE["batch_size"], plan.CPU_LARGE["steps"], plan.CPU_LARGE["warmup"], 0.0)}
    given = specs("--image-size", "224", "--models", "resnet9-w0.25", "--batch-size", "8", "--min-window-s", "1",
                  "--warmup", "3")
    assert {(s.model, s.config.batch_size, s.requested_steps, s.warmup, s.min_window_s) for s in given} == {
        ("resnet9-w0.25", 8, None, 3, 1.0)}
    small = specs()
    assert {(s.model, s.config.batch_size, s.requested_steps, s.warmup, s.min_window_s) for s in small} == {
        ("resnet9-w0.25", plan.default("batch_size", torch.device("cpu"))[0], None, 2, 0.5)}


def test_a_plan_in_parts_keeps_each_cell_whole_and_every_configuration_once():
    """--part K/N (issue 70): settings x models cut into parts of about equal size; model-only and
    every pipeline of a cell (all its processes) in one part, a setting's loader runs with its first
    model; the parts together are the plan, each configuration once."""
    from bench.measuring.spec import RunSpec
    from pipelines.config import PipelineConfig
    specs = [RunSpec(pipeline, mode, model, PipelineConfig(image_size=32), cpus=cpus, process=process)
             for cpus in (4, 2) for process in range(3)
             for model in ("m1", "m2", "m3")
             for pipeline, mode in (("none", "model"), ("a", "e2e"), ("b", "e2e"))] \
        + [RunSpec(p, "loader", "none", PipelineConfig(image_size=32), cpus=cpus) for cpus in (4, 2) for p in "ab"]
    parts = [plan.part(specs, k, 3) for k in (1, 2, 3)]
    assert sorted(map(id, specs)) == sorted(id(s) for p in parts for s in p)   # each once, none lost
    assert all(abs(len(p) - len(specs) / 3) <= 9 for p in parts), [len(p) for p in parts]   # about equal
    for p in parts:
        cells = {(s.cpus, s.model) for s in p if s.model != "none"}
        for cpus, model in cells:   # whole: every process of model-only and both pipelines
            assert sum(s.cpus == cpus and s.model == model for s in p) == 9
        for s in p:
            if s.mode == "loader":   # beside its setting's first model
                assert (s.cpus, "m1") in cells
    assert plan.part(specs, 1, 1) == specs


@pytest.mark.parametrize("value", ["0/2", "3/2", "1/0", "a/b", "2"])
def test_a_part_that_is_not_k_of_n_is_one_line(tmp_path, capsys, value):
    with pytest.raises(SystemExit) as exit:
        cli.main(["sweep", "--part", value, "--out", str(tmp_path / "run")])
    assert exit.value.code == 2 and "expected K/N, part K of N" in capsys.readouterr().err
