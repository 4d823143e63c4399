"""Differential tests of gk.take / gk.filter / gk.to_packed against awkward: every
layout of tests/jagged.py, every dtype, records, option-typed indices and masks, empty
arrays, all-empty lists and one huge list; every supported case runs with zero
hand-offs to awkward."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpuexec.kernels as gk
from jagged import ALL_DTYPES, LAYOUTS, assert_same, build, jagged

C = ak.contents


def native(fn, *args):
    """Run a gk call and check that it did not hand off to awkward."""
    gk.reset_stats()
    out = fn(*args)
    s = gk.stats()
    assert s["n_handoffs"] == 0, s["handoff_reasons"]
    return out


# -- index / mask builders (derived from the array, so they fit its structure) -------------
def masks(draw, arr):
    """A jagged bool mask of ``arr``'s structure, sometimes option-typed."""
    kind = draw(st.sampled_from(["values", "every_nth", "all", "none"]))
    if kind == "values":
        flat = ak.to_numpy(ak.flatten(arr, axis=None))
        if len(flat) == 0:
            m = ak.local_index(arr, axis=-1) % 2 == 0
        elif flat.dtype == np.bool_:
            m = arr == bool(draw(st.booleans()))
        else:
            pivot = flat[draw(st.integers(0, len(flat) - 1))]
            m = arr >= pivot
    else:
        local = ak.local_index(arr, axis=-1)
        if kind == "every_nth":
            m = (local + draw(st.integers(0, 3))) % draw(st.integers(1, 4)) == 0
        else:
            m = local >= 0 if kind == "all" else local < 0
    if draw(st.booleans()):  # var-typed mask even where the array is regular
        m = ak.from_regular(m, axis=-1)
    if draw(st.integers(0, 3)) == 0:  # option-typed mask: None kept as None
        m = ak.mask(m, ak.local_index(m, axis=-1) % 3 != 1)
    return m


def jagged_indices(draw, arr):
    """A jagged int index: a per-list permutation, a prefix of it, picks that repeat,
    negative local indices, or a sub-selection."""
    perm = ak.from_regular(ak.argsort(arr, axis=-1, stable=True), axis=-1)
    kind = draw(st.sampled_from(["perm", "prefix", "repeat", "negative", "subset"]))
    if kind == "prefix":
        return perm[..., : draw(st.integers(0, 3))]
    if kind == "repeat":
        return ak.concatenate([perm, perm[..., ::-1]], axis=-1)
    if kind == "negative":
        return perm - ak.num(arr, axis=-1)
    if kind == "subset":
        return perm[perm % 2 == 1]
    return perm


# -- take --------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
@given(data=st.data())
def test_take_jagged_index(layout, data):
    arr = data.draw(jagged(layout=layout))
    idx = jagged_indices(data.draw, arr)
    assert_same(native(gk.take, arr, idx), arr[idx])
    node = arr.layout
    if isinstance(node, C.ListOffsetArray) and isinstance(node.content, C.NumpyArray):
        # a sibling column over the same offsets, taken at the same index: the remembered
        # positions, gathered from its own content
        values = np.arange(node.content.length, dtype=np.float64)[::-1].copy()
        sibling = ak.Array(C.ListOffsetArray(node.offsets, C.NumpyArray(values)))
        assert_same(native(gk.take, sibling, idx), sibling[idx])


@pytest.mark.parametrize("layout", LAYOUTS)
@given(data=st.data())
def test_take_argmax_keepdims(layout, data):
    """The per-list pick: option-type index, None for empty lists."""
    arr = data.draw(jagged(layout=layout))
    fn = data.draw(st.sampled_from([ak.argmax, ak.argmin]))
    idx = fn(arr, axis=-1, keepdims=True)
    assert_same(native(gk.take, arr, idx), arr[idx])


@pytest.mark.parametrize("layout", LAYOUTS)
@given(data=st.data())
def test_take_option_jagged_index(layout, data):
    arr = data.draw(jagged(layout=layout))
    idx = jagged_indices(data.draw, arr)
    idx = ak.mask(idx, ak.local_index(idx, axis=-1) % 2 == 0)  # var * ?int64
    assert_same(native(gk.take, arr, idx), arr[idx])


@pytest.mark.parametrize("layout", LAYOUTS)
@given(data=st.data())
def test_take_events(layout, data):
    """1-D integer index: lists carried across events (negative indices allowed)."""
    arr = data.draw(jagged(layout=layout))
    n = len(arr)
    dtype = data.draw(st.sampled_from(["int64", "int32", "int8", "uint16"]))
    lo = 0 if dtype.startswith("u") else -n
    idx = np.array(data.draw(st.lists(st.integers(lo, n - 1), max_size=30) if n else st.just([])),
                   dtype=dtype)
    assert_same(native(gk.take, arr, idx), arr[idx])
    assert_same(native(gk.take, arr, ak.Array(idx)), arr[ak.Array(idx)])


