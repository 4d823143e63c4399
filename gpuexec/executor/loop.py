"""One call's submission loop: chunks are placed as earlier ones complete, GPU-placed
chunks of one file merged into larger tasks, completed outputs merged as they come, failed
GPU tasks re-run on CPU workers, and a GPU pool without workers hands its chunks to the
CPU pool (docs/executor.md#placement, #faults).

Each completion the loop sees goes to one handler: ``_on_chunk_done``,
``_on_chunk_failed``, ``_on_chunk_cancelled``, ``_on_output_fetched`` (merge_on="client")
and ``_on_output_moved`` (a GPU output copied to a CPU worker, merge_on="cluster").
Periodic checks run from ``_watch``: GPU pools without workers, tasks bound to workers
that left, and chunks past ``gpuexec.chunk-timeout``."""

from __future__ import annotations

import logging
import queue
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

from gpuexec import config
from gpuexec.executor.accounting import CallRecord
from gpuexec.executor.busy import BusyWorkers
from gpuexec.executor.errors import ChunkError, describe_item, falls_back, reason
from gpuexec.executor.events import ClusterEvents
from gpuexec.executor.merging import ChunkOrder, ClientMerge, TreeMerge, _Fetched
from gpuexec.executor.task import _Partial, _run_item, _timing_of, expected_units
from gpuexec.scheduler import cluster as planning
from gpuexec.scheduler import keys
from gpuexec.scheduler.placement import BACKUP_TICK, pool_slots
from gpuexec.scheduler.report import BackupCopy, Fallback, Rerun

logger = logging.getLogger("gpuexec.executor")


@dataclass
class _Submitted:
    """One task in flight: the chunks (indices) it runs, on which pool, and the workers
    it is bound to strictly (``_submit``; empty: not bound so)."""

    indices: tuple
    pool: str
    future: Any
    bound: tuple = ()


@dataclass
class InFlight:
    """The tasks in flight and which of them run each chunk (a chunk may run in a task
    and in a backup copy); chunks whose output was taken; tasks cancelled meanwhile."""

    tasks: dict = field(default_factory=dict)  # task key -> _Submitted
    chunks: int = 0  # chunks of the tasks in flight
    cover: dict = field(default_factory=dict)  # chunk index -> keys of tasks running it
    taken: set = field(default_factory=set)  # chunks whose output counts
    cancelled: dict = field(default_factory=dict)  # task key -> _Submitted, lost to a copy

    def add(self, sub: _Submitted) -> None:
        self.tasks[sub.future.key] = sub
        self.chunks += len(sub.indices)
        for i in sub.indices:
            self.cover.setdefault(i, set()).add(sub.future.key)

    def drop(self, sub: _Submitted) -> None:
        """``sub`` leaves the tasks in flight (completed, failed or cancelled)."""
        if self.tasks.pop(sub.future.key, None) is not None:
            self.chunks -= len(sub.indices)
        for i in sub.indices:
            self.cover.get(i, set()).discard(sub.future.key)


@dataclass
class _Queue:
    """The chunks not submitted yet: a stack, ``pop()`` gives the next."""

    pending: list
    units: int  # their entries (the policy's backlog)
    tasks: int = 0  # tasks submitted so far (numbers their keys)


