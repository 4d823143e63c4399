"""Structural functions, awkward-shaped: ``sort``, ``argsort``, ``local_index`` (innermost
axis), ``num`` (any list axis, ``axis=0``), ``flatten`` (``axis=None``, ``axis=1``, and the
merge of inner lists at ``axis >= 2``), ``combinations``/``argcombinations`` (n = 2, 3)
and ``cartesian``/``argcartesian`` of two arrays, at ``axis=1``.

The pair/triplet building runs in the backend's ``combinations``/``cartesian`` kernels on
the ``starts``/``stops`` of the selected lists; the record contents are then gathered with
awkward's own lazy ``_carry`` (an ``IndexedArray`` over a record, so coffea collections
keep their behaviours and unread virtual fields stay unread). Result layouts follow
awkward's: what wraps the lists (``IndexedArray`` projected, options as an
``IndexedOptionArray``) and which parameters survive (checked by the differential tests).
"""

from __future__ import annotations

import awkward as ak
import numpy as np

from gpuexec.kernels import layout as L
from gpuexec.kernels import validate
from gpuexec.kernels.api._common import NotNative, is_integer, public, wrap
from gpuexec.kernels.backend import KernelNotFound

C = ak.contents
Index64 = ak.index.Index64

#: lists longer than this are not insertion-sorted by libstdc++'s ``std::sort``, which
#: awkward uses for ``stable=False``; up to it the unstable sort is the stable one.
_UNSTABLE_SORT_IS_STABLE_UP_TO = 16


# -- helpers -------------------------------------------------------------------------------
def _kernel(backend, name, *dtypes):
    try:
        return backend.kernel(name, *dtypes)
    except KernelNotFound as why:
        raise NotNative(str(why)) from None


def _int64(backend, data):
    return backend.asarray(data).astype(np.int64, copy=False)


def _no_strings(node):
    if L.is_stringlike(node):
        raise NotNative("strings")


def _posaxis(layout, axis):
    """``axis`` counted from the top (0 = the array itself)."""
    if not is_integer(axis):
        raise NotNative(f"axis={axis!r}")
    if axis >= 0:  # awkward needs no depth for a non-negative axis (records may branch)
        return int(axis)
    return L.posaxis(layout, int(axis))


def _through_indexes(node, backend):
    """(index, is_option, node below): the ``IndexedArray``/option nodes on top of
    ``node`` composed into one int64 index (-1 for None; ``None`` when there are none),
    whether any of them was an option, and the first other node below them."""
    nplike = backend.nplike
    index, is_option = None, False
    while node.is_indexed or node.is_option:
        if isinstance(node, (C.ByteMaskedArray, C.BitMaskedArray, C.UnmaskedArray)):
            # the index of its IndexedOptionArray form, with nplike operations: awkward's
            # own conversion is a cuda.compute kernel on its CUDA backend (2.14), which
            # JIT-compiles a Python callable and needs numba-cuda-mlir
            own = nplike.where(L.option_valid(node, backend),
                               nplike.arange(node.length, dtype=np.int64), -1)
        else:
            own = _int64(backend, node.index.data)
            validate.indexed(own, node.content.length, option=node.is_option,
                             name=f"{type(node).__name__} index")
        if index is None:
            index = own
        else:
            safe = nplike.where(index >= 0, index, 0)
            composed = own[safe] if own.shape[0] else nplike.zeros_like(index)
            index = nplike.where(index >= 0, composed, -1)
        is_option = is_option or node.is_option
        node = node.content
    return index, is_option, node


def _is_innermost(layout, posaxis):
    mindepth, maxdepth = layout.minmax_depth
    return mindepth == maxdepth >= 2 and posaxis == maxdepth - 1


