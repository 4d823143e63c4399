"""Differential tests of gk.fill_none against awkward: option nodes of every kind above
the numbers (IndexedOptionArray, ByteMaskedArray, BitMaskedArray, UnmaskedArray) under
the list layouts of tests/jagged.py, every dtype, fill values of several Python/numpy
types; those cases run natively (no hand-off). Other layouts hand off and still agree."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gpuexec.kernels as gk
from jagged import ALL_DTYPES, assert_same, jagged

C = ak.contents
LIST_LAYOUTS = ["listoffset", "sliced", "listarray", "regular", "depth3"]
OPTION_KINDS = ["indexed", "bytemasked", "bitmasked", "unmasked"]
FILL_VALUES = [0, -1, 7, 2.5, np.inf, np.nan, np.float32(1.5), np.int8(3), np.uint16(9)]


def _option_leaf(node, kind, rng):
    """``node`` with its numbers wrapped in an option node of ``kind`` (some None)."""
    if isinstance(node, C.NumpyArray):
        n = node.length
        valid = rng.random(n) < 0.6
        if kind == "indexed":
            index = np.where(valid, np.arange(n), -1).astype(np.int64)
            return C.IndexedOptionArray(ak.index.Index64(index), node)
        if kind == "bytemasked":
            return C.ByteMaskedArray(ak.index.Index8(valid.astype(np.int8)), node, valid_when=True)
        if kind == "bitmasked":
            bits = np.packbits(~valid, bitorder="little")
            return C.BitMaskedArray(ak.index.IndexU8(bits), node, valid_when=False, length=n,
                                    lsb_order=True)
        return C.UnmaskedArray(node)
    return node.copy(content=_option_leaf(node.content, kind, rng))


@st.composite
def optional_leaves(draw):
    arr = draw(jagged(layout=draw(st.sampled_from(LIST_LAYOUTS))))
    kind = draw(st.sampled_from(OPTION_KINDS))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return ak.Array(_option_leaf(arr.layout, kind, rng))


@given(arr=optional_leaves(), value=st.sampled_from(FILL_VALUES), axis=st.sampled_from([-1, None]))
def test_fill_none_at_the_numbers_matches_awkward_natively(arr, value, axis):
    gk.reset_stats()
    got = gk.fill_none(arr, value, axis=axis)
    if arr.layout.purelist_depth > 1 or axis is None:
        assert gk.stats()["n_handoffs"] == 0, gk.stats()["handoff_reasons"]
    assert_same(got, ak.fill_none(arr, value, axis=axis))


def test_fill_none_of_an_unmasked_leaf_keeps_its_dtype_whatever_the_value():
    """An UnmaskedArray holds no None: awkward keeps uint8 even for a fill value of -1
    (found by hypothesis on an empty array: the fill was built in uint8 and overflowed)."""
    for values in (np.zeros(0, np.uint8), np.arange(5, dtype=np.uint8)):
        inner = ak.contents.UnmaskedArray(ak.contents.NumpyArray(values))
        offsets = ak.index.Index64(np.array([0, len(values)], np.int64))
        arr = ak.Array(ak.contents.ListOffsetArray(offsets, inner))
        assert_same(gk.fill_none(arr, -1, axis=-1), ak.fill_none(arr, -1, axis=-1))


@given(arr=jagged(), value=st.sampled_from(FILL_VALUES))
def test_fill_none_on_any_layout_matches_awkward(arr, value):
    for axis in (-1, 0, 1, None):
        if axis is not None and axis >= arr.layout.purelist_depth:
            continue
        assert_same(gk.fill_none(arr, value, axis=axis), ak.fill_none(arr, value, axis=axis))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_fill_none_empty_and_all_none(dtype):
    for arr in (ak.Array(C.IndexedOptionArray(ak.index.Index64(np.full(4, -1, np.int64)),
                                              C.NumpyArray(np.zeros(0, dtype)))),
                ak.Array(C.ListOffsetArray(ak.index.Index64(np.zeros(1, np.int64)),
                                           C.UnmaskedArray(C.NumpyArray(np.zeros(0, dtype)))))):
        for value in (0, 1.5):
            assert_same(gk.fill_none(arr, value), ak.fill_none(arr, value))


def test_fill_none_with_a_non_number_hands_off():
    arr = ak.Array([[1.0, None], []])
    gk.reset_stats()
    assert_same(gk.fill_none(arr, "x"), ak.fill_none(arr, "x"))
    assert gk.stats()["n_handoffs"] == 1
