"""The README's own-loop script (issue 66), as a user pastes it into train.py: it runs with every
name in `pipelines.names()` on the CPU, says which data it trained on and prints a line per epoch;
a pipeline that cannot run here ends it with one line saying why (`GROUPS`: which share a process). (It replaces a test that ran the
snippet's body in this process with a patched config: the script's main guard, which `dataloader`
and `timm` need, is exercised only in a process of its own.)"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pipelines

ROOT = Path(__file__).resolve().parents[1]


def script() -> str:
    """The python block of the README's section on one's own training loop."""
    section = (ROOT / "README.md").read_text().split("## Use a pipeline in your own training loop")[1]
    return section.split("```python\n")[1].split("```")[0]


# Pipelines whose workers import the script again (its main guard) run it in a process each; the
# others run it one after another in one process (`DRIVER`), each as `python train.py NAME` runs it.
OWN_PROCESS = ("dataloader", "timm")
SAMPLES = 512   # one batch of the script's 512 an epoch: each epoch still trains and prints its line
GROUPS = [[name] for name in OWN_PROCESS] + [[name for name in pipelines.names() if name not in OWN_PROCESS]]
DRIVER = """
import runpy, sys, traceback
script, samples, *names = sys.argv[1:]
for name in names:
    print(f"=== {name}", flush=True), print(f"=== {name}", file=sys.stderr, flush=True)
    sys.argv = [script, name, samples]
    try:
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exit:   # as the interpreter ends on it: a message is printed, exit code 1
        code = exit.code or 0
        if isinstance(code, str):
            print(code, file=sys.stderr)
            code = 1
    except Exception:   # a traceback, as python train.py NAME prints it
        traceback.print_exc()
        code = 1
    print(f"exit {code}", flush=True)
"""


def sections(text: str) -> dict[str, list[str]]:
    """The driver's output: each name's lines."""
    out: dict[str, list[str]] = {}
    for part in text.split("=== ")[1:]:
        name, *lines = part.splitlines()
        out[name] = lines
    return out


@pytest.mark.parametrize("names", GROUPS, ids=["-".join(g) if len(g) == 1 else "the-others" for g in GROUPS])
def test_the_readme_script_trains_with_every_pipeline_or_says_why_not(names, synthetic_root, tmp_path):
    path = tmp_path / "train.py"
    path.write_text(script())
    env = {**os.environ, "PIPEBENCH_DATA": str(synthetic_root), "CUDA_VISIBLE_DEVICES": ""}
    argv = [str(path), *names, str(SAMPLES)] if len(names) == 1 else ["-c", DRIVER, str(path), str(SAMPLES), *names]
    done = subprocess.run([sys.executable, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    if len(names) == 1:
        outs, errs, codes = {names[0]: done.stdout.splitlines()}, {names[0]: done.stderr}, {names[0]: done.returncode}
    else:
        assert done.returncode == 0, done.stderr[-3000:]
        outs = {name: lines[:-1] for name, lines in sections(done.stdout).items()}
        codes = {name: int(lines[-1].split()[-1]) for name, lines in sections(done.stdout).items()}
        errs = {name: "\n".join(lines) for name, lines in sections(done.stderr).items()}
    assert sorted(outs) == sorted(names)
    for name in names:
        reason = pipelines.available([name])[name] or pipelines.source_refusal(name, pipelines.PipelineConfig())
        if reason:
            assert codes[name] == 1 and errs[name].strip().splitlines() == [f"{name}: {reason}"], errs[name]
            continue
        assert codes[name] == 0, errs[name][-3000:]
        lines = outs[name]
        assert lines[0].startswith(f"{name} on cpu: {SAMPLES} train images, synthetic-seed0 from {synthetic_root}"), lines
        assert [re.sub(r"\d+(?:[.,]\d+)*", "N", line) for line in lines[1:]] == \
            ["epoch N: loss N, N img/s", "epoch N: loss N, N img/s"], (name, lines)


def test_these_tests_are_collected_first(request):
    """This module's tests and any other of tests/conftest.py's FIRST come before every other test selected,
    not near the end of the collection, where a worker ran them alone as the run ended."""
    from conftest import FIRST
    assert Path(__file__).name in FIRST
    first = [item.path.name in FIRST for item in request.session.items]
    assert first == sorted(first, reverse=True)
