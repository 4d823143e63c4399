"""Differential tests of gk.elementwise against the same function applied by awkward
(its broadcasting, ufunc by ufunc): every layout and dtype of tests/jagged.py, numbers
of several types, tuple results, parameters; one list structure runs natively (no
hand-off), the rest hand off and still agree; bad input and bad functions raise."""

from __future__ import annotations

import warnings

import awkward as ak
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jagged import ALL_DTYPES, LAYOUTS, NATIVE_LAYOUTS, assert_same, jagged, with_values

import gpuexec.kernels as gk

C = ak.contents

FUNCTIONS = {
    "affine": lambda x, y: x * y + 1,
    "compare": lambda x, y: (x < y) | (x == 3),
    "maximum": lambda x, y: np.maximum(np.maximum(x, y), 2),
    "sqrt_abs": lambda x, y: np.sqrt(np.abs(x)) - y,
}
NUMBERS = [0, -1, 2.5, True, np.float32(1.5), np.int8(3), np.uint16(9)]


def _by_awkward(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow, sqrt of negatives
        try:
            return fn(*args)
        except Exception as err:  # noqa: BLE001 - the error itself is compared
            return err


def _ours(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            return gk.elementwise(fn, *args)
        except Exception as err:  # noqa: BLE001
            return err


def _agree(got, want):
    if isinstance(want, Exception):
        assert isinstance(got, type(want)), f"awkward raised {want!r}, we gave {got!r}"
        return
    assert not isinstance(got, Exception), f"we raised {got!r}, awkward gave {want}"
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    assert_same(got, want)


@given(arr=st.sampled_from(LAYOUTS).flatmap(lambda layout: jagged(layout=layout)),
       name=st.sampled_from(sorted(FUNCTIONS)), number=st.sampled_from(NUMBERS),
       seed=st.integers(0, 2**32 - 1), with_array=st.booleans())
def test_elementwise_matches_awkward(arr, name, number, seed, with_array):
    """Against a number, or against an array of the same lists (values reversed)."""
    fn = FUNCTIONS[name]
    if with_array:
        flat = np.asarray(ak.to_numpy(ak.flatten(arr, axis=None)))
        other = with_values(arr, ak.Array(np.random.default_rng(seed).permutation(flat)))
        args = (arr, other)
    else:
        args = (arr, number)
    _agree(_ours(fn, *args), _by_awkward(fn, *args))


@pytest.mark.parametrize("layout", NATIVE_LAYOUTS)
@given(data=st.data())
def test_elementwise_of_one_structure_runs_natively(layout, data):
    dtype = data.draw(st.sampled_from([d for d in ALL_DTYPES if d != "bool"]))
    arr = data.draw(jagged(dtype=dtype, layout=layout))
    flat = np.asarray(ak.to_numpy(ak.flatten(arr, axis=None)))
    other = with_values(arr, ak.Array(flat[::-1].copy()))

    def two_results(x, y):
        return x + y, x >= y

    gk.reset_stats()
    got = _ours(two_results, arr, other)
    assert gk.stats()["n_handoffs"] == 0, gk.stats()["handoff_reasons"]
    _agree(got, _by_awkward(two_results, arr, other))


def test_lists_are_rebuilt_from_the_offsets_given():
    """Results share the offsets buffer (a later call compares them without a pass),
    and arrays of equal offsets in separate buffers still run natively."""
    a = ak.Array([[1.0, 2.0], [], [3.0]])
    b = ak.Array([[4.0, 5.0], [], [6.0]])  # its own offsets buffer
    gk.reset_stats()
    x, y = gk.elementwise(lambda p, q: (p * q, p - q), a, b)
    assert gk.stats()["n_handoffs"] == 0
    assert x.layout.offsets.data is y.layout.offsets.data
    assert x.to_list() == [[4.0, 10.0], [], [18.0]]
    assert y.to_list() == [[-3.0, -3.0], [], [-3.0]]


def test_float32_and_python_numbers_promote_as_awkward_does():
    x = ak.Array([[np.float32(1.5)], [np.float32(2.5), np.float32(-1)]])
    for fn in (lambda v: v * 2.0, lambda v: v + 1, lambda v: v * np.float64(2.0),
               lambda v: v > 1):
        assert_same(gk.elementwise(fn, x), fn(x))


def test_parameters_are_the_common_ones():
    def lists(doc_list, doc_numbers, foo=None):
        params = {"__doc__": doc_list} | ({"foo": foo} if foo is not None else {})
        return ak.Array(C.ListOffsetArray(
            ak.index.Index64(np.array([0, 2, 3])),
            C.NumpyArray(np.array([1.0, 2.0, 3.0]), parameters={"__doc__": doc_numbers}),
            parameters=params))

    a, b = lists("lst", "x", foo=1), lists("lst", "y")
    for fn, args in [(lambda p: p * 2, (a,)), (np.sqrt, (a,)), (lambda p, q: p + q, (a, b)),
                     (lambda p, q: p + q, (a, lists("lst", "x", foo=1)))]:
        gk.reset_stats()
        got = gk.elementwise(fn, *args)
        assert gk.stats()["n_handoffs"] == 0
        want = fn(*args)
        # awkward intersects parameters through a set: their order in a type string varies
        assert_same(got, want, check_type=False)
        assert str(ak.without_parameters(got).type) == str(ak.without_parameters(want).type)
        assert got.layout.parameters == want.layout.parameters
        assert got.layout.content.parameters == want.layout.content.parameters


def test_what_awkward_must_decide_is_handed_off():
    a = ak.Array([[1.0, 2.0], [], [3.0]])
    cases = {
        "different lists": (lambda p, q: p * q, (a, ak.Array([[1.0], [2.0, 3.0], []]))),
        "event-level array against regular lists": (
            lambda p, q: p * q, (ak.to_regular(ak.Array([[1.0, 2.0], [3.0, 4.0]])),
                                 ak.Array([1.0, 2.0]))),
        "event-level array with parameters": (
            lambda p, q: p * q, (ak.with_parameter(a, "doc", "x"), ak.Array([1.0, 2.0, 3.0]))),
        "option type": (lambda p: p + 1, (ak.Array([[1.0], None, [2.0]]),)),
        "named lists": (lambda p: p + 1, (ak.with_parameter(a, "__list__", "Thing"),)),
        "numpy argument": (lambda p, q: p + q, (a, np.float64(1.0))),  # a number: native
        "Python integer outside uint8": (lambda p, q: p < q, (ak.values_astype(a, np.uint8), -1)),
    }
    for name, (fn, args) in cases.items():
        gk.reset_stats()
        got, want = _ours(fn, *args), _by_awkward(fn, *args)
        _agree(got, want)
        native = name == "numpy argument"
        assert (gk.stats()["n_handoffs"] == 0) == native, (name, gk.stats()["handoff_reasons"])


@pytest.mark.parametrize("layout", ["listoffset", "sliced", "indexed_below", "depth3"])
@given(data=st.data())
def test_outer_arrays_broadcast_into_the_lists_natively(layout, data):
    """An array of one value per event (and, for lists of lists, one per outer list)
    against the lists, in either argument position: what awkward's broadcasting gives."""
    dtype = data.draw(st.sampled_from(["int32", "int64", "float32", "float64", "bool"]))
    arr = data.draw(jagged(dtype=dtype, layout=layout))
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    outers = [ak.Array(rng.integers(-3, 4, size=len(arr)))]
    if arr.ndim == 3:
        outers.append(ak.values_astype(with_values(ak.num(arr, axis=2), ak.Array(
            rng.random(int(ak.sum(ak.num(arr, axis=1)))))), np.float32))
    for outer in outers:
        for fn, args in [(lambda x, e: x * e + 1, (arr, outer)),
                         (lambda e, x, f: (x != e) & (x != f), (outer, arr, outer))]:
            gk.reset_stats()
            got = _ours(fn, *args)
            assert gk.stats()["n_handoffs"] == 0, gk.stats()["handoff_reasons"]
            _agree(got, _by_awkward(fn, *args))
    # several outer arrays in one call (one broadcast index per depth, shared): distinct
    # values, and on lists of lists one array of each depth
    others = [ak.Array(rng.integers(-3, 4, size=len(arr)))] + outers[1:]
    for other in others:
        args = (outers[0], arr, other)
        got = _ours(lambda e, x, f: x * e - f, *args)
        assert gk.stats()["n_handoffs"] == 0, gk.stats()["handoff_reasons"]
        _agree(got, _by_awkward(lambda e, x, f: x * e - f, *args))


def test_flat_arrays_and_empty_lists():
    for n in (0, 1, 5):
        x = ak.Array(np.arange(n, dtype=np.int32))
        gk.reset_stats()
        assert_same(gk.elementwise(lambda v, w: v * w - 1, x, x), x * x - 1)
        assert gk.stats()["n_handoffs"] == 0
    empty = ak.Array([[], [], []])
    assert_same(gk.elementwise(lambda v: v + 1, empty), empty + 1)


def test_a_function_that_is_not_elementwise_is_refused():
    a = ak.Array([[1.0, 2.0], [], [3.0]])
    with pytest.raises(ValueError, match="not one value per element"):
        gk.elementwise(lambda v: v.sum(), a)
    with pytest.raises(ValueError, match="not one value per element"):
        gk.elementwise(lambda v: v[:1], a)


def test_bad_offsets_raise_naming_them():
    bad = ak.Array(C.ListOffsetArray(ak.index.Index64(np.array([0, 3, 1, 4])),
                                     C.NumpyArray(np.arange(4.0))), check_valid=False)
    with pytest.raises(ValueError, match="offsets are not monotonically increasing"):
        gk.elementwise(lambda v: v + 1, bad)


def test_stats_time_outermost_calls_per_family():
    """gk.stats()["seconds"]: seconds in public calls per api family and backend, the
    outermost call only (a call made inside another is in its caller's seconds)."""
    import time as _time

    values = ak.Array([[1.0, 2.0], [], [3.0]])
    gk.reset_stats()
    start = _time.perf_counter()
    gk.sum(values, axis=1)
    gk.flatten(values, axis=1)
    wall = _time.perf_counter() - start
    seconds = gk.stats()["seconds"]
    assert set(seconds) == {"reductions[cpu]", "structure[cpu]"}
    assert 0 < sum(seconds.values()) <= wall
