"""The import graph of bench/ and pipelines/, read from the modules' own source with `ast` (nothing is
imported): it has no cycle, and nothing in pipelines/ imports from bench/ or from the package's registry
(`pipelines/__init__.py`), not even inside a function (issue 55).

An edge is an import that runs when its module is imported: every import outside a function body,
those under `if TYPE_CHECKING:` included (a type-only import is still a dependency a reader follows).
An import inside a function runs later, when the function is called, so it cannot leave a module half
built; those edges are checked apart, and close no cycle either.
`import a.b` and `from a import b` point at the module `a.b` where it is one of ours, else at `a`;
the parent packages an import also runs are left out (Python loads them first, without a cycle).

Also here, on the same modules: pipelines/ imports without DALI (an optional dependency), and its
modules and functions stay short enough to read (at most MAX_MODULE_LINES and MAX_FUNCTION_LINES).
"""
from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bench", "pipelines")
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def our_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def imports(tree: ast.AST, deferred: bool = False):
    """The import statements run at import time (`deferred`: those inside functions instead)."""
    def walk(node: ast.AST, in_function: bool):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, FUNCTIONS)
            if isinstance(child, (ast.Import, ast.ImportFrom)) and inside == deferred:
                yield child
            yield from walk(child, inside)
    return walk(tree, False)


def targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ours that one import statement in `module` points at."""
    def ours(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None
    if isinstance(node, ast.Import):
        found = {ours(alias.name) for alias in node.names}
    else:
        base = node.module or ""
        if node.level:
            package = module if is_package else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        found = {ours(f"{base}.{alias.name}") if f"{base}.{alias.name}" in known else ours(base)
                 for alias in node.names}
    return found - {None, module}


def graph(deferred: bool = False) -> dict[str, set[str]]:
    """module -> the modules of ours it imports at import time (`deferred`: inside functions)."""
    modules = our_modules()
    known = set(modules)
    edges = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        edges[name] = set().union(*(targets(node, name, path.name == "__init__.py", known)
                                    for node in imports(tree, deferred)))
    return edges


def cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while v not in component:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_cycles_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [frozenset("abc")]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_targets_resolve_relative_imports():
    known = {"bench", "bench.measuring", "bench.measuring.harness", "bench.claims", "bench.claims.copies", "pipelines",
             "pipelines.config"}
    tree = ast.parse("from ..measuring import harness\nfrom ..measuring.harness import RunSpec\nimport pipelines.config\n"
                     "from pipelines import PipelineConfig\n")
    found = [targets(node, "bench.claims.copies", False, known) for node in tree.body]
    assert found == [{"bench.measuring.harness"}, {"bench.measuring.harness"}, {"pipelines.config"}, {"pipelines"}]


def test_type_checking_imports_count_function_imports_apart():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\n"
                     "def f():\n    import b\n")
    assert [node.lineno for node in imports(tree)] == [1, 3]
    assert [node.lineno for node in imports(tree, deferred=True)] == [5]


def test_no_import_cycle():
    assert cycles(graph()) == []


def every_import() -> dict[str, set[str]]:
    """The graph with the imports inside functions added."""
    edges = graph()
    for module, deferred in graph(deferred=True).items():
        edges[module] |= deferred
    return edges


def test_no_import_cycle_with_the_imports_inside_functions():
    assert cycles(every_import()) == []


def test_pipelines_import_nothing_from_their_registry_or_bench():
    """No module of pipelines/ imports the package itself (`pipelines/__init__.py`: the registry,
    which imports them) or bench/, not even inside a function: the registry hands them what they
    need to know of it."""
    upward = {module: sorted(t for t in found if t == "pipelines" or t.partition(".")[0] == "bench")
              for module, found in every_import().items() if module.startswith("pipelines.")}
    assert {module: found for module, found in upward.items() if found} == {}


def test_nothing_in_bench_imports_the_command_line():
    """bench/cli is the top of bench/: no module of the other folders (studies, running, measuring, results,
    report, claims) imports it, not even inside a function: what a command and a study share lives below
    both (issue 69: the timeline study imported the CLI's parser for the sweep's options, now
    `bench.running.options`)."""
    upward = {module: sorted(t for t in found if t == "bench.cli" or t.startswith("bench.cli."))
              for module, found in every_import().items()
              if module.startswith("bench.") and not module.startswith("bench.cli")}
    assert {module: found for module, found in upward.items() if found} == {}


def test_the_loop_that_conducts_a_run_lives_in_bench_running_not_in_the_command_line():
    """Issue 69: the loop over a run's configuration processes lived in bench/cli/measure.py; it is
    `bench.running.conduct`, and no module of bench/cli calls the runner's ways of running one."""
    calls = {f"{module}: {name}" for module, path in our_modules().items() if module.startswith("bench.cli")
             for name in ("run_isolated", "run_in_process", "failed_row") if name in path.read_text()}
    assert calls == set()


MAX_MODULE_LINES, MAX_FUNCTION_LINES = 450, 60


def test_modules_and_functions_stay_short():
    """Every module of pipelines/ and bench/ at most MAX_MODULE_LINES lines, every function at most
    MAX_FUNCTION_LINES (issue 55)."""
    long = []
    for name, path in our_modules().items():
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long.append((name, len(text.splitlines())))
        long += [(f"{name}.{node.name}", node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(text))
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert long == []


WITHOUT_DALI = """
import sys
sys.modules["nvidia.dali"] = None   # `import nvidia.dali` fails, as where DALI is not installed
import pipelines
reason = pipelines.available()["dali"]
assert reason.startswith("NVIDIA DALI is not installed"), reason
assert pipelines.PipelineConfig(dali_reader="file", dali_cpu_share=0.5).dali_reader == "file"   # its knobs
try:
    pipelines.build("dali", pipelines.PipelineConfig(device="cpu"))
except ImportError as error:
    assert str(error) == reason, error
else:
    raise AssertionError("dali was built without DALI")
"""


PEERS_ON_DEMAND = """
import json
import sys
import pipelines
pipelines.declared_options()   # every pipeline module imported: what PipelineConfig reads
peers = ("nvidia.dali", "ffcv", "timm", "spdl", "torchcodec")
early = [name for name in peers if name in sys.modules]
assert early == [], f"imported with the pipelines' knobs: {early}"
assert pipelines.available(["resident", "none"]) == {"resident": None}   # asking of one pipeline: its peers only
early = [name for name in peers if name in sys.modules]
assert early == [], f"imported asking whether resident can be built: {early}"
reasons = pipelines.available()   # asking imports them
assert reasons["ffcv"] is None or reasons["ffcv"].startswith(("FFCV", "FFCV normalizes")), reasons["ffcv"]
print(json.dumps(sorted(name for name in peers if name in sys.modules)))
"""


def test_the_pipelines_knobs_are_read_without_importing_their_peers():
    """Every process that reads a knob imports every pipeline module; their optional dependencies
    (FFCV compiles numba functions for seconds as it imports) load only when their pipeline is built
    or asked whether it can be (`pipelines.peers`, `pipelines.available(among)`)."""
    done = subprocess.run([sys.executable, "-c", PEERS_ON_DEMAND], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    installed = [name for name in ("nvidia.dali", "ffcv", "timm", "spdl") if importlib.util.find_spec(name.split(".")[0])]
    assert set(installed) <= set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_pipelines_import_without_dali():
    """DALI is optional: without it the package, the dali modules and their knobs import, and only
    building a dali pipeline fails, saying what is missing."""
    done = subprocess.run([sys.executable, "-c", WITHOUT_DALI], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
