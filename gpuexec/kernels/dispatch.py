"""The one dispatch point: which Backend runs a call.

Order of precedence: the call's ``backend=`` argument, then the innermost
``with gk.using(...)`` block of this thread/context, then the array's own awkward
backend ("cpu" -> the CPU engine; "cuda" -> the GPU engine of the vendor present,
CUDA or HIP, since CuPy-ROCm arrays also report awkward backend "cuda").
Backends are created once per process and cached.
"""

from __future__ import annotations

import contextvars
import importlib
import threading
from contextlib import contextmanager

from gpuexec.kernels.backend import Backend, BackendUnavailable, awkward_backend_of  # noqa: F401


# name -> "module:factory"; the factory returns a Backend or raises BackendUnavailable.
_FACTORIES = {
    "cpu": "gpuexec.kernels.cpu:create_backend",
    "cuda": "gpuexec.kernels.gpu.backend:create_cuda_backend",
    "hip": "gpuexec.kernels.gpu.backend:create_hip_backend",
}
_ALIASES = {"numpy": "cpu", "host": "cpu", "rocm": "hip", "amd": "hip", "nvidia": "cuda"}

_instances: dict[str, Backend] = {}
_instances_lock = threading.Lock()
_default: contextvars.ContextVar[Backend | None] = contextvars.ContextVar(
    "gpuexec_default_backend", default=None
)


def known_backends() -> list[str]:
    return sorted(_FACTORIES)


def get_backend(name) -> Backend:
    """The Backend object for ``name`` ("cpu", "cuda", "hip", or a Backend)."""
    if isinstance(name, Backend):
        return name
    if not isinstance(name, str):
        raise TypeError(f"backend must be a name or a Backend, not {type(name).__name__}")
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in _FACTORIES:
        raise ValueError(f"unknown gpuexec backend {name!r}; known: {', '.join(known_backends())}")
    with _instances_lock:
        if key in _instances:
            return _instances[key]
        module_name, factory_name = _FACTORIES[key].split(":")
        try:
            module = importlib.import_module(module_name)
            factory = getattr(module, factory_name)
        except (ImportError, AttributeError) as err:
            raise BackendUnavailable(
                f"gpuexec backend {key!r} is not available: {module_name}.{factory_name} "
                f"could not be loaded ({err})"
            ) from err
        backend = factory()
        _instances[key] = backend
        return backend


def device_backend_name() -> str:
    """Which GPU engine serves arrays that awkward keeps on a device ("cuda" or "hip")."""
    try:
        from gpuexec.kernels.gpu import vendor_of_current_device
    except ImportError as err:
        raise BackendUnavailable(
            f"an awkward 'cuda' array needs gpuexec's GPU engine, which could not be loaded ({err})"
        ) from err
    return vendor_of_current_device()


@contextmanager
def using(backend):
    """``with gk.using("cuda"):`` makes ``backend`` the default of every gk call in this
    thread/context (the executor sets it per worker task)."""
    token = _default.set(get_backend(backend))
    try:
        yield _default.get()
    finally:
        _default.reset(token)



#: the current ``with gk.using(...)`` backend or None (``ContextVar.get`` itself: no
#: Python frame on every call)
current_default = _default.get

# awkward backend name ("cpu"/"cuda") -> Backend, filled on first use: both the
# instances and the vendor CuPy was built for are fixed for the life of the process
_by_awkward_name: dict[str, Backend] = {}


def _backend_for(name: str) -> Backend:
    backend = _by_awkward_name.get(name)
    if backend is not None:
        return backend
    if name == "cpu":
        backend = get_backend("cpu")
    elif name == "cuda":
        backend = get_backend(device_backend_name())
    else:
        raise BackendUnavailable(f"gpuexec has no engine for awkward backend {name!r}")
    _by_awkward_name[name] = backend
    return backend


def backend_of_buffer(buffer) -> Backend:
    """The engine Backend that holds a flat buffer: the CPU one for numpy arrays, the GPU
    one awkward's "cuda" arrays go to for device (CuPy) arrays."""
    return _backend_for("cuda" if type(buffer).__module__.startswith("cupy") else "cpu")


def backend_of_arrays(arrays) -> tuple[Backend, bool]:
    """(the Backend that runs a call on ``arrays`` when neither ``backend=`` nor
    ``gk.using`` names one, whether every array already lives on that Backend's awkward
    backend, so that ``Backend.adopt`` would return each as it is)."""
    if len(arrays) == 1:  # the common call: one array
        name = awkward_backend_of(arrays[0])
        if name == "typetracer":
            return _backend_for("cpu"), False
        return _backend_for(name), True
    names = {awkward_backend_of(a) for a in arrays if a is not None}
    native = "typetracer" not in names
    names.discard("typetracer")
    if len(names) > 1:
        raise ValueError(f"arrays live on different awkward backends: {sorted(names)}")
    return _backend_for(names.pop() if names else "cpu"), native


def resolve(arrays, backend=None) -> Backend:
    """The Backend that runs a call on ``arrays`` (awkward arrays or layouts)."""
    if backend is not None:
        return get_backend(backend)
    default = _default.get()
    if default is not None:
        return default
    return backend_of_arrays(arrays)[0]
