"""Shared helpers for the differential tests: hypothesis strategies that build random
jagged arrays in every layout coffea produces, and ``assert_same`` (awkward's answer
and ours must agree in type, dtype, option structure and bit-for-bit values)."""

from __future__ import annotations

import math
import struct

import awkward as ak
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_DTYPES = ["float32", "float64"]
ALL_DTYPES = INT_DTYPES + FLOAT_DTYPES + ["bool"]

LAYOUTS = [
    "listoffset",        # plain ListOffsetArray
    "sliced",            # ListOffsetArray whose offsets do not start at 0
    "listarray",         # ListArray with non-contiguous starts/stops
    "indexed_above",     # IndexedArray over the lists (events[cut].Muon.pt)
    "indexed_below",     # lists of an IndexedArray (events.Muon[mask].pt)
    "option_above",      # IndexedOptionArray over the lists
    "bytemasked_above",  # ByteMaskedArray over the lists
    "regular",           # RegularArray (fixed size lists)
    "depth3",            # lists of lists of numbers
]

# contiguous lists over numbers, or over an IndexedArray of numbers: the layouts that
# element-wise functions (gk.where, gk.elementwise) run natively
NATIVE_LAYOUTS = ["listoffset", "sliced", "regular", "depth3", "indexed_below"]


def with_values(arr, flat):
    """``flat`` values (one per number of ``arr``) in the list structure of ``arr``."""
    layout = ak.to_packed(arr).layout

    def rebuild(node):
        if isinstance(node, ak.contents.NumpyArray):
            return ak.contents.NumpyArray(ak.to_numpy(flat))
        return node.copy(content=rebuild(node.content))
    return ak.Array(rebuild(layout))


# -- comparison --------------------------------------------------------------------
def _bits(x):
    if isinstance(x, float):
        return ("f", struct.pack("<d", x)) if not math.isnan(x) else ("f", "nan")
    return x


