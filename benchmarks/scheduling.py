"""How well an executor keeps its workers busy: tasks that sleep instead of computing, so
that the H200 host's 16 worker processes fit on a 2-core machine and only scheduling is
measured.

    .venv/bin/python benchmarks/scheduling.py [--workers 16] [--tasks 128] [--mean 0.05]

Task k sleeps ``uniform(0.5, 1.5) x mean`` seconds (fixed seed), about the length of an ADL
chunk of 50k events on one core. Efficiency = (sum of sleeps / workers) / wall time of the
call: 1.0 is a perfect schedule. Side by side, in one run, with the same tasks:

- ``gpuexec``: GPUExecutor's embedded cluster of CPU workers (its tasks unrestricted);
- ``gpuexec-restricted``: GPUExecutor on a LocalCluster whose workers declare ``CPU=1``,
  so that its tasks carry that resource (as on a cluster with GPU workers; before the
  eighth session, also the embedded cluster's);
- ``dask``: ``Client.map`` + ``gather`` on a LocalCluster (no reduction);
- ``futures``: the standard library's process pool (``ProcessPoolExecutor.map``, as
  coffea's FuturesExecutor uses it, no reduction), every worker started first.

GPUExecutor merges the outputs on the cluster (``treereduction``); the others return them
to the caller. Prints a table (median of ``--repeats`` calls after a warm-up) and writes
benchmarks/results/scheduling.json with the machine named.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def nap(seconds: float) -> dict:
    time.sleep(seconds)
    return {"tasks": 1, "seconds": seconds}


def timed_calls(call, repeats: int) -> list[float]:
    call()  # warm-up: imports, first task per worker
    walls = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        walls.append(time.perf_counter() - start)
    return walls


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--tasks", type=int, default=128)
    parser.add_argument("--mean", type=float, default=0.05, help="mean task seconds")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "scheduling.json"))
    args = parser.parse_args(argv)

    from distributed import Client, LocalCluster

    from gpuexec import GPUExecutor

    rng = random.Random(1)
    naps = [rng.uniform(0.5 * args.mean, 1.5 * args.mean) for _ in range(args.tasks)]
    ideal = sum(naps) / args.workers
    empty = {"tasks": 0, "seconds": 0.0}
    walls: dict[str, list[float]] = {}
    quiet = contextlib.redirect_stdout(io.StringIO())

    with quiet, GPUExecutor(gpu_workers=0, cpu_workers=args.workers, dashboard_address=None,
                            status=False) as ex:
        walls["gpuexec"] = timed_calls(lambda: ex(naps, nap, dict(empty)), args.repeats)
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, resources={"CPU": 1},
                      dashboard_address=None) as cluster, Client(cluster) as client:
        ex = GPUExecutor(client=client, status=False)
        walls["gpuexec-restricted"] = timed_calls(lambda: ex(naps, nap, dict(empty)),
                                                  args.repeats)
        walls["dask"] = timed_calls(
            lambda: client.gather(client.map(nap, naps, pure=False)), args.repeats)
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(args.workers,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(time.sleep, [0.3] * args.workers))  # start every worker
        walls["futures"] = timed_calls(lambda: list(pool.map(nap, naps)), args.repeats)

    rows = {name: {"median_s": statistics.median(w), "min_s": min(w), "walls_s": w,
                   "efficiency": ideal / statistics.median(w)} for name, w in walls.items()}
    print(f"{args.tasks} tasks of {args.mean * 1e3:.0f} ms (mean) on {args.workers} workers; "
          f"ideal {ideal:.3f} s")
    print(f"{'executor':20s} {'median s':>9s} {'min s':>7s} {'efficiency':>10s}")
    for name, row in rows.items():
        print(f"{name:20s} {row['median_s']:9.3f} {row['min_s']:7.3f} {row['efficiency']:10.2f}")
    result = {"machine": {"host": platform.node(), "cores": len(os.sched_getaffinity(0)),
                          "python": platform.python_version()},
              "workers": args.workers, "tasks": args.tasks, "mean_s": args.mean,
              "ideal_s": ideal, "executors": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
