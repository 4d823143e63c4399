"""The paper's kernel benchmark on the GPU: the twelve Figure-2 kernels plus carry,
argsort and combinations (n = 2, 3), side by side in one run on one machine.

Per kernel, at three cache-sized inputs (the host's L1d, L2 and twice its L3, as in
benchmarks/cpu_kernels.py), 1M and 100M elements (Poisson(5) list lengths; mixed lengths
(90% Poisson(3), 10% uniform 100..2000) at 1M and 100M for the device-side rows):

  kernel   the buffer-level kernel on device buffers, CUDA-event time, for the strategy
           table's default (fused on NVIDIA), split and the naive one-thread-per-list
           kernel (the "direct port"), the three timed in turns; GB/s = bytes read +
           written / time, and % of the device copy bandwidth measured in the same run;
  device   the public gk call on a device-resident ak.Array, result left on the device
           (wall time, synchronised);
  e2e      the public call on a host ak.Array with the host copy in and out
           (gk.X(host, backend=gpu, to="host"), pinned staging) -- the paper's GPU timing;
  ak.cuda  awkward's own "cuda" backend on the device array, where it runs;
  gk.cpu   gpuexec's CPU engine on all host cores;  ak.cpu  awkward on the host.

Reported: the table (ms, GB/s, % copy, speedups), per-kernel call floor (device call on 1K
lists, median of many) and GPU/CPU crossover (smallest input where e2e beats gk.cpu,
interpolated log-log between measured sizes), JSON and a PNG of the e2e GPU/CPU speedups
at 1M and at 100M beside the paper's Figure 1. Slow host contenders are capped (see
CPU_CAP) and a wall-clock budget skips what does not fit, with a note (never faked).

    python benchmarks/gpu_kernels.py [--out FILE.json] [--plot FILE.png] [--budget 300]
        [--quick | --smoke]

Writes benchmarks/results/gpu_kernels_<machine>_<date>.{json,png}, the JSON with the
command, commit and machine. ``--smoke``: small sizes, a 60 s budget. Without a GPU it
says so and exits 0.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
import traceback
from pathlib import Path

from _gputime import awkward_cuda_extras, event_time, interleaved_time

NUMBA_CUDA_MLIR = awkward_cuda_extras()

import numpy as np  # noqa: E402


ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import _common  # noqa: E402  (benchmarks/, the script's folder)
from benchmarks.cpu_kernels import _sysfs_caches  # noqa: E402

#: the paper's Figure 1 (2x MI210 vs 128 EPYC 7763 cores, large input, PCIe copy included)
PAPER_SPEEDUP = {"reduce_count": 12.5, "reduce_countnonzero": 9.5, "reduce_argmax": 5.6,
                 "reduce_argmin": 5.4, "reduce_max_i64": 5.2, "reduce_min_i64": 5.0,
                 "reduce_prod_i64": 4.8, "reduce_sum_i64": 1.03}
BYTES_PER_ELEMENT = 8 + 3 * 8 / 5
FLOOR_LISTS = 1000
#: largest input (elements) at which a host contender runs for these kernels (the
#: combinatorial outputs and awkward's sort take seconds to minutes beyond it)
CPU_CAP = {"argsort": 10_000_000, "sort": 10_000_000, "combinations2": 10_000_000,
           "combinations3": 1_000_000}
E2E_CAP = {"combinations3": 10_000_000}
AK_CUDA_CAP = {"combinations3": 10_000_000}
#: combinations of the mixed lengths' long lists (C(2000, 3) ~ 1.3e9 per list) do not fit
POISSON_ONLY = {"combinations2", "combinations3"}


# -- data ------------------------------------------------------------------------------------
def lengths(rng, n_elements: int, dist: str) -> np.ndarray:
    if dist.startswith("poisson"):  # "poisson5", "poisson2", ...: Poisson(k) lengths
        mean = float(dist[len("poisson"):])
        return rng.poisson(mean, max(int(n_elements / mean), 1))
    mean = 0.9 * 3 + 0.1 * (100 + 2000) / 2
    n = max(int(n_elements / mean), 1)
    long = rng.random(n) < 0.1
    return np.where(long, rng.integers(100, 2001, n), rng.poisson(3.0, n))


class Data:
    """Host arrays of one input and, lazily, their device copies and kernel buffers."""

    def __init__(self, n_elements: int, dist: str, seed: int):
        import awkward as ak

        rng = np.random.default_rng(seed)
        counts = lengths(rng, n_elements, dist)
        self.offsets = np.zeros(counts.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=self.offsets[1:])
        total = int(self.offsets[-1])
        self.n = counts.shape[0]
        self.elements = total
        self.values = {"float64": rng.normal(50.0, 20.0, total),
                       "int64": rng.integers(-20, 100, total),
                       "bool": rng.random(total) < 0.7}

        def lists(v):
            return ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(self.offsets),
                                                        ak.contents.NumpyArray(v)))

        self.host = {dt: lists(v) for dt, v in self.values.items()}
        self.host["sliced"] = self.host["float64"][::2]
        self.host["pick"] = ak.argmax(self.host["float64"], axis=1, keepdims=True)
        self.host["events"] = ak.Array(rng.permutation(self.n).astype(np.int64))
        self._dev = None
        self._buf = None

    def dev(self):
        import awkward as ak

        if self._dev is None:
            self._dev = {k: ak.to_backend(v, "cuda") for k, v in self.host.items()}
        return self._dev

    def buffers(self):
        """Device buffers of the kernel-level calls."""
        import cupy as cp

        from gpuexec.kernels.cpu import indexing as CI

        if self._buf is None:
            import awkward as ak

            off = self.offsets
            ev = np.asarray(self.host["events"])
            starts, stops = off[:-1][ev], off[1:][ev]
            carry_index = CI.list_carry_index(starts, CI.compact_offsets(starts, stops))
            # x[argmax(x, keepdims=True)]: one pick per list, None for empty lists
            local = ak.fill_none(ak.argmax(self.host["float64"], axis=1), 0)
            b = {"offsets": cp.asarray(off), "starts": cp.asarray(off[:-1]),
                 "stops": cp.asarray(off[1:]), "sl_starts": cp.asarray(off[:-1][::2]),
                 "sl_stops": cp.asarray(off[1:][::2]),
                 "pick_offsets": cp.arange(self.n + 1, dtype=np.int64),
                 "pick_index": cp.asarray(ak.to_numpy(local).astype(np.int64)),
                 "pick_valid": cp.asarray(np.diff(off) > 0),
                 "carry_index": cp.asarray(carry_index)}
            for dt, v in self.values.items():
                b[dt] = cp.asarray(v)
            self._buf = b
        return self._buf


# -- the kernels ------------------------------------------------------------------------------
def _cast_case(case, base: str, dt: str):
    """``case`` on ``base``'s values cast to ``dt`` (cast once, outside the timed call)."""
    api, kernel = case

    def cast_api(m, a, **kw):
        if dt not in a:  # kept in the input's arrays, as the kernel's buffers below
            import awkward as ak

            a[dt] = ak.values_astype(a[base], dt)
        return api(m, a, **kw)

    def cast_kernel(be, b, d):
        if dt not in b:
            b[dt] = b[base].astype(dt)
        return kernel(be, b, d)
    return cast_api, cast_kernel


