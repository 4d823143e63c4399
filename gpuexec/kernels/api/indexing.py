"""Indexing, awkward-shaped: ``take`` (``array[index]``), ``filter`` (``array[mask]``)
and ``to_packed``.

``take`` runs natively for a 1-D integer index (carry across events), a jagged integer
index (per-list local indices, negative ones counting from the end) and an option-type
jagged index such as ``ak.argmax(x, axis=1, keepdims=True)`` (the per-list pick, None
where the index is None). ``filter`` selects inside lists with a jagged boolean mask
(option-typed masks keep None as None, like awkward) or across events with a 1-D one.
Records are carried lazily (an IndexedArray over the RecordArray, as awkward does), so
the fields of virtual NanoEvents collections are read only when used.

One deliberate difference from awkward: a jagged mask whose list i is shorter than list
i of the array raises (awkward silently treats it as an index); numpy and awkward both
reject masks of the wrong length everywhere else.
"""

from __future__ import annotations

import awkward as ak
import numpy as np

from gpuexec.kernels import layout as L
from gpuexec.kernels import validate
from gpuexec.kernels.api._common import NotNative, public, wrap
from gpuexec.kernels.memo import WeakMemo

C = ak.contents


def _getitem(array, index):
    """What awkward does for ``array[index]`` (the hand-off of ``take``)."""
    return ak.Array(array)[index]


def _masked(array, mask):
    """What awkward does for ``array[mask]`` (the hand-off of ``filter``)."""
    return ak.Array(array)[mask]


@public(_getitem)
def take(array, index, *, backend):
    """``array[index]`` for an integer index: 1-D (events), jagged (per list) or
    option-typed jagged (the pick behind ``x[ak.argmax(x, axis=1, keepdims=True)]``)."""
    layout = L.to_layout(array)
    idx = _index_layout(index)
    if _leaf_kind(idx) == "b":
        return wrap(_filter(layout, idx, backend, "index"), array)
    if idx.purelist_depth == 1:
        return wrap(_take_events(layout, idx, backend), array)
    regular = _regular_index(idx)
    if regular is not None:
        return wrap(_take_numpy_style(layout, idx.length, *regular, backend), array)
    if _plain_pick(layout, idx):
        return wrap(_pick_lists(layout, idx, backend), array)
    return wrap(_jagged(layout, idx, backend, "index", _pick), array)


@public(_masked)
def filter(array, mask, *, backend):  # noqa: A001 - awkward-shaped name
    """``array[mask]`` for a boolean mask: jagged (selection inside lists, option-typed
    masks keep None) or 1-D (selection of events)."""
    layout = L.to_layout(array)
    m = _index_layout(mask)
    kind = _leaf_kind(m)
    if kind not in ("b", None):
        raise validate.InvalidDtype(f"mask must be a boolean array, got dtype "
                                    f"{_leaf_dtype(m)}")
    return wrap(_filter(layout, m, backend, "mask"), array)


@public(ak.to_packed)
def to_packed(array, *, highlevel=True, behavior=None, attrs=None, backend):
    layout = L.to_layout(array)
    return wrap(L.packed(layout, backend), array, highlevel=highlevel, behavior=behavior,
                attrs=attrs)


# -- shared --------------------------------------------------------------------------------
def _index_layout(index):
    if isinstance(index, (int, np.integer, slice, str, tuple)) or index is None:
        raise NotNative(f"{type(index).__name__} index")
    layout = L.to_layout(index)
    if layout.minmax_depth[0] != layout.minmax_depth[1] or layout.is_record:
        raise NotNative("index is not a plain array of numbers")
    return layout


def _leaf(node):
    while not isinstance(node, (C.NumpyArray, C.EmptyArray)):
        if node.is_record or node.is_union or not hasattr(node, "content"):
            raise NotNative(f"{type(node).__name__} in the index")
        node = node.content
    return node


