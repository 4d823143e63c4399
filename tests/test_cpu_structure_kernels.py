"""Buffer-level tests of the CPU structural kernels (argsort, sort, local_index,
combinations, cartesian): against plain-Python references, on offsets that start above
0, and serial vs parallel (every list spread over threads) bit-identical."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from gpuexec.kernels import get_backend
from gpuexec.kernels.cpu import structure, threads

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64", "bool"]
#: the parallel variants are compiled for these only (compiling costs seconds each)
PARALLEL_DTYPES = ["int64", "float32", "float64", "bool"]


def sample(dtype, seed=0, n_lists=400):
    """Offsets starting at 5 (a sliced array), Poisson lists plus a few long ones (the
    merge-sort path), values with many ties, NaN, infinities and signed zeros."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(4, size=n_lists)
    counts[[3, 50, 51]] = [17, 200, 1000]
    offsets = np.empty(n_lists + 1, dtype=np.int64)
    offsets[0] = 5
    np.cumsum(counts, out=offsets[1:])
    offsets[1:] += 5
    raw = rng.integers(-20, 20, size=int(offsets[-1]))
    values = raw.astype(dtype)
    if np.dtype(dtype).kind == "f":
        values[rng.integers(0, len(values), size=60)] = np.nan
        values[rng.integers(0, len(values), size=20)] = np.inf
        values[rng.integers(0, len(values), size=20)] = -np.inf
        values[rng.integers(0, len(values), size=40)] = -0.0
    return offsets, values


def reference_argsort(values, ascending):
    """Stable; NaN first in both directions (awkward's comparator)."""
    nan = np.isnan(values) if values.dtype.kind == "f" else np.zeros(len(values), bool)
    positions = np.arange(len(values))
    rest = positions[~nan]
    key = values[rest]
    if ascending:
        order = rest[np.argsort(key, kind="stable")]
    else:
        # stable descending: sort the reversed run ascending, then reverse it back
        rev = rest[::-1]
        order = rev[np.argsort(values[rev], kind="stable")][::-1]
    return np.concatenate([positions[nan], order])