class _Lists:
    """The lists one level below an array, resolved through the ``IndexedArray``/option
    nodes above them: ``starts``/``stops`` (int64, one per selected entry) into
    ``node.content``, where ``node`` is the list node. With ``compact_none`` the None
    entries are left out and ``outindex`` (int64, -1 for None) maps the array's entries
    to the selected ones; otherwise a None is an empty list in place and ``valid`` says
    which entries are not None (both None when no option node was crossed).
    ``offsets`` is set when the lists are one contiguous run (no gather needed)."""

    def __init__(self, layout, backend, *, compact_none):
        nplike = backend.nplike
        index, is_option, node = _through_indexes(layout, backend)
        if not node.is_list:
            raise NotNative(f"{type(node).__name__} where lists are expected")
        _no_strings(node)
        self.node = node
        self.offsets = None
        n_content = node.content.length
        if isinstance(node, C.ListOffsetArray):
            offsets = _int64(backend, node.offsets.data)
            validate.offsets(offsets, n_content)
            starts, stops = offsets[:-1], offsets[1:]
            if index is None:
                self.offsets = offsets
        elif isinstance(node, C.ListArray):
            starts = _int64(backend, node.starts.data)
            stops = _int64(backend, node.stops.data)[: starts.shape[0]]
            validate.starts_stops(starts, stops, n_content)
        else:  # RegularArray
            size = node.size
            starts = nplike.arange(node.length, dtype=np.int64) * size
            stops = starts + size
            if index is None:
                self.offsets = nplike.arange(node.length + 1, dtype=np.int64) * size
        self.valid = self.outindex = None
        if index is not None:
            if is_option and compact_none:
                valid = index >= 0
                self.outindex = nplike.where(valid, nplike.cumsum(valid) - 1, -1)
                index = index[valid]
            elif is_option:
                self.valid = index >= 0
                index = nplike.where(self.valid, index, 0)
            if starts.shape[0] == 0:  # every entry None (or none at all)
                starts = stops = nplike.zeros(index.shape[0], dtype=np.int64)
            else:
                starts, stops = starts[index], stops[index]
            if self.valid is not None:
                starts = nplike.where(self.valid, starts, 0)
                stops = nplike.where(self.valid, stops, 0)
        self.starts, self.stops = starts, stops

    def gathered_content(self, backend):
        """The contents of the selected lists, one after another."""
        content = self.node.content
        if self.offsets is None and self.starts.shape[0]:
            if bool((self.stops[:-1] == self.starts[1:]).all()):  # one run after all
                n = self.starts.shape[0]
                self.offsets = backend.nplike.empty(n + 1, dtype=np.int64)
                self.offsets[:n] = self.starts
                self.offsets[n] = self.stops[n - 1]
        if self.offsets is not None:
            if self.offsets.shape[0] == 1:
                return content[0:0]
            return content[int(self.offsets[0]):int(self.offsets[-1])]
        offsets = _kernel(backend, "compact_offsets")(self.starts, self.stops)
        carry = _kernel(backend, "list_carry_index")(self.starts, offsets)
        return content._carry(Index64(carry), True)


def _take(content, index, backend):
    """``content._carry(index, allow_lazy=True)`` as awkward does it, with the gather of
    plain numbers done by the backend's (threaded) ``carry`` kernel."""
    if L.is_numbers(content):
        try:
            carry = backend.kernel("carry", content.dtype)
        except KernelNotFound:
            pass
        else:
            return C.NumpyArray(carry(backend.asarray(content.data), index),
                                parameters=content.parameters)
    return content._carry(Index64(index), True)


def _n_choose(m, n, replacement):
    if replacement:
        m += n - 1
    if m < n:
        return 0
    out = 1
    for j in range(n):
        out = out * (m - j) // (j + 1)
    return out


# -- sort, argsort ---------------------------------------------------------------------
def _sorted(array, axis, ascending, stable, backend, *, positions):
    layout = L.to_layout(array)
    if not _is_innermost(layout, _posaxis(layout, axis)):
        raise NotNative(f"axis={axis} is not the innermost axis")
    name = "argsort" if positions else "sort"

    def sort_lists(node):
        _no_strings(node)
        offsets, content = L.list_offsets(node, backend)
        out_offsets = offsets
        if offsets.shape[0] and L.first_offset(offsets) != 0:
            out_offsets = offsets - offsets[0]
        if isinstance(content, C.EmptyArray):  # lists that are all empty, of unknown type
            out = C.NumpyArray(backend.nplike.zeros(0, dtype=np.int64)) if positions \
                else C.EmptyArray(backend=content.backend)
            return C.ListOffsetArray(Index64(out_offsets), out, parameters=node.parameters)
        values = L.leaf_values(content, backend)  # list_offsets validated the offsets
        kernel = _kernel(backend, name, values.dtype)
        if not stable and offsets.shape[0] > 1:
            longest = int((offsets[1:] - offsets[:-1]).max())
            if longest > _UNSTABLE_SORT_IS_STABLE_UP_TO:
                raise NotNative("stable=False on lists longer than 16: awkward's "
                                "std::sort orders ties its own way")
        out = kernel(offsets, values, bool(ascending))
        # awkward keeps the list's parameters and drops the values' ones
        return C.ListOffsetArray(Index64(out_offsets), C.NumpyArray(out),
                                 parameters=node.parameters)

    return L.map_innermost_lists(layout, sort_lists, backend)