class _Loop:
    """One call's windowed submission (at most ``window`` x a pool's slots in flight on
    each pool; with a policy, its depth per pool)."""

    def __init__(self, ex, client, pools: dict, items, labels, run, task, policy,
                 restrict: bool = True, started: float | None = None,
                 tuning: config.PlacementSettings | None = None,
                 timeout: float | None = None):
        self.ex, self.client, self.pools, self.items = ex, client, pools, items
        self.tuning = tuning or config.PlacementSettings.read()  # gpuexec.placement.*
        self.labels, self.run_token, self.task, self.policy = labels, run, task, policy
        self.gpu = [n for n, p in pools.items() if p.is_gpu]
        self.cpu = [n for n, p in pools.items() if not p.is_gpu]
        self.slots = sum(pool_slots(p) for p in pools.values())
        self.limit = self._window(len(items))
        self.restrict = restrict  # tasks name their pool's resources (GPUExecutor.__call__)
        self.queue = _Queue(list(range(len(items)))[::-1],
                            sum(expected_units(item) for item in items))
        self.flight = InFlight()
        self.record = CallRecord()
        self.events = ClusterEvents.of(client)
        self.busy = BusyWorkers(self.events, policy, pools, restrict, self.record)
        self.order = ChunkOrder()
        self.on_client = ex.merge_on == "client"
        self.client_merge = ClientMerge(client)
        merge_pool = pools[self.cpu[0]] if self.cpu else pools[self.gpu[0]]
        self.tree = TreeMerge(client, run, ex.compression, ex.treereduction,
                              merge_pool.task_resources_dict() if restrict else None,
                              ex.priority, on_submit=self._merges_submitted)
        self.moving: dict = {}  # key of a GPU output's copy to a CPU worker -> (copy, _Submitted)
        self.dead: set[str] = set()  # GPU pools without workers
        self.missing_since: dict[str, float] = {}
        self.progress = None
        self.started = time.perf_counter() if started is None else started
        # completed futures, put by their done callbacks (docs/executor.md#merging)
        self.completed: queue.SimpleQueue = queue.SimpleQueue()
        self.starts: queue.SimpleQueue = queue.SimpleQueue()  # (key, monotonic time, worker)
        self._to_fetch: list = []  # completed tasks whose outputs this batch fetches
        self.timeout = timeout  # gpuexec.chunk-timeout (None: off)
        self.timed_out: dict[int, str] = {}  # chunk index -> the worker it timed out on
        self.restarts: list[threading.Thread] = []  # restarts of timed-out tasks' workers
        self.restart_timeout = config.restart_timeout() if timeout is not None else None

    def _window(self, n_items: int) -> int | None:
        """Chunks in flight at most: all at once on one CPU pool without a policy (a
        window made workers wait for the client: docs/executor.md#placement), the
        window over all slots with a GPU pool; None with a policy (its depths bound)."""
        if self.policy is not None:
            return None
        if not self.gpu:
            return n_items
        return max(1, int(round(self.tuning.window * self.slots)))

    @property
    def merges_submitted(self) -> int:
        return self.tree.submitted

    def _merges_submitted(self, n: int) -> None:
        if self.progress is not None:
            self.progress.merges(submitted=n)

    def mark(self, phase: str, first: bool = False) -> None:
        """Seconds since the call's start at ``phase`` (``first``: keep the first)."""
        if not (first and phase in self.record.phases):
            self.record.phases[phase] = time.perf_counter() - self.started

    def _label(self, group) -> str:
        """A task's label: its first chunk's, and how many more it merges."""
        return self.labels[group[0]] + (f"+{len(group) - 1}" if len(group) > 1 else "")

    # ------------------------------------------------------------------ placing
    def _choose(self, i: int) -> str | None:
        """The pool of chunk ``i``, or None: its pool is full, the chunk waits (the
        policy binds a chunk to a pool when that pool has room: ``Placement.depth``)."""
        if self.policy is None:
            name = self.cpu[0] if self.cpu else self.gpu[0]
            self.record.pool_of[i] = name
            return name
        from gpuexec.scheduler.placement import Chunk

        item = self.items[i]
        backlog = self.queue.units - expected_units(item)
        pool = self.policy.assign(Chunk.of(item, i), backlog_events=backlog, may_wait=True)
        if pool is None:
            return None
        self.queue.units = backlog
        if pool in self.dead and self.cpu:
            self.policy.retry(i, self.cpu[0], reason=f"{pool} pool has no worker")
            pool = self.cpu[0]
        self.record.pool_of[i] = pool
        return pool

    def _refill(self) -> None:
        batch: dict[str, list[int]] = {}
        pending = self.queue.pending
        while pending:
            # with a policy, each pool's depth bounds what is in flight (a merged GPU
            # task counts its chunks); without one, the window over all slots does
            if (self.limit is not None
                    and self.flight.chunks + sum(map(len, batch.values())) >= self.limit):
                break
            pool = self._choose(pending[-1])
            if pool is None:
                break
            batch.setdefault(pool, []).append(pending.pop())
        if self.policy is not None:
            self.policy.end_batch()
        remaining = len(pending) + sum(map(len, batch.values()))
        for pool, indices in batch.items():
            self._submit(pool, indices, remaining=remaining)
        if not pending and self.policy is not None:
            self._copy_stragglers()

    def _copy_stragglers(self) -> None:
        """Every chunk is placed: copy the tasks that the policy predicts another pool's
        idle slots finish clearly earlier (``Placement.backups``)."""
        copies = self.record.copies
        for b in self.policy.backups():
            copies[b.chunks] = BackupCopy(self._label(b.chunks), b.from_pool, b.pool)
            logger.info("gpuexec: %s copied from the %s pool to idle %s slots (predicted "
                        "to finish at %.2f s there, %.2f s where it runs)",
                        copies[b.chunks].label, b.from_pool, b.pool, b.copy_finish,
                        b.original_finish)
            self._submit(b.pool, list(b.chunks), merge=False, backup=True)

    def _merge_count(self, remaining: int | None) -> int:
        """Chunks per merged GPU task: ``gpu_merge``, or fewer as the run ends (guided
        self-scheduling: at most the ``remaining`` chunks' share of one slot), so that
        the last GPU tasks are short (docs/executor.md#placement)."""
        if remaining is None:
            return self.tuning.gpu_merge
        return max(1, min(self.tuning.gpu_merge, -(-remaining // self.slots)))

    def _groups(self, pool: str, indices: list[int], merge: bool, remaining):
        """(chunk indices per task, the item each task runs): on a GPU pool adjacent
        chunks of one file merged into one task."""
        from gpuexec.scheduler.placement import merge_for_gpu

        count = self._merge_count(remaining)
        if not (pool in self.gpu and merge and count > 1 and len(indices) > 1):
            return [(i,) for i in indices], [self.items[i] for i in indices]
        sizes = sorted(expected_units(self.items[i]) for i in indices)
        merged = merge_for_gpu([self.items[i] for i in indices],
                               max(1, count * sizes[len(sizes) // 2]))
        for m in merged.merges:
            note = m.describe()
            self.record.merge_notes.append(note)
            logger.info("gpuexec: %s", note)
        return [tuple(indices[k] for k in part) for part in merged.parts], list(merged.items)

    def _task_key(self, pool: str, group: tuple, backup: bool) -> str:
        """A new task's key (a copy says so: the dashboard's task stream shows it)."""
        if len(group) > 1 and self.policy is not None:
            number = self.policy.mark_merged(group)
            for i in group:
                self.record.task_of[i] = number
        key = keys.chunk_key(pool, self.run_token, group[0], self._label(group)
                             + ("~copy" if backup else "") + f"~{self.queue.tasks}")
        self.queue.tasks += 1
        return key

    def _submit(self, pool: str, indices: list[int], merge: bool = True,
                remaining: int | None = None, backup: bool = False) -> None:
        """Submit the chunks ``indices`` to ``pool`` (``remaining``: chunks not yet
        submitted, these included; ``backup``: copies of chunks in flight elsewhere)."""
        groups, tasks = self._groups(pool, indices, merge, remaining)
        around = self.busy.around(pool, [sum(expected_units(self.items[i]) for i in group)
                                         for group in groups])
        resources = self.pools[pool].task_resources_dict() if self.restrict else None
        # a task needing resources is bound strictly: work stealing gave loose ones to
        # workers without them (docs/executor.md#placement); _watch_bound resubmits it
        strict = around is not None and bool(resources)
        task_keys = [self._task_key(pool, group, backup) for group in groups]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Large object of size")
            futures = self.client.map(
                _run_item, tasks, groups, [pool] * len(groups),
                [tuple(expected_units(self.items[i]) for i in g) for g in groups],
                task=self.task, key=task_keys, pure=False, resources=resources,
                workers=around, allow_other_workers=around is not None and not strict,
                priority=self.ex.priority,
                retries=0,  # the task retries what may pass (retryable); Dask re-runs lost tasks
            )
        # the loop watches the chunk futures themselves; their runs come by worker event
        for group, future in zip(groups, futures):
            self.flight.add(_Submitted(group, pool, future, tuple(around) if strict else ()))
            future.add_done_callback(self.completed.put)
        self.mark("first_submitted", first=True)
        if self.progress is not None:
            self.progress.placed(pool, sum(map(len, groups)))

    # ------------------------------------------------------------------ outputs
    def _collect(self, output, indices) -> None:
        """Take a task's output into the call's output, in chunk order."""
        for released in self.order.add(output, indices):
            if self.on_client:
                self.client_merge.absorb(released)
                if self.progress is not None:
                    self.progress.merges(done=1)
            else:
                self.tree.push(0, released)

    def _fetch(self, subs: list[_Submitted]) -> None:
        """Fetch completed tasks' outputs into this process in the background."""
        if self.progress is not None:  # the merges bar counts the outputs added up here
            self.progress.merges(submitted=len(subs))
        self.client_merge.fetch(subs, self.completed.put)

    @property
    def outputs(self) -> list:
        """The futures of outputs not merged yet (``merge_on="cluster"``)."""
        return [] if self.on_client else self.tree.outputs(self.order)

    def _finish(self) -> _Partial:
        self.order.check_done()
        if self.on_client:
            return self.client_merge.total
        return self.tree.finish(self.order).result()

    # ------------------------------------------------------------------ faults
    def _take(self, sub: _Submitted) -> None:
        """``sub``'s output counts for its chunks: any other copy of them is cancelled
        (a running one finishes on its worker; its output is never looked at). A task
        cancelled so has its other chunks run by their own copies, or run again."""
        flight = self.flight
        flight.taken.update(sub.indices)
        for i in sub.indices:
            self.record.pool_of[i] = sub.pool
        if self.policy is not None:
            self.policy.settle(list(sub.indices), sub.pool)
        for chunks, note in self.record.copies.items():
            if set(chunks) & set(sub.indices):
                note.taken_from = sub.pool
        losers = {key for i in sub.indices for key in flight.cover.get(i, ())}
        orphans = []
        for key in losers:
            other = flight.tasks.get(key)
            if other is None:
                continue
            flight.drop(other)
            self.client.cancel([other.future])
            flight.cancelled[key] = other
            if self.progress is not None:
                self.progress.done(other.pool, len(other.indices))
            orphans += [i for i in other.indices
                        if i not in flight.taken and not flight.cover.get(i)]
        for i in orphans:  # none while copies of a task's chunks are made together
            pool = self.record.pool_of[i]
            if self.policy is not None:
                self.policy.retry(i, pool, reason="its task was cancelled: a copy of a "
                                                  "chunk merged with it counted first")
            self._submit(pool, [i], merge=False)

    def _fall_back(self, sub: _Submitted, why: str) -> None:
        """Re-run the chunks of a GPU task on the CPU pool (each chunk alone), but for
        those that a copy in flight still runs (recorded as moved to the copy's pool)."""
        flight, fallbacks = self.flight, self.record.fallbacks
        covered = [i for i in sub.indices if flight.cover.get(i)]
        if covered:
            logger.warning("gpuexec: %d chunk(s) (%s) failed on the %s pool (%s); a copy "
                           "of each runs elsewhere", len(covered), self.labels[covered[0]],
                           sub.pool, why)
            if self.policy is not None:
                self.policy.release(covered, pool=sub.pool)
            for i in covered:
                to = min(flight.tasks[key].pool for key in flight.cover[i])
                fallbacks.append(Fallback(self.labels[i], sub.pool, to,
                                          f"{why} (a copy was running there)"))
        sub = _Submitted(tuple(i for i in sub.indices if i not in covered), sub.pool,
                         sub.future)
        if not sub.indices:
            return
        flight.taken.difference_update(sub.indices)  # an output taken and then lost
        cpu = self.cpu[0]
        for i in sub.indices:
            if self.policy is not None:
                self.policy.retry(i, cpu, reason=f"retry on CPU: {why}")
            self.record.pool_of[i] = cpu
            fallbacks.append(Fallback(self.labels[i], sub.pool, cpu, why))
        logger.warning("gpuexec: %d chunk(s) (%s) moved from the %s pool to the CPU pool: %s",
                       len(sub.indices), self.labels[sub.indices[0]], sub.pool, why)
        self._submit(cpu, list(sub.indices), merge=False)

    def _failed(self, sub: _Submitted, err: BaseException) -> None:
        """A task raised: a GPU task falls back to the CPU pool where its error says
        another attempt may succeed (``falls_back``); a copy whose twin still runs is
        dropped; anything else fails the call."""
        if sub.pool in self.gpu and self.cpu and falls_back(err):
            self._fall_back(sub, reason(err))
            return
        if all(self.flight.cover.get(i) for i in sub.indices):  # a copy failed, another runs
            logger.warning("gpuexec: a copy of %s failed on the %s pool (%s); another runs",
                           self.labels[sub.indices[0]], sub.pool, reason(err))
            if self.policy is not None:
                self.policy.release(list(sub.indices), pool=sub.pool)
            return
        raise err

    def _lose_pool(self, name: str) -> None:
        """GPU pool ``name`` has no worker left: its tasks in flight, outputs being moved
        and outputs being fetched fall back to the CPU pool."""
        for sub in [s for s in self.flight.tasks.values() if s.pool == name]:
            self.flight.drop(sub)
            self.client.cancel([sub.future])
            self._fall_back(sub, f"the {name} pool lost its last worker")
        for key, (copy, sub) in list(self.moving.items()):
            if sub.pool == name:
                del self.moving[key]
                self.client.cancel([copy, sub.future])
                self._fall_back(sub, f"the {name} pool lost its last worker "
                                     "before its output was merged")
        fetching = self.client_merge.fetching
        for key, sub in list(fetching.items()):
            if sub.pool == name:  # its fetch waits for a recomputation on the GPU pool
                del fetching[key]
                self.client.cancel([sub.future])
                self._fall_back(sub, f"the {name} pool lost its last worker "
                                     "before its output was fetched")

    def _watch_gpu_pools(self) -> None:
        """A GPU pool none of whose workers is alive for ``gpu_lost_after`` seconds hands
        its tasks (which Dask would keep waiting for a GPU worker) to the CPU pool."""
        if not self.gpu or not self.cpu:
            return
        live = planning.workers_of(self.client)
        now = time.monotonic()
        for name in self.gpu:
            if name in self.dead:
                continue
            if planning.any_worker_holds(live, self.pools[name].task_resources_dict()):
                self.missing_since.pop(name, None)
                continue
            since = self.missing_since.setdefault(name, now)
            if now - since < self.tuning.gpu_lost_after:
                continue
            self.dead.add(name)
            logger.warning("gpuexec: the %s pool has had no worker for %.0f s: its chunks run "
                           "on CPU workers", name, now - since)
            self._lose_pool(name)

    def _watch_bound(self) -> None:
        """A task bound strictly to workers that have all left would wait in Dask's
        "no-worker" state forever: it is cancelled and its chunks submitted again to its
        pool (bound to whichever of its workers are free now, or not at all)."""
        stranded = [sub for sub in self.flight.tasks.values() if sub.bound]
        if not stranded:
            return
        live = planning.workers_of(self.client)
        self.busy.live = live
        for sub in stranded:
            if any(address in live for address in sub.bound):
                continue
            self.flight.drop(sub)
            self.client.cancel([sub.future])
            logger.warning("gpuexec: the workers that %s was bound to have left; it is "
                           "submitted again to the %s pool", self._label(sub.indices), sub.pool)
            if self.policy is not None:
                for i in sub.indices:
                    self.policy.retry(i, sub.pool, reason="resubmitted: the workers it was "
                                                          "bound to left")
            self._submit(sub.pool, list(sub.indices), merge=False)

    def _watch_timeouts(self) -> None:
        """A task running past ``gpuexec.chunk-timeout``: Dask cannot stop its thread, so
        it is cancelled and its worker restarted; its chunks run once more, and a chunk
        that times out again fails the call (docs/executor.md#faults)."""
        if self.timeout is None:
            return
        now = time.monotonic()
        for key, sub in list(self.flight.tasks.items()):
            began = self.busy.began.get(key)
            if began is None or now - began[0] < self.timeout:
                continue
            worker = began[1]
            self.flight.drop(sub)
            self.busy.began.pop(key, None)
            self.client.cancel([sub.future])
            self._restart(worker)
            again = [i for i in sub.indices if i in self.timed_out]
            if again:
                raise ChunkError(
                    f"{describe_item(self.items[again[0]])} timed out after "
                    f"{self.timeout:g} s on worker {worker}, as it did on worker "
                    f"{self.timed_out[again[0]]} (gpuexec.chunk-timeout); both restarted")
            what = f"timed out after {self.timeout:g} s; its worker restarted"
            for i in sub.indices:
                self.timed_out[i] = worker
                self.record.timeouts.append(Rerun(self.labels[i], worker, what))
            logger.warning("gpuexec: %s timed out after %g s on worker %s: the worker is "
                           "restarted and the chunk(s) run once more", self._label(sub.indices),
                           self.timeout, worker)
            rerun = [i for i in sub.indices
                     if i not in self.flight.taken and not self.flight.cover.get(i)]
            if self.policy is not None:
                self.policy.release([i for i in sub.indices if i not in rerun], pool=sub.pool)
                for i in rerun:
                    self.policy.retry(i, sub.pool, reason=what)
            if rerun:
                self._submit(sub.pool, rerun, merge=False)

    _restarting = threading.Lock()  # one restart at a time: a pool keeps a live worker

    def _restart(self, worker: str) -> None:
        """Restart ``worker`` through its nanny, in the background (the loop goes on)."""
        def restart():
            try:
                with self._restarting:
                    self.client.restart_workers([worker], timeout=self.restart_timeout,
                                                raise_for_error=True)
            except Exception as err:  # e.g. a worker without a nanny
                logger.warning("gpuexec: worker %s could not be restarted (%r); its "
                               "timed-out chunk still runs there", worker, err)

        thread = threading.Thread(target=restart, name="gpuexec-restart", daemon=True)
        thread.start()
        self.restarts.append(thread)

    def _await_restarts(self) -> None:
        """A call returns, or raises, once the workers it restarted are back: a restart
        left running would kill a worker of the next call."""
        for thread in self.restarts:
            thread.join(self.restart_timeout + 10)

    # ------------------------------------------------------------------ worker events
    def _worker_events(self) -> None:
        """Note which tasks started (chunk timeouts), tell the policy, and the times of
        cancelled copies that ran to their end anyway (their runs arrive as any task's;
        their outputs are never fetched)."""
        offset = 0.0 if self.policy is None else self.policy.clock() - time.monotonic()
        while True:
            try:
                key, at, worker = self.starts.get_nowait()
            except queue.Empty:
                break
            self.busy.began[key] = (at, worker)
            sub = self.flight.tasks.get(key)
            if sub is not None and self.policy is not None:
                self.policy.started(list(sub.indices), now=at + offset, pool=sub.pool)
        if self.policy is None:
            return
        for key, sub in list(self.flight.cancelled.items()):
            runs = self.events.reported_runs.pop(key, None)
            if runs is not None:
                del self.flight.cancelled[key]
                for run in runs:
                    self.policy.lost(list(run.indices), run.seconds, pool=sub.pool)

    def _runs_of(self, future) -> list:
        """A completed task's runs: from its worker event, or (should the event be late or
        lost) fetched by a small task where its output is."""
        runs = self.events.reported_runs.pop(str(future.key), None)
        if runs is None:
            runs = self.client.submit(_timing_of, future, pure=False,
                                      priority=self.ex.priority + 1).result()
        return runs

    # ------------------------------------------------------------------ completions
    def _on_completion(self, done) -> None:
        """Hand a completed future (or fetched output) to the handler of its kind."""
        if isinstance(done, _Fetched):
            self._on_output_fetched(done)
        elif done.key in self.moving:
            self._on_output_moved(*self.moving.pop(done.key))
        else:
            sub = self.flight.tasks.get(done.key)
            if sub is None:  # cancelled: another copy counted, or its pool was lost
                return
            self.flight.drop(sub)
            self.mark("last_task_seen")
            if done.status == "error":
                self._on_chunk_failed(sub, done.exception())
            elif done.status == "cancelled":
                self._on_chunk_cancelled(sub)
            else:
                self._on_chunk_done(sub)

    def _on_chunk_done(self, sub: _Submitted) -> None:
        """A chunk task completed: the policy learns its time, its output counts (its
        other copies are cancelled) and goes to be merged."""
        if self.policy is not None:
            timed = set()
            for run in self._runs_of(sub.future):
                self.policy.observe(list(run.indices), run.seconds, pool=sub.pool)
                timed.update(run.indices)
            # a chunk without a run of its own still leaves its pool's queue
            self.policy.release([i for i in sub.indices if i not in timed], pool=sub.pool)
        self._take(sub)
        if self.on_client:
            # fetched here, where a GPU worker that dies later cannot take it along
            self._to_fetch.append(sub)
        elif sub.pool in self.gpu and self.cpu:
            # moved to a CPU worker at once: Dask could only recompute it on a GPU
            copy = self.tree.submit([[sub.future]], 0)[0]
            self.moving[copy.key] = (copy, sub)
            copy.add_done_callback(self.completed.put)
        else:
            self._collect(sub.future, sub.indices)
        if self.progress is not None:
            self.progress.done(sub.pool, len(sub.indices))

    def _on_chunk_failed(self, sub: _Submitted, err: BaseException) -> None:
        self._failed(sub, err)

    def _on_chunk_cancelled(self, sub: _Submitted) -> None:
        raise ChunkError(f"{describe_item(self.items[sub.indices[0]])}: its task "
                         "was cancelled")

    def _on_output_fetched(self, done: _Fetched) -> None:
        """A completed task's output reached this process (or failed to)."""
        sub = self.client_merge.fetching.pop(done.key, None)
        if sub is None:  # moved to the CPU pool meanwhile
            return
        if done.error is not None:
            if isinstance(done.error, Exception) and sub.pool in self.gpu and self.cpu:
                self._fall_back(sub, "its output could not be fetched from the "
                                     f"GPU worker ({reason(done.error)})")
                return
            raise done.error
        self.mark("last_output_fetched")
        self._collect(done.value, sub.indices)

    def _on_output_moved(self, copy, sub: _Submitted) -> None:
        """A GPU task's output copied to a CPU worker (or lost on the way: re-run)."""
        if copy.status == "error":
            self._fall_back(sub, "its output could not be moved off the GPU "
                                 f"worker ({reason(copy.exception())})")
            return
        self._collect(copy, sub.indices)

    # ------------------------------------------------------------------ the loop
    def _completed(self, timeout: float) -> list:
        """Watched futures that completed (waiting up to ``timeout`` for the first); a
        future cancelled or already handled is skipped by its handler."""
        try:
            done = [self.completed.get(timeout=timeout)]
        except queue.Empty:
            return []
        while True:
            try:
                done.append(self.completed.get_nowait())
            except queue.Empty:
                return done

    def _watch(self, last_check: float) -> float:
        """Between batches of completions: worker events, held slots, and every second
        the GPU pools' workers and strictly bound tasks; the time of the last check."""
        self._worker_events()
        self.busy.update_held()
        if time.monotonic() - last_check < 1.0:
            return last_check
        self._watch_gpu_pools()
        self._watch_bound()
        self._watch_timeouts()
        return time.monotonic()

    def run(self) -> _Partial:
        self.busy.route_around(self.client)
        if self.policy is not None or self.timeout is not None:
            self.starts = self.events.watch(self.client, self.run_token)
        try:
            return self._run()
        finally:
            self.busy.leave(self.flight.cancelled, self._label)
            self.events.unwatch(self.run_token)
            self.client_merge.shutdown()
            self._await_restarts()

    def _run(self) -> _Partial:
        self._refill()
        last_check = 0.0
        while self.flight.tasks or self.moving or self.client_merge.fetching:
            # once every chunk is placed, look for stragglers to copy between completions
            watch = (not self.queue.pending and self.policy is not None
                     and self.policy.backup_margin is not None)
            for done in self._completed(timeout=BACKUP_TICK if watch else 1.0):
                self._on_completion(done)
            if self._to_fetch:
                self._fetch(self._to_fetch)
                self._to_fetch = []
            last_check = self._watch(last_check)
            self._refill()
        return self._finish()

    def cancel(self) -> None:
        futures = [s.future for s in self.flight.tasks.values()]
        futures += [s.future for s in self.client_merge.fetching.values()]
        futures += [copy for copy, _ in self.moving.values()]
        try:
            self.client.cancel(futures + self.outputs)
        except Exception:  # cancelling is best effort while an error propagates
            pass

