"""``GPUCluster``: gpuexec's local Dask cluster, an object like ``LocalCluster`` that a
user can create, inspect, reuse and pass to ``GPUExecutor(client=...)``
(docs/configuration.md#gpucluster).

It plans a CPU pool and a GPU pool pinned to this host's GPUs (pure planning in
``gpuexec.scheduler.cluster``), reads the worker settings of Dask's configuration
(``gpuexec.worker.*``, ``gpuexec.gpu.sync``) when it starts, and starts on first use.
Clusters of equal plans share one set of processes, which stays up while anyone holds
it: the object itself once used, and each executor running on it until its ``close()``.
"""

from __future__ import annotations

import functools
import warnings

from gpuexec import config
from gpuexec.scheduler import cluster as planning

GPU_SHARE = ("auto", "mps", "none")


@functools.lru_cache(maxsize=1)
def _visible_devices() -> tuple:
    from gpuexec.scheduler.devices import discover

    return tuple(discover())


_said = set()


def _say_once(what: str, text: str, warn: bool = False) -> None:
    if what not in _said:
        _said.add(what)
        if warn:
            warnings.warn(text, RuntimeWarning, stacklevel=4)
        else:
            print(text)


def worker_settings() -> dict:
    """Dask settings of a gpuexec worker process, from ``gpuexec.worker.*``."""
    s = config.WorkerSettings.read()
    return planning.worker_settings(s.profile_interval, s.tick_interval,
                                    s.system_monitor_interval)


