"""Input checks run by the API layer before any kernel, so that every backend raises the
same errors for the same bad input (kernels validate nothing).

Each check is a few vectorized O(n) passes (min/max/compare) that work on any nplike
(numpy, cupy): they only use array methods; offsets, checked most often, are read once
by a kernel of the engine that holds them (``offsets_summary``). The position of the
first offence is looked up only once a check has failed. Every error is a
``ValueError`` naming the argument; those whose awkward counterpart raises
``IndexError``/``TypeError`` also derive from that class, so code written against
awkward keeps catching them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gpuexec.kernels.memo import WeakMemo


class InvalidLayout(ValueError):
    """Offsets, starts/stops or an IndexedArray index that do not describe a layout."""


class IndexOutOfRange(ValueError, IndexError):
    """An index (1-D, jagged or of an IndexedArray) outside the array it indexes."""


class LengthMismatch(ValueError, IndexError):
    """Two arrays (or two lists) whose lengths must agree do not."""


class InvalidDtype(ValueError, TypeError):
    """An index that is not integer, a mask that is not boolean, ..."""


def _known(length) -> bool:
    return isinstance(length, (int, np.integer))


def _first(flags) -> int:
    """Position of the first True in a bool array (only called once one exists)."""
    return int(flags.argmax())


def _val(a, i) -> int:
    return int(a[i])


# -- which buffers already passed ------------------------------------------------------
# Layouts are immutable (awkward's contract), so an offsets buffer that passed its check
# against a content length passes it again: remembered per buffer object, through a
# weak reference, so that repeated calls on one array (a processor touches a column many
# times) skip the pass and, on a GPU, the host read of its answer. The longest list, the
# number of long lists and the two ends, read back with the answer, are remembered with
# it (``longest_list``, ``long_lists``, ``ends``).
_passed = WeakMemo()  # offsets buffer -> (content length, _Summary)

# A list is long when it is longer than max(factor x the mean, floor): the bound of the
# GPU strategy table's ``tail`` (its rows take these numbers), counted by the check
LONG_LIST = (4.0, 64)


def _entry(array):
    """(content length, summary) of a buffer that passed, or None."""
    return _passed.get(array)


_NO_TAIL = (None, None)


def tail_of(offsets) -> tuple:
    """(``longest_list``, ``long_lists``) of such a buffer in one lookup, else (None,
    None): what the GPU engine reads on every reduction."""
    entry = _entry(offsets)
    return _NO_TAIL if entry is None else (entry[1].longest, entry[1].n_long)


def longest_list(offsets):
    """The length of the longest list of an ``offsets`` buffer that passed ``offsets``
    (this very object), else None: the GPU engine picks its kernels by it (a mean list
    length alone cannot tell a few very long lists from none)."""
    return tail_of(offsets)[0]


def long_lists(offsets):
    """How many lists of such a buffer are long (``LONG_LIST``), else None: a handful
    of long lists among short ones need not change the kernel, many do."""
    return tail_of(offsets)[1]


def ends(offsets):
    """(offsets[0], offsets[n]) of such a buffer, else None: read with the check, so
    that slicing the content by them costs no further host read on a GPU."""
    entry = _entry(offsets)
    return None if entry is None else (entry[1].first, entry[1].last)


class _Summary(NamedTuple):
    """The backend's ``offsets_summary``."""

    n_down: int
    longest: int
    n_long: int
    first: int
    last: int


# -- layouts ---------------------------------------------------------------------------
def offsets(offsets, content_length, name="offsets") -> tuple[int, int]:
    """``offsets`` (integers[n+1]) start at >= 0, never decrease and end within the
    content; returns (offsets[0], offsets[n]). One pass by the engine that holds the
    buffer (the backend's ``offsets_summary``: on a GPU one launch and one host read)
    also counts the longest and the long lists. A buffer that passed for this content
    length is not checked again."""
    entry = _entry(offsets)
    if entry is not None and entry[0] == content_length:
        return entry[1].first, entry[1].last
    if offsets.ndim != 1 or offsets.shape[0] < 1:
        raise InvalidLayout(f"{name} must be a 1-d array with at least one entry, "
                            f"got shape {tuple(offsets.shape)}")
    if offsets.dtype.kind not in "iu":
        raise InvalidDtype(f"{name} must be integers, got {offsets.dtype}")
    as_int64 = offsets if offsets.dtype == np.int64 else offsets.astype(np.int64)
    summary = _Summary(*_engine_of(offsets).kernel("offsets_summary")(as_int64, *LONG_LIST))
    beyond = _known(content_length) and summary.last > content_length
    if not (summary.n_down or summary.first < 0 or beyond):
        if _known(content_length):
            _passed.put((int(content_length), summary), offsets)
        return summary.first, summary.last
    n = offsets.shape[0] - 1
    if summary.n_down:
        down = as_int64[1:] < as_int64[:-1]
        i = _first(down)
        raise InvalidLayout(
            f"{name} are not monotonically increasing at position {i} "
            f"({name}[{i}]={_val(offsets, i)} > {name}[{i + 1}]={_val(offsets, i + 1)})")
    # (the values as stored: a uint64 past the int64 range reads negative in the summary)
    if summary.first < 0:
        raise InvalidLayout(f"{name} out of range: {name}[0]={_val(offsets, 0)} is negative")
    raise InvalidLayout(
        f"{name} out of range: {name}[{n}]={_val(offsets, n)} exceeds the length of the "
        f"content ({content_length})")


def _namespace(array):
    """numpy or cupy, whichever ``array`` belongs to."""
    if type(array).__module__.startswith("cupy"):
        import cupy

        return cupy
    return np


