"""Buffer-level tests of the CPU reduction kernels (gpuexec/kernels/cpu/reduce.py):
every kernel and dtype against awkward on the same offsets/content (sliced offsets,
empty lists, lists longer than the unrolled slots, lists at the very end of the
content), serial vs parallel variants bit for bit, the block split, and the inputs the
kernels accept as they come (strided, big-endian)."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest

import gpuexec.kernels as gk
from gpuexec.kernels.cpu import reduce as R
from gpuexec.kernels.cpu import threads
from jagged import ALL_DTYPES

C = ak.contents
CPU = gk.get_backend("cpu")

# kernel -> (awkward function, kwargs) giving the same numbers for an offsets/content pair
REFERENCE = {
    "reduce_sum": ("sum", {}),
    "reduce_prod": ("prod", {}),
    "reduce_sum_bool": ("count_nonzero", {}),
    "reduce_argmin": ("argmin", {"mask_identity": False}),
    "reduce_argmax": ("argmax", {"mask_identity": False}),
    "reduce_countnonzero": ("count_nonzero", {}),
    "reduce_any": ("any", {}),
    "reduce_all": ("all", {}),
}


def _values(dtype, n, rng):
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(n) < 0.6
    if dt.kind == "f":
        v = rng.normal(0, 3, n).astype(dt)
        v[rng.random(n) < 0.05] = np.nan
        v[rng.random(n) < 0.02] = -0.0
        v[rng.random(n) < 0.02] = np.inf
        return v
    info = np.iinfo(dt)
    v = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    v[rng.random(n) < 0.1] = 0
    return v


def _case(dtype, seed=0, n_lists=300, lam=5.0):
    """Offsets that start above 0 (a slice), with empty lists, long lists and the last
    lists ending exactly at the end of the content."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(lam, n_lists)
    counts[::17] = 0
    counts[5] = 3 * R.SLOTS + 1
    counts[-1] = 2
    offsets = np.zeros(n_lists + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    offsets += 7
    content = _values(dtype, int(offsets[-1]), rng)
    return offsets, content


def _awkward(fname, offsets, content, **kwargs):
    lists = ak.Array(C.ListOffsetArray(ak.index.Index64(offsets), C.NumpyArray(content)))
    return ak.to_numpy(getattr(ak, fname)(lists, axis=1, **kwargs))


def _same_bits(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    assert got.tobytes() == want.tobytes(), np.nonzero(got.view(np.uint8) != want.view(np.uint8))


def _identity(name, dtype):
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return info.max if name == "reduce_min" else info.min
    if dt == np.bool_:
        return name == "reduce_min"
    return np.inf if name == "reduce_min" else -np.inf


def _run(name, dtype, offsets, content):
    kernel = CPU.kernel(name, dtype) if name != "reduce_count" else CPU.kernel(name)
    if name == "reduce_count":
        return kernel(offsets)
    if name in ("reduce_min", "reduce_max"):
        return kernel(offsets, content, _identity(name, dtype))
    return kernel(offsets, content)


def _reference(name, dtype, offsets, content):
    if name in ("reduce_min", "reduce_max"):
        fname = name[len("reduce_"):]
        if np.dtype(dtype) == np.bool_:  # awkward: min/max of bools are all/any
            return _awkward("all" if fname == "min" else "any", offsets, content)
        return _awkward(fname, offsets, content, mask_identity=False)
    if name == "reduce_count":
        return _awkward("count", offsets, content)
    if name == "reduce_prod_bool":
        return _awkward("prod", offsets, content.astype(bool))
    if name in ("reduce_sum", "reduce_prod") and np.dtype(dtype) == np.bool_:
        return _awkward(name[len("reduce_"):], offsets, content.astype(np.int64))
    fname, kwargs = REFERENCE[name]
    return _awkward(fname, offsets, content, **kwargs)


KERNELS = sorted(R.KERNELS) + ["reduce_count"]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", KERNELS)
def test_kernel_matches_awkward(name, dtype):
    offsets, content = _case(dtype, seed=len(name))
    _same_bits(_run(name, dtype, offsets, content), _reference(name, dtype, offsets, content))


@pytest.mark.parametrize("name", sorted(R.KERNELS))
def test_with_empty_returns_the_result_and_the_empty_lists(name):
    """The contract's ``with_empty=True``: the same result and True exactly where a list
    is empty (sliced offsets, runs of empty lists, no lists at all)."""
    for offsets, content in (_case("float64", seed=3), (np.zeros(1, np.int64), np.zeros(0)),
                             (np.array([2, 2, 2, 5]), np.arange(6.0))):
        kernel = CPU.kernel(name, "float64")
        args = (_identity(name, "float64"),) if name in ("reduce_min", "reduce_max") else ()
        out, empty = kernel(offsets, content, *args, with_empty=True)
        _same_bits(out, kernel(offsets, content, *args))
        assert empty.dtype == np.bool_
        np.testing.assert_array_equal(empty, np.diff(offsets) == 0)


@pytest.mark.parametrize("name", KERNELS)
def test_no_lists_and_no_content(name):
    for offsets, content in ((np.zeros(1, np.int64), np.zeros(0)),
                             (np.zeros(4, np.int64), np.zeros(0)),
                             (np.array([2, 2, 2]), np.arange(3.0))):
        _same_bits(_run(name, "float64", offsets, content),
                   _reference(name, "float64", offsets, content))


@pytest.mark.parametrize("name", KERNELS)
def test_list_lengths_around_the_unrolled_slots(name):
    for n in range(0, 2 * R.SLOTS + 2):
        for pad in (0, 1, R.SLOTS):  # elements after the list (the slot window may overrun)
            content = np.arange(1.0, n + pad + 3)[::-1].copy()
            content[1::3] *= -1
            offsets = np.array([2, 2 + n], np.int64)
            _same_bits(_run(name, "float64", offsets, content),
                       _reference(name, "float64", offsets, content))


def test_min_max_identity_and_initial():
    offsets = np.array([0, 0, 2, 3], np.int64)
    content = np.array([5, -2, 9], np.int32)
    assert R.reduce_min(offsets, content, 4).tolist() == [4, -2, 4]
    assert R.reduce_max(offsets, content, 6).tolist() == [6, 6, 9]
    assert R.reduce_max(offsets, content, 6).dtype == np.int32
    nan = np.float64("nan")
    f = np.array([nan, 1.0, nan])
    assert np.isnan(R.reduce_max(np.array([0, 3]), f, nan)[0])  # nothing beats NaN
    assert R.reduce_max(np.array([0, 3]), f, -np.inf).tolist() == [1.0]


def test_argmax_rules():
    nan = np.nan
    content = np.array([nan, 1.0, 1.0, nan, 3.0, 2.0, 2.0, -0.0, 0.0])
    offsets = np.array([0, 2, 5, 7, 9], np.int64)
    assert R.reduce_argmax(offsets, content).tolist() == [0, 2, 0, 0]
    assert R.reduce_argmin(offsets, content).tolist() == [0, 0, 0, 0]


def test_sum_dtypes_and_wraparound():
    offsets = np.array([0, 2, 4], np.int64)
    i8 = np.array([127, 127, -128, -128], np.int8)
    assert R.reduce_sum(offsets, i8).tolist() == [254, -256]
    assert R.reduce_sum(offsets, i8).dtype == np.int64
    u = np.array([2**64 - 1, 2, 3, 4], np.uint64)
    assert R.reduce_sum(offsets, u).tolist() == [1, 7]
    assert R.reduce_sum(offsets, u.astype(np.uint8)).dtype == np.uint64
    assert R.reduce_sum(offsets, np.ones(4, np.float32)).dtype == np.float32
    assert R.reduce_prod(offsets, np.array([2**62, 4, 3, 3], np.int64)).tolist() == [0, 9]


# -- serial vs parallel --------------------------------------------------------------------
@pytest.fixture
def parallel(monkeypatch):
    """Force the parallel variants on small inputs, with two threads."""
    monkeypatch.setattr(threads, "PARALLEL_THRESHOLD", 0)
    previous = gk.get_num_threads()
    gk.set_num_threads(2)
    yield
    gk.set_num_threads(previous)


# the parallel driver is dtype-independent; a few dtypes keep the compile time down
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "uint8", "bool"])
@pytest.mark.parametrize("name", KERNELS)
def test_parallel_variant_gives_identical_bits(name, dtype, monkeypatch):
    offsets, content = _case(dtype, seed=3, n_lists=5000)
    monkeypatch.setattr(threads, "PARALLEL_THRESHOLD", 10**12)
    serial = _run(name, dtype, offsets, content)
    monkeypatch.setattr(threads, "PARALLEL_THRESHOLD", 0)
    previous = gk.get_num_threads()
    gk.set_num_threads(2)
    try:
        par = _run(name, dtype, offsets, content)
    finally:
        gk.set_num_threads(previous)
    _same_bits(par, serial)


