"""The layout kernels the reductions' layout walker needs (carry, compact_offsets,
rebase_offsets, list_carry_index, local_to_global, missing_repeat, filter,
filter_missing), written with CuPy array operations so that every layout reduces on the
device. Same contract as gpuexec.kernels.cpu.indexing. They become portable sources with
split/fused variants in GPU engine part 2; until then they are counted in ``gk.stats()``
under ``cupy:<name>``.

Host synchronisation only where an output must be sized (the number of selected items)
or the contract returns a count to the host (n_bad).
"""

from __future__ import annotations

import numpy as np

from gpuexec.kernels.stats import record_kernel

_I64 = np.dtype(np.int64)


def register(backend) -> None:
    cp = backend.nplike

    def i64(a):
        a = backend.asarray(a)
        return a if a.dtype == _I64 else a.astype(_I64)

    def counted(name, fn):
        def run(*args):
            record_kernel(f"cupy:{name}")
            return fn(*args)
        run.__name__ = name
        return run

    def carry(values, index):
        return cp.take(backend.asarray(values), i64(index))

    def compact_offsets(starts, stops):
        starts, stops = i64(starts), i64(stops)
        out = cp.zeros(starts.shape[0] + 1, dtype=_I64)
        cp.cumsum(stops - starts, out=out[1:])
        return out

    def rebase_offsets(offsets):
        offsets = i64(offsets)
        n_bad = int((offsets[1:] < offsets[:-1]).sum()) if offsets.shape[0] > 1 else 0
        return offsets - offsets[0], n_bad

    def _owner(offsets, positions):
        """For each position, the list whose [offsets[i], offsets[i+1]) holds it."""
        return cp.searchsorted(offsets[1:], positions, side="right")

    def list_carry_index(starts, offsets):
        starts, offsets = i64(starts), i64(offsets)
        total = int(offsets[-1] - offsets[0])
        j = cp.arange(total, dtype=_I64) + offsets[0]
        i = _owner(offsets, j)
        return starts[i] + (j - offsets[i])

    def _gather(starts, stops, index_offsets, index, valid):
        starts, stops, index_offsets = i64(starts), i64(stops), i64(index_offsets)
        index = i64(index)
        lo = int(index_offsets[0])
        total = int(index_offsets[-1]) - lo
        j = cp.arange(total, dtype=_I64) + lo
        i = _owner(index_offsets, j)
        k = index[lo:lo + total]
        length = stops[i] - starts[i]
        k = cp.where(k < 0, k + length, k)
        bad = (k < 0) | (k >= length)
        if valid is not None:
            ok = backend.asarray(valid)[lo:lo + total].astype(bool)
            bad &= ok
            out = cp.where(bad | ~ok, -1, starts[i] + k)
        else:
            out = cp.where(bad, -1, starts[i] + k)
        return out.astype(_I64), int(bad.sum())

    def local_to_global(starts, stops, index_offsets, index):
        return _gather(starts, stops, index_offsets, index, None)

    def missing_repeat(starts, stops, index_offsets, index, valid):
        return _gather(starts, stops, index_offsets, index, valid)

    def _select(starts, mask_offsets, keep, value_of):
        starts, mask_offsets = i64(starts), i64(mask_offsets)
        lo, hi = int(mask_offsets[0]), int(mask_offsets[-1])
        keep = keep[lo:hi].astype(_I64)
        cs = cp.zeros(hi - lo + 1, dtype=_I64)
        cp.cumsum(keep, out=cs[1:])
        offsets = cs[mask_offsets - lo]
        j = cp.nonzero(keep)[0].astype(_I64) + lo
        i = _owner(mask_offsets, j)
        return offsets, value_of(i, j, starts, mask_offsets)

    def filter_(starts, stops, mask_offsets, mask):
        mask = backend.asarray(mask).astype(bool)
        return _select(starts, mask_offsets, mask,
                       lambda i, j, s, m: s[i] + (j - m[i]))

    def filter_missing(starts, stops, mask_offsets, mask, valid):
        mask = backend.asarray(mask).astype(bool)
        valid = backend.asarray(valid).astype(bool)
        keep = mask | ~valid
        return _select(starts, mask_offsets, keep,
                       lambda i, j, s, m: cp.where(valid[j], s[i] + (j - m[i]), -1))

    for dt in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float32", "float64", "bool"):
        backend.register("carry", (dt,), counted("carry", carry), count=False)
    for name, fn in (("compact_offsets", compact_offsets), ("rebase_offsets", rebase_offsets),
                     ("list_carry_index", list_carry_index), ("local_to_global", local_to_global),
                     ("missing_repeat", missing_repeat), ("filter", filter_),
                     ("filter_missing", filter_missing)):
        backend.register(name, (), counted(name, fn), count=False)
