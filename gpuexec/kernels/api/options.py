"""Missing values: ``fill_none``. Runs natively where the option type sits directly
above the numbers (the common result of a keepdims arg-reduction pick or an optional
first element); awkward's own route there builds a UnionArray and simplifies it,
kernels that its CUDA backend takes from cuda.compute."""

from __future__ import annotations

import functools
import numbers

import awkward as ak
import numpy as np

from gpuexec.kernels import layout as L
from gpuexec.kernels.api._common import NotNative, public, wrap

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
    dtype = _result_dtype(layout.form.to_json(), type(value), getattr(value, "dtype", None),
                          axis)

    def walk(node):
        if isinstance(node, (C.ListOffsetArray, C.ListArray, C.RegularArray)):
            return node.copy(content=walk(node.content))
        if node.is_option and _numbers(node.content):
            values, valid = L.option_content(node, backend)
            fill = backend.nplike.full(values.shape[0], value, dtype=dtype)
            filled = backend.nplike.where(valid, values.astype(dtype, copy=False), fill)
            return C.NumpyArray(filled, parameters=node.content.parameters)
        if _numbers(node):
            data = L.leaf_values(node, backend)
            return C.NumpyArray(data.astype(dtype, copy=False), parameters=node.parameters)
        raise NotNative(f"{type(node).__name__} at or above the filled axis")

    return wrap(walk(layout), array, highlevel=highlevel, behavior=behavior, attrs=attrs)


def _numbers(node) -> bool:
    return isinstance(node, C.NumpyArray) and len(node.inner_shape) == 0


@functools.lru_cache(maxsize=256)
def _result_dtype(form_json, value_type, value_dtype, axis) -> np.dtype:
    """The leaf dtype awkward's own ``fill_none`` gives (asked of its type tracer, so
    the promotion rule is awkward's, not a copy of it); NotNative where awkward's
    result is not plain numbers (a union, say)."""
    sample = value_type(0) if value_dtype is None else np.zeros((), value_dtype)[()]
    form = ak.forms.from_json(form_json)
    tracer = ak.Array(form.length_zero_array().to_typetracer(forget_length=True))
    out = ak.fill_none(tracer, sample, axis=axis, highlevel=False)
    while isinstance(out, (C.ListOffsetArray, C.ListArray, C.RegularArray)):
        out = out.content
    if not _numbers(out):
        raise NotNative(f"awkward's result holds {type(out).__name__}, not numbers")
    return out.dtype
