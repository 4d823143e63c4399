"""The CPU backend: numba kernels, cached on disk, parallel across lists."""

from __future__ import annotations

import numpy as np

from gpuexec.kernels.backend import Backend
from gpuexec.kernels.cpu import threads


class CPUBackend(Backend):
    name = "cpu"
    ak_backend = "cpu"
    nplike = np

    def __init__(self) -> None:
        super().__init__()
        from gpuexec.kernels.cpu import registry

        registry.register_all(self)
        threads.get_num_threads()

    def asarray(self, data):
        if hasattr(data, "materialize"):  # awkward VirtualNDArray (coffea mode="virtual")
            data = data.materialize()
        if type(data).__module__.startswith("cupy"):
            return data.get()
        return np.asarray(data)

    def to_host(self, buffer):
        return np.asarray(buffer)


def create_backend() -> CPUBackend:
    return CPUBackend()
