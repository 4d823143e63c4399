#!/usr/bin/env python3
"""Compile gates for gpuexec's portable GPU kernels (CI has no GPU; these need none).

For every compile unit of gpuexec.kernels.gpu.units.compile_units(arch):
  gfx90a (hipcc) and gfx942 (clang-19): wavefront size 64, no scratch, no VGPR/SGPR
      spills, no out-of-line calls, global_load_dwordx4 where the unit promises
      "vector_load_128";
  sm_90 (nvcc): no stack frame, no spill stores/loads, 128-bit PTX loads where promised,
      and where a unit promises "tile_loads_first" (the per_wave and long_tail reduction kernels) every
      128-bit load of a tile issued before the first is folded (cuobjdump's SASS);
  hiprtc (hip-python's hiprtc in Python worker processes): the gfx90a code object holds
      every kernel, built for 64-lane waves;
and every compiled kernel must be one the unit lists, and the reverse. Then the ISA
table goes to benchmarks/results/gpu_isa_table.{md,json}.

Exit 1 on any failed check; with --strict (CI, after .ci/install_hip.sh) also when a
toolchain is missing. Run with the project's .venv python (it imports gpuexec).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing import get_context

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gates import amdgpu, hiprtc, nvidia, occupancy, sass, table  # noqa: E402
from gates.units import REPO, Unit, load_units  # noqa: E402

sys.path.insert(0, REPO)


class Report:
    def __init__(self):
        self.failures: list[str] = []
        self.not_run: dict[str, str] = {}
        self.rows: list[dict] = []
        self.toolchains: dict[str, str] = {}
        self.checked = 0

    def fail(self, where: str, what: str):
        self.failures.append(f"{where}: {what}")
        print(f"FAIL {where}: {what}", flush=True)

    def skip(self, stage: str, why: str):
        self.not_run[stage] = why
        print(f"{stage}: not compiled: {why}", flush=True)


def kernel_set_problems(unit: Unit, compiled) -> list[str]:
    listed, built = set(unit.kernels), set(compiled)
    out = [f"kernel {k} listed but not in the code object" for k in sorted(listed - built)]
    out += [f"kernel {k} compiled but not listed in compile_units" for k in sorted(built - listed)]
    return out


def unchecked(unit: Unit, checked: set) -> set:
    return {p for ps in unit.promises.values() for p in ps} - checked


def gate_amd(rep: Report, arch: str, tmp: str, strategies=None):
    tc = amdgpu.TOOLCHAINS[arch]
    why = tc.missing()
    if why:
        return rep.skip(arch, why)
    rep.toolchains[arch] = tc.version()
    units = load_units(arch, strategies)
    objs = [os.path.join(tmp, f"{arch}-{i}.co") for i in range(len(units))]

    def compile_and_read(unit, co):
        # the code object is read back in the same worker thread: llvm-readelf and
        # llvm-objdump are processes too (with a warm cache, most of the stage's time)
        ok, log = amdgpu.compile_unit(tc, unit, co)
        if not ok:
            return ok, log, None, None
        return (ok, log, amdgpu.kernel_metadata(tc.llvm_bin, co),
                amdgpu.kernel_disassembly(tc.llvm_bin, co))

    for unit, (ok, log, meta, asm) in zip(units, _parallel(compile_and_read, units, objs)):
        where = f"{arch} {unit.label()}"
        if not ok:
            rep.fail(where, "compile failed or warned:\n" + _excerpt(log) + amdgpu.hint(log))
            continue
        bad = kernel_set_problems(unit, meta)
        for k in unit.kernels:
            if k not in meta:
                continue
            m, text = meta[k], asm.get(k, "")
            problems = amdgpu.check_kernel(k, m, text, unit.promises.get(k, frozenset()))
            bad += [f"{k}: {p}" for p in problems]
            waves, limit = occupancy.cdna_waves_per_simd(m["vgpr_count"], m["sgpr_count"])
            rep.rows.append({
                "arch": arch, "unit": unit.label(), "kernel": k,
                "vgprs": m["vgpr_count"], "agprs": m.get("agpr_count", 0),
                "sgprs": m["sgpr_count"], "scratch_bytes": m["private_segment_fixed_size"],
                "vgpr_spills": m["vgpr_spill_count"], "sgpr_spills": m["sgpr_spill_count"],
                "lds_bytes": m["group_segment_fixed_size"],
                "wavefront_size": m["wavefront_size"],
                "max_flat_workgroup_size": m.get("max_flat_workgroup_size"),
                "vector_loads_128": len(amdgpu.VECTOR_LOAD_128.findall(text)),
                "promises": sorted(unit.promises.get(k, ())),
                "occupancy": {"value": waves, "unit": "waves/SIMD", "limited_by": limit}})
        _conclude(rep, where, unit, bad, amdgpu.CHECKED_PROMISES)


def gate_nvidia(rep: Report, tmp: str, strategies=None):
    arch = nvidia.ARCH
    why = nvidia.missing()
    if why:
        return rep.skip(arch, why)
    rep.toolchains[arch] = nvidia.version()
    objdump = sass.cuobjdump()
    if objdump:
        rep.toolchains[f"{arch} SASS"] = sass.version(objdump)
    units = load_units(arch, strategies)
    if objdump is None and any("tile_loads_first" in p for u in units
                               for p in u.promises.values()):
        rep.skip(f"{arch} SASS", "cuobjdump not found (PATH or the nvidia-cuda-cuobjdump "
                 "wheel; .ci/install_hip.sh installs it)")
    outs = [os.path.join(tmp, f"{arch}-{i}") for i in range(len(units))]
    for unit, out, (ok, log, res, ptx) in zip(units, outs, _parallel(
            lambda u, o: nvidia.compile_unit(u, o + ".cubin", o + ".ptx"), units, outs)):
        where = f"{arch} {unit.label()}"
        if not ok:
            rep.fail(where, "compile failed or warned:\n" + _excerpt(log))
            continue
        bad = kernel_set_problems(unit, res)
        ordered = [k for k in unit.kernels if "tile_loads_first" in unit.promises.get(k, ())]
        listings = sass.kernels_sass(objdump, out + ".cubin") if ordered and objdump else {}
        for k in unit.kernels:
            if k not in res:
                continue
            r, text = res[k], ptx.get(k, "")
            problems = nvidia.check_kernel(k, r, text, unit.promises.get(k, frozenset()))
            if k in ordered and listings:
                problems += sass.tile_loads_problems(listings.get(k, ""),
                                                     nvidia.tile_run(unit, k))
            bad += [f"{k}: {p}" for p in problems]
            if "registers" not in r:
                continue
            warps, limit = occupancy.sm90_warps_per_sm(r["registers"])
            rep.rows.append({
                "arch": arch, "unit": unit.label(), "kernel": k,
                "registers": r["registers"], "scratch_bytes": r.get("stack_frame"),
                "spill_store_bytes": r.get("spill_stores"),
                "spill_load_bytes": r.get("spill_loads"), "lds_bytes": r["smem"],
                "vector_loads_128": len(nvidia.PTX_VECTOR_128.findall(text)),
                "promises": sorted(unit.promises.get(k, ())),
                "occupancy": {"value": warps, "unit": "warps/SM", "limited_by": limit}})
        _conclude(rep, where, unit, bad, nvidia.CHECKED_PROMISES)


def gate_hiprtc(rep: Report, tmp: str, strategies=None, arch: str = "gfx90a"):
    stage = f"hiprtc {arch}"
    rtc, why = hiprtc.load()
    if why:
        return rep.skip(stage, why)
    llvm_bin = amdgpu.TOOLCHAINS[arch].llvm_bin
    if not os.access(f"{llvm_bin}/llvm-readelf", os.X_OK):
        return rep.skip(stage, f"{llvm_bin}/llvm-readelf not found")
    rep.toolchains[stage] = hiprtc.version(rtc)
    units = load_units(arch, strategies)
    objs = [os.path.join(tmp, f"rtc-{i}.co") for i in range(len(units))]
    # hiprtc compiles in the calling process: one worker process per core
    with ProcessPoolExecutor(os.cpu_count() or 1, mp_context=get_context("spawn")) as pool:
        results = list(pool.map(hiprtc.compile_in_worker, units, [arch] * len(units), objs))
    for unit, co, (ok, log) in zip(units, objs, results):
        where = f"{stage} {unit.label()}"
        if not ok:
            rep.fail(where, _excerpt(log))
            continue
        meta = amdgpu.kernel_metadata(llvm_bin, co)
        bad = kernel_set_problems(unit, meta)
        bad += [f"{k}: {p}" for k in unit.kernels if k in meta
                for p in hiprtc.check_kernel(k, meta[k])]
        _conclude(rep, where, unit, bad, set())


def _parallel(fn, *iterables):
    """fn over the units on every core (compilers are separate processes), in order."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        yield from pool.map(fn, *iterables)


