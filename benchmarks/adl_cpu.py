"""Events/s of the eight ADL queries with coffea's IterativeExecutor on one CPU core,
split into reading and computing.

    .venv/bin/python benchmarks/adl_cpu.py [--events 1000000] [--queries 1 2 ... 8]

Input: a generated NanoAOD-like file (examples/make_sample.py, LZMA-9 like CMS
NanoAOD), written on first use into ``--cache-dir`` (default .cache/adl/) and reused.
One core: everything runs in this process, numba kernels with one thread
(``gk.set_num_threads(1)``), uproot without decompression/interpretation pools.

Per query, on the same chunks (``--chunksize`` entries):

- ``end-to-end``: ``Runner(executor=IterativeExecutor(), chunksize=...)`` over the
  file (file metadata read beforehand, outside the timing): what a user sees.
- ``read``: per chunk, NanoEvents are built (``NanoEventsFactory.from_root``, virtual
  mode, same entry range) and the query's columns materialized (``ak.materialize``):
  basket reading, LZMA decompression, deserialization and the NanoEvents layout.
- ``compute``: the processor's work on those already-materialized columns
  (``observables`` + histogram ``fill``): the kernel engine plus elementwise math.

Times are process CPU time (``time.process_time``), the fair measure for a single-
threaded job on a machine that other jobs load; wall time is recorded next to it,
together with the load average. Before timing, each query runs once on a small slice
so numba compilation (or cache loading) is not counted. Writes
benchmarks/results/adl_cpu.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)  # for examples

warnings.filterwarnings("ignore", message="Missing cross-reference index")


def machine() -> dict:
    import awkward
    import coffea
    import numba
    import uproot

    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown"
    return {"host": platform.node(), "cpu": cpu, "logical_cpus": os.cpu_count(),
            "python": platform.python_version(), "awkward": awkward.__version__,
            "coffea": coffea.__version__, "uproot": uproot.__version__, "numba": numba.__version__}


class Clock:
    """CPU and wall seconds of a block."""

    def __enter__(self):
        self.cpu0, self.wall0 = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.cpu = time.process_time() - self.cpu0
        self.wall = time.perf_counter() - self.wall0


def sample_path(args) -> tuple[str, dict]:
    from examples.make_sample import write_sample

    tag = args.compression.replace(":", "")
    path = os.path.join(args.cache_dir, f"adl_{args.events}_seed{args.seed}_{tag}.root")
    info = {"path": os.path.relpath(path, ROOT), "events": args.events, "seed": args.seed,
            "compression": args.compression}
    if not os.path.exists(path):
        print(f"generating {args.events} events into {path} ...", flush=True)
        with Clock() as c:
            write_sample(path, args.events, seed=args.seed, compression=args.compression)
        info["generation"] = {"cpu_s": round(c.cpu, 2), "wall_s": round(c.wall, 2),
                              "events_per_s_wall": round(args.events / c.wall)}
        print(f"  written in {c.wall:.1f} s wall ({args.events / c.wall:,.0f} events/s)")
    info["bytes"] = os.path.getsize(path)
    return path, info


def entry_ranges(n: int, chunksize: int):
    return [(start, min(start + chunksize, n)) for start in range(0, n, chunksize)]


def split_read_compute(query, path, ranges) -> tuple[Clock, Clock, dict]:
    """(read clock, compute clock, output) over ``ranges`` (see the module docstring)."""
    import awkward as ak
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory
    from coffea.processor import accumulate

    read, compute = Clock(), Clock()
    read.cpu = read.wall = compute.cpu = compute.wall = 0.0
    outputs = []
    for start, stop in ranges:
        with Clock() as r:
            events = NanoEventsFactory.from_root({path: "Events"}, entry_start=start, entry_stop=stop,
                                                 schemaclass=NanoAODSchema, mode="virtual").events()
            cols = {name: ak.materialize(array) for name, array in query.read(events).items()}
        with Clock() as c:
            outputs.append(query.fill(stop - start, query.observables(cols)))
        read.cpu += r.cpu
        read.wall += r.wall
        compute.cpu += c.cpu
        compute.wall += c.wall
    return read, compute, accumulate(outputs)


def rates(clock: Clock, n: int) -> dict:
    return {"cpu_s": round(clock.cpu, 3), "wall_s": round(clock.wall, 3),
            "events_per_s_cpu": round(n / clock.cpu) if clock.cpu > 0 else None,
            "events_per_s_wall": round(n / clock.wall) if clock.wall > 0 else None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--chunksize", type=int, default=100_000)
    parser.add_argument("--queries", type=int, nargs="+", default=list(range(1, 9)))
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--compression", default="lzma:9")
    parser.add_argument("--cache-dir", default=os.path.join(ROOT, ".cache", "adl"))
    parser.add_argument("--out", default=os.path.join(HERE, "results", "adl_cpu.json"))
    args = parser.parse_args(argv)

    import gpuexec.kernels as gk
    from coffea import processor

    from examples.adl import make

    gk.set_num_threads(1)
    path, sample = sample_path(args)
    ranges = entry_ranges(args.events, args.chunksize)
    metadata: dict = {}
    load_before = os.getloadavg()

    results = {}
    for number in args.queries:
        query = make(number)
        split_read_compute(query, path, [(0, min(10_000, args.events))])  # warm-up

        runner = processor.Runner(executor=processor.IterativeExecutor(status=False),
                                  chunksize=args.chunksize, metadata_cache=metadata)
        runner.preprocess({"adl": [path]}, treename="Events")  # file metadata, untimed
        gk.reset_stats()
        with Clock() as total:
            out = runner({"adl": [path]}, query, treename="Events")
        stats = gk.stats()
        read, compute, split_out = split_read_compute(query, path, ranges)
        if out["n_events"] != args.events or split_out["n_events"] != args.events:
            raise RuntimeError(f"Q{number}: processed {out['n_events']}/{split_out['n_events']} "
                               f"events, expected {args.events}")
        for name, h in out["hists"].items():  # both ways of running agree
            if (h.values(flow=True) != split_out["hists"][name].values(flow=True)).any():
                raise RuntimeError(f"Q{number} {name}: end-to-end and split runs differ")
        results[f"Q{number}"] = {
            "title": query.title,
            "end_to_end": rates(total, args.events),
            "read": rates(read, args.events),
            "compute": rates(compute, args.events),
            "gk_calls_per_run": stats["n_calls"],
            "gk_handoffs": stats["n_handoffs"],
            "entries_filled": {name: int(h.sum(flow=True)) for name, h in out["hists"].items()},
        }
        r = results[f"Q{number}"]
        print(f"Q{number}: end-to-end {r['end_to_end']['events_per_s_cpu']:>10,} ev/s  "
              f"read {r['read']['events_per_s_cpu']:>10,} ev/s  "
              f"compute {r['compute']['events_per_s_cpu']:>10,} ev/s  (CPU time)", flush=True)

    report = {
        "benchmark": "ADL queries, coffea IterativeExecutor, one core",
        "machine": machine(),
        "load_average_1_5_15": {"before": [round(x, 2) for x in load_before],
                                "after": [round(x, 2) for x in os.getloadavg()]},
        "note": "shared machine: other jobs ran concurrently; CPU-time rates are the ones to compare",
        "numba_threads": gk.get_num_threads(),
        "chunksize": args.chunksize,
        "sample": sample,
        "method": __doc__.split("\n\n", 3)[3].strip(),
        "queries": results,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".tmp", "w") as f:
        json.dump(report, f, indent=2)
    os.replace(args.out + ".tmp", args.out)

    print(f"\n{'query':<6}{'end-to-end ev/s':>17}{'read ev/s':>13}{'compute ev/s':>15}"
          f"{'read share':>12}{'gk calls':>10}   (CPU time; {args.events:,} events)")
    for q, r in results.items():
        share = r["read"]["cpu_s"] / (r["read"]["cpu_s"] + r["compute"]["cpu_s"])
        print(f"{q:<6}{r['end_to_end']['events_per_s_cpu']:>17,}{r['read']['events_per_s_cpu']:>13,}"
              f"{r['compute']['events_per_s_cpu']:>15,}{share:>12.0%}{r['gk_calls_per_run']:>10}")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
