"""The API layer's offsets check on fresh buffers: the engine's one-pass
``offsets_summary`` (``validate.offsets``: on a GPU one launch and one host read) against
the array-library passes it replaced (the nineteenth session's check: CuPy's or numpy's
compare/max/sum passes, one combined read), timed in turns in one run, plus what the
check adds to the first public ``gk.sum`` on a fresh array (against a repeated call,
whose check is remembered).

Wall time per check including the host read (the check ends in one), median of
``--reps`` calls; each call gets a new view of the offsets, so nothing is remembered.

    python benchmarks/offsets_check.py [--backend cuda|cpu] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import awkward as ak
import numpy as np

import gpuexec.kernels as gk
from gpuexec.kernels import validate

LISTS = (1_000, 100_000, 1_000_000, 33_000_000)


def array_passes(xp, offsets, content_length):
    """The replaced check (``validate.offsets`` up to 2026-12-01) on a valid buffer: the
    failure flag, the longest list and the long lists from compare/max/sum passes of the
    array library, stacked and read back once (the host read only the flag)."""
    n = offsets.shape[0] - 1
    checks = [offsets[0] < 0, offsets[n] > content_length,
              (offsets[1:] < offsets[:-1]).any()]
    if xp is np:
        return bool(xp.stack(checks).any())
    lengths = offsets[1:] - offsets[:-1]
    factor, floor = validate.LONG_LIST
    bound = xp.maximum((offsets[n] - offsets[0]) * (factor / n), floor)
    return xp.stack([xp.stack(checks).any().astype(np.int64), lengths.max().astype(np.int64),
                     (lengths > bound).sum().astype(np.int64)]).tolist()


def timed_in_turns(fns: dict, reps: int, sync) -> dict:
    """Median wall seconds of each function, called in turns (one call of each per round,
    the order rotated each round), after two untimed calls of each."""
    names = list(fns)
    for name in names:
        fns[name]()
        fns[name]()
    sync()
    times = {name: [] for name in names}
    for r in range(reps):
        for name in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            fns[name]()
            sync()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."),
                                                  "offsets_check.json"))
    args = ap.parse_args()
    if args.backend == "cuda":
        import cupy as xp

        def sync():
            xp.cuda.runtime.deviceSynchronize()

        props = xp.cuda.runtime.getDeviceProperties(xp.cuda.runtime.getDevice())
        where = props["name"].decode()
    else:
        xp = np

        def sync():
            pass

        where = platform.processor() or platform.machine()
    print(f"{where} on {platform.node()}: offsets check, wall time per call (us)", flush=True)
    rng = np.random.default_rng(5)
    rows = []
    head = (f"{'lists':>11} | {'summary':>9} | {'passes':>9} | {'ratio':>6} | "
            f"{'gk.sum first':>12} | {'gk.sum again':>12}")
    print(head + "\n" + "-" * len(head), flush=True)
    for n in LISTS:
        counts = rng.poisson(3, n)
        host = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=host[1:])
        offsets = xp.asarray(host)
        total = int(host[-1])
        content = xp.asarray(rng.normal(size=total))
        reps = args.reps if n <= 1_000_000 else max(20, args.reps // 10)

        def summary():
            validate.offsets(offsets.view(), total)

        def passes():
            array_passes(xp, offsets.view(), total)

        def fresh_array():
            return ak.Array(ak.contents.ListOffsetArray(
                ak.index.Index64(offsets.view()), ak.contents.NumpyArray(content)))

        kept = fresh_array()

        def sum_first():
            gk.sum(fresh_array(), axis=1)

        def sum_again():
            gk.sum(kept, axis=1)

        t = timed_in_turns({"summary": summary, "passes": passes, "sum_first": sum_first,
                            "sum_again": sum_again}, reps, sync)
        us = {k: v * 1e6 for k, v in t.items()}
        rows.append({"lists": n, "elements": total, "reps": reps,
                     **{f"{k}_us": round(v, 2) for k, v in us.items()},
                     "passes_over_summary": round(us["passes"] / us["summary"], 2)})
        print(f"{n:>11} | {us['summary']:>9.1f} | {us['passes']:>9.1f} | "
              f"{us['passes'] / us['summary']:>5.2f}x | {us['sum_first']:>12.1f} | "
              f"{us['sum_again']:>12.1f}", flush=True)
    result = {"machine": {"device": where, "host": platform.node(), "backend": args.backend},
              "what": "wall us per offsets check of a fresh buffer (summary kernel vs the "
                      "array-library passes it replaced) and per gk.sum on a fresh array "
                      "vs a repeated one; Poisson(3) lists; median, calls in turns",
              "rows": rows}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
