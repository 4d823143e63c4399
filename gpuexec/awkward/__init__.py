"""Unmodified awkward code on gpuexec's kernel engine: a kernel provider for awkward.

    import gpuexec.awkward
    gpuexec.awkward.install()              # awkward "cuda" arrays: the GPU engine
    with gpuexec.awkward.installed("cpu"):  # awkward CPU arrays: the numba engine
        ...

Installed, the provider answers awkward's kernel lookups by spec name and dtypes
(``kernel-specification.yml``) through adapters over the engine's buffer kernels, and
overloads awkward's reducers so that each reduction is one engine call. It is gated on
the awkward releases it was checked against (``TESTED_AWKWARD``). Counters:
``gk.stats()["awkward"]`` (served calls, fallbacks to awkward's own kernels, reductions
left to awkward).

``awkward._connect.cuda._compute`` (cuda.compute, NVIDIA only) is imported only when a
kernel the provider does not serve falls back to awkward's own CUDA kernels.
"""

from __future__ import annotations

import contextlib
import threading
import warnings

from gpuexec.awkward.adapters import ADAPTERS
from gpuexec.awkward.provider import KernelNotServed, Provider, ShadowMismatch  # noqa: F401

#: awkward releases (major.minor) the adapters were checked against, kernel by kernel
TESTED_AWKWARD = ("2.14",)

_lock = threading.Lock()
_active: list = []  # (provider, backend class, original __getitem__, original prepare_reducer)


class UntestedAwkward(RuntimeError):
    """The installed awkward is not one the provider was checked against."""


def check_awkward_version(allow_untested: bool = False) -> str:
    import awkward as ak

    version = ak.__version__
    if ".".join(version.split(".")[:2]) in TESTED_AWKWARD:
        return version
    message = (f"gpuexec.awkward serves awkward's kernels as awkward {', '.join(TESTED_AWKWARD)}"
               f".x specifies them; awkward {version} is installed")
    if not allow_untested:
        raise UntestedAwkward(message + " (install(allow_untested=True) to use it anyway)")
    warnings.warn(message + ": kernels may differ", RuntimeWarning, stacklevel=3)
    return version


def served_names() -> list[str]:
    """Every awkward kernel name the provider serves."""
    return sorted(ADAPTERS)


def _target(mode: str, vendor: str | None, engine):
    """(awkward backend class, engine backend, vendor) for ``mode``."""
    import gpuexec.kernels as gk

    if mode == "cpu":
        from awkward._backends.numpy import NumpyBackend

        return NumpyBackend, engine or gk.get_backend("cpu"), "cpu"
    if mode != "device":
        raise ValueError(f"mode must be 'device' or 'cpu', not {mode!r}")
    from awkward._backends.cupy import CupyBackend

    from gpuexec.kernels.dispatch import device_backend_name

    vendor = vendor or device_backend_name()
    return CupyBackend, engine or gk.get_backend(vendor), vendor


def install(mode: str = "device", *, shadow: bool = False, shadow_rtol: float = 0.0,
            allow_untested: bool = False, vendor: str | None = None, engine=None) -> Provider:
    """Make awkward's backend of ``mode`` ("device": CuPy arrays; "cpu": NumPy arrays) take
    its kernels from the engine. ``engine`` replaces the engine backend (tests run the
    device path on the CPU engine with a named ``vendor``). Returns the provider;
    installs nest, ``uninstall()`` removes the latest."""
    check_awkward_version(allow_untested)
    cls, backend, vendor = _target(mode, vendor, engine)
    with _lock:
        previous = [entry for entry in _active if entry[1] is cls]
        get_item, prepare = ((previous[-1][2], previous[-1][3]) if previous
                             else (cls.__getitem__, cls.prepare_reducer))
        # on AMD there is nothing of awkward's to fall back to
        fallback = None if vendor == "hip" else get_item
        provider = Provider(backend, vendor, fallback, shadow=shadow, shadow_rtol=shadow_rtol)
        cls.__getitem__ = lambda self, key: provider.lookup(self, key)
        cls.prepare_reducer = lambda self, reducer: provider.prepare_reducer(reducer)
        _active.append((provider, cls, get_item, prepare))
    return provider


def uninstall() -> None:
    """Remove the latest install (awkward's own lookup comes back after the last)."""
    with _lock:
        if not _active:
            return
        _, cls, get_item, prepare = _active.pop()
        remaining = [entry for entry in _active if entry[1] is cls]
        if remaining:
            provider = remaining[-1][0]
            cls.__getitem__ = lambda self, key: provider.lookup(self, key)
            cls.prepare_reducer = lambda self, reducer: provider.prepare_reducer(reducer)
        else:
            cls.__getitem__, cls.prepare_reducer = get_item, prepare


@contextlib.contextmanager
def installed(mode: str = "device", **kwargs):
    """``with installed("cpu", shadow=True) as provider:`` install ... uninstall."""
    provider = install(mode, **kwargs)
    try:
        yield provider
    finally:
        uninstall()


def is_installed(mode: str = "device") -> bool:
    name = "NumpyBackend" if mode == "cpu" else "CupyBackend"
    return any(entry[1].__name__ == name for entry in _active)


def worker_setup(backend: str) -> Provider | None:
    """For a worker task: install the provider once per process for a worker whose engine
    backend is ``backend`` ("cuda" or "hip": awkward's CuPy arrays are served; "cpu":
    nothing to do, awkward's CPU kernels stay). Returns the provider or None."""
    if backend not in ("cuda", "hip"):
        return None
    with _lock:
        for provider, cls, _, _ in _active:
            if cls.__name__ == "CupyBackend":
                return provider
    return install("device", vendor=backend)


__all__ = ["KernelNotServed", "Provider", "ShadowMismatch", "TESTED_AWKWARD", "UntestedAwkward",
           "check_awkward_version", "install", "installed", "is_installed", "served_names",
           "uninstall", "worker_setup"]
