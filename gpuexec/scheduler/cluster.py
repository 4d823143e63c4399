"""The embedded local Dask cluster: a spec of worker pools, how it starts, and one
shared instance per spec for the whole interpreter.

A pool is a group of identical worker processes: how many, their threads, the
resources each declares (``{"CPU": threads}`` for the CPU pool) and their environment.
Every task placed on a pool requests the pool's task resources (``{"CPU": 1}``), so it
can only run there. Executor part 2 adds GPU pools (one worker per device, ``GPU=1``,
``CUDA_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES`` in ``env``) to ``ClusterSpec.pools``.

The cluster is a ``distributed.SpecCluster`` (what ``LocalCluster`` is built on; a spec
cluster because pools differ in resources and environment) of nanny-managed worker
processes bound to 127.0.0.1, with the dashboard on localhost. ``shared_client(spec)``
starts it once, and every executor copy with an equal spec reuses it; it is closed by
``close_shared`` or at interpreter exit. A spec with ``gpu_sharing="mps"`` starts (or
joins) an NVIDIA MPS control daemon before its GPU workers; the clusters of one process
share it, and the one it started is quit when the last of them closes
(``scheduler/mps.py``).
"""

from __future__ import annotations

import atexit
import logging
import threading
from dataclasses import dataclass

from gpuexec.scheduler.heap import freeze_once
from gpuexec.scheduler.keys import POOL_ENV

CPU = "CPU"
GPU = "GPU"

# Dask's nanny starts every worker with MALLOC_TRIM_THRESHOLD_=65536. Any value turns off
# glibc's dynamic mmap threshold, so every array above 128 KiB is mmapped and faulted in
# afresh: one ADL Q6 chunk of 20k events took 0.19 s in a Dask worker (and in a plain
# process given that variable) against 0.10-0.13 s without it (2-core dev machine,
# docs/executor.md). Dropped for gpuexec's workers; a value set in the environment is kept.
NANNY_SETTINGS = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}

# Dask's statistical profiler wakes in every worker each 10 ms to walk the stacks of its
# threads, holding the GIL. gpuexec's workers sample every 100 ms: the dashboard's Profile
# page stays, coarser. H200 host, 14 GPU + 2 CPU workers, medians of 5 in turns: ADL Q8
# 0.268 s against 0.287 at 10 ms, Q6 0.450 against 0.484. 2-core dev VM, Q8 on 1M events:
# coffea's DaskExecutor 1.47/1.12 s at 10 ms, 1.03/0.85 s at 100 ms, 1.04/1.04 s without
# the profiler; an idle 16-worker LocalCluster kept 0.7 cores busy, 0.5 without it
# (docs/executor.md).
PROFILE_INTERVAL = 0.1


# Dask's housekeeping timers in every worker, nanny and scheduler: the event-loop health
# check each 20 ms (it only measures: the "event loop unresponsive" warning fires after
# 3 s whatever the interval) and the system monitor (CPU and memory for the dashboard)
# each 500 ms. gpuexec's processes tick every 200 ms and sample every second. They are
# what an idle cluster costs: 2-core dev VM, an idle 16-worker LocalCluster (profiler at
# 100 ms) 0.65 busy cores with Dask's timers, 0.26 with these; on the H200 host, with the
# benchmark's five executors open, the cores busy before a run fell from 1.6-4.4 to
# 0.4-2.7 (mostly below 1.5) and ADL Q8 ran at 3.06-3.29x futures in three calls instead
# of 2.32-2.90x (docs/executor.md). The memory monitor (100 ms) is left alone: it pauses,
# spills and restarts a worker that grows.
HOUSEKEEPING = {"distributed.admin.tick.interval": "200ms",
                "distributed.admin.system-monitor.interval": "1s"}


def unless_configured(settings: dict) -> dict:
    """``settings`` for each key still at Dask's shipped default: a value set in Dask's
    configuration (a YAML file, a DASK_* variable) to something else is kept."""
    import dask
    from distributed.config import defaults

    return {key: value for key, value in settings.items()
            if dask.config.get(key, None) == dask.config.get(key, None, config=defaults)}


