"""Adapters from awkward's kernel specification to the engine: one function per spec name,
called with awkward's own arguments (``kernel-specification.yml``: outputs first, as
awkward allocates them, then inputs and lengths) and the engine context ``E``.

An adapter writes awkward's output arrays in place and returns None, as awkward-cpp's
kernels do; where the spec raises (an index out of range) it raises ValueError with the
spec's message. Jagged work (combinations, gathers of whole lists, local indices,
sorting) runs on the engine's buffer kernels (``gpuexec/kernels``); the rest is array
code over ``E.xp`` (numpy or CuPy), one pass over the buffers, no Python per element.
"""

from __future__ import annotations

import numpy as np

#: spec name -> adapter(E, *awkward's arguments)
ADAPTERS: dict = {}


def serves(name):
    def register(fn):
        ADAPTERS[name] = fn
        return fn
    return register


def _fail(E, bad, message):
    """Raise the spec's ValueError where ``bad`` (a 0-d boolean of E.xp) holds."""
    if bool(bad):
        raise ValueError(message)


def _exclusive_count(E, flags):
    """int64 running count of ``flags`` before each position, and the total (as a 0-d)."""
    xp = E.xp
    c = xp.cumsum(flags, dtype=np.int64)
    before = c - flags
    return before, (c[-1] if c.shape[0] else xp.zeros((), np.int64))


def _index(E, index, length, content_length):
    """``index[:length]``, an option index (negative: None) into a content of
    ``content_length``: the spec's ValueError where an entry reaches past it."""
    index = index[:length]
    if length:
        _fail(E, (index >= content_length).any(), "index out of range")
    return index


# -- option types (ByteMaskedArray, IndexedArray) ---------------------------------------

@serves("awkward_ByteMaskedArray_getitem_nextcarry")
def _bm_nextcarry(E, tocarry, mask, length, validwhen):
    keep = (mask[:length] != 0) == bool(validwhen)
    picked = E.xp.flatnonzero(keep)
    tocarry[:picked.shape[0]] = picked


@serves("awkward_ByteMaskedArray_numnull")
def _bm_numnull(E, numnull, mask, length, validwhen):
    numnull[0] = E.xp.count_nonzero((mask[:length] != 0) != bool(validwhen))


@serves("awkward_ByteMaskedArray_overlay_mask")
def _bm_overlay(E, tomask, theirmask, mymask, length, validwhen):
    mine = (mymask[:length] != 0) != bool(validwhen)
    tomask[:length] = ((theirmask[:length] != 0) | mine).astype(tomask.dtype)


@serves("awkward_ByteMaskedArray_toIndexedOptionArray")
def _bm_to_indexed(E, toindex, mask, length, validwhen):
    keep = (mask[:length] != 0) == bool(validwhen)
    toindex[:length] = E.xp.where(keep, E.xp.arange(length, dtype=toindex.dtype), -1)


@serves("awkward_IndexedArray_numnull")
def _ia_numnull(E, numnull, fromindex, lenindex):
    numnull[0] = E.xp.count_nonzero(fromindex[:lenindex] < 0)


@serves("awkward_IndexedArray_getitem_nextcarry")
def _ia_nextcarry(E, tocarry, fromindex, lenindex, lencontent):
    index = fromindex[:lenindex]
    if lenindex:
        _fail(E, ((index < 0) | (index >= lencontent)).any(), "index out of range")
    tocarry[:lenindex] = index


@serves("awkward_IndexedArray_flatten_nextcarry")
def _ia_flatten_nextcarry(E, tocarry, fromindex, lenindex, lencontent):
    index = _index(E, fromindex, lenindex, lencontent)
    picked = index[index >= 0]
    tocarry[:picked.shape[0]] = picked


@serves("awkward_IndexedArray_getitem_nextcarry_outindex")
def _ia_nextcarry_outindex(E, tocarry, toindex, fromindex, lenindex, lencontent):
    index = _index(E, fromindex, lenindex, lencontent)
    valid = index >= 0
    before, _ = _exclusive_count(E, valid)
    picked = index[valid]
    tocarry[:picked.shape[0]] = picked
    toindex[:lenindex] = E.xp.where(valid, before, -1)


