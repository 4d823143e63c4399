"""Reductions: awkward's ``awkward_reduce_*`` kernels (offsets-based in awkward 2.14) as
adapters, and whole-reducer overloads (``Reducer.apply`` -> one engine reduction whose
output becomes the result, with no output array of awkward's to fill).

Result dtypes follow awkward's spec keys: integer sums accumulate in 64 bits and are cast
to the key's output dtype (a 32-bit accumulator wraps as awkward-cpp's does); a float64
output over float32 input (``ak.mean``'s sum) sums the widened values.
"""

from __future__ import annotations

import awkward as ak
import numpy as np

from gpuexec.awkward.adapters import serves

_INT64 = np.dtype(np.int64)


def _offsets(E, offsets, outlength):
    return E.i64(offsets[:outlength + 1])


def _engine_sum(E, content, offsets, out_dtype):
    if out_dtype.kind == "f" and content.dtype != out_dtype:
        content = content.astype(out_dtype)
    return E.call("reduce_sum", (content.dtype,), offsets, content)


@serves("awkward_reduce_sum")
def _sum(E, toptr, fromptr, offsets, outlength):
    offsets = _offsets(E, offsets, outlength)
    out = _engine_sum(E, fromptr, offsets, toptr.dtype)
    toptr[:outlength] = out.astype(toptr.dtype, copy=False)


def _count_true(E, toptr, fromptr, offsets, outlength):
    offsets = _offsets(E, offsets, outlength)
    out = E.call("reduce_sum_bool", (fromptr.dtype,), offsets, fromptr)
    toptr[:outlength] = out.astype(toptr.dtype, copy=False)


serves("awkward_reduce_sum_int64_bool_64")(_count_true)
serves("awkward_reduce_sum_int32_bool_64")(_count_true)


@serves("awkward_reduce_sum_bool")
def _sum_bool(E, toptr, fromptr, offsets, outlength):
    offsets = _offsets(E, offsets, outlength)
    toptr[:outlength] = E.call("reduce_any", (fromptr.dtype,), offsets, fromptr)


@serves("awkward_reduce_prod_bool")
def _prod_bool(E, toptr, fromptr, offsets, outlength):
    offsets = _offsets(E, offsets, outlength)
    toptr[:outlength] = E.call("reduce_all", (fromptr.dtype,), offsets, fromptr)


@serves("awkward_reduce_prod")
def _prod(E, toptr, fromptr, offsets, outlength):
    offsets = _offsets(E, offsets, outlength)
    content = fromptr
    if toptr.dtype.kind == "f" and content.dtype != toptr.dtype:
        content = content.astype(toptr.dtype)
    out = E.call("reduce_prod", (content.dtype,), offsets, content)
    toptr[:outlength] = out.astype(toptr.dtype, copy=False)


@serves("awkward_reduce_countnonzero")
def _countnonzero(E, toptr, fromptr, offsets, outlength):
    offsets = _offsets(E, offsets, outlength)
    toptr[:outlength] = E.call("reduce_countnonzero", (fromptr.dtype,), offsets, fromptr)


@serves("awkward_reduce_count_64")
def _count(E, toptr, offsets, outlength):
    toptr[:outlength] = E.call("reduce_count", (), _offsets(E, offsets, outlength))


def _extremum(kind):
    def reduce(E, toptr, fromptr, offsets, outlength, identity):
        offsets = _offsets(E, offsets, outlength)
        toptr[:outlength] = E.call(kind, (fromptr.dtype,), offsets, fromptr, identity)
    return reduce


serves("awkward_reduce_min")(_extremum("reduce_min"))
serves("awkward_reduce_max")(_extremum("reduce_max"))


def _global_arg(E, kind, fromptr, offsets):
    """awkward's arg-reduction result: the content position of the winner, -1 if empty."""
    local = E.call(kind, (fromptr.dtype,), offsets, fromptr)
    return E.xp.where(local >= 0, local + offsets[:-1], -1)


def _arg(kind):
    def reduce(E, toptr, fromptr, offsets, starts, outlength):
        offsets = _offsets(E, offsets, outlength)
        toptr[:outlength] = _global_arg(E, kind, fromptr, offsets)
    return reduce


serves("awkward_reduce_argmin")(_arg("reduce_argmin"))
serves("awkward_reduce_argmax")(_arg("reduce_argmax"))


@serves("awkward_NumpyArray_reduce_adjust_starts_64")
def _adjust_starts(E, toptr, outlength, offsets, starts):
    values = toptr[:outlength]
    toptr[:outlength] = E.xp.where(values >= 0, values - starts[:outlength], values)


@serves("awkward_NumpyArray_reduce_mask_ByteMaskedArray_64")
def _reduce_mask(E, toptr, offsets, outlength):
    offsets = offsets[:outlength + 1]
    toptr[:outlength] = (offsets[1:] - offsets[:-1] <= 0).astype(toptr.dtype)


