"""Per-chunk overhead of GPUExecutor against coffea's DaskExecutor, same workers.

    .venv/bin/python benchmarks/executor_overhead.py [--chunks 1000] [--repeats 5]

One Dask cluster (``--workers`` processes of one thread, each declaring ``CPU=1``) and
one Client serve both executors. The input is a generated NanoAOD-like file of
``--chunks`` events cut into one-entry chunks; the processor does nothing, so the time
is what it costs to schedule a chunk, open its events and merge its output:

- ``runner``: ``coffea.processor.Runner(executor=...).run(work_items, EmptyProcessor())``
  (the processing call; the work items are made once, outside the timing);
- ``bare``: ``executor(items, trivial_function, None)`` with no file access at all,
  the executor's own scheduling and merging alone.

Runs are repeated and interleaved (the order alternates every repeat), progress bars
off for both. The ratio to DaskExecutor is the median over repeats of the ratio of the
two back-to-back runs of that repeat (robust to the load drifts of a shared machine);
the ratio of the minima is given as well. ``--dashboard-ab`` adds a third executor, GPUExecutor
with ``gpuexec.dashboard: false`` (its tasks send nothing to the /gpuexec page), interleaved
with the others: the page's cost is the two GPUExecutor rows' difference
(docs/monitoring.md#what-the-plugin-costs). Prints a table and writes
benchmarks/results/executor_overhead_<machine>_<date>.json with the command, commit and
machine. ``--smoke``: 20 chunks, one repeat (seconds; checks the script runs).

``--tls on``: the cluster talks ``tls://`` with per-cluster credentials (what
``GPUCluster`` does by default); ``--tls both``: a second, TLS cluster of the same size
runs a third executor, "GPUExecutor (TLS)", interleaved with the other two, and its
paired ratio to "GPUExecutor" on the plain cluster is the cost of TLS
(docs/deploy.md#gpucluster-tls).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # for examples.make_sample

import _common  # noqa: E402  (benchmarks/, the script's folder)

from coffea.processor import ProcessorABC  # noqa: E402


class EmptyProcessor(ProcessorABC):
    """Reads nothing, returns an empty output."""

    def process(self, events):
        return {}

    def postprocess(self, accumulator):
        return accumulator


def one(_item):
    return {"n": 1}


def versions() -> dict:
    import coffea
    import dask
    import distributed

    return {"load_average_at_start": os.getloadavg(), "coffea": coffea.__version__,
            "dask": dask.__version__, "distributed": distributed.__version__}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--smoke", action="store_true",
                        help="20 chunks, one repeat: checks the script runs")
    parser.add_argument("--tls", choices=("off", "on", "both"), default="off",
                        help="the cluster's comms: plain TCP, TLS, or both side by side")
    parser.add_argument("--dashboard-ab", action="store_true",
                        help="also GPUExecutor without the dashboard feed (gpuexec.dashboard: false)")
    parser.add_argument("--out", default=None, help="JSON (default: benchmarks/results/"
                        "executor_overhead_<machine>_<date>.json)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.chunks, args.repeats = min(args.chunks, 20), 1
    info = versions()

    import dask
    from coffea.nanoevents import NanoAODSchema
    from coffea.processor import DaskExecutor, IterativeExecutor, Runner
    from distributed import Client, LocalCluster

    from examples.make_sample import write_sample
    from gpuexec import GPUExecutor

    warnings.filterwarnings("ignore", category=RuntimeWarning, module="coffea")
    tmp = tempfile.mkdtemp(prefix="gpuexec-overhead-")
    sample = write_sample(os.path.join(tmp, "events.root"), args.chunks, compression="zlib:1")
    items = list(Runner(executor=IterativeExecutor(status=False), chunksize=1,
                        schema=NanoAODSchema).preprocess({"bench": [sample]}, treename="Events"))
    assert len(items) == args.chunks, len(items)

    from gpuexec.scheduler.cluster import cluster_security

    def start_cluster(tls: bool):
        sec = {"security": cluster_security(True), "protocol": "tls://"} if tls else {}
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               resources={"CPU": 1}, host="127.0.0.1",
                               dashboard_address="127.0.0.1:0", **sec)
        return cluster, Client(cluster)

    cluster, client = start_cluster(args.tls == "on")
    clusters = [(cluster, client)]
    executors = {
        "coffea DaskExecutor": DaskExecutor(client=client, status=False),
        "GPUExecutor": GPUExecutor(client=client, status=False),
    }
    settings = {name: {} for name in executors}  # Dask config each executor runs under
    if args.tls == "both":
        clusters.append(start_cluster(True))
        executors["GPUExecutor (TLS)"] = GPUExecutor(client=clusters[1][1], status=False)
        settings["GPUExecutor (TLS)"] = {}
    if args.dashboard_ab:
        executors["GPUExecutor, no dashboard"] = GPUExecutor(client=client, status=False)
        settings["GPUExecutor, no dashboard"] = {"gpuexec.dashboard": False}
    plain = list(range(args.chunks))

    def runner(executor):
        out = Runner(executor=executor, schema=NanoAODSchema).run(items, EmptyProcessor())
        assert out["out"] == {} and len(out["processed"]) == args.chunks

    def bare(executor):
        out, _ = executor(plain, one, None)
        assert out == {"n": args.chunks}

    modes = {"runner": runner, "bare": bare}
    times = {mode: {name: [] for name in executors} for mode in modes}
    for mode, call in modes.items():
        for name, executor in executors.items():  # warm-up: imports and caches on the workers
            with dask.config.set(settings[name]):
                call(executor)
        for r in range(args.repeats):
            order = list(executors) if r % 2 == 0 else list(reversed(executors))
            for name in order:
                with dask.config.set(settings[name]):
                    start = time.perf_counter()
                    call(executors[name])
                    times[mode][name].append(time.perf_counter() - start)
                print(f"  {mode:6s} repeat {r + 1}/{args.repeats} {name:20s} "
                      f"{times[mode][name][-1]:7.2f} s", flush=True)
    for cluster, client in clusters:
        client.close()
        cluster.close()

    rows = []
    for mode in modes:
        dask = times[mode]["coffea DaskExecutor"]
        for name in executors:
            runs = times[mode][name]
            # each repeat ran both back to back: the per-repeat ratio cancels slow drifts
            # of the machine's load, its median is the headline
            paired = [t / d for t, d in zip(runs, dask)]
            rows.append({
                "mode": mode, "executor": name,
                "median_s": statistics.median(runs), "min_s": min(runs),
                "per_chunk_ms": 1000 * statistics.median(runs) / args.chunks,
                "paired_ratio_median": statistics.median(paired),
                "paired_ratios": paired,
                "min_ratio_to_dask": min(runs) / min(dask),
                "runs_s": runs,
            })
            if name == "GPUExecutor (TLS)":  # the same executor on the plain cluster
                tls = [t / p for t, p in zip(runs, times[mode]["GPUExecutor"])]
                rows[-1].update(tls_vs_plain_paired_median=statistics.median(tls),
                                tls_vs_plain_paired=tls)
    print()
    print(f"{'mode':7s} {'executor':20s} {'median s':>9s} {'ms/chunk':>9s} {'min s':>7s} "
          f"{'vs Dask (paired median)':>24s} {'(min/min)':>10s}")
    for row in rows:
        print(f"{row['mode']:7s} {row['executor']:20s} {row['median_s']:9.2f} "
              f"{row['per_chunk_ms']:9.2f} {row['min_s']:7.2f} "
              f"{row['paired_ratio_median']:24.3f} {row['min_ratio_to_dask']:10.3f}"
              + (f"   TLS/plain {row['tls_vs_plain_paired_median']:.3f}"
                 if "tls_vs_plain_paired_median" in row else ""))
    result = {
        "benchmark": "executor_overhead", "machine": info,
        "setup": {"chunks": args.chunks, "tls": args.tls, "entries_per_chunk": 1, "workers": args.workers,
                  "threads_per_worker": 1, "repeats": args.repeats, "status": False,
                  "processor": "EmptyProcessor (returns {})", "schema": "NanoAODSchema",
                  "dashboard_ab": args.dashboard_ab},
        "rows": rows,
    }
    out = args.out or _common.default_out("executor_overhead", args.smoke)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(_common.stamp(result), f, indent=1)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
