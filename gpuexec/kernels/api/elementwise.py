"""Element-wise math on the flat values: ``elementwise(fn, *arrays)``.

awkward applies every ufunc of an expression by broadcasting its arguments' layouts, a
walk of Python over the list levels that compares offsets each time (on a GPU, one host
sync per comparison). A kinematics expression of twenty ufuncs pays that twenty times
for lists that all have one structure. ``elementwise`` compares the structures once and
calls ``fn`` on the flat numbers (numpy or CuPy arrays), then puts the lists back.

The result equals ``fn(*arrays)`` on the awkward arrays: the same ufuncs run on the same
numbers, so values and dtypes are those of awkward's route on the same backend (awkward
applies each ufunc to the flat buffers too, with NEP 50 promotion of Python numbers,
which NumPy 2 and CuPy apply themselves). Parameters are those every array argument
has in common at each level (awkward intersects them per operation; the two agree
whenever the arguments carry the same parameters, as the columns of one collection
do). Arguments of different list structure, options, records, strings, lists named
for behaviors (``__list__``, ``__array__``, ``__record__``) and Python integers outside an
integer argument's dtype go to awkward's route.
"""

from __future__ import annotations

import numbers

import awkward as ak
import numpy as np

from gpuexec.kernels import layout as L
from gpuexec.kernels.api._common import NotNative, public, wrap

C = ak.contents

# parameters through which a behavior may overload a ufunc: awkward's route decides then
_BEHAVIOR_NAMES = ("__array__", "__list__", "__record__")


def _by_awkward(fn, *arrays):
    """``fn`` applied by awkward (its broadcasting, ufunc by ufunc)."""
    return fn(*arrays)


@public(_by_awkward)
def elementwise(fn, *arrays, backend):
    """``fn(*arrays)`` for an element-wise ``fn`` (ufuncs, arithmetic, comparisons) of
    arrays of one list structure and numbers, computed once on the flat values.

    ``fn`` receives the backend's arrays (numpy or CuPy) in place of the awkward ones and
    numbers as they are; it returns one array of the values' length or a tuple of them,
    and ``elementwise`` returns an ``ak.Array`` (or a tuple of them) with the lists of
    the arguments."""
    structures, call_args, positions, python_ints, like = [], [], [], [], None
    for a in arrays:
        if isinstance(a, (ak.Array, C.Content)):
            layout = L.to_layout(a)
            structure = L.list_structure(layout, backend)
            _no_behavior_names(structure)
            structures.append(structure)
            positions.append(len(call_args))
            call_args.append(structure.values)
            if like is None:
                like = a
        elif isinstance(a, (numbers.Number, np.generic)):
            call_args.append(a)
            if type(a) is int:
                python_ints.append(a)
        else:
            raise NotNative(f"{type(a).__name__} argument (awkward arrays and numbers run "
                            "natively)")
    if not structures:
        raise NotNative("no awkward array among the arguments")
    _numbers_fit(python_ints, structures)
    template = max(structures, key=lambda s: len(s.levels))  # the first of the deepest
    if not L.same_structure([template] + structures, backend, outer=True):
        raise NotNative("arguments of different list structure")
    depth = len(template.levels)
    if any(len(s.levels) < depth for s in structures):
        _outer_arrays_broadcast(structures, positions, template, call_args, backend)
        params = [None] * (depth + 1)
    else:
        params = _common_parameters(structures)

    out = fn(*call_args)
    length = template.values.shape[0]
    if isinstance(out, tuple):
        return tuple(_rebuilt(o, template, params, length, like, fn) for o in out)
    return _rebuilt(out, template, params, length, like, fn)


def _outer_arrays_broadcast(structures, positions, template, call_args, backend) -> None:
    """Arguments of fewer list levels (an event-level array against lists of the
    events) repeated into the template's lists, in ``call_args``. Only var lists and
    arguments without parameters: awkward broadcasts regular dimensions numpy's way
    (from the right), and how it merges parameters across depths is its own."""
    if any(level[0] != "var" for level in template.levels):
        raise NotNative("an outer array against regular lists")
    if any(node._parameters for s in structures for node in s.nodes):
        raise NotNative("parameters on arrays of different depths")
    depth = len(template.levels)
    indexes = {}  # outer depth -> its broadcast index, shared by the arguments of that depth
    for i, s in zip(positions, structures):
        if len(s.levels) < depth:
            outer = len(s.levels)
            if outer not in indexes:
                indexes[outer] = L.broadcast_index(template, outer, backend)
            call_args[i] = s.values[indexes[outer]]


def _no_behavior_names(structure) -> None:
    for node in structure.nodes:
        parameters = node._parameters  # the dict or None, without a copy
        if parameters and any(name in parameters for name in _BEHAVIOR_NAMES):
            raise NotNative("lists or numbers named for a behavior")


def _common_parameters(structures) -> list:
    """Per node from the top: the parameters every argument has (same key and a value
    that is not None), as awkward's ``parameters_intersect`` keeps them."""
    out = []
    for nodes in zip(*(s.nodes for s in structures)):
        first = nodes[0]._parameters
        if not first:
            out.append(None)
            continue
        common = {k: v for k, v in first.items() if v is not None
                  and all((n._parameters or {}).get(k, _MISSING) == v for n in nodes[1:])}
        out.append(common or None)
    return out


def _numbers_fit(numbers_, structures) -> None:
    """awkward turns a Python integer into an array of the dtype the ufunc resolves
    (NEP 50), which raises where it does not fit (-1 against uint8); numpy compares
    such a number without converting it. Where one does not fit an integer argument's
    dtype, awkward's route decides."""
    for value in numbers_:
        for s in structures:
            dtype = s.values.dtype
            if dtype.kind in "iu":
                info = np.iinfo(dtype)
                if not info.min <= value <= info.max:
                    raise NotNative(f"the Python integer {value} outside {dtype}")


_MISSING = object()


def _rebuilt(values, template, params, length, like, fn):
    shape = getattr(values, "shape", None)
    if shape != (length,) or type(values) is not type(template.values):
        raise ValueError(
            f"elementwise: {getattr(fn, '__name__', fn)!r} returned "
            f"{type(values).__name__} of shape {shape}, not one value per element "
            f"({type(template.values).__name__} of shape ({length},))")
    leaf = C.NumpyArray(values, parameters=params[-1])
    return wrap(L.rebuild(template.levels, leaf, params[:-1]), like)