class GPUCluster:
    """A local Dask cluster of a GPU pool and a CPU pool.

    Parameters:
        cpu_workers: CPU worker processes (default: one per ``threads_per_worker`` of
            the cores the GPU workers leave; 0: none).
        threads_per_worker: threads of each CPU worker (numba's thread count too).
        gpu_workers: GPU workers, pinned round robin to the visible GPUs (0: none).
            Default: on NVIDIA with MPS, seven eighths of each GPU's share of the cores;
            otherwise one per GPU. Without a GPU: CPU workers only (said once).
        gpu_threads: threads of each GPU worker (default: 1 where several share a
            device, else 2); ``gpu_slots``: chunks in flight per GPU worker (default: as
            many).
        gpu_share: how GPU workers of one NVIDIA device share it: "mps", "none" or
            "auto" (MPS where ``nvidia-cuda-mps-control`` exists and a device has more
            than one worker; a warning and one worker per GPU where it does not start).
        memory_limit: per worker ("auto": a share of the machine's memory).
        dashboard_address: the dashboard's address (loopback; a busy port is replaced).
        allowed_failures: worker deaths a task may witness before the run fails.
        gpu_backend: "cpu" runs the GPU pool on the CPU engine (1 worker by default),
            for machines without a GPU; None: the GPUs' own (cuda or hip).
        security: True (default): scheduler, workers and clients talk ``tls://`` with a
            key and certificate made for this cluster alone, held in memory
            (``Security.temporary()``), so other users of a shared host (a login node)
            cannot connect on 127.0.0.1; a ``distributed.Security`` of your own; or False:
            plain TCP. TLS costs at most 5 % of the executor's overhead
            (docs/deploy.md#gpucluster-tls). The dashboard stays HTTP on 127.0.0.1.
    """

    def __init__(self, cpu_workers: int | None = None, threads_per_worker: int = 1,
                 gpu_workers: int | None = None, gpu_threads: int | None = None,
                 gpu_slots: int | None = None, gpu_share: str = "auto",
                 memory_limit: str | int | float = "auto",
                 dashboard_address: str = "127.0.0.1:8787", allowed_failures: int = 3,
                 gpu_backend: str | None = None, security=True):
        if threads_per_worker < 1 or (gpu_threads is not None and gpu_threads < 1):
            raise ValueError("threads_per_worker and gpu_threads must be >= 1")
        if gpu_workers is not None and gpu_workers < 0:
            raise ValueError(f"gpu_workers must be >= 0, got {gpu_workers}")
        if gpu_share not in GPU_SHARE:
            raise ValueError(f"gpu_share is 'auto', 'mps' or 'none', got {gpu_share!r}")
        if gpu_backend not in (None, "cpu"):
            raise ValueError("gpu_backend is None (each GPU worker's own device decides) or "
                             f"'cpu' (the GPU pool on the CPU engine), got {gpu_backend!r}")
        self.cpu_workers, self.threads_per_worker = cpu_workers, threads_per_worker
        self.gpu_workers, self.gpu_threads, self.gpu_slots = gpu_workers, gpu_threads, gpu_slots
        self.gpu_share, self.memory_limit = gpu_share, memory_limit
        self.dashboard_address, self.allowed_failures = dashboard_address, allowed_failures
        self.gpu_backend = gpu_backend
        planning.cluster_security(security if security is not True else None)  # type check
        self.security = security
        self.mps_failed: str | None = None  # why gpu_share="auto" could not start MPS
        self._started: planning.ClusterSpec | None = None  # the spec this object holds
        self.spec  # a plan that cannot start fails here, not at first use

    # ------------------------------------------------------------------ planning
    def _mps_usable(self) -> bool:
        if self.gpu_share != "auto":
            return self.gpu_share == "mps"
        from gpuexec.scheduler import mps

        return mps.available() and not self.mps_failed

    @property
    def spec(self) -> planning.ClusterSpec:
        """The plan of pools and pinning (``gpuexec.scheduler.cluster.ClusterSpec``), with
        the worker settings of Dask's configuration as it is now."""
        from gpuexec.scheduler.devices import available_cores

        devices = () if self.gpu_backend == "cpu" or self.gpu_workers == 0 \
            else _visible_devices()
        mps_usable = self._mps_usable()
        backend, envs = planning.gpu_plan(self.gpu_workers, self.gpu_backend, devices,
                                          mps_usable, len(available_cores()))
        if not envs and self.gpu_workers != 0 and self.gpu_backend != "cpu":
            if self.gpu_workers:
                warnings.warn(f"gpu_workers={self.gpu_workers} but no GPU is visible",
                              RuntimeWarning, stacklevel=3)
            _say_once("no-gpu", "gpuexec: no GPU found: CPU workers only")
        sharing, sliced = planning.gpu_sharing(self.gpu_share, backend, envs, mps_usable)
        if sliced:
            from gpuexec.scheduler.mps import CONTROL

            _say_once("time-sliced", "gpuexec: several GPU workers share an NVIDIA device "
                      f"without MPS ({CONTROL} is not on PATH, or its daemon did not start): "
                      "CUDA time-slices their contexts, and processors of many small kernels "
                      "run several times slower", warn=True)
        s = config.WorkerSettings.read()
        if s.gpu_sync != "auto":
            from gpuexec.kernels.gpu.runtime import SYNC_ENV

            envs = [dict(e, **{SYNC_ENV: s.gpu_sync}) for e in envs]
        return planning.ClusterSpec.local(
            self.cpu_workers, self.threads_per_worker, self.memory_limit,
            self.dashboard_address, self.allowed_failures, gpu_envs=envs,
            gpu_threads=planning.gpu_threads_of(self.gpu_threads, envs),
            gpu_slots=self.gpu_slots, gpu_backend=backend, gpu_sharing=sharing,
            profile_interval=s.profile_interval, tick_interval=s.tick_interval,
            system_monitor_interval=s.system_monitor_interval, security=self.security)

    # ------------------------------------------------------------------ holding it
    def _acquire(self, announce=print):
        """(client, spec held): the running cluster with one more holder."""
        from gpuexec.scheduler.mps import MPSError

        spec = self._started or self.spec
        try:
            return planning.acquire(spec, announce), spec
        except MPSError as err:
            if self.gpu_share != "auto":
                raise
            # "auto" asked for no more than what works: the pools of a host without MPS
            self.mps_failed = str(err)
            warnings.warn(f"gpuexec: {err}; GPU workers start without MPS (one per GPU)",
                          RuntimeWarning, stacklevel=4)
            spec = self.spec
            return planning.acquire(spec, announce), spec

    def _join(self):
        """For an executor: (client, the spec to hand back to ``_leave``)."""
        return self._acquire()

    @staticmethod
    def _leave(spec) -> None:
        planning.release(spec)

    def start(self) -> "GPUCluster":
        """Start the cluster (or join the running one of the same plan) and hold it until
        ``close()``."""
        if self._started is None or not planning.holders(self._started):
            _client, self._started = self._acquire()
        return self

    @property
    def client(self):
        """A ``distributed.Client`` of the cluster (started, and held, on first use)."""
        self.start()
        return planning.shared_client(self._started, announce=None)

    @property
    def scheduler_address(self) -> str:
        return self.client.scheduler.address

    @property
    def dashboard_link(self) -> str:
        return self.client.dashboard_link

    def close(self) -> None:
        """Let go of the cluster; its processes stop when no executor holds it either."""
        spec, self._started = self._started, None
        if spec is not None:
            planning.release(spec)

    def __enter__(self) -> "GPUCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        try:
            what = self.spec.describe()
        except ValueError as err:
            what = str(err)
        if self._started is not None and planning.holders(self._started):
            state = f"running at {planning.shared_client(self._started, None).scheduler.address}"
        else:
            state = "not started"
        return f"GPUCluster({what}; {state})"
