"""The twelve Figure-2 kernels of the paper through their public counterparts, gpuexec's
CPU engine (one thread and all cores) against awkward, side by side in one run.

    reduce_sum/prod/max/min/argmax/argmin/count/countnonzero -> gk.X(x, axis=1)
        (int64 and float64 lists)
    reduce_sum_bool / reduce_prod_bool -> gk.sum / gk.prod on bool lists
    compact_offsets  -> gk.to_packed(x[::2]) (a sliced jagged array: a ListArray whose
                        lists are gathered into fresh offsets)
    missing_repeat   -> gk.take(x, gk.argmax(x, axis=1, keepdims=True)),
                        i.e. x[ak.argmax(x, axis=1, keepdims=True)]
plus argsort and combinations(n=2), reported but outside the geometric mean.

Sizes: three chosen from this machine's caches (L1d, L2, and twice the L3 for main
memory; ~11 bytes per element: 8 of values, offsets and output per Poisson(5) list)
and 10M elements; Poisson(5) list lengths, seeded. Every case is checked once against
awkward (type and values) before timing; a gk function that does not exist yet is
skipped with a note. Timing: warm-up first (numba compilation excluded), then repeats
that interleave the three contenders; ratios use the median of the repeats (each
repeat times enough calls to last >= 2 ms; the minimum is kept in the JSON too, with
the load average, since a busy machine hurts the all-cores runs most).

    python benchmarks/cpu_kernels.py [--quick | --smoke] [--out FILE.json]

Prints a table and writes benchmarks/results/cpu_kernels_<machine>_<date>.json with the
command, commit and machine. ``--smoke``: one tiny size, one repeat (seconds; checks the
script runs, measures nothing worth keeping).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import awkward as ak
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gpuexec.kernels as gk  # noqa: E402
import _common  # noqa: E402  (benchmarks/, the script's folder)

BYTES_PER_ELEMENT = 8 + 3 * 8 / 5  # values + (offsets, output, mask) per list of 5
GEOMEAN_MIN_ELEMENTS = 1_000_000
TARGETS = {"one_thread": 0.8, "all_cores": 0.5}


# -- machine ---------------------------------------------------------------------------------
def _sysfs_caches() -> dict:
    caches = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(base.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if kind == "Instruction":
            continue
        caches[f"L{level}" + ("d" if kind == "Data" else "")] = _parse_size(size)
    return caches


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    for suffix, factor in (("K", 1024), ("M", 1024**2), ("G", 1024**3)):
        if text.endswith(suffix):
            return int(float(text[:-1]) * factor)
    return int(text)


def machine() -> dict:
    model = platform.processor()
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in lscpu.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        lscpu = ""
    from importlib.metadata import version

    import numba

    return {
        "cpu_model": model,
        "logical_cpus": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "caches_per_core": _sysfs_caches(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "awkward": ak.__version__,
        "awkward_cpp": version("awkward-cpp"),
        "numba": numba.__version__,
        "load_average_at_start": os.getloadavg(),
    }


def sizes_for(caches: dict, quick: bool, smoke: bool = False) -> list[tuple[str, int]]:
    if smoke:
        return [("smoke", 5_000)]
    l1 = caches.get("L1d", 32 * 1024)
    l2 = caches.get("L2", 1024 * 1024)
    l3 = caches.get("L3", 32 * 1024 * 1024)

    def fit(nbytes, fraction):
        return int(nbytes * fraction / BYTES_PER_ELEMENT) // 1000 * 1000 or 1000

    sizes = [("L1", fit(l1, 0.75)), ("L2", fit(l2, 0.75)), ("memory", fit(2 * l3, 1.0)),
             ("10M", 10_000_000)]
    if quick:
        sizes = [("L2", sizes[1][1]), ("1M", 1_000_000)]
    return sizes


# -- data ----------------------------------------------------------------------------------
def make_data(n_elements: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    counts = rng.poisson(5.0, max(n_elements // 5, 1))
    offsets = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    total = int(offsets[-1])

    def lists(values):
        return ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(offsets),
                                                    ak.contents.NumpyArray(values)))

    return {
        "float64": lists(rng.normal(50.0, 20.0, total)),
        "int64": lists(rng.integers(-20, 100, total)),
        "bool": lists(rng.random(total) < 0.7),
    }


# -- cases: (figure-2 kernel, dtype, call(module, data)) ------------------------------------
def _take(m, x):
    if m is ak:
        return x[ak.argmax(x, axis=1, keepdims=True)]
    return gk.take(x, gk.argmax(x, axis=1, keepdims=True))


CASES = []
for _name in ("sum", "prod", "max", "min", "argmax", "argmin", "count"):
    for _dt in ("int64", "float64"):
        CASES.append((f"reduce_{_name}", _dt, _name,
                      (lambda f: lambda m, d, dt: getattr(m, f)(d[dt], axis=1))(_name)))
for _dt in ("int64", "float64"):
    CASES.append(("reduce_countnonzero", _dt, "count_nonzero",
                  lambda m, d, dt: m.count_nonzero(d[dt], axis=1)))
CASES += [
    ("reduce_sum_bool", "bool", "sum", lambda m, d, dt: m.sum(d["bool"], axis=1)),
    ("reduce_prod_bool", "bool", "prod", lambda m, d, dt: m.prod(d["bool"], axis=1)),
    ("compact_offsets", "float64", "to_packed", lambda m, d, dt: m.to_packed(d["sliced"])),
    ("missing_repeat", "float64", "take", lambda m, d, dt: _take(m, d["float64"])),
]
EXTRAS = [
    ("argsort", "float64", "argsort", lambda m, d, dt: m.argsort(d["float64"], axis=1)),
    ("combinations2", "float64", "combinations",
     lambda m, d, dt: m.combinations(d["float64"], 2, axis=1)),
]


# -- timing --------------------------------------------------------------------------------
def _calls_per_sample(fn) -> int:
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    return max(1, min(1000, int(0.002 / max(once, 1e-7))))


def _sample(fn, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def measure(run_gk, run_ak, repeats: int) -> dict:
    """(median, minimum) seconds per call of gk on one thread, gk on all cores and
    awkward, the three interleaved in every repeat."""
    cores = len(os.sched_getaffinity(0))
    contenders = {
        "gk_1thread": (1, run_gk),
        f"gk_{cores}threads": (cores, run_gk),
        "awkward": (None, run_ak),
    }
    calls = {}
    for name, (threads, fn) in contenders.items():  # warm-up (compiles), calibration
        if threads:
            gk.set_num_threads(threads)
        fn()
        calls[name] = _calls_per_sample(fn)
    samples = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, (threads, fn) in contenders.items():
            if threads:
                gk.set_num_threads(threads)
            samples[name].append(_sample(fn, calls[name]))
    gk.set_num_threads(None)
    return ({name: float(np.median(s)) for name, s in samples.items()},
            {name: float(np.min(s)) for name, s in samples.items()})


def check_same(got, want) -> None:
    if str(got.type) != str(want.type):
        raise AssertionError(f"type {got.type} != awkward's {want.type}")
    if not ak.array_equal(got, want, equal_nan=True, dtype_exact=True, check_parameters=False):
        raise AssertionError("values differ from awkward's")


def geomean(values) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return float(math.exp(sum(math.log(v) for v in values) / len(values))) if values else math.nan


# -- main ------------------------------------------------------------------------------------
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two small sizes, few repeats")
    parser.add_argument("--smoke", action="store_true",
                        help="one tiny size, one repeat: checks the script runs")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--only", default=None, help="comma-separated kernel names")
    parser.add_argument("--out", default=None,
                        help="JSON (default: benchmarks/results/cpu_kernels_<machine>_<date>.json)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.repeats = args.repeats or 1

    info = machine()
    cores = info["usable_cores"]
    print(f"# {info['cpu_model']}: {info['logical_cpus']} logical CPUs, {cores} usable; "
          f"caches per core {info['caches_per_core']}")
    print(f"# python {info['python']}, numpy {info['numpy']}, awkward {info['awkward']} "
          f"(awkward-cpp {info['awkward_cpp']}), numba {info['numba']}; "
          f"load average {info['load_average_at_start']}")
    sizes = sizes_for(info["caches_per_core"], args.quick, args.smoke)
    print("# sizes: " + ", ".join(f"{label}={n:,}" for label, n in sizes))
    only = set(args.only.split(",")) if args.only else None

    rows, notes = [], []
    for label, n_elements in sizes:
        data = make_data(n_elements, seed=2024 + n_elements % 1000)
        data["sliced"] = data["float64"][::2]
        repeats = args.repeats or (5 if args.quick else (15 if n_elements < 1_000_000 else 7))
        for kernel, dtype, fname, call in CASES + EXTRAS:
            if only and kernel not in only:
                continue
            if not hasattr(gk, fname):
                note = f"skipped {kernel}: gk.{fname} does not exist yet"
                if note not in notes:
                    notes.append(note)
                    print("# " + note)
                continue
            run_gk = (lambda c, dt: lambda: c(gk, data, dt))(call, dtype)
            run_ak = (lambda c, dt: lambda: c(ak, data, dt))(call, dtype)
            try:
                gk.reset_stats()
                check_same(run_gk(), run_ak())
                handoffs = gk.stats()["n_handoffs"]
                times, fastest = measure(run_gk, run_ak, repeats)
            except Exception as err:  # noqa: BLE001 - a broken case is reported, not fatal
                note = f"failed {kernel}[{dtype}] at {label}: {type(err).__name__}: {err}"
                notes.append(note)
                print("# " + note)
                continue
            one, many, ref = times["gk_1thread"], times[f"gk_{cores}threads"], times["awkward"]
            row = {"kernel": kernel, "dtype": dtype, "size": label, "elements": n_elements,
                   "in_geomean": (kernel, dtype, fname, call) in CASES,
                   "handoffs": handoffs, "seconds": times, "seconds_min": fastest,
                   "ratio_1thread": one / ref, "ratio_all_cores": many / ref}
            rows.append(row)
            print(f"{label:>6} {n_elements:>11,} {kernel:<20} {dtype:<8} "
                  f"awkward {ref * 1e3:9.3f} ms"
                  f"  gk 1t {one * 1e3:9.3f} ms ({one / ref:5.2f})"
                  f"  gk {cores}t {many * 1e3:9.3f} ms ({many / ref:5.2f})"
                  + (f"  [{handoffs} hand-offs]" if handoffs else ""), flush=True)

    summary = {}
    for label, n_elements in sizes:
        sel = [r for r in rows if r["size"] == label and r["in_geomean"]]
        summary[label] = {"elements": n_elements, "n": len(sel),
                          "geomean_1thread": geomean(r["ratio_1thread"] for r in sel),
                          "geomean_all_cores": geomean(r["ratio_all_cores"] for r in sel)}
    big = [r for r in rows if r["elements"] >= GEOMEAN_MIN_ELEMENTS and r["in_geomean"]]
    kernels_in = sorted({r["kernel"] for r in big})
    summary[">=1M"] = {"n": len(big), "kernels": kernels_in,
                       "geomean_1thread": geomean(r["ratio_1thread"] for r in big),
                       "geomean_all_cores": geomean(r["ratio_all_cores"] for r in big),
                       "targets": TARGETS}

    print("\n# geometric mean of gk/awkward runtime ratios (Figure-2 kernels; int64 and "
          "float64 variants of reduce_X count separately)")
    print(f"{'size':>8} {'n':>3} {'1 thread':>9} {f'{cores} threads':>10}")
    for label, s in summary.items():
        print(f"{label:>8} {s['n']:>3} {s['geomean_1thread']:9.3f} {s['geomean_all_cores']:10.3f}")
    missing = sorted({k for k, *_ in CASES} - set(kernels_in))
    if missing:
        print(f"# not in the >=1M geomean (skipped or failed): {', '.join(missing)}")
    print(f"# targets at >=1M: 1 thread <= {TARGETS['one_thread']}, all cores <= "
          f"{TARGETS['all_cores']}")

    out = Path(args.out or _common.default_out("cpu_kernels", args.smoke))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(_common.stamp({
        "benchmark": "cpu_kernels",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": info, "load_average_at_end": os.getloadavg(), "sizes": dict(sizes),
        "rows": rows, "summary": summary,
        "notes": notes}), indent=1))
    print(f"# wrote {out}")
    return 1 if any(n.startswith("failed") for n in notes) else 0


if __name__ == "__main__":
    sys.exit(main())
