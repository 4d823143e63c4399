"""Indexing kernels (numba): the gathers and list compactions behind ``x[index]``,
``x[jagged_bool]`` and ``ak.to_packed``.

Contract (every backend implements these names and signatures; all offsets, starts,
stops and indices are int64, masks and ``valid`` are bool; ``starts``/``stops`` have
one entry per list and index into the list content; ``index_offsets``/``mask_offsets``
are int64[n+1] into ``index``/``mask`` and may start above 0). Dtype key ``(dtype,)``
for ``carry``, ``()`` for the others:

  carry(values, index) -> values.dtype[len(index)]
      out[i] = values[index[i]]; every dtype incl. bool; index in range (checked by
      the caller).
  compact_offsets(starts, stops) -> int64[n+1]
      offsets of the lists packed one after another: 0, then the running sum of
      stops - starts.
  rebase_offsets(offsets) -> (int64[n+1], n_bad int64)
      offsets - offsets[0] (packing a sliced ListOffsetArray), and in the same pass
      n_bad = the number of positions where offsets decrease (the caller raises).
  offsets_summary(offsets, long_factor, long_floor) -> (n_down, longest, n_long, first, last)
      host ints, in one pass: the steps where offsets decrease, the longest list, the
      lists longer than max((last - first) * (long_factor / n), long_floor) (compared in
      float64), offsets[0] and offsets[n]. The API layer's offsets check
      (``validate.offsets``) asks for it: on a GPU one launch and one host read.
  list_carry_index(starts, offsets) -> int64[offsets[n] - offsets[0]]
      the content positions that gather the lists into one contiguous run:
      out[offsets[i] - offsets[0] + k] = starts[i] + k for k < offsets[i+1] - offsets[i].
  local_to_global(starts, stops, index_offsets, index) -> (int64[m], n_bad int64)
      per-list pick with local indices (m = index_offsets[n] - index_offsets[0]):
      k = index[j] (+ list length if negative) -> starts[i] + k. Out-of-range picks
      are counted in n_bad (their slot is -1); the caller raises if n_bad > 0.
  missing_repeat(starts, stops, index_offsets, index, valid) -> (int64[m], n_bad int64)
      as local_to_global, but picks with valid[j] == False give -1 (None): the
      IndexedOptionArray index of ``x[ak.argmax(x, axis=1, keepdims=True)]``.
  filter(starts, stops, mask_offsets, mask) -> (offsets int64[n+1], carry int64[k])
      selection inside lists (mask list i has the length of list i, checked by the
      caller): two passes, count then fill; carry holds content positions.
  filter_missing(starts, stops, mask_offsets, mask, valid) -> (offsets, outindex)
      as filter for an option-typed mask: entries with valid[j] == False are kept
      as None (outindex -1), like awkward.

Serial and parallel variants are compiled from one body; lists (or elements, for
``carry``) are spread over threads above ``threads.PARALLEL_THRESHOLD``. Each list is
processed in list order, so both variants give identical results.
"""

from __future__ import annotations


import numba
import numpy as np

from gpuexec.kernels.backend import ALL_DTYPES
from gpuexec.kernels.cpu.threads import pick, serial_and_parallel




@serial_and_parallel
def _carry(values, index, out):
    for i in numba.prange(index.shape[0]):
        out[i] = values[index[i]]


def _compact_serial_body(starts, stops, out, nthreads):
    acc = 0
    out[0] = 0
    for i in range(starts.shape[0]):
        acc += stops[i] - starts[i]
        out[i + 1] = acc


def _compact_parallel_body(starts, stops, out, nthreads):
    # one pass for chunk totals, a serial scan over the chunks, one
    # pass writing the offsets: each thread reads its own slice of starts/stops
    n = starts.shape[0]
    nchunks = max(1, min(n, 4 * nthreads))
    size = (n + nchunks - 1) // nchunks
    totals = np.zeros(nchunks + 1, dtype=np.int64)
    for c in numba.prange(nchunks):
        lo = c * size
        hi = min(lo + size, n)
        t = 0
        for i in range(lo, hi):
            t += stops[i] - starts[i]
        totals[c + 1] = t
    for c in range(nchunks):
        totals[c + 1] += totals[c]
    out[0] = 0
    for c in numba.prange(nchunks):
        lo = c * size
        hi = min(lo + size, n)
        acc = totals[c]
        for i in range(lo, hi):
            acc += stops[i] - starts[i]
            out[i + 1] = acc


