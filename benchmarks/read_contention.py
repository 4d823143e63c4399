"""Several processes reading one task's columns each, all at one instant, as the GPU
workers of one device do at the start of a run: the seconds of each ``read_many`` call
(CuPy, the query's columns over a task of ``--task-events``) by how many processes call
at once and by how the batches are inflated:

- ``slots``: nvCOMP, at most ``device_reading.NVCOMP_SLOTS`` batches at once per device,
  a batch waiting up to ``NVCOMP_WAIT`` for a slot and then inflated on the host (the
  default; runs before the twenty-seventh session had no wait);
- ``unlimited``: nvCOMP for every batch (``NVCOMP_SLOTS`` 0);
- ``host``: every batch inflated on the host (python-isal).

    python benchmarks/read_contention.py --queries 6,8 --processes 1,4,12

Start an MPS control daemon first to share the device as GPUExecutor's GPU workers do.
Prints a table (per round of simultaneous calls: the median and the slowest call) and
writes JSON with the machine named.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def columns_of(tree, query: int) -> list[tuple[str, str]]:
    """(kind for ``read_many``, branch) of every branch the query's processor reads:
    counts as offsets, jagged branches' content, flat branches."""
    import uproot

    from benchmarks.gpu_inflate import branches_of

    out = []
    for name in branches_of(tree, [query]):
        if isinstance(tree[name].interpretation, uproot.AsJagged):
            out.append(("content", name))
        elif name.startswith("n") and any(k.startswith(name[1:] + "_") for k in tree.keys()):
            out.append(("offsets", name))
        else:
            out.append(("flat", name))
    return out


def _reader(rank, path, query, variant, task_events, rounds, barrier, results):
    import cupy
    import uproot

    from gpuexec.io import device_read as device_reading

    from gpuexec.io import inflate

    inflate.use("auto")
    if variant == "host":
        device_reading.NVCOMP_MIN_STREAMS = 10**9
    elif variant == "unlimited":
        device_reading.NVCOMP_SLOTS = 0
    tree = uproot.open(path)["Events"]
    columns = columns_of(tree, query)
    tasks = max(1, tree.num_entries // task_events)

    def read(k):
        start = (k % tasks) * task_events
        device_reading.read_many([(kind, tree[name], start, start + task_events)
                                  for kind, name in columns], cupy)
        cupy.cuda.get_current_stream().synchronize()

    read(rank)  # imports, the codec, the file's map
    seconds = []
    for r in range(rounds):
        barrier.wait()
        t0 = time.perf_counter()
        read(rank + r)
        seconds.append(time.perf_counter() - t0)
    results.put(seconds)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=2_000_000, help="events in the generated file")
    ap.add_argument("--basket-entries", type=int, default=10_000,
                    help="entries per basket (10000: a real NanoAOD file's layout)")
    ap.add_argument("--queries", default="6,8")
    ap.add_argument("--processes", default="1,4,12")
    ap.add_argument("--variants", default="slots,unlimited,host")
    ap.add_argument("--task-events", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "read_contention.json"))
    args = ap.parse_args(argv)

    from benchmarks.executor import machine, save
    from examples.make_sample import write_sample
    from gpuexec.io import device_read as device_reading

    tmp = tempfile.TemporaryDirectory(prefix="gpuexec-contention-")
    path = write_sample(os.path.join(tmp.name, "adl.root"), args.events, compression="zlib:1",
                        basket_entries=args.basket_entries)
    ctx = mp.get_context("spawn")
    rows = []
    print(f"{'query':<5} {'variant':<10} {'P':>3}  per round: median / slowest call, ms")
    for query in (int(q) for q in args.queries.split(",")):
        for variant in args.variants.split(","):
            for procs in (int(p) for p in args.processes.split(",")):
                barrier, results = ctx.Barrier(procs), ctx.Queue()
                workers = [ctx.Process(target=_reader, args=(
                    rank, path, query, variant, args.task_events, args.rounds, barrier, results))
                    for rank in range(procs)]
                for w in workers:
                    w.start()
                got = [results.get(timeout=600) for _ in workers]
                for w in workers:
                    w.join()
                rounds = [[s[r] for s in got] for r in range(args.rounds)]
                medians = [statistics.median(r) for r in rounds]
                slowest = [max(r) for r in rounds]
                rows.append({"query": query, "variant": variant, "processes": procs,
                             "median_s": medians, "slowest_s": slowest})
                print(f"Q{query:<4} {variant:<10} {procs:>3}  " + "  ".join(
                    f"{m * 1e3:.0f}/{s * 1e3:.0f}" for m, s in zip(medians, slowest)),
                    flush=True)
    save(args.out, {"machine": machine(), "events": args.events,
                    "basket_entries": args.basket_entries, "task_events": args.task_events,
                    "nvcomp_slots": device_reading.NVCOMP_SLOTS,
                    "nvcomp_wait": device_reading.NVCOMP_WAIT,
                    "mps_pipe_directory": os.environ.get("CUDA_MPS_PIPE_DIRECTORY"), "rows": rows})
    print("written", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
