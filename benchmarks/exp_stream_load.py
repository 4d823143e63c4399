"""Experiment (thirty-ninth session): the cache hint of the 128-bit loads with which the
hybrid and shared kernels stream long lists (``GK_STREAM_LOAD`` in reduce.cu, its values
in ``strategies.STREAM_LOADS``). Before it, on the mixed lengths the sum read at 93-96 % of
copy bandwidth, while CuPy's full sum of the same content read at 104-108 %.

Each variant is the shipped compile unit with ``GK_STREAM_LOAD`` set to another value of
the table, launched with the very arguments the shipped call used (its kernel chosen by
the table after the offsets check a public call makes), timed in turns with the shipped
kernel and a device copy; every variant's output must equal the shipped one bit for bit
(same order of operations).

    python benchmarks/exp_stream_load.py [--out exp_stream_load.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# a per-list launch's arguments are (*leading six, identity, out, empty) (GPUBackend._reducer)
OUT_ARG = 7


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=None)
    p.add_argument("--elements", type=int, default=100_000_000)
    p.add_argument("--reps", type=int, default=15)
    args = p.parse_args()

    import cupy as cp
    import numpy as np
    from _gputime import CopyAnchor, launches_of
    from gpu_reduce import datasets

    from gpuexec.kernels import validate
    from gpuexec.kernels.gpu import catalog as S
    from gpuexec.kernels.gpu.units import unit_for
    from gpuexec.kernels.gpu.backend import GPUBackend

    be = GPUBackend()
    anchor = CopyAnchor(cp, args.elements)
    stream = cp.cuda.get_current_stream().ptr
    data = datasets(cp, args.elements, 7, names=("mixed", "mixed30", "poisson300"))
    res = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
           "variants": S.STREAM_LOADS, "rows": []}
    for dist, (offsets, content) in data.items():
        validate.offsets(offsets, content.shape[0])  # what a public call does first
        n = offsets.shape[0] - 1
        nbytes = content.nbytes + offsets.nbytes + 8 * n
        for contract in ("reduce_sum", "reduce_argmax"):
            op = S.OPS_BY_CONTRACT[contract]
            kern = be.kernel(contract, "float64")
            kern.remembered.forget(offsets, content)
            shipped_out, captured = launches_of(be, lambda: kern(offsets, content))
            name, fn, grid, block, launch_args = captured[-1]
            unit = unit_for(be.plan.per_list_plan(), op)
            shipped = unit.defines["GK_STREAM_LOAD"]
            # every other hint of the table (the shipped one is the "shipped" row)
            variants = {k: v for k, v in S.STREAM_LOADS.items() if k != shipped}
            outs, calls = {"shipped": shipped_out}, {}

            def call(f, a):
                return lambda: be.runtime.launch(f, grid, block, a, stream)

            calls["shipped"] = call(fn, launch_args)
            for v in variants:
                variant = dataclasses.replace(unit, defines={**unit.defines,
                                                             "GK_STREAM_LOAD": v})
                f = be.runtime.module(variant)[name]
                out = cp.empty_like(shipped_out)
                a = launch_args[:OUT_ARG] + (out.data.ptr,) + launch_args[OUT_ARG + 1:]
                outs[v] = out
                calls[v] = call(f, a)
                calls[v]()
            calls["cupy read"] = (lambda c=content: c.sum()) if contract == "reduce_sum" else None
            calls = {k: f for k, f in calls.items() if f is not None}
            times = anchor.timed(calls, reps=args.reps)
            cp.cuda.runtime.deviceSynchronize()
            ref = cp.asnumpy(shipped_out)
            for k, t in times.items():
                b = content.nbytes if k == "cupy read" else nbytes
                label = (f"shipped ({S.STREAM_LOADS[shipped]})" if k == "shipped"
                         else variants.get(k, k))
                row = {"dist": dist, "op": contract, "kernel": name, "variant": label,
                       "seconds": t, "bytes": b}
                if k in outs and k != "shipped":
                    row["identical"] = bool(np.array_equal(cp.asnumpy(outs[k]), ref))
                res["rows"].append(row)
    bw = anchor.bandwidth
    res["copy_GBps"] = bw / 1e9
    print(f"{res['device']}: copy {bw / 1e9:.0f} GB/s")
    print(f"{'lengths':<11}{'op':<14}{'kernel':<26}{'variant':<30}{'us':>8}{'% copy':>8}  same")
    for r in res["rows"]:
        r["pct_copy"] = 100 * r["bytes"] / r["seconds"] / bw
        print(f"{r['dist']:<11}{r['op']:<14}{r['kernel']:<26}{r['variant']:<30}"
              f"{1e6 * r['seconds']:>8.1f}{r['pct_copy']:>8.1f}  {r.get('identical', '')}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
