"""The local Dask cluster's pure planning and its processes: a spec of worker pools,
how it starts, and one shared, held instance per spec for the whole interpreter.

A pool is a group of identical worker processes: how many, their threads, the resources
each declares (``{"CPU": threads}``, ``{"GPU": slots}``) and their environment (a GPU
worker's device pinning). Every task placed on a pool requests the pool's task
resources (``{"CPU": 1}``), so it can only run there. ``gpu_plan`` and its helpers plan
the GPU pool from the host's devices; ``gpuexec.gpu_cluster.GPUCluster`` feeds them.

The cluster is a ``distributed.SpecCluster`` of nanny-managed worker processes bound to
127.0.0.1, with the dashboard on localhost. ``security=True``: scheduler, workers and
clients talk ``tls://`` with credentials of this cluster alone (``Security.temporary()``,
in memory), so other users of the host cannot connect (docs/deploy.md#gpucluster-tls). ``acquire(spec)`` starts it once and counts a
holder; ``release(spec)`` lets go, and the last holder closes it (``close_shared`` closes
it whoever holds it; ``close_all`` at interpreter exit). A spec with
``gpu_sharing="mps"`` starts (or joins) an NVIDIA MPS control daemon before its GPU
workers; the clusters of one process share it, and the one it started is quit when the
last of them closes (``scheduler/mps.py``).
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
DEVICE_ENV = "GPUEXEC_DEVICE"  # a GPU pool on the CPU engine: its pretend device (internal)

# Dask's nanny sets MALLOC_TRIM_THRESHOLD_, which makes glibc mmap every array above 128 KiB
# afresh (an ADL Q6 chunk 1.5x slower; docs/executor.md#malloc); a user's value is kept.
NANNY_SETTINGS = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}

# Dask's profiler and housekeeping timers of gpuexec's processes come from
# ``gpuexec.worker.*`` (docs/configuration.md; measurements in docs/executor.md#housekeeping).
PROFILE_KEYS = ("distributed.worker.profile.enabled", "distributed.worker.profile.interval")
TICK_KEY = "distributed.admin.tick.interval"
MONITOR_KEY = "distributed.admin.system-monitor.interval"


def unless_configured(settings: dict) -> dict:
    """``settings`` for each key still at Dask's shipped default: a value set in Dask's
    configuration (a YAML file, a DASK_* variable) to something else is kept."""
    import dask
    from distributed.config import defaults

    return {key: value for key, value in settings.items()
            if dask.config.get(key, None) == dask.config.get(key, None, config=defaults)}


def worker_settings(profile_interval: float | None, tick_interval: float | None = None,
                    system_monitor_interval: float | None = None) -> dict:
    """Every Dask setting gpuexec's worker processes start with: the nanny's, the profiler
    sampling every ``profile_interval`` seconds (0: off), the event-loop tick and system
    monitor every ``tick_interval`` / ``system_monitor_interval`` seconds; None leaves
    Dask's. A timer that Dask's configuration sets to other than Dask's default is kept."""
    housekeeping = {key: _duration(value) for key, value in
                    ((TICK_KEY, tick_interval), (MONITOR_KEY, system_monitor_interval))
                    if value is not None}
    return {**NANNY_SETTINGS, **unless_configured(housekeeping),
            **profile_settings(profile_interval)}


def _duration(seconds: float) -> str:
    """Dask's spelling of a duration: "200ms", "1s"."""
    if seconds >= 1 and float(seconds).is_integer():
        return f"{seconds:g}s"
    return f"{seconds * 1000:g}ms"


