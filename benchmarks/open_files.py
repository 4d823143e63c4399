"""What a chunk costs before its processor reads a byte: coffea Runner's work function
(which opens the chunk's file and builds its NanoEvents) against GPUExecutor's, which
keeps the file open in the worker thread (``gpuexec.io.kept_files``), side by side in one
process, on the real CMS NanoAOD samples in data/samples (thousands of branches) and on a
generated NanoAOD-like file (24 branches, the executor benchmark's).

    .venv/bin/python benchmarks/open_files.py [--reps 5] [--out benchmarks/results]

The processor touches one column (``len(events.Muon.pt)``), so the time is opening the
file, reading the tree's metadata and building the events. Two more functions run a
GPU worker's task on the CPU engine (files kept open, the processor staged with its
columns read directly, ``StagedProcessor``): with coffea's host events built first and
then rebuilt staged (before the twenty-ninth session), and built from the factory only.
Per file: the median and fastest seconds per chunk of each function over ``--reps``
turns (the functions take turns, each turn every chunk of the file once, after a warm-up
turn), and the ratios. Prints a table and writes ``open_files.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from coffea import processor  # noqa: E402
from coffea.nanoevents import NanoAODSchema  # noqa: E402


class OneColumn(processor.ProcessorABC):
    def process(self, events):
        return {"events": len(events.Muon.pt)}

    def postprocess(self, accumulator):
        return accumulator


_captured: dict = {}


class _Capture(processor.IterativeExecutor):
    """Keeps the WorkItems and the work function Runner hands its executor (a copy of it)."""

    def __call__(self, items, function, accumulator):
        _captured.update(items=list(items), function=function)
        return accumulator, 0


def work_of(paths: list, chunksize: int, processor_instance=None, **runner_options):
    """(WorkItems of ``paths``, Runner's work function for ``processor_instance``, default
    ``OneColumn``), as GPUExecutor's tasks get them: without Runner's retry wrapper (the
    executor retries itself). Runner raises once its executor returns, having run none."""
    from gpuexec.executor import _unwrap_runner_retries

    runner = processor.Runner(executor=_Capture(), pre_executor=processor.IterativeExecutor(),
                              chunksize=chunksize, schema=NanoAODSchema, metadata_cache={},
                              **runner_options)
    _captured.clear()
    try:
        runner({"sample": list(paths)}, processor_instance or OneColumn(), treename="Events")
    except ValueError as err:
        if "No chunks returned results" not in str(err):
            raise
    return _captured["items"], _unwrap_runner_retries(_captured["function"])[0]


def measure(path: str, chunksize: int, reps: int) -> dict:
    from gpuexec.io import kept_files as open_files
    from gpuexec.executor import _kept_open

    items, coffea_work = work_of([path], chunksize)
    kept_work = _kept_open(coffea_work, open_files.KEPT)
    functions = {"coffea": coffea_work, "kept open": kept_work,
                 # a GPU worker's task on the CPU engine (the processor staged, its columns
                 # read directly): coffea's events built first, as before, or not at all
                 "staged, events first": _staged_work(kept_work, events_first=True),
                 "staged": _staged_work(kept_work, events_first=False)}
    seconds = {name: [] for name in functions}
    for turn in range(reps + 1):
        for name, work in functions.items():
            open_files.close_all()  # each turn opens the file once, as a new run does
            for item in items:
                start = time.perf_counter()
                out = work(item)
                took = time.perf_counter() - start
                assert out["out"]["events"] == item.entrystop - item.entrystart
                if turn:  # the first turn warms imports and caches
                    seconds[name].append(took)
    open_files.close_all()
    import uproot

    with uproot.open(path) as f:
        branches = len(f["Events"].keys())
    row = {"file": os.path.basename(path), "branches": branches, "chunks": len(items),
           "events_per_chunk": chunksize}
    for name, values in seconds.items():
        row[name] = {"median_s": statistics.median(values), "min_s": min(values)}
    row["ratio_median"] = row["coffea"]["median_s"] / row["kept open"]["median_s"]
    row["staged_ratio_median"] = (row["staged, events first"]["median_s"]
                                  / row["staged"]["median_s"])
    return row


def _staged_work(kept_work, events_first: bool):
    """``kept_work`` with its processor run as a GPU-pool task runs it on the CPU engine
    with direct reads (``StagedProcessor``); ``events_first``: the work function builds
    coffea's events and the processor stages them (before the twenty-ninth session)."""
    from gpuexec.io import kept_files as open_files
    from gpuexec.io.staging import StagedProcessor, Timings

    class EventsFirst(StagedProcessor):
        process_nanoevents_factory = None  # (so the work function builds the events)

    kind = EventsFirst if events_first else StagedProcessor
    processor_instance = kind(open_files.unpacked(kept_work.keywords["processor_instance"]),
                              "cpu", Timings(), read_on_device=True)
    return functools.partial(kept_work.func, *kept_work.args,
                             **dict(kept_work.keywords, processor_instance=processor_instance))


def main(argv=None) -> int:
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = ap.parse_args(argv)
    from benchmarks.executor import machine
    from examples.make_sample import write_sample

    samples = os.path.join(ROOT, "data", "samples")
    with tempfile.TemporaryDirectory() as tmp:
        generated = write_sample(os.path.join(tmp, "generated.root"), 200_000,
                                 compression="zlib:1", basket_entries=10_000)
        cases = [(os.path.join(samples, "nano_tt_v15.root"), 50),
                 (os.path.join(samples, "nano_dy.root"), 10),
                 (generated, 50_000)]
        rows = [measure(path, chunksize, args.reps) for path, chunksize in cases]
    print(f"{'file':<20} {'branches':>8} {'chunks':>6} {'coffea ms':>10} {'kept ms':>9} "
          f"{'ratio':>6}  {'staged: events first ms':>23} {'staged ms':>9} {'ratio':>6}"
          "  (medians)")
    for r in rows:
        print(f"{r['file']:<20} {r['branches']:>8} {r['chunks']:>6} "
              f"{1e3 * r['coffea']['median_s']:>10.1f} {1e3 * r['kept open']['median_s']:>9.1f} "
              f"{r['ratio_median']:>5.2f}x  "
              f"{1e3 * r['staged, events first']['median_s']:>23.1f} "
              f"{1e3 * r['staged']['median_s']:>9.1f} {r['staged_ratio_median']:>5.2f}x")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "open_files.json")
    with open(path, "w") as f:
        json.dump({"machine": machine(), "python": platform.python_version(),
                   "reps": args.reps, "rows": rows}, f, indent=1)
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
