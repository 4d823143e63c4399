"""Segmented reductions over the innermost lists (numba).

Each kernel walks one list in list order, so values are bit-identical to awkward's
own per-list loops; lists are spread over threads (``prange``) above the size
threshold of ``threads``.
"""

from __future__ import annotations

import numba
import numpy as np

from gpuexec.kernels.cpu.threads import use_parallel

INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOATS = ("float32", "float64")


def _sum_dtype(dtype: np.dtype) -> np.dtype:
    if dtype.kind == "u":
        return np.dtype(np.uint64)
    if dtype.kind in "ib":
        return np.dtype(np.int64)
    return dtype


def _make_sum(parallel: bool):
    @numba.njit(parallel=parallel, cache=True, nogil=True)
    def kernel(offsets, content, out):
        n = offsets.shape[0] - 1
        for i in numba.prange(n):
            acc = out.dtype.type(0) if False else out[i]  # out pre-filled with zero
            for j in range(offsets[i], offsets[i + 1]):
                acc += content[j]
            out[i] = acc

    return kernel


_sum_serial, _sum_parallel = _make_sum(False), _make_sum(True)


def reduce_sum(offsets, content):
    out = np.zeros(offsets.shape[0] - 1, dtype=_sum_dtype(content.dtype))
    (_sum_parallel if use_parallel(content.shape[0]) else _sum_serial)(offsets, content, out)
    return out


def register(backend) -> None:
    for dt in INTS + FLOATS:
        backend.register("reduce_sum", (dt,), reduce_sum)
