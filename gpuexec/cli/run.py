"""``gpuexec run PROCESSOR FILESET [--scheduler-file F | --local]``: run a coffea
processor over a fileset with ``GPUExecutor`` and pickle the result.

- PROCESSOR: ``adl:N`` (ADL benchmark query N, shipped in ``gpuexec.adl``),
  ``FILE.py[:attr]`` or ``module:attr``; ``attr`` (default ``processor``) is a coffea
  ``ProcessorABC`` instance, a class built without arguments, or a function returning
  one. A file or a module outside gpuexec is pickled by value, so that workers started
  anywhere run it without importing it;
- FILESET: JSON in coffea's form, ``{"dataset": ["a.root", ...]}``;
- the cluster: ``--scheduler-file`` (a job's scheduler; the TLS credentials are read from
  ``tls/`` next to it), or ``--local`` (gpuexec's own local cluster, the default);
- ``--config KEY=VALUE`` (repeatable): Dask configuration for the run, e.g.
  ``--config gpuexec.placement.gpu-merge=4`` (docs/configuration.md); values are read as
  YAML (numbers, booleans, null, durations as strings);
- exit status: 0; 2 for a usage error (bad arguments, missing files, no scheduler);
  3 when chunks were skipped (a summary says which); 1 when the run failed.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import pickle
import sys
import time
import warnings
from pathlib import Path

from gpuexec.cli.arguments import positive

EXIT_SKIPPED = 3


class UsageError(ValueError):
    pass


def _module_from_file(path: Path):
    name = f"gpuexec_user_{path.stem}_{abs(hash(str(path))) % 10**8}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_processor(spec: str):
    """A ProcessorABC from ``adl:N``, ``FILE.py[:attr]`` or ``module:attr``; the user's
    module is registered with cloudpickle to travel by value."""
    import cloudpickle
    from coffea.processor import ProcessorABC

    if spec.startswith("adl:"):
        from gpuexec.adl import QUERIES, make

        query = spec[4:]
        if not query.isdigit() or int(query) not in QUERIES:
            raise UsageError(f"{spec!r}: ADL queries are adl:1 .. adl:{max(QUERIES)}")
        return make(int(query))
    target, _, attr = spec.partition(":") if not spec.endswith(".py") else (spec, "", "")
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"processor file {path} does not exist")
        module = _module_from_file(path)
    else:
        if not attr:
            raise UsageError(f"processor {spec!r}: give FILE.py[:attr], module:attr or adl:N")
        try:
            module = importlib.import_module(target)
        except ImportError as err:
            raise UsageError(f"processor module {target!r} cannot be imported: {err}") from err
    if not module.__name__.startswith("gpuexec."):
        cloudpickle.register_pickle_by_value(module)  # workers need not import it
    attr = attr or "processor"
    if not hasattr(module, attr):
        raise UsageError(f"{module.__name__} has no {attr!r}")
    obj = getattr(module, attr)
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, ProcessorABC)):
        obj = obj()
    if not isinstance(obj, ProcessorABC):
        raise UsageError(f"{spec}: {type(obj).__name__} is not a coffea ProcessorABC")
    return obj


def _read_json(path: Path, what: str):
    """The JSON document in ``path``; FileNotFoundError or UsageError naming ``what``."""
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise UsageError(f"{what} {path} is not JSON: {err}") from err


def load_fileset(path: str) -> dict:
    p = Path(path)
    fileset = _read_json(p, "fileset")
    if not isinstance(fileset, dict) or not fileset:
        raise UsageError(f"fileset {p}: expected a JSON object {{dataset: files}}")
    return fileset


def parse_config(items: list[str]) -> dict:
    """``["a.b=4", "c=true"]`` -> ``{"a.b": 4, "c": True}`` (values read as YAML)."""
    import yaml

    out = {}
    for item in items or ():
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--config {item!r}: expected KEY=VALUE, e.g. "
                             "gpuexec.placement.gpu-merge=4")
        try:
            out[key.strip()] = yaml.safe_load(value) if value.strip() else None
        except yaml.YAMLError as err:
            raise UsageError(f"--config {item!r}: the value is not YAML: {err}") from err
    return out


def probe(address: str, timeout: float = 5.0) -> None:
    """Fail at once, with the address, when nothing listens there (a finished job's
    scheduler file), instead of Dask's retries for the whole connect timeout."""
    import socket

    from distributed.comm import parse_address, parse_host_port

    try:
        _, loc = parse_address(address)
        host, port = parse_host_port(loc)
    except ValueError as err:
        raise UsageError(f"bad scheduler address {address!r}: {err}") from err
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as err:
        raise UsageError(f"cannot reach the scheduler at {address}: {err.strerror or err} "
                         "(has the job ended?)") from err


