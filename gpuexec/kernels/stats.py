"""Per-process counters of what the kernel engine did: public calls, kernel
launches (by kernel name), hand-offs to awkward (by function and reason), the seconds
spent in public calls per family (the api module: reductions, indexing, structure,
elementwise, choice) and backend, and, with the awkward kernel provider installed
(``gpuexec.awkward``), awkward's kernel calls by outcome: served by the engine, fallen
back to awkward's own kernel, left to awkward. On a GPU a call's seconds end when it
returns: its launches are asynchronous unless it reads a result back.

Dask workers run tasks in threads of one process, so updates take a lock.
"""

from __future__ import annotations

import threading
from collections import Counter
from contextlib import contextmanager

_lock = threading.Lock()
_calls: Counter = Counter()
_kernels: Counter = Counter()
_handoffs: Counter = Counter()
_handoff_reasons: Counter = Counter()
_seconds: Counter = Counter()
#: awkward kernel calls through the provider: outcome -> Counter(kernel name)
AWKWARD_OUTCOMES = ("served", "fallback", "left")
_awkward: dict = {outcome: Counter() for outcome in AWKWARD_OUTCOMES}
_thread = threading.local()  # .tally: the Counter of ``counting_awkward`` in this thread


def record_call(function: str, backend: str, family: str | None = None,
                seconds: float = 0.0) -> None:
    with _lock:
        _calls[f"{function}[{backend}]"] += 1
        if family is not None:
            _seconds[f"{family}[{backend}]"] += seconds


def record_kernel(kernel: str, launches: int = 1) -> None:
    with _lock:
        _kernels[kernel] += launches


def record_handoff(function: str, reason: str) -> None:
    with _lock:
        _handoffs[function] += 1
        _handoff_reasons[f"{function}: {reason}"] += 1


def record_awkward(outcome: str, kernel: str) -> None:
    """One awkward kernel call: ``outcome`` "served" (an engine adapter ran it),
    "fallback" (awkward's own kernel ran it) or "left" (a reduction the engine's overload
    handed back to awkward's reducer)."""
    with _lock:
        _awkward[outcome][kernel] += 1
    tally = getattr(_thread, "tally", None)
    if tally is not None:
        tally[outcome] += 1


def stats() -> dict:
    """A snapshot: ``{"calls", "kernels", "handoffs", "handoff_reasons", "awkward"}`` as
    plain dicts (``awkward``: outcome -> {kernel: calls}), plus the totals ``n_calls``,
    ``n_launches``, ``n_handoffs`` and ``n_awkward_served``/``_fallback``/``_left``."""
    with _lock:
        snap = {
            "calls": dict(_calls),
            "kernels": dict(_kernels),
            "handoffs": dict(_handoffs),
            "handoff_reasons": dict(_handoff_reasons),
            "seconds": dict(_seconds),
            "awkward": {outcome: dict(c) for outcome, c in _awkward.items()},
        }
    snap["n_calls"] = sum(snap["calls"].values())
    snap["n_launches"] = sum(snap["kernels"].values())
    snap["n_handoffs"] = sum(snap["handoffs"].values())
    for outcome in AWKWARD_OUTCOMES:
        snap[f"n_awkward_{outcome}"] = sum(snap["awkward"][outcome].values())
    return snap


def reset_stats() -> None:
    with _lock:
        for c in (_calls, _kernels, _handoffs, _handoff_reasons, _seconds, *_awkward.values()):
            c.clear()


@contextmanager
def counting():
    """``with gk.counting() as s: ...`` resets the counters and fills ``s`` with the
    snapshot taken on exit (tests and the executor use it per chunk)."""
    reset_stats()
    result: dict = {}
    try:
        yield result
    finally:
        result.update(stats())


@contextmanager
def counting_awkward():
    """``with counting_awkward() as tally:`` counts this thread's awkward kernel calls by
    outcome (``AWKWARD_OUTCOMES``) while the block runs; other threads' calls are not in
    it (a worker runs several tasks at once in one process)."""
    tally: Counter = Counter()
    outer = getattr(_thread, "tally", None)
    _thread.tally = tally
    try:
        yield tally
    finally:
        _thread.tally = outer
        if outer is not None:
            outer.update(tally)