@given(data=st.data())
def test_take_depth3_picks_sublists(data):
    """A depth-2 index on a depth-3 array picks whole inner lists."""
    arr = data.draw(jagged(layout="depth3"))
    idx = ak.argsort(ak.num(arr, axis=2), axis=1, stable=True)[:, ::-1]
    assert_same(native(gk.take, arr, idx), arr[idx])
    m = ak.num(arr, axis=2) > 1
    assert_same(native(gk.filter, arr, m), arr[m])


def test_take_regular_index_is_numpy_style():
    """A regular index without missing values gathers rows, like numpy (awkward's rule)."""
    x = ak.Array([[1.0, 2.0, 3.0], [], [4.0, 5.0]])
    idx = ak.Array(C.RegularArray(C.NumpyArray(np.array([1, 0, -1, 2])), 2))
    assert_same(native(gk.take, x, idx), x[idx])
    m = ak.Array(C.RegularArray(C.NumpyArray(np.array([True, False, False, False, True])), 1))[:3]
    assert_same(native(gk.filter, x, m), x[m])
    x2 = ak.to_regular(ak.Array([[1, 2, 3], [4, 5, 6]]), axis=1)
    m2 = ak.to_regular(ak.Array([[True, False, True], [False, True, False]]), axis=1)
    assert_same(native(gk.filter, x2, m2), x2[m2])
    assert_same(native(gk.take, x2, np.array([[1], [0]])), x2[np.array([[1], [0]])])


# -- filter ------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
@given(data=st.data())
def test_filter_jagged_mask(layout, data):
    arr = data.draw(jagged(layout=layout))
    m = masks(data.draw, arr)
    assert_same(native(gk.filter, arr, m), arr[m])
    assert_same(native(gk.take, arr, m), arr[m])  # take with a bool index is a filter


@given(arr=jagged(), data=st.data())
def test_filter_events(arr, data):
    m = np.array(data.draw(st.lists(st.booleans(), min_size=len(arr), max_size=len(arr))),
                 dtype=bool)
    assert_same(native(gk.filter, arr, m), arr[m])


# -- every dtype, deterministic ----------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_dtype(dtype, layout):
    rng = np.random.default_rng(7)
    counts = np.array([3, 0, 1, 5, 0, 2, 4])
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    content = rng.integers(0, 100, offsets[-1]).astype(dtype)
    arr = build(layout, offsets, content)
    m = ak.from_regular(ak.local_index(arr, axis=-1) % 2 == 0, axis=-1)
    assert_same(native(gk.filter, arr, m), arr[m])
    i = ak.argmax(arr, axis=-1, keepdims=True)
    assert_same(native(gk.take, arr, i), arr[i])
    j = ak.argsort(arr, axis=-1, stable=True)
    assert_same(native(gk.take, arr, j), arr[j])
    assert_same(native(gk.take, arr, np.array([-1, 0, 2])), arr[np.array([-1, 0, 2])])
    assert_same(native(gk.to_packed, arr), ak.to_packed(arr))


# -- edge sizes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("counts", [[], [0, 0, 0], [0, 4000, 0], [1] * 50])
def test_edge_sizes(layout, counts):
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    content = np.linspace(-1, 1, int(offsets[-1]))
    arr = build(layout, offsets, content)
    m = ak.from_regular(arr > 0, axis=-1)
    assert_same(native(gk.filter, arr, m), arr[m])
    i = ak.argmax(arr, axis=-1, keepdims=True)
    assert_same(native(gk.take, arr, i), arr[i])
    j = ak.from_regular(ak.local_index(arr, axis=-1)[..., ::-1], axis=-1)
    assert_same(native(gk.take, arr, j), arr[j])
    assert_same(native(gk.to_packed, arr), ak.to_packed(arr))
    assert_same(native(gk.take, arr, np.arange(len(arr))[::-1]), arr[np.arange(len(arr))[::-1]])


# -- records -----------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", [x for x in LAYOUTS if x not in ("depth3", "regular")])
@given(data=st.data())
def test_records(layout, data):
    """Lists of records (events.Muon[mask]): the record is carried lazily, like awkward."""
    arr = data.draw(jagged(dtype="float32", layout=layout))
    rec = ak.zip({"pt": arr, "idx": ak.local_index(arr, axis=-1)}, with_name="Thing")
    m = masks(data.draw, arr)
    got = native(gk.filter, rec, m)
    assert_same(got, rec[m])
    assert_same(got.pt, rec[m].pt)
    i = ak.argmax(arr, axis=-1, keepdims=True)
    assert_same(native(gk.take, rec, i), rec[i])
    j = jagged_indices(data.draw, arr)
    assert_same(native(gk.take, rec, j), rec[j])
    assert_same(native(gk.take, rec, np.arange(len(rec))[::-1]), rec[np.arange(len(rec))[::-1]])
    assert_same(native(gk.to_packed, rec), ak.to_packed(rec))


