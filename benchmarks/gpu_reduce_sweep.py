"""Reduction kernels under backend variants, side by side in one run (the strategy table's
launch and kernel choices come from these).

Each variant is a label and the keyword arguments of a ``GPUBackend`` (strategy, ``launch``
overrides such as ``"hybrid:block=64,min_blocks=20"``, ``short_lists``, ``per_list_kernel``,
``long_list_kernel``, ``few_long``, ``tail_lists``; and ``"checked": true``: the variant's
kernels get offsets that passed the API layer's check, which remembers their longest list
and long lists, as a public call's do). Prints which kernels each variant launched, and the
check's own time per distribution. For 100M elements in Poisson(5) lists and in mixed
lengths (the data of gpu_reduce.py; ``--dists`` names others), float64 and int64, it times
sum, max, count_nonzero and argmax under every variant, the variants and a device copy timed
in turns (``_gputime.CopyAnchor``), as % of the copy bandwidth measured in the same run
(bytes = content + offsets + output), and checks each result against the first variant's.

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

import numpy as np

from _gputime import CopyAnchor
from gpu_reduce import datasets

OPS = [("sum", "reduce_sum"), ("max", "reduce_max"), ("count_nonzero", "reduce_countnonzero"),
       ("argmax", "reduce_argmax")]
DTYPES = ("float64", "int64")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("variants", help="JSON list of [label, GPUBackend keyword arguments], or a file")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "gpu_reduce_sweep.json"))
    ap.add_argument("--elements", type=int, default=100_000_000)
    ap.add_argument("--dists", default="poisson5,mixed",
                    help="list-length distributions (gpu_reduce.datasets: poisson<k>, mixed)")
    args = ap.parse_args()
    text = args.variants
    variants = json.loads(open(text).read() if os.path.exists(text) else text)

    import cupy as cp

    import gpuexec.kernels as gk
    from gpuexec.kernels import validate
    from gpuexec.kernels.gpu.backend import GPUBackend

    data = datasets(cp, args.elements, 7, args.dists.split(","))
    checks = []  # the offsets check's own time, per distribution
    anchor = CopyAnchor(cp, args.elements)
    checked = {label for label, kwargs in variants if kwargs.get("checked")}
    backends = {label: GPUBackend(**{k: v for k, v in kwargs.items() if k != "checked"})
                for label, kwargs in variants}
    device = next(iter(backends.values())).device
    print(f"{device.name} ({device.arch})", flush=True)
    rows = []
    for dist, (offsets, content) in data.items():
        n = offsets.shape[0] - 1
        nbytes = content.nbytes + offsets.nbytes + 8 * n
        offsets_checked = None
        if checked:  # another buffer: the others' offsets stay unchecked
            offsets_checked = offsets.copy()
            validate.offsets(offsets_checked, content.shape[0])
            checks.append(check_seconds(validate, offsets_checked, content.shape[0], dist))
        for dtype in DTYPES:
            values = content if dtype == "float64" else (content * 100).astype(cp.int64)
            for fname, contract in OPS:
                extra = ()
                if fname == "max":  # the identity of empty lists
                    extra = (-np.inf if dtype == "float64" else np.iinfo(np.int64).min,)
                calls, results, launched = {}, {}, {}
                for label, backend in backends.items():
                    kernel = backend.kernel(contract, dtype)
                    off = offsets_checked if label in checked else offsets
                    calls[label] = (lambda k=kernel, off=off: k(off, values, *extra))
                    with gk.counting() as seen:
                        results[label] = cp.asnumpy(calls[label]())
                    launched[label] = [k for k in seen["kernels"] if k.startswith("gk_")]
                times = anchor.timed(calls)  # every variant and the copy in turns
                first = next(iter(results.values()))
                for label, t in times.items():
                    got = results[label]
                    agrees = bool(np.allclose(got, first, rtol=1e-9, equal_nan=True)
                                  if fname == "sum" and dtype == "float64"
                                  else np.array_equal(got, first, equal_nan=True))
                    rows.append({"variant": label, "dist": dist, "dtype": dtype, "op": fname,
                                 "seconds": t, "bytes": nbytes, "agrees": agrees,
                                 "kernels": launched[label],
                                 "copy_seconds": anchor.seconds[-1]})
    copy_bw, copied, copy_times = anchor.bandwidth, anchor.bytes, anchor.seconds
    for r in rows:  # against the copy of the same rotation and against the run's median
        r["pct_copy"] = 100 * r["bytes"] / r["seconds"] / copy_bw
        r["pct_copy_same_turns"] = 100 * r["bytes"] / r["seconds"] / (copied / r["copy_seconds"])
    print(f"copy {copy_bw / 1e9:.0f} GB/s (median of {len(copy_times)}; "
          f"{copied / max(copy_times) / 1e9:.0f}-{copied / min(copy_times) / 1e9:.0f})")
    width = max(len(label) for label in backends)
    for r in rows:
        print(f"{r['variant']:{width}s} {r['dist']:8s} {r['dtype']:7s} {r['op']:13s} "
              f"{r['seconds'] * 1e3:7.3f} ms {r['pct_copy']:5.1f} % "
              f"({r['pct_copy_same_turns']:5.1f} % of its turns' copy)"
              + f" {','.join(k.split('_')[-1] for k in r['kernels'])}"
              + ("" if r["agrees"] else "  DISAGREES with the first variant"), flush=True)
    for c in checks:
        print(f"offsets check {c['dist']:12s} {c['lists']:>11,} lists: {c['check_ms']:.3f} ms; "
              f"longest {c['longest']}, "
              f"{c['long_lists']} long")
    result = {"machine": {"gpu": device.name, "arch": device.arch, "host": platform.node()},
              "copy_GBps": copy_bw / 1e9, "copy_GBps_each": [copied / t / 1e9 for t in copy_times],
              "elements": args.elements, "variants": variants,
              "rows": rows, "offsets_checks": checks}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote", args.out)
    if any(r["agrees"] is False for r in rows):
        raise SystemExit("some variant disagrees with the first one")


def check_seconds(validate, offsets, content_length: int, dist: str, reps: int = 5) -> dict:
    """The API layer's offsets check (one summary launch and one host read: the order, the
    ends, the longest list and the long lists) on a device buffer, median of ``reps``."""
    import time

    seconds = []
    for _ in range(reps):
        validate._passed.forget(offsets)  # checked anew
        start = time.perf_counter()
        validate.offsets(offsets, content_length)
        seconds.append(time.perf_counter() - start)
    # the buffer keeps its longest list and count for the kernels
    return {"dist": dist, "lists": int(offsets.shape[0] - 1),
            "check_ms": sorted(seconds)[reps // 2] * 1e3,
            "longest": validate.longest_list(offsets), "long_lists": validate.long_lists(offsets)}


if __name__ == "__main__":
    main()