@serves("awkward_IndexedArray_simplify")
def _ia_simplify(E, toindex, outerindex, outerlength, innerindex, innerlength):
    outer = _index(E, outerindex, outerlength, innerlength)
    valid = outer >= 0
    inner = innerindex[:innerlength].astype(np.int64)
    picked = inner[E.xp.where(valid, outer, 0)] if innerlength else E.xp.zeros_like(outer)
    toindex[:outerlength] = E.xp.where(valid, picked, -1)


@serves("awkward_IndexedArray_reduce_next_64")
def _ia_reduce_next(E, nextcarry, nextoffsets, outindex, index, offsets, outlength):
    xp = E.xp
    offsets = offsets[:outlength + 1]
    lo, hi = (int(offsets[0]), int(offsets[-1])) if outlength else (0, 0)
    part = index[lo:hi]
    valid = part >= 0
    before, _ = _exclusive_count(E, valid)
    picked = part[valid]
    nextcarry[:picked.shape[0]] = picked
    outindex[lo:hi] = xp.where(valid, before, -1)
    running = xp.concatenate([xp.zeros(1, np.int64), xp.cumsum(valid, dtype=np.int64)])
    nextoffsets[:outlength + 1] = running[offsets - lo]


@serves("awkward_IndexedArray_reduce_next_fix_offsets_64")
def _ia_fix_offsets(E, outoffsets, starts, startslength, outindexlength):
    outoffsets[:startslength] = starts[:startslength]
    outoffsets[startslength] = outindexlength


@serves("awkward_UnionArray_fillna")
def _union_fillna(E, toindex, fromindex, length):
    index = fromindex[:length]
    toindex[:length] = E.xp.where(index >= 0, index, 0)


@serves("awkward_UnionArray_simplify_one")
def _union_simplify_one(E, totags, toindex, fromtags, fromindex, towhich, fromwhich, length,
                        base):
    here = fromtags[:length] == fromwhich
    totags[:length] = E.xp.where(here, totags.dtype.type(towhich), totags[:length])
    toindex[:length] = E.xp.where(here, fromindex[:length] + base, toindex[:length])


@serves("awkward_UnionArray_nestedfill_tags_index")
def _union_nestedfill(E, totags, toindex, tmpstarts, tag, fromcounts, length):
    xp = E.xp
    counts = fromcounts[:length].astype(np.int64)
    starts = tmpstarts[:length].astype(np.int64)
    offsets = xp.concatenate([xp.zeros(1, np.int64), xp.cumsum(counts)])
    positions = E.call("list_carry_index", (), starts, offsets)
    totags[positions] = tag
    toindex[positions] = xp.arange(positions.shape[0], dtype=toindex.dtype)
    tmpstarts[:length] = starts + counts


# -- lists (ListArray, ListOffsetArray, RegularArray) -----------------------------------

@serves("awkward_ListArray_compact_offsets")
def _la_compact_offsets(E, tooffsets, fromstarts, fromstops, length):
    starts, stops = E.i64(fromstarts[:length]), E.i64(fromstops[:length])
    if length:
        _fail(E, (stops < starts).any(), "stops[i] < starts[i]")
    tooffsets[:length + 1] = E.call("compact_offsets", (), starts, stops)


@serves("awkward_ListArray_broadcast_tooffsets")
def _la_broadcast(E, tocarry, fromoffsets, offsetslength, fromstarts, fromstops, lencontent):
    n = offsetslength - 1
    offsets = E.i64(fromoffsets[:offsetslength])
    starts, stops = E.i64(fromstarts[:n]), E.i64(fromstops[:n])
    if n > 0:
        counts = offsets[1:] - offsets[:-1]
        _fail(E, ((starts != stops) & (stops > lencontent)).any(), "stops[i] > len(content)")
        _fail(E, (counts < 0).any(), "broadcast's offsets must be monotonically increasing")
        _fail(E, (stops - starts != counts).any(), "cannot broadcast nested list")
    carry = E.call("list_carry_index", (), starts, offsets)
    tocarry[:carry.shape[0]] = carry


@serves("awkward_ListArray_localindex")
def _la_localindex(E, toindex, offsets, length):
    offsets = E.i64(offsets[:length + 1])
    if length:
        lo = int(offsets[0])
        out = E.call("local_index", (), offsets)
        toindex[lo:lo + out.shape[0]] = out


def _binomial(E, size, n):
    """C(size, n) per list as awkward counts it (0 where n > size), int64."""
    xp = E.xp
    out = xp.ones_like(size)
    for j in range(1, n + 1):
        out = out * (size - j + 1) // j
    return xp.where(size < n, 0, out)


