"""A wheel built from the repository works on its own: every module it should ship is in it, and the
`pipebench` command runs from a fresh virtual environment (its dependencies taken from this one)
outside the source tree. Catches a subpackage missing from the packaging, which an editable install
(what CI uses) never notices. And the scripts kept with results still import what they use."""
from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(ROOT)], check=True, capture_output=True, cwd=out)
    return next(out.glob("pipebench-*.whl"))


def test_the_wheel_ships_every_module_of_the_source_tree(wheel):
    shipped = set(zipfile.ZipFile(wheel).namelist())
    sources = {p.relative_to(ROOT).as_posix() for package in ("pipelines", "bench") for p in (ROOT / package).rglob("*.py")}
    assert sources - shipped == set()
    plans = {p.relative_to(ROOT).as_posix() for p in (ROOT / "bench" / "plans").glob("*.json")}
    assert plans and plans - shipped == set()   # the plans the README names


def test_the_installed_command_runs_from_a_fresh_environment(wheel, tmp_path, synthetic_root):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder().create(env_dir)   # no pip of its own (3 s): this one's installs into it (--python)
    python = env_dir / "bin" / "python"
    # Not this process's PYTHONPATH (the suite may run with the checkout on it, where building the
    # wheel left pipebench.egg-info: pip would take the project as installed and skip the wheel).
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True, env=environ).stdout.strip())
    # This environment's packages (torch, pandas, ...) without its editable install of the project:
    # a path line in a .pth file adds the folder, not the .pth files inside it.
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, capture_output=True, env=environ)
    command = env_dir / "bin" / "pipebench"
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    def run(*args: str) -> str:
        done = subprocess.run([command, *args], cwd=outside, env=environ, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    assert run("--version").strip().startswith("pipebench ")   # `list`: below, in the import check's interpreter
    run("compare", "--pipelines", "resident", "--modes", "loader", "--data-root", str(synthetic_root),
        "--max-samples", "256", "--batch-size", "32", "--steps", "2", "--warmup", "0", "--repeats", "1",
        "--processes", "1", "--out", str(tmp_path / "run"))
    assert (tmp_path / "run" / "results.csv").is_file()
    code = "import sys, bench.cli, pipelines; print(pipelines.__file__); sys.exit(bench.cli.main(['list']))"
    imported, listed = subprocess.run([python, "-c", code], cwd=outside, env=environ, capture_output=True, text=True,
                                      check=True).stdout.split("\n", 1)
    assert str(env_dir) in imported   # the wheel's copy, not the source tree
    assert "prefetch" in listed


PINNED = re.compile(r"^# runs at commit [0-9a-f]{12,40}$", re.M)   # a probe that runs only at its own commit


def _missing_imports(path: Path) -> list[str]:
    """What the script imports from `pipelines` or `bench` that this tree does not have."""
    missing = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("pipelines", "bench"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                if not hasattr(module, alias.name):
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        missing.append(f"{node.module}.{alias.name}")
    return missing


def test_every_script_under_results_imports_what_exists_or_names_its_commit():
    """A probe whose imports are gone (a DALI probe imported three helpers `pipelines.base` no longer
    has) cannot be rerun from this tree: it names the commit it runs at, or it imports what exists."""
    scripts = sorted((ROOT / "results").rglob("*.py"))
    assert scripts
    broken = {str(p.relative_to(ROOT)): m for p in scripts if not PINNED.search(p.read_text())
              for m in [_missing_imports(p)] if m}
    assert broken == {}


TREE_MOST_MIB = 20   # the GPU machine's calls carry the working tree with one DALI chunk: 20 MiB of tree at most


def test_the_tracked_tree_stays_under_what_a_device_call_carries_beside_a_dali_chunk():
    """Every tracked file together stays under TREE_MOST_MIB (data, runs and caches are ignored, never
    tracked), each counted in whole 4 KiB blocks as a disk holds it (1,158 files at 18.4 MiB took 21.3):
    over it, a call to the GPU machine can no longer carry a DALI chunk with the tree. Committed logs
    and plots are kept small (`python -m bench.report.slim results`)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    files = [ROOT / name for name in listed.stdout.decode().split("\0") if name]
    size = sum(-(-f.stat().st_size // 4096) * 4096 for f in files if f.is_file())
    assert size <= TREE_MOST_MIB * 2**20, f"{size / 2**20:.1f} MiB tracked"