def test_record_fields_carried_lazily():
    rec = ak.zip({"pt": ak.Array([[1.0, 2.0], [], [3.0]]), "eta": ak.Array([[0.1, 0.2], [], [0.3]])})
    out = native(gk.filter, rec, rec.pt > 1.5)
    assert isinstance(out.layout.content, C.IndexedArray)
    assert isinstance(out.layout.content.content, C.RecordArray)


# -- to_packed ----------------------------------------------------------------------------------
def _assert_packed(node):
    if isinstance(node, C.ListOffsetArray):
        assert node.offsets[0] == 0 and node.content.length == node.offsets[-1]
    if isinstance(node, (C.ListArray, C.IndexedArray)):
        raise AssertionError(f"{type(node).__name__} left in a packed layout")
    if isinstance(node, C.NumpyArray):
        assert node.data.flags.c_contiguous
    if isinstance(node, C.RecordArray):
        for c in node.contents:
            assert c.length == node.length
            _assert_packed(c)
    elif hasattr(node, "content"):
        _assert_packed(node.content)


@pytest.mark.parametrize("layout", LAYOUTS)
@given(data=st.data())
def test_to_packed(layout, data):
    arr = data.draw(jagged(layout=layout))
    got = native(gk.to_packed, arr)
    assert_same(got, ak.to_packed(arr))
    _assert_packed(got.layout)
    sub = arr[::2]  # sliced outer dimension
    assert_same(native(gk.to_packed, sub), ak.to_packed(sub))
    _assert_packed(gk.to_packed(sub).layout)


def test_to_packed_sliced_offsets():
    arr = build("sliced", np.array([0, 2, 2, 5], np.int64), np.arange(5, dtype=np.int32))
    got = native(gk.to_packed, arr)
    assert got.layout.offsets[0] == 0 and got.layout.content.length == 5
    assert_same(got, ak.to_packed(arr))


# -- call conventions -----------------------------------------------------------------------------
def test_index_as_python_lists_and_layouts():
    x = ak.Array([[1, 2, 3], [], [4, 5]])
    assert_same(native(gk.take, x, [[0, -1], [], [1]]), x[[[0, -1], [], [1]]])
    assert_same(native(gk.take, x, [2, 0]), x[[2, 0]])
    assert_same(native(gk.filter, x.layout, (x > 2).layout), x[x > 2])
    assert_same(native(gk.take, x, [[], [], []]), x[[[], [], []]])


def test_behavior_and_backend_argument():
    x = ak.Array([[1.0, 2.0], [3.0]], with_name="Thing", behavior={})
    out = gk.filter(x, x > 1.5, backend="cpu")
    assert out.behavior == x.behavior
    assert_same(out, x[x > 1.5])


def test_unsupported_cases_hand_off():
    x = ak.Array([[1, 2, 3], [], [4, 5]])
    gk.reset_stats()
    assert gk.take(x, 1).tolist() == x[1].tolist()  # scalar index: awkward's job
    assert gk.stats()["n_handoffs"] == 1


@settings(max_examples=20)
@given(arr=jagged(max_lists=20))
def test_results_are_valid_layouts(arr):
    """Results pass awkward's own validity check (they feed later calls)."""
    out = gk.filter(arr, ak.from_regular(ak.local_index(arr, axis=-1) % 2 == 0, axis=-1))
    assert ak.validity_error(out) == ""


def test_columns_of_one_collection_filtered_by_one_mask_share_their_lists():
    """Columns that share their offsets (one NanoEvents collection), selected by one event
    mask: the kept lists are laid out once, and the results share one offsets buffer
    (later element-wise work and offsets checks see one structure)."""
    offsets = ak.index.Index64(np.array([0, 2, 2, 5, 6], dtype=np.int64))
    columns = [ak.Array(ak.contents.ListOffsetArray(offsets, ak.contents.NumpyArray(
        np.arange(6, dtype=dtype)))) for dtype in (np.float32, np.int32, np.float64)]
    mask = ak.Array(np.array([True, False, True, True]))
    with gk.counting() as seen:
        picked = [gk.filter(c, mask) for c in columns]
    assert seen["kernels"].get("compact_offsets") == 1, seen["kernels"]
    assert len({id(p.layout.offsets.data) for p in picked}) == 1
    for got, column in zip(picked, columns):
        assert_same(got, column[mask])
    # another mask, or another collection, is laid out anew
    other = ak.Array(np.array([False, True, True, True]))
    assert_same(gk.filter(columns[0], other), columns[0][other])
    assert gk.filter(columns[0], other).layout.offsets.data is not picked[0].layout.offsets.data


