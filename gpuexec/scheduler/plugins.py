"""Plugins gpuexec installs on a Dask cluster.

- ``PinNumbaThreads`` (worker): the kernel engine's thread count equals the worker's
  Dask threads, so workers do not oversubscribe the cores. numba's thread count is
  per calling thread, so the plugin records the count and every task thread applies it
  once (``pin_task_thread``, called by the executor's task function).
- ``WarmPools`` (worker, embedded clusters): a worker imports the analysis stack and,
  in a GPU pool, opens its device and loads the kernel engine's modules when it starts,
  so that its first chunk does not pay for them (measured on the H200: a cold GPU
  worker's first chunk finished 5.6 s into a 5.7 s run).
- ``ChunkLedger`` (scheduler): records which gpuexec tasks were running on, or had
  their result on, a worker that died, i.e. which chunks Dask re-runs elsewhere. The
  executor reads and clears the record of its run (``ledger_pop``) for its report.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
import weakref
from collections import defaultdict

from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin

from gpuexec.scheduler import keys

_worker_threads: int | None = None  # set in worker processes by PinNumbaThreads
_pinned = threading.local()


class PinNumbaThreads(WorkerPlugin):
    name = "gpuexec-pin-numba-threads"
    idempotent = True

    def setup(self, worker):
        global _worker_threads
        _worker_threads = int(worker.state.nthreads)
        pin_task_thread()


def pin_task_thread() -> None:
    """Apply the worker's thread count to the kernel engine in the calling thread (once
    per thread; a no-op outside workers that run PinNumbaThreads)."""
    n = _worker_threads
    if n is None or getattr(_pinned, "threads", None) == n:
        return
    import gpuexec.kernels as gk

    gk.set_num_threads(n)
    _pinned.threads = n


class WarmPools(WorkerPlugin):
    """``backends``: pool name -> kernel backend of its tasks. A worker finds its pool in
    its environment (``keys.POOL_ENV``); a failure is logged, never fatal: the
    chunk that meets the same failure reports it."""

    name = "gpuexec-warm-pools"
    idempotent = True

    def __init__(self, backends: dict[str, str]):
        self.backends = dict(backends)

    def setup(self, worker):
        backend = self.backends.get(os.environ.get(keys.POOL_ENV, ""), "cpu")
        start = time.perf_counter()
        try:
            warm_worker(backend)
        except Exception as err:  # noqa: BLE001 - reported by the first chunk instead
            logging.getLogger("gpuexec").warning(
                "gpuexec: warming worker %s for backend %r failed: %r", worker.name, backend, err)
            return
        logging.getLogger("gpuexec").debug("gpuexec: worker %s warm for %r in %.2f s",
                                           worker.name, backend, time.perf_counter() - start)


def warm_worker(backend: str) -> None:
    """Import what a chunk's processor needs and open ``backend`` (on a GPU: its context,
    every kernel module, awkward's device backend)."""
    import awkward as ak
    import numpy as np

    import gpuexec.kernels as gk

    try:
        import coffea.nanoevents  # noqa: F401 - the processor's event factory
    except ImportError:
        pass
    engine = gk.get_backend(backend)
    if getattr(engine, "preload", None) is not None:
        engine.preload()
    ak_backend = getattr(engine, "ak_backend", "cpu")
    if ak_backend != "cpu":
        small = ak.to_backend(ak.Array([[1.0, 2.0], [], [3.0]]), ak_backend)
        with gk.using(engine):
            gk.sum(small, axis=1)
        ak.to_backend(small * np.float64(2.0), "cpu")


class ChunkLedger(SchedulerPlugin):
    name = "gpuexec-chunk-ledger"
    idempotent = True

    def __init__(self):
        self.lost: dict[str, list[tuple[str, str, str]]] = defaultdict(list)

    def log_event(self, topic, msg):
        # the scheduler logs a worker's removal twice, under the worker's address and under
        # "all" with a "worker" field: the second copy alone is counted
        if (topic != "all" or not isinstance(msg, dict)
                or msg.get("action") != "remove-worker" or "worker" not in msg):
            return
        for what, tasks in (("assigned to it", msg.get("processing-tasks", ())),
                            ("result lost", msg.get("lost-computed-tasks", ()))):
            for key in tasks:
                parsed = keys.parse(key)
                if parsed is not None:
                    self.lost[parsed["run"]].append((key, str(msg["worker"]), what))


def ledger_pop(run: str, dask_scheduler=None) -> list[tuple[str, str, str]]:
    """(key, worker, what) for each gpuexec task of ``run`` hit by a worker's death;
    runs on the scheduler through ``Client.run_on_scheduler``."""
    plugin = dask_scheduler.plugins.get(ChunkLedger.name)
    if plugin is None:
        return []
    return plugin.lost.pop(run, [])


# client -> whether its scheduler runs the ledger
_installed: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_install_lock = threading.Lock()


def install(client) -> bool:
    """Register gpuexec's plugins with ``client``'s cluster (once per client); returns
    whether the scheduler keeps the ledger."""
    with _install_lock:
        if client in _installed:
            return _installed[client]
        client.register_plugin(PinNumbaThreads())
        try:
            client.register_plugin(ChunkLedger())
            ledger = True
        except Exception as err:  # e.g. a remote scheduler without gpuexec installed
            warnings.warn(f"gpuexec could not install its scheduler plugin ({err!r}); chunks "
                          "re-run after a worker died will not be listed in executor.report",
                          RuntimeWarning, stacklevel=3)
            ledger = False
        _installed[client] = ledger
        return ledger
