"""One call each of the per-list (naive) and the fused sum / count_nonzero kernels on 100M
float64 in 20M Poisson(5) lists, for Nsight Compute (no timing of its own):

    ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \\
        --section LaunchStats -k regex:"sum|countnonzero" python3 benchmarks/ncu_reduce_kernels.py

docs/gpu-engine.md quotes what it showed on the H200 (registers, occupancy, DRAM %).

With ``--table --dist mixed`` it runs instead what a call gets from the strategy table
(sum, count_nonzero and argmax of float64 in mixed lengths: the hybrid kernel) and CuPy's
sum of the same content beside them, a plain read of it for comparison:

    ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
        --section WarpStateStats -k regex:"gk_|DeviceReduce" \
        python3 benchmarks/ncu_reduce_kernels.py --table --dist mixed
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    import argparse

    import cupy as cp

    from gpu_reduce import datasets

    from gpuexec.kernels.gpu.backend import GPUBackend

    from gpuexec.kernels.gpu.plan import PlanRequest

    ap = argparse.ArgumentParser()
    ap.add_argument("--dist", default="poisson5", help="gpu_reduce.datasets name")
    ap.add_argument("--table", action="store_true",
                    help="the table's kernels and CuPy's sum of the content (a plain read)")
    args = ap.parse_args()
    offsets, content = datasets(cp, 100_000_000, 7, [args.dist])[args.dist]
    if args.table:
        backend = GPUBackend()
        for contract in ("reduce_sum", "reduce_countnonzero", "reduce_argmax"):
            backend.kernel(contract, "float64")(offsets, content)
        content.sum()
        cp.cuda.runtime.deviceSynchronize()
        return
    for strategy in ("naive", "fused"):
        # short_lists=0: the fused strategy's own flattened kernel, not its per-list rule
        backend = GPUBackend(plan=PlanRequest(strategy=strategy, short_lists=None if strategy == "naive" else 0,
                             long_list_kernel="flat"))
        for contract in ("reduce_sum", "reduce_countnonzero"):
            backend.kernel(contract, "float64")(offsets, content)
            cp.cuda.runtime.deviceSynchronize()


if __name__ == "__main__":
    main()