@serves("awkward_ListArray_combinations_length")
def _la_combinations_length(E, totallen, tooffsets, n, replacement, starts, stops, length):
    xp = E.xp
    size = E.i64(stops[:length]) - E.i64(starts[:length])
    if replacement:
        size = size + (n - 1)
    counts = _binomial(E, size, n)
    running = xp.concatenate([xp.zeros(1, np.int64), xp.cumsum(counts)])
    tooffsets[:length + 1] = running
    totallen[0] = running[-1]


@serves("awkward_ListArray_combinations")
def _la_combinations(E, tocarry, toindex, fromindex, n, replacement, starts, stops, length):
    """``tocarry`` holds the addresses of awkward's n output arrays (an intp array)."""
    starts, stops = E.i64(starts[:length]), E.i64(stops[:length])
    if n in (2, 3):
        _, *idx = E.call("combinations", (), starts, stops, n, bool(replacement), False)
    else:
        idx = _combinations_any_n(E, starts, stops, n, bool(replacement))
    for k, values in enumerate(idx):
        E.write_at(int(tocarry[k]), values)
    toindex[:n] = fromindex[:n] = 0


def _combinations_any_n(E, starts, stops, n, replacement):
    """n-tuples (n != 2, 3) in lexicographic order, as content positions, with array code:
    the tuples of list i are those of 0..size-1 shifted by starts[i]."""
    import itertools

    xp = E.xp
    sizes, first = E.host(stops - starts), E.host(starts)
    pick = itertools.combinations_with_replacement if replacement else itertools.combinations
    by_size = {}
    cols = [[] for _ in range(n)]
    for i, size in enumerate(sizes.tolist()):
        if size not in by_size:
            by_size[size] = np.array(list(pick(range(size), n)), dtype=np.int64).reshape(-1, n)
        local = by_size[size]
        for k in range(n):
            cols[k].append(local[:, k] + int(first[i]))
    return [xp.asarray(np.concatenate(c) if c else np.zeros(0, np.int64)) for c in cols]


@serves("awkward_ListArray_getitem_jagged_carrylen")
def _la_jagged_carrylen(E, carrylen, slicestarts, slicestops, sliceouterlen):
    n = sliceouterlen
    carrylen[0] = (E.i64(slicestops[:n]) - E.i64(slicestarts[:n])).sum() if n else 0


def _check_slice_lists(E, s_starts, s_stops, inner_length):
    """The spec's ValueErrors for a jagged slice's non-empty lists; returns which lists
    are non-empty."""
    used = s_starts != s_stops
    _fail(E, (used & (s_stops < s_starts)).any(), "jagged slice's stops[i] < starts[i]")
    _fail(E, (used & (s_stops > inner_length)).any(),
          "jagged slice's offsets extend beyond its content")
    return used


@serves("awkward_ListArray_getitem_jagged_apply")
def _la_jagged_apply(E, tooffsets, tocarry, slicestarts, slicestops, sliceouterlen, sliceindex,
                     sliceinnerlen, fromstarts, fromstops, contentlen):
    xp = E.xp
    n = sliceouterlen
    s_starts, s_stops = E.i64(slicestarts[:n]), E.i64(slicestops[:n])
    starts, stops = E.i64(fromstarts[:n]), E.i64(fromstops[:n])
    if n:
        used = _check_slice_lists(E, s_starts, s_stops, sliceinnerlen)
        _fail(E, (used & (stops < starts)).any(), "stops[i] < starts[i]")
        _fail(E, (used & (starts != stops) & (stops > contentlen)).any(),
              "stops[i] > len(content)")
    lengths = xp.where(s_starts != s_stops, s_stops - s_starts, 0)
    offsets = xp.concatenate([xp.zeros(1, np.int64), xp.cumsum(lengths)])
    index_pos = E.call("list_carry_index", (), s_starts, offsets)
    index = E.i64(sliceindex[index_pos]) if index_pos.shape[0] else xp.zeros(0, np.int64)
    carry, n_bad = E.call("local_to_global", (), starts, stops, offsets, index)
    if n_bad:
        raise ValueError("index out of range")
    tooffsets[:n + 1] = offsets
    tocarry[:carry.shape[0]] = carry


