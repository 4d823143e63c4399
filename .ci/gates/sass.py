"""NVIDIA SASS read for the order of 128-bit loads (cuobjdump; no GPU needed).

The per_wave and long_tail reduction kernels stream a long list in wave-tiles: each
lane loads its vectors of a tile, then folds them. Only the first fold waits for memory when every
load of the tile is issued before it; ptxas decides that order, and an innocent change
of the source can flip it (moving the batch body into its own
function left the float64 sum streaming one vector, folding it, then loading the other
seven; on lists of Poisson(2000) it ran at 82.6 % of copy bandwidth, the same source at
7 blocks per SM, its loads in order again, at 94.9 %).

A run is a lane's loads of one tile: up to ``per_run`` LDG.E.128 close together. For
each run the count of its loads issued before the first instruction that reads the
first load's registers is what the gate asserts.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
import sys

INSTRUCTION = re.compile(r"\s*/\*([0-9a-f]+)\*/\s+(.*?)\s*;")
# LDG.E.128, also with cache hints between E and 128 (LDG.E.EF.128: ld.global.cs)
LOAD_128 = re.compile(r"LDG\.E(?:\.[A-Z]\w*)*\.128\S*\s+R(\d+)")
FUNCTION = re.compile(r"^\s*Function : (\S+)\s*$", re.M)
RUN_WINDOW = 120  # instructions after a run's first load in which its other loads are sought


@functools.lru_cache(maxsize=None)  # looked up for every unit the gate reads
def _tool(name: str) -> str | None:
    """``name`` on PATH, else the one of PyPI's nvidia-cuda-<name> wheel installed in this
    Python's environment (.ci/install_hip.sh installs them where PATH has none)."""
    found = shutil.which(name)
    if found:
        return found
    for site in sys.path:
        for path in sorted(glob.glob(os.path.join(site, "nvidia", "cu*", "bin", name))):
            if os.access(path, os.X_OK):
                return path
    return None


def cuobjdump() -> str | None:
    """cuobjdump, where nvdisasm (which it runs to print SASS) is found too."""
    return _tool("cuobjdump") if _tool("nvdisasm") else None


def version(tool: str) -> str:
    out = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    return next((ln for ln in out.splitlines() if "release" in ln), out.strip())


def kernels_sass(tool: str, cubin: str) -> dict[str, str]:
    """Kernel name -> its SASS listing, for every kernel of a cubin."""
    env = {**os.environ, "NVDISASM_PATH": os.path.dirname(_tool("nvdisasm") or "")}
    text = subprocess.run([tool, "-sass", cubin], check=True, capture_output=True,
                          text=True, env=env).stdout
    heads = list(FUNCTION.finditer(text))
    ends = [m.start() for m in heads[1:]] + [len(text)]
    return {m.group(1): text[m.end():e] for m, e in zip(heads, ends)}


def load_runs(sass: str, per_run: int = 8) -> list[dict]:
    """One entry per run of up to ``per_run`` LDG.E.128 (a lane's vectors of one tile):
    its address, the loads issued before the first use of the first load's four
    registers, and that use."""
    code = [(m.group(1), m.group(2)) for m in map(INSTRUCTION.match, sass.splitlines()) if m]
    runs, i = [], 0
    while i < len(code):
        m = LOAD_128.search(code[i][1])
        if m is None:
            i += 1
            continue
        first = int(m.group(1))
        uses = re.compile(r"\bR(" + "|".join(str(first + k) for k in range(4)) + r")\b")
        loads, use, j = 1, None, i + 1
        while j < min(len(code), i + RUN_WINDOW) and use is None:
            text = code[j][1]
            if LOAD_128.search(text):
                loads += 1
            elif uses.search(text.split(" ", 1)[-1]):
                use = f"{code[j][0]}: {text}"
            j += 1
        runs.append({"at": code[i][0], "loads_before_first_use": loads, "first_use": use})
        # the rest of this run (its other loads) is not a run of its own
        seen, k = 1, i + 1
        while k < min(len(code), i + RUN_WINDOW) and seen < per_run:
            seen += bool(LOAD_128.search(code[k][1]))
            k += 1
        i = k
    return runs


def tile_loads_problems(sass: str, per_run: int) -> list[str]:
    """Where a run issues fewer than ``per_run`` loads before folding its first one."""
    runs = load_runs(sass, per_run)
    if not runs:
        return ["promises tile_loads_first but its SASS has no 128-bit loads (LDG.E.128)"]
    return [f"only {r['loads_before_first_use']} of {per_run} 128-bit loads of the tile at "
            f"{r['at']} issued before the first is used ({r['first_use']})"
            for r in runs if r["loads_before_first_use"] < per_run]
