"""Differential tests of the structural functions (sort, argsort, num, local_index,
flatten, combinations, argcombinations, cartesian, argcartesian) against awkward:
random jagged arrays in every layout and dtype, edge cases, records and coffea
NanoEvents, with zero hand-offs asserted wherever the engine claims the case."""

from __future__ import annotations

import inspect
import warnings

import awkward as ak
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import gpuexec.kernels as gk
from jagged import ALL_DTYPES, LAYOUTS, assert_same, build, jagged, values

C = ak.contents
FUNCTIONS = ["sort", "argsort", "num", "local_index", "flatten", "combinations",
             "argcombinations", "cartesian", "argcartesian"]
FLAT_LAYOUTS = [layout for layout in LAYOUTS if layout != "depth3"]


def examples(n):
    """``n`` examples under the "ci" profile (60 by default), scaled with the profile's
    count (``HYPOTHESIS_PROFILE=thorough`` runs about eight times as many)."""
    return max(1, settings.default.max_examples * n // 60)


def same_as_awkward(call, *, native=True):
    """``call(ak)`` and ``call(gk)`` agree (or both raise the same error class); with
    ``native`` the gk call must not hand anything to awkward."""
    try:
        want = call(ak)
    except Exception as err:  # awkward rejects the input: so must we
        with pytest.raises(type(err)):
            call(gk)
        return
    gk.reset_stats()
    got = call(gk)
    stats = gk.stats()
    assert_same(got, want)
    if native:
        assert stats["n_handoffs"] == 0, stats["handoff_reasons"]
    return got


@st.composite
def same_length_pair(draw, layout):
    """Two jagged arrays of one length: ``layout`` and a drawn one, any dtypes."""
    x = draw(jagged(layout=layout))
    if layout == "depth3":
        return x, x
    n = len(x)
    counts = draw(st.lists(st.integers(0, 7), min_size=n, max_size=n))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    dtype = draw(st.sampled_from(ALL_DTYPES))
    y = build(draw(st.sampled_from(FLAT_LAYOUTS)), offsets,
              values(draw, dtype, int(offsets[-1])))
    return x, y


def longest_list(x):
    counts = ak.flatten(ak.num(x, axis=-1), axis=None)
    return int(ak.max(counts)) if len(counts) else 0


def longest_stored_list(x):
    """The longest innermost list in the layout, reachable or not (the engine sorts the
    lists it stores, e.g. all those under an IndexedArray)."""
    node = x.layout
    while not (node.is_list and node.content.purelist_depth == 1):
        node = node.content
    return longest_list(ak.Array(node))


# -- signatures ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FUNCTIONS)
def test_signature_is_awkwards_plus_backend_and_to(name):
    ours = inspect.signature(getattr(gk, name))
    theirs = inspect.signature(getattr(ak, name))
    params = list(ours.parameters.values())
    assert [p.name for p in params[-2:]] == ["backend", "to"]
    assert [(p.name, p.kind, p.default) for p in params[:-2]] == [
        (p.name, p.kind, p.default) for p in theirs.parameters.values()]


# -- random arrays, every layout ---------------------------------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=examples(25))
@given(data=st.data())
def test_sort_argsort(layout, data):
    x = data.draw(jagged(layout=layout))
    ascending = data.draw(st.booleans())
    same_as_awkward(lambda m: m.sort(x, ascending=ascending))
    same_as_awkward(lambda m: m.argsort(x, ascending=ascending))


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=examples(10))
@given(data=st.data())
def test_unstable_sort(layout, data):
    # awkward's stable=False is libstdc++'s std::sort: identical to the stable order on
    # lists of up to 16 elements (run natively), its own order of ties beyond (handed off)
    x = data.draw(jagged(layout=layout))
    ascending = data.draw(st.booleans())
    native = longest_stored_list(x) <= 16
    same_as_awkward(lambda m: m.argsort(x, ascending=ascending, stable=False), native=native)
    same_as_awkward(lambda m: m.sort(x, ascending=ascending, stable=False), native=native)


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=examples(15))
@given(data=st.data())
def test_num_local_index_flatten(layout, data):
    x = data.draw(jagged(layout=layout))
    for axis in (0, 1, -1):
        same_as_awkward(lambda m: m.num(x, axis=axis))
    for axis in (0, -1):
        same_as_awkward(lambda m: m.local_index(x, axis=axis))
    for axis in (1, -1, None):
        same_as_awkward(lambda m: m.flatten(x, axis=axis))


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=examples(15))
@given(data=st.data())
def test_combinations(layout, data):
    x = data.draw(jagged(layout=layout))
    n = data.draw(st.sampled_from([2, 3]))
    if n == 3 or layout == "regular":  # regular: every list as long as the longest
        assume(longest_list(x) <= 40)  # keep C(len, n) small enough to compare as lists
    replacement = data.draw(st.booleans())
    fields = data.draw(st.sampled_from([None, ["a", "b", "c"][:n]]))
    with_name = data.draw(st.sampled_from([None, "Pair"]))
    for m_name in ("combinations", "argcombinations"):
        same_as_awkward(lambda m: getattr(m, m_name)(
            x, n, replacement=replacement, fields=fields, with_name=with_name))


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=examples(15))
@given(data=st.data())
def test_cartesian(layout, data):
    x, y = data.draw(same_length_pair(layout))
    as_dict = data.draw(st.booleans())
    nested = data.draw(st.sampled_from([None, False, True]))
    with_name = data.draw(st.sampled_from([None, "Pair"]))
    arrays = {"x": x, "y": y} if as_dict else [x, y]
    # nested=True runs natively unless lists are regular or the second array is optional
    native = not (nested and (layout == "regular" or y.layout.is_option or (
        layout == "depth3" and x.layout.is_option) or isinstance(y.layout, C.RegularArray)))
    for m_name in ("cartesian", "argcartesian"):
        same_as_awkward(lambda m: getattr(m, m_name)(arrays, nested=nested,
                                                     with_name=with_name), native=native)


