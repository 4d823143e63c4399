"""The design's arrows run one way: executor -> scheduler -> kernels. The kernel engine
imports nothing above it, the placement policy is pure (no Dask), and only the package's
lazy ``GPUExecutor`` reaches the executor. Imports inside functions count too: a lazy
import that goes the wrong way still ties the layers together."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gpuexec"

# what each part of gpuexec may import from gpuexec (besides itself and the package root,
# which holds only __version__ and the lazy GPUExecutor)
ALLOWED = {
    "gpuexec.kernels": set(),
    "gpuexec.config": set(),
    "gpuexec.scheduler": {"gpuexec.kernels", "gpuexec.config"},
    "gpuexec.gpu_cluster": {"gpuexec.config", "gpuexec.scheduler", "gpuexec.kernels",
                            "gpuexec.security"},
    "gpuexec.io": {"gpuexec.kernels"},
    "gpuexec.executor": {"gpuexec.kernels", "gpuexec.scheduler", "gpuexec.io",
                         "gpuexec.config", "gpuexec.gpu_cluster", "gpuexec.dashboard",
                         "gpuexec.awkward"},
    "gpuexec.dashboard": {"gpuexec.scheduler", "gpuexec.kernels", "gpuexec.config"},
    "gpuexec.adl": {"gpuexec.kernels"},
    "gpuexec.awkward": {"gpuexec.kernels"},
    "gpuexec.security": set(),
    "gpuexec.deploy": {"gpuexec.security", "gpuexec.scheduler", "gpuexec.config"},
    "gpuexec.cli": {"gpuexec.adl", "gpuexec.deploy", "gpuexec.security", "gpuexec.scheduler",
                    "gpuexec.executor", "gpuexec.gpu_cluster", "gpuexec.config", "gpuexec.io"},
    "gpuexec.__main__": {"gpuexec.cli"},
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _part(name: str) -> str:
    """The part of gpuexec a module belongs to (``gpuexec.kernels.gpu.backend`` ->
    ``gpuexec.kernels``); the package root for ``gpuexec`` itself."""
    return ".".join(name.split(".")[:2])


def imports_of(path: Path) -> set[str]:
    """Every gpuexec module ``path`` imports, anywhere in the file, relative imports
    resolved; ``from gpuexec import x`` counts as ``gpuexec.x``."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source == "gpuexec":
                found.update(f"gpuexec.{alias.name}" for alias in node.names)
            else:
                found.add(source)
    return {name for name in found if name == "gpuexec" or name.startswith("gpuexec.")}


def _violations() -> list[str]:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        if module == "gpuexec":
            continue  # the package root: __version__ and the lazy GPUExecutor
        part = _part(module)
        assert part in ALLOWED, f"{module}: a new part of gpuexec needs its row in ALLOWED"
        for name in imports_of(path):
            target = _part(name)
            if target in (part, "gpuexec", "gpuexec.__version__"):
                continue
            if target not in ALLOWED[part]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    return wrong


def test_every_part_imports_only_the_parts_below_it():
    assert _violations() == []


