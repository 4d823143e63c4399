"""Reduction kernels under backend variants, side by side in one run (the strategy table's
launch and kernel choices come from these).

Each variant is a label and the keyword arguments of a ``GPUBackend`` (strategy,
``launch`` overrides such as ``"hybrid:block=64,min_blocks=20"``, ``short_lists``,
``per_list_kernel``, ``long_list_kernel``). For 100M elements in Poisson(5) lists and in
mixed lengths (the data of gpu_reduce.py), float64 and int64, it times sum, max,
count_nonzero and argmax under every variant (device time per call of back-to-back calls,
benchmarks/_gputime.py) as % of the copy bandwidth measured in the same run (bytes =
content + offsets + output), and checks each result against the first variant's.

    python benchmarks/gpu_reduce_sweep.py '[["shipped", {}], ["hybrid 64x20",
        {"strategy": "fused", "short_lists": 1e9, "per_list_kernel": "hybrid",
         "launch": "hybrid:block=64,min_blocks=20"}]]' [--out sweep.json]

(the first argument may also name a JSON file holding that list)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

from _gputime import copy_bandwidth, event_time
from gpu_reduce import datasets

OPS = [("sum", "reduce_sum"), ("max", "reduce_max"), ("count_nonzero", "reduce_countnonzero"),
       ("argmax", "reduce_argmax")]
DTYPES = ("float64", "int64")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("variants", help="JSON list of [label, GPUBackend keyword arguments], or a file")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "gpu_reduce_sweep.json"))
    ap.add_argument("--elements", type=int, default=100_000_000)
    args = ap.parse_args()
    text = args.variants
    variants = json.loads(open(text).read() if os.path.exists(text) else text)

    import cupy as cp

    from gpuexec.kernels.gpu.backend import GPUBackend

    copy_bw = copy_bandwidth(cp, args.elements)
    data = datasets(cp, args.elements, 7)
    device = GPUBackend().device
    print(f"{device.name} ({device.arch}), copy {copy_bw / 1e9:.0f} GB/s", flush=True)
    rows, reference = [], {}
    for label, kwargs in variants:
        start = time.perf_counter()
        backend = GPUBackend(**kwargs)
        for dist, (offsets, content) in data.items():
            n = offsets.shape[0] - 1
            nbytes = content.nbytes + offsets.nbytes + 8 * n
            for dtype in DTYPES:
                values = content if dtype == "float64" else (content * 100).astype(cp.int64)
                for fname, contract in OPS:
                    kernel = backend.kernel(contract, dtype)
                    extra = ()
                    if fname == "max":  # the identity of empty lists
                        extra = (-np.inf if dtype == "float64" else np.iinfo(np.int64).min,)
                    call = lambda: kernel(offsets, values, *extra)  # noqa: E731
                    got = cp.asnumpy(call())
                    key = (dist, dtype, fname)
                    agrees = None
                    if key in reference:
                        agrees = bool(np.allclose(got, reference[key], rtol=1e-9, equal_nan=True)
                                      if fname == "sum" and dtype == "float64"
                                      else np.array_equal(got, reference[key], equal_nan=True))
                    else:
                        reference[key] = got
                    t = event_time(cp, call, reps=10)
                    rows.append({"variant": label, "dist": dist, "dtype": dtype, "op": fname,
                                 "seconds": t, "pct_copy": 100 * nbytes / t / copy_bw,
                                 "agrees": agrees})
                    print(f"{label:24s} {dist:8s} {dtype:7s} {fname:13s} {t * 1e3:7.3f} ms "
                          f"{rows[-1]['pct_copy']:5.1f} %"
                          + ("" if agrees is None else f"  agrees {agrees}"), flush=True)
        print(f"{label}: {time.perf_counter() - start:.1f} s", flush=True)
    result = {"machine": {"gpu": device.name, "arch": device.arch, "host": platform.node()},
              "copy_GBps": copy_bw / 1e9, "elements": args.elements, "variants": variants,
              "rows": rows}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote", args.out)
    if any(r["agrees"] is False for r in rows):
        raise SystemExit("some variant disagrees with the first one")


if __name__ == "__main__":
    main()
