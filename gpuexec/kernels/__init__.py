"""gpuexec's portable kernel engine for jagged (awkward) arrays.

    import gpuexec.kernels as gk
    gk.sum(events.Jet.pt, axis=1)             # the array's own backend
    with gk.using("cuda"): gk.max(pt, axis=1)  # a default for this thread/context

The engine imports nothing above it (no executor, no Dask).
"""

from gpuexec.kernels.api import *  # noqa: F401,F403
from gpuexec.kernels.api import __dict__ as _api_namespace
from gpuexec.kernels.backend import Backend, KernelNotFound  # noqa: F401
from gpuexec.kernels.cpu.threads import get_num_threads, set_num_threads  # noqa: F401
from gpuexec.kernels.dispatch import (  # noqa: F401
    BackendUnavailable,
    get_backend,
    known_backends,
    resolve,
    using,
)
from gpuexec.kernels.stats import counting, reset_stats, stats  # noqa: F401

__all__ = sorted(
    [k for k, v in _api_namespace.items() if callable(v) and hasattr(v, "__gk_awkward__")]
    + ["Backend", "BackendUnavailable", "KernelNotFound", "counting", "get_backend",
       "get_num_threads", "known_backends", "reset_stats", "resolve", "set_num_threads",
       "stats", "using"]
)
