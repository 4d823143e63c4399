"""Differential tests of the ten gk reductions against awkward: every layout of
tests/jagged.py, every dtype, option-type content inside the lists, keepdims,
mask_identity, initial, axis=None, and the edge cases (empty arrays, all-empty lists,
one huge list, NaN/inf/-0.0, integer extremes and overflow, bool). Every supported case
runs with zero hand-offs to awkward; a non-innermost axis is handed off and counted."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gpuexec.kernels as gk
from jagged import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, LAYOUTS, assert_same, build, jagged

C = ak.contents

# awkward's own axis=None sums (inf - inf, float overflow) warn through numpy, as ours do
pytestmark = [pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")]

FUNCTIONS = ["sum", "prod", "min", "max", "argmin", "argmax", "count", "count_nonzero",
             "any", "all"]
OPTION_KINDS = ["indexedoption", "bytemasked", "bitmasked", "unmasked"]


def native(fname, array, **kwargs):
    """gk.<fname>(array, **kwargs), checked against ak.<fname> and for zero hand-offs."""
    want = getattr(ak, fname)(array, **kwargs)
    gk.reset_stats()
    got = getattr(gk, fname)(array, **kwargs)
    stats = gk.stats()
    assert stats["n_handoffs"] == 0, stats["handoff_reasons"]
    assert stats["n_calls"] == 1
    assert_same(got, want)
    return got


# -- option-type content inside the lists ------------------------------------------------
def with_missing(array, kind, seed):
    """``array`` with its innermost list contents made option-typed (about a third None)."""
    rng = np.random.default_rng(seed)

    def convert(node):
        if node.is_list and node.content.purelist_depth == 1:
            content = node.content
            n = content.length
            valid = rng.random(n) >= 0.35
            if kind == "indexedoption":
                index = np.where(valid, np.arange(n), -1).astype(np.int64)
                option = C.IndexedOptionArray.simplified(ak.index.Index64(index), content)
            elif kind == "bytemasked":
                option = C.ByteMaskedArray.simplified(ak.index.Index8(valid.astype(np.int8)),
                                                      content, valid_when=True)
            elif kind == "bitmasked":
                bits = np.packbits(~valid, bitorder="little")
                option = C.BitMaskedArray.simplified(ak.index.IndexU8(bits), content,
                                                     valid_when=False, length=n, lsb_order=True)
            else:
                option = C.UnmaskedArray.simplified(content)
            return node.copy(content=option)
        if node.is_list or node.is_indexed or node.is_option:
            return node.copy(content=convert(node.content))
        raise AssertionError(type(node))

    return ak.Array(convert(array.layout))


@st.composite
def options(draw, fname, depth, dtype):
    kwargs = {}
    axis = draw(st.sampled_from([-1, None, depth - 1]))
    kwargs["axis"] = axis
    if draw(st.booleans()):
        kwargs["keepdims"] = draw(st.booleans())
    if draw(st.booleans()):
        kwargs["mask_identity"] = draw(st.booleans())
    if fname in ("min", "max") and draw(st.booleans()):
        signed = np.dtype(dtype).kind in "if"
        kwargs["initial"] = draw(st.sampled_from([0, 1, 100] + ([-3] if signed else [])))
    return kwargs


# -- hypothesis: function x dtype, layout drawn (every combination is also run below) ----
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("fname", FUNCTIONS)
@given(data=st.data())
def test_differential(fname, dtype, data):
    layout = data.draw(st.sampled_from(LAYOUTS), label="layout")
    array = data.draw(jagged(dtype=dtype, layout=layout), label="array")
    missing = data.draw(st.sampled_from([None] + OPTION_KINDS), label="missing")
    if missing is not None and layout != "regular":
        array = with_missing(array, missing, seed=len(array))
    kwargs = data.draw(options(fname, array.layout.purelist_depth, dtype), label="kwargs")
    if (layout == "regular" and kwargs["axis"] is None and kwargs.get("keepdims")
            and ak.count(array, axis=None) == 0):
        return  # handed off (awkward keeps 0-length regular dimensions): see below
    native(fname, array, **kwargs)


# -- every function x dtype x layout on one fixed array -------------------------------------
def _fixed_values(dtype, n, seed):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(n) < 0.5
    if dt.kind == "f":
        v = rng.normal(0, 10, n).astype(dt)
        v[rng.random(n) < 0.1] = np.nan
        return v
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_combination(layout, dtype):
    counts = [3, 0, 1, 9, 2, 0, 5, 12, 1, 4, 0, 7]
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    array = build(layout, offsets, _fixed_values(dtype, int(offsets[-1]), seed=len(layout)))
    variants = [array]
    if layout != "regular":
        variants.append(with_missing(array, "indexedoption", seed=3))
    for arr in variants:
        for fname in FUNCTIONS:
            for axis in (-1, None):
                native(fname, arr, axis=axis)
            native(fname, arr, axis=-1, keepdims=True, mask_identity=True)


# -- edge cases ----------------------------------------------------------------------------
def _lists(values, dtype):
    return ak.values_astype(ak.Array(values), dtype)


@pytest.mark.parametrize("fname", FUNCTIONS)
@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_empty_and_all_empty(fname, dtype):
    empty = ak.Array(C.ListOffsetArray(ak.index.Index64(np.zeros(1, np.int64)),
                                       C.NumpyArray(np.zeros(0, dtype))))
    all_empty = ak.Array(C.ListOffsetArray(ak.index.Index64(np.zeros(6, np.int64)),
                                           C.NumpyArray(np.zeros(0, dtype))))
    for arr in (empty, all_empty, empty[:0]):
        for axis in (-1, 1, None):
            for mask_identity in (False, True):
                for keepdims in (False, True):
                    native(fname, arr, axis=axis, mask_identity=mask_identity, keepdims=keepdims)


@pytest.mark.parametrize("fname", FUNCTIONS)
def test_unknown_type_lists(fname):
    arr = ak.Array([[], [], []])  # EmptyArray content
    for axis in (-1, None):
        native(fname, arr, axis=axis)


@pytest.mark.parametrize("fname", FUNCTIONS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_inf_signed_zero(fname, dtype):
    nan, inf = np.nan, np.inf
    arr = _lists([[nan, 1.0], [1.0, nan], [nan], [nan, nan], [1.0, nan, 3.0], [3.0, nan, 1.0],
                  [inf, -inf], [-inf], [inf, inf, nan], [-0.0, 0.0], [0.0, -0.0], [-0.0],
                  [nan, -inf], [], [2.0, 2.0, -2.0, -2.0], [1e38, 1e38, -1e38]], dtype)
    for axis in (-1, None):
        for mask_identity in (False, True):
            native(fname, arr, axis=axis, mask_identity=mask_identity)
    native(fname, arr[[0, 13]], axis=None)


@pytest.mark.parametrize("fname", ["min", "max"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint16", "int64"])
def test_initial(fname, dtype):
    values = [[1, 5, 3], [], [7], [0, 0], [2, 9, 4, 4, 9, 2, 8, 1, 6, 5]]
    arr = _lists(values, dtype)
    for initial in (0, 4, 10, np.int64(2)):
        for mask_identity in (False, True):
            for axis in (-1, None):
                native(fname, arr, axis=axis, initial=initial, mask_identity=mask_identity)
    if not dtype.startswith("float"):
        # awkward passes ``initial`` as a C integer: a float one is its error to raise
        gk.reset_stats()
        with pytest.raises(Exception) as ours:
            getattr(gk, fname)(arr, axis=-1, initial=1.5)
        with pytest.raises(Exception) as theirs:
            getattr(ak, fname)(arr, axis=-1, initial=1.5)
        assert type(ours.value) is type(theirs.value)
        assert gk.stats()["n_handoffs"] == 1
    else:
        for initial in (np.nan, -np.inf, 0.1, 3.5):
            native(fname, _lists([[1.0, np.nan], [], [3.0, 4.0]], dtype), axis=-1,
                   initial=initial, mask_identity=False)


@pytest.mark.parametrize("fname", FUNCTIONS)
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_extremes_and_overflow(fname, dtype):
    info = np.iinfo(dtype)
    big = [[info.max, info.max], [info.min, info.min, info.min], [info.max, 1],
           [info.min, -1 if info.min < 0 else 0], [info.max] * 11, [info.min, info.max],
           [2, info.max, 3, info.max], []]
    arr = ak.Array(C.ListOffsetArray(
        ak.index.Index64(np.cumsum([0] + [len(v) for v in big])),
        C.NumpyArray(np.array([x for v in big for x in v], dtype=dtype))))
    for axis in (-1, None):
        native(fname, arr, axis=axis)


def test_int64_sum_wraps_like_awkward():
    m = np.iinfo(np.int64).max
    arr = ak.Array([[m, 1], [m, m, 2]])
    got = native("sum", arr, axis=1)
    assert got.to_list() == [np.iinfo(np.int64).min, 0]
    native("prod", arr, axis=1)
    native("prod", ak.Array([[2**40, 2**40, 3]]), axis=None)


@pytest.mark.parametrize("fname", FUNCTIONS)
def test_bool(fname):
    arr = ak.Array([[True, False, True], [], [False], [True], [False, False],
                    [True] * 10, [True] * 9 + [False]])
    for axis in (-1, None):
        for mask_identity in (False, True):
            for keepdims in (False, True):
                native(fname, arr, axis=axis, mask_identity=mask_identity, keepdims=keepdims)
    if fname in ("min", "max"):
        native(fname, arr, axis=-1, initial=0)


@pytest.mark.parametrize("fname", FUNCTIONS)
def test_one_huge_list_takes_the_parallel_path(fname, monkeypatch):
    """A list much longer than the unrolled slots, in an array big enough for threads."""
    from gpuexec.kernels.cpu import threads

    monkeypatch.setattr(threads, "PARALLEL_THRESHOLD", 1000)
    rng = np.random.default_rng(5)
    counts = np.zeros(40, np.int64)
    counts[17] = 30_000
    counts[3] = 5
    offsets = np.zeros(41, np.int64)
    np.cumsum(counts, out=offsets[1:])
    values = rng.normal(size=int(offsets[-1]))
    arr = build("listoffset", offsets, values)
    previous = gk.get_num_threads()
    gk.set_num_threads(2)
    try:
        for axis in (-1, None):
            native(fname, arr, axis=axis)
    finally:
        gk.set_num_threads(previous)


def test_records_fields_and_depth3_option():
    events = ak.zip({"pt": ak.Array([[1.0, 5.0], [], [3.0, None, 2.0]]),
                     "q": ak.Array([[1, -1], [], [1, 1, -1]])}, depth_limit=1)
    native("max", events.pt, axis=1)
    native("argmax", events.pt, axis=1, keepdims=True)
    native("sum", events.q, axis=-1)
    deep = ak.Array([[[1, 2], None, [3]], None, [[], [None, 4]]])
    for fname in FUNCTIONS:
        native(fname, deep, axis=-1)
        native(fname, deep, axis=2, keepdims=True, mask_identity=True)
        native(fname, deep, axis=None)


def test_flat_arrays_reduce_fully():
    for arr in (ak.Array([3.0, 1.0, np.nan]), ak.Array([1, None, 3]), ak.Array(np.arange(5))):
        for fname in FUNCTIONS:
            for axis in (0, -1, None):
                native(fname, arr, axis=axis)
            native(fname, arr, axis=0, keepdims=True)


def test_argmax_positions_count_none_slots():
    arr = ak.Array([[None, 1, 3], [3, None, 5, None, 7], [None], [None, None, 2]])
    assert native("argmax", arr, axis=1).to_list() == [2, 4, None, 2]
    assert native("argmin", arr, axis=None) == 1


def test_highlevel_false_and_behavior():
    arr = ak.Array([[1.0, 2.0], [3.0]], attrs={"origin": "test"})
    out = gk.sum(arr, axis=1, highlevel=False)
    assert isinstance(out, ak.contents.Content)
    assert gk.sum(arr, axis=1).attrs == ak.sum(arr, axis=1).attrs


# -- hand-offs -----------------------------------------------------------------------------
@pytest.mark.parametrize("fname", FUNCTIONS)
def test_non_innermost_axis_is_handed_off(fname):
    depth2 = ak.Array([[1.0, 2.0], [], [3.0]])
    depth3 = ak.Array([[[1, 2], [3]], [[4]]])
    for arr, axis in ((depth2, 0), (depth3, 1), (depth3, 0), (depth3, -2)):
        want = getattr(ak, fname)(arr, axis=axis)
        gk.reset_stats()
        got = getattr(gk, fname)(arr, axis=axis)
        stats = gk.stats()
        assert stats["n_handoffs"] == 1
        assert fname in stats["handoffs"]
        assert_same(got, want)


def test_keepdims_axis_none_over_empty_regular_is_handed_off():
    empty = ak.Array(C.RegularArray(C.NumpyArray(np.zeros(0, np.int16)), 0, zeros_length=2))
    want = ak.sum(empty, axis=None, keepdims=True)
    gk.reset_stats()
    assert_same(gk.sum(empty, axis=None, keepdims=True), want)
    assert gk.stats()["n_handoffs"] == 1


def test_unsupported_dtypes_and_records_are_handed_off():
    for arr in (ak.Array([[1 + 2j], []]), ak.Array([["a", "bc"], []]),
                ak.Array([[np.datetime64("2020-01-01")]])):
        gk.reset_stats()
        try:
            gk.count(arr, axis=-1)
        except Exception:  # noqa: BLE001 - awkward's own answer (an error) is fine here
            pass
        assert gk.stats()["n_handoffs"] == 1


def test_signatures_match_awkward():
    import inspect

    for fname in FUNCTIONS:
        ours = inspect.signature(getattr(gk, fname)).parameters
        theirs = inspect.signature(getattr(ak, fname)).parameters
        for name, param in theirs.items():
            assert ours[name].default == param.default, (fname, name)
            assert ours[name].kind == param.kind, (fname, name)
        assert ours["backend"].default is None


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_float_sums_keep_the_sequential_order(dtype):
    # order-sensitive sums: a plain per-list loop in list order gives these bits
    arr = _lists([[1e8, 1.0, -1e8, 1e-8] * 3, [0.1] * 17, [1e20, 3.0, -1e20]], dtype)
    native("sum", arr, axis=1)
    native("prod", arr, axis=1)
    native("sum", arr, axis=None)
