"""Filter kernel time against list count and mean length on the GPU: the measurement
behind the strategy table's per-list window for the filter (``family_per_list``).

For Poisson(2), Poisson(5) and Poisson(10) list lengths and 0.1M..20M lists (70 % of the
mask kept), the device time (CUDA events) of the ``filter`` kernel call of the fused,
split and naive backends, each forced to its own kernels (``short_lists=0``: no window),
beside the default backend (the table's choice). Prints a table and writes JSON.

    python benchmarks/gpu_filter_sweep.py [--out benchmarks/results/gpu_filter_sweep.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _gputime import event_time  # noqa: E402

CASES = {"poisson5": (5, (100_000, 400_000, 1_000_000, 2_000_000, 4_000_000, 8_000_000,
                          20_000_000)),
         "poisson2": (2, (1_000_000, 4_000_000, 20_000_000)),
         "poisson10": (10, (1_000_000, 4_000_000, 20_000_000))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gpu_filter_sweep.json"))
    args = ap.parse_args()

    import cupy as cp

    from gpuexec.kernels.gpu.backend import GPUBackend

    own = {s: GPUBackend(strategy=s, short_lists=0) for s in ("fused", "split", "naive")}
    default = GPUBackend()
    dev = default.device
    result = {"benchmark": "gpu_filter_sweep",
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": {"gpu": dev.name, "arch": dev.arch, "host": platform.node(),
                          "host_cores": len(os.sched_getaffinity(0))},
              "default_strategy": default.strategy,
              "window": {k: [vars(w) for w in v] for k, v in default.plan.family_per_list.items()},
              "rows": []}
    rng = np.random.default_rng(3)
    print(f"# {dev.name} ({dev.arch}); filter kernel ms (device time), 70 % kept")
    print(f"{'lengths':>10} {'lists':>11} {'elements':>12} {'fused':>7} {'split':>7} "
          f"{'naive':>7} {'table':>7}  fused/naive split/naive  table runs")
    for dist, (mean, list_counts) in CASES.items():
        for lists in list_counts:
            counts = cp.asarray(rng.poisson(mean, lists))
            off = cp.zeros(lists + 1, dtype=cp.int64)
            cp.cumsum(counts, out=off[1:])
            m = int(off[-1])
            mask = cp.random.random(m) < 0.7
            row = {"dist": dist, "lists": lists, "elements": m, "ms": {}}
            for name, be in list(own.items()) + [("table", default)]:
                k = be.kernel("filter")
                row["ms"][name] = event_time(cp, lambda: k(off[:-1], off[1:], off, mask), 10) * 1e3
            row["table_per_list"] = default.plan.family_runs_per_list("filter", lists, m)
            ms = row["ms"]
            print(f"{dist:>10} {lists:>11,} {m:>12,} {ms['fused']:7.3f} {ms['split']:7.3f} "
                  f"{ms['naive']:7.3f} {ms['table']:7.3f}  {ms['fused'] / ms['naive']:11.2f} "
                  f"{ms['split'] / ms['naive']:11.2f}  "
                  f"{'per-list' if row['table_per_list'] else default.strategy}", flush=True)
            result["rows"].append(row)
            del counts, off, mask
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"# wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
