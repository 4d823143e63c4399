"""What the placement policy records: why each chunk went where (``Reason`` and a
detail), the backup copies it offers, and each slot's queue (pure Python)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Reason(enum.Enum):
    """The rule that placed a chunk. A decision's ``detail`` says more: for the load
    rules, where the chunk stood against the crossover ("below crossover", "above
    crossover", "no CPU pool", "no GPU pool"); for a retry, why it was re-run. The value
    is what decisions and the run report show."""

    ONLY_POOL = "only pool"
    PROBE = "probe"  # each pool's first ``probe`` chunks, whatever the models say
    UNMEASURED = "probe: not measured yet"  # a pool with no measurement and nothing queued
    NO_CPU_POOL = "no CPU pool"
    NO_GPU_POOL = "no GPU pool"
    BELOW_CROSSOVER = "below crossover"
    GPU_EARLIER = "GPU pool finishes earlier"
    CPU_EARLIER = "CPU pool finishes earlier"
    FEWEST_QUEUED = "no pool measured yet: fewest queued per slot"
    OTHERS_FULL = "the other pools unmeasured and full"
    IDLE_SLOT = "idle slot finishing before the predicted end"
    SLOTS_HELD = "the faster pool's slots held"
    RETRY = "retry"

    def __str__(self) -> str:
        return self.value


@dataclass
class Decision:
    """Where one chunk went and why; ``actual_seconds`` is filled in by ``observe``."""

    chunk: int
    file: str
    dataset: str | None
    tree: str | None
    entrystart: int
    entrystop: int
    events: int
    pool: str
    reason: Reason
    detail: str  # more on the reason (see ``Reason``); "" when the reason says it all
    predicted_seconds: float
    predicted_start: float
    predicted_finish: float
    crossover: float | None  # events; None = infinite (no GPU pool can win)
    slot: int = 0
    task: int | None = None  # merged GPU task this chunk belongs to
    actual_seconds: float | None = None  # of the copy whose output was taken
    started_at: float | None = None  # when its task started on a worker (``started``)
    finished_at: float | None = None
    retried_from: str | None = None  # pool of a failed first attempt
    backup_pool: str | None = None  # pool of a second copy (``Placement.backups``)
    backup_predicted_seconds: float | None = None  # of the copy's task
    taken_from: str | None = None  # pool whose output counted (with a backup: who won)

    def as_dict(self) -> dict:
        """A plain dict for JSON and the run report (the reason as its value)."""
        return {**self.__dict__, "reason": self.reason.value}


@dataclass(frozen=True)
class Backup:
    """A second copy of a task in flight, on another pool's idle slots: ``chunks`` (the
    task's chunk ids) predicted to finish at ``original_finish`` where they are, at
    ``copy_finish`` on ``pool``. The first copy to complete counts (``settle``)."""

    chunks: tuple[int, ...]
    from_pool: str
    pool: str
    original_finish: float
    copy_finish: float


@dataclass
class Copy:
    """A chunk's backup copy, booked on ``slot`` of ``pool`` for ``predicted_seconds``;
    ``started_at`` and ``actual_seconds`` are filled in as its task runs and ends."""

    pool: str
    slot: int
    predicted_seconds: float
    actual_seconds: float | None = None
    started_at: float | None = None


@dataclass
class Slot:
    """One slot's queue: its chunks not yet observed, in order (the first is running
    since ``anchor``: the slot's last completion, or when it got work while idle)."""

    anchor: float = 0.0
    outstanding: dict = field(default_factory=dict)  # chunk id -> predicted seconds

    def free_at(self, now: float) -> float:
        if not self.outstanding:
            return max(now, self.anchor)
        queued = iter(self.outstanding.values())
        running = next(queued)
        # a running chunk past its predicted end is still running: it ends at the earliest now
        return max(now, self.anchor + running) + sum(queued)

    def idle(self, now: float) -> bool:
        return not self.outstanding and self.anchor <= now

    def held(self, now: float) -> bool:
        """Busy with no chunk of this run's queue: a cancelled task that runs on."""
        return not self.outstanding and self.anchor > now

    def add(self, chunk_id: int, seconds: float, now: float) -> None:
        if not self.outstanding:
            self.anchor = max(self.anchor, now)
        self.outstanding[chunk_id] = seconds

    def drop(self, chunk_ids, busy_until: float | None = None) -> None:
        """Take ``chunk_ids`` off the queue without their completion (a cancelled
        copy); ``busy_until``: they were running, and a running task cannot be stopped:
        the slot is busy until then (or until ``Placement.lost`` says it ended)."""
        for cid in chunk_ids:
            self.outstanding.pop(cid, None)
        if busy_until is not None:
            self.anchor = max(self.anchor, busy_until)


def straggler_end(started: float, seconds: float, now: float) -> float:
    """When a task started at ``started`` and predicted ``seconds`` ends. One past its
    predicted end is a straggler: it is guessed to need as long again as it has overrun,
    and at least half its prediction."""
    end = started + seconds
    if end < now:
        end = now + max(0.5 * seconds, now - end)
    return end


def chunk_ids_of(chunk_ids) -> list[int]:
    """One chunk id or several, as a list."""
    return [chunk_ids] if isinstance(chunk_ids, int) else list(chunk_ids)
