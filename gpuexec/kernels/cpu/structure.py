"""Structural kernels (numba): in-list sorting, local indices, and the pair/triplet
building behind ``ak.combinations`` and ``ak.cartesian``.

Contract (every backend implements these names and signatures). ``offsets`` is
int64[n+1] into ``values`` and may start above 0; ``starts``/``stops`` are int64[n],
one list each, indexing into the list content (a ``ListOffsetArray`` passes
``offsets[:-1]``/``offsets[1:]``, a ``ListArray`` or a list gathered through an
``IndexedArray`` passes its own, so no compaction pass is needed). Outputs for list i
of an offsets-input start at ``offsets[i] - offsets[0]``. Dtype key ``(dtype,)`` for
``argsort``/``sort``, ``()`` for the others:

  local_index(offsets) -> int64[offsets[n] - offsets[0]]
      position of every element within its list.
  argsort(offsets, values, ascending) -> int64[offsets[n] - offsets[0]]
      in-list positions that sort each list, stable (equal values keep their order in
      both directions), NaN first in both directions (awkward's comparator:
      ``!isnan(r) && (isnan(l) || l < r)``, ``>`` for descending).
  sort(offsets, values, ascending) -> values.dtype[offsets[n] - offsets[0]]
      the values in the order ``argsort`` gives (bit-identical: -0.0/0.0 keep their
      order, NaN payloads move with their element).
  combinations(starts, stops, n, replacement, local) -> (offsets int64[len+1], idx_0, ..., idx_{n-1})
      n in {2, 3}: all n-tuples of positions a < b (< c) (a <= b (<= c) with
      replacement) of each list in lexicographic order, as awkward orders them;
      offsets start at 0; idx_k int64 content positions (starts[i] + a), or in-list
      positions (a) when ``local`` (``ak.argcombinations``).
  cartesian(starts_a, stops_a, starts_b, stops_b, local) -> (offsets int64[len+1], idx_a, idx_b)
      all pairs (a, b) of list i of the first and list i of the second array, a
      major; content positions, or in-list positions when ``local``.

CPU implementation: ``combinations``/``cartesian`` make one serial count pass (sizes ->
offsets) and one parallel fill pass. Lists of up to 16 elements are sorted by ranking
(branch-free counting), longer ones by a stable merge sort; integers narrower than 64
bits are sorted as int64 keys. Lists are spread over threads above
``threads.PARALLEL_THRESHOLD`` (``prange``) and each list is processed alone, so results
do not depend on the thread count.
"""

from __future__ import annotations


import numba
import numpy as np

from gpuexec.kernels.backend import ALL_DTYPES
from gpuexec.kernels.cpu.threads import pick, serial_and_parallel

#: lists up to this length are sorted by ranking (counting the elements that go
#: before each one); longer ones by a merge sort of runs insertion-sorted to this length
SHORT_MAX = 16
INSERTION_MAX = 16




@numba.njit(cache=True, nogil=True, inline="always")
def _before(a, b, ascending):
    """``a`` goes strictly before ``b``: NaN before every number, then the order.
    Branch-free (a select and bit operations): the ranking below runs it m*m times."""
    order = (a < b) if ascending else (a > b)
    return order | ((a != a) & (b == b))


# -- sorting one list ------------------------------------------------------------------
@numba.njit(cache=True, nogil=True, inline="always")
def _rank(values, s, m, k, ascending):
    """Final place of element k in its sorted list (stable): the elements that go
    before it, plus the equal ones that come earlier in the list."""
    v = values[s + k]
    r = 0
    for j in range(k):
        r += not _before(v, values[s + j], ascending)
    for j in range(k + 1, m):
        r += _before(values[s + j], v, ascending)
    return r


@numba.njit(cache=True, nogil=True)
def _argsort_short(values, s, m, out, o, ascending):
    # ranking by counting: m*m branch-free comparisons beat an insertion sort's
    # mispredicted branches on the short lists of HEP events
    for k in range(m):
        out[o + _rank(values, s, m, k, ascending)] = k


