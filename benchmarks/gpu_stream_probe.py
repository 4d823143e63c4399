"""How close to a plain read can a wave-streaming kernel get, and what the hybrid reduction
kernel loses to list structure. One run, everything timed in turns with a device copy
(``_gputime.CopyAnchor``), as % of the copy bandwidth and of CuPy's (CUB) full sum of the
same content:

1. probes (``stream_probe.cu``): the float64 sum of 100M elements by waves reading 16-byte
   vectors under several load shapes (vectors per lane, software pipelining, L2 prefetch
   hints, a cp.async ring), one wave-tile each or persistent;
2. the hybrid kernel (on every input, with the table's launch configuration) on lists of
   fixed and mixed lengths over the same content: one exact tile per list, unaligned lists,
   lists of 64, the mixed-length input of gpu_reduce.py and its long lists alone.

    CUPY_ACCELERATORS=cub python benchmarks/gpu_stream_probe.py [--out probe.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform

import numpy as np

from _gputime import CopyAnchor
from gpu_reduce import datasets

HERE = os.path.dirname(os.path.abspath(__file__))


def _probe(nv: int, block: int, min_blocks: int, **more) -> dict:
    """The defines of one probe shape (``more``: PIPE, L2, ASYNC)."""
    return {"PROBE_NV": nv, "PROBE_BLOCK": block, "PROBE_MINB": min_blocks,
            **{f"PROBE_{k}": v for k, v in more.items()}}


# label -> (defines, persistent grid)
PROBES = {
    "nv8 128x8 one-shot": (_probe(8, 128, 8), False),
    "nv8 128x8 persistent": (_probe(8, 128, 8), True),
    "nv4 256x8 persistent": (_probe(4, 256, 8), True),
    "nv16 128x4 persistent": (_probe(16, 128, 4), True),
    "nv8 pipe 128x4 persistent": (_probe(8, 128, 4, PIPE=1), True),
    "nv8 L2:256 128x8 one-shot": (_probe(8, 128, 8, L2=256), False),
    "nv8 L2:256 128x8 persistent": (_probe(8, 128, 8, L2=256), True),
    "nv8 L2:128 128x8 persistent": (_probe(8, 128, 8, L2=128), True),
    "async 4x nv4 128x6 persistent": (_probe(4, 128, 6, ASYNC=4), True),
    "async 3x nv8 64x8 persistent": (_probe(8, 64, 8, ASYNC=3), True),
}


def list_inputs(cp, elements: int):
    """{name: offsets} of lists of fixed lengths over one content of ``elements``."""
    out = {}
    for length in (512, 1000, 64):
        n = elements // length
        out[f"fixed {length}"] = cp.arange(n + 1, dtype=cp.int64) * length
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."),
                                                  "gpu_stream_probe.json"))
    ap.add_argument("--elements", type=int, default=100_000_000)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()

    import cupy as cp

    from gpuexec.kernels.gpu.backend import GPUBackend

    from gpuexec.kernels.gpu.plan import PlanRequest

    source = open(os.path.join(HERE, "stream_probe.cu")).read()
    content = cp.random.RandomState(3).standard_normal(args.elements, dtype=cp.float64)
    anchor = CopyAnchor(cp, args.elements)
    dev = cp.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    name = cp.cuda.runtime.getDeviceProperties(dev.id)["name"].decode()
    print(f"{name}, {sms} SMs", flush=True)
    want = float(cp.sum(content))

    # -- 1. probes -------------------------------------------------------------------------
    calls, shapes = {"CUB sum (read)": lambda: cp.sum(content)}, {}
    src = content.view(cp.complex128)  # 16-byte vectors
    nvec = src.shape[0]
    for label, (defines, persistent) in PROBES.items():
        options = ("-std=c++17",) + tuple(f"-D{k}={v}" for k, v in defines.items())
        fn = cp.RawModule(code=source, options=options).get_function("probe_sum")
        block, nv = defines["PROBE_BLOCK"], defines["PROBE_NV"]
        ntiles = -(-nvec // (32 * nv))
        per_sm = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(fn.kernel.ptr, block,
                                                                           0)
        grid = per_sm * sms if persistent else -(-ntiles // (block // 32))
        out = cp.zeros(grid * block // 32, dtype=cp.float64)
        call = (lambda fn=fn, grid=grid, block=block, out=out:
                fn((grid,), (block,), (src, np.int64(nvec), out)))
        call()
        got = float(out.sum())
        ok = abs(got - want) <= 1e-9 * float(cp.abs(content).sum())
        shapes[label] = {"defines": defines, "persistent": persistent, "grid": grid,
                         "block": block, "blocks_per_sm": per_sm, "registers": fn.num_regs,
                         "local_bytes": fn.local_size_bytes, "agrees": ok}
        calls[label] = call
    times = anchor.timed(calls, reps=args.reps)
    read_t = times["CUB sum (read)"]
    rows = []
    for label, t in times.items():
        rows.append({"part": "probe", "label": label, "bytes": content.nbytes, "seconds": t,
                     **shapes.get(label, {})})

    # -- 2. the hybrid kernel on list shapes -------------------------------------------------
    hybrid = GPUBackend(plan=PlanRequest(strategy="fused", short_lists=float("inf"), per_list_kernel="hybrid"))
    kernel = hybrid.kernel("reduce_sum", "float64")
    inputs = {k: (v, content) for k, v in list_inputs(cp, args.elements).items()}
    offsets, mixed = datasets(cp, args.elements, 7)["mixed"]
    inputs["mixed"] = (offsets, mixed)
    counts = cp.diff(offsets)
    longs = counts > 32
    long_off = cp.zeros(int(longs.sum()) + 1, dtype=cp.int64)
    cp.cumsum(counts[longs], out=long_off[1:])
    inputs["mixed, long lists only"] = (long_off, mixed[:int(long_off[-1])].copy())
    for dist, (off, values) in inputs.items():
        n = off.shape[0] - 1
        nbytes = values.nbytes + off.nbytes + 8 * n
        t = anchor.timed({"hybrid": lambda off=off, values=values: kernel(off, values),
                          "CUB sum (read)": lambda values=values: cp.sum(values)},
                         reps=args.reps)
        rows.append({"part": "hybrid", "label": dist, "lists": n, "bytes": nbytes,
                     "content_bytes": values.nbytes, "seconds": t["hybrid"],
                     "read_seconds": t["CUB sum (read)"]})

    copy_bw = anchor.bandwidth
    print(f"copy {copy_bw / 1e9:.0f} GB/s; CUB sum of the content "
          f"{content.nbytes / read_t / 1e9:.0f} GB/s")
    print(f"{'probe':32s} {'us':>8s} {'% copy':>7s} {'% read':>7s} regs  blocks/SM")
    for r in rows:
        r["pct_copy"] = 100 * r["bytes"] / r["seconds"] / copy_bw
        if r["part"] == "probe":
            r["pct_read"] = 100 * read_t / r["seconds"]
            print(f"{r['label']:32s} {r['seconds'] * 1e6:8.1f} {r['pct_copy']:7.1f} "
                  f"{r['pct_read']:7.1f} {r.get('registers', '-'):>4} "
                  f"{r.get('blocks_per_sm', '-'):>4}"
                  + ("" if r.get("agrees", True) else "  WRONG SUM"))
    print(f"\n{'hybrid kernel on':32s} {'us':>8s} {'% copy':>7s} {'% read':>7s} "
          "(read: CUB sum of its content)")
    for r in rows:
        if r["part"] == "hybrid":
            # against a read of the same bytes at the CUB sum's rate
            read = r["bytes"] / r["content_bytes"] * r["read_seconds"]
            r["pct_read"] = 100 * read / r["seconds"]
            print(f"{r['label']:32s} {r['seconds'] * 1e6:8.1f} {r['pct_copy']:7.1f} "
                  f"{r['pct_read']:7.1f}")
    result = {"machine": {"gpu": name, "sms": sms, "host": platform.node(),
                          "cupy": cp.__version__},
              "copy_GBps": copy_bw / 1e9, "read_GBps": content.nbytes / read_t / 1e9,
              "elements": args.elements, "rows": rows}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
