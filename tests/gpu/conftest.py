"""GPU tests run only where CuPy sees a GPU; elsewhere every test here is skipped (not
errored), so the normal suite stays green on machines without one."""

from __future__ import annotations

import pytest


def _gpu_reason() -> str | None:
    try:
        import cupy
    except Exception as err:  # ImportError, or a CuPy without its CUDA/ROCm runtime
        return f"CuPy not importable ({type(err).__name__})"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no GPU visible to CuPy"
    except Exception as err:
        return f"no GPU visible to CuPy ({type(err).__name__})"
    try:
        from gpuexec.kernels.gpu import load_bindings

        load_bindings()
    except Exception as err:
        return f"GPU runtime bindings unavailable ({err})"
    return None


_REASON = _gpu_reason()


def pytest_collection_modifyitems(config, items):
    if _REASON is None:
        return
    skip = pytest.mark.skip(reason=f"GPU tests: {_REASON}")
    for item in items:
        if "tests/gpu/" in item.nodeid.replace("\\", "/") or item.get_closest_marker("gpu"):
            item.add_marker(skip)


_backends: dict = {}
# the per-wave kernels' test strategies: launch fields over the table's own
PER_WAVE_LAUNCH = {"per-wave": "", "per-wave-ordered": "lane_fold=0",
                 "per-wave-stretch": "interleave=0", "per-wave-whole-wave": "group=1",
                 "per-wave-group4": "group=4,interleave=0",
                 # per_wave_staged: chunks of 512 bytes (several per batch of the test
                 # arrays), every batch staged unless it holds a list over 16
                 "per-wave-staged": "stage_bytes=512,stage_min=0,stage_max=16",
                 # long_tail (streamed lists through the block's queue), the
                 # table's launch
                 "long-tail": ""}


@pytest.fixture(scope="package")  # once for every test below this folder
def gpu_backend_factory():
    """GPUBackend per strategy, created once per test run (modules compile once). The
    strategy's own kernels run on every input: ``short_lists=0`` and
    ``long_list_kernel="flat"`` turn off the table's per-list mappings (which have their
    own test), so the test arrays exercise the flattened kernels; "per-thread-staged"
    runs the per_thread_staged kernel on every input instead, "per-wave" the per_wave kernel
    (short lists one per lane, medium ones by groups of lanes, longer ones by the whole wave,
    each lane folding its share of a list's tiles), "per-wave-ordered" the per_wave kernel with
    one ordered wave reduction per tile (``lane_fold=0``, what the lane-folded kernel falls
    back to for min/max of floats at zero), "per-wave-stretch" the lane-folded kernel whose lanes read a contiguous
    stretch of each tile each (``interleave=0``; the table's rows interleave them),
    "per-wave-whole-wave" the whole wave streaming medium lists too (``group=1``; the table
    gives them 8 lanes each), "per-wave-group4" medium lists 4 lanes each, longer ones
    read in stretches, "per-wave-staged" per_wave_staged (batches of lists read
    through shared memory, ``stage_bytes``) and "long-tail" the long_tail kernel (the
    lists a wave would stream queued in the block's shared memory, taken by any wave)."""
    from gpuexec.kernels.gpu.backend import GPUBackend
    from gpuexec.kernels.gpu.plan import PlanRequest

    def make(strategy: str):
        if strategy not in _backends:
            if strategy in ("per-thread-staged",) + tuple(PER_WAVE_LAUNCH):  # a per-list kernel
                kernel = {"per-thread-staged": "per_thread_staged",
                          "per-wave-staged": "per_wave_staged",
                          "long-tail": "long_tail"}.get(strategy, "per_wave")
                launch = None
                if PER_WAVE_LAUNCH.get(strategy):
                    launch = ";".join(f"{role}:{PER_WAVE_LAUNCH[strategy]}" for role in
                                      ("per_wave", "per_wave:argmin", "per_wave:argmax"))
                _backends[strategy] = GPUBackend(plan=PlanRequest(
                    strategy="fused", short_lists=float("inf"), per_list_kernel=kernel,
                    launch=launch))
            else:  # the strategy's flattened kernels whatever the mean list length
                _backends[strategy] = GPUBackend(plan=PlanRequest(
                    strategy=strategy, short_lists=0, long_list_kernel="flat"))
        return _backends[strategy]

    return make
