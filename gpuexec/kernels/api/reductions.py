"""Reductions, awkward-shaped: ``sum, prod, min, max, argmin, argmax, count,
count_nonzero, any, all`` along the innermost axis and with ``axis=None``.

Innermost axis: every innermost list node (below any lists, IndexedArray and option
nodes, which are kept as they are) is turned into offsets + flat values, Nones inside
the lists are dropped (their slots still count for argmin/argmax positions, as in
awkward), one segmented kernel folds the lists, and the result replaces the list node
(a ``ByteMaskedArray`` over it for ``mask_identity``, a size-1 ``RegularArray`` for
``keepdims``).

``axis=None`` folds all values in the order awkward's ``remove_structure`` lists them.
awkward takes NumPy's own reductions for sum/min/max there (pairwise summation, NaN
propagating min/max) and its kernels for the rest; so do we, through the backend's
nplike for the former and our kernels (one list of everything) for the latter.

Other axes, records, unions, strings and dtypes outside int/uint/float/bool are handed
to awkward (counted in ``gk.stats()``).
"""

from __future__ import annotations

import inspect
import math
import numbers
import weakref

import awkward as ak
import numpy as np

from gpuexec.kernels import layout as L
from gpuexec.kernels.api._common import NotNative, is_integer, public, wrap
from gpuexec.kernels.api._results import masked_node, numpy_node
from gpuexec.kernels.backend import ALL_DTYPES, dtype_name

C = ak.contents

_DTYPES = frozenset(ALL_DTYPES)


# -- the public functions --------------------------------------------------------------
def _public_reducer(awkward_fn):
    """The gk function mirroring the awkward reduction ``awkward_fn``: its name, its
    keywords and their defaults (``initial`` for min/max only; ``mask_identity``'s
    default is awkward's)."""
    fname = awkward_fn.__name__
    params = inspect.signature(awkward_fn).parameters
    mask_default = params["mask_identity"].default
    if "initial" in params:
        def reducer(array, axis=None, *, keepdims=False, initial=None,
                    mask_identity=mask_default, highlevel=True, behavior=None, attrs=None,
                    backend):
            return _reduce(fname, array, axis, keepdims, mask_identity, initial, highlevel,
                           behavior, attrs, backend)
    else:
        def reducer(array, axis=None, *, keepdims=False, mask_identity=mask_default,
                    highlevel=True, behavior=None, attrs=None, backend):
            return _reduce(fname, array, axis, keepdims, mask_identity, None, highlevel,
                           behavior, attrs, backend)
    reducer.__name__ = reducer.__qualname__ = fname
    reducer.__module__ = __name__
    return public(awkward_fn)(reducer)


sum = _public_reducer(ak.sum)  # noqa: A001
prod = _public_reducer(ak.prod)
min = _public_reducer(ak.min)  # noqa: A001
max = _public_reducer(ak.max)  # noqa: A001
argmin = _public_reducer(ak.argmin)
argmax = _public_reducer(ak.argmax)
count = _public_reducer(ak.count)
count_nonzero = _public_reducer(ak.count_nonzero)
any = _public_reducer(ak.any)  # noqa: A001
all = _public_reducer(ak.all)  # noqa: A001


# -- shared driver -----------------------------------------------------------------------
def _reduce(fname, array, axis, keepdims, mask_identity, initial, highlevel, behavior, attrs,
            backend):
    layout = array.layout if type(array) is ak.Array else L.to_layout(array)
    if (type(axis) is int or is_integer(axis)) and axis in (1, -1):
        plain = _plain_buffers(layout, backend)
        if plain is not None:
            # the common call (one level of lists of numbers): straight to the kernel, a
            # few us less of Python on every call (the GPU call floor)
            offsets, values, ak_backend = plain
            if fname == "count":
                out, empty = backend.kernel("reduce_count")(offsets), None
            else:
                out, empty = _segmented(fname, offsets, values, initial, backend, mask_identity)
            out = _lists_result(out, offsets, keepdims, mask_identity, ak_backend, empty)
            return wrap(out, array, highlevel=highlevel, behavior=behavior, attrs=attrs,
                        plain=True)
    _check_native(layout)
    mindepth, depth = layout.minmax_depth
    if mindepth != depth:
        raise NotNative("branching depth")
    keepdims, mask_identity = bool(keepdims), bool(mask_identity)
    if axis is None or (depth == 1 and is_integer(axis) and axis in (0, -1)):
        return _reduce_all(fname, layout, depth, keepdims, mask_identity, initial, array,
                           highlevel, behavior, attrs, backend)
    if not is_integer(axis):
        raise NotNative(f"axis={axis!r} is not an integer")
    if depth < 2 or (axis if axis >= 0 else axis + depth) != depth - 1:
        raise NotNative(f"axis={axis} is not the innermost axis of a depth-{depth} array")

    def reduce_lists(node):
        return _reduce_lists(fname, node, keepdims, mask_identity, initial, backend)

    out = L.map_innermost_lists(layout, reduce_lists, backend)
    return wrap(out, array, highlevel=highlevel, behavior=behavior, attrs=attrs)