# -- every function x dtype x layout, once each (hypothesis may skip some pairs) ---------------
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_dtype_and_layout(dtype):
    rng = np.random.default_rng(7)
    counts = np.array([3, 0, 1, 20, 2, 0, 5, 4, 17, 1])
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    raw = rng.integers(-3, 4, size=int(offsets[-1]))  # plenty of ties
    content = raw.astype(dtype)
    if np.dtype(dtype).kind == "f":
        content[[1, 7, 9, 30]] = [np.nan, np.inf, -np.inf, np.nan]
        content[[2, 12]] = [-0.0, 0.0]
    reversed_offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts[::-1], out=reversed_offsets[1:])
    for layout in LAYOUTS:
        x = build(layout, offsets, content)
        y = x if layout == "depth3" else build("listoffset", reversed_offsets, content[::-1].copy())
        for ascending in (True, False):
            same_as_awkward(lambda m: m.sort(x, ascending=ascending))
            same_as_awkward(lambda m: m.argsort(x, ascending=ascending))
        same_as_awkward(lambda m: m.num(x))
        same_as_awkward(lambda m: m.local_index(x))
        same_as_awkward(lambda m: m.flatten(x))
        same_as_awkward(lambda m: m.flatten(x, axis=-1))
        same_as_awkward(lambda m: m.flatten(x, axis=None))
        for n in (2, 3):
            same_as_awkward(lambda m: m.combinations(x, n))
            same_as_awkward(lambda m: m.argcombinations(x, n, replacement=True))
        same_as_awkward(lambda m: m.cartesian([x, y]))
        same_as_awkward(lambda m: m.argcartesian({"a": x, "b": y}))