def _leaf_kind(node):
    leaf = _leaf(node)
    return None if isinstance(leaf, C.EmptyArray) else leaf.dtype.kind


def _leaf_dtype(node):
    leaf = _leaf(node)
    return "unknown" if isinstance(leaf, C.EmptyArray) else leaf.dtype


def _int64(values, name):
    validate.index_dtype(values, name)
    if values.dtype == np.int64:
        return values
    if values.dtype == np.uint64 and values.shape[0] and int(values.max()) > np.iinfo(np.int64).max:
        validate.index_range(values, np.iinfo(np.int64).max, name)
    return values.astype(np.int64)


def _flat_values(node, backend, name):
    """Values of a depth-1 index/mask without option type (EmptyArray: no entries)."""
    if node.is_option:
        raise NotNative(f"option-type 1-d {name}")
    if isinstance(node, C.EmptyArray):
        return backend.nplike.zeros(0, dtype=np.int64)
    return L.leaf_values(node, backend)


def _take_events(layout, idx, backend):
    """``array[index]`` with a 1-D integer index: carry across events."""
    values = _int64(_flat_values(idx, backend, "index"), "index")
    n = layout.length
    if validate.index_range(values, n, "index") < 0:
        values = backend.nplike.where(values < 0, values + n, values)
    return _events(layout, values, backend)


def _events(layout, index, backend):
    """``layout[index]`` across events. Lists of numbers come out packed (a gather of
    their contents, offsets from 0), not as awkward's lazy ListArray: same type and
    values, and later elementwise math on several such columns broadcasts on equal
    offsets without a kernel (awkward's ListArray path runs compact/broadcast kernels
    that its CUDA backend takes from cuda.compute). Other nodes are carried lazily."""
    if (isinstance(layout, (C.ListOffsetArray, C.ListArray)) and L.is_numbers(layout.content)
            and not L.is_stringlike(layout)):
        return L.packed(layout, backend, index)
    return L.carry(layout, index, backend)


def _filter(layout, mask, backend, name):
    if mask.purelist_depth == 1:
        values = _flat_values(mask, backend, name)
        if isinstance(mask, C.EmptyArray):
            values = values.astype(np.bool_)
        validate.mask_dtype(values, name)
        validate.same_length(layout.length, values.shape[0], name)
        return _events(layout, _rows(values, backend), backend)
    regular = _regular_index(mask)
    if regular is not None:
        return _filter_numpy_style(layout, mask.length, *regular, backend, name)
    return _jagged(layout, mask, backend, name, _select)


# mask buffer -> the rows it keeps: a processor filters every column of its events by one
# mask, and one rows object lets the columns share their selected lists (layout.packed)
_kept_rows = WeakMemo()


def _rows(mask_values, backend):
    """int64 positions of the True entries of a 1-D mask, once per mask buffer."""
    rows = _kept_rows.get(mask_values)
    if rows is None:
        # (nonzero gives int64 on numpy and CuPy: no copy)
        rows = backend.nplike.nonzero(mask_values)[0].astype(np.int64, copy=False)
        _kept_rows.put(rows, mask_values)
    return rows


# -- a regular index without missing values: numpy's advanced indexing (awkward's rule) ------
def _regular_index(idx):
    """(sizes, leaf) when ``idx`` is regular all the way down with no option node:
    awkward then indexes like numpy, not list by list."""
    node = idx
    if isinstance(node, C.NumpyArray) and len(node.inner_shape) != 0:
        node = node.to_RegularArray()
    sizes = []
    while isinstance(node, C.RegularArray):
        sizes.append(node.size)
        node = node.content
    if sizes and L.is_numbers(node):
        return sizes, node
    return None


