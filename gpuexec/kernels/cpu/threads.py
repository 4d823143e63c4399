"""Thread count of the CPU engine. Default: the cores this process may use (its CPU
affinity), so that Dask workers pinned to a few cores do not oversubscribe the node.
Calls on fewer elements than ``PARALLEL_THRESHOLD`` run serially (thread start-up
costs more than it saves there)."""

from __future__ import annotations

import os

import numba

#: elements (content length) below which kernels run their serial variant
PARALLEL_THRESHOLD = 32_768


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


_threads = None


def _read_thread_env() -> None:
    """Re-read numba's configuration before its threads start: a Dask nanny sets a
    worker's NUMBA_NUM_THREADS after numba was imported, and numba's next compile re-reads
    it and refuses a value other than the one its threads started with."""
    from numba.np.ufunc import parallel

    if not parallel._is_initialized:
        numba.core.config.reload_config()


def set_num_threads(n: int | None) -> int:
    """Set the CPU engine's thread count (``None``: the cores this process may use)."""
    global _threads
    _read_thread_env()
    n = available_cores() if n is None else int(n)
    if n < 1:
        raise ValueError(f"thread count must be >= 1, got {n}")
    n = min(n, numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(n)
    _threads = n
    return n


def get_num_threads() -> int:
    if _threads is None:
        return set_num_threads(None)
    return _threads


def use_parallel(n_elements: int) -> bool:
    """Whether a kernel over ``n_elements`` should take its parallel variant."""
    return n_elements >= PARALLEL_THRESHOLD and get_num_threads() > 1


def serial_and_parallel(py_func=None, *, name=None, **bound):
    """(serial, parallel) numba dispatchers compiled from one kernel body (``prange`` is a
    plain range in the serial one). The copies carry distinct qualnames: numba's disk
    cache keys a function by qualname and bytecode, not by its ``parallel`` flag, so one
    name for both would let one variant load the other's machine code.

    ``bound``: globals of the body bound to other objects in these copies (over a snapshot
    of its module's globals), so that one body skeleton serves several kernels, e.g. with
    the per-list helper it calls, which numba resolves at compile time as before;
    ``name`` then names the kernel. Without ``py_func``, a decorator."""
    if py_func is None:
        return lambda fn: serial_and_parallel(fn, name=name, **bound)
    import types

    namespace = {**py_func.__globals__, **bound} if bound else py_func.__globals__
    name = name or py_func.__name__
    scope = py_func.__qualname__[:-len(py_func.__name__)]  # "" at module level

    def renamed(suffix):
        fn = types.FunctionType(py_func.__code__, namespace, f"{name}_{suffix}",
                                py_func.__defaults__, py_func.__closure__)
        fn.__qualname__ = f"{scope}{name}_{suffix}"
        fn.__module__ = py_func.__module__
        return fn

    return (numba.njit(cache=True, nogil=True)(renamed("serial")),
            numba.njit(cache=True, nogil=True, parallel=True)(renamed("parallel")))


def apply_thread_count() -> int:
    """The engine's thread count, applied to numba in the calling thread (numba's setting
    is per thread: a Dask task thread or a user's thread starts at numba's default)."""
    n = get_num_threads()
    if numba.get_num_threads() != n:
        numba.set_num_threads(n)
    return n


def pick(pair, n_elements):
    """The parallel variant of a ``serial_and_parallel`` pair above the size threshold
    (with the engine's thread count applied), else the serial one."""
    if not use_parallel(n_elements):
        return pair[0]
    apply_thread_count()
    return pair[1]
