"""How fast the baskets an ADL query reads inflate on an NVIDIA GPU (nvCOMP's Deflate, one
batched call) against the host's inflaters (python-isal and zlib, one core): the
measurement behind taking decompression off the host cores, which bound ADL Q8
(docs/executor.md, twenty-third session).

    python benchmarks/gpu_inflate.py --events 2000000 --queries 8
    python benchmarks/gpu_inflate.py --events 20000 --no-gpu     # parsing check, no GPU

A ROOT basket is a key header, then blocks of at most 16 MiB each: a 9-byte ROOT header
("ZL", method, compressed and uncompressed sizes in 3 little-endian bytes each) around a
zlib stream, which is a 2-byte header, a raw deflate stream and a 4-byte Adler-32.
nvCOMP's Deflate takes the raw deflate stream. Every basket's inflated bytes are checked
against uproot's own (``TBasket.raw_data``) before anything is timed, and the GPU's output
against the host's. Prints a table and writes JSON with the machine named.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

def branches_of(tree, queries) -> list[str]:
    """The branches the queries' processors read through NanoEvents: their columns and
    the counts of their collections."""
    from examples.adl import QUERIES
    from examples.adl import columns as colmap

    names = set()
    for q in queries:
        for flat in colmap.branch_names(QUERIES[q].columns, tree.keys()).values():
            names.add(flat)
            counts = "n" + flat.split("_", 1)[0]
            if counts in tree.keys():
                names.add(counts)
    return sorted(names)


def zlib_blocks(path: str, tree, branch_names) -> tuple[list[bytes], list[int], int, list]:
    """(the zlib streams of every basket of ``branch_names``, their inflated sizes, the
    number of baskets, stored uncompressed ones included, and the first entry of each
    stream's basket), cut out of the file as GPU workers cut them
    (``gpuexec.io.device_read.find_baskets``); every basket's bytes are checked against
    uproot's."""
    from gpuexec.io import device_read as device_reading

    streams, sizes, count, firsts = [], [], 0, []
    for name in branch_names:
        branch = tree[name]
        try:
            found = device_reading.find_baskets(branch, 0, branch.num_entries)
        except device_reading.Unsupported as err:
            raise SystemExit(f"{path}: {err}") from None
        for i, basket in enumerate(found):
            count += 1
            if basket.stored is None and not basket.streams:
                raise SystemExit(f"{path}: {basket.where} is not zlib-compressed")
            inflated = basket.stored if basket.stored is not None else b"".join(
                zlib.decompress(s) for s, _u in basket.streams)
            if inflated != bytes(branch.basket(i).raw_data):
                raise SystemExit(f"{name} basket {i}: its bytes differ from uproot's")
            streams += [bytes(s) for s, _u in basket.streams]
            sizes += [u for _s, u in basket.streams]
            firsts += [basket.entry_start] * len(basket.streams)
    return streams, sizes, count, firsts


def host_seconds(streams, library: str, repeat: int) -> float:
    """Best of ``repeat``: one core inflating every stream with ``library``."""
    if library == "isal":
        from isal import isal_zlib as lib
    else:
        lib = zlib
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for s in streams:
            lib.decompress(s)
        best = min(best, time.perf_counter() - t0)
    return best


def gpu_inflate(streams, sizes, repeat: int,
                labels=("sizes_found", "sizes_given")) -> dict:
    """nvCOMP Deflate over every stream in one batched call, from one host buffer copied
    to the device; medians of ``repeat`` (after a warm-up) of the copy and the inflate,
    and the output checked against the host's."""
    import cupy as cp
    from nvidia import nvcomp

    raw = [s[2:-4] for s in streams]  # the raw deflate stream inside each zlib stream
    # nvCOMP wants each input 4-byte aligned ("not aligned to the required alignment of
    # 4 bytes" on the H200): every stream starts on a 16-byte boundary of one buffer
    starts = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([-(-len(r) // 16) * 16 for r in raw], out=starts[1:])
    host = cp.cuda.alloc_pinned_memory(int(starts[-1]))
    packed = np.frombuffer(host, dtype=np.uint8, count=int(starts[-1]))
    for k, r in enumerate(raw):
        packed[starts[k]:starts[k] + len(r)] = np.frombuffer(r, dtype=np.uint8)
    codec = nvcomp.Codec(algorithm="Deflate", bitstream_kind=nvcomp.BitstreamKind.RAW)

    # the inflated sizes are in the ROOT block headers: given to nvCOMP as a config, the
    # decode needs no pass of its own to find them (nor the host sync that pass ends with)
    known = codec.decompression_config(codec.compression_config(list(sizes)))

    def once(config):
        t0 = time.perf_counter()
        device = cp.asarray(packed)
        cp.cuda.get_current_stream().synchronize()
        t1 = time.perf_counter()
        views = [device[starts[k]:starts[k] + len(raw[k])] for k in range(len(raw))]
        out = codec.decode(nvcomp.as_arrays(views), decompression_config=config)
        cp.cuda.runtime.deviceSynchronize()
        return t1 - t0, time.perf_counter() - t1, out

    result = {"compressed_bytes": sum(map(len, raw)), "streams": len(raw),
              "gpu": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
              "nvcomp": nvcomp.__version__}
    for label, config in (("sizes_found", None), ("sizes_given", known)):
        if label not in labels:
            continue
        once(config)
        copies, inflates = [], []
        for _ in range(repeat):
            c, i, out = once(config)
            copies.append(c)
            inflates.append(i)
        got = [cp.asarray(a).view(cp.uint8) for a in out]
        for k, (g, s) in enumerate(zip(got, streams)):
            if g.size != sizes[k] or bytes(g.get()) != zlib.decompress(s):
                raise SystemExit(f"stream {k} ({label}): nvCOMP's output differs from zlib's")
        result[label] = {"copy_s": float(np.median(copies)),
                         "inflate_s": float(np.median(inflates))}
    return result


def task_sweep(streams, sizes, firsts, task_events, repeat: int, gpu: bool) -> list[dict]:
    """For a task of each number of events in ``task_events``: the streams of the baskets
    holding its first that many entries (every branch, as one batched read of a GPU
    worker's task would take them), inflated by one host core with ISA-L against one
    nvCOMP call with the sizes given, the copy of the compressed bytes included: where the
    crossover ``gpuexec.io.device_read.NVCOMP_MIN_STREAMS`` lies (in stream equivalents:
    the batch's inflated bytes over its largest stream's)."""
    from gpuexec.io import device_read as device_reading

    rows = []
    for n in task_events:
        pick = [k for k, first in enumerate(firsts) if first < n]
        sub, subsizes = [streams[k] for k in pick], [sizes[k] for k in pick]
        row = {"task_events": n, "streams": len(sub), "inflated_bytes": sum(subsizes),
               "stream_equivalents": device_reading.stream_equivalents(subsizes)}
        try:
            row["isal_s"] = host_seconds(sub, "isal", repeat)
        except ImportError as err:
            row["isal_s"] = None
            row["not_run"] = str(err)
        if gpu and sub:
            timed = gpu_inflate(sub, subsizes, repeat, labels=("sizes_given",))["sizes_given"]
            row["nvcomp_s"] = timed["copy_s"] + timed["inflate_s"]
        rows.append(row)
    print(f"{'task events':>11} {'streams':>8} {'equiv':>6} {'MB out':>7} {'isal ms':>8} "
          f"{'nvcomp ms':>10} {'isal/nvcomp':>11}")
    for row in rows:
        isal, nv = row.get("isal_s"), row.get("nvcomp_s")
        isal_ms = f"{1e3 * isal:8.2f}" if isal else "-".rjust(8)
        nv_ms = f"{1e3 * nv:10.2f}" if nv else "-".rjust(10)
        ratio = f"{isal / nv:10.2f}x" if isal and nv else "-".rjust(11)
        print(f"{row['task_events']:>11,} {row['streams']:>8} {row['stream_equivalents']:6.1f} "
              f"{row['inflated_bytes'] / 1e6:7.1f} {isal_ms} {nv_ms} {ratio}")
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--queries", default="8")
    parser.add_argument("--branches", default=None,
                        help="comma-separated branches instead of the queries' (where coffea, "
                             "which examples.adl imports, is not installed)")
    parser.add_argument("--file", default=None, help="an existing file instead of one generated")
    parser.add_argument("--basket-entries", type=int, default=100_000,
                        help="entries per basket of the generated file (10000: a real NanoAOD "
                             "file's layout, see examples/make_sample.py)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-gpu", action="store_true", help="host inflaters only")
    parser.add_argument("--task-events", default=None,
                        help="comma-separated task sizes: also time the streams one task of "
                             "each size reads (ISA-L on one core against one nvCOMP call, "
                             "copy included)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gpu_inflate.json"))
    args = parser.parse_args(argv)

    import uproot

    tmp = tempfile.TemporaryDirectory(prefix="gpuexec-inflate-")
    path = args.file
    if path is None:
        from examples.make_sample import write_sample

        t0 = time.perf_counter()
        path = write_sample(os.path.join(tmp.name, "adl.root"), args.events, seed=20240601,
                            compression="zlib:1", basket_entries=args.basket_entries)
        print(f"generated {args.events:,} events in {time.perf_counter() - t0:.1f} s")
    queries = [int(q) for q in args.queries.split(",")]
    with uproot.open(path) as f:
        tree = f["Events"]
        names = args.branches.split(",") if args.branches else branches_of(tree, queries)
        streams, sizes, baskets, firsts = zlib_blocks(path, tree, names)
        events = tree.num_entries
    inflated = sum(sizes)
    print(f"Q{args.queries}: {len(names)} branches, {baskets} baskets, {len(streams)} zlib "
          f"blocks, {sum(map(len, streams)) / 1e6:.1f} MB -> {inflated / 1e6:.1f} MB; "
          f"every basket equals uproot's")

    rows = {}
    for library in ("isal", "zlib"):
        try:
            rows[library] = {"seconds": host_seconds(streams, library, args.repeat)}
        except ImportError as err:
            rows[library] = {"not_run": str(err)}
    if not args.no_gpu:
        try:
            gpu = gpu_inflate(streams, sizes, args.repeat)
            for label in ("sizes_found", "sizes_given"):
                timed = gpu.pop(label)
                rows[f"nvcomp, {label.replace('_', ' ')}"] = dict(
                    timed, seconds=timed["inflate_s"])
            rows["nvcomp, sizes found"].update(gpu)
        except (ImportError, RuntimeError) as err:
            rows["nvcomp"] = {"not_run": f"{type(err).__name__}: {err}"}

    base = rows.get("isal", {}).get("seconds")
    print(f"{'inflater':<20} {'ms':>9} {'GB/s out':>9} {'ns/event':>9} {'vs isal':>8}")
    for name, row in rows.items():
        if "seconds" not in row:
            print(f"{name:<20} not run: {row['not_run']}")
            continue
        s = row["seconds"]
        row["gb_per_s"] = inflated / s / 1e9
        print(f"{name:<20} {1e3 * s:9.2f} {row['gb_per_s']:9.2f} {1e9 * s / events:9.1f} "
              f"{(base / s if base else float('nan')):7.1f}x")
    if "copy_s" in rows.get("nvcomp, sizes found", {}):
        r = rows["nvcomp, sizes found"]
        print(f"nvcomp: one batched decode of {r['streams']} streams on {r['gpu']} (nvCOMP "
              f"{r['nvcomp']}), output equal to zlib's; the host-to-device copy of the "
              f"compressed bytes before it {1e3 * r['copy_s']:.2f} ms (pinned, "
              f"{r['compressed_bytes'] / r['copy_s'] / 1e9:.1f} GB/s)")
    sweep = None
    if args.task_events:
        sweep = task_sweep(streams, sizes, firsts,
                           [int(n) for n in args.task_events.split(",")], args.repeat,
                           gpu="copy_s" in rows.get("nvcomp, sizes found", {}))
    from benchmarks.executor import machine, save

    result = {"machine": machine(),
              "events": events, "basket_entries": None if args.file else args.basket_entries,
              "queries": queries, "branches": names, "baskets": baskets,
              "blocks": len(streams), "compressed_bytes": sum(map(len, streams)),
              "inflated_bytes": inflated, "inflaters": rows, "task_sweep": sweep,
              "note": "host inflaters: one core, best of --repeat; nvcomp: median of "
                      "--repeat after a warm-up, the copy apart; 'sizes given': the inflated "
                      "sizes from the ROOT headers passed as a decompression config"}
    save(args.out, result)
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
