"""The embedded cluster's ``SpecCluster``: Dask's, but a worker gone from the scheduler has
``gpuexec.worker.restart-timeout`` (120 s) to come back before its nanny is closed.

Dask's SpecCluster closes the nanny of a worker that has not re-registered
``distributed.deploy.lost-worker-timeout`` (15 s) after it left. A worker restarted after a
chunk timeout is stuck in a task: its nanny waits 4 s before killing it, then starts a new
process, which on a loaded host took longer than that, and the closed nanny never brought
the worker back (docs/executor.md#chunk-timeout)."""

from __future__ import annotations

import dask
from distributed import SpecCluster

from gpuexec import config


class GPUExecSpecCluster(SpecCluster):
    def __init__(self, *args, **kwargs):
        self.restart_timeout = config.restart_timeout()
        super().__init__(*args, **kwargs)

    def _update_worker_status(self, op, msg):
        if op != "remove":
            return super()._update_worker_status(op, msg)
        # read once, here, as Dask schedules the nanny's closing
        with dask.config.set({"distributed.deploy.lost-worker-timeout": self.restart_timeout}):
            return super()._update_worker_status(op, msg)