def _take_numpy_style(layout, length, sizes, leaf, backend):
    """``x[idx]`` for an integer idx of shape (n, k, ...): rows of ``x`` gathered into
    that shape."""
    lengths = [length]
    for size in sizes:
        lengths.append(lengths[-1] * size)
    values = _int64(L.leaf_values(leaf, backend)[: lengths[-1]], "index")
    if validate.index_range(values, layout.length, "index") < 0:
        values = backend.nplike.where(values < 0, values + layout.length, values)
    out = L.carry(layout, values, backend)
    for size, n in zip(reversed(sizes), reversed(lengths[:-1])):
        out = C.RegularArray(out, size, zeros_length=n)
    return out


def _filter_numpy_style(layout, length, sizes, leaf, backend, name):
    """``x[mask]`` for a boolean mask of shape (n, k): numpy picks x[i][j] for every
    True at (i, j), a flat result."""
    if len(sizes) != 1:
        raise NotNative(f"regular {name} of more than two dimensions")
    k = sizes[0]
    values = L.leaf_values(leaf, backend)[: length * k]
    validate.mask_dtype(values, name)
    validate.same_length(layout.length, length, name)
    if layout.purelist_depth < 2:
        raise NotNative(f"{name} is deeper than the array")
    x = L.list_bounds(layout, backend)
    if x.valid is not None:
        raise NotNative("option-type array with a regular mask")
    mask_offsets = L.regular_offsets(length, k, backend)
    offsets, positions = backend.kernel("filter")(mask_offsets[:-1], mask_offsets[1:],
                                                  mask_offsets, values)
    local = positions % k if k else positions
    picked, n_bad = backend.kernel("local_to_global")(x.starts, x.stops, offsets, local)
    if n_bad:
        validate.jagged_index_failed(x.starts, x.stops, offsets, local, None, name)
    return L.carry(x.content, picked, backend)


# -- jagged index / mask: one list level at a time -------------------------------------------
def _jagged(node, idx, backend, name, leaf_fn):
    """``node[idx]`` for a jagged ``idx`` (ints or bools at its innermost level), by
    walking the list levels of both together. ``leaf_fn`` makes the innermost level."""
    if node.purelist_depth < idx.purelist_depth:
        raise NotNative(f"{name} is deeper than the array")
    x = L.list_bounds(node, backend)
    i = L.list_bounds(idx, backend, where=name)
    for lists in (x, i):
        if L.is_stringlike(lists.node):
            raise NotNative("string lists")
    validate.same_length(node.length, idx.length, name)
    xs, xt, xoff = x.starts, x.stops, x.offsets
    is_, it, ioff = i.starts, i.stops, i.offsets
    valid = x.valid if i.valid is None else (i.valid if x.valid is None else x.valid & i.valid)
    if valid is not None:  # rows that are None on either side are None in the result
        rows = backend.nplike.nonzero(valid)[0].astype(np.int64, copy=False)
        carry = backend.kernel("carry", "int64")
        xs, xt, is_, it = carry(xs, rows), carry(xt, rows), carry(is_, rows), carry(it, rows)
        xoff = ioff = None

    if i.content.purelist_depth == 1:
        out = leaf_fn(xs, xt, x.content, is_, it, ioff, i.content, backend, name)
    else:
        validate.same_list_lengths(xs, xt, is_, it, name)
        offsets, icontent = L.runs(is_, it, ioff, i.content, backend)
        _, xcontent = L.runs(xs, xt, xoff, x.content, backend)
        inner = _jagged(xcontent, icontent, backend, name, leaf_fn)
        out = C.ListOffsetArray(ak.index.Index64(offsets), inner)
    if valid is not None:
        out = C.IndexedOptionArray(ak.index.Index64(L.option_index(valid, backend)), out)
    return out


def _pick(xs, xt, xcontent, is_, it, ioff, icontent, backend, name):
    """Innermost level of a jagged integer index: local -> global positions."""
    return _picked(xcontent, *_pick_positions(xs, xt, is_, it, ioff, icontent, backend, name),
                   backend)


