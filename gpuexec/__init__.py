"""gpuexec: a distributed coffea executor with a portable kernel engine for jagged arrays.

The kernel engine (``gpuexec.kernels``) imports nothing above it; the executor is
imported lazily so that ``import gpuexec.kernels`` stays free of Dask.
"""

__version__ = "0.1.0"

__all__ = ["GPUCluster", "GPUExecutor", "__version__"]


def __getattr__(name):
    if name == "GPUExecutor":
        from gpuexec.executor import GPUExecutor

        return GPUExecutor
    if name == "GPUCluster":
        from gpuexec.gpu_cluster import GPUCluster

        return GPUCluster
    raise AttributeError(f"module 'gpuexec' has no attribute {name!r}")