def _conclude(rep: Report, where: str, unit: Unit, bad: list[str], checked: set):
    if bad:
        rep.fail(where, "\n    ".join([""] + bad))
        return
    rep.checked += len(unit.kernels)
    extra = unchecked(unit, checked) if checked else set()
    note = f" (promises not checked here: {sorted(extra)})" if extra else ""
    n = len(unit.kernels)
    print(f"ok   {where}: {n} kernel{'s' * (n != 1)}{note}", flush=True)


def _excerpt(log: str, limit: int = 16) -> str:
    """The compiler's errors and warnings (each with two lines of context), else its tail."""
    lines = log.splitlines()
    keep = [i for i, ln in enumerate(lines) if re.search(r"\b(error|warning|fatal)\b", ln, re.I)]
    picked = sorted({j for i in keep for j in range(i, min(i + 3, len(lines)))})
    picked = picked[:limit] if picked else list(range(max(0, len(lines) - limit), len(lines)))
    return "\n".join("    " + lines[i] for i in picked)


STAGES = {
    "gfx90a": lambda rep, tmp, st: gate_amd(rep, "gfx90a", tmp, st),
    "gfx942": lambda rep, tmp, st: gate_amd(rep, "gfx942", tmp, st),
    "sm_90": gate_nvidia,
    "hiprtc": gate_hiprtc,
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--strict", action="store_true",
                    help="a missing toolchain fails too (CI, after .ci/install_hip.sh)")
    ap.add_argument("--table-dir", default=os.path.join(REPO, "benchmarks", "results"),
                    help="where gpu_isa_table.{md,json} go")
    ap.add_argument("--no-table", action="store_true", help="check only, write nothing")
    ap.add_argument("--strategies", metavar="FILE.py",
                    help="check the compile_units of this file (sources in src/ beside it) "
                         "instead of gpuexec.kernels.gpu.units")
    ap.add_argument("--stages", default=",".join(STAGES),
                    help=f"comma-separated subset of {','.join(STAGES)}")
    args = ap.parse_args(argv)

    stages = args.stages.split(",")
    unknown = set(stages) - set(STAGES)
    if unknown:
        ap.error(f"unknown stages {sorted(unknown)}")
    start = time.monotonic()
    rep = Report()
    with tempfile.TemporaryDirectory(prefix="gk-gates-") as tmp:
        for stage in stages:
            t0 = time.monotonic()
            STAGES[stage](rep, tmp, args.strategies)
            print(f"---- {stage}: {time.monotonic() - t0:.1f} s", flush=True)
    if not args.no_table:
        for path in table.write(args.table_dir, rep.rows, rep.toolchains, rep.not_run):
            print(f"wrote {path}")
    secs = time.monotonic() - start
    missing = bool(rep.not_run) and args.strict
    if rep.failures or missing:
        why = [f"{len(rep.failures)} failing"]
        why += ["toolchains missing (--strict)"] if missing else []
        print(f"compile gates FAILED ({', '.join(why)}) in {secs:.0f} s", flush=True)
        return 1
    print(f"compile gates OK: {rep.checked} kernel builds checked in {secs:.0f} s"
          + (f"; not run: {', '.join(rep.not_run)}" if rep.not_run else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
