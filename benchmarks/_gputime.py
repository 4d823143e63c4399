"""GPU timing shared by the GPU benchmarks (and the wall time of a call, ``wall_median``).

``event_time`` times ``inner`` calls issued back to back between two CUDA events and
divides: the host work of issuing one call (Python, the launch itself: 10-80 us for
our launchers, ~1 ms for awkward's) overlaps the previous call's kernels, so a kernel
that runs longer than its issue cost is timed as the device sees it. One call between
two events would also count the issue cost of that call, which makes 0.3 ms kernels look
up to 25% slower (docs/benchmarks.md#timing)."""

from __future__ import annotations

import numpy as np


def awkward_cuda_extras() -> str | None:
    """Import numba-cuda-mlir (what awkward's "cuda" argmin/argmax/prod/count_nonzero and
    combinations need) first, in the main thread, when it is installed; its version or
    None. Where torch is installed, awkward importing it later leaves torch partially
    initialised ("partially initialized module 'torch' has no attribute 'library'") and
    every such awkward call fails; imported first it works."""
    try:
        try:
            import torch  # noqa: F401 - numba-cuda-mlir reaches it where it is installed
        except ImportError:
            pass
        import numba_cuda_mlir
    except ImportError:
        return None
    return getattr(numba_cuda_mlir, "__version__", "installed")


def launches_of(backend, call):
    """(``call()``'s result, [(kernel name, function, grid, block, args), ...]): the
    launches a GPUBackend call made, recorded at its one launch point (``_launch``) and
    launched as usual, so that a benchmark can replay or vary exactly those."""
    seen = []
    real = backend._launch
    backend._launch = lambda *a: (seen.append(a), real(*a))[1]
    try:
        out = call()
    finally:
        del backend._launch  # the class's method again
    return out, seen


def wall_median(fn, sync, calls: int, warmup: int = 0) -> float:
    """Median wall seconds of one call of ``fn`` followed by ``sync()`` (what a caller
    waits for, host work included), over ``calls`` calls after ``warmup`` untimed ones."""
    import statistics
    import time

    for _ in range(warmup):
        fn()
        sync()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def event_time(cp, fn, reps: int = 10, warmup: int = 2, inner: int = 10) -> float:
    """Median over ``reps`` batches of the seconds per call of ``inner`` back-to-back
    calls of ``fn`` (device time between CUDA events)."""
    return interleaved_time(cp, {"fn": fn}, reps, warmup, inner)["fn"]


class CopyAnchor:
    """The anchor of the "% of copy" columns: a device copy of ``elements`` float64 timed
    in turns with each comparison (``timed``), since the device's clock drifts during a
    run; ``bandwidth`` is bytes read + written over the median of those copies."""

    def __init__(self, cp, elements: int):
        self._cp = cp
        self._src = cp.random.random_sample(elements)
        self._dst = cp.empty_like(self._src)
        self.bytes = 2 * self._src.nbytes
        self.seconds: list[float] = []  # the copy of each comparison

    def timed(self, fns: dict, reps: int = 10) -> dict:
        """``interleaved_time`` of ``fns`` with the copy in the rotation (kept here)."""
        times = interleaved_time(self._cp, {"device copy": self._copy, **fns}, reps)
        self.seconds.append(times.pop("device copy"))
        return times

    def _copy(self) -> None:
        self._cp.copyto(self._dst, self._src)

    @property
    def bandwidth(self) -> float:
        """Bytes per second over the median copy."""
        return self.bytes / float(np.median(self.seconds))


def interleaved_time(cp, fns: dict, reps: int = 10, warmup: int = 2, inner: int = 10,
                     lead_in: bool = True) -> dict:
    """``event_time`` of several calls measured in turns (of one call: ``event_time``):
    each of ``reps`` rounds times one batch of every call, starting one place later each
    round, and each call's median batch is its time. The variants of one comparison then
    see the same clocks and neighbours (timed one after the other, the first one timed
    ran up to 3 points of copy bandwidth slower on the H200). Each batch follows one
    untimed call of its own function (``lead_in``): in a fixed rotation a call always
    follows the same neighbour, and the one after the device copy starts with the copy's
    dirty lines in L2 (0.2-1.2 points of copy bandwidth lost on the H200;
    docs/benchmarks.md#timing)."""
    names = list(fns)
    for name in names:
        for _ in range(warmup):
            fns[name]()
    cp.cuda.runtime.deviceSynchronize()
    times = {name: [] for name in names}
    for r in range(reps):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = fns[name]
            if lead_in:
                fn()  # queued before the start event: not timed
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            for _ in range(inner):
                fn()
            stop.record()
            stop.synchronize()
            times[name].append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / inner)
    return {name: float(np.median(t)) for name, t in times.items()}
