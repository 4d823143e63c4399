"""Call floor of the public API on a GPU: wall time of ``gk.sum(x, axis=1)`` on a
device-resident array of 1K lists returning a device ``ak.Array`` (median of 1000
calls), beside the bare kernel call, the median time of each stage of the call taken
alone (``stages_us``), and a profile of where the rest of the time goes.
``--backend cpu`` times the same stages on the host engine (the Python around the
kernel is the same code). Without a GPU, ``--backend cuda`` says so and exits 0.

    python benchmarks/call_floor.py [--calls 1000] [--json out.json] [--backend cuda]

Prints the stages and writes benchmarks/results/call_floor_<machine>_<date>.json with the
command, commit and machine. ``--smoke``: the CPU engine, 20 calls (seconds).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats

import awkward as ak
import numpy as np

import _common
import gpuexec.kernels as gk
from _gputime import wall_median


def median_us(fn, calls, sync):
    return wall_median(fn, sync, calls) * 1e6


def stages_us(x, backend, calls):
    """Median wall time of each step of ``gk.sum(x, axis=1)`` taken alone (no sync: the
    host cost of issuing it), in call order. Adoption is skipped for an array already on
    the backend, and the layout checks, ``list_offsets`` and ``skip_missing`` run on the
    first call on a layout only (``plain buffers`` is the lookup of their result)."""
    from gpuexec.kernels import dispatch
    from gpuexec.kernels.stats import record_call
    from gpuexec.kernels.api import _common as common
    from gpuexec.kernels.api import reductions as R
    from gpuexec.kernels.api._results import numpy_node

    layout = x.layout
    offsets, values, ak_backend = R._plain_buffers(layout, backend)
    kernel = backend.kernel("reduce_sum", values.dtype)
    out = kernel(offsets, values)
    node = numpy_node(out, ak_backend)
    steps = {
        "resolve (arrays -> backend)": lambda: dispatch.backend_of_arrays(
            common._arrays_of((x,), {"axis": 1})),
        "record_call": lambda: record_call("sum", backend.name),
        "plain buffers (remembered)": lambda: R._plain_buffers(layout, backend),
        "kernel lookup": lambda: backend.kernel("reduce_sum", values.dtype),
        "kernel call": lambda: kernel(offsets, values),
        "result node (numpy_node)": lambda: numpy_node(out, ak_backend),
        "wrap (plain ak.Array)": lambda: common.wrap(node, x, plain=True),
        # what the two steps above stand for: awkward's constructors
        "  NumpyArray(out)": lambda: ak.contents.NumpyArray(out, backend=ak_backend),
        "  ak.Array(node)": lambda: common.wrap(node, x),
    }
    if backend.name == "cuda":
        steps.update(_launch_parts(backend, kernel, offsets, values))
    noop = lambda: None  # noqa: E731
    for fn in steps.values():
        for _ in range(50):
            fn()
    return {name: median_us(fn, calls, noop) for name, fn in steps.items()}


def _launch_parts(backend, kernel, offsets, values):
    """The kernel call's parts on a CUDA device, each alone: the output from CuPy's pool,
    the current stream, our binding's launch (which packs the arguments, plain ints) and
    cuda-python's ``cuLaunchKernel`` on prepared parameters. The launch replayed is the
    one the kernel call made (captured at the runtime layer)."""
    import ctypes

    import cupy as cp
    from cuda.bindings import driver

    runtime = backend.runtime
    seen = []

    def capture(fn, grid, block, args, stream=0, shared=0):
        seen.append((fn, grid, block, args, stream, shared))

    runtime.launch = capture
    try:
        out = kernel(offsets, values)  # the replays write here: kept alive by them
    finally:
        del runtime.launch
    fn, grid, block, args, stream, shared = seen[-1]
    packed = [ctypes.c_int64(v) for v in args]  # what params points at: kept by the lambda
    params = (ctypes.c_void_p * len(packed))(*map(ctypes.addressof, packed))
    n = offsets.shape[0] - 1
    launch = runtime.bindings.launch
    return {
        "  output (alloc)": lambda: backend.alloc(n, values.dtype, "x"),
        "  current stream": lambda: cp.cuda.get_current_stream().ptr,
        "  binding launch": lambda out=out: launch(fn, grid, block, shared, stream, args),
        "  cuLaunchKernel": lambda out=out, packed=packed: driver.cuLaunchKernel(
            fn, grid, 1, 1, block, 1, 1, shared, stream, ctypes.addressof(params), 0),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--json", help="output (default: benchmarks/results/"
                        "call_floor_<machine>_<date>.json)")
    parser.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--smoke", action="store_true",
                        help="the CPU engine, 20 calls: checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.backend, args.calls = "cpu", min(args.calls, 20)
    if args.backend == "cuda" and _common.no_gpu():
        print(f"call_floor: {_common.no_gpu()}; nothing measured")
        return 0

    rng = np.random.default_rng(1)
    counts = rng.poisson(5, 1000)
    host = ak.unflatten(rng.normal(size=int(counts.sum())), counts)
    x = ak.to_backend(host, args.backend)
    backend = gk.get_backend(args.backend)
    if args.backend == "cpu":
        sync = lambda: None  # noqa: E731
    else:
        import cupy as cp

        sync = cp.cuda.runtime.deviceSynchronize
    offsets = backend.asarray(x.layout.offsets.data)
    values = backend.asarray(x.layout.content.data)
    kernel = backend.kernel("reduce_sum", values.dtype)
    for _ in range(20):  # compile, load, warm the pools
        gk.sum(x, axis=1)
        kernel(offsets, values)

    result = {
        "backend": backend.name,
        "public_gk_sum_us": median_us(lambda: gk.sum(x, axis=1), args.calls, sync),
        "public_gk_sum_no_sync_us": median_us(lambda: gk.sum(x, axis=1), args.calls,
                                              lambda: None),
        "kernel_only_us": median_us(lambda: kernel(offsets, values), args.calls, sync),
        "ak_sum_us": None,
    }
    try:
        result["ak_sum_us"] = median_us(lambda: ak.sum(x, axis=1), min(args.calls, 200), sync)
    except Exception as err:  # awkward's cuda reducers need cuda-cccl
        result["ak_sum_error"] = f"{type(err).__name__}: {err}"[:200]
    result["stages_us"] = stages_us(x, backend, args.calls)

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(200):
        gk.sum(x, axis=1)
    prof.disable()
    text = io.StringIO()
    profile = pstats.Stats(prof, stream=text)
    # Python and builtin function calls per public call: a host-independent measure
    result["python_calls_per_call"] = profile.total_calls / 200
    profile.sort_stats("cumulative").print_stats(25)
    profile.sort_stats("tottime").print_stats(25)  # where the time is spent, not passed on
    print(text.getvalue())
    result["profile"] = text.getvalue()
    for k, v in result.items():
        if k not in ("stages_us", "profile"):
            print(f"{k:>24}: {v}")
    for k, v in result["stages_us"].items():
        print(f"{k:>32}: {v:7.2f} us")
    out = args.json or _common.default_out("call_floor", args.smoke)
    with open(out, "w") as f:
        json.dump(_common.stamp(result), f, indent=1)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
