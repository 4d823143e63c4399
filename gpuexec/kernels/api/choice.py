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
    # (compared together: one host read on a GPU for both operands)
    structures = [L.list_structure(v, backend) for v in [cond] + operands
                  if isinstance(v, C.Content)]
    if not L.same_structure(structures, backend):
        raise NotNative("arguments of different list structure")
    structure, arrays = structures[0], iter(structures[1:])
    nplike = backend.nplike
    choices = [next(arrays).values.astype(dtype, copy=False) if isinstance(v, C.Content)
               else nplike.asarray(v, dtype=dtype) for v in operands]
    picked = nplike.where(structure.values != 0, *choices)
    out = L.rebuild(structure.levels, C.NumpyArray(picked.astype(dtype, copy=False)))
    return wrap(out, condition, highlevel=highlevel, behavior=behavior, attrs=attrs)
