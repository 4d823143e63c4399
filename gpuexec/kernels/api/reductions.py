"""Reductions along the innermost axis (and ``axis=None``), awkward-shaped."""

from __future__ import annotations

import awkward as ak

from gpuexec.kernels import layout as L
from gpuexec.kernels.api._common import NotNative, public, wrap


@public(ak.sum)
def sum(array, axis=None, *, keepdims=False, mask_identity=False, highlevel=True,
        behavior=None, attrs=None, backend):
    if axis is None:
        raise NotNative("axis=None")  # placeholder until the flat path lands
    if keepdims or mask_identity:
        raise NotNative("keepdims/mask_identity")
    layout = L.to_layout(array)
    if not L.is_innermost(layout, axis):
        raise NotNative(f"axis={axis} is not the innermost axis")

    def reduce(node):
        offsets, content = L.list_offsets(node, backend)
        values = L.leaf_values(content, backend)
        out = backend.kernel("reduce_sum", values.dtype)(offsets, values)
        return ak.contents.NumpyArray(out)

    return wrap(L.map_innermost_lists(layout, reduce), array, highlevel=highlevel,
                behavior=behavior, attrs=attrs)
