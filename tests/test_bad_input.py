"""Bad input gets a clear ValueError naming the argument and the position, raised by the
API layer (gpuexec.kernels.validate) before any kernel runs, and is never handed to
awkward. Bad layouts are built with ak.contents directly (awkward checks only part of
this on construction)."""

from __future__ import annotations

import re

import awkward as ak
import numpy as np
import pytest

import gpuexec.kernels as gk
from gpuexec.kernels import validate

C = ak.contents
I64 = ak.index.Index64


def lists(offsets, content=None):
    content = np.arange(5.0) if content is None else content
    return ak.Array(C.ListOffsetArray(I64(np.array(offsets, np.int64)), C.NumpyArray(content)))


def list_array(starts, stops, n_content=5):
    return ak.Array(C.ListArray(I64(np.array(starts, np.int64)), I64(np.array(stops, np.int64)),
                                C.NumpyArray(np.arange(float(n_content)))))


GOOD = ak.Array([[1.0, 2.0, 3.0], [], [4.0, 5.0]])


def raises(match, fn, *args, exc=ValueError):
    """``fn(*args)`` raises ``exc`` with ``match`` in its message, without a hand-off."""
    gk.reset_stats()
    with pytest.raises(exc, match=re.escape(match)) as info:
        fn(*args)
    assert isinstance(info.value, ValueError)
    assert gk.stats()["n_handoffs"] == 0
    return info.value


# -- offsets ------------------------------------------------------------------------------
NON_MONOTONIC = lists([0, 3, 1, 4])
MSG_MONO = "offsets are not monotonically increasing at position 1 (offsets[1]=3 > offsets[2]=1)"


@pytest.mark.parametrize("call", [
    lambda a: gk.filter(a, GOOD > 1),
    lambda a: gk.take(a, ak.Array([[0], [], [0]])),
    lambda a: gk.take(a, ak.argmax(GOOD, axis=1, keepdims=True)),
    lambda a: gk.take(a, [0, 1]),
    lambda a: gk.to_packed(a),
    lambda a: gk.sum(a, axis=1),
])
def test_non_monotonic_offsets(call):
    raises(MSG_MONO, call, NON_MONOTONIC)


def test_non_monotonic_offsets_of_the_index_and_mask():
    bad_index = ak.Array(C.ListOffsetArray(I64(np.array([0, 2, 1, 2])),
                                           C.NumpyArray(np.array([0, 0]))))
    raises("index: offsets are not monotonically increasing at position 1 (offsets[1]=2 > "
           "offsets[2]=1)", gk.take, GOOD, bad_index)
    bad_mask = ak.Array(C.ListOffsetArray(I64(np.array([0, 3, 0, 2])),
                                          C.NumpyArray(np.array([True] * 3))))
    raises("mask: " + MSG_MONO.replace("=1)", "=0)"), gk.filter, GOOD, bad_mask)


def test_offsets_beyond_content():
    raises("offsets out of range: offsets[2]=7 exceeds the length of the content (5)",
           gk.to_packed, lists([0, 2, 7]))
    raises("offsets out of range: offsets[2]=7 exceeds the length of the content (5)",
           gk.sum, lists([0, 2, 7]), 1)


def test_non_monotonic_offsets_of_a_sliced_array():
    """to_packed checks the order inside its rebasing pass; the message is the same."""
    arr = lists([2, 3, 1, 4])
    raises("offsets are not monotonically increasing at position 1 (offsets[1]=3 > "
           "offsets[2]=1)", gk.to_packed, arr)
    raises("offsets out of range: offsets[3]=9", gk.to_packed, lists([2, 3, 4, 9]))


def test_negative_first_offset():
    raises("offsets out of range: offsets[0]=-1 is negative", gk.to_packed, lists([-1, 2, 3]))


# -- starts / stops -------------------------------------------------------------------------
def test_starts_after_stops():
    raises("starts/stops: starts[1]=3 > stops[1]=1 at position 1", gk.filter,
           list_array([0, 3], [2, 1]), ak.Array([[True, False], []]))


def test_list_outside_content():
    raises("starts/stops out of range at position 1: list [3, 8) is outside the content of "
           "length 5", gk.to_packed, list_array([0, 3], [2, 8]))


def test_empty_lists_may_point_anywhere():
    """awkward's own rule: only non-empty lists must lie within the content."""
    arr = list_array([0, 99], [2, 99])
    assert gk.to_packed(arr).tolist() == [[0.0, 1.0], []]


def test_starts_stops_length_mismatch():
    # ak.contents.ListArray refuses this on construction; the check guards raw buffers
    with pytest.raises(ValueError, match=re.escape("starts has length 3 but stops has length 2")):
        validate.starts_stops(np.array([0, 1, 2]), np.array([1, 2]), 5)