def test_remembered_selections_go_with_their_buffers():
    import gc

    from gpuexec.kernels import layout as L
    from gpuexec.kernels.api import indexing as I

    gc.collect()
    before = (len(L._selections._entries), len(I._kept_rows._entries))
    column = ak.Array([[1.0, 2.0], [], [3.0]])
    mask = ak.Array(np.array([True, False, True]))
    gk.filter(column, mask)
    during = (len(L._selections._entries), len(I._kept_rows._entries))
    assert during[0] > before[0] and during[1] > before[1]
    del column, mask
    gc.collect()
    assert (len(L._selections._entries), len(I._kept_rows._entries)) == before


def test_a_remembered_selection_still_checks_its_lists():
    """Two arrays sharing an offsets buffer, the second over a content too short for it:
    the second selection raises although the first was remembered."""
    offsets = ak.index.Index64(np.array([0, 2, 4], dtype=np.int64))
    good = ak.Array(ak.contents.ListOffsetArray(offsets, ak.contents.NumpyArray(np.arange(4.0))))
    bad = ak.Array(ak.contents.ListOffsetArray(offsets, ak.contents.NumpyArray(np.arange(3.0))),
                   check_valid=False)
    mask = ak.Array(np.array([True, True]))
    assert_same(gk.filter(good, mask), good[mask])
    with pytest.raises(ValueError, match="exceeds the length of the content"):
        gk.filter(bad, mask)


def _pairs_of(offsets):
    """Columns of one collection (one offsets buffer) and the members of their pairs."""
    columns = [ak.Array(ak.contents.ListOffsetArray(offsets, ak.contents.NumpyArray(
        np.arange(6, dtype=dtype) * 1.5))) for dtype in (np.float32, np.float64, np.int32)]
    pairs = ak.argcombinations(columns[0], 2, axis=1)
    return columns, pairs["0"], pairs["1"]


def test_columns_of_one_collection_taken_at_one_index_share_its_positions():
    """The members of pairs of several columns that share their offsets: the index's
    positions are worked out once per index (not per column), and every result is
    awkward's. Another index over the same lists is worked out anew."""
    offsets = ak.index.Index64(np.array([0, 3, 3, 5, 6], dtype=np.int64))
    columns, first, second = _pairs_of(offsets)
    with gk.counting() as seen:
        got = [gk.take(c, i) for i in (first, second) for c in columns]
    assert seen["kernels"].get("local_to_global") == 2, seen["kernels"]
    for (i, c), g in zip([(i, c) for i in (first, second) for c in columns], got):
        assert_same(g, c[i])
    flipped = ak.values_astype(2 - second, np.int64)  # same lists, other values
    with gk.counting() as seen:
        assert_same(gk.take(columns[1], flipped), columns[1][flipped])
    assert seen["kernels"].get("local_to_global") == 1, seen["kernels"]


def test_a_remembered_pick_still_checks_the_array_and_goes_with_its_buffers():
    """A second array sharing the offsets but over a content too short for them raises
    although the positions were remembered; the memo forgets with the buffers."""
    import gc

    from gpuexec.kernels.api import indexing as I

    gc.collect()
    before = len(I._picks._entries)
    offsets = ak.index.Index64(np.array([0, 2, 4], dtype=np.int64))
    good = ak.Array(ak.contents.ListOffsetArray(offsets, ak.contents.NumpyArray(np.arange(4.0))))
    bad = ak.Array(ak.contents.ListOffsetArray(offsets, ak.contents.NumpyArray(np.arange(3.0))),
                   check_valid=False)
    index = ak.Array([[1, 0], [1]])
    assert_same(gk.take(good, index), good[index])
    assert len(I._picks._entries) == before + 1
    with pytest.raises(ValueError, match="exceeds the length of the content"):
        gk.take(bad, index)
    del good, bad, index, offsets
    gc.collect()
    assert len(I._picks._entries) == before


def test_an_index_out_of_its_list_is_not_remembered():
    from gpuexec.kernels.api import indexing as I

    column = ak.Array([[1.0, 2.0], [3.0]])
    index = ak.Array([[0, 1], [1]])
    for _ in range(2):  # the second call raises too: nothing was remembered
        with pytest.raises(IndexError):
            gk.take(column, index)
    assert I._picks.get(column.layout.offsets.data, index.layout.offsets.data,
                        index.layout.content.data) is None
