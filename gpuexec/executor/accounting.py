"""A call's report: what the loop recorded (``CallRecord``) and the merged output's
counts and runs become a ``CallReport``, with the entry check (docs/executor.md#the-run-report)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuexec.executor.errors import describe_item
from gpuexec.executor.task import _Partial, expected_units, stage
from gpuexec.scheduler import keys
from gpuexec.scheduler.report import (
    CallReport,
    ChunkRun,
    EntriesMismatch,
    Rerun,
    SkippedChunk,
    check_entries,
)


@dataclass
class CallRecord:
    """What a call records for its report as it runs: where each chunk ran, the merged
    tasks, fallbacks, backup copies, phases and busy workers. A call run in this
    process fills ``pool_of`` only."""

    pool_of: dict = field(default_factory=dict)  # chunk index -> pool it ran on
    task_of: dict = field(default_factory=dict)  # chunk index -> its merged task's number
    fallbacks: list = field(default_factory=list)  # Fallback
    copies: dict = field(default_factory=dict)  # chunk indices -> BackupCopy
    merge_notes: list = field(default_factory=list)  # merged GPU tasks in words
    phases: dict = field(default_factory=dict)  # CallReport.phases
    busy_at_start: dict = field(default_factory=dict)  # worker -> seconds still busy
    left_running: list = field(default_factory=list)  # labels of copies left running
    timeouts: list = field(default_factory=list)  # Rerun of each chunk past chunk-timeout


def reruns(client, run: str) -> list[Rerun]:
    """The scheduler's record of call ``run``'s tasks re-run after a worker died."""
    from gpuexec.scheduler.plugins import ledger_pop

    out = []
    for key, worker, what in client.run_on_scheduler(ledger_pop, run):
        parsed = keys.parse(key)
        out.append(Rerun(parsed["label"] if parsed else str(key), worker, what))
    return out


def _chunk_runs(items, labels, record: CallRecord, result: _Partial) -> list[ChunkRun]:
    """One run per chunk, in chunk order; a merged task's time shared by its entries."""
    runs = []
    for run in result.runs:
        indices = run.indices
        task = record.task_of.get(indices[0]) if len(indices) > 1 else None
        total = sum(expected_units(items[i]) for i in indices) or 1
        for i in indices:
            share = expected_units(items[i]) / total
            runs.append((i, ChunkRun(labels[i], record.pool_of[i], run.worker,
                                     run.units if len(indices) == 1 else expected_units(items[i]),
                                     run.seconds * share, run.read * share,
                                     run.transfer * share, task)))
    return [r for _, r in sorted(runs, key=lambda x: x[0])]


def _awkward_kernels(record: CallRecord, result: _Partial) -> dict:
    """Per pool: awkward's kernel calls served by the engine, fallen back to awkward's own
    kernels and left to awkward (``gpuexec.awkward``), summed over the tasks kept."""
    from gpuexec.kernels.stats import AWKWARD_OUTCOMES

    out: dict = {}
    for run in result.runs:
        if not any(run.awkward):
            continue
        pool = out.setdefault(record.pool_of[run.indices[0]], dict.fromkeys(AWKWARD_OUTCOMES, 0))
        for outcome, n in zip(AWKWARD_OUTCOMES, run.awkward):
            pool[outcome] += n
    return out


def account(items, record: CallRecord, labels, result: _Partial, reran, seconds, policy):
    """The call's report, and the EntriesMismatch to raise (None if all is well)."""
    stage_, unit = stage(items[0])
    skipped = {index: text for index, text in result.skipped}
    mismatch = None
    try:
        processed = check_entries(
            {i: expected_units(item) for i, item in enumerate(items)},
            result.counts, result.doubled, skipped,
            lambda i: f"chunk #{i} ({describe_item(items[i])})", unit)
    except EntriesMismatch as err:
        processed, mismatch = sum(result.counts.values()), err
    call = CallReport(
        stage=stage_, unit=unit, chunks=len(items),
        expected=sum(expected_units(item) for i, item in enumerate(items) if i not in skipped),
        processed=processed,
        skipped=[SkippedChunk.of(items[i], stage_, text) for i, text in sorted(skipped.items())],
        reruns=list(reran) + record.timeouts,
        runs=_chunk_runs(items, labels, record, result),
        seconds=seconds,
        files=frozenset((getattr(item, "dataset", None), getattr(item, "filename", None))
                        for item in items),
        fallbacks=record.fallbacks,
        backups=list(record.copies.values()),
        merges=record.merge_notes,
        phases=dict(record.phases),
        busy_at_start=dict(record.busy_at_start),
        left_running=list(record.left_running),
        awkward_kernels=_awkward_kernels(record, result),
        placement=(None if policy is None else
                   {"decisions": policy.decisions(), "summary": policy.summary()}),
    )
    return call, mismatch


def failed_call(items, record: CallRecord | None, reran, seconds: float,
                err: BaseException) -> CallReport:
    """The report of a call that raised ``err``: what is known of it at that point."""
    stage_, unit = stage(items[0])
    record = record or CallRecord()
    return CallReport(
        stage=stage_, unit=unit, chunks=len(items),
        expected=sum(expected_units(item) for item in items),
        reruns=list(reran) + record.timeouts,
        seconds=seconds,
        files=frozenset((getattr(item, "dataset", None), getattr(item, "filename", None))
                        for item in items),
        fallbacks=list(record.fallbacks), backups=list(record.copies.values()),
        error=f"{type(err).__name__}: {err}")
