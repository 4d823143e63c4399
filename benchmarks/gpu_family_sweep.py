"""Kernel-family time against input size on the GPU: the measurement behind the strategy
table's per-list windows (``family_per_list``).

For each family (the kernel-level calls of ``gpu_kernels.py``), list-length distribution
and input size, the device time (CUDA events) of the fused and split backends forced to
their own kernels (``family_per_list={}``: no window), of the naive backend (one list per
thread, the "direct port"), and of the default backend (the table's choice), timed in
turns (``interleaved_time``). Prints a table and writes JSON.

    python benchmarks/gpu_family_sweep.py [--families sort,local_index] \\
        [--elements 250000,1000000,4000000] [--dists poisson5,mixed] [--out FILE]

The sixth session's filter sweep (``gpu_filter_sweep.json``: Poisson(2), (5), (10) lengths,
0.1M-20M lists) is ``--families filter --dists poisson2,poisson5,poisson10`` with the
element counts of those lists.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _gputime import interleaved_time  # noqa: E402
from gpu_kernels import POISSON_ONLY, Data, _api_cases  # noqa: E402

FAMILIES = ("sort", "argsort", "local_index", "filter", "combinations2", "combinations3",
            "carry", "missing_repeat", "compact_offsets")
ELEMENTS = (250_000, 500_000, 1_000_000, 2_000_000, 4_000_000, 8_000_000, 16_000_000)
VARIANTS = ("fused", "split", "naive", "table")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--elements", default=",".join(map(str, ELEMENTS)))
    ap.add_argument("--dists", default="poisson5,mixed")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gpu_family_sweep.json"))
    args = ap.parse_args()

    import cupy as cp

    from gpuexec.kernels.gpu.backend import GPUBackend

    from gpuexec.kernels.gpu.plan import PlanRequest

    backends = {"fused": GPUBackend(plan=PlanRequest(strategy="fused", family_per_list={})),
                "split": GPUBackend(plan=PlanRequest(strategy="split", family_per_list={})),
                "naive": GPUBackend(plan=PlanRequest(strategy="naive")), "table": GPUBackend()}
    default = backends["table"]
    dev = default.device
    families = [f for f in args.families.split(",") if f]
    cases = _api_cases()
    result = {"benchmark": "gpu_family_sweep",
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": {"gpu": dev.name, "arch": dev.arch, "host": platform.node(),
                          "host_cores": len(os.sched_getaffinity(0))},
              "default_strategy": default.strategy,
              "windows": {k: [vars(w) for w in v] for k, v in default.plan.family_per_list.items()},
              "rows": []}
    print(f"# {dev.name} ({dev.arch}); kernel ms (device time, in turns, median of "
          f"{args.reps}); default strategy {default.strategy}")
    print(f"{'family':<16}{'dist':>9}{'lists':>11}{'elements':>12}"
          + "".join(f"{v:>9}" for v in VARIANTS) + "  best/naive table/naive")
    for dist in args.dists.split(","):
        for n_el in map(int, args.elements.split(",")):
            d = Data(n_el, dist, seed=11 + n_el % 997)
            buffers = d.buffers()
            for family in families:
                if dist != "poisson5" and family in POISSON_ONLY:
                    continue
                calls = {v: cases[family][1](backends[v], buffers, d)[0] for v in VARIANTS}
                ms = {v: t * 1e3 for v, t in interleaved_time(cp, calls, reps=args.reps).items()}
                result["rows"].append({"family": family, "dist": dist, "lists": d.n,
                                       "elements": d.elements, "ms": ms})
                best = min(ms["fused"], ms["split"])
                print(f"{family:<16}{dist:>9}{d.n:>11,}{d.elements:>12,}"
                      + "".join(f"{ms[v]:9.4f}" for v in VARIANTS)
                      + f"  {best / ms['naive']:9.2f} {ms['table'] / ms['naive']:10.2f}",
                      flush=True)
            del d, buffers
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"# wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
