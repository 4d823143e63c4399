"""Element-wise choice: ``where``. Native where every array argument has the same
list structure over plain numbers (or is flat); awkward's own route builds a
UnionArray per leaf and simplifies it, a kernel its CUDA backend takes from
cuda.compute."""

from __future__ import annotations

import numbers

import awkward as ak
import numpy as np

from gpuexec.kernels import layout as L
from gpuexec.kernels.api._common import NotNative, awkward_leaf_dtype, public, signature, wrap

C = ak.contents
_LISTS = (C.ListOffsetArray, C.ListArray, C.RegularArray)


def _awkward_where(condition, *args, mergebool=True, highlevel=True, behavior=None,
                   attrs=None):
    return ak.where(condition, *args, mergebool=mergebool, highlevel=highlevel,
                    behavior=behavior, attrs=attrs)


@public(_awkward_where)
def where(condition, x, y, *, mergebool=True, highlevel=True, behavior=None, attrs=None,
          backend):
    """``ak.where(condition, x, y)``: ``x`` where ``condition`` is true, else ``y``;
    ``x``/``y`` are arrays of the condition's structure or numbers."""
    cond = L.to_layout(condition)
    operands = [L.to_layout(v) if isinstance(v, (ak.Array, C.Content)) else v for v in (x, y)]
    for v in operands:
        if not isinstance(v, C.Content) and (
                isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Number, np.number))):
            raise NotNative(f"{type(v).__name__} operand (arrays and numbers run natively)")
    dtype = awkward_leaf_dtype(ak.where, tuple(signature(v) for v in [cond] + operands),
                               (("mergebool", mergebool),))

    # every array argument must have the condition's lists: same offsets, numbers below
    levels, condition_values = _structure(cond, backend)
    nplike = backend.nplike
    choices = []
    for v in operands:
        if isinstance(v, C.Content):
            other_levels, values = _structure(v, backend)
            if not _same(levels, other_levels, backend):
                raise NotNative("arguments of different list structure")
            if values.shape != condition_values.shape:
                raise NotNative("arguments of different lengths")
            choices.append(values.astype(dtype, copy=False))
        else:
            choices.append(nplike.asarray(v, dtype=dtype))
    picked = nplike.where(condition_values != 0, *choices)
    out = C.NumpyArray(picked.astype(dtype, copy=False))
    for level in reversed(levels):
        if level[0] == "regular":
            out = C.RegularArray(out, level[1], zeros_length=level[2])
        else:
            out = C.ListOffsetArray(ak.index.Index64(level[1]), out)
    return wrap(out, condition, highlevel=highlevel, behavior=behavior, attrs=attrs)


def _structure(layout, backend):
    """(each list level from the top: ``("regular", size, length)`` or ``("var",
    offsets rebased to 0)``, the numbers below) of a layout that is contiguous lists over
    plain numbers; NotNative otherwise."""
    levels = []
    node = layout
    while isinstance(node, _LISTS):
        if L.is_stringlike(node):
            raise NotNative("strings")
        if isinstance(node, C.RegularArray):
            levels.append(("regular", node.size, node.length))
            node = node.content[: node.size * node.length]
            continue
        lists = L.list_bounds(node, backend)
        if lists.offsets is None:
            raise NotNative(f"{type(node).__name__} with non-contiguous lists")
        start, stop = int(lists.offsets[0]), int(lists.offsets[-1])
        levels.append(("var", lists.offsets - start if start else lists.offsets))
        node = node.content[start:stop]
    if isinstance(node, C.IndexedArray) and L.is_numbers(node.content):
        # numbers through an index (a lazy carry): gathered here, as awkward projects them
        if node.parameter("__array__") == "categorical":
            raise NotNative("categorical data")
    elif not L.is_numbers(node):
        raise NotNative(f"{type(node).__name__} where numbers are expected")
    return levels, L.leaf_values(node, backend)


def _same(a, b, backend) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x[0] != y[0]:
            return False
        if x[0] == "regular":
            if x[1:] != y[1:]:
                return False
        elif not (x[1] is y[1] or (x[1].shape == y[1].shape
                                   and bool(backend.nplike.array_equal(x[1], y[1])))):
            return False
    return True
