"""Merging the chunks' outputs in chunk order, whatever the order of completion: fetched
into the client and added there (``merge_on="client"``), or merged by a tree of tasks on
the cluster (``merge_on="cluster"``) (docs/executor.md#merging)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from coffea.processor import accumulate

from gpuexec.executor.errors import MergeError
from gpuexec.executor.task import _pack, _Partial, _unpack
from gpuexec.scheduler import keys

#: threads that fetch completed tasks' outputs into the client (``merge_on="client"``);
#: each waits on Dask's event loop, which does the transfers
FETCH_THREADS = 4


def _tally(total: _Partial, part: _Partial) -> None:
    """Add ``part``'s chunk counts, doubled and skipped chunks and runs into ``total``'s (a
    chunk counted twice is listed in ``doubled``); the values are the caller's."""
    for index, units in part.counts.items():
        if index in total.counts:
            total.doubled.append(index)
            total.counts[index] += units
        else:
            total.counts[index] = units
    total.doubled.extend(part.doubled)
    total.skipped.extend(part.skipped)
    total.runs.extend(part.runs)


def _merge(parts: list[_Partial], compression) -> _Partial:
    """One output of ``parts`` (a merge task on a worker, or the client's own reads)."""
    total = _Partial.empty()
    outputs = []
    for part in parts:
        _tally(total, part)
        if part.value is not None:
            outputs.append(part)
    if len(outputs) == 1:
        total.value, total.packed = outputs[0].value, outputs[0].packed
        return total
    try:
        total.value, total.packed = _pack(accumulate(_unpack(p) for p in outputs), compression)
    except Exception as err:
        raise MergeError(f"{type(err).__name__}: {err}", sorted(total.counts)) from err
    return total


@dataclass
class _Fetched:
    """A completed task's output fetched into this process (``merge_on="client"``) for
    task ``key``: the output, or the error that fetching it raised."""

    key: str
    value: Any
    error: BaseException | None


def _gather_each(client, futures: list) -> list:
    """(value, None) or (None, error) per future: one gather for all of them, and where
    that fails one fetch each, so that an output that cannot be fetched fails alone."""
    try:
        return [(value, None) for value in client.gather(futures)]
    except Exception:
        outcomes = []
        for future in futures:
            try:
                outcomes.append((future.result(), None))
            except Exception as err:
                outcomes.append((None, err))
        return outcomes


@dataclass
class ChunkOrder:
    """Outputs released in chunk order (so that outputs such as growing categorical axes
    come out as in coffea's executors): an output waits until every earlier chunk's is in."""

    ready: dict = field(default_factory=dict)  # first chunk index -> (output, its indices)
    frontier: int = 0  # lowest chunk index whose output has not been released
    accounted: set = field(default_factory=set)

    def add(self, output, indices) -> list:
        """Take ``output`` of chunks ``indices``; the outputs now released, in order."""
        self.ready[min(indices)] = (output, indices)
        released = []
        while True:
            if self.frontier in self.accounted:
                self.frontier += 1
            elif self.frontier in self.ready:
                output, covered = self.ready.pop(self.frontier)
                self.accounted.update(covered)
                released.append(output)
            else:
                return released

    def check_done(self) -> None:
        if self.ready:
            raise RuntimeError("gpuexec: internal error: outputs of chunks "
                               f"{sorted(self.ready)} wait for chunk #{self.frontier}")


class ClientMerge:
    """``merge_on="client"``: completed tasks' outputs fetched into this process in the
    background and added to the call's output as they come."""

    def __init__(self, client):
        self.client = client
        self.total = _Partial.empty()
        self.owned = False  # whether self.total.value may be added into in place
        self.fetching: dict = {}  # task key -> the loop's record of the task
        self.fetcher = None

    def absorb(self, part: _Partial) -> None:
        """Add a fetched output to the call's output, as ``_merge`` does on a worker."""
        total = self.total
        _tally(total, part)
        if part.value is None:
            return
        try:
            value = _unpack(part)
            if total.value is None:
                # unpacked here it is this process's own; else maybe an in-process worker's
                total.value, self.owned = value, part.packed
            elif self.owned:
                total.value = accumulate([value], total.value)
            else:  # a new object, added into in place from now on
                total.value, self.owned = accumulate([total.value, value]), True
        except Exception as err:
            raise MergeError(f"{type(err).__name__}: {err}", sorted(total.counts)) from err

    def fetch(self, subs: list, put) -> None:
        """Fetch the outputs of ``subs`` (tasks seen complete together) in one gather: one
        request per worker holding some, not a round trip each (docs/executor.md#merging).
        ``put`` gets a ``_Fetched`` per output when it is here."""
        from concurrent.futures import ThreadPoolExecutor

        if self.fetcher is None:
            self.fetcher = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="gpuexec-fetch")
        futures = [sub.future for sub in subs]
        for sub in subs:
            self.fetching[sub.future.key] = sub
        job = self.fetcher.submit(_gather_each, self.client, futures)
        job.add_done_callback(functools.partial(self._fetched, futures, put))

    @staticmethod
    def _fetched(futures: list, put, job) -> None:
        try:
            outcomes = job.result()
        except BaseException as err:  # cancelled at shutdown, or a bug: each output fails
            outcomes = [(None, err)] * len(futures)
        for future, (value, err) in zip(futures, outcomes):
            put(_Fetched(future.key, value, err))

    def shutdown(self) -> None:
        if self.fetcher is not None:
            self.fetcher.shutdown(wait=False, cancel_futures=True)


class TreeMerge:
    """``merge_on="cluster"``: a level of the tree holding ``treereduction`` outputs is
    merged by one task into an output of the level above."""

    def __init__(self, client, run_token: str, compression, treereduction: int,
                 resources: dict | None, priority: int, on_submit=None):
        self.client, self.run_token = client, run_token
        self.on_submit = on_submit  # called with the number of merge tasks submitted
        self.compression, self.treereduction = compression, treereduction
        self.resources, self.priority = resources, priority
        self.levels: list[list] = []  # the tree's open levels (futures)
        self.submitted = 0  # merge tasks submitted

    def submit(self, groups: list, level: int) -> list:
        """One ``_merge`` task per group of outputs, on the merge pool."""
        futures = self.client.map(
            _merge, groups, compression=self.compression,
            key=[keys.merge_key(self.run_token, level, self.submitted + j)
                 for j in range(len(groups))],
            resources=self.resources, pure=False, priority=self.priority)
        self.submitted += len(groups)
        if self.on_submit is not None:
            self.on_submit(len(groups))
        return futures

    def push(self, level: int, future) -> None:
        """Add an output to ``level``, merging the level once it is full."""
        while len(self.levels) <= level:
            self.levels.append([])
        self.levels[level].append(future)
        if len(self.levels[level]) >= self.treereduction:
            group, self.levels[level] = self.levels[level], []
            self.push(level + 1, self.submit([group], level)[0])

    def outputs(self, order: ChunkOrder) -> list:
        """The futures of outputs not merged yet, earliest chunks first."""
        return [f for level in reversed(self.levels) for f in level] + \
            [f for f, _ in order.ready.values()]

    def finish(self, order: ChunkOrder):
        """The future of the call's one output."""
        work, level = self.outputs(order), len(self.levels)
        while len(work) > 1:
            groups = [work[i:i + self.treereduction]
                      for i in range(0, len(work), self.treereduction)]
            work = self.submit(groups, level)
            level += 1
        return work[0]