def per_list(offsets, fn):
    return [fn(int(offsets[i]), int(offsets[i + 1])) for i in range(len(offsets) - 1)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ascending", [True, False])
def test_argsort_and_sort_match_reference(dtype, ascending):
    offsets, values = sample(dtype)
    got = structure.argsort(offsets, values, ascending)
    got_sorted = structure.sort(offsets, values, ascending)
    assert got.dtype == np.int64 and got_sorted.dtype == values.dtype
    base = offsets[0]
    for i in range(len(offsets) - 1):
        s, e = offsets[i], offsets[i + 1]
        want = reference_argsort(values[s:e], ascending)
        np.testing.assert_array_equal(got[s - base:e - base], want)
        # bit-identical values: signed zeros and NaN move with their element
        np.testing.assert_array_equal(got_sorted[s - base:e - base].view(np.uint8),
                                      values[s:e][want].view(np.uint8))


def test_local_index():
    offsets, _ = sample("int64")
    got = structure.local_index(offsets)
    want = np.concatenate(per_list(offsets, lambda s, e: np.arange(e - s)))
    np.testing.assert_array_equal(got, want)


def starts_stops(seed=1, n=300):
    """Non-contiguous lists in shuffled order, as a ListArray has them."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(4, size=n)
    counts[7] = 30
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts + 2, out=offsets[1:])  # gaps of 2 between lists
    perm = rng.permutation(n)
    starts = offsets[:-1][perm]
    return starts, starts + counts[perm]


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("replacement", [False, True])
@pytest.mark.parametrize("local", [False, True])
def test_combinations_match_itertools(n, replacement, local):
    starts, stops = starts_stops()
    offsets, *idx = structure.combinations(starts, stops, n, replacement, local)
    assert len(idx) == n and offsets[0] == 0 and offsets.dtype == np.int64
    pick = itertools.combinations_with_replacement if replacement else itertools.combinations
    for i, (s, e) in enumerate(zip(starts, stops)):
        base = 0 if local else s
        want = np.array(list(pick(range(e - s), n)), dtype=np.int64).reshape(-1, n) + base
        got = np.stack([x[offsets[i]:offsets[i + 1]] for x in idx], axis=1)
        np.testing.assert_array_equal(got, want)
        m = e - s + (n - 1 if replacement else 0)
        assert offsets[i + 1] - offsets[i] == (math.comb(m, n) if m >= n else 0)


@pytest.mark.parametrize("local", [False, True])
def test_cartesian_matches_itertools(local):
    sa, ea = starts_stops(2)
    sb, eb = starts_stops(3)
    offsets, ia, ib = structure.cartesian(sa, ea, sb, eb, local)
    for i in range(len(sa)):
        want = np.array(list(itertools.product(range(ea[i] - sa[i]), range(eb[i] - sb[i]))),
                        dtype=np.int64).reshape(-1, 2)
        if not local:
            want = want + [sa[i], sb[i]]
        got = np.stack([ia[offsets[i]:offsets[i + 1]], ib[offsets[i]:offsets[i + 1]]], axis=1)
        np.testing.assert_array_equal(got, want)


def test_empty_inputs():
    none = np.zeros(0, dtype=np.int64)
    zero = np.zeros(1, dtype=np.int64)
    assert structure.argsort(zero, np.zeros(0), True).shape == (0,)
    assert structure.sort(zero, np.zeros(0, np.float32), False).dtype == np.float32
    assert structure.local_index(zero).shape == (0,)
    offsets, i0, i1 = structure.combinations(none, none, 2, False, False)
    assert offsets.tolist() == [0] and i0.shape == i1.shape == (0,)
    offsets, ia, ib = structure.cartesian(none, none, none, none, False)
    assert offsets.tolist() == [0] and ia.shape == (0,)


def test_bad_arguments_raise_value_error():
    with pytest.raises(ValueError, match="n=4"):
        structure.combinations(np.zeros(1, np.int64), np.ones(1, np.int64), 4, False, False)
    with pytest.raises(ValueError, match="list 1 has stop < start"):
        structure.combinations(np.array([0, 5]), np.array([2, 3]), 2, False, False)
    with pytest.raises(ValueError, match="list 0"):
        structure.cartesian(np.array([4]), np.array([3]), np.array([0]), np.array([1]), False)
    with pytest.raises(ValueError, match="lists"):
        structure.cartesian(np.array([0]), np.array([1]), np.zeros(0, np.int64),
                            np.zeros(0, np.int64), False)


def test_registered_in_the_cpu_backend():
    backend = get_backend("cpu")
    for dt in DTYPES:
        assert backend.kernel("argsort", dt).__wrapped__ is structure.argsort
        assert backend.kernel("sort", dt).__wrapped__ is structure.sort
    for name in ("local_index", "combinations", "cartesian"):
        assert backend.kernel(name).__wrapped__ is getattr(structure, name)


# -- serial vs parallel --------------------------------------------------------------------
@pytest.fixture
def all_parallel(monkeypatch):
    """Every call takes the parallel variant, on at least two threads."""
    before = threads.get_num_threads()
    if threads.set_num_threads(2) < 2:
        threads.set_num_threads(before)
        pytest.skip("numba was started with a single thread")
    monkeypatch.setattr(threads, "PARALLEL_THRESHOLD", 0)
    yield
    threads.set_num_threads(before)


def _serial(fn, *args):
    saved = threads.PARALLEL_THRESHOLD
    threads.PARALLEL_THRESHOLD = 1 << 62
    try:
        return fn(*args)
    finally:
        threads.PARALLEL_THRESHOLD = saved


@pytest.mark.parametrize("dtype", PARALLEL_DTYPES)
def test_sorting_serial_equals_parallel(all_parallel, dtype):
    offsets, values = sample(dtype, seed=5, n_lists=3000)
    for ascending in (True, False):
        for fn in (structure.argsort, structure.sort):
            serial = _serial(fn, offsets, values, ascending)
            parallel = fn(offsets, values, ascending)
            np.testing.assert_array_equal(serial.view(np.uint8), parallel.view(np.uint8))


def test_lists_serial_equal_parallel(all_parallel):
    offsets, _ = sample("int64", seed=6, n_lists=3000)
    np.testing.assert_array_equal(_serial(structure.local_index, offsets),
                                  structure.local_index(offsets))
    starts, stops = starts_stops(seed=7, n=3000)
    for n in (2, 3):
        for replacement in (False, True):
            args = (starts, stops, n, replacement, False)
            for s, p in zip(_serial(structure.combinations, *args), structure.combinations(*args)):
                np.testing.assert_array_equal(s, p)
    args = (starts, stops, stops - 3 * (stops > starts + 3), stops, True)
    for s, p in zip(_serial(structure.cartesian, *args), structure.cartesian(*args)):
        np.testing.assert_array_equal(s, p)
