"""Differential tests of gk.where against awkward: every layout and dtype of
tests/jagged.py, array/number operands in either place, numbers of several Python and
numpy types; flat and contiguous-list cases run natively (no hand-off), the rest hand
off and still agree."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gpuexec.kernels as gk
from jagged import NATIVE_LAYOUTS, assert_same, jagged, with_values

NUMBERS = [0, -1, 2.5, np.inf, np.float32(1.5), np.int8(3), np.uint16(9)]
# contiguous lists over numbers, or over an IndexedArray of numbers (gathered natively)
@given(arr=st.sampled_from(NATIVE_LAYOUTS + ["listarray"]).flatmap(
           lambda layout: jagged(layout=layout)),
       seed=st.integers(0, 2**32 - 1), number=st.sampled_from(NUMBERS),
       number_first=st.booleans())
def test_where_matches_awkward(arr, seed, number, number_first):
    cond = with_values(arr, ak.Array(np.random.default_rng(seed).random(
        len(ak.flatten(arr, axis=None))) < 0.5))
    args = (cond, number, arr) if number_first else (cond, arr, number)
    gk.reset_stats()
    got = gk.where(*args)
    want = ak.where(*args)
    assert_same(got, want)


@pytest.mark.parametrize("layout", NATIVE_LAYOUTS)
@given(data=st.data())
def test_where_of_two_arrays_runs_natively(layout, data):
    arr = data.draw(jagged(layout=layout))
    seed = data.draw(st.integers(0, 2**32 - 1))
    flat = ak.flatten(arr, axis=None)
    cond = with_values(arr, ak.Array(np.random.default_rng(seed).random(len(flat)) < 0.5))
    other = with_values(arr, ak.Array(np.asarray(ak.to_numpy(flat))[::-1].copy()))
    gk.reset_stats()
    got = gk.where(cond, arr, other)
    assert gk.stats()["n_handoffs"] == 0, gk.stats()["handoff_reasons"]
    assert_same(got, ak.where(cond, arr, other))


def test_where_flat_and_empty():
    for n in (0, 1, 5):
        cond = ak.Array(np.arange(n) % 2 == 0)
        x = ak.Array(np.arange(n, dtype=np.int32))
        gk.reset_stats()
        assert_same(gk.where(cond, x, -1), ak.where(cond, x, -1))
        assert gk.stats()["n_handoffs"] == 0
