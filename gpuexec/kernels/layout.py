"""Layout <-> buffers: find the innermost lists of an awkward layout, hand their flat
buffers (int64 offsets + leaf values) to a kernel, and put the result back into the
same outer structure.

Outer structure that is preserved as it is: lists above the innermost list
(depth 3+ for ``axis=-1``), ``IndexedArray`` and option nodes above a list
(``events[cut].Muon.pt``). Inner structure that is resolved to flat buffers:
``ListArray``/``RegularArray`` (to offsets), ``IndexedArray`` under a list
(``events.Muon[mask].pt``) and virtual (lazily loaded) buffers.
"""

from __future__ import annotations

import awkward as ak
import numpy as np

from gpuexec.kernels.api._common import NotNative

Content = ak.contents.Content


def to_layout(array) -> Content:
    if isinstance(array, Content):
        return array
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


def is_innermost(layout: Content, axis: int) -> bool:
    depth = layout.purelist_depth
    return depth >= 2 and posaxis(layout, axis) == depth - 1


def map_innermost_lists(node: Content, fn):
    """Replace every innermost list node ``L`` (a list whose content has depth 1) by
    ``fn(L)``, which must return a node of the same length. Everything above is kept."""
    if node.is_list:
        if node.content.purelist_depth == 1:
            return fn(node)
        return node.copy(content=map_innermost_lists(node.content, fn))
    if node.is_indexed or node.is_option:
        if isinstance(node, ak.contents.NumpyArray):  # pragma: no cover - guard
            raise NotNative("NumpyArray is not a list")
        return node.copy(content=map_innermost_lists(node.content, fn))
    raise NotNative(f"{type(node).__name__} above the innermost list")


def buffer(backend, data):
    """``data`` (an awkward Index/NumpyArray buffer, possibly virtual) as an array of
    ``backend``'s nplike."""
    return backend.asarray(data)


def list_offsets(node: Content, backend):
    """(offsets int64[n+1], content) of an innermost list node. ``content`` is the list's
    content node, sliced/carried so that ``offsets`` index into it."""
    nplike = backend.nplike
    if isinstance(node, ak.contents.ListOffsetArray):
        offsets = buffer(backend, node.offsets.data)
        if offsets.dtype != np.int64:
            offsets = offsets.astype(np.int64)
        return offsets, node.content
    if isinstance(node, ak.contents.RegularArray):
        n, size = node.length, node.size
        return nplike.arange(0, (n + 1) * size, size, dtype=np.int64)[: n + 1], node.content
    if isinstance(node, ak.contents.ListArray):
        starts = buffer(backend, node.starts.data).astype(np.int64, copy=False)
        stops = buffer(backend, node.stops.data).astype(np.int64, copy=False)
        n = starts.shape[0]
        if n == 0:
            return nplike.zeros(1, dtype=np.int64), node.content
        if bool((stops[:-1] == starts[1:]).all()):
            offsets = nplike.empty(n + 1, dtype=np.int64)
            offsets[:n] = starts
            offsets[n] = stops[n - 1]
            return offsets, node.content
        # Non-contiguous lists: gather their contents into one contiguous run.
        offsets = backend.kernel("compact_offsets")(starts, stops)
        carry = backend.kernel("list_carry_index")(starts, offsets)
        return offsets, node.content._carry(ak.index.Index64(carry), allow_lazy=False)
    raise NotNative(f"{type(node).__name__} is not a list")


def leaf_values(node: Content, backend):
    """The flat values of a depth-1 non-option content (NumpyArray, or IndexedArray
    over one) as an nplike array."""
    if isinstance(node, ak.contents.NumpyArray):
        if len(node.inner_shape) != 0:
            raise NotNative("multidimensional NumpyArray content")
        return buffer(backend, node.data)
    if isinstance(node, ak.contents.IndexedArray):
        index = buffer(backend, node.index.data)
        values = leaf_values(node.content, backend)
        return backend.kernel("carry", values.dtype)(values, index.astype(np.int64, copy=False))
    if isinstance(node, ak.contents.EmptyArray):
        return backend.nplike.zeros(0, dtype=np.float64)
    raise NotNative(f"{type(node).__name__} content")
