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
    "gpuexec.scheduler": {"gpuexec.kernels"},
    "gpuexec.inflate": set(),
    "gpuexec.device_reading": {"gpuexec.inflate"},
    "gpuexec.open_files": set(),
    "gpuexec.staging": {"gpuexec.device_reading", "gpuexec.kernels"},
    "gpuexec.executor": {"gpuexec.kernels", "gpuexec.scheduler", "gpuexec.inflate",
                         "gpuexec.device_reading", "gpuexec.open_files", "gpuexec.staging"},
    "gpuexec.adl": {"gpuexec.kernels"},
    "gpuexec.security": set(),
    "gpuexec.deploy": {"gpuexec.security", "gpuexec.scheduler"},
    "gpuexec.cli": {"gpuexec.adl", "gpuexec.deploy", "gpuexec.security", "gpuexec.scheduler",
                    "gpuexec.executor"},
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
