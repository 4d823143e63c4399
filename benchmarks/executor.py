"""Executor benchmark: events/s of every ADL query, GPUExecutor against coffea's
DaskExecutor and FuturesExecutor on the same cores, in one run, with the split of the
GPUExecutor's task time between reading, host-device transfer and compute, and the
makespan of its placement against all-CPU and all-GPU placement (measured: the same
run with the GPU pool only, and with CPU workers on every core).

    python benchmarks/executor.py                           # 5M events, every query
    python benchmarks/executor.py --events 200000 --gpu-backend cpu --gpu-workers 1 --cores 2

The input is generated inside the run (examples/make_sample.py, zlib:1, baskets of
10,000 entries as a real NanoAOD file's). Prints a table and writes
benchmarks/results/executor_<machine>_<date>.json with the command, commit and machine. Each
executor (and its cluster) is started once for all the queries; each timed run follows
a warm-up over one chunk per core. ``--queries 1,2,3,4`` then ``--queries 5,6,7,8
--previous <first JSON>`` splits the run over two device calls (same seed, same file);
``--executor-budget SECONDS`` bounds each executor's share of a call (a query left when it
is spent is recorded as not run: coffea's FuturesExecutor once took a whole call's share).
``--queries 8,8r`` also times Q8's columns read and nothing computed: the reading floor
under Q8's time on each executor. The JSON is written after each query (each round with
``--alternate``), so a run stopped by ``timeout`` or Ctrl-C keeps what it measured.

GPUExecutor is built as a user builds it (``executor_settings``): per-run fields on
``GPUExecutor``, workers on ``gpuexec.GPUCluster``, tuning in Dask's configuration
(``gpuexec.*``). ``--smoke``: 20,000 events, two queries, a CPU-backed GPU pool
(seconds). ``--settings-only`` prints each executor's settings and exits.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import _common  # noqa: E402  (benchmarks/, the script's folder)

# GPUExecutor's own per-run fields; other NAME=VALUE settings are GPUCluster parameters,
# and dotted or hyphenated names keys of Dask's configuration under "gpuexec."
EXECUTOR_FIELDS = ("gpu_backend", "retries", "merge_on", "treereduction", "allowed_failures",
                   "priority", "calibration")


def gpu_devices() -> list[str]:
    from gpuexec.scheduler.devices import discover

    return [d.describe().split(", pinned by")[0] for d in discover()]


def run_query(executor, number: int | str, paths: list[str], chunksize: int,
              maxchunks: int | None = None) -> tuple[float, dict]:
    import dask
    from coffea import processor
    from coffea.nanoevents import NanoAODSchema

    from examples.adl import make

    runner = processor.Runner(executor=executor, chunksize=chunksize, schema=NanoAODSchema,
                              metadata_cache={}, maxchunks=maxchunks)
    # each executor's own tuning, also while several are open at once (--alternate)
    with dask.config.set(getattr(executor, "bench_tuning", {})):
        start = time.perf_counter()
        out = runner({"adl": list(paths)}, make(number), treename="Events")
        return time.perf_counter() - start, out


def busy_cores(window: float) -> float:
    """Cores this host kept busy over the next ``window`` seconds (psutil: all but idle
    and iowait time)."""
    import psutil

    return psutil.cpu_percent(interval=window) / 100 * psutil.cpu_count()


def process_cpu_seconds() -> float:
    """CPU time of this (the client's) process so far: what the executor's own side of
    a run takes from the cores its workers run on."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def coffea_executor(name: str, cores: int, inflate: str = "auto"):
    """coffea's executor ``name`` on ``cores`` processes whose uproot inflates zlib
    baskets with the library GPUExecutor's workers use (``gpuexec.io.inflate``)."""
    from coffea import processor

    from gpuexec.io import inflate as inflater

    if name == "futures":
        # one spawned standard-library pool for every query, as Dask keeps its cluster
        # (docs/benchmarks.md#executor: a pool per query costs 3 s per query)
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(max_workers=cores, initializer=_futures_worker,
                                   initargs=(inflate,),
                                   mp_context=multiprocessing.get_context("spawn"))
        # every process started now, not during the first query (docs/benchmarks.md#executor)
        list(pool.map(time.sleep, [0.5] * cores))
        try:
            yield processor.FuturesExecutor(pool=pool, workers=cores, status=False)
        finally:
            pool.shutdown(wait=True)
        return
    import dask
    from distributed import Client, LocalCluster

    # the Dask settings of GPUExecutor's cluster (no MALLOC_TRIM_THRESHOLD_, Dask's timers
    # and profiler slowed): the same tuning for both, and an idle coffea cluster costs the
    # host while another executor runs what an idle GPUExecutor cluster does
    with dask.config.set(dask_worker_settings()), \
            LocalCluster(n_workers=cores, threads_per_worker=1, dashboard_address=None,
                         processes=True) as cluster, Client(cluster) as client:
        client.run(inflater.use, inflate)
        yield processor.DaskExecutor(client=client, status=False)


def dask_worker_settings() -> dict:
    """The Dask settings GPUCluster starts its workers with (gpuexec.worker.*)."""
    from gpuexec.gpu_cluster import worker_settings

    return worker_settings()


def _futures_worker(inflate: str) -> None:
    """A FuturesExecutor worker starts as a Dask worker of GPUExecutor does: the analysis
    stack imported, uproot inflating with ``inflate``."""
    import coffea.nanoevents  # noqa: F401
    import coffea.processor  # noqa: F401

    import examples.adl  # noqa: F401
    from gpuexec.io import inflate as inflater

    inflater.use(inflate)


def executor_settings(mode: str, args) -> dict:
    """The settings GPUExecutor mode ``mode`` is built with: ``{"executor": GPUExecutor's
    fields, "cluster": GPUCluster's parameters, "tuning": Dask configuration keys}``.
    ``placement:NAME=VALUE`` (several joined by "/") sets one setting on top, where its
    name belongs; the variant's value wins, ``gpu_workers`` included."""
    executor = {"status": False}
    cluster = {"dashboard_address": "127.0.0.1:0"}
    tuning = {"gpuexec.reading.inflate": args.inflate}
    for name, value in (("gpu_backend", args.gpu_backend), ("merge_on", args.merge_on)):
        if value is not None:
            executor[name] = value
    for name, value in (("gpu_threads", args.gpu_threads), ("gpu_share", args.gpu_share),
                        ("gpu_backend", args.gpu_backend)):
        if value is not None:
            cluster[name] = value
    for key, value in (("placement.gpu-merge", args.gpu_merge), ("gpu.sync", args.gpu_sync)):
        if value is not None:
            tuning[f"gpuexec.{key}"] = value
    cluster["gpu_workers"] = args.gpu_workers
    if mode == "placement-backups":  # copies of straggling tasks
        tuning["gpuexec.placement.backups"] = 0.5
    elif mode == "placement-nobackup":
        tuning["gpuexec.placement.backups"] = None
    elif mode == "all-gpu":
        cluster["cpu_workers"] = 0
    elif mode == "all-cpu":  # CPU workers on every core
        cluster["gpu_workers"] = 0
    elif mode.startswith("placement:"):
        for setting in mode.partition(":")[2].split("/"):
            name, _, text = setting.partition("=")
            value = ast.literal_eval(text)
            if name in EXECUTOR_FIELDS:
                executor[name] = value
            elif "." in name or "-" in name:
                tuning[name if name.startswith("gpuexec.") else f"gpuexec.{name}"] = value
            else:
                cluster[name] = value
    if cluster["gpu_workers"] is None:
        del cluster["gpu_workers"]
    return {"executor": executor, "cluster": cluster, "tuning": tuning}


@contextlib.contextmanager
def gpuexec_executor(mode: str, args):
    """GPUExecutor on its own GPUCluster, built from ``executor_settings``; the tuning is
    set while the cluster starts and again around each run (``run_query``)."""
    import dask

    from gpuexec import GPUCluster, GPUExecutor

    settings = executor_settings(mode, args)
    with dask.config.set(settings["tuning"]), GPUCluster(**settings["cluster"]) as cluster, \
            GPUExecutor(client=cluster, **settings["executor"]) as ex:
        ex.bench_tuning, ex.bench_cluster = settings["tuning"], cluster
        yield ex


def parse(argv=None) -> argparse.Namespace:
    from gpuexec.io import inflate
    from gpuexec.kernels.gpu.runtime import SYNC_MODES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--chunksize", type=int, default=None,
                        help="events per chunk (default: events / (8 x cores), 50k..500k)")
    parser.add_argument("--queries", default="1,2,3,4,5,6,7,8",
                        help='comma-separated; "8r": the columns of Q8 read, nothing computed '
                             "(the reading floor under Q8's time)")
    parser.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--gpu-backend", default=None, help='"cpu": a CPU-backed GPU pool')
    parser.add_argument("--gpu-workers", type=int, default=None)
    parser.add_argument("--gpu-threads", type=int, default=None)
    parser.add_argument("--gpu-share", default=None, choices=("auto", "mps", "none"),
                        help="how GPU workers share a device (GPUCluster's gpu_share)")
    parser.add_argument("--gpu-merge", type=int, default=None,
                        help="adjacent chunks merged into one GPU task, at most "
                             "(gpuexec.placement.gpu-merge; its default when not given)")
    parser.add_argument("--gpu-sync", default=None, choices=SYNC_MODES,
                        help="how GPU workers wait for their device (gpuexec.gpu.sync; "
                             "one cluster per value, so compare values in separate runs, "
                             "each beside futures)")
    parser.add_argument("--merge-on", default=None, choices=("client", "cluster"),
                        help="where GPUExecutor merges outputs (default: its own)")
    parser.add_argument("--executors", default=None,
                        help="default placement,dask,all-cpu,all-gpu,futures; also "
                             "placement-backups / placement-nobackup (gpuexec.placement."
                             "backups 0.5 / None); placement:NAME=VALUE sets a GPUExecutor "
                             "field, a GPUCluster parameter or (a dotted name) a gpuexec.* "
                             "key, e.g. placement:placement.gpu-merge=8/gpu_workers=3")
    parser.add_argument("--repeat", type=int, default=1,
                        help="timed runs per query and executor; the median one is kept")
    parser.add_argument("--alternate", action="store_true",
                        help="open every executor at once and take turns per timed run, "
                             "the order rotated each round (A/B comparisons)")
    parser.add_argument("--inflate", default="auto", choices=inflate.CHOICES,
                        help="library inflating zlib baskets in every executor's workers "
                             "(gpuexec.io.inflate; default: ISA-L where installed)")
    parser.add_argument("--files", type=int, default=1,
                        help="generate the events as this many files of equal size, written "
                             "side by side (a dataset of several files, as a real one is)")
    parser.add_argument("--basket-entries", type=int, default=10_000,
                        help="entries per basket of the generated files (default: 10000, a "
                             "real NanoAOD file's layout; examples/make_sample.py)")
    parser.add_argument("--file", default=None,
                        help="reuse these samples (comma-separated) instead of generating")
    parser.add_argument("--out", default=None,
                        help="JSON (default: benchmarks/results/executor_<machine>_<date>.json)")
    parser.add_argument("--executor-budget", type=float, default=None, metavar="SECONDS",
                        help="wall time per executor; queries left when it is spent are "
                             "recorded as not run (one slow executor no longer starves the "
                             "others of a device call's time)")
    parser.add_argument("--previous", default=None,
                        help="JSON of an earlier run (other queries, same machine and input) "
                             "to merge: a run split over time-limited calls of a GPU host")
    parser.add_argument("--smoke", action="store_true",
                        help="20,000 events, Q1 and Q8, a CPU-backed GPU pool on 2 cores, "
                             "GPUExecutor and Dask: checks the script runs")
    parser.add_argument("--settings-only", action="store_true",
                        help="print each GPUExecutor mode's settings as JSON and exit")
    args = parser.parse_args(argv)
    if args.smoke:
        args.events, args.queries = min(args.events, 20_000), "1,8"
        args.gpu_backend, args.gpu_workers = args.gpu_backend or "cpu", args.gpu_workers or 1
        args.cores = min(args.cores, 2)
        args.executors = args.executors or "placement,dask"
    args.executors = args.executors or "placement,dask,all-cpu,all-gpu,futures"
    args.out = args.out or _common.default_out("executor", args.smoke)
    return args