def _pick_positions(xs, xt, is_, it, ioff, icontent, backend, name):
    """(offsets of the result, positions in the array's content, valid or None) of a
    jagged integer index's innermost level; raises for an index out of its list."""
    offsets, icontent = L.runs(is_, it, ioff, icontent, backend)
    if isinstance(icontent, C.EmptyArray):  # lists of no type: nothing to pick
        values, valid = backend.nplike.zeros(0, dtype=np.int64), None
    else:
        values, valid = L.option_content(icontent, backend)
    values = _int64(values, name)
    if valid is None:
        positions, n_bad = backend.kernel("local_to_global")(xs, xt, offsets, values)
    else:
        positions, n_bad = backend.kernel("missing_repeat")(xs, xt, offsets, values, valid)
    if n_bad:
        validate.jagged_index_failed(xs, xt, offsets, values, valid, name)
    return offsets, positions, valid


def _picked(xcontent, offsets, positions, valid, backend):
    if valid is None:
        content = L.carry(xcontent, positions, backend)
    else:
        content = L.carry_option(xcontent, positions, backend)
    return C.ListOffsetArray(ak.index.Index64(offsets), content)


# (array offsets, index offsets, index values) -> what _pick_positions gave for them: a
# processor takes several columns of one collection (which share their offsets) at one
# index, such as the members of pairs; the positions, their kernel and its host sync (the
# count of bad indices) are then worked out once
_picks = WeakMemo()


def _plain_pick(layout, idx) -> bool:
    """Whether ``layout[idx]`` is a list-offset array at one level of integer index
    lists (no None, no strings): the case ``_pick_lists`` remembers."""
    return (isinstance(layout, C.ListOffsetArray) and isinstance(idx, C.ListOffsetArray)
            and isinstance(idx.content, C.NumpyArray) and idx.content.dtype.kind in "iu"
            and len(idx.content.inner_shape) == 0
            and not L.is_stringlike(layout) and not L.is_stringlike(idx))


def _pick_lists(layout, idx, backend):
    """``_jagged(layout, idx, ..., _pick)`` for ``_plain_pick``'s case, with the positions
    remembered per buffers."""
    buffers = (L.index64(backend, layout.offsets), L.index64(backend, idx.offsets),
               L.leaf_values(idx.content, backend))
    found = _picks.get(*buffers)
    if found is None:
        x = L.list_bounds(layout, backend)
        i = L.list_bounds(idx, backend, where="index")
        validate.same_length(layout.length, idx.length, "index")
        offsets, positions, valid = _pick_positions(x.starts, x.stops, i.starts, i.stops,
                                                    i.offsets, i.content, backend, "index")
        # the result's offsets are often the index's own: kept as "same", since a value
        # holding one of its keys would keep the entry alive for ever
        found = (None if offsets is buffers[1] else offsets, positions, valid)
        _picks.put(found, *buffers)
    else:  # the array's offsets against its own content (another may share them)
        validate.offsets(buffers[0], layout.content.length)
    offsets, positions, valid = found
    return _picked(layout.content, buffers[1] if offsets is None else offsets, positions,
                   valid, backend)


def _select(xs, xt, xcontent, ms, mt, moff, mcontent, backend, name):
    """Innermost level of a jagged boolean mask: selection inside each list."""
    validate.same_list_lengths(xs, xt, ms, mt, name)
    offsets, mcontent = L.runs(ms, mt, moff, mcontent, backend)
    if isinstance(mcontent, C.EmptyArray):  # lists of no type: nothing selected
        values, valid = backend.nplike.zeros(0, dtype=np.bool_), None
    else:
        values, valid = L.option_content(mcontent, backend)
    validate.mask_dtype(values, name)
    if valid is None:
        new_offsets, positions = backend.kernel("filter")(xs, xt, offsets, values)
        content = L.carry(xcontent, positions, backend)
    else:
        new_offsets, outindex = backend.kernel("filter_missing")(xs, xt, offsets, values, valid)
        content = L.carry_option(xcontent, outindex, backend)
    return C.ListOffsetArray(ak.index.Index64(new_offsets), content)
