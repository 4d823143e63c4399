"""One call each of the per-list (naive) and the fused sum / count_nonzero kernels on 100M
float64 in 20M Poisson(5) lists, for Nsight Compute (no timing of its own):

    ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \\
        --section LaunchStats -k regex:"sum|countnonzero" python3 benchmarks/ncu_reduce_kernels.py

docs/gpu-engine.md quotes what it showed on the H200 (registers, occupancy, DRAM %).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    import cupy as cp

    from gpu_reduce import datasets

    from gpuexec.kernels.gpu.backend import GPUBackend

    offsets, content = datasets(cp, 100_000_000, 7)["poisson5"]
    for strategy in ("naive", "fused"):
        # short_lists=0: the fused strategy's own flattened kernel, not its per-list rule
        backend = GPUBackend(strategy=strategy, short_lists=None if strategy == "naive" else 0,
                             long_list_kernel="flat")
        for contract in ("reduce_sum", "reduce_countnonzero"):
            backend.kernel(contract, "float64")(offsets, content)
            cp.cuda.runtime.deviceSynchronize()


if __name__ == "__main__":
    main()
