"""Where a GPU worker's time goes on one chunk: an ADL query's processor on columns staged
the way GPUExecutor stages them (``stage_events``: read once, copied to the device once)
and run the way its GPU tasks run it (``awkward_messages_on_error``), without Dask. For
each query: seconds of reading, host-to-device transfer and compute of a warm chunk, the
kernel engine's calls/launches/hand-offs, the awkward kernels the processor reached on the
device (by name, with counts), and a cProfile of the compute.

    python benchmarks/gpu_chunk_profile.py --events 200000 --queries 6,8           # GPU
    python benchmarks/gpu_chunk_profile.py --events 20000 --queries 6 --backend cpu
    python benchmarks/gpu_chunk_profile.py --queries 8,6 --sizes 50000,200000,800000
    CUDA_LAUNCH_BLOCKING=1 python benchmarks/gpu_chunk_profile.py --queries 8 --sizes 10000,200000

Prints a table and writes ``gpu_chunk_profile.json`` (and the profiles as text) under
``--out``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _recording_kernels(backend_name: str, seen: Counter):
    """Count awkward's kernel lookups on ``backend_name`` ("cuda" or "cpu")."""
    if backend_name == "cuda":
        from awkward._backends.cupy import CupyBackend as Backend
    else:
        from awkward._backends.numpy import NumpyBackend as Backend
    original = Backend.__getitem__

    def recording(self, index):
        seen[index[0]] += 1
        return original(self, index)

    Backend.__getitem__ = recording
    return lambda: setattr(Backend, "__getitem__", original)


def _events_of(path: str, entry_stop: int | None = None):
    """A function giving fresh NanoEvents of ``path``'s first ``entry_stop`` events, read
    lazily as a worker reads a chunk."""
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    return lambda: NanoEventsFactory.from_root({path: "Events"}, schemaclass=NanoAODSchema,
                                               mode="virtual", entry_stop=entry_stop).events()


def profile_query(number: int, path: str, backend: str, top: int) -> dict:
    import gpuexec.kernels as gk
    from examples.adl import make
    from gpuexec.io.staging import Timings, awkward_messages_on_error, stage_events

    events = _events_of(path)
    proc = make(number)
    with gk.using(backend):
        with awkward_messages_on_error(backend):  # warm: modules, caches, imports
            proc.process(stage_events(events(), backend))
        timings = Timings()
        staged = stage_events(events(), backend, timings)
        seen: Counter = Counter()
        restore = _recording_kernels(backend, seen)
        prof = cProfile.Profile()
        gk.reset_stats()
        start = time.perf_counter()
        try:
            prof.enable()
            with awkward_messages_on_error(backend):  # as a GPU worker runs it
                out = proc.process(staged)
            prof.disable()
        finally:
            restore()
        total = time.perf_counter() - start
        stats = gk.stats()
    text = {}
    for order in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(order).print_stats(top)
        text[order] = buf.getvalue()
    return {"query": number, "events": out["n_events"], "seconds": total,
            "read": timings.read, "transfer": timings.transfer,
            "compute": total - timings.read - timings.transfer,
            "gk_calls": stats["n_calls"], "gk_launches": stats["n_launches"],
            "gk_kernels": dict(sorted(stats["kernels"].items(), key=lambda kv: -kv[1])),
            "gk_handoffs": stats["handoff_reasons"], "awkward_kernels": dict(seen.most_common()),
            "profile": text}


