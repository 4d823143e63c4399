"""Result arrays of the common call (one level of lists of numbers, reduced), built
without awkward's constructor checks.

``ak.contents.NumpyArray(out)`` and ``ak.Array(node)`` check what our kernels already
guarantee: a 1-d buffer of a primitive dtype on a known awkward backend, and a layout
without parameters, whose high-level class is therefore ``ak.Array`` whatever the
behavior. Together they were about a quarter of ``gk.sum``'s call floor on the H200 host
(7 of 29 us; benchmarks/call_floor.py). Here both objects get the attributes the
constructors would have given them, taken once at import from objects the constructors
made. Where this awkward's objects do not have the expected shape (another release),
``FAST`` is False and the constructors run as before: results never depend on it (a test
compares both ways and fails if ``FAST`` is off on the pinned awkward).
"""

from __future__ import annotations

from collections.abc import Mapping

import awkward as ak
import numpy as np

_NumpyArray = ak.contents.NumpyArray
_Array = ak.Array
_new = object.__new__


def _array_fields():
    """{attribute: None} of a plain ``ak.Array`` but its layout (behavior and attrs
    None), or None where the constructors set anything else: a NumpyArray holds more than
    its data, parameters and backend, or an Array more than None-valued private slots."""
    node = _NumpyArray(np.zeros(1))
    if set(vars(node)) != {"_data", "_parameters", "_backend"} or node._parameters is not None:
        return None
    array = _Array(node)
    fields = vars(array)
    if (type(array) is not _Array or fields.get("_layout") is not node
            or not {"_behavior", "_attrs"} <= set(fields)
            or any(v is not None for k, v in fields.items() if k != "_layout")
            or hasattr(array, "__awkward_validation__")):
        return None
    return {k: None for k in fields if k != "_layout"}


_ARRAY_FIELDS = _array_fields()
#: whether results are built without the constructors (False: awkward's shape changed)
FAST = _ARRAY_FIELDS is not None


def numpy_node(data, ak_backend):
    """``ak.contents.NumpyArray(data, backend=ak_backend)`` for a 1-d ``data`` of a
    primitive dtype made by a kernel (``ak_backend`` None: the constructor finds it)."""
    if not FAST or ak_backend is None:
        return _NumpyArray(data, backend=ak_backend)
    node = _new(_NumpyArray)
    fields = node.__dict__
    fields["_data"] = data
    fields["_parameters"] = None
    fields["_backend"] = ak_backend
    return node


def plain_array(layout, behavior=None, attrs=None):
    """``ak.Array(layout, behavior=behavior, attrs=attrs)`` for a layout with no
    parameters at any depth (its class is ``ak.Array`` for every behavior)."""
    if not FAST or attrs is not None or not (behavior is None or type(behavior) is dict
                                             or isinstance(behavior, Mapping)):
        return _Array(layout, behavior=behavior, attrs=attrs)
    array = _new(_Array)
    fields = array.__dict__
    fields.update(_ARRAY_FIELDS)
    fields["_layout"] = layout
    fields["_behavior"] = behavior
    return array
