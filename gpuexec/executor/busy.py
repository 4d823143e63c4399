"""Workers that cancelled copies of earlier calls still occupy: Dask cannot stop a running
task, so a copy that lost keeps its worker busy until it ends, and a call on the same
cluster keeps its tasks off that worker meanwhile (docs/executor.md#placement)."""

from __future__ import annotations

import logging
import time

from gpuexec.executor.events import UNPLACED_TASK_SECONDS, ClusterEvents, _StillRunning
from gpuexec.scheduler import cluster as planning
from gpuexec.scheduler.placement import straggler_end

logger = logging.getLogger("gpuexec.executor")


class BusyWorkers:
    """One call's view of the cancelled copies running on its cluster (``events``):
    the policy counts one slot of their pool busy until each copy's predicted end, and
    ``around`` names the workers to bind tasks to meanwhile."""

    def __init__(self, events: ClusterEvents, policy, pools: dict, restrict: bool, record):
        self.events, self.policy, self.pools, self.restrict = events, policy, pools, restrict
        self.record = record  # the call's CallRecord: busy_at_start, left_running
        self.avoid: dict = {}  # task key -> _StillRunning of an earlier call's copy
        self.held: dict = {}  # their task key -> (pool, slot) held in the policy
        self.live: dict = {}  # the cluster's workers, as last asked
        self.began: dict = {}  # this call's task key -> (monotonic time, worker) of its start

    def route_around(self, client) -> None:
        """At the call's start: hold a slot in the policy for each copy still running on
        a live worker, and remember how long each such worker stays busy."""
        mine = self.events.still_running_now()
        if not mine:
            return
        self.live = planning.workers_of(client)
        now = time.monotonic()
        busy = self.record.busy_at_start
        for key, entry in mine.items():
            if entry.worker not in self.live:  # the worker is gone (and its task with it)
                self.events.still_running.pop(key, None)
                continue
            self.avoid[key] = entry
            until = straggler_end(entry.started, entry.seconds, now)
            busy[entry.worker] = max(busy.get(entry.worker, 0.0), until - now)
            if self.policy is not None and entry.pool in self.policy.pools:
                slot = self.policy.occupied(entry.pool, until + self.policy.clock() - now)
                self.held[key] = (entry.pool, slot)
        if busy:
            logger.info("gpuexec: %d worker(s) still run copies that an earlier call "
                        "cancelled; tasks keep off them while they are predicted to run "
                        "longer than a task: %s", len(busy), ", ".join(sorted(busy)))

    def update_held(self) -> None:
        """Slots held by an earlier call's cancelled copies: one that runs on past its
        predicted end is predicted anew (``straggler_end``), one that ended is free."""
        if not self.held:
            return
        now = time.monotonic()
        offset = self.policy.clock() - now
        for key, (pool, slot) in list(self.held.items()):
            entry = self.events.still_running.get(key)
            if entry is None:  # its end event arrived
                del self.held[key]
                until = now
            else:
                until = straggler_end(entry.started, entry.seconds, now)
            self.policy.occupied(pool, until + offset, slot)

    def around(self, pool: str, group_units: list[int]) -> list | None:
        """The workers of ``pool`` not occupied by an earlier call's cancelled copy, for
        tasks of ``group_units`` entries each; None when none is occupied for longer than
        such a task takes, or all are (docs/executor.md#placement: binding regardless
        made an ADL Q6 run on the H200 take 1.37 s instead of 0.9)."""
        running = [e for k, e in self.avoid.items() if k in self.events.still_running]
        if not running:  # (every submission passes here: nothing to do in most calls)
            return None
        now = time.monotonic()
        seconds = UNPLACED_TASK_SECONDS
        if self.policy is not None and pool in self.policy.pools:
            seconds = max(self.policy.predict(pool, units) for units in group_units)
        busy = {e.worker for e in running
                if straggler_end(e.started, e.seconds, now) - now > seconds}
        if not busy:
            return None
        need = self.pools[pool].task_resources_dict() if self.restrict else {}
        mine = [a for a, w in self.live.items() if planning.holds(w, need)]
        free = [a for a in mine if a not in busy]
        return free if free and len(free) < len(mine) else None

    def leave(self, cancelled: dict, label) -> None:
        """Record this call's cancelled copies (task key -> the loop's record) that had
        started and have not ended, for the next call on the cluster; ``label`` names
        a task's chunks for the report."""
        if self.policy is None:
            return
        for key, sub in cancelled.items():
            began = self.began.get(key)
            seconds = self.policy.task_seconds(list(sub.indices), sub.pool)
            if began is None or began[1] is None or seconds is None:
                continue  # never started (Dask drops it), or not known where
            self.events.still_running[key] = _StillRunning(self.events.address, began[1],
                                                           sub.pool, began[0], seconds)
            # its end may have been reported meanwhile (ClusterEvents.store pops after storing)
            if key in self.events.reported_runs:
                self.events.still_running.pop(key, None)
            else:
                self.record.left_running.append(label(sub.indices))
