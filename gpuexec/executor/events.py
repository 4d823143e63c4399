"""What the client hears from one cluster's workers across calls: each task's runs and
start (a worker event on ``RUNS_TOPIC``, ahead of the task's own completion), the
cancelled copies still running there, and its nvCOMP answer. One ``ClusterEvents`` per
scheduler address (docs/executor.md#placement)."""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import NamedTuple

RUNS_TOPIC = "gpuexec-runs"
# what a task of a call without placement (file metadata) is guessed to take: a worker
# busy longer than this is avoided
UNPLACED_TASK_SECONDS = 0.1
# a record older than this is dropped (its end event will not come: its cluster closed)
STILL_RUNNING_FORGOTTEN = 600.0


class TaskRun(NamedTuple):
    """What one task ran, as its worker reports it (a worker event carries it as a plain
    list: ``ClusterEvents.store`` makes it a TaskRun again)."""

    indices: tuple  # chunk indices of the task
    worker: str
    units: int  # entries (or items) processed
    seconds: float
    read: float  # seconds reading and decompressing columns
    transfer: float  # seconds copying columns to the device
    awkward: tuple = (0, 0, 0)  # awkward kernel calls by outcome (kernels.stats.AWKWARD_OUTCOMES)


@dataclass(frozen=True)
class _StillRunning:
    """A task cancelled while it ran (the copy that lost): Dask cannot stop it, so its
    worker stays busy until it ends, and the next call on that cluster counts the worker
    busy (``BusyWorkers``) until the task's end event arrives (``ClusterEvents.store``)."""

    scheduler: str  # the cluster's scheduler address
    worker: str  # the worker's address
    pool: str
    started: float  # time.monotonic() of the start event's arrival
    seconds: float  # the placement's prediction of the whole task


@dataclass
class ClusterEvents:
    """The client's record of one cluster (scheduler ``address``); ``of(client)`` gives
    the one of a client's cluster."""

    address: str
    reported_runs: dict = field(default_factory=dict)  # task key -> runs
    reported_starts: dict = field(default_factory=dict)  # run token -> SimpleQueue of starts
    watching: set = field(default_factory=set)  # run tokens of this process's calls running
    still_running: dict = field(default_factory=dict)  # task key -> _StillRunning
    nvcomp: object = None  # nvCOMP's answer on its NVIDIA GPU workers (probes.py)
    nvcomp_heard: bool = False

    _registry = {}  # scheduler address -> ClusterEvents
    _lock = threading.Lock()

    @classmethod
    def of(cls, client) -> "ClusterEvents":
        address = client.scheduler.address
        with cls._lock:
            if address not in cls._registry:
                cls._registry[address] = cls(address)
            return cls._registry[address]

    @classmethod
    def all(cls) -> list["ClusterEvents"]:
        with cls._lock:
            return list(cls._registry.values())

    # --------------------------------------------------------- a call's subscription
    def watch(self, client, run: str) -> queue.SimpleQueue:
        """Hear call ``run``'s task events; the queue gets (key, monotonic time, worker)
        of each task's start."""
        starts = queue.SimpleQueue()
        self.reported_starts[run] = starts
        self.watching.add(run)
        client.subscribe_topic(RUNS_TOPIC, self.store)
        return starts

    def unwatch(self, run: str) -> None:
        self.watching.discard(run)
        self.reported_starts.pop(run, None)
        for key in [k for k in self.reported_runs if run in k]:
            self.reported_runs.pop(key, None)

    def store(self, event) -> None:
        """A worker event: a start goes to its call's queue, an end's runs are kept
        until its call takes them; any end frees a cancelled copy's worker."""
        _timestamp, msg = event
        key = str(msg["key"])
        for run in list(self.watching):
            if run in key:
                if msg["runs"] is None:
                    starts = self.reported_starts.get(run)
                    if starts is not None:
                        starts.put((key, time.monotonic(), msg.get("worker")))
                else:
                    self.reported_runs[key] = [TaskRun(*run) for run in msg["runs"]]
                break
        if msg["runs"] is not None:  # (after storing: see BusyWorkers.leave)
            self.still_running.pop(key, None)

    # --------------------------------------------------------- cancelled copies
    def still_running_now(self) -> dict:
        """The records of cancelled copies still running (task key -> _StillRunning);
        records older than ``STILL_RUNNING_FORGOTTEN`` are dropped on the way."""
        now = time.monotonic()
        for key, entry in list(self.still_running.items()):
            if now - entry.started > STILL_RUNNING_FORGOTTEN:
                self.still_running.pop(key, None)
        return dict(self.still_running)