# -- edge cases --------------------------------------------------------------------------------
def typed_lists(lists, dtype="float64"):
    return ak.values_astype(ak.Array(lists), dtype)


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_empty_array_and_all_empty_lists(dtype):
    for x in (typed_lists([[0]], dtype)[:0], typed_lists([[], [], []], dtype)):
        for name in ("sort", "argsort", "num", "local_index", "flatten"):
            same_as_awkward(lambda m: getattr(m, name)(x))
        same_as_awkward(lambda m: m.flatten(x, axis=None))
        for n in (2, 3):
            same_as_awkward(lambda m: m.combinations(x, n))
            same_as_awkward(lambda m: m.argcombinations(x, n))
        same_as_awkward(lambda m: m.cartesian([x, x]))
        same_as_awkward(lambda m: m.argcartesian([x, x], nested=True))


def test_nan_and_inf_order():
    x = ak.Array([[3.0, np.nan, 1.0, -np.inf, np.nan, np.inf, -0.0, 0.0, 2.0], [np.nan, 1.0], []])
    # awkward's comparator puts NaN first in both directions; ties keep their order
    asc = same_as_awkward(lambda m: m.sort(x))
    assert [str(v) for v in asc.to_list()[0]] == [
        "nan", "nan", "-inf", "-0.0", "0.0", "1.0", "2.0", "3.0", "inf"]
    desc = same_as_awkward(lambda m: m.argsort(x, ascending=False))
    assert desc.to_list()[0] == [1, 4, 5, 0, 8, 2, 6, 7, 3]
    same_as_awkward(lambda m: m.argsort(x))
    same_as_awkward(lambda m: m.sort(x, ascending=False))


@pytest.mark.parametrize("dtype", ["float32", "int16", "uint64", "bool"])
def test_one_huge_list(dtype):
    rng = np.random.default_rng(3)
    content = rng.integers(0, 50, size=70_000).astype(dtype)  # long runs of ties
    if dtype == "float32":
        content[rng.integers(0, 70_000, size=300)] = np.nan
        content[rng.integers(0, 70_000, size=300)] = -0.0
    x = build("sliced", np.array([0, 5, 5, 70_000]), content)
    for ascending in (True, False):
        same_as_awkward(lambda m: m.sort(x, ascending=ascending))
        same_as_awkward(lambda m: m.argsort(x, ascending=ascending))
    same_as_awkward(lambda m: m.local_index(x))
    same_as_awkward(lambda m: m.argsort(x, stable=False), native=False)


@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_unstable_sort_native_up_to_16_elements(dtype):
    rng = np.random.default_rng(5)
    for length, native in ((16, True), (17, False)):
        x = typed_lists([list(rng.integers(0, 3, size=length)) for _ in range(50)], dtype)
        if dtype == "float64":
            x = ak.where(x == 2, -0.0, ak.where(x == 1, 0.0, x))  # ties of -0.0 and 0.0
        for ascending in (True, False):
            same_as_awkward(lambda m: m.argsort(x, ascending=ascending, stable=False),
                            native=native)
            same_as_awkward(lambda m: m.sort(x, ascending=ascending, stable=False),
                            native=native)


def test_highlevel_false_and_placement():
    x = ak.Array([[3.0, 1.0], [], [2.0]])
    layout = gk.argsort(x, highlevel=False)
    assert isinstance(layout, ak.contents.Content)
    assert_same(ak.Array(layout), ak.argsort(x))
    assert_same(gk.combinations(x, 2, to="host"), ak.combinations(x, 2))


def test_combinations_of_lists_shorter_than_n():
    x = ak.Array([[], [1.5], [2.5, 3.5], [4.5, 5.5, 6.5]])
    for n in (2, 3):
        for replacement in (False, True):
            same_as_awkward(lambda m: m.combinations(x, n, replacement=replacement))
            same_as_awkward(lambda m: m.argcombinations(x, n, replacement=replacement))
    assert gk.num(gk.combinations(x, 3)).to_list() == [0, 0, 0, 1]


def test_depth3_axes():
    x = ak.Array([[[1, 2], [], [3]], [], [[4, 5, 6]], [[], [7]]])
    for axis in (1, 2, -1, -2):
        same_as_awkward(lambda m: m.flatten(x, axis=axis))
    for axis in (0, 1, 2, -1):
        same_as_awkward(lambda m: m.num(x, axis=axis))
    same_as_awkward(lambda m: m.combinations(x, 2))
    same_as_awkward(lambda m: m.cartesian([x, x], nested=True))
    # inner None lists count as empty when they are merged
    y = ak.Array([[[1, 2], None, [3]], None, [[4], []]])
    for axis in (1, 2, None):
        same_as_awkward(lambda m: m.flatten(y, axis=axis))


