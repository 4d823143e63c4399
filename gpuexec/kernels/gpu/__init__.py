"""gpuexec's GPU engine: one portable kernel source (src/), one runtime layer
(runtime.py) over two binding tables (bindings_cuda.py: cuda-python; bindings_hip.py:
hip-python), the reduction policy table (policy.py), its plans (plan.py) and GPUBackend
(backend.py, with its factories ``create_cuda_backend`` / ``create_hip_backend``).

Importing this package needs no GPU; creating a backend does (``BackendUnavailable``
otherwise, so that the dispatch layer and the test suite can skip cleanly).
"""

from __future__ import annotations

import importlib

from gpuexec.kernels.backend import BackendUnavailable
from gpuexec.kernels.gpu.errors import DeviceOutOfMemory, GPUCallError  # noqa: F401

_BINDINGS = {"cuda": "gpuexec.kernels.gpu.bindings_cuda", "hip": "gpuexec.kernels.gpu.bindings_hip"}


def _unavailable(msg: str, err: Exception | None = None):
    exc = BackendUnavailable(msg)
    if err is not None:
        exc.__cause__ = err
    return exc


def _cupy():
    try:
        import cupy
    except Exception as err:  # ImportError, or a CuPy build that cannot find its runtime
        raise _unavailable(f"the GPU engine needs CuPy, which could not be imported ({err})", err)
    return cupy


def vendor_of_current_device() -> str:
    """"cuda" or "hip": the GPU engine that serves awkward "cuda" arrays here (CuPy's ROCm
    build also reports awkward backend "cuda")."""
    cupy = _cupy()
    return "hip" if getattr(cupy.cuda.runtime, "is_hip", False) else "cuda"


def device_count() -> int:
    cupy = _cupy()
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


def load_bindings(vendor: str | None = None):
    """The binding table module for ``vendor`` (default: the vendor CuPy was built for)."""
    vendor = vendor or vendor_of_current_device()
    if vendor not in _BINDINGS:
        raise ValueError(f"unknown GPU vendor {vendor!r}")
    try:
        return importlib.import_module(_BINDINGS[vendor])
    except ImportError as err:
        pkg = "cuda-python" if vendor == "cuda" else "hip-python"
        raise _unavailable(f"the {vendor} GPU engine needs {pkg} ({err})", err)



__all__ = ["DeviceOutOfMemory", "GPUCallError", "device_count", "load_bindings", "vendor_of_current_device"]
