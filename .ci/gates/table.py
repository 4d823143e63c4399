"""The per-kernel ISA table (benchmarks/results/gpu_isa_table.{md,json})."""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys

from .units import kernel_dtype_and_role

NOTE = ("Compile-time facts, no GPU involved: register counts, scratch, spills and LDS come "
        "from the compilers (AMDGPU code-object metadata; ptxas -v), occupancy is the "
        "register-limited bound (CDNA: 512 VGPRs/SIMD in granules of 8, <= 8 waves/SIMD, "
        "800 SGPRs; sm_90: 64K registers/SM in 256-register warp units, <= 64 warps/SM); "
        "block-size and LDS limits depend on the launch configuration and are not applied.")


def write(out_dir: str, rows: list[dict], toolchains: dict, not_compiled: dict) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    doc = {"generated_by": ".ci/compile_gates.py", "note": NOTE, "toolchains": toolchains,
           "not_compiled": not_compiled, "kernels": rows, **provenance()}
    jpath = os.path.join(out_dir, "gpu_isa_table.json")
    with open(jpath, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    mpath = os.path.join(out_dir, "gpu_isa_table.md")
    with open(mpath, "w") as f:
        f.write(markdown(rows, toolchains, not_compiled))
    return [mpath, jpath]


def provenance() -> dict:
    """The command, commit and machine every result JSON records (the table is compiled,
    so the machine is the host that ran the compilers; no GPU is involved)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {"command": "python " + shlex.join([os.path.relpath(sys.argv[0], root),
                                               *sys.argv[1:]]),
            "commit": commit,
            "machine": {"description": "compilers only, no GPU", "cpu": platform.machine(),
                        "cores": os.cpu_count()}}


def summary(rows: list[dict]) -> list[str]:
    """Ranges per arch and kernel role (what follows the dtype in the kernel name:
    flat_split, per_wave...; the last part for kernels without a dtype)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["arch"], kernel_dtype_and_role(r["kernel"])[1]), []).append(r)
    out = ["", "## Summary by arch and kernel role", "",
           "| arch | role | kernels | registers (VGPRs / regs per thread) | LDS B "
           "| occupancy | with scratch or spills |", "|---|---|---:|---|---:|---|---:|"]
    for (arch, role), rs in groups.items():
        regs = [r.get("vgprs", r.get("registers")) for r in rs]
        occ = [r["occupancy"]["value"] for r in rs]
        unit = rs[0]["occupancy"]["unit"]
        dirty = sum(1 for r in rs if r["scratch_bytes"] or r.get("vgpr_spills") or
                    r.get("sgpr_spills") or r.get("spill_store_bytes") or r.get("spill_load_bytes"))
        out.append(f"| {arch} | {role} | {len(rs)} | {min(regs)}-{max(regs)} "
                   f"| {max(r['lds_bytes'] for r in rs)} | {min(occ)}-{max(occ)} {unit} | {dirty} |")
    return out


def markdown(rows: list[dict], toolchains: dict, not_compiled: dict) -> str:
    out = ["# GPU kernel ISA table", "", "Written by `.ci/compile_gates.py`. " + NOTE, ""]
    out += [f"- {arch}: {tc}" for arch, tc in toolchains.items()]
    out += [f"- {arch}: not compiled: {why}" for arch, why in not_compiled.items()]
    out += summary(rows)
    for arch in dict.fromkeys(r["arch"] for r in rows):
        amd = arch.startswith("gfx")
        out += ["", f"## {arch}", ""]
        if amd:
            out += ["| unit | kernel | VGPRs | AGPRs | SGPRs | scratch B | VGPR/SGPR spills "
                    "| LDS B | waves/SIMD | limited by | dwordx4 loads |",
                    "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
        else:
            out += ["| unit | kernel | regs/thread | stack B | spill st/ld B | smem B "
                    "| warps/SM | limited by | 128-bit loads |",
                    "|---|---|---:|---:|---:|---:|---:|---|---:|"]
        for r in (r for r in rows if r["arch"] == arch):
            occ = r["occupancy"]
            if amd:
                out.append(f"| {r['unit']} | {r['kernel']} | {r['vgprs']} | {r['agprs']} "
                           f"| {r['sgprs']} | {r['scratch_bytes']} "
                           f"| {r['vgpr_spills']}/{r['sgpr_spills']} | {r['lds_bytes']} "
                           f"| {occ['value']} | {occ['limited_by']} | {r['vector_loads_128']} |")
            else:
                out.append(f"| {r['unit']} | {r['kernel']} | {r['registers']} "
                           f"| {r['scratch_bytes']} "
                           f"| {r['spill_store_bytes']}/{r['spill_load_bytes']} "
                           f"| {r['lds_bytes']} | {occ['value']} | {occ['limited_by']} "
                           f"| {r['vector_loads_128']} |")
    return "\n".join(out) + "\n"
