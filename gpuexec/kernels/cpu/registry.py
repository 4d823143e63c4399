"""Fills the CPU backend's kernel table from the kernel modules."""

from __future__ import annotations


def register_all(backend) -> None:
    from gpuexec.kernels.cpu import indexing, reduce, structure

    for module in (reduce, indexing, structure):
        module.register(backend)
