"""Missing values: ``fill_none``. Runs natively where the option type sits directly
above the numbers (the common result of a keepdims arg-reduction pick or an optional
first element); awkward's own route there builds a UnionArray and simplifies it,
kernels that its CUDA backend takes from cuda.compute."""

from __future__ import annotations

import numbers

import awkward as ak
import numpy as np

from gpuexec.kernels import layout as L
from gpuexec.kernels.api._common import NotNative, awkward_leaf_dtype, public, signature, wrap

C = ak.contents


@public(ak.fill_none)
def fill_none(array, value, axis=-1, *, highlevel=True, behavior=None, attrs=None, backend):
    """``ak.fill_none`` for a number ``value``: every None of the option node above
    the numbers becomes ``value``; the result dtype is the one awkward gives."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Number, np.number)):
        raise NotNative(f"{type(value).__name__} fill value (numbers run natively)")
    layout = L.to_layout(array)
    depth = layout.purelist_depth
    if axis is not None and L.posaxis(layout, axis) != depth - 1:
        raise NotNative(f"axis={axis} (the innermost axis or None runs natively)")
    dtype = awkward_leaf_dtype(ak.fill_none, (signature(layout), signature(value)),
                               (("axis", axis),))

    def walk(node):
        if isinstance(node, (C.ListOffsetArray, C.ListArray, C.RegularArray)):
            return node.copy(content=walk(node.content))
        if isinstance(node, C.UnmaskedArray):  # holds no None: nothing to fill, and a
            return walk(node.content)          # value outside its dtype must not be cast
        if node.is_option and L.is_numbers(node.content):
            values, valid = L.option_content(node, backend)
            fill = backend.nplike.full(values.shape[0], value, dtype=dtype)
            filled = backend.nplike.where(valid, values.astype(dtype, copy=False), fill)
            return C.NumpyArray(filled, parameters=node.content.parameters)
        if L.is_numbers(node):
            data = L.leaf_values(node, backend)
            return C.NumpyArray(data.astype(dtype, copy=False), parameters=node.parameters)
        raise NotNative(f"{type(node).__name__} at or above the filled axis")

    return wrap(walk(layout), array, highlevel=highlevel, behavior=behavior, attrs=attrs)
