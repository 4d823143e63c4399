"""Whether a reduction kernel's 128-bit loads are all in flight before it folds any of them,
read from the SASS (no GPU needed).

The hybrid kernel streams a long list in wave-tiles: each lane loads GK_HYBRID_ITEM_BYTES
as 16-byte vectors, and only the first fold waits for memory when every load of the tile
is issued first. ptxas decides that order, and the same source code was compiled both
ways in one kernel (thirty-fourth session: the copy of the streaming loop that served a
block's shared queue folded each tile's first vector before issuing the other seven
loads, and ran 13 points of copy bandwidth slower on lists of Poisson(2000)).

For each run of 128-bit global loads (LDG.E.128) the table gives how many of the run's
loads precede the first instruction that reads the first load's registers:

    python benchmarks/sass_load_order.py sum gk_sum_float64_hybrid [-D GK_HYBRID_SHARE=3]
        [--out sass_load_order.json]

The unit is the naive strategy's unit of that reduction for sm_90 (the strategy table's
defines; ``-D`` adds or replaces some). Needs nvcc and cuobjdump: on PATH, or cuobjdump
from PyPI's ``nvidia-cuda-cuobjdump`` wheel (``--cuobjdump nvidia/cu13/bin/cuobjdump``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

INSTRUCTION = re.compile(r"\s*/\*([0-9a-f]+)\*/\s+(.*?)\s*;")
LOAD_128 = re.compile(r"LDG\.E\.128\S*\s+R(\d+)")
RUN_WINDOW = 120  # instructions after a run's first load in which its other loads are sought


def sass_of(reduction: str, kernel: str, defines: dict, cuobjdump: str) -> str:
    from gpuexec.kernels.gpu import strategies as S

    unit = next(u for u in S.compile_units("sm_90")
                if u.strategy == "naive" and u.op == f"reduce_{reduction}")
    src = os.path.join(os.path.dirname(S.__file__), "src")
    flags = [f"-D{k}={v}" for k, v in {**unit.defines, **defines}.items()]
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "unit.cubin")
        subprocess.run(["nvcc", "-x", "cu", "-std=c++17", "-arch=sm_90", "-O3", "-I", src,
                        "-cubin", *flags, "-o", cubin, os.path.join(src, unit.source)],
                       check=True)
        return subprocess.run([cuobjdump, "-sass", "-fun", kernel, cubin], check=True,
                              capture_output=True, text=True).stdout


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("reduction", help="sum, max, argmax, ... (the reduce_<name> unit)")
    ap.add_argument("kernel", help="extern C name, e.g. gk_sum_float64_hybrid")
    ap.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--per-run", type=int, default=8,
                    help="128-bit loads per lane per tile: GK_HYBRID_ITEM_BYTES / 16, at most "
                         "16 elements (the table's 128 bytes: 8 for 8-byte values, 4 for 4-byte)")
    ap.add_argument("--cuobjdump", default=shutil.which("cuobjdump") or "cuobjdump")
    ap.add_argument("--out")
    args = ap.parse_args()
    defines = dict(d.split("=", 1) for d in args.defines)
    runs = load_runs(sass_of(args.reduction, args.kernel, defines, args.cuobjdump), args.per_run)
    print(f"{args.kernel}{f' {defines}' if defines else ''}: runs of 128-bit loads")
    print(f"{'at':>6} {'loads before first use':>23}  first use")
    for r in runs:
        print(f"{r['at']:>6} {r['loads_before_first_use']:>23}  {r['first_use']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"kernel": args.kernel, "reduction": args.reduction, "arch": "sm_90",
                       "defines": defines, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