@public(ak.sort)
def sort(array, axis=-1, *, ascending=True, stable=True, highlevel=True, behavior=None,
         attrs=None, backend):
    out = _sorted(array, axis, ascending, stable, backend, positions=False)
    return wrap(out, array, highlevel=highlevel, behavior=behavior, attrs=attrs)


@public(ak.argsort)
def argsort(array, axis=-1, *, ascending=True, stable=True, highlevel=True, behavior=None,
            attrs=None, backend):
    out = _sorted(array, axis, ascending, stable, backend, positions=True)
    return wrap(out, array, highlevel=highlevel, behavior=behavior, attrs=attrs)


# -- local_index, num --------------------------------------------------------------------
def _list_offsets_only(node, backend):
    """int64 offsets of a list node's lists, compacted when they are not one run (the
    content is not touched)."""
    if isinstance(node, C.ListOffsetArray):
        offsets = _int64(backend, node.offsets.data)
        validate.offsets(offsets, node.content.length)
        return offsets
    lists = _Lists(node, backend, compact_none=False)
    if lists.offsets is not None:
        return lists.offsets
    return _kernel(backend, "compact_offsets")(lists.starts, lists.stops)


@public(ak.local_index)
def local_index(array, axis=-1, *, highlevel=True, behavior=None, attrs=None, backend):
    layout = L.to_layout(array)
    posaxis = _posaxis(layout, axis)
    if posaxis == 0:
        out = C.NumpyArray(backend.nplike.arange(layout.length, dtype=np.int64))
        return wrap(out, array, highlevel=highlevel, behavior=behavior, attrs=attrs)
    if not _is_innermost(layout, posaxis):
        raise NotNative(f"axis={axis} is neither 0 nor the innermost axis")

    def positions(node):
        _no_strings(node)
        offsets = _list_offsets_only(node, backend)
        out = C.NumpyArray(_kernel(backend, "local_index")(offsets))
        if isinstance(node, C.RegularArray):
            return C.RegularArray(out, node.size, zeros_length=node.length)
        if L.first_offset(offsets) != 0:
            offsets = offsets - offsets[0]
        return C.ListOffsetArray(Index64(offsets), out)

    out = L.map_innermost_lists(layout, positions, backend)
    return wrap(out, array, highlevel=highlevel, behavior=behavior, attrs=attrs)


def _counts(node, backend):
    nplike = backend.nplike
    if isinstance(node, C.RegularArray):
        return nplike.full(node.length, node.size, dtype=np.int64)
    if isinstance(node, C.ListOffsetArray):
        offsets = backend.asarray(node.offsets.data)
        validate.offsets(offsets, node.content.length)
        return offsets[1:] - offsets[:-1]
    starts = backend.asarray(node.starts.data)
    stops = backend.asarray(node.stops.data)[: starts.shape[0]]
    validate.starts_stops(starts, stops, node.content.length)
    return stops - starts


def _at_list_depth(layout, depth, axis, replace):
    """``layout`` with its list nodes at ``depth`` (1: the outermost lists) replaced by
    ``replace(node)``; the list, indexed and option nodes above are kept. NotNative for
    strings or other nodes on the way (``axis``: the caller's, for the reason)."""

    def walk(node, d):
        if node.is_list:
            _no_strings(node)
            if d == depth:
                return replace(node)
            return node.copy(content=walk(node.content, d + 1))
        if node.is_indexed or node.is_option:
            return node.copy(content=walk(node.content, d))
        raise NotNative(f"{type(node).__name__} above axis={axis}")

    return walk(layout, 1)


@public(ak.num)
def num(array, axis=1, *, highlevel=True, behavior=None, attrs=None, backend):
    layout = L.to_layout(array)
    posaxis = _posaxis(layout, axis)
    if posaxis == 0:
        return backend.nplike.asarray(layout.length)
    out = _at_list_depth(layout, posaxis, axis,
                         lambda node: C.NumpyArray(_counts(node, backend)))
    return wrap(out, array, highlevel=highlevel, behavior=behavior, attrs=attrs)


# -- flatten -------------------------------------------------------------------------------
def _flatten_all(node, backend):
    """``axis=None``: every number reachable through lists, indexes and options."""
    while True:
        index, is_option, below = _through_indexes(node, backend)
        if below.is_list:
            node = _Lists(node, backend, compact_none=True).gathered_content(backend)
        elif isinstance(below, C.EmptyArray):
            return C.EmptyArray(backend=below.backend)
        elif isinstance(below, C.NumpyArray):
            if len(below.inner_shape) != 0:
                raise NotNative("multidimensional NumpyArray")
            if index is None:
                return C.NumpyArray(backend.asarray(below.data))
            if is_option:
                index = index[index >= 0]
            return C.NumpyArray(_kernel(backend, "carry", below.dtype)(
                backend.asarray(below.data), index))
        else:
            raise NotNative(f"axis=None through {type(below).__name__}")


