"""Buffer-level tests of the CPU indexing kernels (gpuexec/kernels/cpu/indexing.py)
against plain numpy references, serial and parallel variants alike."""

from __future__ import annotations

import numpy as np
import pytest

import gpuexec.kernels as gk
from gpuexec.kernels.cpu import indexing as K
from gpuexec.kernels.cpu import threads
from jagged import ALL_DTYPES

STRUCTURAL = ("compact_offsets", "rebase_offsets", "list_carry_index", "local_to_global", "missing_repeat",
              "filter", "filter_missing")


@pytest.fixture(params=["serial", "parallel"])
def variant(request, monkeypatch):
    """Run the kernels serially (threshold above every input) or in parallel (threshold 0)."""
    if request.param == "parallel":
        if gk.get_num_threads() < 2:
            pytest.skip("one thread: the parallel variant is never taken")
        monkeypatch.setattr(threads, "PARALLEL_THRESHOLD", 0)
    else:
        monkeypatch.setattr(threads, "PARALLEL_THRESHOLD", 1 << 62)
    return request.param


def random_lists(rng, n, max_len=6, gaps=True):
    """starts/stops of n lists over a content with gaps and lists out of order."""
    counts = rng.integers(0, max_len + 1, n)
    if n > 3:
        counts[rng.integers(0, n)] = 0
    gap = rng.integers(0, 3, n) if gaps else np.zeros(n, np.int64)
    starts = np.cumsum(counts + gap) - counts
    perm = rng.permutation(n)
    starts = starts[perm].astype(np.int64)
    stops = (starts + counts[perm]).astype(np.int64)
    return starts, stops


def offsets_of(counts):
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


SIZES = [0, 1, 7, 1000]


def test_registered_in_cpu_backend():
    be = gk.get_backend("cpu")
    for dt in ALL_DTYPES:
        assert be.kernel("carry", dt) is not None
    for name in STRUCTURAL:
        assert be.kernel(name) is not None


def test_variants_are_distinct_dispatchers():
    """Serial and parallel variants must not share numba's cache entry."""
    serial, parallel = K._carry
    assert serial.py_func.__qualname__ != parallel.py_func.__qualname__
    assert parallel.targetoptions.get("parallel") and not serial.targetoptions.get("parallel")


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_carry(dtype, variant):
    rng = np.random.default_rng(1)
    values = rng.integers(0, 120, 500).astype(dtype)
    for m in (0, 1, 2000):
        index = rng.integers(0, 500, m).astype(np.int64)
        out = K.carry(values, index)
        assert out.dtype == values.dtype
        np.testing.assert_array_equal(out, values[index])


@pytest.mark.parametrize("n", SIZES)
def test_compact_offsets_and_list_carry_index(n, variant):
    rng = np.random.default_rng(n)
    starts, stops = random_lists(rng, n)
    offsets = K.compact_offsets(starts, stops)
    np.testing.assert_array_equal(offsets, offsets_of(stops - starts))
    assert offsets.dtype == np.int64
    carry = K.list_carry_index(starts, offsets)
    want = np.concatenate([np.arange(a, b) for a, b in zip(starts, stops)] + [np.zeros(0, np.int64)])
    np.testing.assert_array_equal(carry, want)
    # offsets that do not start at 0 (a slice of bigger offsets)
    shifted = offsets + 5
    np.testing.assert_array_equal(K.list_carry_index(starts, shifted), want)
    rebased, n_bad = K.rebase_offsets(shifted)
    np.testing.assert_array_equal(rebased, offsets)
    assert n_bad == 0


@pytest.mark.parametrize("n", SIZES)
def test_rebase_offsets_counts_decreasing_steps(n, variant):
    rng = np.random.default_rng(30 + n)
    offsets = np.cumsum(rng.integers(-1, 4, n + 1)).astype(np.int64)
    rebased, n_bad = K.rebase_offsets(offsets)
    np.testing.assert_array_equal(rebased, offsets - offsets[0])
    assert n_bad == int(np.sum(np.diff(offsets) < 0))


