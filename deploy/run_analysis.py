#!/usr/bin/env python3
"""Run a coffea analysis with gpuexec's GPUExecutor on a Dask cluster and pickle the output.

    python deploy/run_analysis.py --fileset fileset.json --query 6 --out q6.pkl \\
        --scheduler-file "$SCHEDULER_FILE" --wait-workers 16

- ``--fileset``: JSON in coffea's fileset form, ``{"dataset": ["a.root", ...]}`` or
  ``{"dataset": {"files": {"a.root": "Events"}, "metadata": {...}}}``;
- the processor: ``--query N`` (IRIS-HEP ADL query N from ``examples/adl``) or
  ``--processor module:attr`` / ``--processor path/to/file.py:attr`` where ``attr`` is a
  coffea ``ProcessorABC`` instance, a class (built without arguments) or a function
  returning one;
- the cluster: ``--scheduler-file`` (a running Dask scheduler, as the Slurm scripts in
  ``deploy/`` start it; the analysis connects with ``distributed.Client``), else
  gpuexec's embedded local cluster;
- ``--out``: a pickle of ``{"output", "n_events", "seconds", "events_per_s", "report",
  "executor", "fileset", "processor", "dashboard"}``; ``report`` is the executor's run
  report as text, plus the placement decisions when the executor has them;
- next to it, ``<out stem>.report.json`` and ``.report.html``: the run report as files
  (``RunReport.save``; ``gpuexec report FILE`` shows it), written for a failed run too.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import pickle
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # for `examples.adl` and a checkout without `pip install`
    sys.path.insert(0, str(ROOT))


def load_processor(spec: str):
    """A ProcessorABC from ``module:attr`` or ``file.py:attr``."""
    from coffea.processor import ProcessorABC

    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise SystemExit(f"--processor must be module:attr or file.py:attr, got {spec!r}")
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.exists():
            raise SystemExit(f"--processor: file {path} does not exist")
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[path.stem] = module  # so that workers can unpickle its classes by name
        sys.path.insert(0, str(path.parent))
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    obj = getattr(module, attr)
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, ProcessorABC)):
        obj = obj()
    if not isinstance(obj, ProcessorABC):
        raise SystemExit(f"--processor {spec}: {type(obj).__name__} is not a coffea ProcessorABC")
    return obj


def parse_options(pairs: list[str], flag: str = "--executor-option") -> dict:
    """``key=value`` pairs; values are Python literals where they parse, else strings."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"{flag} must be key=value, got {pair!r}")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def connect(scheduler_file: str | None, wait_workers: int, timeout: float):
    if scheduler_file is None:
        return None
    from distributed import Client

    deadline = time.monotonic() + timeout
    while not Path(scheduler_file).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"no scheduler file {scheduler_file} after {timeout:.0f} s")
        time.sleep(1)
    client = Client(scheduler_file=scheduler_file, set_as_default=False)
    if wait_workers:
        print(f"waiting for {wait_workers} workers (at most {timeout:.0f} s) ...", flush=True)
        client.wait_for_workers(wait_workers, timeout=max(1.0, deadline - time.monotonic()))
    return client


def describe_workers(client) -> str:
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:
        info = client.scheduler_info()
    counts: dict[str, int] = {}
    for w in info.get("workers", {}).values():
        kind = ",".join(sorted(w.get("resources", {}))) or "no resources"
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} worker(s) with {k}" for k, n in sorted(counts.items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fileset", required=True, type=Path, help="fileset JSON")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--query", type=int, choices=range(1, 9), metavar="{1..8}",
                       help="IRIS-HEP ADL benchmark query (examples/adl)")
    which.add_argument("--processor", help="module:attr or file.py:attr of a coffea processor")
    parser.add_argument("--out", required=True, type=Path, help="output pickle")
    parser.add_argument("--treename", default="Events")
    parser.add_argument("--chunksize", type=int, default=100_000)
    parser.add_argument("--maxchunks", type=int, default=None)
    parser.add_argument("--schema", choices=("nanoaod", "base"), default="nanoaod")
    parser.add_argument("--scheduler-file", default=None,
                        help="connect to this Dask scheduler (default: embedded local cluster)")
    parser.add_argument("--wait-workers", type=int, default=0,
                        help="with --scheduler-file: wait for this many workers first")
    parser.add_argument("--wait-timeout", type=float, default=900.0)
    parser.add_argument("--executor-option", action="append", default=[], metavar="KEY=VALUE",
                        help="extra GPUExecutor argument (repeatable), e.g. treereduction=10")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a Dask configuration key for this run (repeatable), e.g. "
                             "gpuexec.placement.gpu-merge=4 (docs/configuration.md)")
    parser.add_argument("--shutdown", action="store_true",
                        help="with --scheduler-file: shut the cluster down at the end")
    args = parser.parse_args(argv)

    fileset = json.loads(args.fileset.read_text())
    if not isinstance(fileset, dict) or not fileset:
        parser.error(f"{args.fileset}: expected a JSON object {{dataset: files}}")
    if args.query is not None:
        from examples.adl import make

        processor_instance, what = make(args.query), f"ADL Q{args.query}"
    else:
        processor_instance, what = load_processor(args.processor), args.processor

    from coffea import processor
    from coffea.nanoevents import BaseSchema, NanoAODSchema

    from gpuexec import GPUExecutor

    client = connect(args.scheduler_file, args.wait_workers, args.wait_timeout)
    options = parse_options(args.executor_option)
    if client is not None:
        print(f"connected to {client.scheduler.address}: {describe_workers(client)}")
        print(f"dashboard: {client.dashboard_link}", flush=True)
    executor = GPUExecutor(client=client, **options)
    runner = processor.Runner(executor=executor, chunksize=args.chunksize, maxchunks=args.maxchunks,
                              schema=NanoAODSchema if args.schema == "nanoaod" else BaseSchema)
    import dask

    with warnings.catch_warnings(), dask.config.set(parse_options(args.config, "--config")):
        warnings.filterwarnings("ignore", message="Missing cross-reference index")
        t0 = time.perf_counter()
        try:
            output = runner(fileset, processor_instance, treename=args.treename)
        finally:
            report = getattr(executor, "report", None)
            if report is not None:
                saved = report.save(args.out.with_name(args.out.stem + ".report"))
                print("run report written to " + " and ".join(map(str, saved)), flush=True)
        seconds = time.perf_counter() - t0
    n_events = output.get("n_events") if isinstance(output, dict) else None
    if n_events is None and report is not None and report.processing is not None:
        n_events = report.processing.processed
    result = {
        "output": output, "n_events": n_events, "seconds": seconds,
        "events_per_s": (n_events / seconds) if n_events else None,
        "report": str(report) if report is not None else None,
        "executor": {"class": type(executor).__name__, "options": options,
                     "scheduler_file": args.scheduler_file},
        "fileset": fileset, "processor": what,
        "dashboard": client.dashboard_link if client is not None else None,
    }
    placement = getattr(executor, "placement", None)
    if placement is not None and hasattr(placement, "decisions"):
        result["placement"] = placement.decisions()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "wb") as f:
        pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
    rate = f" ({n_events / seconds:,.0f} events/s)" if n_events else ""
    print(f"{what}: {n_events} events in {seconds:.1f} s{rate}; output written to {args.out}")
    if report is not None:
        print(report)
    if client is not None:
        if args.shutdown:
            client.shutdown()
        client.close()
    else:
        executor.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