def _engine_of(array):
    """The engine backend that holds ``array`` (numpy: the CPU one; a device array: the
    GPU one awkward's "cuda" arrays go to)."""
    from gpuexec.kernels import dispatch

    return dispatch.backend_of_buffer(array)


def starts_stops(starts, stops, content_length, name="starts/stops") -> None:
    """ListArray ``starts``/``stops``: as many stops as starts, start <= stop, and every
    non-empty list within the content (awkward's own validity rule)."""
    if starts.dtype.kind not in "iu" or stops.dtype.kind not in "iu":
        raise InvalidDtype(f"{name} must be integers, got {starts.dtype}/{stops.dtype}")
    n = starts.shape[0]
    if stops.shape[0] < n:
        raise LengthMismatch(
            f"{name}: starts has length {n} but stops has length {stops.shape[0]}")
    stops = stops[:n]
    if n == 0:
        return
    backwards = starts > stops
    # one combined flag vector, read back once (on a GPU each read is a host sync)
    checks = [backwards.any(), starts.min() < 0]
    if _known(content_length):
        checks.append(stops.max() > content_length)
    if not bool(_namespace(starts).stack(checks).any()):
        return
    if bool(backwards.any()):
        i = _first(backwards)
        raise InvalidLayout(f"{name}: starts[{i}]={_val(starts, i)} > stops[{i}]="
                            f"{_val(stops, i)} at position {i}")
    # a start below 0 or a stop past the content: only non-empty lists count
    nonempty = starts != stops
    bad = nonempty & (starts < 0)
    if _known(content_length):
        bad |= nonempty & (stops > content_length)
    if bool(bad.any()):
        i = _first(bad)
        raise InvalidLayout(
            f"{name} out of range at position {i}: list [{_val(starts, i)}, "
            f"{_val(stops, i)}) is outside the content of length {content_length}")


def indexed(index, content_length, name="IndexedArray index", option=False) -> None:
    """An IndexedArray index lies in [0, len(content)); an IndexedOptionArray index may
    also be negative (None)."""
    index_dtype(index, name)
    if index.shape[0] == 0:
        return
    lo, hi = int(index.min()), int(index.max())
    too_low = not option and lo < 0
    too_high = _known(content_length) and hi >= content_length
    if too_low or too_high:
        if too_low and too_high:
            bad = (index < 0) | (index >= content_length)
        else:
            bad = index < 0 if too_low else index >= content_length
        i = _first(bad)
        raise IndexOutOfRange(f"{name} out of range at position {i} ({name}[{i}]="
                              f"{_val(index, i)} for content of length {content_length})")


# -- arguments ---------------------------------------------------------------------------
def index_dtype(index, name="index") -> None:
    if index.dtype.kind not in "iu":
        raise InvalidDtype(f"{name} must be an integer array, got dtype {index.dtype}")


def mask_dtype(mask, name="mask") -> None:
    if mask.dtype.kind != "b":
        raise InvalidDtype(f"{name} must be a boolean array, got dtype {mask.dtype}")


def index_range(index, length, name="index") -> int:
    """A 1-D index into ``length`` entries: -length <= k < length (negative counts from
    the end, as in awkward and numpy). Returns the smallest index (0 when empty), so
    that the caller knows without another pass whether negative ones need wrapping."""
    index_dtype(index, name)
    if index.shape[0] == 0:
        return 0
    if index.dtype.kind == "u":
        hi = int(index.max())
        lo = 0
    else:
        lo, hi = int(index.min()), int(index.max())
    if lo < -length or hi >= length:
        bad = index >= length
        if index.dtype.kind == "i":
            bad |= index < -length
        i = _first(bad)
        raise IndexOutOfRange(f"{name} out of range at position {i} ({name}[{i}]="
                              f"{_val(index, i)} for an array of length {length})")
    return lo


def same_length(length, other_length, name="mask", what="array") -> None:
    if length != other_length:
        raise LengthMismatch(f"{name} has length {other_length} but the {what} has length "
                             f"{length}")


def same_list_lengths(starts, stops, other_starts, other_stops, name="mask") -> None:
    """List i of ``name`` has as many entries as list i of the array."""
    if starts.shape[0] == 0:
        return
    differ = (stops - starts) != (other_stops - other_starts)
    if bool(differ.any()):
        i = _first(differ)
        raise LengthMismatch(
            f"{name} list {i} has length {_val(other_stops, i) - _val(other_starts, i)} but "
            f"list {i} of the array has length {_val(stops, i) - _val(starts, i)}")


def jagged_index_failed(starts, stops, index_offsets, index, valid=None, name="index"):
    """Raise for a per-list pick that the kernel found out of range (``n_bad > 0``);
    runs only on that failure path, on the host."""
    starts, stops = np.asarray(_host(starts)), np.asarray(_host(stops))
    index_offsets, index = np.asarray(_host(index_offsets)), np.asarray(_host(index))
    lo, hi = int(index_offsets[0]), int(index_offsets[-1])
    counts = np.diff(index_offsets)
    lengths = np.repeat(stops - starts, counts)
    local = index[lo:hi].astype(np.int64)
    wrapped = np.where(local < 0, local + lengths, local)
    bad = (wrapped < 0) | (wrapped >= lengths)
    if valid is not None:
        bad &= np.asarray(_host(valid))[lo:hi].astype(bool)
    j = int(np.argmax(bad))
    lst = int(np.searchsorted(index_offsets, lo + j, side="right") - 1)
    raise IndexOutOfRange(
        f"{name} out of range at flat position {j}: {int(local[j])} in a list of length "
        f"{int(lengths[j])} (list {lst} of the indexed level, None lists skipped)")


def _host(a):
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else a
