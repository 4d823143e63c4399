"""Reading one chunk's columns of an ADL query: through coffea and uproot (how GPU workers
read before the twenty-third session, and how CPU workers read) against
``gpuexec.io.device_read`` (``stage_events(..., read_on_device=True)``), side by side on
the same file, per compression. The processor is ``ReadColumns`` (the query's columns
read, nothing computed); seconds are the staging's own read + transfer account, the
minimum of ``--repeat`` fresh chunks each.

    python benchmarks/read_columns.py                                  # numpy, VM
    python benchmarks/read_columns.py --backend cuda --events 200000   # on a GPU

Prints a table and writes JSON with the machine named.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def read_seconds(path: str, query: str, backend: str, direct: bool, repeat: int) -> dict:
    """Minimum over ``repeat`` fresh chunks of (read, transfer) seconds."""
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    from examples.adl import make
    from gpuexec.io.staging import Timings, stage_events

    best = None
    for _ in range(repeat + 1):  # the first is a warm-up (imports, file open)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            events = NanoEventsFactory.from_root({path: "Events"}, schemaclass=NanoAODSchema,
                                                 mode="virtual").events()
        timings = Timings()
        make(query).process(stage_events(events, backend, timings, read_on_device=direct))
        total = timings.read + timings.transfer
        if best is None or total < best[0]:
            best = (total, timings.read, timings.transfer)
    return {"seconds": best[0], "read_s": best[1], "transfer_s": best[2]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--queries", default="8r,6r")
    parser.add_argument("--compressions", default="zlib:1,lzma:9,zstd:5")
    parser.add_argument("--backend", default="cpu", help='"cpu" (numpy) or "cuda" (CuPy)')
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" /
                                            "read_columns.json"))
    args = parser.parse_args(argv)

    from benchmarks.executor import machine, save
    from examples.make_sample import write_sample
    from gpuexec.io import device_read as device_reading

    from gpuexec.io import inflate

    library = inflate.use("auto")  # as GPUExecutor's workers do: both readers inflate with it

    tmp = tempfile.TemporaryDirectory(prefix="gpuexec-read-")
    rows = []
    print(f"{'file':<10} {'query':<6} {'uproot ms':>10} {'direct ms':>10} {'ratio':>6}")
    for compression in args.compressions.split(","):
        t0 = time.perf_counter()
        path = write_sample(os.path.join(tmp.name, f"adl_{compression.replace(':', '')}.root"),
                            args.events, compression=compression)
        written = time.perf_counter() - t0
        for query in args.queries.split(","):
            usual = read_seconds(path, query, args.backend, False, args.repeat)
            direct = read_seconds(path, query, args.backend, True, args.repeat)
            ratio = usual["seconds"] / direct["seconds"]
            rows.append({"compression": compression, "query": query, "uproot": usual,
                         "direct": direct, "uproot_over_direct": ratio,
                         "file_written_s": written})
            print(f"{compression:<10} {query:<6} {1e3 * usual['seconds']:10.1f} "
                  f"{1e3 * direct['seconds']:10.1f} {ratio:5.2f}x", flush=True)
    xp = None
    if args.backend != "cpu":
        import cupy as xp
    result = {"machine": machine(),
              "backend": args.backend, "events": args.events, "repeat": args.repeat,
              "zlib_library": library,
              "inflater": device_reading.inflater(xp) if xp is not None else "host",
              "rows": rows}
    save(args.out, result)
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