def _api_cases():
    """name -> (api(m, arrays, backend kwargs), buffer call(be, b) -> (fn, bytes))."""
    cases = {}

    def red(fname, dt, contract, kdt=None, extra=()):
        def api(m, a, **kw):
            return getattr(m, fname)(a[dt], axis=1, **kw)

        def kernel(be, b, d):
            k = be.kernel(contract, *(() if kdt is None else (kdt,)))
            args = (b["offsets"],) if kdt is None else (b["offsets"], b[dt]) + extra
            out_bytes = 8 * d.n
            nbytes = 8 * (d.n + 1) + out_bytes + (0 if kdt is None else b[dt].nbytes)
            return (lambda: k(*args)), nbytes
        return api, kernel

    cases["reduce_sum_i64"] = red("sum", "int64", "reduce_sum", "int64")
    cases["reduce_prod_i64"] = red("prod", "int64", "reduce_prod", "int64")
    cases["reduce_max_i64"] = red("max", "int64", "reduce_max", "int64",
                                  (np.iinfo(np.int64).min,))
    cases["reduce_min_i64"] = red("min", "int64", "reduce_min", "int64",
                                  (np.iinfo(np.int64).max,))
    cases["reduce_sum_bool"] = red("sum", "bool", "reduce_sum_bool", "bool")
    cases["reduce_prod_bool"] = red("prod", "bool", "reduce_prod_bool", "bool")
    cases["reduce_argmax"] = red("argmax", "float64", "reduce_argmax", "float64")
    cases["reduce_argmin"] = red("argmin", "float64", "reduce_argmin", "float64")
    cases["reduce_countnonzero"] = red("count_nonzero", "float64", "reduce_countnonzero",
                                       "float64")
    cases["reduce_count"] = red("count", "float64", "reduce_count")

    # other element widths of the per-list reductions (not in the figure's table;
    # gpu_device_time.py --only): the same values cast once on the device
    for base, dt, tag in (("float64", "float64", "f64"), ("float64", "float32", "f32"),
                          ("int64", "int32", "i32")):
        for fname in ("sum", "prod", "max", "min"):
            ident = ({"max": -np.inf, "min": np.inf}.get(fname) if dt.startswith("float")
                     else {"max": np.iinfo(dt).min, "min": np.iinfo(dt).max}.get(fname))
            cases[f"reduce_{fname}_{tag}"] = _cast_case(
                red(fname, dt, f"reduce_{fname}", dt, () if ident is None else (ident,)), base, dt)

    def packed_api(m, a, **kw):
        return m.to_packed(a["sliced"], **kw)

    def packed_kernel(be, b, d):
        k = be.kernel("compact_offsets")
        n = b["sl_starts"].shape[0]
        return (lambda: k(b["sl_starts"], b["sl_stops"])), 8 * (3 * n + 1)
    cases["compact_offsets"] = (packed_api, packed_kernel)

    def pick_api(m, a, **kw):
        if m.__name__ == "awkward":
            return a["float64"][a["pick"]]
        return m.take(a["float64"], a["pick"], **kw)

    def pick_kernel(be, b, d):
        k = be.kernel("missing_repeat")
        args = (b["starts"], b["stops"], b["pick_offsets"], b["pick_index"], b["pick_valid"])
        return (lambda: k(*args)), 8 * (2 * d.n + (d.n + 1) + d.n + d.n) + d.n
    cases["missing_repeat"] = (pick_api, pick_kernel)

    def carry_api(m, a, **kw):
        if m.__name__ == "awkward":
            return a["float64"][a["events"]]
        return m.take(a["float64"], a["events"], **kw)

    def carry_kernel(be, b, d):
        k = be.kernel("carry", "float64")
        idx = b["carry_index"]
        return (lambda: k(b["float64"], idx)), 3 * 8 * idx.shape[0]
    cases["carry"] = (carry_api, carry_kernel)

    def argsort_api(m, a, **kw):
        return m.argsort(a["float64"], axis=1, **kw)

    def argsort_kernel(be, b, d):
        k = be.kernel("argsort", "float64")
        return (lambda: k(b["offsets"], b["float64"], True)), 8 * (2 * d.elements + d.n + 1)
    cases["argsort"] = (argsort_api, argsort_kernel)

    def filter_api(m, a, **kw):
        if m.__name__ == "awkward":
            return a["float64"][a["bool"]]
        return m.filter(a["float64"], a["bool"], **kw)

    def filter_kernel(be, b, d):
        k = be.kernel("filter")
        kept = int(d.values["bool"].sum())
        return ((lambda: k(b["starts"], b["stops"], b["offsets"], b["bool"])),
                8 * (3 * d.n + 1) + d.elements + 8 * (d.n + 1 + kept))
    cases["filter"] = (filter_api, filter_kernel)

    def local_index_api(m, a, **kw):
        return m.local_index(a["float64"], axis=1, **kw)

    def local_index_kernel(be, b, d):
        k = be.kernel("local_index")
        return (lambda: k(b["offsets"])), 8 * (d.n + 1 + d.elements)
    cases["local_index"] = (local_index_api, local_index_kernel)

    def sort_api(m, a, **kw):
        return m.sort(a["float64"], axis=1, **kw)

    def sort_kernel(be, b, d):
        k = be.kernel("sort", "float64")
        return (lambda: k(b["offsets"], b["float64"], True)), 8 * (2 * d.elements + d.n + 1)
    cases["sort"] = (sort_api, sort_kernel)

    for n in (2, 3):
        def comb_api(m, a, n=n, **kw):
            return m.combinations(a["float64"], n, axis=1, **kw)

        def comb_kernel(be, b, d, n=n):
            k = be.kernel("combinations")
            c = np.diff(d.offsets)
            tuples = int((c * (c - 1) // 2).sum() if n == 2 else (c * (c - 1) * (c - 2) // 6).sum())
            return ((lambda: k(b["starts"], b["stops"], n, False, False)),
                    8 * (2 * d.n + d.n + 1 + n * tuples))
        cases[f"combinations{n}"] = (comb_api, comb_kernel)
    return cases


#: the host arrays each case reads (their buffers cross PCIe in the e2e call)
INPUTS = {"reduce_sum_i64": ("int64",), "reduce_prod_i64": ("int64",), "reduce_max_i64": ("int64",),
          "reduce_min_i64": ("int64",), "reduce_sum_bool": ("bool",), "reduce_prod_bool": ("bool",),
          "compact_offsets": ("sliced",), "missing_repeat": ("float64", "pick"),
          "carry": ("float64", "events"), "filter": ("float64", "bool")}
INPUTS = {k: INPUTS.get(k, ("float64",)) for k in (
    "reduce_sum_i64", "reduce_prod_i64", "compact_offsets", "reduce_max_i64", "reduce_sum_bool",
    "reduce_min_i64", "reduce_argmax", "reduce_argmin", "reduce_countnonzero", "reduce_count",
    "missing_repeat", "reduce_prod_bool", "carry", "argsort", "combinations2", "combinations3",
    "filter", "local_index", "sort")}

FIG2 = ["reduce_sum_i64", "reduce_prod_i64", "compact_offsets", "reduce_max_i64",
        "reduce_sum_bool", "reduce_min_i64", "reduce_argmax", "reduce_argmin",
        "reduce_countnonzero", "reduce_count", "missing_repeat", "reduce_prod_bool"]
EXTRA = ["carry", "argsort", "combinations2", "combinations3", "filter", "local_index", "sort"]


# -- timing ------------------------------------------------------------------------------------
def wall_time(cp, fn, min_seconds: float, max_reps: int, warm: bool = True) -> float:
    if warm:
        fn()
    if cp is not None:
        cp.cuda.runtime.deviceSynchronize()
    times = []
    t_start = time.perf_counter()
    while len(times) < max_reps:
        t0 = time.perf_counter()
        fn()
        if cp is not None:
            cp.cuda.runtime.deviceSynchronize()
        times.append(time.perf_counter() - t0)
        if time.perf_counter() - t_start > min_seconds and len(times) >= 3:
            break
    return float(np.median(times))


def crossover(sizes, gpu, cpu):
    """The input size above which the GPU is faster at every measured size: interpolated
    log-log between the last size where it is slower and the next one ("< smallest" when
    it always wins, "> largest" when it loses at the largest). Taking the last crossing,
    not the first, keeps one noisy small-size sample from placing it."""
    pts = sorted((s, g, c) for s, g, c in zip(sizes, gpu, cpu) if g and c)
    if not pts:
        return None
    slower = [k for k, (_, g, c) in enumerate(pts) if g >= c]
    if not slower:
        return f"< {pts[0][0]:,}"
    k = slower[-1]
    if k == len(pts) - 1:
        return f"> {pts[-1][0]:,}"
    (s0, g0, c0), (s1, g1, c1) = pts[k], pts[k + 1]
    r0, r1 = math.log(g0 / c0), math.log(g1 / c1)
    t = r0 / (r0 - r1)
    return int(round(math.exp(math.log(s0) + t * (math.log(s1) - math.log(s0)))))


# -- main ------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None,
                    help="JSON (default: benchmarks/results/gpu_kernels_<machine>_<date>.json)")
    ap.add_argument("--plot", default=None, help="PNG (default: the JSON's name, .png)")
    ap.add_argument("--budget", type=float, default=300.0, help="wall-clock seconds")
    ap.add_argument("--large", type=int, default=100_000_000)
    ap.add_argument("--quick", action="store_true", help="small sizes only")
    ap.add_argument("--smoke", action="store_true",
                    help="small sizes, a 60 s budget: checks the script runs")
    ap.add_argument("--only", default=None)
    ap.add_argument("--resummarize", metavar="JSON",
                    help="recompute the summary, table and plot of an earlier run's JSON")
    ap.add_argument("--warm-cpu", action="store_true",
                    help="only compile the CPU engine's kernels (numba cache) and exit")
    args = ap.parse_args(argv)
    if args.smoke:
        args.quick, args.budget = True, min(args.budget, 60.0)
    args.out = args.out or _common.default_out("gpu_kernels", args.smoke)
    args.plot = args.plot or str(Path(args.out).with_suffix(".png"))
    if args.warm_cpu:
        return warm_cpu()
    if args.resummarize:
        result = json.loads(Path(args.resummarize).read_text())
        names = [n for n in FIG2 + EXTRA if any(r["kernel"] == n for r in result["rows"])]
        summarize(result, names, result["default_strategy"])
        plot(result, args.plot)
        Path(args.out).write_text(json.dumps(result, indent=1, default=str))
        return 0
    if _common.no_gpu():
        print(f"gpu_kernels: {_common.no_gpu()}; nothing measured")
        return 0
    deadline = time.monotonic() + args.budget

    import awkward as ak
    import cupy as cp

    import gpuexec.kernels as gk
    from gpuexec.kernels.gpu.backend import GPUBackend
    from gpuexec.kernels.gpu.plan import PlanRequest

    strategies = ["fused", "split", "naive"]
    backends = {s: GPUBackend(plan=PlanRequest(strategy=s)) for s in strategies}
    default = GPUBackend()
    cpu = gk.get_backend("cpu")
    dev = default.device
    cores = len(os.sched_getaffinity(0))
    caches = _sysfs_caches()
    result = {"benchmark": "gpu_kernels",
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "numba_cuda_mlir": NUMBA_CUDA_MLIR,
              "machine": {"gpu": dev.name, "arch": dev.arch, "wave": dev.wave,
                          "sms": dev.cu_count, "host_cores": cores,
                          "host_caches": caches, "cpu": platform.processor(),
                          "cupy": cp.__version__, "awkward": ak.__version__,
                          "compiler": default.runtime.compiler},
              "default_strategy": default.strategy, "paper_speedup": PAPER_SPEEDUP,
              "rows": [], "notes": []}
    notes = result["notes"]

    def note(text):
        notes.append(text)
        print("# " + text, flush=True)

    def save():
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(_common.stamp(dict(result)), indent=1, default=str))

    # copy bandwidth (device, read + write) and host->device / device->host (pinned)
    src = cp.random.random_sample(min(args.large, 100_000_000) // (10 if args.quick else 1))
    dst = cp.empty_like(src)
    t = event_time(cp, lambda: cp.copyto(dst, src), 10)
    copy_bw = 2 * src.nbytes / t
    pinned = cp.cuda.alloc_pinned_memory(src.nbytes)
    host_view = np.frombuffer(pinned, dtype=np.float64, count=src.shape[0])
    t_h2d = event_time(cp, lambda: dst.set(host_view), 3)
    t_d2h = event_time(cp, lambda: src.get(out=host_view), 3)
    result["copy"] = {"device_GBps": copy_bw / 1e9, "h2d_GBps": src.nbytes / t_h2d / 1e9,
                      "d2h_GBps": src.nbytes / t_d2h / 1e9}
    del src, dst, pinned, host_view
    print(f"# {dev.name} ({dev.arch}, {dev.cu_count} SMs), host {cores} cores; device copy "
          f"{copy_bw / 1e9:.0f} GB/s, H2D {result['copy']['h2d_GBps']:.1f} GB/s, "
          f"D2H {result['copy']['d2h_GBps']:.1f} GB/s", flush=True)

    l1, l2, l3 = caches.get("L1d", 48 << 10), caches.get("L2", 2 << 20), caches.get("L3", 32 << 20)

    def fit(nbytes):
        return max(1000, int(nbytes * 0.75 / BYTES_PER_ELEMENT) // 1000 * 1000)

    # most important first (a spent budget drops the tail): floor, the cache sizes around
    # the crossover, 1M (the paper comparison), 100M, then the rest
    sizes = [("floor", FLOOR_LISTS * 5, "poisson5"), ("L1", fit(l1), "poisson5"),
             ("L2", fit(l2), "poisson5"), ("1M", 1_000_000, "poisson5"),
             ("large", args.large, "poisson5"), ("large", args.large, "mixed"),
             ("memory", fit(2 * l3 / 0.75), "poisson5"), ("1M", 1_000_000, "mixed")]
    if args.quick:
        sizes = sizes[:4]
    result["sizes"] = [{"label": s[0], "elements": s[1], "dist": s[2]} for s in sizes]
    cases = _api_cases()
    names = [k for k in FIG2 + EXTRA if not args.only or k in args.only.split(",")]
    gpu_kw = {"backend": default}

    for label, n_el, dist in sizes:
        if time.monotonic() > deadline:
            note(f"time budget spent before {label}/{dist}: not measured")
            break
        t_data = time.perf_counter()
        d = Data(n_el, dist, seed=11 + n_el % 997)
        print(f"## {label} {dist}: {d.elements:,} elements in {d.n:,} lists "
              f"(data {time.perf_counter() - t_data:.1f} s)", flush=True)
        host_side = dist == "poisson5" and label != "floor"
        for name in names:
            if dist != "poisson5" and name in POISSON_ONLY:
                continue
            api, kern = cases[name]
            row = {"kernel": name, "size": label, "dist": dist, "elements": d.elements,
                   "lists": d.n, "seconds": {}, "not_run": {}}
            late = time.monotonic() > deadline
            reps = 3 if d.elements >= 50_000_000 else 10
            # kernel level, the strategies timed in turns (interleaved_time)
            if label != "floor":
                calls = {}
                for s in strategies:
                    try:
                        calls[s], row["bytes"] = kern(backends[s], d.buffers(), d)
                        calls[s]()
                    except Exception as err:  # noqa: BLE001 - reported, not fatal
                        calls.pop(s, None)
                        row["not_run"][f"kernel_{s}"] = f"{type(err).__name__}: {err}"[:300]
                for s, sec in interleaved_time(cp, calls, reps).items():
                    row["seconds"][f"kernel_{s}"] = sec
            # public call on device arrays (and the call floor at 1K lists)
            try:
                da = d.dev()
                floor = label == "floor"
                row["seconds"]["device"] = wall_time(
                    cp, lambda: api(gk, da, **gpu_kw), 0.2 if floor else 0.05,
                    200 if floor else reps)
            except Exception as err:  # noqa: BLE001
                row["not_run"]["device"] = f"{type(err).__name__}: {err}"[:300]
            if label != "floor" and d.elements > AK_CUDA_CAP.get(name, d.elements):
                row["not_run"]["ak_cuda"] = f"capped at {AK_CUDA_CAP[name]:,} elements"
            elif label != "floor":
                try:
                    row["seconds"]["ak_cuda"] = wall_time(cp, lambda: api(ak, d.dev()), 0.05,
                                                          min(reps, 5))
                except Exception as err:  # noqa: BLE001 - awkward's cuda kernels missing here
                    msg = str(err).splitlines()[0][:200] if str(err) else ""
                    row["not_run"]["ak_cuda"] = f"{type(err).__name__}: {msg}"
            if host_side:
                big = d.elements > 20_000_000
                for key, fn, cap in (
                        ("e2e", lambda: api(gk, d.host, backend=default, to="host"),
                         E2E_CAP.get(name)),
                        ("gk_cpu", lambda: api(gk, d.host, backend=cpu), CPU_CAP.get(name)),
                        ("ak_cpu", lambda: api(ak, d.host), CPU_CAP.get(name))):
                    if cap is not None and d.elements > cap:
                        row["not_run"][key] = f"capped at {cap:,} elements"
                        continue
                    if late or (big and time.monotonic() > deadline - 30):
                        row["not_run"][key] = "time budget"
                        continue
                    try:
                        row["seconds"][key] = wall_time(cp if key == "e2e" else None, fn,
                                                        0.05, 1 if big else 5, warm=not big
                                                        or key != "ak_cpu")
                    except Exception as err:  # noqa: BLE001
                        row["not_run"][key] = f"{type(err).__name__}: {err}"[:300]
            sec = row["seconds"]
            if "bytes" in row:
                for s in strategies:
                    if f"kernel_{s}" in sec:
                        bw = row["bytes"] / sec[f"kernel_{s}"]
                        row[f"GBps_{s}"] = bw / 1e9
                        row[f"pct_copy_{s}"] = 100 * bw / copy_bw
            if "e2e" in sec:
                # what the e2e call moves over PCIe at the measured pinned bandwidth: the
                # buffers of its input arrays in, the result out (a derived floor, not a run)
                try:
                    out = api(gk, d.dev(), **gpu_kw)
                    moved_in = sum(v.nbytes for k, v in d.host.items() if k in INPUTS[name])
                    row["e2e_transfer_floor"] = (moved_in / (result["copy"]["h2d_GBps"] * 1e9)
                                                 + out.nbytes / (result["copy"]["d2h_GBps"] * 1e9))
                    del out
                except Exception as err:  # noqa: BLE001
                    row["not_run"]["e2e_transfer_floor"] = f"{type(err).__name__}: {err}"[:200]
            if "e2e" in sec and "gk_cpu" in sec:
                row["gpu_cpu_speedup"] = sec["gk_cpu"] / sec["e2e"]
            if "device" in sec and "ak_cuda" in sec:
                row["speedup_vs_ak_cuda"] = sec["ak_cuda"] / sec["device"]
            if "kernel_naive" in sec and f"kernel_{default.strategy}" in sec:
                row["speedup_vs_naive"] = sec["kernel_naive"] / sec[f"kernel_{default.strategy}"]
            result["rows"].append(row)
            ms = {k: f"{1e3 * v:.3f}" for k, v in sec.items()}
            print(f"{label:>6} {dist:<8} {name:<20} {ms}"
                  + (f" {row.get(f'pct_copy_{default.strategy}', 0):.0f}% copy" if "bytes" in row else "")
                  + (f"  not run: {sorted(row['not_run'])}" if row["not_run"] else ""), flush=True)
        del d
        cp.get_default_memory_pool().free_all_blocks()
        save()

    summarize(result, names, default.strategy)
    save()
    try:
        plot(result, args.plot)
    except Exception as err:  # noqa: BLE001
        note(f"plot not written: {type(err).__name__}: {err}")
    save()
    print(f"# wrote {args.out}")
    return 0


def warm_cpu() -> int:
    """Compile (into the numba cache) every CPU kernel the benchmark's host contenders use,
    serial and parallel variants, so that the timed run measures no compilation."""
    import gpuexec.kernels as gk

    cpu = gk.get_backend("cpu")
    t0 = time.perf_counter()
    for n_el in (2_000, 400_000):
        d = Data(n_el, "poisson5", 1)
        for name, (api, _) in _api_cases().items():
            api(gk, d.host, backend=cpu)
    print(f"# CPU kernels compiled in {time.perf_counter() - t0:.1f} s")
    return 0


def summarize(result, names, default_strategy):
    rows = result["rows"]
    by = {(r["kernel"], r["size"], r["dist"]): r for r in rows}
    summary = {}
    labels = [s["label"] for s in result["sizes"] if s["dist"] == "poisson5" and s["label"] != "floor"]
    for name in names:
        pts = [(by[(name, lb, "poisson5")]["elements"],
                by[(name, lb, "poisson5")]["seconds"].get("e2e"),
                by[(name, lb, "poisson5")]["seconds"].get("gk_cpu"))
               for lb in labels if (name, lb, "poisson5") in by]
        pts.sort(key=lambda p: p[0])
        floor = by.get((name, "floor", "poisson5"), {}).get("seconds", {}).get("device")
        dev_pts = sorted((by[(name, lb, "poisson5")]["elements"],
                          by[(name, lb, "poisson5")]["seconds"].get("device"),
                          by[(name, lb, "poisson5")]["seconds"].get("gk_cpu"))
                         for lb in labels if (name, lb, "poisson5") in by)
        s = {"call_floor_us": None if floor is None else 1e6 * floor,
             "crossover_elements": crossover([p[0] for p in pts], [p[1] for p in pts],
                                             [p[2] for p in pts]) if pts else None,
             # the same with the data already on the device (no host copy)
             "crossover_elements_device": crossover([p[0] for p in dev_pts],
                                                    [p[1] for p in dev_pts],
                                                    [p[2] for p in dev_pts]) if dev_pts else None,
             "paper": PAPER_SPEEDUP.get(name)}
        for lb in ("1M", "large"):
            r = by.get((name, lb, "poisson5"))
            if r:
                s[f"gpu_cpu_speedup_{lb}"] = r.get("gpu_cpu_speedup")
                sec = r["seconds"]
                if "device" in sec and "gk_cpu" in sec:
                    s[f"device_cpu_speedup_{lb}"] = sec["gk_cpu"] / sec["device"]
                if "e2e_transfer_floor" in r and "device" in sec and "gk_cpu" in sec:
                    # derived: device call + PCIe floor of its buffers at the measured rate
                    s[f"pcie_floor_cpu_speedup_{lb}"] = sec["gk_cpu"] / (
                        sec["device"] + r["e2e_transfer_floor"])
                s[f"speedup_vs_ak_cuda_{lb}"] = r.get("speedup_vs_ak_cuda")
                s[f"pct_copy_{lb}"] = r.get(f"pct_copy_{default_strategy}")
            m = by.get((name, lb, "mixed"))
            if m:
                s[f"pct_copy_{lb}_mixed"] = m.get(f"pct_copy_{default_strategy}")
                s[f"speedup_vs_naive_{lb}_mixed"] = m.get("speedup_vs_naive")
            if r:
                s[f"speedup_vs_naive_{lb}"] = r.get("speedup_vs_naive")
        summary[name] = s
    result["summary"] = summary

    def f(v, fmt="{:.2f}"):
        return "-" if v is None else (fmt.format(v) if isinstance(v, (int, float)) else str(v))

    print("\nms per call (kernel: CUDA events on device buffers; the rest: wall time)")
    cols = [("kernel_fused", "fused"), ("kernel_split", "split"), ("kernel_naive", "naive"),
            ("device", "gk dev"), ("ak_cuda", "ak.cuda"), ("e2e", "gk e2e"),
            ("gk_cpu", "gk cpu"), ("ak_cpu", "ak cpu")]
    for lb, dist in (("1M", "poisson5"), ("large", "poisson5"), ("large", "mixed")):
        sel = [r for r in rows if r["size"] == lb and r["dist"] == dist]
        if not sel:
            continue
        print(f"-- {lb} {dist} ({sel[0]['elements']:,} elements)")
        print(f"{'kernel':<20}" + "".join(f"{c[1]:>9}" for c in cols)
              + f"{'GB/s':>7}{'%copy':>6}{'PCIe fl':>8}")
        for r in sel:
            sec = r["seconds"]
            line = f"{r['kernel']:<20}" + "".join(
                f"{1e3 * sec[k]:>9.3f}" if k in sec else f"{'-':>9}" for k, _ in cols)
            gbps = r.get(f"GBps_{default_strategy}")
            pct = r.get(f"pct_copy_{default_strategy}")
            fl = r.get("e2e_transfer_floor")
            line += f"{gbps:>7.0f}" if gbps else f"{'-':>7}"
            line += f"{pct:>6.0f}" if pct else f"{'-':>6}"
            line += f"{1e3 * fl:>8.2f}" if fl else f"{'-':>8}"
            print(line)

    print("\nGPU/CPU = gk.cpu time / GPU time: e2e (host copy in and out, measured), dev (data"
          " on the device), pcie (derived: dev + PCIe floor of the buffers at the measured rate)")
    print(f"{'kernel':<20}{'floor us':>9}{'x-over e2e':>12}{'x-over dev':>12}{'e2e 1M':>7}"
          f"{'e2e 100M':>9}{'dev 100M':>9}{'pcie 100M':>10}{'paper':>7}{'%copy':>6}"
          f"{'%cp mix':>8}{'vs naive':>9}{'vs ak.cuda 1M/100M':>19}")
    for name, s in summary.items():
        akc = f"{f(s.get('speedup_vs_ak_cuda_1M'))}/{f(s.get('speedup_vs_ak_cuda_large'))}"
        print(f"{name:<20}{f(s['call_floor_us'], '{:.0f}'):>9}"
              f"{f(s['crossover_elements'], '{:,}'):>12}{f(s['crossover_elements_device'], '{:,}'):>12}"
              f"{f(s.get('gpu_cpu_speedup_1M')):>7}{f(s.get('gpu_cpu_speedup_large')):>9}"
              f"{f(s.get('device_cpu_speedup_large'), '{:.1f}'):>9}"
              f"{f(s.get('pcie_floor_cpu_speedup_large')):>10}"
              f"{f(s['paper']):>7}{f(s.get('pct_copy_large'), '{:.0f}'):>6}"
              f"{f(s.get('pct_copy_large_mixed'), '{:.0f}'):>8}"
              f"{f(s.get('speedup_vs_naive_large')):>9}{akc:>19}")


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = result["summary"]
    names = list(summary)
    y = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(names) + 2))
    bars = (("gpu_cpu_speedup_1M", "H200 e2e (host copy measured), 1M"),
            ("gpu_cpu_speedup_large", "H200 e2e (host copy measured), 100M"),
            ("pcie_floor_cpu_speedup_large", "H200 device + PCIe floor (derived), 100M"),
            ("device_cpu_speedup_large", "H200, data on the device, 100M"),
            ("paper", "paper Fig. 1: 2x MI210 vs 128 EPYC cores"))
    h = 0.8 / len(bars)
    for k, (key, label) in enumerate(bars):
        vals = [summary[n].get(key) or 0 for n in names]
        ax.barh(y + (k - (len(bars) - 1) / 2) * h, vals, h, label=label)
    ax.axvline(1.0, ls="--", c="k", lw=0.8)
    ax.set_yticks(y, names)
    ax.set_xscale("log")
    ax.set_xlabel("speedup (gpuexec CPU time / GPU time; log scale)")
    ax.set_title(f"GPU/CPU speedup: {result['machine']['gpu']} vs gpuexec CPU on "
                 f"{result['machine']['host_cores']} host cores")
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        raise
