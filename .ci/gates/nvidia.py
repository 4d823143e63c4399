"""NVIDIA gate: compile each unit for sm_90 with nvcc and read ptxas' resource report.

nvcc -ptx, then ptxas -v on that PTX (the two halves of nvcc -cubin): ptxas prints, per
entry function, its stack frame, spill stores/loads, registers and shared memory; the
PTX shows whether a kernel that promises 128-bit loads issues ld.global.v2.b64 /
.v4.b32 vector loads; the cubin's SASS (cuobjdump, gates/sass.py) whether one that
promises "tile_loads_first" issues all of a tile's loads before folding the first.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess

from . import cache
from .units import Unit, kernel_dtype_and_role

ARCH = "sm_90"
ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")
SMEM = re.compile(r"(\d+) bytes smem")
PTX_VECTOR_128 = re.compile(r"\bld\.global\.[\w:.]*\b(v2\.[bfsu]64|v4\.[bfsu]32)\b")
PTX_ENTRY = re.compile(r"^\.visible \.entry (\w+)\(", re.M)


def missing() -> str | None:
    for tool in ("nvcc", "ptxas"):
        if shutil.which(tool) is None:
            return f"{tool} not found on PATH"
    return None


@functools.lru_cache(maxsize=None)
def version() -> str:
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    return next((ln for ln in out.splitlines() if "release" in ln), out.strip())


def compile_unit(unit: Unit, cubin: str, ptx: str) -> tuple[bool, str, dict, dict]:
    """(ok, log, kernel -> resources, kernel -> PTX text). Warnings in our sources fail."""
    to_ptx = ["nvcc", "-x", "cu", "-std=c++17", f"-arch={ARCH}", "-O3", "-I", unit.src_dir,
              *unit.define_flags(), "-ptx", unit.path, "-o", ptx]
    to_cubin = ["ptxas", f"-arch={ARCH}", "-O3", "-v", ptx, "-o", cubin]
    k = cache.key(version(), to_ptx[:-1] + to_cubin[:-3], unit)
    artifacts = {"code.ptx": ptx, "code.cubin": cubin}
    log = cache.get(k, artifacts)
    if log is None:
        logs = []
        for cmd in (to_ptx, to_cubin):
            p = subprocess.run(cmd, capture_output=True, text=True)
            logs.append((p.stdout + p.stderr).strip())
            if p.returncode != 0:
                return False, "\n".join(logs), {}, {}
        log = "\n".join(x for x in logs if x)
        if own_warnings(log, unit.src_dir):
            return False, log, {}, {}
        cache.put(k, artifacts, log)
    with open(ptx) as f:
        ptx_text = f.read()
    return True, log, parse_ptxas(log), split_ptx(ptx_text)


def own_warnings(log: str, src_dir: str) -> list[str]:
    return [ln for ln in log.splitlines() if "warning" in ln.lower() and src_dir in ln]


def parse_ptxas(log: str) -> dict[str, dict]:
    """Kernel name -> {registers, stack_frame, spill_stores, spill_loads, smem}."""
    kernels, cur = {}, None
    for line in log.splitlines():
        m = ENTRY.search(line)
        if m:
            cur = kernels.setdefault(m.group(1), {"smem": 0})
            continue
        if cur is None:
            continue
        m = PROPS.search(line)
        if m:
            cur.update(stack_frame=int(m.group(1)), spill_stores=int(m.group(2)),
                       spill_loads=int(m.group(3)))
        m = USED.search(line)
        if m:
            cur["registers"] = int(m.group(1))
            s = SMEM.search(line)
            cur["smem"] = int(s.group(1)) if s else 0
    return kernels


def split_ptx(ptx: str) -> dict[str, str]:
    starts = [(m.start(), m.group(1)) for m in PTX_ENTRY.finditer(ptx)]
    ends = [s for s, _ in starts[1:]] + [len(ptx)]
    return {name: ptx[s:e] for (s, name), e in zip(starts, ends)}


def check_kernel(name: str, res: dict, ptx: str, promises: frozenset) -> list[str]:
    bad = []
    if "registers" not in res or "stack_frame" not in res:
        return ["ptxas printed no resource usage for it"]
    for key in ("stack_frame", "spill_stores", "spill_loads"):
        if res[key]:
            bad.append(f"{res[key]} bytes {key.replace('_', ' ')}")
    if "vector_load_128" in promises and not PTX_VECTOR_128.search(ptx):
        bad.append("promises vector_load_128 but its PTX has no 128-bit ld.global.v2/v4")
    return bad


def tile_run(unit: Unit, kernel: str) -> int:
    """128-bit loads per lane per tile of a per_wave (or long_tail) kernel:
    GK_PER_WAVE_ITEM_BYTES / 16, but no more than the value's size in bytes
    (reduce_wave_stream.cuh's stream_shape: a lane takes at most 16 elements of a tile)."""
    import numpy as np

    item_bytes = int(dict(unit.defines).get("GK_PER_WAVE_ITEM_BYTES") or 64)
    dtype, _role = kernel_dtype_and_role(kernel)
    return max(1, min(item_bytes // 16, np.dtype(dtype).itemsize))


CHECKED_PROMISES = {"vector_load_128", "tile_loads_first"}
