"""What a run did, chunk by chunk: the report behind ``GPUExecutor.report``, and the
entry bookkeeping that turns a lost or doubled chunk into an error.

Every task reports how many units it processed (entries for a chunk of events, one for
a file's metadata), keyed by its chunk index; the reduction tree carries these counts
up. ``check_entries`` compares them with what was submitted, less what was skipped:
a chunk missing, counted twice or short of entries is an ``EntriesMismatch``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path


class EntriesMismatch(RuntimeError):
    """The processed entries differ from the entries of the chunks not skipped."""


class SkippedChunksWarning(UserWarning):
    """Chunks or files were skipped (``Runner(skipbadfiles=...)``); see ``executor.report``."""


@dataclass(frozen=True)
class SkippedChunk:
    """A chunk (stage "processing") or a whole file (stage "preprocessing": its metadata
    could not be read, so it has no entry range) left out of the result."""

    stage: str
    dataset: str | None
    filename: str | None
    treename: str | None
    entrystart: int | None
    entrystop: int | None
    exception: str

    @classmethod
    def of(cls, item, stage: str, exception: str) -> "SkippedChunk":
        return cls(stage, getattr(item, "dataset", None),
                   str(getattr(item, "filename", item)), getattr(item, "treename", None),
                   getattr(item, "entrystart", None), getattr(item, "entrystop", None),
                   exception)

    @property
    def entries(self) -> int | None:
        if self.entrystart is None or self.entrystop is None:
            return None
        return self.entrystop - self.entrystart

    def describe(self) -> str:
        where = (f"entries [{self.entrystart}, {self.entrystop})" if self.entries is not None
                 else "whole file")
        return (f"{self.filename} (dataset {self.dataset!r}, tree {self.treename!r}), {where}, "
                f"skipped in {self.stage}: {self.exception}")

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ChunkRun:
    """Where and how long one chunk ran (the attempt whose result was kept)."""

    label: str
    pool: str
    worker: str
    units: int
    seconds: float  # of the task (a merged GPU task's seconds are shared by its parts)
    read_seconds: float = 0.0  # reading and decompressing columns
    transfer_seconds: float = 0.0  # copying columns to the device
    task: int | None = None  # merged GPU task the chunk ran in
    end: float | None = None  # seconds from the call's start until the client saw it end

    @property
    def compute_seconds(self) -> float:
        return max(0.0, self.seconds - self.read_seconds - self.transfer_seconds)


@dataclass(frozen=True)
class Fallback:
    """A chunk that failed on a GPU worker (or whose GPU pool lost its last worker) and
    was run again on a CPU pool."""

    label: str
    from_pool: str
    to_pool: str
    reason: str


@dataclass
class BackupCopy:
    """A task in flight that was copied to another pool's idle slots as the run ended
    (``gpuexec.placement.backups``): which copy's output counted. The other copy was
    cancelled; one already running finished on its worker and its output was dropped."""

    label: str
    from_pool: str
    to_pool: str
    taken_from: str | None = None  # None: the call ended (failed) before either counted


@dataclass(frozen=True)
class Rerun:
    """A task that Dask ran again because the worker holding it died."""

    label: str
    worker: str
    what: str  # "assigned to it" (queued or running there) or "result lost"


@dataclass
class CallReport:
    """One executor call: ``Runner`` makes one to preprocess and one to process."""

    stage: str  # "preprocessing", "processing" or "items"
    unit: str  # "entries", "files" or "items"
    chunks: int
    expected: int = 0  # units of the chunks not skipped
    processed: int = 0  # units the tasks reported
    skipped: list[SkippedChunk] = field(default_factory=list)
    reruns: list[Rerun] = field(default_factory=list)
    runs: list[ChunkRun] = field(default_factory=list)
    seconds: float = 0.0
    files: frozenset = frozenset()  # (dataset, filename) of the items
    fallbacks: list[Fallback] = field(default_factory=list)
    backups: list[BackupCopy] = field(default_factory=list)
    merges: list[str] = field(default_factory=list)  # GPU tasks made of several chunks
    placement: dict | None = None  # {"decisions": [...], "summary": {...}}
    # seconds from the call's start until: its first task was submitted, the client saw
    # its last task complete, (outputs merged in the client) the last output was fetched,
    # the merged output was in this process (the tail of a short call is the last task
    # seen to the merged output)
    phases: dict = field(default_factory=dict)
    # workers that a copy cancelled by an earlier call still ran at this call's start ->
    # seconds they were predicted to stay busy (this call's tasks went to other workers),
    # and the labels of this call's cancelled copies still running when it ended
    busy_at_start: dict = field(default_factory=dict)
    left_running: list[str] = field(default_factory=list)
    error: str | None = None  # a failed call: the error it raised
    # pool -> awkward kernel calls {"served", "fallback", "left"} (gpuexec.awkward)
    awkward_kernels: dict = field(default_factory=dict)

    def read_files(self) -> frozenset:
        """(dataset, filename) of the items not skipped."""
        gone = {(s.dataset, s.filename) for s in self.skipped if s.entrystart is None}
        return frozenset(f for f in self.files if (f[0], str(f[1])) not in gone)

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("skipped", "reruns", "runs", "fallbacks", "backups"):
            out[name] = [asdict(x) for x in out[name]]
        out["files"] = sorted([list(f) for f in self.files], key=str)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "CallReport":
        data = dict(data)
        for name, kind in (("skipped", SkippedChunk), ("reruns", Rerun), ("runs", ChunkRun),
                           ("fallbacks", Fallback), ("backups", BackupCopy)):
            data[name] = [kind(**x) for x in data.get(name, ())]
        data["files"] = frozenset(tuple(f) for f in data.get("files", ()))
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def timing(self) -> dict[str, dict[str, float]]:
        """Per pool: seconds of reading, host-device transfer and compute, summed over
        the chunks that ran there."""
        out: dict[str, dict[str, float]] = {}
        for run in self.runs:
            t = out.setdefault(run.pool, {"read": 0.0, "transfer": 0.0, "compute": 0.0,
                                          "events": 0})
            t["read"] += run.read_seconds
            t["transfer"] += run.transfer_seconds
            t["compute"] += run.compute_seconds
            t["events"] += run.units
        return out

    @property
    def awkward_totals(self) -> dict[str, int]:
        """awkward kernel calls by outcome, summed over the pools ({} when none counted)."""
        from gpuexec.kernels.stats import AWKWARD_OUTCOMES

        if not self.awkward_kernels:
            return {}
        return {k: sum(p[k] for p in self.awkward_kernels.values()) for k in AWKWARD_OUTCOMES}

    @property
    def pools(self) -> dict[str, int]:
        """Chunks completed per pool."""
        return dict(Counter(run.pool for run in self.runs))

    def summary(self) -> str:
        pools = ", ".join(f"{n} on {pool}" for pool, n in sorted(self.pools.items())) or "none"
        text = (f"{self.stage}: {self.chunks} chunk(s) ({pools}) in {self.seconds:.2f} s; "
                f"{self.processed} of {self.expected} {self.unit} processed")
        if self.error is not None:
            text += f"; FAILED: {self.error.splitlines()[0] if self.error else ''}"
        if self.skipped:
            text += f"; {len(self.skipped)} skipped"
        if self.reruns:
            text += f"; {len(self.reruns)} task(s) re-run after a worker died"
        if self.fallbacks:
            text += f"; {len(self.fallbacks)} chunk(s) moved from a GPU to a CPU pool"
        if self.awkward_kernels:
            n = self.awkward_totals
            text += (f"; awkward kernel calls: {n['served']} served by the engine, "
                     f"{n['fallback']} fallbacks, {n['left']} left to awkward")
        if self.merges:
            text += f"; {len(self.merges)} GPU task(s) merged from adjacent chunks"
        if self.backups:
            won = sum(1 for b in self.backups if b.taken_from == b.to_pool)
            text += (f"; {len(self.backups)} task(s) copied to another pool's idle slots "
                     f"({won} copies counted first)")
        if self.left_running:
            text += (f"; {len(self.left_running)} cancelled task(s) still running on their "
                     "workers at the end")
        if self.busy_at_start:
            text += (f"; {len(self.busy_at_start)} worker(s) still busy with an earlier "
                     "call's cancelled task at the start")
        return text


@dataclass
class RunReport:
    """The report of the last run: its preprocessing call (if any) and processing call."""

    preprocessing: CallReport | None = None
    processing: CallReport | None = None

    def add(self, call: CallReport) -> "RunReport":
        """Record ``call``; returns the report it belongs to. A processing call joins the
        preprocessing call before it (``Runner`` does both) when that one succeeded and
        either every file it processes was preprocessed there, or every file read there
        is among those it processes (``Runner`` preprocesses only the files missing from
        its metadata cache, and a file skipped there is not processed); otherwise a call
        starts a new run."""
        if call.stage == "preprocessing":
            return RunReport(preprocessing=call)
        pre = self.preprocessing
        if (self.processing is None and pre is not None and pre.error is None
                and (call.files <= pre.files or pre.read_files() <= call.files)):
            self.processing = call
            return self
        return RunReport(processing=call)

    @property
    def error(self) -> str | None:
        """The error of a failed call of this run, None if none failed."""
        return next((c.error for c in self.calls if c.error is not None), None)

    def to_dict(self) -> dict:
        return {"format": "gpuexec-run-report-1",
                "preprocessing": None if self.preprocessing is None else self.preprocessing.to_dict(),
                "processing": None if self.processing is None else self.processing.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "RunReport":
        return cls(*(None if data.get(k) is None else CallReport.from_dict(data[k])
                     for k in ("preprocessing", "processing")))

    def save(self, path) -> tuple[Path, Path]:
        """Write the report as ``<path>.json`` and one HTML page ``<path>.html`` (plots
        with BokehJS inline: it opens offline); returns both paths. A ``.json`` or
        ``.html`` suffix of ``path`` is replaced."""
        from gpuexec.scheduler.report_html import write_html

        path = Path(path)
        if path.suffix in (".json", ".html"):
            path = path.with_suffix("")
        path.parent.mkdir(parents=True, exist_ok=True)
        json_path, html_path = Path(f"{path}.json"), Path(f"{path}.html")
        json_path.write_text(json.dumps(self.to_dict(), indent=1, default=str))
        write_html(self, html_path)
        return json_path, html_path

    @classmethod
    def load(cls, path) -> "RunReport":
        """A report written by ``save`` (its ``.json``)."""
        path = Path(path)
        if path.suffix != ".json":
            path = Path(f"{path.with_suffix('') if path.suffix == '.html' else path}.json")
        return cls.from_dict(json.loads(path.read_text()))

    @property
    def calls(self) -> list[CallReport]:
        return [c for c in (self.preprocessing, self.processing) if c is not None]

    @property
    def skipped(self) -> list[SkippedChunk]:
        return [s for c in self.calls for s in c.skipped]

    @property
    def reruns(self) -> list[Rerun]:
        return [r for c in self.calls for r in c.reruns]

    @property
    def fallbacks(self) -> list[Fallback]:
        return [f for c in self.calls for f in c.fallbacks]

    @property
    def placement(self) -> dict | None:
        """The processing call's placement decisions and summary."""
        return self.processing.placement if self.processing is not None else None

    def __str__(self) -> str:
        lines = [c.summary() for c in self.calls]
        lines += ["  skipped " + s.describe() for s in self.skipped]
        lines += [f"  re-ran {r.label} ({r.what} on {r.worker})" for r in self.reruns]
        lines += [f"  {f.label}: {f.from_pool} -> {f.to_pool} ({f.reason})"
                  for f in self.fallbacks]
        lines += [f"  {b.label}: copied {b.from_pool} -> {b.to_pool}, counted from "
                  f"{b.taken_from or 'neither'}" for c in self.calls for b in c.backups]
        lines += [f"  {m}" for c in self.calls for m in c.merges]
        return "\n".join(lines)


