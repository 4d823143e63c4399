"""Generated arguments for awkward's kernels, by the role of each argument in awkward's
``kernel-specification.yml`` (lengths, offsets, starts/stops, indices with -1 for None,
masks, identities), and the check of a served kernel against awkward-cpp's own on them.
Shared by tests/test_awkward_provider.py (CPU engine) and
tests/gpu/test_gpu_awkward_provider.py (CuPy)."""

from __future__ import annotations

import awkward_cpp
import numpy as np
from awkward._kernels import NumpyKernel

import gpuexec.awkward as gak

#: list counts of the generated cases: none, one, a few, many (with empty lists)
SIZES = (0, 1, 7, 60)
SEEDS = (0, 1)


def spec_keys(name):
    """Every dtype key awkward-cpp has for kernel ``name`` (the spec's specializations)."""
    return sorted((k for k in awkward_cpp.cpu_kernels.kernel if k[0] == name),
                  key=lambda k: tuple(np.dtype(t).name for t in k[1:]))


class Jagged:
    """A random jagged structure of ``n`` lists: counts, offsets, ListArray starts/stops
    (with gaps), content length, an option index over the lists (-1 for None)."""

    def __init__(self, rng, n, max_len=5):
        self.n = n
        self.counts = rng.integers(0, max_len + 1, n)
        if n:
            self.counts[rng.random(n) < 0.2] = 0
        self.offsets = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)
        gaps = rng.integers(0, 3, n)
        self.starts = (self.offsets[:-1] + np.cumsum(gaps)).astype(np.int64)
        self.stops = self.starts + self.counts
        self.content_len = int(self.stops[-1]) + 2 if n else 0
        self.total = int(self.offsets[-1])
        self.index = np.where(rng.random(n) < 0.3, -1, rng.integers(0, max(n, 1), n))
        self.present = np.abs(self.index)  # an index without None (unsigned index types)


def _t(key, i):
    return np.dtype(key[1 + i]).type


def _option(j, dtype):
    """The option index as ``dtype`` (without None where ``dtype`` is unsigned)."""
    return (j.present if np.dtype(dtype).kind == "u" else j.index).astype(dtype)


def _out(dtype, size, fill=77):
    return np.full(max(size, 1), fill, dtype=dtype)


def _values(rng, dtype, size):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(size) < 0.5
    if dtype.kind == "f":
        return (rng.standard_normal(size) * 50).round(1).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -50), min(info.max, 50) + 1, size).astype(dtype)


def _mask(rng, size):
    return (rng.random(size) < 0.6).astype(np.int8)


def _local_slice(rng, j, key_t):
    """A jagged slice over the lists of ``j``: per list some local indices (negative
    allowed), as (slicestarts, slicestops, sliceindex)."""
    counts = np.where(j.counts > 0, rng.integers(0, 4, j.n), 0)
    offs = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    index = np.concatenate([rng.integers(-c, c, k) for c, k in zip(j.counts, counts)]
                           ) if j.n else np.zeros(0)
    return offs[:-1].copy(), offs[1:].copy(), index.astype(key_t)


def build(name, key, rng, n):
    """Arguments for ``name`` (``key``'s dtypes) on ``n`` generated lists, in spec order."""
    j = Jagged(rng, n)
    t = lambda i: _t(key, i)  # noqa: E731
    b = _BUILDERS[name]
    return b(rng, j, t, key)


def _reduce(kind):
    def args(rng, j, t, key):
        content = _values(rng, t(1), j.total)
        out = _out(t(0), j.n)
        if kind == "identity":
            dt = np.dtype(t(0))
            low, high = (-np.inf, np.inf) if dt.kind == "f" else (np.iinfo(dt).min,
                                                                  np.iinfo(dt).max)
            return [out, content, j.offsets, j.n, dt.type(high if "min" in key[0] else low)]
        if kind == "arg":
            return [out, content, j.offsets, j.offsets[:-1].copy(), j.n]
        return [out, content, j.offsets, j.n]
    return args


def _jagged_apply(rng, j, t, key):
    s_starts, s_stops, index = _local_slice(rng, j, t(4))
    return [_out(t(0), j.n + 1), _out(t(1), len(index)), s_starts.astype(t(2)),
            s_stops.astype(t(3)), j.n, index, len(index), j.starts.astype(t(5)),
            j.stops.astype(t(6)), j.content_len]


def _missing_slice(rng, j):
    s_starts, s_stops, _ = _local_slice(rng, j, np.int64)
    m = int(s_stops[-1]) if j.n else 0
    missing = np.where(rng.random(m) < 0.3, -1, np.arange(m)).astype(np.int64)
    return s_starts, s_stops, missing