def _plain_lists(layout) -> bool:
    """A ListOffsetArray of a 1-d NumpyArray of a supported dtype, no parameters: what
    ``_reduce`` would reach through its general checks and walk anyway."""
    if type(layout) is not C.ListOffsetArray or layout.parameters:
        return False
    content = layout.content
    return (type(content) is C.NumpyArray and not content.parameters
            and content.data.ndim == 1 and dtype_name(content.dtype) in _DTYPES)


# id(layout) -> (weak reference to it, Backend, (offsets, values, awkward backend))
_plain: dict = {}


def _plain_buffers(layout, backend):
    """(offsets, values, awkward backend of results) of a ``_plain_lists`` layout as
    ``backend`` reads them, or None for any other layout. Remembered per layout object
    while it lives, and only where ``backend`` reads the layout's own buffer objects
    (no conversion, no copy, nothing virtual): layouts are immutable and the kernel
    reads the buffers themselves, so the entry cannot go stale (the offsets check is
    remembered per buffer in ``validate`` on the same grounds)."""
    entry = _plain.get(id(layout))
    if entry is not None and entry[0]() is layout and entry[1] is backend:
        return entry[2]
    if not _plain_lists(layout):
        return None
    offsets, content = L.list_offsets(layout, backend)
    values = L.leaf_values(content, backend)
    ak_backend = content.backend
    if ak_backend.name != backend.ak_backend:
        ak_backend = None  # results live elsewhere: NumpyArray finds its own backend
    buffers = (offsets, values, ak_backend)
    if offsets is layout.offsets.data and values is content.data:
        key = id(layout)
        try:
            ref = weakref.ref(layout, lambda _, key=key: _plain.pop(key, None))
        except TypeError:  # no weak references: never remembered
            return buffers
        _plain[key] = (ref, backend, buffers)
    return buffers


def _check_native(node) -> None:
    """NotNative for anything our kernels do not cover (awkward then decides)."""
    if L.is_stringlike(node) or node.parameter("__array__") == "categorical":
        raise NotNative(f"{node.parameter('__array__')} data")
    if isinstance(node, C.NumpyArray):
        if dtype_name(node.dtype) not in _DTYPES or len(node.inner_shape) != 0:
            raise NotNative(f"dtype {node.dtype} / shape {node.data.shape}")
    elif isinstance(node, (C.ListOffsetArray, C.ListArray, C.RegularArray, C.IndexedArray,
                           C.IndexedOptionArray, C.ByteMaskedArray, C.BitMaskedArray,
                           C.UnmaskedArray)):
        _check_native(node.content)
    elif not isinstance(node, C.EmptyArray):
        raise NotNative(f"{type(node).__name__} in the layout")


# -- innermost axis --------------------------------------------------------------------------
def _reduce_lists(fname, node, keepdims, mask_identity, initial, backend):
    list_offsets, content = L.list_offsets(node, backend)
    empty = None
    if fname == "count":  # reads no values unless Nones must be skipped
        offsets = (L.skip_missing(list_offsets, content, backend)[0] if content.is_option
                   else list_offsets)
        out = backend.kernel("reduce_count")(offsets)
    else:
        offsets, values, positions = L.skip_missing(list_offsets, content, backend)
        out, empty = _segmented(fname, offsets, values, initial, backend, mask_identity)
        if positions is not None and fname in ("argmin", "argmax"):
            out = _slot_positions(out, offsets, positions, list_offsets, backend.nplike)
    return _lists_result(out, offsets, keepdims, mask_identity, empty=empty)


def _lists_result(out, offsets, keepdims, mask_identity, ak_backend=None, empty=None):
    """The node that replaces a list node: one value per list (``out``), masked where a
    list is empty for ``mask_identity`` (``empty``, when the kernel wrote it), in lists of
    one for ``keepdims``. With ``ak_backend`` the node is made without NumpyArray's
    checks (``_results``)."""
    result = numpy_node(out, ak_backend)
    if mask_identity:
        if empty is None:
            empty = offsets[1:] == offsets[:-1]
        result = masked_node(empty, result, ak_backend)
    if keepdims:
        result = C.RegularArray(result, 1, zeros_length=offsets.shape[0] - 1)
    return result


def _slot_positions(local, present_offsets, positions, offsets, nplike):
    """argmin/argmax over lists with their Nones dropped -> positions that count the
    None slots (awkward's answer)."""
    if positions.shape[0] == 0:
        return local
    found = local >= 0
    kept = nplike.where(found, present_offsets[:-1] + local, 0)
    return nplike.where(found, positions[kept] - offsets[:-1], -1)


