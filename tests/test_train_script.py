"""The README's own-loop script (issue 66), as a user pastes it into train.py: it runs with every
name in `pipelines.names()` on the CPU, says which data it trained on and prints a line per epoch;
a pipeline that cannot run here ends it with one line saying why. (It replaces a test that ran the
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


@pytest.mark.parametrize("name", pipelines.names())
def test_the_readme_script_trains_with_every_pipeline_or_says_why_not(name, synthetic_root, tmp_path):
    path = tmp_path / "train.py"
    path.write_text(script())
    env = {**os.environ, "PIPEBENCH_DATA": str(synthetic_root), "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, str(path), name, "1024"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    reason = pipelines.available([name])[name] or pipelines.source_refusal(name, pipelines.PipelineConfig())
    if reason:
        assert done.returncode == 1 and done.stderr.strip().splitlines() == [f"{name}: {reason}"], done.stderr
        return
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{name} on cpu: 1024 train images, synthetic-seed0 from {synthetic_root}"), lines
    assert [re.sub(r"\d+(?:[.,]\d+)*", "N", line) for line in lines[1:]] == \
        ["epoch N: loss N, N img/s", "epoch N: loss N, N img/s"], lines