def test_the_import_scanner_sees_lazy_and_relative_imports(tmp_path, monkeypatch):
    """The check itself can fail: a kernel module with a lazy relative import of the
    scheduler and one with ``from gpuexec import executor`` are both caught."""
    fake = tmp_path / "gpuexec"
    (fake / "kernels" / "cpu").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "kernels" / "__init__.py").write_text("")
    (fake / "kernels" / "cpu" / "sneaky.py").write_text(
        "def f():\n    from ...scheduler import placement\n    return placement\n")
    (fake / "kernels" / "direct.py").write_text("from gpuexec import executor\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert imports_of(fake / "kernels" / "cpu" / "sneaky.py") == {"gpuexec.scheduler"}
    assert _violations() == ["gpuexec/kernels/cpu/sneaky.py imports gpuexec.scheduler",
                             "gpuexec/kernels/direct.py imports gpuexec.executor"]


@pytest.mark.parametrize("module, absent", [
    ("gpuexec.kernels.api", ("dask", "distributed", "coffea", "uproot", "gpuexec.scheduler")),
    ("gpuexec.scheduler.placement", ("dask", "distributed", "coffea", "gpuexec.executor")),
    ("gpuexec.scheduler.calibration", ("dask", "distributed", "coffea", "gpuexec.executor")),
])
def test_the_engine_and_the_placement_policy_load_without_dask(module, absent):
    """Importing the kernel engine or the placement policy pulls in no Dask or coffea
    (a fresh interpreter: this one has them loaded already)."""
    code = (f"import sys, {module}\n"
            f"print(' '.join(m for m in {absent!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=PACKAGE.parent).stdout.split()
    assert loaded == []


# -- import circles ----------------------------------------------------------------------
def _module_path(name: str, root: Path) -> Path | None:
    """The file of gpuexec module ``name`` under ``root`` (a package's __init__), or None."""
    base = root.parent.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def import_edges(path: Path, root: Path, lazy: bool) -> set[str]:
    """The gpuexec modules ``path`` imports: at module level (outside any function; under
    ``if``/``try`` too), or anywhere with ``lazy``. ``from x import y`` is an edge to the
    module ``x.y`` where that is a module, else to ``x``; relative imports resolved."""
    module = _module_name_under(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    nodes = ast.walk(tree) if lazy else _module_level(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                source = ".".join(parts[: len(parts) - node.level + 1]
                                  + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                found.add(sub if _module_path(sub, root) is not None else source)
    return {n for n in found if n.split(".")[0] == root.name and _module_path(n, root)}


def _module_level(tree: ast.AST):
    """The nodes of ``tree`` outside function bodies (class bodies run at import)."""
    stack = list(ast.iter_child_nodes(tree))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _module_name_under(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycles(root: Path, within: str, lazy: bool) -> list[list[str]]:
    """Every import circle among the modules under ``within`` (a dotted prefix): the
    strongly connected components of more than one module, or a module importing itself
    (Tarjan's algorithm over the import graph)."""
    graph = {}
    for path in sorted(root.rglob("*.py")):
        name = _module_name_under(path, root)
        if name == within or name.startswith(within + "."):
            graph[name] = {t for t in import_edges(path, root, lazy)
                           if t == within or t.startswith(within + ".")}
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(cycles)


def test_no_import_circle_in_gpuexec():
    """No circle of module-level imports anywhere in gpuexec."""
    assert import_cycles(PACKAGE, "gpuexec", lazy=False) == []


def test_no_import_circle_in_the_kernel_engine_even_through_lazy_imports():
    """Inside gpuexec.kernels not even imports inside functions close a circle: backends
    are found by name (dispatch's factory table), shared pieces live below both users."""
    assert import_cycles(PACKAGE, "gpuexec.kernels", lazy=True) == []


def test_the_cycle_finder_sees_module_level_and_lazy_circles(tmp_path):
    fake = tmp_path / "gpuexec"
    (fake / "kernels" / "gpu").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "kernels" / "__init__.py").write_text("")
    (fake / "kernels" / "dispatch.py").write_text("from gpuexec.kernels.gpu import make\n")
    (fake / "kernels" / "gpu" / "__init__.py").write_text(
        "def make():\n    from ..dispatch import thing\n    return thing\n")
    (fake / "kernels" / "a.py").write_text("from . import b\n")
    (fake / "kernels" / "b.py").write_text("if True:\n    from gpuexec.kernels.a import x\n")
    (fake / "kernels" / "c.py").write_text("import gpuexec.kernels.a\n")
    assert import_cycles(fake, "gpuexec", lazy=False) == [
        ["gpuexec.kernels.a", "gpuexec.kernels.b"]]
    assert import_cycles(fake, "gpuexec.kernels", lazy=True) == [
        ["gpuexec.kernels.a", "gpuexec.kernels.b"],
        ["gpuexec.kernels.dispatch", "gpuexec.kernels.gpu"]]


# scheduler and reading rules: module -> gpuexec modules (prefixes) it must not import
SCHEDULER_FORBIDDEN = {
    "gpuexec.scheduler.costs": ("gpuexec.executor", "gpuexec.io", "gpuexec.scheduler.placement",
                                "gpuexec.scheduler.calibration", "gpuexec.scheduler.cluster"),
    "gpuexec.scheduler.merging": ("gpuexec.executor", "gpuexec.io", "gpuexec.scheduler.placement",
                                  "gpuexec.scheduler.costs"),
    "gpuexec.scheduler.decisions": ("gpuexec.executor", "gpuexec.io",
                                    "gpuexec.scheduler.placement"),
    "gpuexec.scheduler.placement": ("gpuexec.executor", "gpuexec.io",
                                    "gpuexec.scheduler.cluster", "gpuexec.scheduler.plugins"),
    "gpuexec.scheduler.calibration": ("gpuexec.executor", "gpuexec.io",
                                      "gpuexec.scheduler.placement"),
    "gpuexec.scheduler.plugins": ("gpuexec.executor", "gpuexec.io", "gpuexec.scheduler.cluster"),
}


def _submodule_imports(path: Path) -> set[str]:
    """``from a.b import c`` as ``a.b.c`` too: the module ``c`` when it is one."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            source = (".".join(base + ([node.module] if node.module else []))
                      if node.level else node.module or "")
            found.update(f"{source}.{alias.name}" for alias in node.names)
    return found


def _scheduler_and_io_graph() -> dict[str, set[str]]:
    """gpuexec module -> the gpuexec modules it imports, for scheduler/ and io/."""
    graph = {}
    for folder in ("scheduler", "io"):
        for path in sorted((PACKAGE / folder).glob("*.py")):
            names = imports_of(path) | {name for name in _submodule_imports(path)
                                        if name.startswith("gpuexec.")}
            graph[_module_name(path)] = names - {_module_name(path)}
    return graph


def test_scheduler_and_io_rules_and_no_circles():
    """io/ imports nothing of the executor or the scheduler; the placement policy's parts
    (costs, merging, decisions) import neither the executor, io/ nor Dask-side modules;
    the pairs placement/calibration and cluster/plugins no longer import each other; and
    scheduler/ plus io/ hold no import circle."""
    graph = _scheduler_and_io_graph()
    wrong = [f"{module} imports {name}" for module, names in graph.items() for name in names
             if module.startswith("gpuexec.io")
             and name.startswith(("gpuexec.executor", "gpuexec.scheduler"))]
    for module, forbidden in SCHEDULER_FORBIDDEN.items():
        assert module in graph, module
        wrong += [f"{module} imports {name}" for name in graph[module]
                  if name.startswith(forbidden)]
    assert wrong == []

    def modules(name: str) -> set[str]:
        # ``from gpuexec.scheduler import keys`` names the package; count the module
        return {name} if name in graph else set()

    seen: dict[str, int] = {}  # 1: on the current path, 2: done
    circles = []

    def visit(module: str, path: list[str]) -> None:
        seen[module] = 1
        for name in sorted(graph[module]):
            for target in modules(name):
                if seen.get(target) == 1:
                    circles.append(path[path.index(target):] + [target])
                elif target not in seen:
                    visit(target, path + [target])
        seen[module] = 2

    for module in graph:
        if module not in seen:
            visit(module, [module])
    assert circles == []


# the executor package: module -> its sibling modules it must not import (the worker side
# and the small records stay free of the client's loop and the executor)
EXECUTOR_FORBIDDEN = {
    "gpuexec.executor.errors": ("task", "events", "probes", "merging", "accounting", "busy",
                                "loop", "core"),
    "gpuexec.executor.events": ("errors", "task", "probes", "merging", "accounting", "busy",
                                "loop", "core"),
    "gpuexec.executor.task": ("probes", "merging", "accounting", "busy", "loop", "core"),
    "gpuexec.executor.probes": ("merging", "accounting", "busy", "loop", "core"),
    "gpuexec.executor.merging": ("probes", "accounting", "busy", "loop", "core"),
    "gpuexec.executor.accounting": ("probes", "merging", "busy", "loop", "core"),
    "gpuexec.executor.busy": ("task", "probes", "merging", "accounting", "loop", "core"),
    "gpuexec.executor.loop": ("probes", "core"),
}


def test_executor_package_rules_and_no_circles_even_through_lazy_imports():
    """One concern per module of gpuexec.executor, imported one way: errors and events at
    the bottom, then the worker's task, probes, merging and accounting, then the loop,
    then ``core`` (GPUExecutor); no circle even through imports inside functions."""
    wrong = []
    for module, siblings in EXECUTOR_FORBIDDEN.items():
        path = PACKAGE / "executor" / (module.rsplit(".", 1)[1] + ".py")
        assert path.exists(), module
        names = imports_of(path) | _submodule_imports(path)
        wrong += [f"{module} imports {name}" for name in sorted(names)
                  for sibling in siblings if name == f"gpuexec.executor.{sibling}"
                  or name.startswith(f"gpuexec.executor.{sibling}.")]
    assert wrong == []
    assert import_cycles(PACKAGE, "gpuexec.executor", lazy=True) == []
