"""Experiment (thirty-eighth session): long lists one block each, from a list of them that
the offsets check could remember, short lists one per thread; against the shipped kernel,
a device copy and CuPy's plain read of the content, timed in turns on the mixed lengths.
The kernels: ``long_blocks_probe.cu``.

The question: the shipped kernels hold 64 registers per thread (half the warps of an SM),
and Nsight Compute put that occupancy at the root of the mixed-length gap to a plain read.
A block per long list needs few registers and keeps a whole list in flight at once."""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--elements", type=int, default=100_000_000)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--out", default=None)
    args = p.parse_args()

    import cupy as cp
    import numpy as np
    from _gputime import CopyAnchor, wall_median
    from gpu_reduce import datasets

    from gpuexec.kernels import validate
    from gpuexec.kernels.gpu.backend import GPUBackend

    names = [f"{k}<{b},{u}>" for k, b, u in
             [("long_sum", 128, 1), ("long_sum", 128, 2), ("long_sum", 128, 4),
              ("long_sum", 256, 1), ("long_sum", 256, 2), ("long_sum", 64, 4),
              ("both_sum", 128, 2), ("both_sum", 256, 1), ("both_sum", 128, 4)]]
    names += ["short_sum<128>", "short_sum<256>"]
    with open(os.path.join(HERE, "long_blocks_probe.cu")) as fh:
        mod = cp.RawModule(code=fh.read(), options=("-std=c++17",), name_expressions=names)
    kern = {n: mod.get_function(n) for n in names}
    for n, k in kern.items():
        print(f"{n}: {k.num_regs} registers, {k.local_size_bytes} local bytes", flush=True)

    be = GPUBackend()
    shipped = be.kernel("reduce_sum", "float64")
    copy = CopyAnchor(cp, args.elements)
    rows = []
    for dist in ("mixed", "mixed3", "mixed30", "poisson300"):
        offsets, content = datasets(cp, args.elements, 1, names=(dist,))[dist]
        checked = offsets.copy()
        validate.offsets(checked, content.shape[0])
        n = offsets.shape[0] - 1
        counts = offsets[1:] - offsets[:-1]
        T = 32
        long_idx = cp.nonzero(counts > T)[0].astype(cp.int32)
        by_len = long_idx[cp.argsort(-counts[long_idx], kind="stable")]
        n_long = int(long_idx.shape[0])
        out = cp.empty(n, dtype=cp.float64)
        want = shipped(checked, content)
        nbytes = content.nbytes + offsets.nbytes + 8 * n

        def two(bl, u, bs):
            lk, sk = kern[f"long_sum<{bl},{u}>"], kern[f"short_sum<{bs}>"]

            def f():
                if n_long:
                    lk((n_long,), (bl,), (offsets, content, out, long_idx))
                sk(((n + bs - 1) // bs,), (bs,), (offsets, content, out, np.int64(n),
                                                  np.int64(T)))
            return f

        def one(b, u, order):
            k = kern[f"both_sum<{b},{u}>"]
            grid = n_long + (n + b - 1) // b

            def f():
                k((grid,), (b,), (offsets, content, out, order, np.int32(n_long), np.int64(n),
                                  np.int64(T)))
            return f

        fns = {"shipped": lambda: shipped(checked, content),
               "cupy read": lambda: content.sum(),
               "two 128x1": two(128, 1, 128), "two 128x2": two(128, 2, 128),
               "two 128x4": two(128, 4, 128), "two 256x1": two(256, 1, 256),
               "two 256x2": two(256, 2, 256), "two 64x4": two(64, 4, 128),
               "one 128x2": one(128, 2, long_idx), "one 128x2 longest first": one(128, 2, by_len),
               "one 256x1 longest first": one(256, 1, by_len),
               "one 128x4 longest first": one(128, 4, by_len)}
        errors = {}
        for name, fn in fns.items():
            if name in ("shipped", "cupy read"):
                continue
            out.fill(cp.nan)
            fn()
            bad = ~cp.isclose(out, want, rtol=1e-11, atol=1e-9)
            errors[name] = int(bad.sum())
        times = copy.timed(fns, reps=args.reps)
        bw = copy.bytes / copy.seconds[-1]
        walls = {name: wall_median(fns[name], cp.cuda.runtime.deviceSynchronize, 101, 10)
                 for name in ("shipped", "two 128x2", "one 128x2 longest first")}
        row = {"dist": dist, "lists": n, "long_lists": n_long, "copy_GBps": bw / 1e9,
               "seconds": times, "pct_copy": {k: 100 * nbytes / t / bw for k, t in times.items()},
               "wall_seconds": walls, "mismatches": errors}
        rows.append(row)
        print(f"\n{dist}: {n} lists, {n_long} longer than {T}; copy {bw / 1e9:.0f} GB/s")
        for k, t in times.items():
            extra = f"  mismatches {errors[k]}" if k in errors else ""
            print(f"  {k:28s} {1e6 * t:8.1f} us  {100 * nbytes / t / bw:6.1f} % of copy{extra}")
        for k, t in walls.items():
            print(f"  wall {k:23s} {1e6 * t:8.1f} us")
        cp.get_default_memory_pool().free_all_blocks()
    gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"device": gpu, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
