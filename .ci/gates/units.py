"""The compile units under test: read from the strategy table, never listed here."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SRC_DIR = os.path.join(REPO, "gpuexec", "kernels", "gpu", "src")


# the dtypes a kernel name may hold: gk_<op>_<dtype>_<role>
DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                    "float32", "float64", "bool"})


def kernel_dtype_and_role(kernel: str) -> tuple[str | None, str]:
    """gk_<op>_<dtype>_<role> -> (dtype, role). Ops and roles hold "_" too, so the dtype is
    the last part before the role naming one; (None, last part) for a kernel without one."""
    parts = kernel.split("_")
    for i in range(len(parts) - 2, 1, -1):
        if parts[i] in DTYPES:
            return parts[i], "_".join(parts[i + 1:])
    return None, parts[-1]


@dataclass(frozen=True)
class Unit:
    source: str                      # file name under SRC_DIR
    defines: tuple                   # ((name, value), ...) sorted, value None = bare -D
    kernels: tuple                   # extern "C" names
    promises: dict                   # kernel -> frozenset of promise strings
    src_dir: str = SRC_DIR

    @property
    def path(self) -> str:
        return os.path.join(self.src_dir, self.source)

    def define_flags(self) -> list[str]:
        return [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in self.defines]

    def label(self) -> str:
        d = " ".join(f"{k}" if v is None else f"{k}={v}" for k, v in self.defines)
        return f"{self.source}" + (f" [{d}]" if d else "")


def _define_value(v):
    if v is None:
        return None
    if isinstance(v, bool):      # -DFOO=True would not be a C expression
        return "1" if v else "0"
    return str(v)


def load_units(arch: str, strategies: str | None = None) -> list[Unit]:
    """The strategy table's compile units for one arch ("gfx90a", "gfx942", "sm_90").

    strategies: another file defining compile_units(arch), its sources in src/ beside
    it (the gates' own tests use this to show that a bad kernel fails)."""
    if strategies is None:
        from gpuexec.kernels.gpu.units import compile_units
        src_dir = SRC_DIR
    else:
        spec = importlib.util.spec_from_file_location("_gate_strategies", strategies)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        compile_units = mod.compile_units
        src_dir = os.path.join(os.path.dirname(os.path.abspath(strategies)), "src")

    units = []
    for cu in compile_units(arch):
        promises = {k: frozenset(v) for k, v in (getattr(cu, "promises", None) or {}).items()}
        defines = tuple(sorted((str(k), _define_value(v)) for k, v in (cu.defines or {}).items()))
        units.append(Unit(cu.source, defines, tuple(cu.kernels), promises, src_dir))
    if not units:
        raise RuntimeError(f"compile_units({arch!r}) returned no compile units")
    return units
