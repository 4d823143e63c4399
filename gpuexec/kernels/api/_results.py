"""Result arrays of the common call (one level of lists of numbers, reduced), built
without awkward's constructor checks.

``ak.contents.NumpyArray(out)`` and ``ak.Array(node)`` check what our kernels already
guarantee: a 1-d buffer of a primitive dtype on a known awkward backend, and a layout
without parameters, whose high-level class is therefore ``ak.Array`` whatever the
behavior. Together they were about a quarter of ``gk.sum``'s call floor on the H200 host
(7 of 29 us; benchmarks/call_floor.py). The option mask of min/max/argmin/argmax
(``mask_identity``, their default) is made the same way: ``ByteMaskedArray(Index8(mask),
node)`` checks a contiguous int8 buffer of the node's length on its backend, which the
kernel wrote (5 us of a call on a 2-core VM). Here the objects get the attributes the
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
_ByteMaskedArray = ak.contents.ByteMaskedArray
_Index8 = ak.index.Index8
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


def _mask_fields_as_expected() -> bool:
    """Whether ``ByteMaskedArray(Index8(mask), node, valid_when=False)`` holds exactly
    the mask, the node, ``valid_when``, no parameters and the node's backend, and the
    Index its data, no metadata and the backend's nplike."""
    node = _NumpyArray(np.zeros(1))
    index = _Index8(np.zeros(1, dtype=np.int8))
    masked = _ByteMaskedArray(index, node, valid_when=False)
    return (vars(index).keys() == {"_nplike", "_metadata", "_data"}
            and index._nplike is node.backend.nplike and index._metadata is None
            and vars(masked) == {"_mask": index, "_content": node, "_valid_when": False,
                                 "_parameters": None, "_backend": node.backend})


_ARRAY_FIELDS = _array_fields()
#: whether results are built without the constructors (False: awkward's shape changed)
FAST = _ARRAY_FIELDS is not None and _mask_fields_as_expected()


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


def masked_node(mask, node, ak_backend):
    """``ByteMaskedArray(Index8(mask.view(int8)), node, valid_when=False)`` for a ``node``
    made by ``numpy_node`` and a contiguous bool ``mask`` of its length on the same
    device, True where the value is missing."""
    if not FAST or ak_backend is None:
        return _ByteMaskedArray(_Index8(mask.view(np.int8)), node, valid_when=False)
    index = _new(_Index8)
    index.__dict__.update(_nplike=ak_backend.nplike, _metadata=None, _data=mask.view(np.int8))
    masked = _new(_ByteMaskedArray)
    masked.__dict__.update(_mask=index, _content=node, _valid_when=False, _parameters=None,
                           _backend=ak_backend)
    return masked


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