def reference_pick(starts, stops, index_offsets, index, valid=None):
    out, n_bad = [], 0
    for i in range(len(starts)):
        length = stops[i] - starts[i]
        for j in range(index_offsets[i], index_offsets[i + 1]):
            if valid is not None and not valid[j]:
                out.append(-1)
                continue
            k = index[j] + length if index[j] < 0 else index[j]
            if 0 <= k < length:
                out.append(starts[i] + k)
            else:
                out.append(-1)
                n_bad += 1
    return np.array(out, dtype=np.int64), n_bad


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("with_bad", [False, True])
def test_local_to_global_and_missing_repeat(n, with_bad, variant):
    rng = np.random.default_rng(10 + n)
    starts, stops = random_lists(rng, n)
    lengths = stops - starts
    picks = rng.integers(0, 4, n)
    index_offsets = offsets_of(picks) + 2  # index buffer with a 2-entry prefix
    index = np.zeros(int(index_offsets[-1]), np.int64) + 99
    for i in range(n):
        for j in range(index_offsets[i], index_offsets[i + 1]):
            L = int(lengths[i])
            index[j] = rng.integers(-L, L) if L else 0
    valid = rng.random(index.shape[0]) < 0.7
    if with_bad and n:
        index[index_offsets[0]:][: max(1, len(index) - 2)] += 1000
    got, bad = K.local_to_global(starts, stops, index_offsets, index)
    want, want_bad = reference_pick(starts, stops, index_offsets, index)
    np.testing.assert_array_equal(got, want)
    assert bad == want_bad
    got, bad = K.missing_repeat(starts, stops, index_offsets, index, valid)
    want, want_bad = reference_pick(starts, stops, index_offsets, index, valid)
    np.testing.assert_array_equal(got, want)
    assert bad == want_bad


def reference_filter(starts, stops, mask_offsets, mask, valid=None):
    counts, out = [], []
    for i in range(len(starts)):
        c = 0
        for k in range(stops[i] - starts[i]):
            j = mask_offsets[i] + k
            if valid is not None and not valid[j]:
                out.append(-1)
                c += 1
            elif mask[j]:
                out.append(starts[i] + k)
                c += 1
        counts.append(c)
    return offsets_of(counts), np.array(out, dtype=np.int64)


@pytest.mark.parametrize("n", SIZES)
def test_filter_and_filter_missing(n, variant):
    rng = np.random.default_rng(20 + n)
    starts, stops = random_lists(rng, n)
    mask_offsets = offsets_of(stops - starts) + 3
    mask = rng.random(int(mask_offsets[-1])) < 0.5
    valid = rng.random(mask.shape[0]) < 0.8
    offsets, carry = K.filter(starts, stops, mask_offsets, mask)
    want_offsets, want_carry = reference_filter(starts, stops, mask_offsets, mask)
    np.testing.assert_array_equal(offsets, want_offsets)
    np.testing.assert_array_equal(carry, want_carry)
    offsets, outindex = K.filter_missing(starts, stops, mask_offsets, mask, valid)
    want_offsets, want_index = reference_filter(starts, stops, mask_offsets, mask, valid)
    np.testing.assert_array_equal(offsets, want_offsets)
    np.testing.assert_array_equal(outindex, want_index)


def test_serial_and_parallel_identical(monkeypatch):
    """Same inputs through both variants, big enough for many chunks per thread."""
    rng = np.random.default_rng(3)
    n = 50_000
    starts, stops = random_lists(rng, n, max_len=9)
    values = rng.normal(size=int(stops.max()) + 1)
    mask_offsets = offsets_of(stops - starts)
    mask = rng.random(int(mask_offsets[-1])) < 0.3
    valid = rng.random(mask.shape[0]) < 0.9
    index = rng.integers(-3, 3, int(mask_offsets[-1]))

    def run():
        offsets = K.compact_offsets(starts, stops)
        return [offsets, K.list_carry_index(starts, offsets), *K.rebase_offsets(offsets + 7),
                K.carry(values, K.list_carry_index(starts, offsets)),
                *K.filter(starts, stops, mask_offsets, mask),
                *K.filter_missing(starts, stops, mask_offsets, mask, valid),
                *K.local_to_global(starts, stops, mask_offsets, index),
                *K.missing_repeat(starts, stops, mask_offsets, index, valid)]

    monkeypatch.setattr(threads, "PARALLEL_THRESHOLD", 1 << 62)
    serial = run()
    monkeypatch.setattr(threads, "PARALLEL_THRESHOLD", 0)
    parallel = run()
    for a, b in zip(serial, parallel):
        np.testing.assert_array_equal(a, b)


def test_kernels_count_launches():
    gk.reset_stats()
    be = gk.get_backend("cpu")
    be.kernel("compact_offsets")(np.zeros(2, np.int64), np.ones(2, np.int64))
    assert gk.stats()["kernels"] == {"compact_offsets": 1}