def worker_settings(profile_interval: float | None = PROFILE_INTERVAL) -> dict:
    """Every Dask setting gpuexec's embedded cluster starts its processes with (nanny,
    housekeeping for each timer Dask's configuration leaves at its default, profiler); the
    executor benchmark gives coffea's Dask cluster the same, and the Slurm workers
    (worker_cli) take it with the profiler left to Dask's configuration."""
    return {**NANNY_SETTINGS, **unless_configured(HOUSEKEEPING),
            **profile_settings(profile_interval)}


def check_profile_interval(interval: float | None) -> None:
    if interval is not None and not interval >= 0:
        raise ValueError(f"profile_interval must be >= 0 seconds or None, got {interval!r}")


def profile_settings(interval: float | None) -> dict:
    """Dask settings for the profiler of the workers a nanny starts: sampling every
    ``interval`` seconds (0: off; None: Dask's configured interval; checked by the spec)."""
    if interval is None:
        return {}
    if interval == 0:
        return {"distributed.worker.profile.enabled": False}
    return {"distributed.worker.profile.enabled": True,
            "distributed.worker.profile.interval": f"{interval * 1000:g}ms"}


def _frozen(mapping) -> tuple:
    return tuple(sorted((str(k), v) for k, v in dict(mapping or {}).items()))


@dataclass(frozen=True)
class WorkerPool:
    """``workers`` identical worker processes of ``threads`` threads each.

    ``resources``: what each worker declares to the scheduler; ``task_resources``: what
    each task placed on this pool requests; ``env``: extra environment of the worker
    processes; ``worker_envs``: one more environment per worker (a GPU pool's device
    pinning; empty: none); ``backend``: the kernel backend its tasks run under
    (``gk.using``).
    Mappings are stored as sorted tuples so that specs are hashable."""

    name: str
    workers: int
    threads: int = 1
    resources: tuple = ()
    task_resources: tuple = ()
    env: tuple = ()
    memory_limit: str | int | float = "auto"
    backend: str = "cpu"
    worker_envs: tuple = ()

    def __post_init__(self):
        if not (self.name.isalpha() and self.name.islower()):
            raise ValueError("pool names are lower-case letters (they prefix task keys), "
                             f"got {self.name!r}")
        if self.workers < 0:
            raise ValueError(f"pool {self.name!r}: workers must be >= 0, got {self.workers}")
        if self.threads < 1:
            raise ValueError(f"pool {self.name!r}: threads must be >= 1, got {self.threads}")
        for attr in ("resources", "task_resources", "env"):
            value = getattr(self, attr)
            if isinstance(value, dict):
                object.__setattr__(self, attr, _frozen(value))
        if self.worker_envs:
            envs = tuple(_frozen(e) if isinstance(e, dict) else tuple(e) for e in self.worker_envs)
            if len(envs) != self.workers:
                raise ValueError(f"pool {self.name!r}: {len(envs)} worker environments for "
                                 f"{self.workers} workers")
            object.__setattr__(self, "worker_envs", envs)
        if not self.task_resources:
            raise ValueError(f"pool {self.name!r} needs task_resources, "
                             "or its tasks could run anywhere")

    @classmethod
    def cpu(cls, workers: int, threads: int = 1, memory_limit="auto") -> "WorkerPool":
        return cls("cpu", workers, threads, resources={CPU: threads}, task_resources={CPU: 1},
                   memory_limit=memory_limit)

    @classmethod
    def gpu(cls, envs, threads: int = 2, slots: int | None = None, backend: str = "cuda",
            memory_limit="auto") -> "WorkerPool":
        """One worker per entry of ``envs`` (its device pinning), ``threads`` threads,
        ``slots`` chunks in flight per worker (default: ``threads``)."""
        envs = [dict(e) for e in envs]
        slots = threads if slots is None else slots
        return cls("gpu", len(envs), threads, resources={GPU: slots}, task_resources={GPU: 1},
                   memory_limit=memory_limit, backend=backend, worker_envs=tuple(envs))

    @property
    def is_gpu(self) -> bool:
        return GPU in dict(self.task_resources)

    def task_resources_dict(self) -> dict[str, float]:
        return dict(self.task_resources)

    def worker_env(self, index: int = 0) -> dict[str, str]:
        # numba sizes its thread pool at first use from NUMBA_NUM_THREADS: one per Dask thread
        env = {"NUMBA_NUM_THREADS": str(self.threads), POOL_ENV: self.name}
        env.update({k: str(v) for k, v in self.env})
        if self.worker_envs:
            env.update({k: str(v) for k, v in self.worker_envs[index]})
        return env

    def worker_names(self) -> list[str]:
        return [f"{self.name}-{i}" for i in range(self.workers)]

    def describe(self) -> str:
        threads = "thread" if self.threads == 1 else "threads"
        return f"{self.workers} {self.name.upper()} worker(s) x {self.threads} {threads}"