def _merge_inner(node, backend):
    """A list node whose content is lists, with each of its lists' inner lists joined
    into one (``flatten`` at the axis of the inner lists)."""
    outer = _Lists(node, backend, compact_none=False)
    inner = _Lists(node.content, backend, compact_none=False)
    if isinstance(node, C.RegularArray) and isinstance(inner.node, C.RegularArray):
        raise NotNative("regular lists of regular lists")
    if outer.offsets is not None and inner.offsets is not None:
        # both one contiguous run: the inner offsets at the outer boundaries
        new_offsets = inner.offsets[outer.offsets]
        content = inner.node.content
    else:
        o_off = _kernel(backend, "compact_offsets")(outer.starts, outer.stops)
        pick = _kernel(backend, "list_carry_index")(outer.starts, o_off)
        carry64 = _kernel(backend, "carry", np.int64)
        starts, stops = carry64(inner.starts, pick), carry64(inner.stops, pick)
        i_off = _kernel(backend, "compact_offsets")(starts, stops)
        new_offsets = i_off[o_off]
        content = inner.node.content._carry(
            Index64(_kernel(backend, "list_carry_index")(starts, i_off)), True)
    return C.ListOffsetArray(Index64(new_offsets), content, parameters=node.parameters)


@public(ak.flatten)
def flatten(array, axis=1, *, highlevel=True, behavior=None, attrs=None, backend):
    layout = L.to_layout(array)
    if axis is None:
        out = _flatten_all(layout, backend)
        return wrap(out, array, highlevel=highlevel, behavior=behavior, attrs=attrs)
    posaxis = _posaxis(layout, axis)
    if posaxis == 0:
        raise NotNative("axis=0")
    if posaxis >= layout.purelist_depth:
        raise NotNative(f"axis={axis} exceeds the depth")
    if posaxis == 1:
        out = _Lists(layout, backend, compact_none=True).gathered_content(backend)
        return wrap(out, array, highlevel=highlevel, behavior=behavior, attrs=attrs)
    out = _at_list_depth(layout, posaxis - 1, axis, lambda node: _merge_inner(node, backend))
    return wrap(out, array, highlevel=highlevel, behavior=behavior, attrs=attrs)


# -- combinations ----------------------------------------------------------------------------
def _combinations(array, n, replacement, axis, fields, parameters, backend, *, local):
    if not is_integer(n) or n not in (2, 3):
        raise NotNative(f"n={n!r} (pairs and triplets run natively)")
    n = int(n)
    if fields is not None and len(fields) != n:
        raise NotNative("len(fields) != n")  # awkward raises its own error
    layout = L.to_layout(array)
    if layout.purelist_depth < 2 or _posaxis(layout, axis) != 1:
        raise NotNative(f"axis={axis} (axis=1 runs natively)")
    lists = _Lists(layout, backend, compact_none=True)
    offsets, *idx = _kernel(backend, "combinations")(lists.starts, lists.stops, n,
                                                       bool(replacement), local)
    if local:
        contents = [C.NumpyArray(i) for i in idx]
    else:
        contents = [_take(lists.node.content, i, backend) for i in idx]
    record = C.RecordArray(contents, None if fields is None else list(fields),
                           length=idx[0].shape[0], parameters=parameters)
    node = lists.node
    # awkward's argcombinations works on ak.local_index, whose lists have no parameters
    list_parameters = None if local else node.parameters
    if isinstance(node, C.RegularArray):
        out = C.RegularArray(record, _n_choose(node.size, n, replacement),
                             zeros_length=lists.starts.shape[0], parameters=list_parameters)
    else:
        out = C.ListOffsetArray(Index64(offsets), record, parameters=list_parameters)
    if lists.outindex is not None:
        out = C.IndexedOptionArray(Index64(lists.outindex), out, parameters=parameters)
    return out


@public(ak.combinations)
def combinations(array, n, *, replacement=False, axis=1, fields=None, parameters=None,
                 with_name=None, highlevel=True, behavior=None, attrs=None, backend):
    if with_name is not None:
        parameters = {**(parameters or {}), "__record__": with_name}
    out = _combinations(array, n, replacement, axis, fields, parameters, backend, local=False)
    return wrap(out, array, highlevel=highlevel, behavior=behavior, attrs=attrs)


