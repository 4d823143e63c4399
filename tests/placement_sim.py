"""A replay of the placement policy on modelled pools, for the tests: ``simulate`` drives a
``Placement`` the way the executor's loop does (windows, late binding, backup copies)
and returns the makespan, to compare with all-CPU and all-GPU placement."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from gpuexec.scheduler.placement import BACKUP_TICK, Chunk, Pool


@dataclass
class SimResult:
    """A simulated run: ``makespan`` (s), per pool chunks/events/busy seconds, and the
    pool of each chunk."""

    policy: str
    makespan: float
    pools: dict
    assignments: list[str]

    def as_dict(self) -> dict:
        return {"policy": self.policy, "makespan": self.makespan, "pools": self.pools,
                "assignments": self.assignments}


def simulate(chunks: Sequence, policy, truth: Sequence[Pool], *,
             window: int | None = None, warmup: int | None = None,
             tick: float = BACKUP_TICK) -> SimResult:
    """Replay ``chunks`` (``Chunk``s or event counts) on the pools ``truth`` (their
    ``model.seconds`` is the true duration of a task, ``slots`` their parallelism,
    ``merge`` the chunks one task takes, as the executor merges GPU tasks) and return the
    makespan. Each pool runs its chunks in assignment order on its free slots.

    ``policy``: a ``Placement`` over pools of the same names, or ``"all-cpu"`` /
    ``"all-gpu"`` (every chunk on the pools of that kind, each to the slot free first).
    A Placement is driven in one of three ways, as an executor could submit:

    - default: every chunk assigned at time 0 (all submitted at once);
    - ``window=k``: at most k chunks queued or running; the next is assigned when one
      completes, after its actual time was observed (online refinement);
    - ``warmup=k``: as ``window=k`` until every pool given a chunk has reported one,
      then all the others at once with the refined models.

    In every mode a policy with a ``depth`` holds a chunk back while its pool is full
    and offers it again when a task completes (late binding, as the executor does).
    A policy with a ``backup_margin`` is asked for ``backups`` once every chunk is
    assigned, at each completion and every ``tick`` seconds between them, as the
    executor's loop does; the first copy of a chunk to complete counts, a copy that
    loses keeps its slot until it ends, and the makespan is the last counted output."""
    if window is not None and warmup is not None:
        raise ValueError("window and warmup are alternatives")
    pools = {p.name: p for p in truth}
    chunks = [c if isinstance(c, Chunk) else Chunk.of(c, i) for i, c in enumerate(chunks)]
    if isinstance(policy, str):
        return _list_schedule(chunks, policy, truth)
    missing = set(policy.pools) - set(pools)
    if missing:
        raise ValueError(f"the policy's pools {sorted(missing)} have no true model in truth")
    replay = _Replay(chunks, policy, pools, window if window is not None else warmup,
                     warming=warmup is not None)
    makespan = replay.run(tick)
    if window is not None:
        label = f"placement (window {window})"
    elif warmup is not None:
        label = f"placement (warm-up {warmup})"
    else:
        label = "placement"
    return SimResult(label, makespan, replay.stats,
                     [replay.assignments[c.id] for c in chunks])


class _Replay:
    """One simulated run of a ``Placement`` (see ``simulate``): ``limit`` chunks at most
    in flight (None: no limit), lifted once every pool used has reported when
    ``warming``."""

    def __init__(self, chunks: list[Chunk], policy, pools: dict, limit: int | None,
                 warming: bool):
        self.chunks, self.policy, self.pools = chunks, policy, pools
        names = list(policy.pools)
        self.queues = {n: deque() for n in names}
        self.copies = {n: deque() for n in names}  # backup copies waiting, as whole tasks
        self.free = {n: pools[n].slots for n in names}
        self.stats = {n: {"chunks": 0, "events": 0, "busy_seconds": 0.0} for n in names}
        self.assignments: dict[int, str] = {}
        self.running: list = []  # (finish, seq, chunks of the task, pool, seconds, copy)
        self.seq = 0
        self.pending = deque(chunks)
        self.in_flight = 0
        self.limit = limit
        self.warming = warming
        self.reported: set[str] = set()
        self.taken: set[int] = set()
        self.cancelled: set[int] = set()  # seq of running tasks that lost to another copy

    def release(self, now: float) -> None:
        """Assign pending chunks while the window has room."""
        pending = self.pending
        while pending and (self.limit is None or self.in_flight < self.limit):
            c = pending.popleft()
            backlog = 0 if self.limit is None else sum(p.events for p in pending)
            # a policy with a ``depth`` may hold the chunk back: it is offered again when
            # the next task completes
            name = self.policy.assign(c, now=now, backlog_events=backlog, may_wait=True)
            if name is None:
                pending.appendleft(c)
                break
            self.assignments[c.id] = name
            self.queues[name].append(c)
            self.in_flight += 1
        self.policy.end_batch()

    def dispatch(self, now: float) -> None:
        """Start queued tasks (backup copies first) on free slots; once nothing is
        pending, queue the backups the policy offers and start them too."""
        for name, q in self.queues.items():
            while (q or self.copies[name]) and self.free[name] > 0:
                if self.copies[name]:
                    task, copy = self.copies[name].popleft(), True
                else:
                    task = [q.popleft() for _ in range(min(len(q), self.pools[name].merge))]
                    copy = False
                    if len(task) > 1:
                        self.policy.mark_merged([c.id for c in task])
                dt = self.pools[name].model.seconds(sum(c.events for c in task))
                self.free[name] -= 1
                heapq.heappush(self.running, (now + dt, self.seq, task, name, dt, copy))
                self.seq += 1
                self.policy.started([c.id for c in task], now=now, pool=name)
                self.stats[name]["busy_seconds"] += dt  # a copy that loses is busy too
        if not self.pending:
            added = False
            for b in self.policy.backups(now=now):
                parts = [c for c in self.chunks if c.id in b.chunks]
                if self.pools[b.pool].merge > 1:
                    self.copies[b.pool].append(parts)
                else:
                    self.copies[b.pool].extend([c] for c in parts)
                added = True
            if added:
                self.dispatch(now)

    def take(self, ids: list[int], seq_won: int, now: float) -> None:
        """Chunks ``ids`` counted: their other copies are dropped (a running one keeps
        its slot); chunks of a dropped task that nothing else covers run again."""
        self.taken.update(ids)
        self.in_flight -= len(ids)
        orphans = []
        for name in self.queues:
            for c in [c for c in self.queues[name] if c.id in ids]:
                self.queues[name].remove(c)
            for task in [t for t in self.copies[name] if any(c.id in ids for c in t)]:
                self.copies[name].remove(task)
                orphans += [c for c in task if c.id not in ids]
        for _f, s_, task, _n, _dt, _copy in self.running:
            if s_ != seq_won and s_ not in self.cancelled and any(c.id in ids for c in task):
                self.cancelled.add(s_)
                orphans += [c for c in task if c.id not in ids]
        covered = {c.id for name in self.queues for c in self.queues[name]}
        covered |= {c.id for name in self.copies for t in self.copies[name] for c in t}
        covered |= {c.id for _f, s_, t, _n, _dt, _c in self.running
                    if s_ not in self.cancelled for c in t}
        for c in orphans:
            if c.id not in self.taken and c.id not in covered:
                pool = self.assignments[c.id]
                self.policy.retry(c.id, pool, now=now, reason="its task lost to a copy")
                self.queues[pool].appendleft(c)
                covered.add(c.id)

    def complete(self, t: float, s_: int, task: list, name: str, dt: float,
                 copy: bool) -> bool:
        """A task ended at ``t``; False when it was a copy that lost (its slot comes
        back, its time still teaches the policy)."""
        self.free[name] += 1
        ids = [c.id for c in task]
        if s_ in self.cancelled or self.taken.intersection(ids):
            self.policy.lost(ids, dt, now=t, pool=name)
            return False
        self.policy.observe(ids, dt, now=t, pool=name)
        self.policy.settle(ids, name, now=t)
        if copy:
            for i in ids:
                self.assignments[i] = name
        self.stats[name]["chunks"] += len(task)  # chunks and events whose output counted
        self.stats[name]["events"] += sum(c.events for c in task)
        self.take(ids, s_, t)
        self.reported.add(name)
        if self.warming and self.reported >= set(self.assignments.values()):
            self.warming, self.limit = False, None  # every pool used measured: the rest at once
        self.release(t)
        return True

    def run(self, tick: float) -> float:
        """Run to the end; the makespan (the last counted output)."""
        self.release(0.0)
        self.dispatch(0.0)
        makespan = checked = 0.0
        while self.running:
            if (not self.pending and self.policy.backup_margin is not None
                    and self.running[0][0] > checked + tick):
                checked += tick  # nothing completes before the next look at the stragglers
                self.dispatch(checked)
                continue
            t, s_, task, name, dt, copy = heapq.heappop(self.running)
            checked = t
            if self.complete(t, s_, task, name, dt, copy):
                makespan = t
            self.dispatch(t)
        return makespan

def _list_schedule(chunks: list[Chunk], policy: str, truth: Sequence[Pool]) -> SimResult:
    """``"all-cpu"`` / ``"all-gpu"``: every chunk on the pools of that kind, each to the
    slot free first."""
    pools = {p.name: p for p in truth}
    if policy not in ("all-cpu", "all-gpu"):
        raise ValueError(f"policy must be a Placement, 'all-cpu' or 'all-gpu', not {policy!r}")
    kind = policy.split("-")[1]
    chosen = [p for p in truth if p.kind == kind]
    if not chosen:
        raise ValueError(f"{policy}: no {kind.upper()} pool among {list(pools)}")
    # list scheduling over all slots of those pools, in chunk order (a slot of a
    # merging pool takes its next ``merge`` chunks as one task)
    free = [(0.0, p.name, s) for p in chosen for s in range(p.slots)]
    heapq.heapify(free)
    stats = {p.name: {"chunks": 0, "events": 0, "busy_seconds": 0.0} for p in chosen}
    assignments, makespan, k = [], 0.0, 0
    while k < len(chunks):
        t, name, s = heapq.heappop(free)
        task = chunks[k:k + pools[name].merge]
        k += len(task)
        events = sum(c.events for c in task)
        dt = pools[name].model.seconds(events)
        heapq.heappush(free, (t + dt, name, s))
        makespan = max(makespan, t + dt)
        stats[name]["chunks"] += len(task)
        stats[name]["events"] += events
        stats[name]["busy_seconds"] += dt
        assignments += [name] * len(task)
    return SimResult(policy, makespan, stats, assignments)