@dataclass(frozen=True)
class ClusterSpec:
    """Everything that defines an embedded cluster; equal specs share one cluster."""

    pools: tuple[WorkerPool, ...]
    host: str = "127.0.0.1"
    dashboard_address: str = "127.0.0.1:8787"
    allowed_failures: int = 3
    gpu_sharing: str = "none"  # "mps": the GPU workers share each device through NVIDIA MPS
    profile_interval: float | None = PROFILE_INTERVAL  # of Dask's profiler (profile_settings)

    def __post_init__(self):
        if self.gpu_sharing not in ("none", "mps"):
            raise ValueError(f"gpu_sharing is 'none' or 'mps', got {self.gpu_sharing!r}")
        check_profile_interval(self.profile_interval)
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            raise ValueError(f"pool names must be unique, got {names}")
        if not any(p.workers for p in self.pools):
            raise ValueError("the cluster spec has no workers")

    @classmethod
    def local(cls, cpu_workers: int | None = None, threads_per_worker: int = 1,
              memory_limit="auto", dashboard_address: str = "127.0.0.1:8787",
              allowed_failures: int = 3, *, gpu_envs=(), gpu_threads: int = 2,
              gpu_slots: int | None = None, gpu_backend: str = "cuda",
              gpu_sharing: str = "none",
              profile_interval: float | None = PROFILE_INTERVAL) -> "ClusterSpec":
        """A GPU pool with one worker per entry of ``gpu_envs`` (its pinning
        environment; none: no GPU pool) and ``cpu_workers`` CPU workers (default: one per
        ``threads_per_worker`` of the cores the GPU workers leave, at least one when there
        is no GPU worker; 0: none)."""
        gpu_envs = [dict(e) for e in gpu_envs]
        if cpu_workers is None:
            from gpuexec.scheduler.devices import split_cores

            split = split_cores(len(gpu_envs), None, helper_threads=gpu_threads,
                                cpu_threads=max(1, threads_per_worker))
            cpu_workers = split.cpu_workers if gpu_envs else max(1, split.cpu_workers)
        if not gpu_envs and cpu_workers == 0:  # say why, not only that it is empty
            raise ValueError("cpu_workers=0 and no GPU worker (no GPU visible, or "
                             "gpu_workers=0): the cluster would have no workers to run chunks")
        pools = []
        if gpu_envs:
            pools.append(WorkerPool.gpu(gpu_envs, gpu_threads, gpu_slots, gpu_backend,
                                        memory_limit))
        pools.append(WorkerPool.cpu(cpu_workers, threads_per_worker, memory_limit))
        return cls(pools=tuple(pools), dashboard_address=dashboard_address,
                   allowed_failures=allowed_failures,
                   gpu_sharing=gpu_sharing if gpu_envs else "none",
                   profile_interval=profile_interval)

    def describe(self) -> str:
        text = ", ".join(p.describe() for p in self.pools if p.workers)
        return text + (" sharing each GPU through NVIDIA MPS" if self.gpu_sharing == "mps" else "")

    def worker_specs(self, gpu_env: dict | None = None) -> dict:
        """Nanny specs of every worker; ``gpu_env`` joins the GPU pools' environment
        (an MPS daemon's pipe directory, known only once it runs)."""
        from distributed import Nanny

        specs = {}
        for pool in self.pools:
            options = {
                "host": self.host,
                "nthreads": pool.threads,
                "resources": dict(pool.resources),
                "memory_limit": pool.memory_limit,
                "dashboard": False,
                "silence_logs": logging.WARNING,
            }
            for i, name in enumerate(pool.worker_names()):
                env = pool.worker_env(i)
                if pool.is_gpu and gpu_env:
                    env.update(gpu_env)
                specs[name] = {"cls": Nanny, "options": dict(options, name=name, env=env)}
        return specs


