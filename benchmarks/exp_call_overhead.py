"""Experiment (thirty-eighth session): where the wall time of a buffer-level sum over the
mixed lengths goes beyond its kernel's device time (29 µs on one H200 host, against 11 µs
for two CuPy RawKernel launches of a kernel of the same size).

Thirty-ninth session: a reduction remembers its launch per (offsets, content) pair
(GPUBackend._reducer). Each call is timed both ways in the same run: as shipped (a
repeated call takes the remembered launch) and "full path" (the entry forgotten before
each call, so every call works the launch out again, as every call did before), beside
the public ``gk.sum`` and awkward's ``ak.sum`` on the same mixed-length array."""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=None, help="JSON file for the figures")
    args = p.parse_args()

    import cupy as cp
    from _gputime import event_time, launches_of, wall_median
    from gpu_reduce import datasets, wall_time

    from gpuexec.kernels import validate
    from gpuexec.kernels.gpu.backend import GPUBackend

    sync = cp.cuda.runtime.deviceSynchronize
    be = GPUBackend()
    kern = be.kernel("reduce_sum", "float64")
    offsets, content = datasets(cp, 100_000_000, 1, names=("mixed",))["mixed"]
    validate.offsets(offsets, content.shape[0])
    one = (cp.asarray([0, 1], dtype=cp.int64), cp.zeros(1, dtype=cp.float64))
    validate.offsets(one[0], 1)
    res = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}

    # the outputs stay alive: the raw launches below write into them again
    kept, captured = launches_of(be, lambda: (kern(offsets, content), kern(*one)))
    sync()
    (name_m, fn_m, grid_m, block_m, args_m), (name_1, fn_1, grid_1, block_1, args_1) = captured
    res["kernels"] = {"mixed": [name_m, grid_m, block_m], "one": [name_1, grid_1, block_1]}
    stream = cp.cuda.get_current_stream().ptr

    def raw(fn, grid, block, args):
        return lambda: be.runtime.launch(fn, grid, block, args, stream)

    def issue(fn, calls=301):
        times = []
        for _ in range(calls):
            sync()
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        sync()
        return statistics.median(times)

    empty = cp.RawKernel(r'extern "C" __global__ void nothing() {}', "nothing")
    forget = kern.remembered.forget

    def full_path(*args):
        return lambda: (forget(*args), kern(*args))

    import awkward as ak

    import gpuexec.kernels as gk

    arr = ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(offsets),
                                               ak.contents.NumpyArray(content)))
    calls = {"call mixed": lambda: kern(offsets, content),
             "call mixed, full path": full_path(offsets, content),
             "call one": lambda: kern(*one),
             "call one, full path": full_path(*one),
             "public gk.sum mixed": lambda: gk.sum(arr, axis=1, backend=be),
             "raw launch mixed": raw(fn_m, grid_m, block_m, args_m),
             "raw launch one": raw(fn_1, grid_1, block_1, args_1),
             "cupy read mixed": lambda: content.sum(),
             "cupy empty kernel": lambda: empty((1,), (32,), ())}
    for k, f in calls.items():
        res[k] = {"wall": wall_median(f, sync, 301, 20), "issue": issue(f),
                  "event": event_time(cp, f, reps=15)}
        print(f"{k:22s} wall {1e6 * res[k]['wall']:7.1f}  issue {1e6 * res[k]['issue']:6.1f}"
              f"  event {1e6 * res[k]['event']:7.1f} us", flush=True)
    # the same raw launch with a stream sync instead of the device sync, and two calls
    # back to back then one sync (a processor's sequence)
    s = cp.cuda.get_current_stream()
    res["raw launch mixed, stream sync"] = wall_median(calls["raw launch mixed"],
                                                       s.synchronize, 301, 20)
    res["call mixed x2, one sync"] = wall_median(lambda: (kern(offsets, content),
                                                          kern(offsets, content)), sync, 101, 5)
    # the public call as gpu_reduce.py times it (31 calls after one, a device sync each)
    res["public gk.sum mixed, 31 calls"] = wall_time(cp, calls["public gk.sum mixed"], reps=31)
    print("public gk.sum mixed, 31 calls", 1e6 * res["public gk.sum mixed, 31 calls"])
    print("raw mixed stream sync", 1e6 * res["raw launch mixed, stream sync"])
    print("call mixed x2 one sync", 1e6 * res["call mixed x2, one sync"])

    for label, bufs in (("one list", one), ("mixed", (offsets, content))):
        prof = cProfile.Profile()
        for _ in range(500):
            sync()
            prof.enable()
            kern(*bufs)
            prof.disable()
        sync()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(12)
        print(label, buf.getvalue()[:3500])
    try:
        res["ak.sum mixed"] = wall_median(lambda: ak.sum(arr, axis=1), sync, 5, 1)
        print("ak.sum mixed wall", 1e6 * res["ak.sum mixed"])
        for k in ("call mixed", "call mixed, full path", "public gk.sum mixed"):
            res[f"x awkward, {k}"] = res["ak.sum mixed"] / res[k]["wall"]
            print(f"{k}: {res[f'x awkward, {k}']:.2f}x awkward")
    except Exception as err:  # noqa: BLE001 - reported, not needed
        print("awkward:", type(err).__name__, err)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