@serial_and_parallel
def _rebase(offsets, out):
    first = offsets[0]
    n_bad = 0
    out[0] = 0
    for i in numba.prange(offsets.shape[0] - 1):
        out[i + 1] = offsets[i + 1] - first
        n_bad += np.int64(offsets[i + 1] < offsets[i])
    return n_bad


@serial_and_parallel
def _summary(offsets, bound):
    n_down = 0
    longest = 0
    n_long = 0
    for i in numba.prange(offsets.shape[0] - 1):
        length = offsets[i + 1] - offsets[i]
        n_down += np.int64(length < 0)
        longest = max(longest, length)
        n_long += np.int64(np.float64(length) > bound)
    return n_down, longest, n_long


def _scan_serial_body(a, nthreads):
    # a[0] == 0, a[1:] hold counts -> offsets (inclusive running sum)
    acc = a[0]
    for i in range(1, a.shape[0]):
        acc += a[i]
        a[i] = acc


def _scan_parallel_body(a, nthreads):
    # chunked two-pass scan: chunk totals in parallel, their running sum serially,
    # then each chunk scans from its base in parallel
    n = a.shape[0] - 1
    nchunks = min(n, 4 * nthreads)
    if nchunks <= 1:
        acc = a[0]
        for i in range(1, n + 1):
            acc += a[i]
            a[i] = acc
        return
    size = (n + nchunks - 1) // nchunks
    totals = np.zeros(nchunks + 1, dtype=np.int64)
    for c in numba.prange(nchunks):
        lo = 1 + c * size
        hi = min(lo + size, n + 1)
        s = 0
        for i in range(lo, hi):
            s += a[i]
        totals[c + 1] = s
    totals[0] = a[0]
    for c in range(nchunks):
        totals[c + 1] += totals[c]
    for c in numba.prange(nchunks):
        lo = 1 + c * size
        hi = min(lo + size, n + 1)
        acc = totals[c]
        for i in range(lo, hi):
            acc += a[i]
            a[i] = acc


@serial_and_parallel
def _list_carry_index(starts, offsets, out):
    base = offsets[0]
    for i in numba.prange(starts.shape[0]):
        s = starts[i]
        b = offsets[i] - base
        for k in range(offsets[i + 1] - offsets[i]):
            out[b + k] = s + k


@serial_and_parallel
def _local_picks(starts, stops, index_offsets, index, valid, out):
    # local_to_global where valid is None (numba drops that branch for the argument's type)
    base = index_offsets[0]
    n_bad = 0
    for i in numba.prange(starts.shape[0]):
        s = starts[i]
        length = stops[i] - s
        for j in range(index_offsets[i], index_offsets[i + 1]):
            if valid is not None:
                if not valid[j]:
                    out[j - base] = -1
                    continue
            k = index[j]
            if k < 0:
                k += length
            if k < 0 or k >= length:
                out[j - base] = -1
                n_bad += 1
            else:
                out[j - base] = s + k
    return n_bad


@serial_and_parallel
def _filter_count(mask_offsets, mask, valid, out):
    # filter where valid is None; filter_missing keeps the None entries too
    for i in numba.prange(mask_offsets.shape[0] - 1):
        c = 0
        for j in range(mask_offsets[i], mask_offsets[i + 1]):
            if valid is None:
                c += np.int64(mask[j])
            else:
                c += np.int64(mask[j] or not valid[j])
        out[i + 1] = c


