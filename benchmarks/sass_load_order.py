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
defines; ``-D`` adds or replaces some), compiled as the compile gate compiles it and from
its cache (.ci/gates/nvidia.py). Needs nvcc, and cuobjdump with nvdisasm: on PATH
or from PyPI's ``nvidia-cuda-cuobjdump`` / ``nvidia-cuda-nvdisasm`` wheels in this
Python's environment (.ci/install_hip.sh installs them). The sm_90 compile gate asserts
the same for every hybrid kernel of the table (.ci/gates/sass.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, ".ci"))

from gates import nvidia, sass  # noqa: E402  (what the sm_90 compile gate uses)
from gates.units import load_units  # noqa: E402


def unit_of(reduction: str, defines: dict):
    """The naive strategy's sm_90 unit of ``reduce_<reduction>`` as the compile gate builds
    it, with ``defines`` added or replaced."""
    from gpuexec.kernels.gpu.catalog import OPS_BY_CONTRACT

    op_define = OPS_BY_CONTRACT[f"reduce_{reduction}"].define
    unit = next(u for u in load_units("sm_90")
                if dict(u.defines).get("GK_VARIANT_NAIVE") and dict(u.defines).get(op_define))
    merged = {**dict(unit.defines), **defines}
    return dataclasses.replace(unit, defines=tuple(sorted(merged.items())))


def sass_of(unit, kernel: str, cuobjdump: str) -> str:
    """``kernel``'s SASS, compiled as the gate compiles it (and from the gate's cache)."""
    with tempfile.TemporaryDirectory() as tmp:
        cubin, ptx = os.path.join(tmp, "unit.cubin"), os.path.join(tmp, "unit.ptx")
        ok, log, _, _ = nvidia.compile_unit(unit, cubin, ptx)
        if not ok:
            sys.exit(f"{unit.label()} did not compile:\n{log}")
        return sass.kernels_sass(cuobjdump, cubin)[kernel]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("reduction", help="sum, max, argmax, ... (the reduce_<name> unit)")
    ap.add_argument("kernel", help="extern C name, e.g. gk_sum_float64_hybrid")
    ap.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--per-run", type=int,
                    help="128-bit loads per lane per tile (default: the unit's, as the gate "
                         "counts them: GK_HYBRID_ITEM_BYTES / 16, at most the value's bytes)")
    ap.add_argument("--cuobjdump", default=sass.cuobjdump() or "cuobjdump")
    ap.add_argument("--out")
    args = ap.parse_args()
    defines = dict(d.split("=", 1) for d in args.defines)
    unit = unit_of(args.reduction, defines)
    runs = sass.load_runs(sass_of(unit, args.kernel, args.cuobjdump),
                          args.per_run or nvidia.tile_run(unit, args.kernel))
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
