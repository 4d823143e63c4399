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
    queues = {n: deque() for n in policy.pools}
    free = {n: pools[n].slots for n in policy.pools}
    stats = {n: {"chunks": 0, "events": 0, "busy_seconds": 0.0} for n in policy.pools}
    assignments: dict[int, str] = {}
    running: list = []  # (finish, seq, chunks of the task, pool, seconds)
    seq = 0
    pending = deque(chunks)
    in_flight = 0
    limit = window if window is not None else warmup  # None: no limit
    warming = warmup is not None
    reported: set[str] = set()

    def release(now: float) -> None:
        nonlocal in_flight
        while pending and (limit is None or in_flight < limit):
            c = pending.popleft()
            backlog = 0 if limit is None else sum(p.events for p in pending)
            # a policy with a ``depth`` may hold the chunk back: it is offered again when
            # the next task completes
            name = policy.assign(c, now=now, backlog_events=backlog, may_wait=True)
            if name is None:
                pending.appendleft(c)
                break
            assignments[c.id] = name
            queues[name].append(c)
            in_flight += 1
        policy.end_batch()

    copies = {n: deque() for n in policy.pools}  # backup copies waiting, as whole tasks
    taken: set[int] = set()
    cancelled: set[int] = set()  # seq of running tasks that lost to another copy

    def dispatch(now: float) -> None:
        nonlocal seq
        for name, q in queues.items():
            while (q or copies[name]) and free[name] > 0:
                if copies[name]:
                    task, copy = copies[name].popleft(), True
                else:
                    task = [q.popleft() for _ in range(min(len(q), pools[name].merge))]
                    copy = False
                    if len(task) > 1:
                        policy.mark_merged([c.id for c in task])
                events = sum(c.events for c in task)
                dt = pools[name].model.seconds(events)
                free[name] -= 1
                heapq.heappush(running, (now + dt, seq, task, name, dt, copy))
                seq += 1
                policy.started([c.id for c in task], now=now, pool=name)
                stats[name]["busy_seconds"] += dt  # a copy that loses is busy too
        if not pending:
            added = False
            for b in policy.backups(now=now):
                parts = [c for c in chunks if c.id in b.chunks]
                if pools[b.pool].merge > 1:
                    copies[b.pool].append(parts)
                else:
                    copies[b.pool].extend([c] for c in parts)
                added = True
            if added:
                dispatch(now)

    def take(ids: list[int], seq_won: int, now: float) -> None:
        """Chunks ``ids`` counted: their other copies are dropped (a running one keeps
        its slot); chunks of a dropped task that nothing else covers run again."""
        nonlocal in_flight
        taken.update(ids)
        in_flight -= len(ids)
        orphans = []
        for name in queues:
            for c in [c for c in queues[name] if c.id in ids]:
                queues[name].remove(c)
            for task in [t for t in copies[name] if any(c.id in ids for c in t)]:
                copies[name].remove(task)
                orphans += [c for c in task if c.id not in ids]
        for _f, s_, task, _n, _dt, _copy in running:
            if s_ != seq_won and s_ not in cancelled and any(c.id in ids for c in task):
                cancelled.add(s_)
                orphans += [c for c in task if c.id not in ids]
        covered = {c.id for name in queues for c in queues[name]}
        covered |= {c.id for name in copies for t in copies[name] for c in t}
        covered |= {c.id for _f, s_, t, _n, _dt, _c in running if s_ not in cancelled
                    for c in t}
        for c in orphans:
            if c.id not in taken and c.id not in covered:
                policy.retry(c.id, assignments[c.id], now=now, reason="its task lost to a copy")
                queues[assignments[c.id]].appendleft(c)
                covered.add(c.id)

    release(0.0)
    dispatch(0.0)
    makespan = 0.0
    checked = 0.0
    while running:
        if not pending and policy.backup_margin is not None and running[0][0] > checked + tick:
            checked += tick  # nothing completes before the next look at the stragglers
            dispatch(checked)
            continue
        t, s_, task, name, dt, copy = heapq.heappop(running)
        checked = t
        free[name] += 1
        ids = [c.id for c in task]
        if s_ in cancelled or taken.intersection(ids):
            policy.lost(ids, dt, now=t, pool=name)  # a copy that lost: its slot comes back
            dispatch(t)
            continue
        makespan = t
        policy.observe(ids, dt, now=t, pool=name)
        policy.settle(ids, name, now=t)
        if copy:
            for i in ids:
                assignments[i] = name
        stats[name]["chunks"] += len(task)  # chunks and events whose output counted
        stats[name]["events"] += sum(c.events for c in task)
        take(ids, s_, t)
        reported.add(name)
        if warming and reported >= set(assignments.values()):
            warming, limit = False, None  # every pool used so far measured: the rest at once
        release(t)
        dispatch(t)
    if window is not None:
        label = f"placement (window {window})"
    elif warmup is not None:
        label = f"placement (warm-up {warmup})"
    else:
        label = "placement"
    return SimResult(label, makespan, stats, [assignments[c.id] for c in chunks])


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