@serves("awkward_ListOffsetArray_reduce_nonlocal_maxcount_offsetscopy_64")
def _maxcount_offsetscopy(E, maxcount, offsetscopy, offsets, length):
    offsets = offsets[:length + 1]
    counts = offsets[1:] - offsets[:-1]
    maxcount[0] = E.xp.maximum(counts.max(), 0) if length else 0
    offsetscopy[:length + 1] = offsets


@serves("awkward_ListOffsetArray_reduce_nonlocal_outstartsstops_64")
def _outstartsstops(E, outstarts, outstops, distincts, lendistincts, outlength):
    xp = E.xp
    if not (outlength > 0 and lendistincts > 0):
        outstarts[:outlength] = 0
        outstops[:outlength] = 0
        return
    maxcount = lendistincts // outlength
    nlists = -(-lendistincts // maxcount)
    starts = xp.arange(nlists, dtype=np.int64) * maxcount
    present = distincts[:lendistincts] != -1
    position = xp.where(present, xp.arange(lendistincts, dtype=np.int64) + 1, 0)
    padded = xp.zeros(nlists * maxcount, np.int64)
    padded[:lendistincts] = position
    last = padded.reshape(nlists, maxcount).max(axis=1)
    outstarts[:nlists] = starts
    outstops[:nlists] = xp.maximum(last, starts)


@serves("awkward_ListOffsetArray_reduce_nonlocal_preparenext_64")
def _nonlocal_preparenext(E, nextcarry, nextoffsets, nextlen, maxnextparents, distincts,
                          distinctslen, offsetscopy, offsets, length, outer_offsets,
                          outlength, maxcount):
    """Every element of the lists of each outer bin, regrouped by its position in its list
    (bin ``outer * maxcount + col``), rows in order within a bin."""
    xp = E.xp
    outer = E.i64(outer_offsets[:outlength + 1])
    lo, hi = (int(outer[0]), int(outer[-1])) if outlength else (0, 0)
    rows_off = E.i64(offsets[lo:hi + 1]) if hi > lo else xp.zeros(1, np.int64)
    col = E.call("local_index", (), rows_off)
    row = xp.repeat(xp.arange(lo, hi, dtype=np.int64), rows_off[1:] - rows_off[:-1])
    outer_bin = xp.searchsorted(outer[1:], row, side="right")
    nextbin = outer_bin * maxcount + col
    order = xp.argsort(nextbin * max(hi - lo, 1) + (row - lo))
    nextcarry[:order.shape[0]] = (rows_off[row - lo] - rows_off[0] + E.i64(offsets[lo:lo + 1])
                                  + col)[order] if order.shape[0] else order
    nbins = outlength * maxcount
    sorted_bins = nextbin[order]
    nextoffsets[:nbins + 1] = xp.searchsorted(sorted_bins, xp.arange(nbins + 1) - 0.5)
    distincts[:distinctslen] = -1
    used = xp.unique(sorted_bins)
    used = used[used < distinctslen]
    distincts[used] = used
    maxnextparents[0] = sorted_bins.max() if sorted_bins.shape[0] else -1


# -- whole-reducer overloads --------------------------------------------------------------

def _plain(array):
    return array.dtype.kind in "biuf"


def _engine_apply(E, reducer, array, offsets, starts, shifts, outlength):
    """The reducer's result from one engine call, or None to leave it to awkward."""
    name = reducer.name
    data = array.data
    off = _offsets(E, offsets.data, outlength)
    if name == "count":
        return E.call("reduce_count", (), off)
    if not _plain(array):
        return None
    if name == "count_nonzero":
        return E.call("reduce_countnonzero", (data.dtype,), off, data)
    if name == "sum":
        forced = getattr(reducer, "_dtype", None)
        if forced is not None and np.dtype(forced).kind != "f":
            return None
        if data.dtype == np.bool_:  # a count (ak.mean's forced float64: of that count)
            count = E.call("reduce_sum_bool", (data.dtype,), off, data)
            return count if forced is None else count.astype(forced)
        return _engine_sum(E, data, off, np.dtype(forced) if forced is not None else data.dtype)
    if name in ("any", "all"):
        return E.call(f"reduce_{name}", (data.dtype,), off, data)
    if name in ("min", "max"):
        if data.dtype == np.bool_:
            return E.call("reduce_all" if name == "min" else "reduce_any", (data.dtype,), off,
                          data)
        identity = reducer._identity_for(data.dtype)
        return E.call(f"reduce_{name}", (data.dtype,), off, data, identity)
    if name in ("argmin", "argmax"):
        result = ak.contents.NumpyArray(_global_arg(E, f"reduce_{name}", data, off),
                                        backend=array.backend)
        from awkward._reducers import apply_positional_corrections

        apply_positional_corrections(result, offsets, starts, shifts)
        return result
    return None


OVERLOADED = ("ArgMin", "ArgMax", "Count", "CountNonzero", "Sum", "Any", "All", "Min", "Max")