def _segmented(fname, offsets, values, initial, backend, with_empty=False):
    """One kernel launch over all lists of ``values``: (result, mask of the empty lists
    where ``with_empty`` asks for it, else None)."""
    dtype = values.dtype
    is_bool = dtype == np.bool_
    args = (offsets, values)
    if fname in ("sum", "prod"):
        name = f"reduce_{fname}_bool" if is_bool else f"reduce_{fname}"
    elif fname in ("min", "max"):
        if is_bool:  # awkward: min = all, max = any; ``initial`` is not used for bools
            name = "reduce_all" if fname == "min" else "reduce_any"
        else:
            name = f"reduce_{fname}"
            args += (_kernel_identity(fname, dtype, initial),)
    elif fname == "count_nonzero":
        name = "reduce_countnonzero"
    else:
        name = f"reduce_{fname}"
    kernel = backend.kernel(name, dtype)
    return kernel(*args, with_empty=True) if with_empty else (kernel(*args), None)


def _default_identity(fname, dtype):
    """awkward's identity of min/max: the integer extremes for integer dtypes, +-inf for
    everything else (bool included, which numpy then casts to True)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.max if fname == "min" else info.min
    return math.inf if fname == "min" else -math.inf


def _kernel_identity(fname, dtype, initial):
    """The start value of every list: ``initial`` or the default identity, exactly
    representable in ``dtype`` (awkward converts it as a C argument of that type; other
    values are left to awkward)."""
    if initial is None:
        return _default_identity(fname, dtype)
    if isinstance(initial, (bool, np.bool_)) or not isinstance(initial, numbers.Real):
        raise NotNative(f"initial={initial!r}")
    if dtype.kind == "f":
        return dtype.type(initial)
    info = np.iinfo(dtype)
    if not isinstance(initial, (int, np.integer)) or not info.min <= initial <= info.max:
        raise NotNative(f"initial={initial!r} is not a {dtype} value")
    return dtype.type(initial)


# -- axis=None -----------------------------------------------------------------------------
def _flat_leaf(node, backend):
    """The depth-1 content whose entries are all values of ``node`` in awkward's order
    (lists in order, IndexedArrays resolved, None lists dropped, Nones inside kept)."""
    if node.purelist_depth == 1:
        return node
    lists = L.list_bounds(node, backend)
    starts, stops, offsets = lists.starts, lists.stops, lists.offsets
    if lists.valid is not None:
        keep = backend.nplike.nonzero(lists.valid)[0]
        starts, stops, offsets = starts[keep], stops[keep], None
    _, content = L.runs(starts, stops, offsets, lists.content, backend)
    return _flat_leaf(content, backend)


def _has_regular(node) -> bool:
    if isinstance(node, C.RegularArray):
        return True
    return node.purelist_depth > 1 and _has_regular(node.content)


def _reduce_all(fname, layout, depth, keepdims, mask_identity, initial, like, highlevel,
                behavior, attrs, backend):
    nplike = backend.nplike
    leaf = _flat_leaf(layout, backend)
    if keepdims and leaf.length == 0 and _has_regular(layout):
        # awkward then keeps the regular dimensions with length 0 (e.g. 1 * 0 * 1 * int64)
        raise NotNative("keepdims=True, axis=None over no values in a RegularArray")
    values, valid = L.option_content(leaf, backend)
    positions = None
    if valid is not None:
        positions = nplike.nonzero(valid)[0]
        values = backend.kernel("carry", values.dtype)(values, positions)
    n = values.shape[0]
    whole = nplike.asarray([0, n], dtype=np.int64)
    dtype = values.dtype
    if fname == "sum":
        value = nplike.sum(values)
    elif fname in ("min", "max"):
        if n == 0:
            start = initial if initial is not None else _default_identity(fname, dtype)
            value = nplike.asarray(start, dtype=dtype)
        else:
            value = nplike.min(values) if fname == "min" else nplike.max(values)
            if initial is not None:
                pick = nplike.minimum if fname == "min" else nplike.maximum
                value = pick(value, nplike.asarray(initial, dtype=dtype))
    elif fname == "count":
        value = np.int64(n)
    else:
        out = _segmented(fname, whole, values, None, backend)[0]
        if positions is not None and fname in ("argmin", "argmax") and out[0] >= 0:
            out = positions[out]
        value = out[0]
    value = nplike.asarray(value).reshape(1)
    if keepdims:
        result = C.NumpyArray(value)
        if mask_identity:
            result = C.ByteMaskedArray(ak.index.Index8(nplike.asarray([n == 0], dtype=np.int8)),
                                       result, valid_when=False)
        for _ in range(depth - 1):
            result = C.RegularArray(result, 1, zeros_length=1)
        return wrap(result, like, highlevel=highlevel, behavior=behavior, attrs=attrs)
    if mask_identity and n == 0:
        return None
    return value[0]
