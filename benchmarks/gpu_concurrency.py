"""How an ADL processor's throughput on one GPU scales with the processes and threads that
drive it, and with the events per task: the question behind the executor's GPU pools
(how many GPU worker processes per device, how many threads each, how many chunks per
merged task). No Dask: each process reads its task's columns from a generated file,
stages them on the device as a GPU worker does (``stage_events``) and runs the processor
under ``gk.using``, in a loop, for a fixed time; all processes of a configuration start
at one instant.

    python benchmarks/gpu_concurrency.py --queries 6,8 --configs 1x1@200000,4x1@200000,16x1@200000
    python benchmarks/gpu_concurrency.py --backends cpu --configs 16x1@50000      # CPU workers

A configuration ``PxT@E`` is P processes of T threads each, tasks of E events. Prints a
table (M events/s summed over processes, and the seconds per task split into reading,
transfer and compute) and writes ``gpu_concurrency.json`` under ``--out``. ``--label``
names the run (e.g. whether an MPS daemon was running) in the JSON and the table.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _parse_config(text: str) -> tuple[int, int, int]:
    shape, _, events = text.partition("@")
    procs, _, threads = shape.partition("x")
    return int(procs), int(threads or 1), int(events)


_DIRECT = False  # set in each process: GPU workers read through gpuexec.io.device_read


def _process(proc, events, backend: str, timings=None, query=None):
    """``proc`` on ``events`` as a worker of ``backend``'s pool runs it: unchanged on the
    CPU, staged on the device (``stage_events``) inside one awkward error context on a GPU;
    with ``--read-on-device``, its plain branches read as GPUExecutor's workers read them
    (``read_on_device``, and ahead by the query's earlier tasks)."""
    from gpuexec.io.staging import awkward_messages_on_error, stage_events

    if backend == "cpu":
        return proc.process(events)
    staged = stage_events(events, "cuda", timings, read_on_device=_DIRECT,
                          read_ahead=f"Q{query}" if _DIRECT else None)
    with awkward_messages_on_error("cuda"):
        return proc.process(staged)


def _task_loop(path, query, backend, events_per_task, total_events, start_at, stop_at,
               offset, out, lock):
    """Run tasks back to back between ``start_at`` and ``stop_at`` (wall clock); add the
    events done and the seconds of each part to ``out``."""
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    import gpuexec.kernels as gk
    from examples.adl import make
    from gpuexec.io.staging import Timings

    proc = make(query)
    ranges = [(s, min(s + events_per_task, total_events))
              for s in range(0, total_events - events_per_task + 1, events_per_task)]
    k = offset
    while time.time() < start_at:
        time.sleep(0.001)
    done = tasks = 0
    read = transfer = seconds = 0.0
    with gk.using(backend):
        while time.time() < stop_at:
            lo, hi = ranges[k % len(ranges)]
            k += 1
            t0 = time.perf_counter()
            events = NanoEventsFactory.from_root(
                {path: "Events"}, schemaclass=NanoAODSchema, mode="virtual",
                entry_start=lo, entry_stop=hi).events()
            timings = Timings()
            result = _process(proc, events, backend, timings, query)
            seconds += time.perf_counter() - t0
            read += timings.read
            transfer += timings.transfer
            done += int(result["n_events"])
            tasks += 1
    end = time.time()
    with lock:
        out["events"] += done
        out["tasks"] += tasks
        out["seconds"] += seconds
        out["read"] += read
        out["transfer"] += transfer
        out["end"] = max(out["end"], end)


def _worker(index, path, total_events, backend, commands, results, ready):
    """A long-lived process: warms every query once, then runs each command it gets."""
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    import gpuexec.kernels as gk
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    from examples.adl import make

    global _DIRECT
    from gpuexec.io import inflate

    inflate.use("auto")  # ISA-L where installed, as GPUExecutor's workers
    command = commands.get()
    _DIRECT = command["direct"]
    for query in command["warm"]:
        events = NanoEventsFactory.from_root({path: "Events"}, schemaclass=NanoAODSchema,
                                             mode="virtual", entry_stop=20_000).events()
        with gk.using(backend):
            _process(make(query), events, backend, query=query)
    ready.put(index)
    while True:
        command = commands.get()
        if command is None:
            return
        out = {"events": 0, "tasks": 0, "seconds": 0.0, "read": 0.0, "transfer": 0.0,
               "end": 0.0}
        lock = threading.Lock()
        threads = [threading.Thread(target=_task_loop, args=(
            path, command["query"], backend, command["events_per_task"], total_events,
            command["start_at"], command["stop_at"], index * command["threads"] + t, out, lock))
            for t in range(command["threads"])]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        results.put(out)


def run_backend(backend, path, total_events, queries, configs, seconds, direct=False):
    ctx = mp.get_context("spawn")
    most = max(p for p, _, _ in configs)
    commands = [ctx.Queue() for _ in range(most)]
    results, ready = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(i, path, total_events, backend, commands[i],
                                               results, ready), daemon=True)
             for i in range(most)]
    for p in procs:
        p.start()
    for q in commands:
        q.put({"warm": queries, "direct": direct})
    for _ in procs:
        ready.get(timeout=600)
    rows = []
    for query in queries:
        for n_procs, n_threads, events_per_task in configs:
            start_at = time.time() + 0.5
            stop_at = start_at + seconds
            for i in range(n_procs):
                commands[i].put({"query": query, "threads": n_threads, "start_at": start_at,
                                 "stop_at": stop_at, "events_per_task": events_per_task})
            parts = [results.get(timeout=seconds + 600) for _ in range(n_procs)]
            wall = max(p["end"] for p in parts) - start_at
            total = {k: sum(p[k] for p in parts) for k in ("events", "tasks", "seconds",
                                                          "read", "transfer")}
            tasks = max(total["tasks"], 1)
            row = {"backend": backend, "query": query, "processes": n_procs,
                   "threads": n_threads, "events_per_task": events_per_task,
                   "events": total["events"], "tasks": total["tasks"], "wall_s": wall,
                   "mevents_per_s": total["events"] / wall / 1e6,
                   "task_s": total["seconds"] / tasks, "read_s": total["read"] / tasks,
                   "transfer_s": total["transfer"] / tasks,
                   "compute_s": (total["seconds"] - total["read"] - total["transfer"]) / tasks}
            rows.append(row)
            print(f"{backend:<5} Q{query}  {n_procs:>3}x{n_threads:<2} {events_per_task:>8} "
                  f"{row['mevents_per_s']:>8.2f} {row['task_s']:>8.3f} {row['read_s']:>7.3f} "
                  f"{row['transfer_s']:>7.3f} {row['compute_s']:>8.3f} {row['tasks']:>6}",
                  flush=True)
    for q in commands:
        q.put(None)
    for p in procs:
        p.join(timeout=30)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=800_000, help="events in the generated file")
    ap.add_argument("--queries", default="6,8")
    ap.add_argument("--backends", default="cuda")
    ap.add_argument("--configs", default="1x1@50000,1x1@200000,1x1@800000,1x4@200000,"
                                         "2x1@200000,4x1@200000,8x1@200000,16x1@200000")
    ap.add_argument("--seconds", type=float, default=4.0, help="run time per configuration")
    ap.add_argument("--label", default="")
    ap.add_argument("--read-on-device", action="store_true",
                    help="GPU processes read plain branches through gpuexec.io.device_read "
                         "(GPUExecutor's read_on_device, with read-ahead)")
    ap.add_argument("--basket-entries", type=int, default=None,
                    help="entries per basket of the generated file (10000: a real NanoAOD "
                         "file's layout, see examples/make_sample.py)")
    ap.add_argument("--out", default=os.environ.get("OUT", str(ROOT / "out")))
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=RuntimeWarning)

    from examples.make_sample import write_sample

    configs = [_parse_config(c) for c in args.configs.split(",")]
    queries = [int(q) for q in args.queries.split(",")]
    tmp = tempfile.TemporaryDirectory(prefix="gpuexec-conc-")
    path = write_sample(os.path.join(tmp.name, "adl.root"), args.events,
                        compression="zlib:1", basket_entries=args.basket_entries)
    print(f"{'back':<5} {'query':<4} {'PxT':>6} {'ev/task':>8} {'M ev/s':>8} {'task s':>8} "
          f"{'read s':>7} {'h2d s':>7} {'compute':>8} {'tasks':>6}", flush=True)
    rows = []
    for backend in args.backends.split(","):
        rows += run_backend(backend, path, args.events, queries, configs, args.seconds,
                            args.read_on_device)
    machine = {"host": platform.node(), "python": platform.python_version(),
               "cores": os.cpu_count()}
    if "cuda" in args.backends:
        import cupy

        machine["gpu"] = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "gpu_concurrency" + (f"_{args.label}" if args.label else "") + ".json"
    (out / name).write_text(json.dumps({"machine": machine, "label": args.label,
                                        "events_in_file": args.events, "seconds": args.seconds,
                                        "read_on_device": args.read_on_device,
                                        "basket_entries": args.basket_entries or 100_000,
                                        "rows": rows}, indent=1))
    print("wrote", out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