def test_parameters_follow_awkward():
    lists = C.ListOffsetArray(
        ak.index.Index64(np.array([0, 2, 2, 5])),
        C.NumpyArray(np.array([3.0, 1.0, 2.0, 5.0, 4.0]), parameters={"__doc__": "pt"}),
        parameters={"kind": "jets"})
    x = ak.Array(lists)
    for name in ("sort", "argsort", "local_index", "num", "flatten"):
        same_as_awkward(lambda m: getattr(m, name)(x))
    same_as_awkward(lambda m: m.flatten(x, axis=None))
    same_as_awkward(lambda m: m.combinations(x, 2, parameters={"p": 1}))
    same_as_awkward(lambda m: m.argcombinations(x, 2, with_name="P"))
    same_as_awkward(lambda m: m.cartesian([x, x], parameters={"p": 1}), native=False)


def test_32_bit_indexes():
    content = C.NumpyArray(np.array([3.0, 1.0, 2.0, 5.0, 4.0, 0.5]))
    lists32 = C.ListOffsetArray(ak.index.Index32(np.array([0, 2, 2, 5], np.int32)), content)
    listsu32 = C.ListArray(ak.index.IndexU32(np.array([3, 0, 2], np.uint32)),
                           ak.index.IndexU32(np.array([6, 2, 2], np.uint32)), content)
    indexed32 = C.IndexedArray(ak.index.Index32(np.array([2, 0, 0, 1], np.int32)), lists32)
    option32 = C.IndexedOptionArray(ak.index.Index32(np.array([2, -1, 1], np.int32)), listsu32)
    # awkward 2.14 has no awkward_sort kernel for int32 offsets (KeyError): that case
    # is compared with awkward's sort of the same lists with int64 offsets
    lists64 = ak.Array(C.ListOffsetArray(ak.index.Index64(np.array([0, 2, 2, 5])), content))
    assert_same(gk.sort(ak.Array(lists32)), ak.sort(lists64))
    for layout in (lists32, listsu32, indexed32, option32):
        x = ak.Array(layout)
        for name in ("sort", "argsort", "num", "local_index", "flatten"):
            if not (name == "sort" and layout is lists32):
                same_as_awkward(lambda m: getattr(m, name)(x))
        same_as_awkward(lambda m: m.combinations(x, 2, replacement=True))
        same_as_awkward(lambda m: m.cartesian([x, x]))


def test_not_native_cases_are_handed_off_and_counted():
    x = ak.Array([[[1, 2], [3]], [[4]]])
    gk.reset_stats()
    assert_same(gk.combinations(x, 2, axis=2), ak.combinations(x, 2, axis=2))
    assert_same(gk.combinations(x, 4), ak.combinations(x, 4))
    assert_same(gk.local_index(x, axis=1), ak.local_index(x, axis=1))
    assert_same(gk.cartesian([x, x, x]), ak.cartesian([x, x, x]))
    assert gk.stats()["n_handoffs"] == 4
    with pytest.raises(ValueError):
        gk.combinations(x, 2, fields=["only-one"])


# -- records ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def records():
    rng = np.random.default_rng(11)
    counts = rng.poisson(3, size=300)
    pt = ak.unflatten(rng.exponential(30, size=counts.sum()).astype(np.float32), counts)
    eta = ak.unflatten(rng.normal(size=counts.sum()), counts)
    return ak.zip({"pt": pt, "eta": eta}, with_name="Particle")