def skipped_warning(skipped: list[SkippedChunk], limit: int = 10) -> str:
    lines = [f"gpuexec skipped {len(skipped)} chunk(s)/file(s) (skipbadfiles); "
             "they are not in the result (executor.report.skipped lists them all):"]
    lines += ["  " + s.describe() for s in skipped[:limit]]
    if len(skipped) > limit:
        lines.append(f"  ... and {len(skipped) - limit} more")
    return "\n".join(lines)


def check_entries(expected: dict[int, int], processed: dict[int, int], doubled: Iterable[int],
                  skipped: Iterable[int], describe: Callable[[int], str], unit: str) -> int:
    """Raise EntriesMismatch unless every chunk not skipped was processed exactly once
    with its expected units; returns the units processed."""
    skipped = set(skipped)
    doubled = set(doubled)
    problems = []
    for index in sorted(doubled):
        problems.append(f"{describe(index)}: result merged more than once")
    for index, want in expected.items():
        got = processed.get(index)
        if index in doubled:
            continue
        if index in skipped:
            if got is not None:
                problems.append(f"{describe(index)}: reported skipped, yet {got} {unit} merged")
        elif got is None:
            problems.append(f"{describe(index)}: lost (no result merged)")
        elif got != want:
            problems.append(f"{describe(index)}: {got} {unit} processed, {want} expected")
    for index in sorted(processed.keys() - expected.keys()):
        problems.append(f"result for chunk #{index}, which was never submitted")
    total_expected = sum(n for i, n in expected.items() if i not in skipped)
    total = sum(processed.values())
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise EntriesMismatch(
            f"gpuexec: {total_expected} {unit} expected from the chunks not skipped, "
            f"{total} processed:\n  {shown}{more}")
    return total