@serves("awkward_ListArray_getitem_jagged_numvalid")
def _la_jagged_numvalid(E, numvalid, slicestarts, slicestops, length, missing, missinglength):
    s_starts, s_stops = E.i64(slicestarts[:length]), E.i64(slicestops[:length])
    if length:
        _check_slice_lists(E, s_starts, s_stops, missinglength)
    positions = _ranges(E, s_starts, s_stops)[1]
    numvalid[0] = E.xp.count_nonzero(missing[positions] >= 0) if positions.shape[0] else 0


def _ranges(E, starts, stops):
    """(offsets, positions) of the ranges starts[i]..stops[i] (empty where equal)."""
    xp = E.xp
    lengths = xp.where(starts != stops, stops - starts, 0)
    offsets = xp.concatenate([xp.zeros(1, np.int64), xp.cumsum(lengths)])
    return offsets, E.call("list_carry_index", (), starts, offsets)


@serves("awkward_ListArray_getitem_jagged_shrink")
def _la_jagged_shrink(E, tocarry, tosmalloffsets, tolargeoffsets, slicestarts, slicestops,
                      length, missing):
    xp = E.xp
    s_starts, s_stops = E.i64(slicestarts[:length]), E.i64(slicestops[:length])
    large, positions = _ranges(E, s_starts, s_stops)
    valid = missing[positions] >= 0 if positions.shape[0] else xp.zeros(0, bool)
    kept = xp.concatenate([xp.zeros(1, np.int64), xp.cumsum(valid, dtype=np.int64)])
    first = s_starts[:1] if length else xp.zeros(1, np.int64)
    tocarry[:int(kept[-1])] = positions[valid]
    tosmalloffsets[:length + 1] = kept[large] + first
    tolargeoffsets[:length + 1] = xp.cumsum(
        xp.concatenate([first, s_stops - s_starts])) if length else first


@serves("awkward_MaskedArray_getitem_next_jagged_project")
def _ma_jagged_project(E, index, starts_in, stops_in, starts_out, stops_out, length):
    valid = index[:length] >= 0
    k = int(E.xp.count_nonzero(valid))
    starts_out[:k] = starts_in[:length][valid]
    stops_out[:k] = stops_in[:length][valid]


@serves("awkward_Content_getitem_next_missing_jagged_getmaskstartstop")
def _content_getmaskstartstop(E, index_in, offsets_in, mask_out, starts_out, stops_out, length):
    xp = E.xp
    valid = index_in[:length] >= 0
    before, _ = _exclusive_count(E, valid)
    starts_out[:length] = offsets_in[before]
    stops_out[:length] = offsets_in[before + valid]
    mask_out[:length] = xp.where(valid, xp.arange(length, dtype=np.int64), -1)


@serves("awkward_ListOffsetArray_rpad_length_axis1")
def _lo_rpad_length(E, tooffsets, fromoffsets, fromlength, target, tolength):
    xp = E.xp
    offsets = E.i64(fromoffsets[:fromlength + 1])
    longer = xp.maximum(offsets[1:] - offsets[:-1], target)
    running = xp.concatenate([xp.zeros(1, np.int64), xp.cumsum(longer)])
    tooffsets[:fromlength + 1] = running
    tolength[0] = running[-1]


@serves("awkward_ListOffsetArray_rpad_axis1")
def _lo_rpad(E, toindex, fromoffsets, fromlength, target):
    xp = E.xp
    offsets = E.i64(fromoffsets[:fromlength + 1])
    counts = offsets[1:] - offsets[:-1]
    padded = xp.maximum(counts, target)
    out_offsets = xp.concatenate([xp.zeros(1, np.int64), xp.cumsum(padded)])
    local = E.call("local_index", (), out_offsets)
    row = _rows(E, out_offsets)
    inside = local < counts[row]
    toindex[:local.shape[0]] = xp.where(inside, offsets[row] + local, -1)


def _rows(E, offsets):
    """The list of each position of ``offsets``' content."""
    xp = E.xp
    n = offsets.shape[0] - 1
    total = int(offsets[-1] - offsets[0]) if n >= 0 else 0
    return xp.searchsorted(offsets[1:], xp.arange(total, dtype=np.int64) + offsets[0],
                           side="right")