def test_records(records):
    cut = records[ak.num(records) > 1]
    masked = records[records.pt > 20]
    for x in (records, cut, masked):
        for n in (2, 3):
            same_as_awkward(lambda m: m.combinations(x, n, fields=["a", "b", "c"][:n]))
        same_as_awkward(lambda m: m.cartesian({"p": x, "q": x[:, ::-1]}))
        same_as_awkward(lambda m: m.cartesian([x, x], nested=True))
        same_as_awkward(lambda m: m.argcartesian([x, x]))
        same_as_awkward(lambda m: m.num(x))
        same_as_awkward(lambda m: m.local_index(x))
        same_as_awkward(lambda m: m.flatten(x))
        same_as_awkward(lambda m: m.argsort(x.pt, ascending=False))
        same_as_awkward(lambda m: m.sort(x.eta))


# -- coffea NanoEvents (virtual buffers) -------------------------------------------------------
@pytest.fixture(scope="module")
def events():
    from pathlib import Path

    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    path = Path(__file__).resolve().parent.parent / "data" / "samples" / "nano_dy.root"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return NanoEventsFactory.from_root({str(path): "Events"}, schemaclass=NanoAODSchema,
                                           mode="virtual").events()


def test_nanoevents_pairs(events):
    muons, jets = events.Muon, events.Jet
    pairs = same_as_awkward(lambda m: m.combinations(muons, 2))
    mass = (pairs["0"] + pairs["1"]).mass  # coffea's behaviours survive the carry
    want = ak.combinations(muons, 2)
    assert_same(mass, (want["0"] + want["1"]).mass)
    same_as_awkward(lambda m: m.combinations(muons, 2, fields=["mu1", "mu2"]))
    same_as_awkward(lambda m: m.combinations(jets, 3))
    same_as_awkward(lambda m: m.argcombinations(jets, 2))
    same_as_awkward(lambda m: m.cartesian([jets, muons]))
    same_as_awkward(lambda m: m.cartesian({"jet": jets, "mu": muons}, nested=True))
    same_as_awkward(lambda m: m.argcartesian([jets, muons]))
    cross = same_as_awkward(lambda m: m.cartesian({"jet": jets, "mu": muons}))
    assert_same(cross.jet.delta_r(cross.mu),
                ak.cartesian({"jet": jets, "mu": muons}).jet.delta_r(
                    ak.cartesian({"jet": jets, "mu": muons}).mu))


def test_nanoevents_cuts_and_sorting(events):
    selected = events[ak.num(events.Muon) >= 2]
    good = events.Muon[events.Muon.pt > 10]
    same_as_awkward(lambda m: m.combinations(selected.Muon, 2))
    same_as_awkward(lambda m: m.combinations(good, 2, replacement=True))
    same_as_awkward(lambda m: m.cartesian([events.Jet[events.Jet.pt > 30], good]))
    same_as_awkward(lambda m: m.argsort(events.Jet.pt, ascending=False))
    same_as_awkward(lambda m: m.sort(selected.Muon.pt, ascending=False))
    same_as_awkward(lambda m: m.num(events.Jet))
    same_as_awkward(lambda m: m.num(events.Jet, axis=0))
    same_as_awkward(lambda m: m.local_index(events.Muon))
    same_as_awkward(lambda m: m.flatten(selected.Muon))
    same_as_awkward(lambda m: m.flatten(good.pt, axis=None))


# -- bad input ---------------------------------------------------------------------------------
def test_bad_offsets_raise_value_error_naming_them():
    bad = ak.Array(C.ListOffsetArray(ak.index.Index64(np.array([0, 3, 2, 5])),
                                     C.NumpyArray(np.arange(5.0))))
    for call in (lambda: gk.argsort(bad), lambda: gk.sort(bad), lambda: gk.num(bad),
                 lambda: gk.local_index(bad), lambda: gk.combinations(bad, 2),
                 lambda: gk.cartesian([bad, bad]), lambda: gk.flatten(bad, axis=None)):
        with pytest.raises(ValueError, match="offsets"):
            call()
    out_of_range = ak.Array(C.ListArray(ak.index.Index64(np.array([0, 2])),
                                        ak.index.Index64(np.array([2, 9])),
                                        C.NumpyArray(np.arange(5.0))))
    with pytest.raises(ValueError, match="starts/stops"):
        gk.combinations(out_of_range, 2)