def check_profile_interval(interval: float | None) -> None:
    if interval is not None and not interval >= 0:
        raise ValueError(f"a worker interval must be >= 0 seconds or None, got {interval!r}")


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
    profile_interval: float | None = None  # of Dask's profiler (profile_settings)
    tick_interval: float | None = None  # of Dask's event-loop tick (worker_settings)
    system_monitor_interval: float | None = None  # of Dask's system monitor
    security: object = False  # True: TLS with fresh credentials; or a distributed Security

    def __post_init__(self):
        if self.gpu_sharing not in ("none", "mps"):
            raise ValueError(f"gpu_sharing is 'none' or 'mps', got {self.gpu_sharing!r}")
        for interval in (self.profile_interval, self.tick_interval,
                         self.system_monitor_interval):
            check_profile_interval(interval)
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
              gpu_sharing: str = "none", profile_interval: float | None = None,
              tick_interval: float | None = None,
              system_monitor_interval: float | None = None,
              security: object = False) -> "ClusterSpec":
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
                   profile_interval=profile_interval, tick_interval=tick_interval,
                   system_monitor_interval=system_monitor_interval, security=security)

    def describe(self) -> str:
        text = ", ".join(p.describe() for p in self.pools if p.workers)
        return text + (" sharing each GPU through NVIDIA MPS" if self.gpu_sharing == "mps" else "")

    def worker_specs(self, gpu_env: dict | None = None, security=None) -> dict:
        """Nanny specs of every worker; ``gpu_env`` joins the GPU pools' environment
        (an MPS daemon's pipe directory, known only once it runs); ``security``: the
        cluster's TLS credentials (a ``distributed.Security``), None for plain TCP."""
        from distributed import Nanny

        specs = {}
        tls = {} if security is None else {"security": security, "protocol": "tls://"}
        for pool in self.pools:
            options = {
                **tls,
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
    environment of its GPU workers. With ``spec.security`` its ``security`` attribute
    holds the credentials a ``Client(cluster)`` uses."""
    from distributed import Scheduler

    from gpuexec.scheduler.spec_cluster import GPUExecSpecCluster

    security = cluster_security(spec.security)
    scheduler = {"cls": Scheduler, "options": {
        "host": spec.host, "protocol": "tcp://" if security is None else "tls://",
        "dashboard": True, "dashboard_address": spec.dashboard_address,
        **({} if security is None else {"security": security}),
        "preload": ["gpuexec.dashboard"],  # the /gpuexec page (docs/monitoring.md)
    }}
    import dask

    # read by the scheduler and each Nanny as they are made, here
    with dask.config.set(worker_settings(spec.profile_interval, spec.tick_interval,
                                         spec.system_monitor_interval)):
        cluster = GPUExecSpecCluster(workers=spec.worker_specs(gpu_env, security),
                                     scheduler=scheduler, security=security,
                                     silence_logs=logging.WARNING, name="gpuexec")
    # the scheduler runs in this process: how many worker deaths a task may witness
    # before it is declared a KilledWorker
    cluster.scheduler.allowed_failures = spec.allowed_failures
    return cluster


def cluster_security(security):
    """The ``distributed.Security`` of a spec's ``security`` (None: plain TCP): True makes
    a key and self-signed certificate for this cluster alone, held in memory only."""
    if security is None or security is False:
        return None
    from distributed.security import Security

    if security is True:
        return Security.temporary()  # require_encryption=True: no plain-tcp peer
    if not isinstance(security, Security):
        raise TypeError(f"security is True, False or a distributed Security, got "
                        f"{type(security).__name__}")
    return security


@dataclass
class _Shared:
    cluster: object
    client: object
    mps: object = None  # the MPS daemon of its GPU workers, if any
    users: int = 0  # holders (acquire); the cluster closes when the last releases it


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


def _running(spec: ClusterSpec, announce) -> _Shared:
    """The live entry of ``spec``, started on first use (the caller holds ``_lock``)."""
    global _atexit_registered
    live = _shared.get(spec)
    if live is not None and live.client.status == "running":
        return live
    users = 0
    if live is not None:  # closed behind our back: start afresh, its holders kept
        users = live.users
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
        _shared.pop(spec, None)
        _close(_Shared(cluster, client, daemon))
        raise
    live = _shared[spec] = _Shared(cluster, client, daemon, users)
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
    return live


def shared_client(spec: ClusterSpec, announce=print):
    """The Client of the embedded cluster for ``spec``, started on first use (holding
    nothing: ``acquire`` counts a holder)."""
    with _lock:
        return _running(spec, announce).client


def acquire(spec: ClusterSpec, announce=print):
    """The Client of the cluster for ``spec``, started on first use, with one more holder:
    it stays up until every holder has called ``release`` (or ``close_shared``)."""
    with _lock:
        live = _running(spec, announce)
        live.users += 1
        return live.client


def release(spec: ClusterSpec) -> bool:
    """One holder of ``spec``'s cluster is done; the last one closes it (True then)."""
    with _lock:
        live = _shared.get(spec)
        if live is None:
            return False
        live.users -= 1
        if live.users > 0:
            return False
        del _shared[spec]
    _close(live)
    return True


def holders(spec: ClusterSpec) -> int:
    """How many holders keep ``spec``'s cluster up (0: none, or not running)."""
    with _lock:
        live = _shared.get(spec)
        return 0 if live is None else live.users


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
    """Close the embedded cluster of ``spec`` whoever holds it; False if none was running."""
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


# ------------------------------------------------------------------ planning the pools
AUTO = "auto"  # a GPU pool's backend chosen on each worker from its own device


def backend_of(vendor: str) -> str:
    """The kernel backend of a GPU of ``vendor`` (``devices.AMD``: "hip"; else "cuda")."""
    from gpuexec.scheduler.devices import AMD

    return "hip" if vendor == AMD else "cuda"


def device_backend(devices) -> str:
    """The kernel backend a GPU worker that sees ``devices`` runs: its first device's
    vendor's (cuda or hip)."""
    if not devices:
        raise RuntimeError("this worker declares the GPU resource but sees no GPU "
                           "(CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES?)")
    return backend_of(devices[0].vendor)


def share_a_device(envs: list[dict]) -> bool:
    """Whether two GPU workers of these pinning environments use one device."""
    return len(envs) > len({tuple(sorted(e.items())) for e in envs})


def workers_per_device(backend: str, n_devices: int, mps_usable: bool, cores: int) -> int:
    """Default GPU workers per device: ``devices.shared_gpu_workers`` where its processes
    run concurrently (NVIDIA with MPS), else one (AMD: not measured; ``gpu_workers`` sets
    any number)."""
    if backend != "cuda" or not mps_usable:
        return 1
    from gpuexec.scheduler.devices import shared_gpu_workers

    return shared_gpu_workers(cores, n_devices)


def gpu_plan(gpu_workers: int | None, gpu_backend: str | None, devices, mps_usable: bool,
             cores: int) -> tuple[str, list[dict]]:
    """(GPU pool backend, one pinning environment per GPU worker) for ``devices``, the
    GPUs of this host; ``gpu_backend="cpu"``: a pool on the CPU engine (no device)."""
    if gpu_workers == 0:
        return "cpu", []
    if gpu_backend == "cpu":
        n = 1 if gpu_workers is None else gpu_workers
        return "cpu", [{DEVICE_ENV: f"cpu-{i}"} for i in range(n)]
    if not devices:
        return "cpu", []
    backend = backend_of(devices[0].vendor)
    n = (workers_per_device(backend, len(devices), mps_usable, cores) * len(devices)
         if gpu_workers is None else gpu_workers)
    return backend, [devices[i % len(devices)].pin_env() for i in range(n)]


def gpu_threads_of(gpu_threads: int | None, envs: list[dict]) -> int:
    """Threads per GPU worker: 1 where several share a device, else 2 (reading overlaps
    compute), unless set."""
    if gpu_threads is not None:
        return gpu_threads
    return 1 if share_a_device(envs) else 2


def gpu_sharing(gpu_share: str, backend: str, envs: list[dict],
                mps_usable: bool) -> tuple[str, bool]:
    """("mps" or "none", whether the workers time-slice a device without MPS)."""
    if backend != "cuda" or not envs:
        if gpu_share == "mps" and envs:
            raise ValueError(f"gpu_share='mps' is NVIDIA's; the GPU pool runs {backend!r}")
        return "none", False
    if gpu_share == "mps":
        return "mps", False
    if gpu_share == "none" or not share_a_device(envs):
        return "none", False
    if mps_usable:
        return "mps", False
    return "none", True


# ------------------------------------------------------------------ a user's cluster
def workers_of(client) -> dict:
    """The scheduler's info of every worker of ``client``'s cluster (address -> info)."""
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:  # distributed before 2025: always all workers
        info = client.scheduler_info()
    return info.get("workers", {})


def holds(worker: dict, need: dict) -> bool:
    """Whether ``worker`` (scheduler worker info) declares the resources ``need``."""
    return all(worker.get("resources", {}).get(r, 0) >= n for r, n in need.items())


def any_worker_holds(workers: dict, need: dict) -> bool:
    """Whether one of ``workers`` (scheduler worker info) declares the resources ``need``."""
    return any(holds(w, need) for w in workers.values())


def pools_of_workers(workers: dict, gpu_backend: str | None) -> dict:
    """The pools of a user's cluster: those of the ``workers`` declaring CPU and GPU,
    sized by them (the window and the placement count their slots), the GPU pool first;
    each GPU worker picks its backend (``AUTO``) unless ``gpu_backend`` is "cpu"."""
    pools = {"cpu": WorkerPool.cpu(0, 1)}
    for name, resource in (("cpu", CPU), ("gpu", GPU)):
        declaring = [w for w in workers.values() if w.get("resources", {}).get(resource)]
        if not declaring:
            continue
        slots = max(1, int(min(w["resources"][resource] for w in declaring)))
        backend = "cpu" if name == "cpu" or gpu_backend == "cpu" else AUTO
        pools[name] = WorkerPool(name, len(declaring), slots, resources={resource: slots},
                                 task_resources={resource: 1}, backend=backend)
    return dict(sorted(pools.items(), key=lambda item: item[0] != "gpu"))


def check_resources(workers: dict, pools: dict, address: str) -> None:
    """Tasks request their pool's resources: a cluster (scheduler ``address``) without a
    worker declaring them would queue them forever, so say so up front."""
    for name, pool in pools.items():
        need = pool.task_resources_dict()
        if not any_worker_holds(workers, need):
            example = ", ".join(f"{r}={n:g}" for r, n in need.items())
            raise RuntimeError(
                f"no worker of the Dask cluster at {address} declares the "
                f"resources {need} that gpuexec's {name} tasks request; start its workers with "
                f"resources (e.g. `dask worker --resources {example}` or "
                f"LocalCluster(resources={need})), or use GPUExecutor() without a client")