def start_cluster(spec: ClusterSpec, gpu_env: dict | None = None):
    """A running SpecCluster for ``spec`` (the caller owns it); ``gpu_env``: extra
    environment of its GPU workers."""
    from distributed import Scheduler, SpecCluster

    scheduler = {"cls": Scheduler, "options": {
        "host": spec.host, "protocol": "tcp://", "dashboard": True,
        "dashboard_address": spec.dashboard_address,
    }}
    import dask

    # read by the scheduler and each Nanny as they are made, here
    with dask.config.set(worker_settings(spec.profile_interval)):
        cluster = SpecCluster(workers=spec.worker_specs(gpu_env), scheduler=scheduler,
                              silence_logs=logging.WARNING, name="gpuexec")
    # the scheduler runs in this process: how many worker deaths a task may witness
    # before it is declared a KilledWorker
    cluster.scheduler.allowed_failures = spec.allowed_failures
    return cluster


@dataclass
class _Shared:
    cluster: object
    client: object
    mps: object = None  # the MPS daemon of its GPU workers, if any


_shared: dict[ClusterSpec, _Shared] = {}
_lock = threading.Lock()
_atexit_registered = False

# One MPS daemon for all of this process's clusters (two daemons would each start a server
# on the same GPU), with the number of clusters using it.
_mps_lock = threading.Lock()
_mps_daemon = None
_mps_users = 0


def _acquire_mps():
    global _mps_daemon, _mps_users
    with _mps_lock:
        if _mps_daemon is None:
            from gpuexec.scheduler import mps

            _mps_daemon = mps.start()
        _mps_users += 1
        return _mps_daemon


def _release_mps(daemon) -> None:
    global _mps_daemon, _mps_users
    with _mps_lock:
        if daemon is not _mps_daemon:
            return
        _mps_users -= 1
        if _mps_users == 0:
            _mps_daemon = None
            daemon.stop()


def shared_client(spec: ClusterSpec, announce=print):
    """The Client of the embedded cluster for ``spec``, started on first use."""
    global _atexit_registered
    with _lock:
        live = _shared.get(spec)
        if live is not None and live.client.status == "running":
            return live.client
        if live is not None:  # closed behind our back: start afresh
            _close(live)
        from distributed import Client

        daemon = None
        if spec.gpu_sharing == "mps":
            daemon = _acquire_mps()  # before any GPU worker opens its device
        cluster = client = None
        try:
            cluster = start_cluster(spec, daemon.client_env() if daemon else None)
            client = Client(cluster, set_as_default=False)
            client.wait_for_workers(sum(p.workers for p in spec.pools))
            from gpuexec.scheduler.plugins import WarmPools

            # workers (also those a nanny restarts) are ready before the first chunk:
            # imports, device context, kernel modules
            client.register_plugin(WarmPools({p.name: p.backend for p in spec.pools}))
        except BaseException:  # leave no cluster or daemon behind
            _close(_Shared(cluster, client, daemon))
            raise
        _shared[spec] = _Shared(cluster, client, daemon)
        # this process now holds the scheduler and the client: keep full collections of
        # its long-lived objects out of the runs (heap.py)
        freeze_once()
        if not _atexit_registered:
            atexit.register(close_all)
            _atexit_registered = True
    if announce is not None:
        announce(f"gpuexec: local Dask cluster at {cluster.scheduler_address} with "
                 f"{spec.describe()}; dashboard: {client.dashboard_link}")
        if daemon is not None:
            announce(f"gpuexec: GPU workers use {daemon.describe()}")
    return client


def _close(shared: _Shared) -> None:
    try:
        if shared.client is not None:
            shared.client.close()
    finally:
        try:
            if shared.cluster is not None:
                shared.cluster.close()
        finally:
            if shared.mps is not None:  # after its clients, the GPU workers, are gone
                _release_mps(shared.mps)


def close_shared(spec: ClusterSpec) -> bool:
    """Close the embedded cluster of ``spec``; False if none was running."""
    with _lock:
        shared = _shared.pop(spec, None)
    if shared is None:
        return False
    _close(shared)
    return True


def close_all() -> None:
    with _lock:
        items = list(_shared.values())
        _shared.clear()
    for shared in items:
        try:
            _close(shared)
        except Exception:  # at exit: closing the rest matters more than one failure
            pass


def running_specs() -> list[ClusterSpec]:
    with _lock:
        return list(_shared)
