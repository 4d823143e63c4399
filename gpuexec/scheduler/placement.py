"""Where each chunk runs: the size- and load-aware placement policy (pure Python, no Dask).

A chunk goes to a GPU pool when its size is at or above the GPU crossover (events per
chunk where the GPU pool's predicted time drops to the CPU pool's) *and* the GPU pool's
predicted finish time is earlier than the CPU pool's; otherwise to the CPU pool. When
chunks are assigned as others complete (``assign(..., backlog_events=...)``, windowed
submission), a pool with a slot idle now takes the chunk if it finishes it before the
predicted end of all remaining work, so that the fastest pool's short queue does not
leave the other pool idle. Below the crossover that holds for a GPU pool too: slower per
chunk than a CPU slot, an idle GPU slot that finishes the chunk before the run's end
shortens the run (ADL Q8 on the H200 host: a GPU chunk took 0.5 s, a CPU chunk 0.2 s, and
the one GPU worker of the default pools sat idle on its cores).

Each pool is modelled by its slots (chunks it runs at once: workers x tasks per worker),
a cost model per slot (``gpuexec.scheduler.costs``: seeded from the calibration, refined
online by ``observe``) and a queue (per slot, the predicted time it becomes free).

Every decision is recorded (``decisions()`` returns plain dicts for JSON and the run
report) with its ``Reason`` and a detail (``gpuexec.scheduler.decisions``), the predicted
and, once observed, the actual seconds.

``merge_for_gpu`` (``gpuexec.scheduler.merging``) merges adjacent chunks of one file into
larger GPU tasks: place the chunks first, merge those placed on a GPU pool,
``mark_merged`` each merged group and ``observe`` it with the ids of its parts. A pool
whose tasks hold ``merge`` chunks charges each chunk a ``1/merge`` share of the fixed
cost (crossover and finish times alike), and queues the chunks of one task on one slot
until the task is full or the executor submits the batch (``end_batch``).

Once every chunk is placed, ``backups`` offers second copies of tasks in flight to another
pool's idle slots where the copy is predicted to finish clearly earlier (stragglers, or a
slow pool's last chunks bound before any time was measured): the executor reports when
tasks start (``started``), the first copy to complete counts (``settle``), and a cancelled
copy that ran to its end anyway still teaches its pool's model (``lost``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence

from gpuexec.scheduler.costs import (
    CPU,
    GPU,
    KINDS,
    CostModel,
    Pool,
    crossover_events,
    ew,
    pool_kind,
    pool_slots,
)
from gpuexec.scheduler.decisions import (
    Backup,
    Copy,
    Decision,
    Reason,
    Slot,
    chunk_ids_of,
    straggler_end,
)
from gpuexec.scheduler.merging import Chunk, Merge, MergeResult, merge_for_gpu

__all__ = ["BACKUP_TICK", "CPU", "GPU", "KINDS", "Backup", "Chunk", "CostModel", "Decision",
           "Merge", "MergeResult", "Placement", "Pool", "Reason", "crossover_events",
           "merge_for_gpu", "pool_kind", "pool_slots", "straggler_end"]

#: seconds between two looks for stragglers to copy while tasks run and none completes
BACKUP_TICK = 0.1


class Placement:
    """The placement policy over ``pools`` (``Pool`` objects, at least one).

    ``assign(chunk)`` picks a pool and records the decision; ``observe(chunk_ids,
    seconds)`` feeds back an actual time (a list of ids for a merged task).
    ``crossover``: a fixed crossover in events (overrides the models'); ``probe``: give
    each pool its first ``probe`` chunks regardless of the models, so that every pool is
    measured early (useful when the calibration does not describe a pool, e.g. a GPU pool
    running on the CPU backend); ``explore``: once actual times are being observed, send
    the next eligible chunk to a pool that has none measured and none queued (an
    unmeasured pool is predicted with the scale measured on the others, which hides a
    pool that alone is slow or fast); ``unmeasured_depth``: a pool with no observation
    of its own holds at most this many queued tasks per slot while another pool has
    room (None: no limit): the seeds come from kernel timings, not the user's processor,
    and can be off by 100x for one pool more than another (seen on the H200: merged GPU
    tasks worth 26 chunks queued before the GPU's first result set the makespan);
    ``depth``: with ``assign(..., may_wait=True)`` a pool holds at most ``depth`` x its
    slots (x ``merge`` chunks per task) assigned and not yet observed, and a chunk whose
    chosen pool is at that depth waits (``assign`` returns None) instead of queueing
    (None: no limit). A chunk is bound to a pool late, when that pool is about to run it:
    a prediction made while every slot is busy cannot commit the rest of the run to one
    queue (seen on the H200, ADL Q8: 60 chunks queued on 4 CPU slots while 24 GPU slots
    sat idle for the last second of the run);
    ``backup_margin``: once no chunk waits, ``backups`` offers a second copy of a task
    in flight to another pool's idle slots when the copy is predicted to finish earlier by
    more than this fraction of its own time (None: never; see ``backups``);
    ``clock``: seconds since the run started (default: a monotonic clock started now),
    used when ``now`` is not passed."""

    def __init__(self, pools: Iterable[Pool], *, crossover: float | None = None,
                 probe: int = 0, explore: bool = True, unmeasured_depth: int | None = None,
                 depth: float | None = None, backup_margin: float | None = None,
                 clock: Callable[[], float] | None = None):
        self.pools = {p.name: p for p in pools}
        if not self.pools:
            raise ValueError("placement needs at least one pool")
        self.fixed_crossover = crossover
        self.probe = int(probe)
        self.explore = bool(explore)
        if unmeasured_depth is not None and unmeasured_depth < 1:
            raise ValueError(f"unmeasured_depth must be >= 1 or None, got {unmeasured_depth}")
        self.unmeasured_depth = unmeasured_depth
        if depth is not None and not depth > 0:
            raise ValueError(f"depth must be > 0 or None, got {depth}")
        self.depth = depth
        if backup_margin is not None and not backup_margin >= 0:
            raise ValueError(f"backup_margin must be >= 0 or None, got {backup_margin}")
        self.backup_margin = backup_margin
        if clock is None:
            start = time.monotonic()
            clock = lambda: time.monotonic() - start  # noqa: E731
        self.clock = clock
        self._slots = {name: [Slot() for _ in range(p.slots)] for name, p in self.pools.items()}
        self._records: dict[int, Decision] = {}
        self._copies: dict[int, Copy] = {}  # chunk id -> its backup copy
        self._assigned = {name: 0 for name in self.pools}
        self._log_scale: float | None = None  # EW over all pools' observations
        self._next_task = 0
        # merging pools: (slot, chunks) of the task being filled in this batch
        self._open: dict[str, tuple[int, int]] = {}

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_pools(cls, worker_pools: Iterable, calibration=None, *, gpu_merge: int = 1,
                   **kwargs) -> "Placement":
        """A policy for ``gpuexec.scheduler.cluster.WorkerPool``-like pools (name,
        workers, threads, resources, task_resources, backend), seeded from a
        ``Calibration`` (``calibration.seed(backend)`` gives fixed seconds and events/s
        per slot; None: the same neutral seed for every pool, ``calibration.NEUTRAL_SEED``,
        so that load decides until times are observed). ``gpu_merge``: chunks the
        executor merges into one GPU task."""
        from gpuexec.scheduler import calibration as cal

        pools = []
        for wp in worker_pools:
            if getattr(wp, "workers", 0) < 1:
                continue
            kind = pool_kind(wp)
            backend = getattr(wp, "backend", CPU)
            fixed, throughput = cal.seed_for(calibration, backend)
            pools.append(Pool(wp.name, kind, pool_slots(wp), CostModel(fixed, throughput),
                              merge=gpu_merge if kind == GPU else 1))
        return cls(pools, **kwargs)

    # -------------------------------------------------------------------- models
    @property
    def global_scale(self) -> float | None:
        return None if self._log_scale is None else math.exp(self._log_scale)

    def predict(self, pool: str, events: float) -> float:
        """Predicted seconds of a chunk of ``events`` on one slot of ``pool`` (its share
        of a merged task's fixed cost on a merging pool)."""
        fixed, per_event = self._params(pool)
        return fixed + max(0.0, events) * per_event

    def _params(self, pool: str) -> tuple[float, float]:
        """(fixed seconds per chunk, seconds per event): a merging pool's chunks share
        their task's fixed cost. Measured on the H200 (ADL Q8, 6 GPU workers): tasks of
        4 chunks of 50k events took 0.45 s + 1.3 us/event; charged the whole 0.45 s per
        chunk, the GPU pool looked slower than the CPU workers and got 1.2M of 5M events
        while it ran all 5M faster alone."""
        p = self.pools[pool]
        fixed, per_event = p.model.params(self.global_scale)
        return fixed / p.merge, per_event

    def crossover(self, gpu_pool: str | None = None) -> float:
        """Events per chunk from which ``gpu_pool`` (default: the first GPU pool) is
        predicted no slower than the fastest CPU pool; ``inf`` without a GPU pool, 0
        without a CPU pool."""
        if self.fixed_crossover is not None:
            return float(self.fixed_crossover)
        gpus = [n for n, p in self.pools.items() if p.kind == GPU]
        cpus = [n for n, p in self.pools.items() if p.kind == CPU]
        if gpu_pool is None:
            if not gpus:
                return math.inf
            gpu_pool = gpus[0]
        if not cpus:
            return 0.0
        g = self._params(gpu_pool)
        return min(crossover_events(g, self._params(c)) for c in cpus)

    # ------------------------------------------------------------------ decisions
    def _held_back(self, pool: str, now: float) -> bool:
        """Whether a chunk for ``pool`` had better wait: its earliest slot is held by a
        cancelled task that runs on (bound now, the chunk would queue behind it on that
        worker however long it runs) while another pool has work whose completion will
        place the chunk anew."""
        slot, _start = self._best_slot(pool, now)
        return (self._slots[pool][slot].held(now)
                and any(s.outstanding for name, slots in self._slots.items() if name != pool
                        for s in slots))

    def _queued(self, pool: str) -> int:
        """Chunks assigned to ``pool`` and not yet observed."""
        return sum(len(s.outstanding) for s in self._slots[pool])

    def capacity(self, pool: str) -> float:
        """Chunks ``pool`` may hold assigned and not yet observed (``depth``; inf: no
        limit): at least one task per slot."""
        if self.depth is None:
            return math.inf
        p = self.pools[pool]
        return max(p.slots, math.ceil(self.depth * p.slots)) * p.merge

    def _tasks_per_slot(self, pool: str, now: float) -> float:
        """Tasks assigned to ``pool`` and not yet observed, per slot (a merging pool's
        task holds ``merge`` chunks); a slot kept busy by a cancelled task that runs on
        counts one task."""
        slots = self._slots[pool]
        merge = self.pools[pool].merge
        held = sum(1 for s in slots if s.held(now))
        return self._queued(pool) / (len(slots) * merge) + held / len(slots)

    def _now(self, now: float | None) -> float:
        return self.clock() if now is None else float(now)

    def _best_slot(self, pool: str, now: float) -> tuple[int, float]:
        slots = self._slots[pool]
        open_ = self._open.get(pool)
        if open_ is not None:  # the chunks of one merged task queue on one slot
            return open_[0], slots[open_[0]].free_at(now)
        index = min(range(len(slots)), key=lambda i: slots[i].free_at(now))
        return index, slots[index].free_at(now)

    def end_batch(self) -> None:
        """The executor submitted the chunks assigned so far: the next chunk for a
        merging pool starts a new task (and may take another slot)."""
        self._open.clear()

    def _finish(self, pool: str, events: int, now: float) -> tuple[float, float, float, int]:
        """(finish, start, seconds, slot) if the chunk went to ``pool`` now."""
        slot, start = self._best_slot(pool, now)
        seconds = self.predict(pool, events)
        return start + seconds, start, seconds, slot

    def _fluid_end(self, work_events: float, pools: list[str], now: float,
                   chunk_events: float) -> float:
        """When ``pools`` would finish ``work_events`` more events if the work were
        spread perfectly over their slots from the time each slot becomes free."""
        slots = []
        for name in pools:
            fixed, per_event = self._params(name)
            rate = 1.0 / (per_event + fixed / max(chunk_events, 1.0))  # events/s per slot
            slots += [(s.free_at(now), rate) for s in self._slots[name]]
        slots.sort()
        t, rate, left = slots[0][0], 0.0, float(work_events)
        for free, r in slots:
            if rate > 0 and rate * (free - t) >= left:
                break
            left -= rate * (free - t)
            t, rate = free, rate + r
        return t + left / rate

    def choose(self, chunk: Chunk, now: float | None = None,
               backlog_events: int = 0) -> tuple[str, Reason, str]:
        """(pool, reason, detail) for ``chunk`` without recording it; see ``assign``."""
        now = self._now(now)
        names = list(self.pools)
        if len(names) == 1:
            return names[0], Reason.ONLY_POOL, ""
        for name in names:
            if self._assigned[name] < self.probe:
                return name, Reason.PROBE, f"first {self.probe} chunks of each pool"
        candidates, helpers, standing = self._candidates(chunk.events)
        detail = "above crossover" if standing is None else standing.value
        unmeasured = self._unmeasured_idle(candidates, now)
        if unmeasured is not None:
            return unmeasured, Reason.UNMEASURED, detail
        candidates, chosen = self._room_for_unmeasured(candidates, now)
        if chosen is not None:
            return chosen[0], chosen[1], detail
        return self._by_finish(chunk.events, candidates, helpers, standing, now,
                               backlog_events)

    def _candidates(self, events: int) -> tuple[list[str], list[str], Reason | None]:
        """(candidates, helpers, standing) for a chunk of ``events``: the pools that may
        take it on its size; the pools slower for it that may still take it when idle; and
        where it stands against the crossover (None: above it, with both kinds of pool)."""
        cpus = [n for n, p in self.pools.items() if p.kind == CPU]
        gpus = [n for n, p in self.pools.items() if p.kind == GPU]
        if not cpus:
            return gpus, [], Reason.NO_CPU_POOL
        if not gpus:
            return cpus, [], Reason.NO_GPU_POOL
        eligible = [g for g in gpus if events >= self.crossover(g)]
        if not eligible:
            return cpus, gpus, Reason.BELOW_CROSSOVER
        return cpus + eligible, [], None

    def _unmeasured_idle(self, candidates: list[str], now: float) -> str | None:
        """Once measurements are coming in, a candidate never measured and with nothing
        queued takes the chunk: its prediction is only the other pools' scale."""
        if not self.explore or self._log_scale is None:
            return None
        for name in candidates:
            slots = self._slots[name]
            # (a slot kept busy by a cancelled copy is not idle: the chunk would wait)
            if (self.pools[name].model.observations == 0
                    and not any(s.outstanding for s in slots)
                    and any(s.idle(now) for s in slots)):
                return name
        return None

    def _room_for_unmeasured(self, candidates: list[str], now: float
                             ) -> tuple[list[str], tuple[str, Reason] | None]:
        """``unmeasured_depth``: the candidates left once unmeasured pools at that depth
        are out, and the (pool, reason) when that alone decides."""
        if self.unmeasured_depth is None or len(candidates) <= 1:
            return candidates, None
        # depth in tasks per slot: a merging pool's task holds ``merge`` chunks (in
        # chunks, 12 single-slot GPU workers with merges of 4 started with 3 busy)
        room = [n for n in candidates if self.pools[n].model.observations > 0
                or self._tasks_per_slot(n, now) < self.unmeasured_depth]
        if not room:  # nothing measured and every pool full: fill by slots
            # (not to a pool whose every slot a cancelled task holds: seeds cannot
            # say how long that is against the other pools' queues)
            open_ = [n for n in candidates
                     if not all(s.held(now) for s in self._slots[n])] or candidates
            best = min(open_, key=lambda n: self._tasks_per_slot(n, now))
            return candidates, (best, Reason.FEWEST_QUEUED)
        if len(room) == 1 and len(candidates) > 1:
            return room, (room[0], Reason.OTHERS_FULL)
        return room, None

    def _by_finish(self, events: int, candidates: list[str], helpers: list[str],
                   standing: Reason | None, now: float,
                   backlog_events: int) -> tuple[str, Reason, str]:
        """(pool, reason, detail) by predicted finish times, the load rules first."""
        detail = "above crossover" if standing is None else standing.value
        pools = candidates + helpers
        plan = {n: self._finish(n, events, now) for n in pools}  # (finish, start, s, slot)
        if backlog_events > 0 and len(pools) > 1:
            # more chunks will follow: a slot idle now takes this one if it finishes it
            # before the whole run is predicted to end (else windowed submission would
            # keep feeding the fastest pool and leave the others idle). Below the crossover
            # that includes the GPU pools: slower per chunk than a CPU slot, but an idle one
            # that finishes the chunk before the run's end shortens the run instead of
            # holding its cores idle
            end = self._fluid_end(backlog_events + events, pools, now, events)
            idle = [n for n in pools if plan[n][1] <= now and plan[n][0] <= end]
            if idle:
                return min(idle, key=lambda n: plan[n][0]), Reason.IDLE_SLOT, detail
        best = min(candidates, key=lambda n: plan[n][0])
        if helpers and self._slots[best][plan[best][3]].held(now):
            # its earliest slot is held by a cancelled task that runs on: a slower pool
            # that finishes the chunk earlier takes it (the last chunks have no backlog)
            helper = min(helpers, key=lambda n: plan[n][0])
            if plan[helper][0] < plan[best][0]:
                return helper, Reason.SLOTS_HELD, detail
        if standing is not None:
            return best, standing, ""
        if self.pools[best].kind == GPU:
            return best, Reason.GPU_EARLIER, detail
        return best, Reason.CPU_EARLIER, detail

    def assign(self, chunk, now: float | None = None, backlog_events: int = 0, *,
               may_wait: bool = False) -> str | None:
        """The pool for ``chunk`` (a ``Chunk``; a WorkItem-like is numbered by the
        order of assignment); the decision is recorded and the pool's queue updated.
        ``backlog_events``: events of the chunks still to be assigned after this one,
        when chunks are assigned as others complete (0 when all are assigned at once).
        ``may_wait``: the caller can hold the chunk back until a task completes; then a
        chunk whose pool is at its ``capacity`` is not assigned and None is returned."""
        if not isinstance(chunk, Chunk):
            chunk = Chunk.of(chunk, len(self._records))
        if chunk.id in self._records:
            raise ValueError(f"chunk {chunk.id} was already assigned "
                             f"(to {self._records[chunk.id].pool})")
        now = self._now(now)
        pool, reason, detail = self.choose(chunk, now, backlog_events)
        if may_wait and (self._queued(pool) >= self.capacity(pool)
                         or self._held_back(pool, now)):
            return None
        self._enqueue(chunk, pool, reason, detail, now)
        return pool

    def _enqueue(self, chunk: Chunk, pool: str, reason: Reason, detail: str, now: float,
                 retried_from: str | None = None) -> Decision:
        finish, start, seconds, slot = self._finish(pool, chunk.events, now)
        cross = self.crossover()
        record = Decision(chunk.id, chunk.file, chunk.dataset, chunk.tree, chunk.start,
                          chunk.stop, chunk.events, pool, reason, detail, seconds, start,
                          finish, None if math.isinf(cross) else cross, slot,
                          retried_from=retried_from)
        self._slots[pool][slot].add(chunk.id, seconds, now)
        self._records[chunk.id] = record
        self._assigned[pool] += 1
        merge = self.pools[pool].merge
        if merge > 1:
            count = self._open[pool][1] + 1 if pool in self._open else 1
            if count < merge:
                self._open[pool] = (slot, count)
            else:
                self._open.pop(pool, None)
        return record

    def place(self, chunks: Sequence, now: float | None = None) -> list[str]:
        """The pool of each chunk (``Chunk`` or WorkItem-like, numbered by position when
        not a ``Chunk``), assigned in order."""
        now = self._now(now)
        out = []
        for i, item in enumerate(chunks):
            out.append(self.assign(item if isinstance(item, Chunk) else Chunk.of(item, i), now))
        return out

    def retry(self, chunk_id: int, pool: str, now: float | None = None,
              reason: str = "after a failure") -> None:
        """Record that ``chunk_id`` is re-run on ``pool`` (e.g. on a CPU worker after
        it failed on a GPU); its first attempt is dropped from the queue model. The
        decision's reason is ``Reason.RETRY``; ``reason`` (why, in words) its detail."""
        old = self._records.pop(chunk_id)
        self._slots[old.pool][old.slot].outstanding.pop(chunk_id, None)
        copy = self._copies.pop(chunk_id, None)
        if copy is not None:  # the retry replaces both copies
            self._slots[copy.pool][copy.slot].outstanding.pop(chunk_id, None)
        chunk = Chunk(chunk_id, old.file, old.entrystart, old.entrystop, old.tree, old.dataset)
        record = self._enqueue(chunk, pool, Reason.RETRY, reason, self._now(now),
                               retried_from=old.pool)
        record.task = old.task

    def mark_merged(self, chunk_ids: Sequence[int]) -> int:
        """Record that ``chunk_ids`` run as one task (see ``merge_for_gpu``); returns the
        task number written into their decisions."""
        task = self._next_task
        self._next_task += 1
        for cid in chunk_ids:
            self._records[cid].task = task
        return task

    # ---------------------------------------------------------------- feedback
    def observe(self, chunk_ids, seconds: float, now: float | None = None,
                pool: str | None = None) -> None:
        """A task of ``chunk_ids`` (one id, or the ids of a merged task) took
        ``seconds``; refines its pool's cost model and queue. ``pool``: where it ran, when
        that may be a backup copy's pool (default: where the chunks were assigned)."""
        ids = chunk_ids_of(chunk_ids)
        records = [self._records[i] for i in ids]
        now = self._now(now)
        events = sum(r.events for r in records)
        shares = [seconds * (r.events / events if events else 1 / len(records)) for r in records]
        copy_pool = self._copy_pool(ids, records, pool)
        if copy_pool is not None:  # a backup copy's time
            for r, share in zip(records, shares):
                self._copies[r.chunk].actual_seconds = share
                self._copy_leaves(r.chunk, now)
            pool = copy_pool
        else:
            pool = records[0].pool
            for r, share in zip(records, shares):
                r.actual_seconds = share
                self._leave_queue(r, now)
        self._learn(pool, events, seconds)

    def release(self, chunk_ids, now: float | None = None, pool: str | None = None) -> None:
        """Chunks whose task completed without a time of theirs (e.g. skipped): they
        leave their pool's queue (``pool``: as in ``observe``), nothing is learned."""
        now = self._now(now)
        ids = chunk_ids_of(chunk_ids)
        if not ids:
            return
        if self._copy_pool(ids, [self._records[i] for i in ids], pool) is not None:
            for cid in ids:
                self._copy_leaves(cid, now)
            return
        for cid in ids:
            record = self._records[cid]
            if cid in self._slots[record.pool][record.slot].outstanding:
                self._leave_queue(record, now)

    def _copy_leaves(self, cid: int, now: float) -> None:
        """The backup copy of chunk ``cid`` completed at ``now``: off its slot's queue."""
        copy = self._copies[cid]
        slot = self._slots[copy.pool][copy.slot]
        if slot.outstanding.pop(cid, None) is not None:
            slot.anchor = max(slot.anchor, now)

    def _copy_pool(self, ids, records, pool: str | None) -> str | None:
        """``pool`` when it names the backup copies of ``ids``, None when it names (or
        defaults to) their assigned pool; ValueError for anything else."""
        assigned = {r.pool for r in records}
        if len(assigned) != 1:
            raise ValueError(f"chunks {ids} were assigned to different pools {sorted(assigned)}")
        if pool is None or pool in assigned:
            return None
        if any(self._copies.get(i) is None or self._copies[i].pool != pool for i in ids):
            raise ValueError(f"chunks {ids} were assigned to {assigned.pop()} and have no "
                             f"backup copy on {pool}")
        return pool

    def _reported(self, chunk_ids, pool: str | None):
        """(ids, records, copy pool) for a worker's report on ``chunk_ids``, or None when
        they have none or have been placed anew since (a retry replaces their copies)."""
        ids = chunk_ids_of(chunk_ids)
        if not ids or any(i not in self._records for i in ids):
            return None
        records = [self._records[i] for i in ids]
        try:
            return ids, records, self._copy_pool(ids, records, pool)
        except ValueError:
            return None

    def started(self, chunk_ids, now: float | None = None, pool: str | None = None) -> None:
        """The task of ``chunk_ids`` started on a worker of ``pool`` (as in
        ``observe``) at ``now``: ``backups`` predicts its end from then. A report on
        chunks placed anew since is ignored."""
        now = self._now(now)
        reported = self._reported(chunk_ids, pool)
        if reported is None:
            return
        ids, _records, copy_pool = reported
        if copy_pool is not None:
            for cid in ids:
                self._copies[cid].started_at = now
            return
        for cid in ids:
            self._records[cid].started_at = now

    def settle(self, chunk_ids, pool: str, now: float | None = None) -> None:
        """The output of ``chunk_ids`` was taken from ``pool``: the other copy of each is
        cancelled. A cancelled original takes its whole task (the chunks merged with it)
        off its slot; its other chunks count on their own backup copies. A cancelled
        copy that had started keeps its slot busy until its predicted end, or until
        ``lost`` reports it ended."""
        now = self._now(now)
        ids = chunk_ids_of(chunk_ids)
        for cid in ids:
            record = self._records[cid]
            record.taken_from = pool
            copy = self._copies.get(cid)
            if pool == record.pool:
                if copy is not None:
                    busy = None
                    if copy.started_at is not None:
                        busy = straggler_end(copy.started_at, copy.predicted_seconds, now)
                    self._slots[copy.pool][copy.slot].drop([cid], busy)
                continue
            if copy is None or copy.pool != pool:
                raise ValueError(f"chunk {cid} has no copy on {pool}")
            record.actual_seconds = copy.actual_seconds
            record.finished_at = now
            task = self._task_chunks(record)
            busy = None
            if record.started_at is not None:
                busy = straggler_end(record.started_at, self._task_seconds(task), now)
                if self.pools[record.pool].model.observations == 0:
                    # a pool never measured learns at least this: the task it lost had run
                    # this long (a bound from below; ``lost`` brings the true time)
                    self._learn(record.pool, sum(self._records[i].events for i in task),
                                now - record.started_at)
            self._slots[record.pool][record.slot].drop(task, busy)

    def lost(self, chunk_ids, seconds: float, now: float | None = None,
             pool: str | None = None) -> None:
        """A cancelled copy of ``chunk_ids`` (``pool`` as in ``observe``) ended anyway,
        after ``seconds``, its output dropped: its pool learns from the time, and its
        slot is free from ``now``. A report on chunks placed anew since is ignored."""
        now = self._now(now)
        reported = self._reported(chunk_ids, pool)
        if reported is None:
            return
        ids, records, copy_pool = reported
        if copy_pool is None:
            name, slot = records[0].pool, self._slots[records[0].pool][records[0].slot]
        else:
            name = copy_pool
            slot = self._slots[name][self._copies[ids[0]].slot]
        if not slot.outstanding:
            slot.anchor = min(slot.anchor, now)
        self._learn(name, sum(r.events for r in records), seconds)

    def _learn(self, pool: str, events: float, seconds: float) -> None:
        ratio = self.pools[pool].model.observe(events, seconds)
        if ratio is not None:
            self._log_scale = ew(self._log_scale, ratio, 1.0 - self.pools[pool].model.decay)

    def task_seconds(self, chunk_ids, pool: str) -> float | None:
        """Predicted seconds of the task of ``chunk_ids`` on ``pool``: their copy there,
        or their original (None if they were not placed there). A cancelled task that
        started runs on until ``straggler_end`` of its start and these seconds."""
        reported = self._reported(chunk_ids, pool)
        if reported is None:
            return None
        ids, _records, copy_pool = reported
        if copy_pool is not None:
            return self._copies[ids[0]].predicted_seconds
        return self._task_seconds(ids)

    def occupied(self, pool: str, until: float, slot: int | None = None) -> int:
        """A slot of ``pool`` is busy until ``until`` with work from outside this run (a
        copy that an earlier run on the same workers cancelled while it ran): chunks are
        predicted to start there only then. Returns the slot; pass it again to move
        ``until`` (later as the task runs on, ``now`` once it has ended)."""
        slots = self._slots[pool]
        if slot is None:
            now = self._now(None)
            slot = min(range(len(slots)), key=lambda i: slots[i].free_at(now))
            until = max(slots[slot].anchor, until)
        slots[slot].anchor = until
        return slot

    def _task_chunks(self, record: Decision) -> list[int]:
        """The chunks that run in one task with ``record``'s (itself alone if not merged)."""
        if record.task is None:
            return [record.chunk]
        return [cid for cid in self._slots[record.pool][record.slot].outstanding
                if self._records[cid].task == record.task] or [record.chunk]

    def _task_seconds(self, ids) -> float:
        """Predicted seconds of the task of ``ids`` (chunks of one pool) where they were
        assigned, by the model as it is now (a merged task's chunks share its fixed cost;
        the model's fit is computed once per task, not per chunk)."""
        fixed, per_event = self._params(self._records[ids[0]].pool)
        return sum(fixed + max(0.0, self._records[i].events) * per_event for i in ids)

    def backups(self, now: float | None = None) -> list[Backup]:
        """Second copies worth starting now (none without ``backup_margin``): a task in
        flight predicted to end later than a copy on another pool's idle slots by more
        than ``backup_margin`` x the copy's time. A task that started (``started``) ends
        at its start plus its predicted time (a straggler: see ``straggler_end``); one
        not started yet at the earliest its predicted time from now. Meant for the end of
        a run, when no chunk waits and idle slots cost nothing; the first copy to
        complete counts (``observe(..., pool=)`` then ``settle``). The copy's pool must
        have measured times; the original's too, unless the task runs past its predicted
        end. A merged task needs idle slots for all its chunks on a pool that does not
        merge; each task is copied at most once; the largest predicted gains go first.
        The copies are recorded and occupy their slots."""
        if self.backup_margin is None or len(self.pools) < 2:
            return []
        now = self._now(now)
        idle = {n: [i for i, s in enumerate(slots) if s.idle(now)]
                for n, slots in self._slots.items()}
        if not any(idle.values()):
            return []
        candidates = self._backup_candidates(idle, now)
        return self._book_backups(candidates, idle, now)

    def _tasks_in_flight(self) -> dict:
        """(pool, task key) -> chunk ids of each original task queued or running."""
        tasks: dict = {}
        for name, slots in self._slots.items():
            for slot in slots:
                for cid in slot.outstanding:
                    record = self._records[cid]
                    if record.pool != name or cid in self._copies:
                        continue
                    # a chunk retried alone keeps its old merged task's number: the slot
                    # tells the tasks apart
                    key = (("task", record.task, record.slot) if record.task is not None
                           else ("chunk", cid))
                    tasks.setdefault((name, key), []).append(cid)
        return tasks

    def _backup_candidates(self, idle: dict, now: float) -> list[tuple]:
        """(gain, ids, pool, target, original finish, copy seconds) of each copy worth
        starting on a pool with ``idle`` slots."""
        measured = {n for n, p in self.pools.items() if p.model.observations > 0}
        candidates = []
        for (name, _key), ids in self._tasks_in_flight().items():
            ids = tuple(sorted(ids))
            seconds = self._task_seconds(ids)
            started = min((self._records[i].started_at for i in ids
                           if self._records[i].started_at is not None), default=None)
            if started is None:
                late, original = False, now + seconds
            else:
                late = started + seconds < now
                original = straggler_end(started, seconds, now)
            # a pool never measured is predicted by the others' scale: only a task running
            # past that prediction says that it is slow
            if name not in measured and not late:
                continue
            for target in measured - {name}:
                if not idle[target]:
                    continue
                copy = self._copy_seconds(target, ids)
                if original - now > (1.0 + self.backup_margin) * copy:
                    candidates.append((original - now - copy, ids, name, target, original, copy))
        return candidates

    def _book_backups(self, candidates: list[tuple], idle: dict, now: float) -> list[Backup]:
        """Record the copies of ``candidates``, largest gains first, each task at most
        once, while their target pools have idle slots for them."""
        out = []
        taken: set[int] = set()
        for _gain, ids, name, target, original, seconds in sorted(candidates, reverse=True):
            need = 1 if self.pools[target].merge > 1 else len(ids)
            if taken.intersection(ids) or len(idle[target]) < need:
                continue
            slots, idle[target] = idle[target][:need], idle[target][need:]
            taken.update(ids)
            for k, cid in enumerate(ids):
                slot = slots[min(k, need - 1)]
                share = seconds / len(ids) if need == 1 else seconds
                self._copies[cid] = Copy(target, slot, share)
                self._slots[target][slot].add(cid, share, now)
                record = self._records[cid]
                record.backup_pool, record.backup_predicted_seconds = target, seconds
            out.append(Backup(ids, name, target, original, now + seconds))
        return out

    def _copy_seconds(self, pool: str, ids) -> float:
        """Predicted seconds of copies of the chunks ``ids`` on ``pool``: one task of them
        all on a merging pool (its whole fixed cost), else one task per chunk side by side."""
        fixed, per_event = self.pools[pool].model.params(self.global_scale)
        events = [self._records[i].events for i in ids]
        if self.pools[pool].merge > 1:
            return fixed + sum(events) * per_event
        return fixed + max(events) * per_event

    def _leave_queue(self, record: Decision, now: float) -> None:
        """``record``'s chunk finished at ``now``: off its slot's queue, which runs its
        next chunk from then."""
        record.finished_at = now
        slot = self._slots[record.pool][record.slot]
        slot.outstanding.pop(record.chunk, None)
        slot.anchor = max(slot.anchor, now)

    # ------------------------------------------------------------------ records
    def decisions(self) -> list[dict]:
        """Every decision as a plain dict, in chunk order."""
        return [self._records[k].as_dict() for k in sorted(self._records)]

    def summary(self) -> dict:
        """Per pool: chunks, events, predicted and actual seconds, the current model; and
        the current crossover (None when infinite)."""
        pools = {}
        for name, p in self.pools.items():
            recs = [r for r in self._records.values() if r.pool == name]
            done = [r.actual_seconds for r in recs if r.actual_seconds is not None]
            pools[name] = {
                "kind": p.kind, "slots": p.slots, "chunks": len(recs),
                "events": sum(r.events for r in recs),
                "predicted_seconds": sum(r.predicted_seconds for r in recs),
                "actual_seconds": sum(done) if done else None,
                "model": p.model.describe(self.global_scale),
                # chunks copied to this pool, and those whose copy here counted
                "backups": sum(1 for r in self._records.values() if r.backup_pool == name),
                "backups_taken": sum(1 for r in self._records.values()
                                     if r.backup_pool == name and r.taken_from == name),
            }
        cross = self.crossover()
        return {"pools": pools, "crossover": None if math.isinf(cross) else cross}

