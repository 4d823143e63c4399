"""Fills the CPU backend's kernel table from the kernel modules."""

from __future__ import annotations


def register_all(backend) -> None:
    from gpuexec.kernels.cpu import reduce

    reduce.register(backend)
    for optional in ("indexing", "structure"):
        # Kernel families land module by module; each registers its own kernels.
        try:
            module = __import__(f"gpuexec.kernels.cpu.{optional}", fromlist=["register"])
        except ModuleNotFoundError:
            continue
        module.register(backend)