@serial_and_parallel
def _filter_fill(starts, mask_offsets, mask, valid, offsets, carry):
    # branch-free on the (unpredictable) mask: every position is written at the
    # current slot, which only advances on True; the ``w < end`` guard keeps the
    # last, unselected positions out of the next list's slots (parallel writers).
    # filter_missing (valid not None) writes its None entries as -1
    for i in numba.prange(starts.shape[0]):
        w = offsets[i]
        end = offsets[i + 1]
        m0 = mask_offsets[i]
        s = starts[i]
        for k in range(mask_offsets[i + 1] - m0):
            if valid is None:
                if w < end:
                    carry[w] = s + k
                w += np.int64(mask[m0 + k])
            else:
                ok = valid[m0 + k]
                if w < end:
                    carry[w] = s + k if ok else -1
                w += np.int64(mask[m0 + k] or not ok)


_compact = (numba.njit(cache=True, nogil=True)(_compact_serial_body),
            numba.njit(cache=True, nogil=True, parallel=True)(_compact_parallel_body))
_scan = (numba.njit(cache=True, nogil=True)(_scan_serial_body),
         numba.njit(cache=True, nogil=True, parallel=True)(_scan_parallel_body))


def _scan_inplace(a):
    pick(_scan, a.shape[0])(a, numba.get_num_threads())


# -- the contract ------------------------------------------------------------------------
def carry(values, index):
    out = np.empty(index.shape[0], dtype=values.dtype)
    pick(_carry, index.shape[0])(values, index, out)
    return out


def compact_offsets(starts, stops):
    n = starts.shape[0]
    out = np.empty(n + 1, dtype=np.int64)
    pick(_compact, n)(starts, stops, out, numba.get_num_threads())
    return out


def rebase_offsets(offsets):
    out = np.empty(offsets.shape[0], dtype=np.int64)
    n_bad = pick(_rebase, offsets.shape[0])(offsets, out)
    return out, int(n_bad)


def long_bound(first, last, n, long_factor, long_floor) -> float:
    """max((last - first) * (long_factor / n), long_floor) as float64, the same operations
    in the same order as the GPU kernel's, so both backends count the same lists."""
    if n <= 0:
        return float(long_floor)
    return max(float(last - first) * (float(long_factor) / n), float(long_floor))


def offsets_summary(offsets, long_factor, long_floor):
    n = offsets.shape[0] - 1
    first, last = int(offsets[0]), int(offsets[n])
    bound = long_bound(first, last, n, long_factor, long_floor)
    n_down, longest, n_long = pick(_summary, n)(offsets, bound)
    return int(n_down), int(longest), int(n_long), first, last


def list_carry_index(starts, offsets):
    out = np.empty(int(offsets[-1] - offsets[0]), dtype=np.int64)
    pick(_list_carry_index, out.shape[0] + starts.shape[0])(starts, offsets, out)
    return out


def local_to_global(starts, stops, index_offsets, index):
    return missing_repeat(starts, stops, index_offsets, index, None)


def missing_repeat(starts, stops, index_offsets, index, valid):
    out = np.empty(int(index_offsets[-1] - index_offsets[0]), dtype=np.int64)
    n_bad = pick(_local_picks, out.shape[0] + starts.shape[0])(
        starts, stops, index_offsets, index, valid, out)
    return out, int(n_bad)


def filter(starts, stops, mask_offsets, mask):  # noqa: A001 - the contract's name
    return filter_missing(starts, stops, mask_offsets, mask, None)


def filter_missing(starts, stops, mask_offsets, mask, valid):
    n = starts.shape[0]
    work = int(mask_offsets[-1] - mask_offsets[0]) + n
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    pick(_filter_count, work)(mask_offsets, mask, valid, offsets)
    _scan_inplace(offsets)
    carry_index = np.empty(int(offsets[-1]), dtype=np.int64)
    pick(_filter_fill, work)(starts, mask_offsets, mask, valid, offsets, carry_index)
    return offsets, carry_index


def register(backend) -> None:
    for dt in ALL_DTYPES:
        backend.register("carry", (dt,), carry)
    for name, fn in (("compact_offsets", compact_offsets),
                     ("rebase_offsets", rebase_offsets),
                     ("offsets_summary", offsets_summary),
                     ("list_carry_index", list_carry_index),
                     ("local_to_global", local_to_global),
                     ("missing_repeat", missing_repeat),
                     ("filter", filter),
                     ("filter_missing", filter_missing)):
        backend.register(name, (), fn)
