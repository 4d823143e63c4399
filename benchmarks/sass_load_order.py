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
defines; ``-D`` adds or replaces some). Needs nvcc, and cuobjdump with nvdisasm: on PATH
or from PyPI's ``nvidia-cuda-cuobjdump`` / ``nvidia-cuda-nvdisasm`` wheels in this
Python's environment (.ci/install_hip.sh installs them). The sm_90 compile gate asserts
the same for every hybrid kernel of the table (.ci/gates/sass.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, ".ci"))

from gates import sass  # noqa: E402  (the parser the sm_90 compile gate uses)


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
        return sass.kernels_sass(cuobjdump, cubin)[kernel]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("reduction", help="sum, max, argmax, ... (the reduce_<name> unit)")
    ap.add_argument("kernel", help="extern C name, e.g. gk_sum_float64_hybrid")
    ap.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--per-run", type=int, default=8,
                    help="128-bit loads per lane per tile: GK_HYBRID_ITEM_BYTES / 16, at most "
                         "16 elements (the table's 128 bytes: 8 for 8-byte values, 4 for 4-byte)")
    ap.add_argument("--cuobjdump", default=sass.cuobjdump() or "cuobjdump")
    ap.add_argument("--out")
    args = ap.parse_args()
    defines = dict(d.split("=", 1) for d in args.defines)
    runs = sass.load_runs(sass_of(args.reduction, args.kernel, defines, args.cuobjdump),
                          args.per_run)
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
