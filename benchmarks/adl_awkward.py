"""Plain-awkward ADL benchmark: events/s of the eight queries of examples/adl_awkward
(unchanged awkward + vector processors) with gpuexec's kernel provider, on awkward's own
"cuda" backend, and of the gk versions (examples/adl) on the same device arrays; then
end to end, the plain-awkward queries through coffea's FuturesExecutor and DaskExecutor on
the host's cores and through GPUExecutor (GPU workers install the provider).

    python benchmarks/adl_awkward.py                      # 2M generated events, every query
    python benchmarks/adl_awkward.py --smoke              # CPU only: 20,000 events, seconds

In-process rows time ``observables``/``compute`` on the columns already in device memory
(the reading is not in them); the executor rows include reading. A query that fails on a
backend (awkward's "cuda" backend without numba-cuda-mlir) is recorded as not run, with
the error. Prints a table and writes benchmarks/results/adl_awkward_<machine>_<date>.json
with the command, commit and machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import _common  # noqa: E402
from benchmarks._gputime import wall_median  # noqa: E402


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--queries", default="1,2,3,4,5,6,7,8")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per cell (median)")
    parser.add_argument("--cores", type=int, default=None, help="CPU executor processes")
    parser.add_argument("--chunksize", type=int, default=200_000)
    parser.add_argument("--smoke", action="store_true",
                        help="20,000 events, the provider on the CPU engine, no GPU")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.smoke:
        args.events, args.repeats, args.chunksize = 20_000, 1, 10_000
    args.queries = [int(q) for q in args.queries.split(",")]
    args.out = args.out or _common.default_out("adl_awkward", args.smoke)
    return args


def in_process(args, path, device: str) -> dict:
    """{row: {query: events/s or {"not_run": error}}} on events moved to ``device``."""
    import awkward as ak
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    import gpuexec.awkward as gak
    from examples.adl import make as make_gk
    from examples.adl_awkward import make

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        events = NanoEventsFactory.from_root({path: "Events"}, schemaclass=NanoAODSchema,
                                             mode="eager").events()
    backend = "cuda" if device == "gpu" else "cpu"
    events = ak.to_backend(events, backend)
    n = len(events)
    sync = (lambda: __import__("cupy").cuda.get_current_stream().synchronize()) \
        if backend == "cuda" else (lambda: None)
    rows = {"provider": {}, "awkward": {}, "gk": {}}
    for q in args.queries:
        query, gk_query = make(q), make_gk(q)
        runs = {"provider": lambda: _with_provider(backend, lambda: query.compute(events)),
                "awkward": lambda: query.compute(events),
                "gk": lambda: gk_query.observables(gk_query.read(events))}
        for row, fn in runs.items():
            try:
                fn()  # warm: compiles, loads modules
                rows[row][q] = n / wall_median(fn, sync, args.repeats)
            except Exception as err:  # recorded: the backend cannot run this query
                rows[row][q] = {"not_run": f"{type(err).__name__}: {str(err)[:200]}"}
    rows["provider"]["stats"] = _provider_stats(backend, args, events)
    return rows


def _with_provider(backend, fn):
    import gpuexec.awkward as gak

    with gak.installed("device" if backend == "cuda" else "cpu"):
        return fn()


def _provider_stats(backend, args, events):
    import gpuexec.kernels as gk
    from examples.adl_awkward import make

    with gk.counting() as stats:
        for q in args.queries:
            _with_provider(backend, lambda: make(q).compute(events))
    return {k: stats[k] for k in ("n_awkward_served", "n_awkward_fallback", "n_awkward_left")} | {
        "fallbacks": stats["awkward"]["fallback"]}


def executors(args, path) -> dict:
    """End to end: coffea's FuturesExecutor and DaskExecutor (the better is coffea's best
    CPU executor) on the host's cores, and GPUExecutor, on the plain-awkward queries. Each
    executor is started once; per query one untimed run, then the median of ``repeats``."""
    from coffea import processor

    from examples.adl_awkward import make

    cores = args.cores or _common.machine().get("cores", 2)
    rows = {"futures": {}, "dask": {}, "gpuexecutor": {}}
    for name in rows:
        try:
            with _executor(name, cores, args) as ex:
                for q in args.queries:
                    runner = processor.Runner(executor=ex, chunksize=args.chunksize)

                    def run():
                        return runner({"sample": [path]}, make(q), treename="Events")
                    n = run()["n_events"]  # warm: the workers import and compile
                    rows[name][q] = n / wall_median(run, lambda: None, args.repeats)
                    if getattr(ex, "report", None) is not None:  # GPUExecutor: where it ran
                        rows[name].setdefault("placement", {})[q] = _placement(ex.report)
        except Exception as err:  # recorded: this executor could not run here
            rows[name] = {"not_run": f"{type(err).__name__}: {str(err)[:200]}"}
    return rows


def _placement(report) -> dict:
    """Of the last timed run: chunks per pool, GPU→CPU moves, awkward kernel calls, the
    call's seconds and, per pool, the chunks' read/transfer/compute seconds summed."""
    call = report.processing
    return {"chunks": call.pools, "moved_to_cpu": len(call.fallbacks),
            "awkward_kernels": call.awkward_totals, "seconds": call.seconds,
            "timing": call.timing()}


def _executor(name, cores, args):
    import contextlib

    from benchmarks.executor import coffea_executor

    if name != "gpuexecutor":
        return coffea_executor(name, cores)
    from gpuexec import GPUCluster, GPUExecutor

    @contextlib.contextmanager
    def opened():
        with GPUCluster() as cluster, GPUExecutor(
                client=cluster, gpu_backend="cpu" if args.smoke else None, status=False) as ex:
            yield ex
    return opened()


def main(argv=None) -> int:
    args = parse(argv)
    from examples.make_sample import write_sample

    with tempfile.TemporaryDirectory() as tmp:
        path = str(write_sample(Path(tmp) / "adl.root", args.events, seed=20240601,
                                compression="zlib:1"))
        results = {"events": args.events, "queries": args.queries,
                   "in_process": in_process(args, path, "cpu" if args.smoke else "gpu"),
                   "executors": executors(args, path)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(_common.stamp(results), indent=1, default=str))
    print_table(results)
    print(f"-> {args.out}")
    return 0


def print_table(results) -> None:
    rows = {**{f"{k} (in process)": v for k, v in results["in_process"].items()},
            **{f"{k} (end to end)": v for k, v in results["executors"].items()}}
    print(f"{'M events/s':28s}" + "".join(f"{'Q' + str(q):>9s}" for q in results["queries"]))
    for name, row in rows.items():
        cells = []
        for q in results["queries"]:
            v = row.get(q) if isinstance(row, dict) else None
            cells.append(f"{v / 1e6:9.3f}" if isinstance(v, float) else f"{'-':>9s}")
        print(f"{name:28s}" + "".join(cells))
    placement = results["executors"].get("gpuexecutor", {}).get("placement", {})
    for q, where in placement.items():
        chunk_s = {pool: " ".join(f"{k} {t[k]:.2f}" for k in ("read", "transfer", "compute"))
                   for pool, t in where["timing"].items()}
        print(f"gpuexecutor Q{q}: chunks {where['chunks']}, {where['moved_to_cpu']} moved "
              f"to CPU, awkward kernels {where['awkward_kernels']}; call "
              f"{where['seconds']:.2f} s, chunk seconds summed {chunk_s}")
    stats = results["in_process"]["provider"].get("stats")
    if stats:
        print(f"provider: {stats['n_awkward_served']} calls served, "
              f"{stats['n_awkward_fallback']} fallbacks {stats['fallbacks']}, "
              f"{stats['n_awkward_left']} left to awkward")


if __name__ == "__main__":
    sys.exit(main())
