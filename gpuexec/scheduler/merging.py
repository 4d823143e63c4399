"""Chunks, and merging adjacent chunks of one file into larger GPU tasks (pure Python).

coffea's ``Runner`` cuts a file into equal chunks. A GPU task pays a fixed cost (launches,
transfers) that a CPU chunk barely has, so the executor places the chunks first, merges
those placed on a GPU pool with ``merge_for_gpu`` into tasks of up to a target size, and
tells the policy which chunks run as one task (``Placement.mark_merged``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Chunk:
    """One unit of work: entries ``[start, stop)`` of ``tree`` in ``file``."""

    id: int
    file: str = ""
    start: int = 0
    stop: int = 0
    tree: str | None = None
    dataset: str | None = None

    def __post_init__(self):
        if self.stop < self.start:
            raise ValueError(f"chunk {self.id}: entrystop {self.stop} < entrystart {self.start}")

    @property
    def events(self) -> int:
        return self.stop - self.start

    @classmethod
    def of(cls, item, id: int) -> "Chunk":
        """The chunk of a coffea ``WorkItem`` (or anything with filename, entrystart,
        entrystop; a plain int is a chunk of that many events)."""
        if isinstance(item, Chunk):
            return replace(item, id=id)
        if isinstance(item, int):
            return cls(id, "", 0, item)
        return cls(id, str(getattr(item, "filename", "")), int(item.entrystart),
                   int(item.entrystop), getattr(item, "treename", None),
                   getattr(item, "dataset", None))



@dataclass(frozen=True)
class Merge:
    """Items ``parts`` (indices into the input) merged into one task."""

    parts: tuple[int, ...]
    filename: str
    treename: str | None
    entrystart: int
    entrystop: int

    @property
    def events(self) -> int:
        return self.entrystop - self.entrystart

    def describe(self) -> str:
        return (f"merged {len(self.parts)} chunks of {self.filename} (tree {self.treename!r}) "
                f"into one GPU task, entries [{self.entrystart}, {self.entrystop})")

    def as_dict(self) -> dict:
        return {"parts": list(self.parts), "filename": self.filename, "treename": self.treename,
                "entrystart": self.entrystart, "entrystop": self.entrystop, "events": self.events}


@dataclass
class MergeResult:
    """``items``: the tasks (merged or not); ``parts[i]``: indices of the input items in
    task i; ``merges``: the tasks that merged more than one item."""

    items: list
    parts: list[tuple[int, ...]]
    merges: list[Merge]

    def describe(self) -> list[str]:
        return [m.describe() for m in self.merges]


def _file_key(item) -> tuple:
    """(dataset, file, tree, uuid): items merge only when all four agree."""
    if isinstance(item, Chunk):
        return (item.dataset, item.file, item.tree, None)
    return (getattr(item, "dataset", None), str(getattr(item, "filename", "")),
            getattr(item, "treename", None), getattr(item, "fileuuid", None))


def _with_range(item, start: int, stop: int):
    if isinstance(item, Chunk):
        return replace(item, start=start, stop=stop)
    return replace(item, entrystart=start, entrystop=stop)


def merge_for_gpu(items: Sequence, target_events: int) -> MergeResult:
    """Merge runs of adjacent items of one file (same dataset, filename, treename and
    fileuuid; one's entrystop equal to the next's entrystart) into tasks of at most
    ``target_events`` entries (an item already larger stays alone). Items are
    dataclasses such as coffea's ``WorkItem`` (merged ones are ``dataclasses.replace``
    copies of the first part, with the merged range) or ``Chunk``. Tasks keep the order
    of their first part; every input item lands in exactly one task."""
    if target_events < 1:
        raise ValueError(f"target_events must be >= 1, got {target_events}")

    def rng(item):
        if isinstance(item, Chunk):
            return item.start, item.stop
        return int(item.entrystart), int(item.entrystop)

    by_file: dict[tuple, list[int]] = {}
    for i, item in enumerate(items):
        by_file.setdefault(_file_key(item), []).append(i)
    groups: list[tuple[int, ...]] = []
    for indices in by_file.values():
        indices = sorted(indices, key=lambda i: rng(items[i]))
        run: list[int] = []
        run_events = 0
        for i in indices:
            start, stop = rng(items[i])
            contiguous = bool(run) and rng(items[run[-1]])[1] == start
            if contiguous and run_events + (stop - start) <= target_events:
                run.append(i)
                run_events += stop - start
                continue
            if run:
                groups.append(tuple(run))
            run, run_events = [i], stop - start
        if run:
            groups.append(tuple(run))
    groups.sort(key=lambda g: min(g))
    out_items, merges = [], []
    for group in groups:
        first = items[group[0]]
        if len(group) == 1:
            out_items.append(first)
            continue
        start, stop = rng(first)[0], rng(items[group[-1]])[1]
        out_items.append(_with_range(first, start, stop))
        _, filename, treename, _ = _file_key(first)
        merges.append(Merge(group, filename, treename, start, stop))
    return MergeResult(out_items, groups, merges)
