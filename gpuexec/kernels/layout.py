"""Layout <-> buffers: find the innermost lists of an awkward layout, hand their flat
buffers (int64 offsets + leaf values) to a kernel, and put the result back into the
same outer structure.

Outer structure that is preserved as it is: lists above the innermost list
(depth 3+ for ``axis=-1``), ``IndexedArray`` and option nodes above a list
(``events[cut].Muon.pt``). Inner structure that is resolved to flat buffers:
``ListArray``/``RegularArray`` (to offsets), ``IndexedArray`` under a list
(``events.Muon[mask].pt``) and virtual (lazily loaded) buffers.

Node-level helpers for the indexing functions (and anyone who gathers layouts):
``list_bounds`` (starts/stops of one list level below indexed/option nodes),
``option_content`` / ``skip_missing`` (option-type content inside lists), ``carry``
and ``carry_option`` (``node[index]``, lazily where awkward is lazy) and ``packed``.
Every buffer read here is checked by ``validate`` before a kernel sees it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import awkward as ak
import numpy as np

from gpuexec.kernels import validate
from gpuexec.kernels.memo import WeakMemo


class NotNative(Exception):
    """Raised inside an implementation when a layout/axis is outside what the engine
    runs natively; the public wrapper then hands the call to awkward and counts it."""

Content = ak.contents.Content
C = ak.contents


def to_layout(array) -> Content:
    if isinstance(array, Content):
        return array
    if isinstance(array, ak.Array):
        return array.layout  # ak.to_layout would format (and on a GPU read back) the data
    return ak.to_layout(array, allow_record=False, allow_unknown=False)


def posaxis(layout: Content, axis: int) -> int:
    """The non-negative axis, or NotNative if depth is ambiguous (branching records)."""
    mindepth, maxdepth = layout.minmax_depth
    if mindepth != maxdepth:
        raise NotNative("branching depth (records with lists of different depths)")
    if axis >= 0:
        return axis
    if axis + maxdepth < 0:
        raise np.exceptions.AxisError(f"axis={axis} exceeds the depth ({maxdepth}) of this array")
    return axis + maxdepth


def map_innermost_lists(node: Content, fn, backend):
    """Replace every innermost list node ``L`` (a list whose content has depth 1) by
    ``fn(L)``, which must return a node of the same length. Everything above is kept; an
    option node above an option-type result is merged with it into one
    IndexedOptionArray (awkward's result types), with nplike operations only, since
    awkward's own ``simplified`` needs kernels that have no device build everywhere."""
    if node.is_list:
        if node.content.purelist_depth == 1:
            return fn(node)
        return node.copy(content=map_innermost_lists(node.content, fn, backend))
    if node.is_indexed or node.is_option:
        return _rewrap(node, map_innermost_lists(node.content, fn, backend), backend)
    raise NotNative(f"{type(node).__name__} above the innermost list")


def _rewrap(node: Content, inner: Content, backend) -> Content:
    """``node`` (indexed or option) over the new ``inner``."""
    if not inner.is_option:
        return node.copy(content=inner)
    nplike = backend.nplike
    if isinstance(inner, C.IndexedOptionArray):
        inner_index = index64(backend, inner.index)
    else:  # ByteMaskedArray / BitMaskedArray / UnmaskedArray
        inner_index = nplike.where(option_valid(inner, backend),
                                   nplike.arange(inner.length, dtype=np.int64), -1)
    if isinstance(node, C.IndexedArray):  # not an option: a plain gather
        index = inner_index[index64(backend, node.index)]
    else:
        outer = (index64(backend, node.index) if isinstance(node, C.IndexedOptionArray)
                 else nplike.where(option_valid(node, backend),
                                   nplike.arange(node.length, dtype=np.int64), -1))
        index = nplike.where(outer >= 0, inner_index[nplike.maximum(outer, 0)], -1)
    return C.IndexedOptionArray(ak.index.Index64(index.astype(np.int64, copy=False)),
                                inner.content, parameters=node.parameters)


_STRING_PARAMETERS = frozenset(["string", "bytestring", "char", "byte"])


def is_stringlike(node: Content) -> bool:
    """Strings/bytestrings (the lists) and their characters: awkward's own business."""
    return node.parameter("__array__") in _STRING_PARAMETERS


def is_numbers(node: Content) -> bool:
    """A NumpyArray of plain numbers (one value per entry, no inner dimensions)."""
    return isinstance(node, C.NumpyArray) and len(node.inner_shape) == 0


def buffer(backend, data):
    """``data`` (an awkward Index/NumpyArray buffer, possibly virtual) as an array of
    ``backend``'s nplike."""
    return backend.asarray(data)


def index64(backend, index):
    """An awkward Index (possibly virtual) as an int64 nplike array."""
    data = buffer(backend, index.data)
    return data if data.dtype == np.int64 else data.astype(np.int64)


def _carry_buffer(backend, values, index):
    return backend.kernel("carry", values.dtype)(values, index)


def regular_offsets(n: int, size: int, backend):
    """int64[n+1] offsets of ``n`` lists of ``size`` entries (size may be 0)."""
    return backend.nplike.arange(n + 1, dtype=np.int64) * size


def list_offsets(node: Content, backend):
    """(offsets int64[n+1], content) of an innermost list node. ``content`` is the list's
    content node, sliced/carried so that ``offsets`` index into it. Offsets and
    starts/stops are validated against the content (``ValueError`` naming them)."""
    nplike = backend.nplike
    if isinstance(node, C.ListOffsetArray):
        offsets = index64(backend, node.offsets)
        validate.offsets(offsets, node.content.length)
        return offsets, node.content
    if isinstance(node, C.RegularArray):
        return regular_offsets(node.length, node.size, backend), node.content
    if isinstance(node, C.ListArray):
        starts, stops = index64(backend, node.starts), index64(backend, node.stops)
        validate.starts_stops(starts, stops, node.content.length)
        n = starts.shape[0]
        stops = stops[:n]
        if n == 0:
            return nplike.zeros(1, dtype=np.int64), node.content
        if bool((stops[:-1] == starts[1:]).all()):
            offsets = nplike.empty(n + 1, dtype=np.int64)
            offsets[:n] = starts
            offsets[n] = stops[n - 1]
            return offsets, node.content
        # Non-contiguous lists: gather their contents into one contiguous run.
        offsets = backend.kernel("compact_offsets")(starts, stops)
        positions = backend.kernel("list_carry_index")(starts, offsets)
        return offsets, carry(node.content, positions, backend)
    raise NotNative(f"{type(node).__name__} is not a list")


def leaf_values(node: Content, backend):
    """The flat values of a depth-1 non-option content (NumpyArray, or IndexedArray
    over one) as an nplike array."""
    if isinstance(node, C.NumpyArray):
        if len(node.inner_shape) != 0:
            raise NotNative("multidimensional NumpyArray content")
        return buffer(backend, node.data)
    if isinstance(node, C.IndexedArray):
        index = index64(backend, node.index)
        validate.indexed(index, node.content.length)
        values = leaf_values(node.content, backend)
        return _carry_buffer(backend, values, index)
    if isinstance(node, C.EmptyArray):
        return backend.nplike.zeros(0, dtype=np.float64)
    raise NotNative(f"{type(node).__name__} content")


# -- option-type content -------------------------------------------------------------------
def option_valid(node: Content, backend):
    """bool[len(node)]: which entries of an option node are not None."""
    nplike = backend.nplike
    n = node.length
    if isinstance(node, C.IndexedOptionArray):
        index = index64(backend, node.index)
        validate.indexed(index, node.content.length, "IndexedOptionArray index", option=True)
        return index >= 0
    if isinstance(node, C.ByteMaskedArray):
        mask = buffer(backend, node.mask.data)[:n]
        return (mask != 0) if node.valid_when else (mask == 0)
    if isinstance(node, C.BitMaskedArray):
        bits = nplike.unpackbits(buffer(backend, node.mask.data).view(np.uint8),
                                 bitorder="little" if node.lsb_order else "big")[:n]
        return (bits != 0) if node.valid_when else (bits == 0)
    if isinstance(node, C.UnmaskedArray):
        return nplike.ones(n, dtype=np.bool_)
    raise NotNative(f"{type(node).__name__} is not an option node")


def option_content(node: Content, backend):
    """(values, valid) of a depth-1 content that may be option-typed: ``values`` has
    one entry per position of ``node`` (entries at None positions are arbitrary) and
    ``valid`` is a bool array (True = not None), or None when ``node`` has no option
    node. Lets a per-list kernel skip Nones without changing the offsets."""
    if not node.is_option:
        return leaf_values(node, backend), None
    valid = option_valid(node, backend)
    n = node.length
    if isinstance(node, C.IndexedOptionArray):
        inner = leaf_values(node.content, backend)
        index = index64(backend, node.index)
        if inner.shape[0] == 0:  # every entry is None
            return backend.nplike.zeros(n, dtype=inner.dtype), valid
        safe = backend.nplike.where(valid, index, 0)
        return _carry_buffer(backend, inner, safe), valid
    return leaf_values(node.content, backend)[:n], valid


def skip_missing(offsets, content: Content, backend):
    """(offsets', values, positions) of lists ``offsets`` over a depth-1, possibly
    option-typed ``content`` with the Nones dropped (what awkward's reductions see):
    ``offsets'`` start at 0 and ``positions`` are the content positions of the kept
    values; without option content this is ``(offsets, leaf_values(content), None)``."""
    values, valid = option_content(content, backend)
    if valid is None:
        return offsets, values, None
    new_offsets, positions = backend.kernel("filter")(offsets[:-1], offsets[1:], offsets, valid)
    return new_offsets, _carry_buffer(backend, values, positions), positions


# -- one list level below indexed/option nodes --------------------------------------------
class Lists(NamedTuple):
    """One level of lists seen through the IndexedArray/option nodes above it."""

    starts: Any           #: int64[n], positions in ``content``
    stops: Any            #: int64[n]
    content: Content      #: the list node's content
    valid: Any            #: bool[n] (None rows of option nodes above) or None
    offsets: Any          #: int64[n+1] when the lists are one contiguous run, else None
    node: Content         #: the list node itself (ListOffsetArray/ListArray/RegularArray)


def list_bounds(node: Content, backend, where=None) -> Lists:
    """The lists of ``node`` (a list node, possibly below IndexedArray/option nodes) as
    validated starts/stops into the list node's content. ``where`` names the argument
    in error messages ("mask: offsets are not ...")."""
    if where is None:
        return _list_bounds(node, backend)
    try:
        return _list_bounds(node, backend)
    except ValueError as err:
        raise type(err)(f"{where}: {err}") from None


def _list_bounds(node: Content, backend) -> Lists:
    nplike = backend.nplike
    if isinstance(node, (C.ListOffsetArray, C.ListArray, C.RegularArray)):
        if isinstance(node, C.ListOffsetArray):
            offsets = index64(backend, node.offsets)
            validate.offsets(offsets, node.content.length)
            starts, stops = offsets[:-1], offsets[1:]
        elif isinstance(node, C.RegularArray):
            offsets = regular_offsets(node.length, node.size, backend)
            starts, stops = offsets[:-1], offsets[1:]
        else:
            starts, stops = index64(backend, node.starts), index64(backend, node.stops)
            validate.starts_stops(starts, stops, node.content.length)
            stops = stops[: starts.shape[0]]
            offsets = None
        return Lists(starts, stops, node.content, None, offsets, node)
    if isinstance(node, C.IndexedArray):
        index = index64(backend, node.index)
        validate.indexed(index, node.content.length)
        inner = _list_bounds(node.content, backend)
        return _carried_lists(inner, index, None, backend)
    if node.is_option:
        valid = option_valid(node, backend)
        inner = _list_bounds(node.content, backend)
        if isinstance(node, C.IndexedOptionArray):
            if node.content.length == 0:
                zeros = nplike.zeros(node.length, dtype=np.int64)
                return Lists(zeros, zeros, inner.content, valid, None, inner.node)
            index = nplike.where(valid, index64(backend, node.index), 0)
            return _carried_lists(inner, index, valid, backend)
        n = node.length
        if inner.valid is not None:
            valid = valid & inner.valid[:n]
        offsets = None if inner.offsets is None else inner.offsets[: n + 1]
        return Lists(inner.starts[:n], inner.stops[:n], inner.content, valid, offsets, inner.node)
    raise NotNative(f"{type(node).__name__} is not a list")


def _carried_lists(inner: Lists, index, valid, backend) -> Lists:
    starts = _carry_buffer(backend, inner.starts, index)
    stops = _carry_buffer(backend, inner.stops, index)
    if inner.valid is not None:
        inner_valid = _carry_buffer(backend, inner.valid, index)
        valid = inner_valid if valid is None else valid & inner_valid
    return Lists(starts, stops, inner.content, valid, None, inner.node)


def first_offset(offsets) -> int:
    """offsets[0]: remembered by the offsets check where it checked this buffer (on a GPU
    each read of an entry is a host sync), else read."""
    ends = validate.ends(offsets)
    return int(offsets[0]) if ends is None else ends[0]


def runs(starts, stops, offsets, content: Content, backend):
    """(offsets int64[n+1] from 0, content') with the lists [starts, stops) of
    ``content`` laid one after another in ``content'``, which holds exactly
    ``offsets[-1]`` entries (callers need not cut it: on a GPU reading that length is a
    host sync); ``offsets`` (the lists' own offsets, when they are already one run)
    avoids any gather."""
    if starts.shape[0] == 0:
        return backend.nplike.zeros(1, dtype=np.int64), content[0:0]
    if offsets is not None:
        # checked offsets: their ends were read with the check
        first, last = validate.ends(offsets) or (int(offsets[0]), int(offsets[-1]))
        if first == 0:
            return offsets, content[:last]
        return backend.kernel("rebase_offsets")(offsets)[0], content[first:last]
    new_offsets, positions = _compacted(starts, stops, backend)
    return new_offsets, carry(content, positions, backend)


def _compacted(starts, stops, backend):
    """(offsets from 0, positions in the content) of the lists [starts, stops) laid one
    after another."""
    if starts.shape[0] == 0:
        return (backend.nplike.zeros(1, dtype=np.int64),
                backend.nplike.zeros(0, dtype=np.int64))
    new_offsets = backend.kernel("compact_offsets")(starts, stops)
    return new_offsets, backend.kernel("list_carry_index")(starts, new_offsets)


def option_index(valid, backend):
    """IndexedOptionArray index that spreads the rows kept by ``valid`` back out: the
    k-th True becomes k, every False becomes -1."""
    nplike = backend.nplike
    return nplike.where(valid, nplike.cumsum(valid, dtype=np.int64) - 1, -1)


# -- node[index] -----------------------------------------------------------------------------
def carry(node: Content, index, backend) -> Content:
    """``node[index]`` for an int64 ``index`` of in-range, non-negative positions.
    Numbers are gathered at once; lists carry their starts/stops, records and other
    nodes get an IndexedArray (lazy, as awkward does, so virtual fields stay unread)."""
    nplike = backend.nplike
    params = node.parameters
    if is_numbers(node):
        return C.NumpyArray(_carry_buffer(backend, buffer(backend, node.data), index),
                            parameters=params)
    if isinstance(node, (C.IndexedArray, C.IndexedOptionArray)):
        inner = _carry_buffer(backend, index64(backend, node.index), index)
        return type(node)(ak.index.Index64(inner), node.content, parameters=params)
    if isinstance(node, (C.ListOffsetArray, C.ListArray)):
        lists = list_bounds(node, backend)
        return C.ListArray(ak.index.Index64(_carry_buffer(backend, lists.starts, index)),
                           ak.index.Index64(_carry_buffer(backend, lists.stops, index)),
                           node.content, parameters=params)
    if isinstance(node, C.ByteMaskedArray):
        mask = _carry_buffer(backend, buffer(backend, node.mask.data), index)
        return C.ByteMaskedArray(ak.index.Index8(mask), carry(node.content, index, backend),
                                 valid_when=node.valid_when, parameters=params)
    if isinstance(node, C.UnmaskedArray):
        return C.UnmaskedArray(carry(node.content, index, backend), parameters=params)
    if isinstance(node, C.BitMaskedArray):
        valid = _carry_buffer(backend, option_valid(node, backend), index)
        return C.IndexedOptionArray(ak.index.Index64(nplike.where(valid, index, -1)),
                                    node.content, parameters=params)
    if isinstance(node, C.UnionArray):
        raise NotNative("UnionArray content")
    if isinstance(node, C.EmptyArray):  # nothing to pick from: index is empty
        return node
    return C.IndexedArray(ak.index.Index64(index), node)


def carry_option(node: Content, outindex, backend) -> Content:
    """``node[outindex]`` as an option node, -1 in ``outindex`` giving None (what a
    pick with an option-type index or a filter with an option-type mask returns)."""
    nplike = backend.nplike
    params = node.parameters
    if isinstance(node, C.UnionArray):
        raise NotNative("UnionArray content")
    if node.is_option or node.is_indexed:
        if node.length == 0:  # every pick is None (checked by the kernel)
            return C.IndexedOptionArray(ak.index.Index64(outindex), node.content,
                                        parameters=params)
        picked = outindex >= 0
        safe = nplike.where(picked, outindex, 0)
        if node.is_indexed or isinstance(node, C.IndexedOptionArray):
            inner = _carry_buffer(backend, index64(backend, node.index), safe)
            composed = nplike.where(picked, inner, -1)
        else:
            valid = _carry_buffer(backend, option_valid(node, backend), safe)
            composed = nplike.where(picked & valid, outindex, -1)
        return C.IndexedOptionArray(ak.index.Index64(composed), node.content, parameters=params)
    return C.IndexedOptionArray(ak.index.Index64(outindex), node)


# -- ak.to_packed --------------------------------------------------------------------------
def packed(node: Content, backend, index=None) -> Content:
    """``ak.to_packed(node)`` (or of ``node[index]`` when ``index`` is given): every
    buffer holds exactly the reachable entries, offsets start at 0."""
    nplike = backend.nplike
    params = node.parameters
    n = node.length if index is None else index.shape[0]
    if isinstance(node, C.NumpyArray):
        data = buffer(backend, node.data)
        if index is not None:
            if len(node.inner_shape) != 0:
                raise NotNative("multidimensional NumpyArray")
            return C.NumpyArray(_carry_buffer(backend, data, index), parameters=params)
        return C.NumpyArray(nplike.ascontiguousarray(data[:n]), parameters=params)
    if isinstance(node, C.EmptyArray):
        return node
    if isinstance(node, C.ListOffsetArray) and index is None:
        # the common case (a sliced array): the check reads both ends with its answer
        offsets = index64(backend, node.offsets)
        first, last = validate.offsets(offsets, node.content.length)
        new_offsets = offsets if first == 0 else backend.kernel("rebase_offsets")(offsets)[0]
        return C.ListOffsetArray(ak.index.Index64(new_offsets),
                                 packed(node.content[first:last], backend), parameters=params)
    if isinstance(node, (C.ListOffsetArray, C.ListArray, C.RegularArray)):
        if index is not None and not isinstance(node, C.RegularArray):
            new_offsets, positions = _selected_lists(node, index, backend)
            content = packed(carry(node.content, positions, backend), backend)
            return C.ListOffsetArray(ak.index.Index64(new_offsets), content, parameters=params)
        lists = list_bounds(node, backend)
        starts, stops, offsets = lists.starts, lists.stops, lists.offsets
        if index is not None:  # regular lists
            content = packed(node.content, backend, _regular_positions(index, node.size, backend))
            return C.RegularArray(content, node.size, zeros_length=n, parameters=params)
        if isinstance(node, C.RegularArray):
            return C.RegularArray(packed(node.content[: n * node.size], backend), node.size,
                                  zeros_length=n, parameters=params)
        new_offsets, content = runs(starts, stops, offsets, node.content, backend)
        content = packed(content, backend)
        return C.ListOffsetArray(ak.index.Index64(new_offsets), content, parameters=params)
    if isinstance(node, C.IndexedArray):
        inner = index64(backend, node.index)
        validate.indexed(inner, node.content.length)
        if index is not None:
            inner = _carry_buffer(backend, inner, index)
        return _with_params(packed(node.content, backend, inner), params)
    if isinstance(node, C.IndexedOptionArray):
        inner = index64(backend, node.index)
        validate.indexed(inner, node.content.length, "IndexedOptionArray index", option=True)
        if index is not None:
            inner = _carry_buffer(backend, inner, index)
        valid = inner >= 0
        content = packed(node.content, backend, inner[valid])
        return C.IndexedOptionArray(ak.index.Index64(option_index(valid, backend)), content,
                                    parameters=params)
    if isinstance(node, C.ByteMaskedArray):
        mask = buffer(backend, node.mask.data)
        mask = mask[:n] if index is None else _carry_buffer(backend, mask, index)
        content = node.content[:n] if index is None else node.content
        return C.ByteMaskedArray(ak.index.Index8(nplike.ascontiguousarray(mask)),
                                 packed(content, backend, index), valid_when=node.valid_when,
                                 parameters=params)
    if isinstance(node, C.UnmaskedArray):
        content = node.content[:n] if index is None else node.content
        return C.UnmaskedArray(packed(content, backend, index), parameters=params)
    if isinstance(node, C.RecordArray):
        fields = [packed(node.content(i) if index is None else node.contents[i], backend, index)
                  for i in range(len(node.contents))]
        return C.RecordArray(fields, None if node.is_tuple else node.fields, length=n,
                             parameters=params)
    raise NotNative(f"{type(node).__name__} in to_packed")


# (a list node's own buffers, a row index) -> the selected lists' offsets and positions
_selections = WeakMemo()


def _selected_lists(node: Content, index, backend):
    """(offsets from 0, positions in ``node``'s content) of the lists ``node[index]``
    (a ListOffsetArray or ListArray). Remembered per (the node's offsets or starts and
    stops, the index): the columns of one collection share their offsets, so the rows
    an event selection keeps are laid out once for all of them, and their results share
    one offsets buffer (later element-wise work compares them by identity, and the
    offsets check runs once)."""
    # checked on every call (a buffer shared with a shorter content must still fail; a
    # checked offsets buffer is remembered, validate.offsets)
    lists = list_bounds(node, backend)
    own = ((node.offsets.data,) if isinstance(node, C.ListOffsetArray)
           else (node.starts.data, node.stops.data))
    found = _selections.get(*own, index)
    if found is None:
        found = _compacted(_carry_buffer(backend, lists.starts, index),
                           _carry_buffer(backend, lists.stops, index), backend)
        _selections.put(found, *own, index)
    return found


def _regular_positions(index, size, backend):
    offsets = regular_offsets(index.shape[0], size, backend)
    return backend.kernel("list_carry_index")(index * size, offsets)


def _with_params(node: Content, params) -> Content:
    if not params:
        return node
    return node.copy(parameters={**node.parameters, **params})


# -- contiguous lists over numbers: element-wise work on the flat values --------------------
class Structure(NamedTuple):
    """Contiguous lists over plain numbers, taken apart (``list_structure``)."""

    #: per list level from the top: ("regular", size, length) or ("var", offsets from 0)
    levels: list
    values: Any   #: the numbers below, one per element
    nodes: list   #: the list nodes and the numbers node, from the top (for their parameters)


def list_structure(layout: Content, backend) -> Structure:
    """``layout`` taken apart into its list levels and the flat numbers below them, for
    element-wise work on the values alone; NotNative where it is anything else
    (options, records, strings, non-contiguous lists)."""
    levels, nodes = [], []
    node = layout
    while isinstance(node, (C.ListOffsetArray, C.ListArray, C.RegularArray)):
        if is_stringlike(node):
            raise NotNative("strings")
        nodes.append(node)
        if isinstance(node, C.RegularArray):
            levels.append(("regular", node.size, node.length))
            node = node.content[: node.size * node.length]
            continue
        lists = list_bounds(node, backend)
        if lists.offsets is None:
            raise NotNative(f"{type(node).__name__} with non-contiguous lists")
        offsets, node = runs(lists.starts, lists.stops, lists.offsets, node.content, backend)
        levels.append(("var", offsets))
    if isinstance(node, C.IndexedArray) and is_numbers(node.content):
        # numbers through an index (a lazy carry): gathered here, as awkward projects them
        if node.parameter("__array__") == "categorical":
            raise NotNative("categorical data")
    elif not is_numbers(node):
        raise NotNative(f"{type(node).__name__} where numbers are expected")
    nodes.append(node)
    return Structure(levels, leaf_values(node, backend), nodes)


def same_structure(structures, backend, *, outer=False) -> bool:
    """Whether every ``Structure`` has the first one's lists and as many values. With
    ``outer``, one with fewer levels also matches where its lists are the first one's
    outer levels and it has a value per item at its depth (an event-level array against
    lists of the events, as awkward broadcasts it). Offsets that are one buffer compare
    without a pass; the others are compared on the backend and read back once (on a GPU,
    one host sync for all of them)."""
    first = structures[0]
    pending = []
    for other in structures[1:]:
        depth = len(other.levels)
        if depth != len(first.levels):
            if not outer or depth > len(first.levels):
                return False
            if other.values.shape[0] != items_at(first, depth):
                return False
        elif other.values.shape != first.values.shape:
            return False
        for x, y in zip(first.levels, other.levels):
            if x[0] != y[0]:
                return False
            if x[0] == "regular":
                if x[1:] != y[1:]:
                    return False
            elif x[1] is not y[1]:
                if x[1].shape != y[1].shape:
                    return False
                pending.append((x[1] == y[1]).all())
    if not pending:
        return True
    return bool(pending[0] if len(pending) == 1 else backend.nplike.stack(pending).all())


def items_at(structure: Structure, depth: int) -> int:
    """How many items a ``Structure`` holds at ``depth`` (0: its lists; its number of
    levels: its values), known on the host."""
    if depth == len(structure.levels):
        return structure.values.shape[0]
    level = structure.levels[depth]
    return level[2] if level[0] == "regular" else level[1].shape[0] - 1


def broadcast_index(structure: Structure, depth: int, backend):
    """For every number of ``structure``, the position of the item at ``depth`` of its
    var lists that holds it: ``values[index]`` repeats one value per such item down to
    one per number (awkward's broadcast of an outer array into lists). One index serves
    every outer argument of a call."""
    nplike = backend.nplike
    index = None
    for d in range(depth, len(structure.levels)):
        ends = structure.levels[d][1][1:]
        below = nplike.arange(items_at(structure, d + 1), dtype=np.int64)
        parent = nplike.searchsorted(ends, below, side="right")
        index = parent if index is None else index[parent]
    return index


def rebuild(levels, leaf: Content, parameters=None) -> Content:
    """The list levels of a ``Structure`` over a new ``leaf``; ``parameters`` (one dict
    or None per level, from the top) go on the list nodes."""
    out = leaf
    for depth in range(len(levels) - 1, -1, -1):
        level = levels[depth]
        params = None if parameters is None else parameters[depth]
        if level[0] == "regular":
            out = C.RegularArray(out, level[1], zeros_length=level[2], parameters=params)
        else:
            out = C.ListOffsetArray(ak.index.Index64(level[1]), out, parameters=params)
    return out