def test_parallel_with_one_huge_list_and_many_empty(parallel):
    offsets = np.concatenate([np.zeros(1000, np.int64), np.full(3, 100_000)])
    content = np.random.default_rng(1).normal(size=100_000)
    _same_bits(R.reduce_sum(offsets, content), _awkward("sum", offsets, content))
    _same_bits(R.reduce_argmax(offsets, content),
               _awkward("argmax", offsets, content, mask_identity=False))


def test_block_bounds():
    offsets = np.array([0, 0, 0, 100, 100, 101, 101], np.int64)
    for nblocks in (1, 2, 3, 7):
        b = R.block_bounds(offsets, nblocks)
        assert b[0] == 0 and b[-1] == 6 and len(b) == nblocks + 1
        assert np.all(np.diff(b) >= 0)
    # millions of empty lists still get split between threads
    b = R.block_bounds(np.zeros(1001, np.int64), 2)
    assert b.tolist() == [0, 500, 1000]
    # one huge list among small ones: no block is cut inside a list, all lists covered
    b = R.block_bounds(np.array([0, 1, 2, 10_002, 10_003]), 2)
    assert b[0] == 0 and b[-1] == 4 and 0 < b[1] < 4


# -- buffers as they come ------------------------------------------------------------------
def test_strided_and_big_endian_content():
    offsets = np.array([0, 2, 5], np.int64)
    base = np.arange(10, dtype=np.float64)
    strided = base[::2]
    _same_bits(R.reduce_sum(offsets, strided), R.reduce_sum(offsets, strided.copy()))
    big = np.arange(5, dtype=">i4")
    assert R.reduce_sum(offsets, big).tolist() == [1, 9]
    assert R.reduce_max(offsets, big, -(2**31)).dtype == np.int32


def test_every_kernel_registered_for_every_dtype():
    names = {key for key in CPU.kernels()}
    for name in R.KERNELS:
        for dt in ALL_DTYPES:
            assert (name, (dt,)) in names
    assert ("reduce_count", ()) in names