def main(argv=None) -> int:
    from gpuexec import GPUExecutor
    from gpuexec.io import device_read as device_reading
    from gpuexec.io import inflate
    from gpuexec.executor import NVCOMP_MISSING

    args = parse(argv)
    if args.settings_only:
        print(json.dumps({name: executor_settings(name, args)
                          for name in args.executors.split(",")
                          if name not in ("dask", "futures")}, indent=1))
        return 0
    # `timeout` (how a device call bounds a run) sends SIGTERM: unwind as on Ctrl-C, so
    # the clusters close and what was measured is saved
    signal.signal(signal.SIGTERM, _interrupted)
    # coffea's executors run one task per worker process (Dask: one thread each; futures:
    # one process per core): numba's kernels in them get one thread each, as gpuexec's
    # CPU workers do (their pool sets its own count). Left at numba's default, every
    # worker would start a thread per core: 16 x 16 threads on 16 cores.
    os.environ["NUMBA_NUM_THREADS"] = "1"
    queries = [q if q.endswith("r") else int(q) for q in args.queries.split(",")]
    executors = args.executors.split(",")
    chunksize = args.chunksize or max(50_000, min(500_000, args.events // (8 * args.cores)))

    tmp = tempfile.TemporaryDirectory(prefix="gpuexec-bench-")
    if args.file is not None:
        paths = args.file.split(",")
    else:
        start = time.perf_counter()
        paths = generate(tmp.name, args.events, args.files, args.basket_entries)
        print(f"generated {args.events:,} events in {len(paths)} file(s) of "
              f"{args.basket_entries:,}-entry baskets in "
              f"{time.perf_counter() - start:.1f} s")

    library = inflate.resolve(args.inflate)
    if library != "isal":  # python-isal is a dependency: without it reading is slower
        why = "not installed" if args.inflate == "auto" else "not chosen"
        print(f"inflate: {library} (python-isal {why}): every executor inflates zlib baskets "
              "slower than with gpuexec's dependencies; not the shipped configuration",
              flush=True)
    host = {"gpus": gpu_devices()}
    nvcomp = device_reading.nvcomp_version()
    if nvcomp is None and host["gpus"] and args.gpu_backend != "cpu":  # slower GPU reading
        print(f"{NVCOMP_MISSING}; not the shipped GPU configuration", flush=True)
    results = {"machine": host, "events": args.events, "files": len(paths),
               "chunksize": chunksize, "basket_entries": args.basket_entries,
               "cores": args.cores, "gpu_backend": args.gpu_backend,
               "gpu_workers": args.gpu_workers, "gpu_threads": args.gpu_threads,
               "gpu_merge": args.gpu_merge, "gpu_share": args.gpu_share, "gpu_sync": args.gpu_sync,
               "merge_on": args.merge_on or GPUExecutor.merge_on,
               "inflate": library, "nvcomp": nvcomp,
               # of every Dask cluster of the run: GPUExecutor's and coffea's DaskExecutor's
               "dask_settings": dask_worker_settings(), "queries": {}}
    if args.previous:  # queries measured by an earlier run on the same machine and input
        earlier = json.loads(Path(args.previous).read_text())
        same = all(earlier.get(k, "unrecorded") == results[k]
                   for k in ("events", "files", "chunksize", "cores", "inflate",
                             "basket_entries", "nvcomp"))
        if not same or earlier["machine"].get("gpus") != results["machine"]["gpus"]:
            raise SystemExit(f"{args.previous}: another machine, input or setup; not merged")
        results["queries"].update({k: v for k, v in earlier["queries"].items()
                                   if k[1:] not in {str(q) for q in queries}})
        results.setdefault("runs", earlier.get("runs", []))
    results.setdefault("runs", []).append({"queries": queries, "executors": executors,
                                           "date": time.strftime("%Y-%m-%d %H:%M")})
    rows = {number: results["queries"].setdefault(f"Q{number}", {}) for number in queries}
    if args.alternate:
        alternate(executors, queries, rows, paths, chunksize, args,
                  saved=lambda: save(args.out, results))
    else:
        # One executor (and cluster) per kind for all the queries, one after another
        for name in executors:
            start = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()), opened(name, args) as ex:
                warm = warm_chunks(name, ex, args)
                for number in queries:
                    spent = time.perf_counter() - start
                    if args.executor_budget is not None and spent > args.executor_budget:
                        rows[number][name] = {"not_run": f"executor budget of "
                                                         f"{args.executor_budget:.0f} s spent"}
                        continue
                    run_query(ex, number, paths, chunksize, maxchunks=warm)
                    rows[number][name] = median([timed_run(name, ex, number, paths, chunksize)
                                                 for _ in range(max(1, args.repeat))])
                    save(args.out, results)
            print(f"{name}: {time.perf_counter() - start:.0f} s for queries {args.queries}",
                  flush=True)
            save(args.out, results)  # with the queries its budget left unrun
    for number, row in rows.items():
        measured = {k for k, v in row.items() if isinstance(v, dict) and "makespan" in v}
        if {"placement", "all-cpu", "all-gpu"} <= measured:
            best = min(row["all-cpu"]["makespan"], row["all-gpu"]["makespan"])
            row["placement_vs_best_single"] = row["placement"]["makespan"] / best
        print_row(f"Q{number}", row)
    save(args.out, results)
    print(f"written {args.out}")
    return 0


def _interrupted(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def opened(name: str, args):
    return (coffea_executor(name, args.cores, args.inflate) if name in ("dask", "futures")
            else gpuexec_executor(name, args))


def warm_chunks(name: str, ex, args) -> int:
    """Chunks of the warm-up before each query's timed runs: a chunk per core, and on
    GPUExecutor enough merged GPU tasks to reach every GPU worker's slots (each process
    pays its own first use: imports, numba and kernel caches)."""
    warm = args.cores
    if name not in ("dask", "futures"):
        import dask

        with dask.config.set(ex.bench_tuning):
            merge = dask.config.get("gpuexec.placement.gpu-merge")
        warm += sum(p.workers * p.threads * merge
                    for p in ex.bench_cluster.spec.pools if p.is_gpu)
    return warm


def timed_run(name: str, ex, number: int | str, paths, chunksize: int) -> dict:
    """One timed run of query ``number``, with GPUExecutor's own account of it. Its
    workers' kept files (``open_files``) are closed first: each run opens each file once
    per worker thread, as a run on files new to the cluster does."""
    if name not in ("dask", "futures"):
        ex.close_files()
    # the cores busy just before: idle executors' clusters load the host while another runs
    # (docs/benchmarks.md#executor)
    busy = round(busy_cores(0.1), 2)
    cpu_before = process_cpu_seconds()
    seconds, out = run_query(ex, number, paths, chunksize)
    entry = {"seconds": seconds, "events_per_s": out["n_events"] / seconds,
             "client_cpu_s": process_cpu_seconds() - cpu_before, "busy_cores": busy}
    if name not in ("dask", "futures"):
        call = ex.report.processing
        # the wall time's other parts: Runner's preprocessing call (one task per file)
        pre = ex.report.preprocessing
        entry["preprocessing_s"] = pre.seconds if pre is not None else None
        entry.update({"makespan": call.seconds, "chunks_per_pool": call.pools,
                      "timing": call.timing(), "merged_tasks": len(call.merges),
                      "fallbacks": len(call.fallbacks), "phases": call.phases,
                      "backups": len(call.backups),
                      "backups_counted": sum(b.taken_from == b.to_pool for b in call.backups),
                      # cancelled copies left running on their workers at the end, and
                      # workers an earlier call's left busy at the start
                      "left_running": len(call.left_running),
                      "busy_at_start": call.busy_at_start})
        entry["tasks"] = task_runs(call.runs)
        entry["slowest_task_s"] = max((t["seconds"] for t in entry["tasks"]), default=None)
        if name.startswith("placement") and ex.placement is not None:
            entry["placement"] = ex.placement.summary()
            entry["decisions"] = ex.placement.decisions()
    return entry


def task_runs(runs) -> list[dict]:
    """Per task (a merged GPU task's chunks summed): pool, task number, worker, events,
    seconds and their reading and transfer parts, so that slow tasks can be told apart
    (e.g. each worker's first of a call)."""
    tasks: dict = {}
    for run in runs:
        key = (run.pool, run.task if run.task is not None else run.label)
        t = tasks.setdefault(key, {"pool": run.pool, "task": run.task, "worker": run.worker,
                                   "events": 0, "seconds": 0.0, "read": 0.0, "transfer": 0.0})
        t["events"] += run.units
        t["seconds"] += run.seconds
        t["read"] += run.read_seconds
        t["transfer"] += run.transfer_seconds
    return list(tasks.values())


def median(timed: list[dict]) -> dict:
    """The median run, whole, with every run's seconds (in the order they ran), the
    host's busy cores before it and, on GPUExecutor, its copies."""
    entry = dict(sorted(timed, key=lambda e: e["seconds"])[len(timed) // 2])
    if len(timed) > 1:
        entry["repeats_seconds"] = [e["seconds"] for e in timed]
        # each run's host load and, on GPUExecutor, slowest task and what copies did and
        # left behind
        kept = ("seconds", "busy_cores", "slowest_task_s", "backups",
                "backups_counted", "left_running", "busy_at_start")
        entry["repeats"] = [{k: e[k] for k in kept if k in e} for e in timed]
    return entry


def alternate(executors: list[str], queries: list, rows: dict, paths, chunksize: int,
              args, saved=lambda: None) -> None:
    """Every executor open at once (GPUExecutor modes of the same pools share one
    cluster); per query, each is warmed, then the timed runs take turns, the order
    rotated each round, so that no executor always runs first or right after
    another. ``saved`` is called after each round (a run cut short keeps its medians
    so far)."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
        opened_ = {name: stack.enter_context(opened(name, args)) for name in executors}
        for number in queries:
            timed: dict[str, list] = {name: [] for name in executors}
            for name, ex in opened_.items():
                run_query(ex, number, paths, chunksize,
                          maxchunks=warm_chunks(name, ex, args))
            for r in range(max(1, args.repeat)):
                k = r % len(executors)
                for name in executors[k:] + executors[:k]:
                    entry = timed_run(name, opened_[name], number, paths, chunksize)
                    entry["round"] = r
                    timed[name].append(entry)
                # each round's medians saved: a run stopped by its time limit keeps them
                for name in executors:
                    rows[number][name] = median(timed[name])
                saved()
            print(f"Q{number}: " + ", ".join(f"{n} {rows[number][n]['seconds']:.3f} s"
                                             for n in executors), file=sys.stderr, flush=True)


def generate(folder: str, events: int, files: int,
             basket_entries: int | None = None) -> list[str]:
    """``events`` split over ``files`` generated files (zlib:1, ``basket_entries`` per
    basket), written by one process each (a file is written by one thread: 45 s per 5M
    events on the H200 host)."""
    from concurrent.futures import ProcessPoolExecutor

    from examples.make_sample import write_sample

    sizes = [events // files + (k < events % files) for k in range(files)]
    paths = [os.path.join(folder, f"adl_{k}.root") for k in range(files)]
    with ProcessPoolExecutor(max_workers=files) as pool:
        done = [pool.submit(write_sample, path, n, seed=20240601 + k, compression="zlib:1",
                            basket_entries=basket_entries)
                for k, (path, n) in enumerate(zip(paths, sizes))]
        return [d.result() for d in done]


def save(path: str, results: dict) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(_common.stamp(dict(results)), indent=1, default=str))


def print_row(name: str, row: dict) -> None:
    ran = {k: v for k, v in row.items() if isinstance(v, dict) and "events_per_s" in v}
    rates = "  ".join(f"{k} {v['events_per_s'] / 1e6:6.3f}" for k, v in ran.items())
    skipped = [f"{k} ({v['not_run']})" for k, v in row.items()
               if isinstance(v, dict) and "not_run" in v]
    print(f"{name}: M events/s  {rates}" + (f"  not run: {', '.join(skipped)}" if skipped else ""))
    coffea_best = max((ran[k]["events_per_s"] for k in ("dask", "futures") if k in ran),
                      default=None)
    if coffea_best and "placement" in ran:
        print(f"    GPUExecutor / best coffea CPU executor: "
              f"{row['placement']['events_per_s'] / coffea_best:.2f}x")
    if "placement" in ran:
        for pool, t in row["placement"]["timing"].items():
            total = (t["read"] + t["transfer"] + t["compute"]) or 1.0
            print(f"    {pool}: {t['events']:,} events; read {t['read']:.2f} s "
                  f"({100 * t['read'] / total:.0f}%), transfer {t['transfer']:.2f} s "
                  f"({100 * t['transfer'] / total:.0f}%), compute {t['compute']:.2f} s "
                  f"({100 * t['compute'] / total:.0f}%)")
    # with and without copies of stragglers
    on_name = "placement-backups" if "placement-backups" in ran else "placement"
    off_name = "placement-nobackup" if "placement-nobackup" in ran else "placement"
    if on_name != off_name and on_name in ran and off_name in ran:
        on, off = ran[on_name], ran[off_name]
        ratio = on["events_per_s"] / off["events_per_s"]
        print(f"    backups: {on_name} / {off_name} {ratio:.2f}x "
              f"(makespan {on['makespan']:.2f} vs {off['makespan']:.2f} s; "
              f"{on['backups']} copies, {on['backups_counted']} counted)")
    if "placement_vs_best_single" in row:
        print(f"    makespan: placement {row['placement']['makespan']:.2f} s, all-CPU "
              f"{row['all-cpu']['makespan']:.2f} s, all-GPU {row['all-gpu']['makespan']:.2f} s "
              f"({row['placement_vs_best_single']:.2f} of the better)")


if __name__ == "__main__":
    raise SystemExit(main())