def _canon(obj):
    if isinstance(obj, list):
        return [_canon(o) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_canon(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _canon(v) for k, v in obj.items()}
    return _bits(obj)


def assert_same(got, want, *, check_type=True):
    """Equal type (incl. option types and dtypes) and bit-identical values (NaN == NaN,
    -0.0 != 0.0). Scalars (``axis=None`` results) compare by value, dtype and None-ness."""
    if isinstance(want, (ak.Array, ak.Record)):
        assert isinstance(got, type(want)), f"got {type(got).__name__}, want {type(want).__name__}"
        if check_type:
            assert str(got.type) == str(want.type), f"type {got.type} != {want.type}"
        g, w = _canon(got.to_list()), _canon(want.to_list())
        assert g == w, f"values differ:\n got  {got.to_list()}\n want {want.to_list()}"
        return
    if want is None:
        assert got is None, f"got {got!r}, want None"
        return
    assert got is not None, f"got None, want {want!r}"
    assert np.asarray(got).dtype == np.asarray(want).dtype, (
        f"dtype {np.asarray(got).dtype} != {np.asarray(want).dtype}")
    assert _canon(np.asarray(got).tolist()) == _canon(np.asarray(want).tolist()), f"{got!r} != {want!r}"


# -- strategies --------------------------------------------------------------------
def _elements(dtype):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return st.floats(width=dt.itemsize * 8, allow_nan=True, allow_infinity=True)
    return None  # hypothesis' default covers the whole integer range, extremes included


@st.composite
def counts(draw, max_lists=40, max_len=12):
    n = draw(st.integers(0, max_lists))
    shape = draw(st.sampled_from(["poisson", "empty", "one_huge", "mixed"]))
    if shape == "empty":
        return [0] * n
    if shape == "one_huge" and n > 0:
        c = [0] * n
        c[draw(st.integers(0, n - 1))] = draw(st.integers(50, 300))
        return c
    return draw(st.lists(st.integers(0, max_len), min_size=n, max_size=n))


def values(draw, dtype, n):
    return draw(hnp.arrays(np.dtype(dtype), n, elements=_elements(dtype)))


@st.composite
def jagged(draw, dtype=None, layout=None, max_lists=40, max_len=12):
    """A random ``ak.Array`` of lists of ``dtype`` in ``layout`` (drawn when None)."""
    dtype = dtype or draw(st.sampled_from(ALL_DTYPES))
    layout = layout or draw(st.sampled_from(LAYOUTS))
    c = draw(counts(max_lists, max_len))
    n = len(c)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(c, out=offsets[1:])
    content = values(draw, dtype, int(offsets[-1]))
    return build(layout, offsets, content, draw)


def build(layout, offsets, content, draw=None):
    n = len(offsets) - 1
    C = ak.contents
    num = C.NumpyArray(content)
    lists = C.ListOffsetArray(ak.index.Index64(offsets), num)
    rng = np.random.default_rng(int(offsets[-1]) * 7919 + n)
    if layout == "listoffset":
        node = lists
    elif layout == "sliced":
        pad = C.ListOffsetArray(
            ak.index.Index64(np.concatenate([[0], offsets + 3])),
            C.NumpyArray(np.concatenate([content[:0], np.zeros(3, content.dtype), content])),
        )
        node = pad[1:]
        assert n == 0 or node.offsets[0] == 3
    elif layout == "listarray":
        perm = rng.permutation(n)
        starts, stops = offsets[:-1][perm], offsets[1:][perm]
        node = C.ListArray(ak.index.Index64(starts), ak.index.Index64(stops), num)
    elif layout == "indexed_above":
        idx = rng.integers(0, max(n, 1), size=n) if n else np.zeros(0, np.int64)
        node = C.IndexedArray(ak.index.Index64(idx.astype(np.int64)), lists)
    elif layout == "indexed_below":
        m = len(content)
        perm = rng.permutation(m).astype(np.int64)
        node = C.ListOffsetArray(ak.index.Index64(offsets), C.IndexedArray(ak.index.Index64(perm), C.NumpyArray(content[np.argsort(perm)])))
    elif layout == "option_above":
        idx = np.arange(n, dtype=np.int64)
        idx[rng.random(n) < 0.3] = -1
        node = C.IndexedOptionArray(ak.index.Index64(idx), lists)
    elif layout == "bytemasked_above":
        mask = (rng.random(n) < 0.7).astype(np.int8)
        node = C.ByteMaskedArray(ak.index.Index8(mask), lists, valid_when=True)
    elif layout == "regular":
        size = int(offsets[1] - offsets[0]) if n else 0
        reg_content = np.resize(content, n * size) if len(content) else np.zeros(n * size, content.dtype)
        node = C.RegularArray(C.NumpyArray(reg_content.astype(content.dtype)), size, zeros_length=n)
    elif layout == "depth3":
        # group the lists into outer lists of 0..3 lists each
        outer_counts = []
        left = n
        while left > 0:
            k = int(rng.integers(0, 4))
            k = min(k, left)
            outer_counts.append(k)
            left -= k
        outer = np.zeros(len(outer_counts) + 1, dtype=np.int64)
        np.cumsum(outer_counts, out=outer[1:])
        node = C.ListOffsetArray(ak.index.Index64(outer), lists)
    else:
        raise ValueError(layout)
    return ak.Array(node)


# -- bulk random values (the GPU tests' larger arrays) ---------------------------------------
def random_values(rng, dtype, m, *, ties=0.2, special=0.03):
    """``m`` values of ``dtype`` for kernel tests: integers half over the whole range and
    half in -3..3 (ties), bools half true, floats over seven decades with a ``ties``
    fraction of small integers and a ``special`` fraction of NaN, +-inf, 0.0 and -0.0."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(m) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        wide = rng.integers(info.min, info.max, size=m, endpoint=True, dtype=dt)
        small = rng.integers(max(info.min, -3), min(info.max, 3), size=m, endpoint=True).astype(dt)
        return np.where(rng.random(m) < 0.5, wide, small).astype(dt)
    x = (rng.standard_normal(m) * 10.0 ** rng.integers(-3, 4, size=m)).astype(dt)
    x = np.where(rng.random(m) < ties, rng.integers(-2, 3, size=m).astype(dt), x)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dtype=dt)
    pick = rng.random(m) < special
    x[pick] = specials[rng.integers(0, len(specials), size=int(pick.sum()))]
    return x


# -- one fixed case per dtype and layout (the GPU family tests, test_awkward_kernels) ---------
# list lengths: empty lists, runs of them, one list of 40
COUNTS = np.array([3, 0, 1, 20, 2, 0, 5, 4, 17, 1, 40, 0, 0, 6, 33, 2])


def case(dtype, layout, seed=7):
    """(x, y): ``x`` in ``layout`` with ties, NaN, infinities, signed zeros and integer
    extremes; ``y`` a ListOffsetArray of the same lists reversed (``x`` itself for depth3)."""
    rng = np.random.default_rng(seed)
    offsets = np.zeros(len(COUNTS) + 1, dtype=np.int64)
    np.cumsum(COUNTS, out=offsets[1:])
    raw = rng.integers(-3, 4, size=int(offsets[-1]))  # plenty of ties
    content = raw.astype(dtype)
    if np.dtype(dtype).kind == "f":
        content[[1, 7, 9, 30, 60]] = [np.nan, np.inf, -np.inf, np.nan, np.nan]
        content[[2, 12, 70]] = [-0.0, 0.0, -0.0]
    elif np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        content[[4, 40]] = [info.min, info.max]
    x = build(layout, offsets, content)
    rev = np.zeros(len(COUNTS) + 1, dtype=np.int64)
    np.cumsum(COUNTS[::-1], out=rev[1:])
    y = x if layout == "depth3" else build("listoffset", rev, content[::-1].copy())
    return x, y