@public(ak.argcombinations)
def argcombinations(array, n, *, replacement=False, axis=1, fields=None, parameters=None,
                    with_name=None, highlevel=True, behavior=None, attrs=None, backend):
    parameters = {} if parameters is None else dict(parameters)
    if with_name is not None:
        parameters["__record__"] = with_name
    out = _combinations(array, n, replacement, axis, fields, parameters, backend, local=True)
    return wrap(out, array, highlevel=highlevel, behavior=behavior, attrs=attrs)


# -- cartesian -------------------------------------------------------------------------------
def _cartesian(arrays, axis, nested, parameters, backend, *, local):
    if isinstance(arrays, dict):
        fields, arrays = list(arrays.keys()), list(arrays.values())
    elif isinstance(arrays, (list, tuple)):
        fields, arrays = None, list(arrays)
    else:
        raise NotNative(f"arrays given as {type(arrays).__name__}")
    if len(arrays) != 2:
        raise NotNative(f"{len(arrays)} arrays (two run natively)")
    if nested is None or nested is False:
        nested = False
    elif nested is True or (isinstance(nested, (list, tuple)) and len(nested) == 1
                            and nested[0] == (0 if fields is None else fields[0])
                            and not isinstance(nested[0], bool)):
        nested = True
    else:
        raise NotNative(f"nested={nested!r}")
    layouts = [L.to_layout(a) for a in arrays]
    for layout in layouts:
        if layout.purelist_depth < 2 or _posaxis(layout, axis) != 1:
            raise NotNative(f"axis={axis} (axis=1 runs natively)")
    if layouts[0].length != layouts[1].length:
        raise NotNative("arrays of different lengths")  # awkward raises its own error
    a, b = (_Lists(x, backend, compact_none=False) for x in layouts)
    for lists in (a, b):
        if lists.node.parameters:
            raise NotNative("parameters on the lists")
        if nested and isinstance(lists.node, C.RegularArray):
            raise NotNative("nested=True with regular lists")
    if nested and b.valid is not None:
        raise NotNative("nested=True with an option-type second array")
    offsets, ia, ib = _kernel(backend, "cartesian")(a.starts, a.stops, b.starts, b.stops, local)
    if local:
        contents = [C.NumpyArray(ia), C.NumpyArray(ib)]
    else:
        contents = [_take(a.node.content, ia, backend), _take(b.node.content, ib, backend)]
    record = C.RecordArray(contents, fields, length=ia.shape[0], parameters=parameters)
    if nested:
        nplike = backend.nplike
        count_a = a.stops - a.starts
        outer = nplike.zeros(count_a.shape[0] + 1, dtype=np.int64)
        nplike.cumsum(count_a, out=outer[1:])
        inner_counts = nplike.repeat(b.stops - b.starts, count_a)
        inner = nplike.zeros(inner_counts.shape[0] + 1, dtype=np.int64)
        nplike.cumsum(inner_counts, out=inner[1:])
        out = C.ListOffsetArray(Index64(outer), C.ListOffsetArray(Index64(inner), record))
    else:
        out = C.ListOffsetArray(Index64(offsets), record)
    if a.valid is not None:
        # awkward's broadcast keeps the first array's None; a None of the second array
        # pairs with nothing (an empty list)
        nplike = backend.nplike
        outindex = nplike.where(a.valid, nplike.arange(a.valid.shape[0], dtype=np.int64), -1)
        out = C.IndexedOptionArray(Index64(outindex), out)
    return out


def _first_array(arrays):
    if isinstance(arrays, dict):
        return next(iter(arrays.values()), None)
    if isinstance(arrays, (list, tuple)) and arrays:
        return arrays[0]
    return None


def _cartesian_public(arrays, axis, nested, parameters, with_name, highlevel, behavior,
                      attrs, backend, *, local):
    """``ak.cartesian`` (``ak.argcartesian`` with ``local``) from its arguments."""
    if with_name is not None:
        parameters = {**(parameters or {}), "__record__": with_name}
    out = _cartesian(arrays, axis, nested, parameters, backend, local=local)
    return wrap(out, _first_array(arrays), highlevel=highlevel, behavior=behavior,
                attrs=attrs)


@public(ak.cartesian)
def cartesian(arrays, axis=1, *, nested=None, parameters=None, with_name=None,
              highlevel=True, behavior=None, attrs=None, backend):
    return _cartesian_public(arrays, axis, nested, parameters, with_name, highlevel,
                             behavior, attrs, backend, local=False)


@public(ak.argcartesian)
def argcartesian(arrays, axis=1, *, nested=None, parameters=None, with_name=None,
                 highlevel=True, behavior=None, attrs=None, backend):
    return _cartesian_public(arrays, axis, nested, parameters, with_name, highlevel,
                             behavior, attrs, backend, local=True)