def task_costs(number: int, path: str, backend: str, sizes: list[int], reps: int = 3) -> list:
    """Seconds of one task of each size in ``sizes`` (events from the file's start), as a
    GPU (``backend`` "cuda") or CPU worker runs it, without a profiler: the fastest of
    ``reps`` after a warm-up. What a task costs apart from its events shows as the
    per-event cost falling with the size.

    Each row also has the query's computation alone on columns already read
    (``observables`` and ``fill``, fastest of ``reps``: ``compute_read_columns``), its
    engine calls and launches, and the Python function calls of one such run (a cProfile
    count, ``python_calls``). Run once more with ``CUDA_LAUNCH_BLOCKING=1`` to bound the
    kernels' share: every launch then waits for its kernel."""
    import awkward as ak

    import gpuexec.kernels as gk
    from examples.adl import make
    from examples.adl.queries import ADLQuery
    from gpuexec.io.staging import Timings, awkward_messages_on_error, stage_events

    proc = make(number)
    computes = type(proc).observables is not ADLQuery.observables  # not a read-only query
    out = []
    for n in sizes:
        events = _events_of(path, n)
        with gk.using(backend):
            with awkward_messages_on_error(backend):
                proc.process(stage_events(events(), backend))
            runs = []
            for _ in range(reps):
                timings = Timings()
                staged = stage_events(events(), backend, timings)
                start = time.perf_counter()
                with awkward_messages_on_error(backend):
                    proc.process(staged)
                runs.append((time.perf_counter() - start, timings.read, timings.transfer))
            row = {}
            if computes:
                columns = {k: ak.materialize(v)
                           for k, v in proc.read(stage_events(events(), backend)).items()}
                alone = []
                with awkward_messages_on_error(backend):
                    for _ in range(reps):
                        start = time.perf_counter()
                        proc.fill(n, proc.observables(columns))
                        alone.append(time.perf_counter() - start)
                    gk.reset_stats()
                    prof = cProfile.Profile()
                    prof.enable()
                    proc.fill(n, proc.observables(columns))
                    prof.disable()
                stats = gk.stats()
                row = {"compute_read_columns": min(alone), "gk_calls": stats["n_calls"],
                       "gk_launches": stats["n_launches"],
                       "python_calls": pstats.Stats(prof).total_calls}
        total, read, transfer = min(runs)
        out.append({"query": number, "backend": backend, "events": n, "seconds": total,
                    "read": read, "transfer": transfer, "compute": total - read - transfer,
                    **row})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--queries", default="6,8")
    ap.add_argument("--backend", default="cuda", help='"cuda" (awkward\'s device backend) or "cpu"')
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sizes", default=None,
                    help="instead of the profile: time tasks of these sizes (events, "
                         "comma-separated) on the device backend and on the CPU")
    ap.add_argument("--out", default=os.environ.get("OUT", str(ROOT / "out")))
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=RuntimeWarning)  # NanoAOD cross-references

    from examples.make_sample import write_sample

    tmp = tempfile.TemporaryDirectory(prefix="gpuexec-chunk-")
    sizes = [int(n) for n in args.sizes.split(",")] if args.sizes else None
    events = max([args.events] + (sizes or []))
    path = write_sample(os.path.join(tmp.name, "adl.root"), events, compression="zlib:1")
    if sizes:
        from gpuexec.io import inflate

        inflate.use("auto")  # as GPUExecutor's workers inflate
        rows = [r for backend in dict.fromkeys([args.backend, "cpu"])
                for q in args.queries.split(",") for r in task_costs(int(q), path, backend, sizes)]
        print(f"inflating with {inflate.in_use()}")
        print(f"{'query':<7}{'backend':<8}{'events':>9}{'total ms':>10}{'read ms':>9}"
              f"{'h2d ms':>8}{'compute ms':>11}{'us/event':>10}{'alone ms':>10}"
              f"{'gk calls':>9}{'launches':>9}{'py calls':>9}")
        for r in rows:
            alone = (f"{1e3 * r['compute_read_columns']:>10.1f}{r['gk_calls']:>9}"
                     f"{r['gk_launches']:>9}{r['python_calls']:>9}"
                     if "compute_read_columns" in r else "")
            print(f"Q{r['query']:<6}{r['backend']:<8}{r['events']:>9}{1e3 * r['seconds']:>10.1f}"
                  f"{1e3 * r['read']:>9.1f}{1e3 * r['transfer']:>8.1f}{1e3 * r['compute']:>11.1f}"
                  f"{1e6 * r['seconds'] / r['events']:>10.2f}{alone}")
        print("alone: the computation on columns already read (observables + fill); "
              f"CUDA_LAUNCH_BLOCKING={os.environ.get('CUDA_LAUNCH_BLOCKING', 'unset')}")
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        result = {"machine": {"host": platform.node(), "python": platform.python_version(),
                              "cores": os.cpu_count()},
                  "inflate": inflate.in_use(),
                  "cuda_launch_blocking": os.environ.get("CUDA_LAUNCH_BLOCKING"),
                  "task_costs": rows}
        (out / "gpu_task_costs.json").write_text(json.dumps(result, indent=1))
        print("wrote", out / "gpu_task_costs.json")
        return 0
    rows = [profile_query(int(q), path, args.backend, args.top) for q in args.queries.split(",")]
    result = {"machine": {"host": platform.node(), "python": platform.python_version()},
              "backend": args.backend, "events": args.events, "queries": rows}
    if args.backend == "cuda":
        import cupy

        result["machine"]["gpu"] = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()

    print(f"{'query':<7}{'events':>9}{'total s':>9}{'read s':>8}{'h2d s':>8}{'compute s':>10}"
          f"{'gk calls':>9}{'launches':>9}{'ak kernels':>11}")
    for r in rows:
        print(f"Q{r['query']:<6}{r['events']:>9}{r['seconds']:>9.3f}{r['read']:>8.3f}"
              f"{r['transfer']:>8.3f}{r['compute']:>10.3f}{r['gk_calls']:>9}{r['gk_launches']:>9}"
              f"{sum(r['awkward_kernels'].values()):>11}")
    for r in rows:
        print(f"\nQ{r['query']}: awkward kernels {r['awkward_kernels']}; "
              f"hand-offs {r['gk_handoffs']}")
        print(f"Q{r['query']}: engine kernels {r['gk_kernels']}")
        print("\n".join(r["profile"]["tottime"].splitlines()[:30 + 8]))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_chunk_profile.json").write_text(json.dumps(result, indent=1))
    print("wrote", out / "gpu_chunk_profile.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