def _combinations_length(rng, j, t, key, n=2, repl=False):
    return [_out(t(0), 1), _out(t(1), j.n + 1), n, repl, j.starts.astype(t(2)),
            j.stops.astype(t(3)), j.n]


def _combinations(rng, j, t, key):
    """awkward's combinations call: ``tocarry`` holds the addresses of n int64 arrays."""
    n, replacement = int(rng.integers(2, 5)), bool(rng.integers(2))
    size = np.maximum(j.counts + (n - 1 if replacement else 0), 0)
    total = int(sum(_choose(int(s), n) for s in size))
    carry = [np.full(max(total, 1), 77, np.int64) for _ in range(n)]
    raw = np.array([c.ctypes.data for c in carry], dtype=np.intp)
    return [raw, np.zeros(n, t(1)), np.zeros(n, t(2)), n, replacement,
            j.starts.astype(t(3)), j.stops.astype(t(4)), j.n], carry


def _choose(size, n):
    import math

    return math.comb(size, n) if size >= n else 0


def _nonlocal(rng, j, t, key):
    outlength = max(j.n // 3, 1) if j.n else 0
    cuts = np.sort(rng.integers(0, j.n + 1, max(outlength - 1, 0)))
    outer = np.concatenate([[0], cuts, [j.n]]).astype(np.int64) if j.n else np.zeros(1, np.int64)
    maxcount = int(j.counts.max()) if j.n else 0
    nbins = outlength * maxcount
    return [_out(np.int64, j.total), _out(np.int64, nbins + 1), j.total, _out(np.int64, 1),
            _out(np.int64, nbins), nbins, j.offsets.copy(), j.offsets, j.n, outer, outlength,
            maxcount]


_BUILDERS = {
    "awkward_ByteMaskedArray_getitem_nextcarry":
        lambda r, j, t, k: [_out(t(0), j.n), _mask(r, j.n), j.n, bool(r.integers(2))],
    "awkward_ByteMaskedArray_numnull":
        lambda r, j, t, k: [_out(t(0), 1), _mask(r, j.n), j.n, bool(r.integers(2))],
    "awkward_ByteMaskedArray_overlay_mask":
        lambda r, j, t, k: [_out(t(0), j.n), _mask(r, j.n), _mask(r, j.n), j.n, True],
    "awkward_ByteMaskedArray_toIndexedOptionArray":
        lambda r, j, t, k: [_out(t(0), j.n), _mask(r, j.n), j.n, bool(r.integers(2))],
    "awkward_Content_getitem_next_missing_jagged_getmaskstartstop":
        lambda r, j, t, k: [j.index.astype(t(0)), j.offsets.astype(t(1)), _out(t(2), j.n),
                            _out(t(3), j.n), _out(t(4), j.n), j.n],
    "awkward_IndexedArray_flatten_nextcarry":
        lambda r, j, t, k: [_out(t(0), j.n), _option(j, t(1)), j.n, max(j.n, 1)],
    "awkward_IndexedArray_getitem_nextcarry":
        lambda r, j, t, k: [_out(t(0), j.n), np.abs(j.index).astype(t(1)), j.n, max(j.n, 1)],
    "awkward_IndexedArray_getitem_nextcarry_outindex":
        lambda r, j, t, k: [_out(t(0), j.n), _out(t(1), j.n), _option(j, t(2)), j.n,
                            max(j.n, 1)],
    "awkward_IndexedArray_numnull":
        lambda r, j, t, k: [_out(t(0), 1), j.index.astype(t(1)), j.n],
    "awkward_IndexedArray_reduce_next_64":
        lambda r, j, t, k: [_out(t(0), j.total), _out(t(1), j.n + 1), _out(t(2), j.total),
                            np.where(r.random(j.total) < 0.3, -1,
                                     r.integers(0, 9, j.total)).astype(t(3)), j.offsets, j.n],
    "awkward_IndexedArray_reduce_next_fix_offsets_64":
        lambda r, j, t, k: [_out(t(0), j.n + 1), j.starts.astype(t(1)), j.n, j.total],
    "awkward_IndexedArray_simplify":
        lambda r, j, t, k: [_out(t(0), j.n), _option(j, t(1)), j.n,
                            r.integers(-1, 20, max(j.n, 1)).astype(t(2)), max(j.n, 1)],
    "awkward_ListArray_broadcast_tooffsets":
        lambda r, j, t, k: [_out(t(0), j.total), j.offsets.astype(t(1)), j.n + 1,
                            j.starts.astype(t(2)), j.stops.astype(t(3)), j.content_len],
    "awkward_ListArray_combinations_length": _combinations_length,
    "awkward_ListArray_combinations": None,  # check_combinations
    "awkward_ListArray_compact_offsets":
        lambda r, j, t, k: [_out(t(0), j.n + 1), j.starts.astype(t(1)), j.stops.astype(t(2)),
                            j.n],
    "awkward_ListArray_getitem_jagged_apply": _jagged_apply,
    "awkward_ListArray_getitem_jagged_carrylen":
        lambda r, j, t, k: [_out(t(0), 1), j.starts.astype(t(1)), j.stops.astype(t(2)), j.n],
    "awkward_ListArray_getitem_jagged_numvalid":
        lambda r, j, t, k: (lambda s: [_out(t(0), 1), s[0].astype(t(1)), s[1].astype(t(2)),
                                       j.n, s[2].astype(t(3)), len(s[2])])(_missing_slice(r, j)),
    "awkward_ListArray_getitem_jagged_shrink":
        lambda r, j, t, k: (lambda s: [_out(t(0), len(s[2])), _out(t(1), j.n + 1),
                                       _out(t(2), j.n + 1), s[0].astype(t(3)),
                                       s[1].astype(t(4)), j.n, s[2].astype(t(5))]
                            )(_missing_slice(r, j)),
    "awkward_ListArray_localindex":
        lambda r, j, t, k: [_out(t(0), j.total), j.offsets.astype(t(1)), j.n],
    "awkward_ListOffsetArray_reduce_nonlocal_maxcount_offsetscopy_64":
        lambda r, j, t, k: [_out(t(0), 1), _out(t(1), j.n + 1), j.offsets, j.n],
    "awkward_ListOffsetArray_reduce_nonlocal_outstartsstops_64":
        lambda r, j, t, k: (lambda m, o: [_out(t(0), o), _out(t(1), o),
                                          np.where(r.random(m * o) < 0.4, -1,
                                                   np.arange(m * o)).astype(t(2)), m * o, o]
                            )(int(r.integers(1, 4)), j.n),
    "awkward_ListOffsetArray_reduce_nonlocal_preparenext_64": _nonlocal,
    "awkward_ListOffsetArray_rpad_and_clip_axis1":
        lambda r, j, t, k: [_out(t(0), j.n * 3), j.offsets.astype(t(1)), j.n, 3],
    "awkward_ListOffsetArray_rpad_axis1":
        lambda r, j, t, k: [_out(t(0), int(np.maximum(j.counts, 2).sum())),
                            j.offsets.astype(t(1)), j.n, 2],
    "awkward_ListOffsetArray_rpad_length_axis1":
        lambda r, j, t, k: [_out(t(0), j.n + 1), j.offsets.astype(t(1)), j.n, 3,
                            _out(t(2), 1)],
    "awkward_MaskedArray_getitem_next_jagged_project":
        lambda r, j, t, k: [j.index.astype(t(0)), j.starts.astype(t(1)), j.stops.astype(t(2)),
                            _out(t(3), j.n), _out(t(4), j.n), j.n],
    "awkward_NumpyArray_reduce_adjust_starts_64":
        lambda r, j, t, k: [r.integers(-1, 30, max(j.n, 1)).astype(t(0)), j.n, j.offsets,
                            j.starts.astype(t(2))],
    "awkward_NumpyArray_reduce_mask_ByteMaskedArray_64":
        lambda r, j, t, k: [_out(t(0), j.n), j.offsets, j.n],
    "awkward_RegularArray_getitem_carry":
        lambda r, j, t, k: [_out(t(0), j.n * 3), r.integers(0, 9, j.n).astype(t(1)), j.n, 3],
    "awkward_RegularArray_getitem_jagged_expand":
        lambda r, j, t, k: [_out(t(0), j.n * 4), _out(t(1), j.n * 4),
                            np.array([0, 2, 2, 5, 6], t(2)), 4, j.n],
    "awkward_RegularArray_getitem_next_array":
        lambda r, j, t, k: [_out(t(0), j.n * 3), _out(t(1), j.n * 3),
                            np.array([0, 2, 1], t(2)), j.n, 3, 4],
    "awkward_RegularArray_getitem_next_array_regularize":
        lambda r, j, t, k: [_out(t(0), j.n), r.integers(-4, 4, j.n).astype(t(1)), j.n, 4],
    "awkward_RegularArray_getitem_next_at":
        lambda r, j, t, k: [_out(t(0), j.n), int(r.integers(-3, 3)), j.n, 3],
    "awkward_RegularArray_getitem_next_range":
        lambda r, j, t, k: [_out(t(0), j.n * 2), 1, 2, j.n, 5, 2],
    "awkward_UnionArray_fillna":
        lambda r, j, t, k: [_out(t(0), j.n), j.index.astype(t(1)), j.n],
    "awkward_UnionArray_nestedfill_tags_index":
        lambda r, j, t, k: [np.zeros(2 * j.total + 1, t(0)), np.zeros(2 * j.total + 1, t(1)),
                            (2 * j.offsets[:-1]).astype(t(2)), 1, j.counts.astype(t(3)), j.n],
    "awkward_UnionArray_simplify_one":
        lambda r, j, t, k: [np.zeros(max(j.n, 1), t(0)), np.zeros(max(j.n, 1), t(1)),
                            r.integers(0, 3, j.n).astype(t(2)), r.integers(0, 9, j.n).astype(t(3)),
                            2, 1, j.n, 5],
    "awkward_index_rpad_and_clip_axis1":
        lambda r, j, t, k: [_out(t(0), j.n), _out(t(1), j.n), 3, j.n],
    "awkward_missing_repeat":
        lambda r, j, t, k: [_out(t(0), j.n * 3), j.index.astype(t(1)), j.n, 3, 4],
    "awkward_reduce_sum": _reduce("plain"),
    "awkward_reduce_prod": _reduce("plain"),
    "awkward_reduce_sum_bool": _reduce("plain"),
    "awkward_reduce_prod_bool": _reduce("plain"),
    "awkward_reduce_sum_int64_bool_64": _reduce("plain"),
    "awkward_reduce_sum_int32_bool_64": _reduce("plain"),
    "awkward_reduce_countnonzero": _reduce("plain"),
    "awkward_reduce_count_64": lambda r, j, t, k: [_out(t(0), j.n), j.offsets, j.n],
    "awkward_reduce_min": _reduce("identity"),
    "awkward_reduce_max": _reduce("identity"),
    "awkward_reduce_argmin": _reduce("arg"),
    "awkward_reduce_argmax": _reduce("arg"),
    "awkward_argsort":
        lambda r, j, t, k: [_out(t(0), j.total), _values(r, t(1), j.total), j.total,
                            j.offsets.astype(t(2)), j.n + 1, bool(r.integers(2)), True],
    "awkward_sort":
        lambda r, j, t, k: [_out(t(0), j.total), _values(r, t(1), j.total), j.total,
                            j.offsets.astype(t(2)), j.n + 1, bool(r.integers(2)), True],
}


def check_combinations(key, seed, n, provider, to_device=lambda a: a, to_host=np.asarray,
                       address=lambda a: a.ctypes.data):
    """``ListArray_combinations`` (outputs reached through addresses): the served kernel
    and awkward-cpp's fill their own carries from the same arguments."""
    args, expected = _combinations(np.random.default_rng([seed, n]), Jagged(
        np.random.default_rng([seed, n, 1]), n), lambda i: _t(key, i), key)
    error = NumpyKernel(awkward_cpp.cpu_kernels.kernel[key], key)(*args)
    assert error is None or error.str is None, error.str
    got = [to_device(np.full_like(c, 77)) for c in expected]
    served = [to_device(a.copy()) if isinstance(a, np.ndarray) else a for a in args]
    served[0] = to_device(np.array([address(c) for c in got], dtype=np.intp))
    provider.lookup(None, key)(*served)
    for k, (g, e) in enumerate(zip(got, expected)):
        provider.compare(key[0], f"carry {k}", to_host(g), e)


def served_keys():
    """(name, key) of every served name and every dtype key the spec lists for it."""
    return [(name, key) for name in gak.served_names() if name in _BUILDERS
            for key in spec_keys(name)]


def check(provider, key, args, to_device=lambda a: a, to_host=np.asarray, rtol=0.0):
    """Run the served kernel for ``key`` on ``args`` (moved with ``to_device``) and
    awkward-cpp's on host copies; every output must match."""
    expected = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    fn = awkward_cpp.cpu_kernels.kernel[key]
    error = NumpyKernel(fn, key)(*expected)
    assert error is None or error.str is None, f"generated arguments are invalid: {error.str}"
    got = [to_device(a.copy()) if isinstance(a, np.ndarray) else a for a in args]
    provider.lookup(None, key)(*got)
    for i, direction in enumerate(fn.dir):
        if direction == "out" and isinstance(args[i], np.ndarray):
            provider.compare(key[0], i, to_host(got[i]), expected[i]) if not rtol else (
                np.testing.assert_allclose(to_host(got[i]), expected[i], rtol=rtol))
