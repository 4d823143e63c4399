"""Fill the kernel disk cache ahead of use: compile every compile unit of an architecture
with the runtime compiler, in parallel processes (no device needed for compiling).

    python -m gpuexec.kernels.gpu.warm [--arch sm_90] [--vendor cuda] [--jobs 8]
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor


def _one(args):
    vendor, arch, index, cache_dir = args
    from gpuexec.kernels.gpu import load_bindings
    from gpuexec.kernels.gpu import runtime, units

    b = load_bindings(vendor)
    unit = units.compile_units(arch)[index]
    t0 = time.perf_counter()
    _, how = runtime.build_image(b, arch, unit, cache_dir, b.compiler_version())
    return unit.strategy, unit.op, how, time.perf_counter() - t0


def warm(arch: str, vendor: str, jobs: int, cache_dir: str | None = None) -> list:
    from gpuexec.kernels.gpu import runtime, units

    cache_dir = cache_dir or runtime.default_cache_dir()
    n = len(units.compile_units(arch))
    with ProcessPoolExecutor(jobs) as ex:
        return list(ex.map(_one, [(vendor, arch, i, cache_dir) for i in range(n)]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch")
    ap.add_argument("--vendor")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    vendor, arch = a.vendor, a.arch
    if arch is None:
        from gpuexec.kernels.gpu import load_bindings

        b = load_bindings(vendor)
        vendor = b.VENDOR
        b.init(0)
        arch = b.device_properties(0)["arch"]
    vendor = vendor or ("hip" if arch.startswith("gfx") else "cuda")
    t0 = time.perf_counter()
    rows = warm(arch, vendor, a.jobs)
    built = sum(1 for r in rows if r[2] == "compiled")
    print(f"{arch}: {len(rows)} units ({built} compiled, {len(rows) - built} from disk) "
          f"in {time.perf_counter() - t0:.1f} s; slowest {max(r[3] for r in rows):.1f} s")


if __name__ == "__main__":
    main()