def local_files(fileset: dict) -> list[tuple[str, str]]:
    """(dataset, path) of every file of ``fileset`` given as a local path (no ``scheme://``),
    in coffea's forms: a list of files, or ``{"files": [...] or {file: tree}}``."""
    out = []
    for dataset, files in fileset.items():
        if isinstance(files, dict):
            files = files.get("files", ())
        if isinstance(files, str):
            files = [files]
        out += [(dataset, f) for f in files if isinstance(f, str) and "://" not in f]
    return out


def check_files(fileset: dict) -> None:
    missing = [(d, f) for d, f in local_files(fileset) if not Path(f).is_file()]
    if missing:
        shown = "; ".join(f"{f} (dataset {d!r})" for d, f in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise FileNotFoundError(f"ROOT file(s) not found: {shown}{more} (--skip-bad-files "
                                "runs without them)")


def connect(scheduler_file: str, timeout: float):
    """A client of the job whose scheduler file this is, with its TLS credentials."""
    from distributed import Client

    from gpuexec import security

    path = Path(scheduler_file)
    info = _read_json(path, "scheduler file")
    address = info.get("address", "") if isinstance(info, dict) else ""
    if not address:
        raise UsageError(f"scheduler file {path} names no scheduler address")
    sec = security.load(path.parent / "tls") if address.startswith("tls://") else None
    probe(address, min(timeout, 5.0))
    try:
        return Client(address, security=sec, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as err:
        raise UsageError(f"cannot reach the scheduler at {address} ({path}): {err}") from err


def wait_for_plans(client, run_dir: Path, tasks: int, minimum: int | None, timeout: float):
    """Wait for ``tasks`` worker starters' plans, then for the workers they planned (or,
    after ``timeout``, go on with at least ``minimum`` of them)."""
    from gpuexec.deploy.workers import read_plans

    deadline = time.monotonic() + timeout
    plans = read_plans(run_dir)
    while len(plans) < tasks and time.monotonic() < deadline:
        time.sleep(0.5)
        plans = read_plans(run_dir)
    names = {w["name"] for p in plans for w in p["workers"]}
    print(f"gpuexec run: {len(plans)} of {tasks} task(s) planned {len(names)} worker(s); "
          "waiting for them", flush=True)
    while time.monotonic() < deadline:
        here = {w.get("name") for w in client.scheduler_info(n_workers=-1)["workers"].values()}
        if len(plans) == tasks and names <= here:
            return len(here)
        time.sleep(0.5)
    here = {w.get("name") for w in client.scheduler_info(n_workers=-1)["workers"].values()}
    if minimum is not None and len(here) >= minimum:
        print(f"gpuexec run: {len(here)} worker(s) after {timeout:.0f} s (minimum {minimum}); "
              f"missing: {sorted(names - here)}", flush=True)
        return len(here)
    raise UsageError(f"only {len(here)} of {len(names)} planned worker(s) arrived from "
                     f"{len(plans)} of {tasks} task(s) in {timeout:.0f} s; missing: "
                     f"{sorted(names - here)[:10]} (see workers.log in {run_dir})")


def worker_view() -> dict:
    """On a worker: its pinning variables, cores and the GPU backend it chooses."""
    import os

    from gpuexec.cli.info import PINNING
    from gpuexec.scheduler import devices

    from gpuexec.executor import device_backend  # the worker's own choice

    found = devices.discover()
    backend = device_backend() if found else None
    return {"env": {k: os.environ[k] for k in PINNING if k in os.environ},
            "cores": sorted(os.sched_getaffinity(0)), "backend": backend,
            "devices": [d.describe() for d in found], "pid": os.getpid(), "cwd": os.getcwd()}


def describe_workers(client) -> dict:
    """Name -> resources, address and ``worker_view()`` of every worker."""
    info = client.scheduler_info(n_workers=-1)["workers"]
    views = client.run(worker_view)
    return {w.get("name", addr): {"address": addr, "resources": w.get("resources", {}),
                                  **views.get(addr, {})} for addr, w in info.items()}


def _summary(workers: dict) -> str:
    counts: dict[str, int] = {}
    for w in workers.values():
        kind = ",".join(sorted(w["resources"])) or "no resources"
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} worker(s) with {k}" for k, n in sorted(counts.items()))


def execute(args, processor_instance, fileset) -> dict:
    from coffea import processor
    from coffea.nanoevents import BaseSchema, NanoAODSchema

    from gpuexec.executor import GPUExecutor

    options = {"gpu_backend": args.gpu_backend} if args.gpu_backend else {}
    client, workers = None, {}
    if args.scheduler_file:
        client = connect(args.scheduler_file, args.connect_timeout)
        if args.wait_plans:
            wait_for_plans(client, Path(args.scheduler_file).parent, args.wait_plans,
                           args.min_workers, args.wait_timeout)
        elif args.min_workers:
            client.wait_for_workers(args.min_workers, timeout=args.wait_timeout)
        workers = describe_workers(client)
        print(f"gpuexec run: {client.scheduler.address}: {_summary(workers)}", flush=True)
    executor = GPUExecutor(client=client, **options)
    try:
        runner = processor.Runner(executor=executor, chunksize=args.chunksize,
                                  maxchunks=args.maxchunks, skipbadfiles=args.skip_bad_files,
                                  schema=NanoAODSchema if args.schema == "nanoaod" else BaseSchema)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Missing cross-reference index")
            t0 = time.perf_counter()
            try:
                output = runner(fileset, processor_instance, treename=args.treename)
            finally:  # the report of a failed run too, next to the output
                save_report(executor.report, args.out)
            seconds = time.perf_counter() - t0
        report = executor.report
    finally:
        if client is not None:
            client.close()
        executor.close()
    return {"output": output, "seconds": seconds, "report": str(report),
            "skipped": [s.describe() for s in report.skipped] if report else [],
            "processed": report.processing.processed if report and report.processing else None,
            "workers": workers, "processor": args.processor, "fileset": fileset}


def save_report(report, out) -> None:
    """``<out stem>.report.json`` and ``.report.html`` beside ``out`` (``RunReport.save``;
    ``gpuexec report`` shows them); nothing without ``--out`` or a report."""
    if report is None or not out:
        return
    out = Path(out)
    saved = report.save(out.with_name(out.stem + ".report"))
    print("gpuexec run: report in " + " and ".join(map(str, saved)), flush=True)


def main(args) -> int:
    if args.local and args.scheduler_file:
        raise UsageError("give --scheduler-file or --local, not both")
    settings = parse_config(args.config)
    fileset = load_fileset(args.fileset)
    if not args.skip_bad_files:
        check_files(fileset)
    processor_instance = load_processor(args.processor)
    import dask

    with dask.config.set(settings):
        result = execute(args, processor_instance, fileset)
    if args.out:
        with open(args.out, "wb") as f:
            pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
    print(f"gpuexec run: {args.processor}: {result['processed']} entries in "
          f"{result['seconds']:.1f} s" + (f"; output in {args.out}" if args.out else ""))
    print(result["report"])
    if result["skipped"]:
        print(f"gpuexec run: {len(result['skipped'])} chunk(s)/file(s) skipped, not in the "
              "output:\n  " + "\n  ".join(result["skipped"]), file=sys.stderr)
        return EXIT_SKIPPED
    return 0


def add(subs) -> None:
    p = subs.add_parser("run", help="run a processor over a fileset with GPUExecutor")
    p.add_argument("processor", metavar="PROCESSOR", help="adl:N, FILE.py[:attr] or module:attr")
    p.add_argument("fileset", metavar="FILESET", help="fileset JSON")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler-file", default=None, help="a running job's scheduler")
    where.add_argument("--local", action="store_true", help="gpuexec's local cluster (default)")
    p.add_argument("--chunksize", type=positive, default=100_000)
    p.add_argument("--maxchunks", type=positive, default=None)
    p.add_argument("--treename", default="Events")
    p.add_argument("--schema", choices=("nanoaod", "base"), default="nanoaod")
    p.add_argument("--skip-bad-files", action="store_true",
                   help="skip chunks that fail to read (listed; exit status 3)")
    p.add_argument("--gpu-backend", choices=("cpu",), default=None,
                   help="run the GPU pool's kernels on the CPU (fake-GPU jobs)")
    p.add_argument("--out", default=None, help="pickle of the output, report and workers")
    p.add_argument("--wait-plans", type=positive, default=None, metavar="TASKS",
                   help="wait for TASKS worker starters' plans, then for their workers")
    p.add_argument("--min-workers", type=positive, default=None,
                   help="start once this many workers are there (or, with --wait-plans, "
                        "go on with them after --wait-timeout)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="Dask configuration for the run (repeatable), e.g. "
                        "gpuexec.placement.gpu-merge=4")
    p.add_argument("--wait-timeout", type=float, default=600.0)
    p.add_argument("--connect-timeout", type=float, default=30.0)
    p.set_defaults(func=main)