@serves("awkward_ListOffsetArray_rpad_and_clip_axis1")
def _lo_rpad_clip(E, toindex, fromoffsets, length, target):
    xp = E.xp
    offsets = E.i64(fromoffsets[:length + 1])
    counts = (offsets[1:] - offsets[:-1])[:, None]
    j = xp.arange(target, dtype=np.int64)[None, :]
    toindex[:length * target] = xp.where(j < counts, offsets[:-1, None] + j, -1).reshape(-1)


@serves("awkward_index_rpad_and_clip_axis1")
def _index_rpad_clip(E, tostarts, tostops, target, length):
    starts = E.xp.arange(length, dtype=np.int64) * target
    tostarts[:length] = starts
    tostops[:length] = starts + target


@serves("awkward_RegularArray_getitem_jagged_expand")
def _ra_jagged_expand(E, multistarts, multistops, singleoffsets, regularsize, regularlength):
    xp = E.xp
    offsets = singleoffsets[:regularsize + 1]
    total = regularsize * regularlength
    multistarts[:total] = xp.tile(offsets[:-1], regularlength)
    multistops[:total] = xp.tile(offsets[1:], regularlength)


@serves("awkward_RegularArray_getitem_carry")
def _ra_carry(E, tocarry, fromcarry, lencarry, size):
    xp = E.xp
    carry = fromcarry[:lencarry].astype(np.int64)[:, None] * size
    tocarry[:lencarry * size] = (carry + xp.arange(size, dtype=np.int64)[None, :]).reshape(-1)


@serves("awkward_RegularArray_getitem_next_at")
def _ra_next_at(E, tocarry, at, length, size):
    regular_at = at + size if at < 0 else at
    if not 0 <= regular_at < size:
        raise ValueError("index out of range")
    tocarry[:length] = E.xp.arange(length, dtype=np.int64) * size + regular_at


@serves("awkward_RegularArray_getitem_next_range")
def _ra_next_range(E, tocarry, regular_start, step, length, size, nextsize):
    xp = E.xp
    i = xp.arange(length, dtype=np.int64)[:, None] * size + regular_start
    tocarry[:length * nextsize] = (i + xp.arange(nextsize, dtype=np.int64)[None, :] * step
                                   ).reshape(-1)


@serves("awkward_RegularArray_getitem_next_array_regularize")
def _ra_next_array_regularize(E, toarray, fromarray, lenarray, size):
    values = fromarray[:lenarray].astype(np.int64)
    values = E.xp.where(values < 0, values + size, values)
    if lenarray:
        _fail(E, ((values < 0) | (values >= size)).any(), "index out of range")
    toarray[:lenarray] = values


@serves("awkward_RegularArray_getitem_next_array")
def _ra_next_array(E, tocarry, toadvanced, fromarray, length, lenarray, size):
    xp = E.xp
    arr = fromarray[:lenarray].astype(np.int64)[None, :]
    i = xp.arange(length, dtype=np.int64)[:, None]
    tocarry[:length * lenarray] = (i * size + arr).reshape(-1)
    toadvanced[:length * lenarray] = xp.tile(xp.arange(lenarray, dtype=np.int64), length)


@serves("awkward_missing_repeat")
def _missing_repeat(E, outindex, index, indexlength, repetitions, regularsize):
    xp = E.xp
    base = index[:indexlength].astype(np.int64)[None, :]
    i = xp.arange(repetitions, dtype=np.int64)[:, None]
    # awkward-cpp 2.14 keeps a missing entry's negative index (the spec's text says 0)
    outindex[:repetitions * indexlength] = xp.where(base >= 0, base + i * regularsize,
                                                    base).reshape(-1)


# -- sorting --------------------------------------------------------------------------

def _list_sorter(kernel):
    """The adapter of ``awkward_argsort``/``awkward_sort``: the engine's ``kernel`` of the
    same name over the lists, written at their own offsets."""

    def adapter(E, toptr, fromptr, length, offsets, offsetslength, ascending, stable):
        offsets = E.i64(offsets[:offsetslength])
        values = fromptr[:length]
        out = E.call(kernel, (values.dtype,), offsets, values, bool(ascending))
        lo = int(offsets[0]) if offsetslength else 0
        toptr[lo:lo + out.shape[0]] = out

    adapter.__name__ = adapter.__qualname__ = f"_{kernel}"
    return adapter


serves("awkward_argsort")(_list_sorter("argsort"))
serves("awkward_sort")(_list_sorter("sort"))