@numba.njit(cache=True, nogil=True)
def _argsort_long(values, s, m, out, o, ascending):
    # bottom-up merge sort of (key, position) pairs: contiguous keys keep the merges
    # in cache; a tie takes the left element first (stable)
    keys = values[s:s + m].copy()
    pos = np.arange(m)
    for lo in range(0, m, INSERTION_MAX):
        hi = min(lo + INSERTION_MAX, m)
        for k in range(lo + 1, hi):
            v = keys[k]
            p = pos[k]
            j = k
            while j > lo and _before(v, keys[j - 1], ascending):
                keys[j] = keys[j - 1]
                pos[j] = pos[j - 1]
                j -= 1
            keys[j] = v
            pos[j] = p
    src_k, src_p = keys, pos
    dst_k, dst_p = np.empty_like(keys), np.empty_like(pos)
    width = INSERTION_MAX
    while width < m:
        for lo in range(0, m, 2 * width):
            mid = min(lo + width, m)
            hi = min(lo + 2 * width, m)
            a, b, k = lo, mid, lo
            while a < mid and b < hi:
                if _before(src_k[b], src_k[a], ascending):
                    dst_k[k] = src_k[b]
                    dst_p[k] = src_p[b]
                    b += 1
                else:
                    dst_k[k] = src_k[a]
                    dst_p[k] = src_p[a]
                    a += 1
                k += 1
            while a < mid:
                dst_k[k] = src_k[a]
                dst_p[k] = src_p[a]
                a += 1
                k += 1
            while b < hi:
                dst_k[k] = src_k[b]
                dst_p[k] = src_p[b]
                b += 1
                k += 1
        src_k, dst_k = dst_k, src_k
        src_p, dst_p = dst_p, src_p
        width *= 2
    for k in range(m):
        out[o + k] = src_p[k]


@numba.njit(cache=True, nogil=True)
def _sort_short(values, s, m, out, o, ascending):
    for k in range(m):
        out[o + _rank(values, s, m, k, ascending)] = values[s + k]


@numba.njit(cache=True, nogil=True)
def _sort_long(values, s, m, out, o, ascending):
    # the argsort's stable order, gathered: the values come out with their own bits
    pos = np.empty(m, dtype=np.int64)
    _argsort_long(values, s, m, pos, 0, ascending)
    for k in range(m):
        out[o + k] = values[s + pos[k]]


# -- bodies (``numba.prange`` is a plain range in the serial variant) ------------------
def _sort_lists_body(offsets, values, ascending, out):
    # ``_short``/``_long`` sort one list: bound per kernel (argsort, sort) below
    base = offsets[0]
    for i in numba.prange(offsets.shape[0] - 1):
        s = offsets[i]
        m = offsets[i + 1] - s
        if m <= SHORT_MAX:
            _short(values, s, m, out, s - base, ascending)  # noqa: F821
        else:
            _long(values, s, m, out, s - base, ascending)  # noqa: F821


_argsort = serial_and_parallel(_sort_lists_body, name="_argsort",
                               _short=_argsort_short, _long=_argsort_long)
_sort = serial_and_parallel(_sort_lists_body, name="_sort",
                            _short=_sort_short, _long=_sort_long)


@serial_and_parallel
def _local_index(offsets, out):
    base = offsets[0]
    for i in numba.prange(offsets.shape[0] - 1):
        s = offsets[i]
        for k in range(offsets[i + 1] - s):
            out[s - base + k] = k


@numba.njit(cache=True, nogil=True)
def _n_choose(m, n, replacement):
    if replacement:
        m = m + n - 1
    if m < n:
        return 0
    if n == 2:
        return m * (m - 1) // 2
    return m * (m - 1) * (m - 2) // 6


@numba.njit(cache=True, nogil=True)
def _count(starts, stops, starts_b, stops_b, n, replacement, offsets):
    # serial scan over lists (a small fraction of the fill's work); -1: a list with
    # stop < start, which the API layer has already ruled out. Pairs of list i of both
    # arrays (cartesian) when starts_b is given, else its n-tuples (combinations).
    offsets[0] = 0
    acc = 0
    for i in range(starts.shape[0]):
        m = stops[i] - starts[i]
        if m < 0:
            return i
        if starts_b is None:
            acc += _n_choose(m, n, replacement)
        else:
            mb = stops_b[i] - starts_b[i]
            if mb < 0:
                return i
            acc += m * mb
        offsets[i + 1] = acc
    return -1


