"""Call floor of the public API on a GPU: wall time of ``gk.sum(x, axis=1)`` on a
device-resident array of 1K lists returning a device ``ak.Array`` (median of 1000
calls), beside the bare kernel call, and a profile of where the rest of the time goes.

    python benchmarks/call_floor.py [--calls 1000] [--json out.json]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import time

import awkward as ak
import numpy as np

import gpuexec.kernels as gk


def median_us(fn, calls):
    import cupy as cp

    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        cp.cuda.runtime.deviceSynchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--json")
    args = parser.parse_args()

    rng = np.random.default_rng(1)
    counts = rng.poisson(5, 1000)
    host = ak.unflatten(rng.normal(size=int(counts.sum())), counts)
    x = ak.to_backend(host, "cuda")
    backend = gk.get_backend("cuda")
    offsets = backend.asarray(x.layout.offsets.data)
    values = backend.asarray(x.layout.content.data)
    kernel = backend.kernel("reduce_sum", values.dtype)
    for _ in range(20):  # compile, load, warm the pools
        gk.sum(x, axis=1)
        kernel(offsets, values)

    result = {
        "public_gk_sum_us": median_us(lambda: gk.sum(x, axis=1), args.calls),
        "kernel_only_us": median_us(lambda: kernel(offsets, values), args.calls),
        "ak_sum_cuda_us": None,
    }
    try:
        result["ak_sum_cuda_us"] = median_us(lambda: ak.sum(x, axis=1), min(args.calls, 200))
    except Exception as err:  # awkward's cuda reducers need cuda-cccl
        result["ak_sum_cuda_error"] = f"{type(err).__name__}: {err}"[:200]

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(200):
        gk.sum(x, axis=1)
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(25)
    print(text.getvalue())
    for k, v in result.items():
        print(f"{k:>24}: {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