# -- IndexedArray indices ---------------------------------------------------------------------
def test_indexed_array_index_out_of_range():
    below = ak.Array(C.ListOffsetArray(I64(np.array([0, 2, 3])), C.IndexedArray(
        I64(np.array([0, 9, 1])), C.NumpyArray(np.arange(4.0)))))
    err = raises("IndexedArray index out of range at position 1 (IndexedArray index[1]=9 for "
                 "content of length 4)", gk.sum, below, 1)
    assert isinstance(err, IndexError)
    above = ak.Array(C.IndexedArray(I64(np.array([1, 5])), GOOD.layout))
    raises("IndexedArray index out of range at position 1", gk.filter, above,
           ak.Array([[], [True, False]]))


# -- take: indices ---------------------------------------------------------------------------
def test_event_index_out_of_range():
    err = raises("index out of range at position 1 (index[1]=3 for an array of length 3)",
                 gk.take, GOOD, np.array([0, 3]))
    assert isinstance(err, IndexError)
    raises("index out of range at position 0 (index[0]=-4 for an array of length 3)",
           gk.take, GOOD, np.array([-4]))


def test_jagged_index_out_of_range():
    err = raises("index out of range at flat position 1: 2 in a list of length 2 (list 2 ",
                 gk.take, GOOD, ak.Array([[0], [], [2]]))
    assert isinstance(err, IndexError)
    raises("index out of range at flat position 1: -4 in a list of length 3 (list 0 ",
           gk.take, GOOD, ak.Array([[0, -4], [], []]))


def test_option_index_out_of_range():
    idx = ak.mask(ak.Array([[0, 5], [], [1]]), ak.Array([[True, True], [], [False]]))
    raises("index out of range at flat position 1: 5 in a list of length 3 (list 0 ",
           gk.take, GOOD, idx)
    # a None pick never fails, whatever value hides under it
    hidden = ak.mask(ak.Array([[0, 5], [], [1]]), ak.Array([[True, False], [], [True]]))
    assert gk.take(GOOD, hidden).tolist() == [[1.0, None], [], [5.0]]


def test_index_into_empty_list():
    raises("index out of range at flat position 0: 0 in a list of length 0 (list 0 ",
           gk.take, ak.Array([[], [1.0]]), ak.Array([[0], [0]]))


def test_float_index():
    err = raises("index must be an integer array, got dtype float64", gk.take, GOOD,
                 np.array([0.0, 1.0]))
    assert isinstance(err, TypeError)
    raises("index must be an integer array, got dtype float32", gk.take, GOOD,
           ak.Array([[0.0], [], [1.0]], ).layout.copy(content=C.NumpyArray(
               np.array([0.0, 1.0], np.float32))))


def test_huge_unsigned_index():
    raises("index out of range", gk.take, GOOD, ak.Array(
        C.ListOffsetArray(I64(np.array([0, 1, 1, 1])),
                          C.NumpyArray(np.array([2 ** 64 - 1], np.uint64)))))


def test_index_with_wrong_number_of_lists():
    err = raises("index has length 2 but the array has length 3", gk.take, GOOD,
                 ak.Array([[0], []]))
    assert isinstance(err, IndexError)


def test_deeper_index_lists_must_fit():
    d3 = ak.Array([[[1, 2], [3]], [], [[4]]])
    raises("index list 0 has length 1 but list 0 of the array has length 2", gk.take, d3,
           ak.Array([[[0]], [], [[0]]]))


# -- filter: masks ------------------------------------------------------------------------------
def test_non_bool_mask():
    err = raises("mask must be a boolean array, got dtype int64", gk.filter, GOOD,
                 ak.Array([[1, 0, 1], [], [0, 1]]))
    assert isinstance(err, TypeError)
    raises("mask must be a boolean array, got dtype float64", gk.filter, GOOD,
           np.array([1.0, 0.0, 1.0]))


def test_mask_length_mismatch():
    raises("mask has length 2 but the array has length 3", gk.filter, GOOD,
           np.array([True, False]))
    raises("mask has length 2 but the array has length 3", gk.filter, GOOD,
           ak.Array([[True, False, True], []]))


def test_mask_list_length_mismatch():
    err = raises("mask list 2 has length 1 but list 2 of the array has length 2", gk.filter,
                 GOOD, ak.Array([[True, False, True], [], [True]]))
    assert isinstance(err, IndexError)
    raises("index list 1 has length 1 but list 1 of the array has length 0", gk.take,
           GOOD, ak.Array([[True, False, True], [False], [True, True]]))


def test_option_mask_list_length_mismatch():
    m = ak.mask(ak.Array([[True], [], [True, False]]), ak.Array([[True], [], [False, True]]))
    raises("mask list 0 has length 1 but list 0 of the array has length 3", gk.filter, GOOD, m)