@numba.njit(cache=True, nogil=True)
def _list_span(starts, stops, local, i):
    """List i's length and the position its indices count from (0 when ``local``)."""
    s = starts[i]
    return stops[i] - s, 0 if local else s


@serial_and_parallel
def _tuples(starts, stops, replacement, local, offsets, i0, i1, i2):
    # pairs where i2 is None (numba drops the branch not taken for the argument's type)
    step = 0 if replacement else 1
    for i in numba.prange(starts.shape[0]):
        m, base = _list_span(starts, stops, local, i)
        k = offsets[i]
        for a in range(m):
            for b in range(a + step, m):
                if i2 is None:
                    i0[k] = base + a
                    i1[k] = base + b
                    k += 1
                else:
                    for c in range(b + step, m):
                        i0[k] = base + a
                        i1[k] = base + b
                        i2[k] = base + c
                        k += 1


@serial_and_parallel
def _cartesian(starts_a, stops_a, starts_b, stops_b, local, offsets, ia, ib):
    for i in numba.prange(starts_a.shape[0]):
        ma, base_a = _list_span(starts_a, stops_a, local, i)
        mb, base_b = _list_span(starts_b, stops_b, local, i)
        k = offsets[i]
        for a in range(ma):
            for b in range(mb):
                ia[k] = base_a + a
                ib[k] = base_b + b
                k += 1


# -- the contract ------------------------------------------------------------------------
def local_index(offsets):
    out = np.empty(int(offsets[-1] - offsets[0]), dtype=np.int64)
    pick(_local_index, out.shape[0])(offsets, out)
    return out


def _keys(values):
    """The values as one of the four key types the sorting kernels are compiled for:
    narrower integers (and bool) widen to int64, which keeps their order exactly and
    spares six compilations per kernel."""
    if values.dtype.kind in "iub" and values.dtype.itemsize < 8:
        return values.astype(np.int64)
    return values


def argsort(offsets, values, ascending):
    out = np.empty(int(offsets[-1] - offsets[0]), dtype=np.int64)
    pick(_argsort, out.shape[0])(offsets, _keys(values), bool(ascending), out)
    return out


def sort(offsets, values, ascending):
    keys = _keys(values)
    out = np.empty(int(offsets[-1] - offsets[0]), dtype=keys.dtype)
    pick(_sort, out.shape[0])(offsets, keys, bool(ascending), out)
    return out if keys is values else out.astype(values.dtype)


def _bad_list(i, what):
    raise ValueError(f"{what}: list {i} has stop < start")


def combinations(starts, stops, n, replacement, local):
    if n not in (2, 3):
        raise ValueError(f"combinations kernel builds pairs and triplets (n=2, 3), not n={n}")
    replacement, local = bool(replacement), bool(local)
    offsets = np.empty(starts.shape[0] + 1, dtype=np.int64)
    bad = _count(starts, stops, None, None, n, replacement, offsets)
    if bad >= 0:
        _bad_list(bad, "combinations: starts/stops")
    total = int(offsets[-1])
    idx = [np.empty(total, dtype=np.int64) for _ in range(n)]
    third = idx[2] if n == 3 else None
    pick(_tuples, total)(starts, stops, replacement, local, offsets, idx[0], idx[1], third)
    return (offsets, *idx)


def cartesian(starts_a, stops_a, starts_b, stops_b, local):
    if starts_a.shape[0] != starts_b.shape[0]:
        raise ValueError(f"cartesian: starts_a has {starts_a.shape[0]} lists, "
                         f"starts_b {starts_b.shape[0]}")
    offsets = np.empty(starts_a.shape[0] + 1, dtype=np.int64)
    bad = _count(starts_a, stops_a, starts_b, stops_b, 2, False, offsets)
    if bad >= 0:
        _bad_list(bad, "cartesian: starts/stops")
    total = int(offsets[-1])
    ia = np.empty(total, dtype=np.int64)
    ib = np.empty(total, dtype=np.int64)
    pick(_cartesian, total)(starts_a, stops_a, starts_b, stops_b, bool(local), offsets, ia, ib)
    return offsets, ia, ib


def register(backend) -> None:
    for dt in ALL_DTYPES:
        backend.register("argsort", (dt,), argsort)
        backend.register("sort", (dt,), sort)
    backend.register("local_index", (), local_index)
    backend.register("combinations", (), combinations)
    backend.register("cartesian", (), cartesian)
