"""Device time of each kernel-level call of gpu_kernels.py, per strategy, without the host.

Below about 1M elements a call is host-bound: the time between back-to-back calls
(`gpu_kernels.py`'s kernel columns) is mostly Python issuing it and, for the calls that
size their output, a device->host read. Whether the fused / split strategies do more
*device* work than the one-list-per-thread kernel is a question for the GPU's own clock.
This script measures it with Nsight Compute's per-kernel duration
(`gpu__time_duration.sum`; every kernel of the call, gpuexec's and CuPy's, summed),
caches and clocks left as they are:

    ncu --csv --print-units base --metrics gpu__time_duration.sum --cache-control none \\
        --clock-control none --profile-from-start off --log-file $OUT/ncu.csv \\
        python3 benchmarks/gpu_device_time.py run --plan $OUT/plan.json
    python3 benchmarks/gpu_device_time.py report --plan $OUT/plan.json --ncu $OUT/ncu.csv \\
        --out $OUT/gpu_device_time.json

``run`` warms each call outside the profiled range; inside it, ``--reps`` times, it runs
each call twice in a row (the second is measured: its inputs are where the call left them,
in L2 when they fit) with a marker kernel before each, and writes the order of the calls
(the plan); ``report``
splits ncu's kernel list at the markers and prints, per input and call, the median device
time of each strategy and its ratio to the naive strategy's. The same inputs as
gpu_kernels.py (its Data, with its seeds).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

STRATEGIES = ("fused", "split", "naive")
MARKER = "gpuexec_call_marker"


def run(args) -> None:
    import cupy as cp

    from gpu_kernels import EXTRA, FIG2, POISSON_ONLY, Data, _api_cases

    from gpuexec.kernels.gpu.backend import GPUBackend

    from gpuexec.kernels.gpu.plan import PlanRequest

    marker = cp.RawKernel(f'extern "C" __global__ void {MARKER}() {{}}', MARKER)
    backends = {s: GPUBackend(plan=PlanRequest(strategy=s)) for s in STRATEGIES}
    cases = _api_cases()
    # --only may also name the cases outside the figure's table (other element widths)
    names = args.only.split(",") if args.only else FIG2 + EXTRA
    unknown = [k for k in names if k not in cases]
    if unknown:
        raise SystemExit(f"unknown calls {unknown}; known: {', '.join(cases)}")
    plan = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": {"gpu": backends["naive"].device.name,
                        "arch": backends["naive"].device.arch, "host": platform.node()},
            "reps": args.reps, "inputs": [], "calls": []}
    inputs = []
    for spec in args.inputs.split(","):
        dist, n_el = spec.split(":")
        d = Data(int(n_el), dist, seed=11 + int(n_el) % 997)  # gpu_kernels.py's seed
        inputs.append((dist, d))
        plan["inputs"].append({"dist": dist, "elements": d.elements, "lists": d.n})
    calls = []
    for dist, d in inputs:
        for name in names:
            if dist != "poisson5" and name in POISSON_ONLY:
                continue
            for s in STRATEGIES:
                fn, _ = cases[name][1](backends[s], d.buffers(), d)
                fn()  # compile and warm outside the profiled range
                fn()
                calls.append(({"dist": dist, "elements": d.elements, "kernel": name,
                               "strategy": s}, fn))
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.profiler.start()
    for rep in range(args.reps):
        # each call runs twice and is measured the second time: the first run after a
        # different call finds its inputs outside L2 (a first run of ncu's log had the
        # strategy that came first up to 1.5x slower on L2-sized inputs)
        for meta, fn in calls:
            for warm in (True, False):
                marker((1,), (1,), ())
                fn()
                plan["calls"].append(dict(meta, rep=rep, warm=warm))
    marker((1,), (1,), ())
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.profiler.stop()
    Path(args.plan).write_text(json.dumps(plan, indent=1))
    print(f"{len(plan['calls'])} calls profiled; plan in {args.plan}")


def _ncu_kernels(path: str) -> list[tuple[str, float]]:
    """(kernel name, duration in seconds) in launch order from ncu's CSV."""
    with open(path) as f:
        lines = [ln for ln in f if ln.startswith('"')]  # ncu's own log lines start with ==
    rows = {}
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = row.get("Metric Unit", "nsecond")
        scale = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3,
                 "msecond": 1e-3, "s": 1.0, "second": 1.0}[unit]
        value = float(row["Metric Value"].replace(",", ""))
        rows[int(row["ID"])] = (row["Kernel Name"], value * scale)
    return [rows[k] for k in sorted(rows)]


def report(args) -> None:
    plan = json.loads(Path(args.plan).read_text())
    kernels = _ncu_kernels(args.ncu)
    cuts = [i for i, (name, _) in enumerate(kernels) if name.startswith(MARKER)]
    if len(cuts) != len(plan["calls"]) + 1:
        raise SystemExit(f"{len(cuts)} markers in the ncu log for {len(plan['calls'])} calls")
    times: dict = {}
    for k, meta in enumerate(plan["calls"]):
        if meta.get("warm"):
            continue
        launched = kernels[cuts[k] + 1:cuts[k + 1]]
        key = (meta["dist"], meta["elements"], meta["kernel"])
        entry = times.setdefault(key, {s: [] for s in STRATEGIES})
        entry[meta["strategy"]].append((sum(t for _, t in launched), [n for n, _ in launched]))
    rows = []
    print(f"{'input':<22}{'call':<22}" + "".join(f"{s + ' us':>12}" for s in STRATEGIES)
          + f"{'fused/naive':>13}{'split/naive':>13}")
    for (dist, elements, name), entry in times.items():
        row = {"dist": dist, "elements": elements, "kernel": name, "device_seconds": {},
               "launches": {}}
        for s in STRATEGIES:
            if entry[s]:
                row["device_seconds"][s] = float(np.median([t for t, _ in entry[s]]))
                row["launches"][s] = entry[s][0][1]
        naive = row["device_seconds"].get("naive")
        for s in ("fused", "split"):
            if naive and s in row["device_seconds"]:
                row[f"{s}_over_naive"] = row["device_seconds"][s] / naive
        rows.append(row)
        print(f"{dist + ' ' + format(elements, ','):<22}{name:<22}"
              + "".join(f"{1e6 * row['device_seconds'].get(s, float('nan')):>12.1f}"
                        for s in STRATEGIES)
              + "".join(f"{row.get(f'{s}_over_naive', float('nan')):>13.2f}"
                        for s in ("fused", "split")))
    over = [r for r in rows if any(r.get(f"{s}_over_naive", 0) > 1.02 for s in ("fused", "split"))]
    print(f"\ncalls whose device time is more than 2 % over naive's (either strategy): "
          f"{len(over)} of {len(rows)}")
    out = dict(plan, benchmark="gpu_device_time", rows=rows, calls=None)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print("wrote", args.out)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="step", required=True)
    r = sub.add_parser("run", help="the profiled calls (under ncu)")
    r.add_argument("--plan", required=True)
    r.add_argument("--inputs", default="poisson5:2000,poisson5:121332,poisson5:1000000,"
                                       "mixed:1000000",
                   help="dist:elements,... (gpu_kernels.py's L1, L2 and 1M inputs)")
    r.add_argument("--reps", type=int, default=3)
    r.add_argument("--only", default=None)
    p = sub.add_parser("report", help="device time per call and strategy from ncu's CSV")
    p.add_argument("--plan", required=True)
    p.add_argument("--ncu", required=True)
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."),
                                                  "gpu_device_time.json"))
    args = ap.parse_args()
    run(args) if args.step == "run" else report(args)


if __name__ == "__main__":
    main()