# -- validate directly: cheap, vectorized, any position ---------------------------------------
def test_validate_reports_first_offence_in_big_buffers():
    offsets = np.arange(1_000_001, dtype=np.int64)
    offsets[700_000] = 5
    with pytest.raises(ValueError, match=re.escape(
            "offsets are not monotonically increasing at position 699999 "
            "(offsets[699999]=699999 > offsets[700000]=5)")):
        validate.offsets(offsets, 1_000_000)
    validate.offsets(np.arange(1_000_001, dtype=np.int64), 1_000_000)  # fine


def test_validate_offsets_shape_and_dtype():
    with pytest.raises(ValueError, match="at least one entry"):
        validate.offsets(np.zeros(0, np.int64), 3)
    with pytest.raises(ValueError, match="offsets must be integers, got float64"):
        validate.offsets(np.zeros(2), 3)


def test_the_offsets_check_remembers_its_summary():
    """The check reads, in its one pass (the backend's ``offsets_summary``), the longest
    list, how many lists are long and both ends, returns the ends and remembers all of them
    for that very buffer; a failed check, or one without a content length, remembers
    nothing."""
    from gpuexec.kernels import validate

    offsets = np.array([0, 2, 2, 9, 10], dtype=np.int64)
    assert validate.longest_list(offsets) is None and validate.ends(offsets) is None
    assert validate.offsets(offsets, 10) == (0, 10)
    assert validate.longest_list(offsets) == 7 and validate.ends(offsets) == (0, 10)
    # long: above max(4 x the mean of 2.5, 64) elements; none here
    assert validate.long_lists(offsets) == 0
    counts = np.array([3] * 400 + [70, 80, 65, 2000])  # mean 8.3: 4 above 64
    tail = np.concatenate([[0], np.cumsum(counts)]) + 5
    assert validate.offsets(tail, int(tail[-1])) == (5, int(tail[-1]))
    assert validate.longest_list(tail) == 2000 and validate.long_lists(tail) == 4
    assert validate.tail_of(tail) == (2000, 4)  # both in one lookup (the GPU reductions')
    assert validate.long_lists(tail.copy()) is None
    assert validate.tail_of(tail.copy()) == (None, None)
    assert validate.longest_list(offsets.copy()) is None
    bad = np.array([0, 5, 3], dtype=np.int64)
    with pytest.raises(validate.InvalidLayout):
        validate.offsets(bad, 5)
    assert validate.longest_list(bad) is None
    unknown = np.array([0, 5, 7], dtype=np.int64)
    assert validate.offsets(unknown, None) == (0, 7)  # only the order can be checked
    assert validate.ends(unknown) is None
    empty = np.zeros(1, dtype=np.int64)
    validate.offsets(empty, 0)
    assert validate.longest_list(empty) == 0 and validate.long_lists(empty) == 0


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64"])
def test_the_offsets_summary_counts_as_numpy_does(dtype):
    """The CPU engine's ``offsets_summary`` (the GPU's is compared with it in
    tests/gpu/test_gpu_families.py) against numpy, serial and parallel, and the same
    errors for offsets of any integer type."""
    from gpuexec.kernels.cpu import threads

    kernel = gk.get_backend("cpu").kernel("offsets_summary")
    rng = np.random.default_rng(7)
    counts = np.where(rng.random(300_000) < 0.001, rng.integers(50, 3000, 300_000),
                      rng.poisson(3, 300_000))
    offsets = np.concatenate([[0], np.cumsum(counts)]) + 11
    lengths = np.diff(offsets)
    bound = max((offsets[-1] - offsets[0]) * (4.0 / lengths.size), 64)
    want = (0, int(lengths.max()), int((lengths > bound).sum()), 11, int(offsets[-1]))
    assert want[2] > 100
    assert kernel(offsets, 4.0, 64) == want
    kept = offsets[1000]
    offsets[1000] = offsets[999] - 1  # one decreasing step
    assert kernel(offsets, 4.0, 64)[0] == int((np.diff(offsets) < 0).sum()) == 1
    with pytest.MonkeyPatch.context() as m:
        m.setattr(threads, "PARALLEL_THRESHOLD", 0)
        assert kernel(offsets, 4.0, 64)[0] == 1
        offsets[1000] = kept
        assert kernel(offsets, 4.0, 64) == want
    good = np.array([0, 3, 3, 7, 9], dtype=dtype)
    bad_cases = [(np.array([0, 3, 2, 9], dtype=dtype), 9,
                  "not monotonically increasing at position 1 \\(offsets\\[1\\]=3"),
                 (good, 8, "offsets\\[4\\]=9 exceeds the length of the content")]
    if dtype != "uint32":
        bad_cases.append((np.array([-1, 3, 9], dtype=dtype), 9, "is negative"))
    for bad, length, message in bad_cases:
        with pytest.raises(validate.InvalidLayout, match=message):
            validate.offsets(bad, length)
    assert validate.offsets(good, 9) == (0, 9)
