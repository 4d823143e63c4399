"""Run one IRIS-HEP ADL benchmark query as a coffea processor and show its histograms.

    python examples/run_adl.py                        # Q6 on data/samples/nano_tt_v15.root via GPUExecutor
    python examples/run_adl.py --query 8 --executor iterative
    python examples/run_adl.py --generate 200000      # on a generated NanoAOD-like sample

Prints each histogram as text and writes it as a PNG into ``--out`` (default ``out/``).
Executors: ``gpuexec`` (gpuexec.GPUExecutor on an embedded local Dask cluster, the
default), ``iterative`` (coffea's, in this process), ``futures`` (coffea's process pool)
and ``dask`` (coffea's DaskExecutor on a local Dask cluster).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `examples` importable
    sys.path.insert(0, str(ROOT))

DEFAULT_FILE = ROOT / "data" / "samples" / "nano_tt_v15.root"
EXECUTORS = ("gpuexec", "iterative", "futures", "dask")


@contextlib.contextmanager
def open_executor(name: str, workers: int):
    """The coffea executor ``name`` (and whatever it needs running), closed on exit."""
    from coffea import processor

    if name == "iterative":
        yield processor.IterativeExecutor()
    elif name == "futures":
        yield processor.FuturesExecutor(workers=workers)
    elif name == "dask":
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            yield processor.DaskExecutor(client=client)
    elif name == "gpuexec":
        from gpuexec import GPUCluster, GPUExecutor

        with GPUExecutor(client=GPUCluster(cpu_workers=workers)) as executor:
            yield executor
    else:
        raise ValueError(f"unknown executor {name!r}; choose one of {EXECUTORS}")


def plot_title(query, name: str) -> str:
    """A title of the histogram's own: the query and the quantity on its axis."""
    label = query.binning[name][3]
    return f"ADL Q{query.number}: {label}\n{query.title}"


def save_png(h, path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    h.plot1d(ax=ax, histtype="fill", alpha=0.7)
    ax.set_ylabel("entries")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def for_terminal(h, max_rows: int = 25):
    """``h`` rebinned (by a divisor of its bin count) to at most ``max_rows`` rows of
    text; the PNG keeps the full binning."""
    import hist

    n = h.axes[0].size
    factor = next(k for k in range(1, n + 1) if n % k == 0 and n // k <= max_rows)
    return h[::hist.rebin(factor)] if factor > 1 else h


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--query", type=int, default=6, choices=range(1, 9), metavar="{1..8}",
                        help="ADL query number (default 6: trijet closest to the top mass)")
    parser.add_argument("--file", action="append", type=Path,
                        help=f"input NanoAOD file(s) (default {DEFAULT_FILE.relative_to(ROOT)})")
    parser.add_argument("--generate", type=int, metavar="N",
                        help="generate a NanoAOD-like sample of N events into --out and run on it")
    parser.add_argument("--executor", choices=EXECUTORS, default="gpuexec")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker processes (futures/dask: default 2; gpuexec: its default)")
    parser.add_argument("--chunksize", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=Path("out"), help="where PNGs go (default out/)")
    args = parser.parse_args(argv)

    from coffea import processor

    import gpuexec.kernels as gk
    from examples.adl import make

    files = args.file or []
    if args.generate:
        from examples.make_sample import write_sample

        path = args.out / f"adl_generated_{args.generate}.root"
        if not path.exists():
            t0 = time.perf_counter()
            write_sample(path, args.generate)
            print(f"generated {args.generate} events into {path} in {time.perf_counter() - t0:.1f} s")
        files.append(path)
    if not files:
        files = [DEFAULT_FILE]
    for f in files:
        if not f.exists():
            parser.error(f"input file {f} does not exist")

    query = make(args.query)
    workers = args.workers or (2 if args.executor in ("futures", "dask") else None)
    gk.reset_stats()
    with warnings.catch_warnings():
        # NanoAODSchema warns for every cross-reference a reduced file lacks.
        warnings.filterwarnings("ignore", message="Missing cross-reference index")
        with open_executor(args.executor, workers) as executor:
            runner = processor.Runner(executor=executor, chunksize=args.chunksize)
            t0 = time.perf_counter()
            out = runner({"adl": [str(f) for f in files]}, query, treename="Events")
            elapsed = time.perf_counter() - t0
            report = getattr(executor, "report", None)

    print(f"ADL Q{query.number}: {query.title}")
    print(f"{out['n_events']} events from {', '.join(str(f) for f in files)} via {args.executor} "
          f"in {elapsed:.2f} s ({out['n_events'] / elapsed:,.0f} events/s)")
    if report is not None:
        print(report)
    if args.executor == "iterative":
        stats = gk.stats()
        print(f"kernel engine: {stats['n_calls']} gk calls, {stats['n_handoffs']} hand-offs to awkward")
    for name, h in out["hists"].items():
        print(f"\n{name}: {h.sum(flow=True):.0f} entries ({h.sum(flow=False):.0f} within the axis range)")
        print(for_terminal(h))
        png = save_png(h, args.out / f"adl_q{query.number}_{name}.png", plot_title(query, name))
        print(f"PNG written to {os.path.abspath(png)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
