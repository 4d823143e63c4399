"""``GPUExecutor``: the coffea executor's settings, its cluster, and one call from items to
a merged output and its report (the package docstring says how a call runs)."""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import warnings
from collections import deque
from dataclasses import dataclass, fields, replace
from typing import Any

from coffea.processor import accumulate
from coffea.processor.executor import ExecutorBase, FileMeta, WorkItem

from gpuexec import config, dashboard
from gpuexec.dashboard import feed
from gpuexec.executor.accounting import CallRecord, account, failed_call, reruns
from gpuexec.executor.errors import explain, nothing_left
from gpuexec.executor.events import ClusterEvents
from gpuexec.executor.loop import _Loop
from gpuexec.executor.merging import _merge
from gpuexec.executor.probes import ask_for_nvcomp, calibration, hear_nvcomp
from gpuexec.executor.task import _Partial, _Task, _unpack, expected_units
from gpuexec.gpu_cluster import GPUCluster
from gpuexec.io import kept_files
from gpuexec.scheduler import cluster as planning
from gpuexec.scheduler import keys
from gpuexec.scheduler.report import CallReport, RunReport, SkippedChunksWarning, skipped_warning

#: file-metadata items (Runner's preprocessing) read in the client process instead of on
#: the embedded cluster, at most (``GPUExecutor._metadata_here``)
METADATA_HERE = 4
CLIENT_POOL = "client"  # the report's pool of what ran in the client process
REPORTS_KEPT = 20  # runs whose reports ``GPUExecutor.reports`` keeps

#: keywords that moved out of GPUExecutor -> where they live now (docs/configuration.md)
MOVED = {
    **{name: f"GPUCluster({name}=...), passed as client=" for name in (
        "gpu_workers", "gpu_threads", "gpu_slots", "gpu_share", "cpu_workers",
        "threads_per_worker", "memory_limit", "dashboard_address")},
    **{name: f"the Dask config key 'gpuexec.{key}'" for name, key in (
        ("gpu_merge", "placement.gpu-merge"), ("window", "placement.window"),
        ("crossover", "placement.crossover"), ("probe", "placement.probe"),
        ("gpu_lost_after", "placement.gpu-lost-after"), ("backups", "placement.backups"),
        ("inflate", "reading.inflate"), ("read_on_device", "reading.read-on-device"),
        ("read_ahead", "reading.read-ahead"), ("open_files", "reading.open-files"),
        ("nvcomp_min_streams", "reading.nvcomp.min-streams"),
        ("nvcomp_slots", "reading.nvcomp.slots"), ("nvcomp_wait", "reading.nvcomp.wait"),
        ("gpu_sync", "gpu.sync"), ("profile_interval", "worker.profile-interval"))},
}
#: keywords removed with their feature (never shown to help on a GPU host)
REMOVED = ("cpu_direct_read", "nvcomp_share")


def _refuse_moved(kwargs: dict) -> None:
    for name in kwargs:
        if name in REMOVED:
            raise TypeError(f"GPUExecutor's {name!r} was removed: it was never shown to help "
                            "on a GPU host (docs/configuration.md#removed-keywords)")
        if name in MOVED:
            raise TypeError(f"GPUExecutor does not take {name!r}: it is set with "
                            f"{MOVED[name]} (docs/configuration.md)")


class _SharedState:
    """What every copy of one executor shares: the report and placement of the last run,
    the calibration measured on the cluster, and the cluster it holds."""

    def __init__(self):
        self.report: RunReport | None = None
        self.reports: deque = deque(maxlen=REPORTS_KEPT)  # the latest runs, oldest first
        self._open: dict[int, RunReport] = {}  # thread -> the run its next call may join
        self.placement = None
        self.calibration = None
        # nvCOMP where the NVIDIA GPU workers run: its version, None (absent), or
        # NVCOMP_UNKNOWN; False until heard (probes.py)
        self.nvcomp: str | None | bool = False
        self.cluster: GPUCluster | None = None  # the default cluster (no client given)
        self.held = None  # the ClusterSpec whose cluster these copies hold, until close()
        self.lock = threading.Lock()

    def record(self, call: CallReport) -> RunReport:
        """Add ``call`` to the run of its thread (``Runner`` preprocesses and processes in
        one thread; two runs in two threads keep two reports)."""
        thread = threading.get_ident()
        with self.lock:
            before = self._open.get(thread)
            run = (before or RunReport()).add(call)
            if run is not before:
                self.reports.append(run)
            self._open[thread] = run
            while len(self._open) > REPORTS_KEPT:  # threads long gone
                self._open.pop(next(iter(self._open)))
            self.report = run
        return run


@dataclass
class _Call:
    """One call on the cluster, as planned before its first chunk is submitted."""

    client: Any
    ledger: bool  # whether the scheduler keeps a record of re-runs (plugins.install)
    pools: dict
    run: str  # the run token in every task key
    probe: Any  # the nvCOMP probe's future, or None
    policy: Any  # the placement policy, or None
    loop: _Loop


@dataclass
class GPUExecutor(ExecutorBase):
    """coffea executor on Dask (see the ``gpuexec.executor`` docstring).

    Parameters (besides coffea's ``status``, ``unit``, ``desc``, ``compression``,
    ``function_name``); tuning is in Dask's configuration under ``gpuexec.*``
    (docs/configuration.md):
        client: a ``GPUCluster``, or a ``distributed.Client`` whose workers declare the
            resource ``CPU`` (e.g. ``LocalCluster(resources={"CPU": threads})``) and, for
            GPU workers, ``GPU`` (each runs its chunks on its own device's backend: cuda
            on NVIDIA, hip on AMD). None (default): a default ``GPUCluster``, started on
            first use, shared by every executor of the same plan, let go by ``close()``
            or the ``with`` block (it stops when its last holder lets go).
        gpu_backend: None (each GPU worker's own device decides), or "cpu": GPU tasks
            run on the CPU engine (a GPU pool without a GPU: placement, merged tasks,
            fallback to CPU workers on failure).
        calibration: "auto" (the kernel-engine calibration, run once on a GPU worker and
            cached on disk there, ``gpuexec.calibration-dir``), a ``Calibration``, or None
            (a neutral seed: the pools' observed times decide).
        merge_on: where the chunks' outputs are merged: "client" (each output fetched
            into this process as its task completes and added in chunk order) or
            "cluster" (a tree of merge tasks on the workers, for outputs too large to
            hold in one process; docs/executor.md#merging).
        treereduction: outputs merged per reduction task (``merge_on="cluster"``).
        retries: extra attempts of a chunk that raises, as in coffea's executors; a
            worker's death is not an attempt (see ``allowed_failures``).
        allowed_failures: worker deaths a task may witness before the run fails (the
            default cluster's; a ``GPUCluster`` or a client has its own).
        priority: Dask priority of the run's tasks.
    """

    client: Any = None
    gpu_backend: str | None = None
    calibration: Any = "auto"
    merge_on: str = "client"
    treereduction: int = 20
    retries: int = 3
    allowed_failures: int = 3
    priority: int = 0

    def __post_init__(self):
        if self.treereduction < 2:
            raise ValueError(f"treereduction must be >= 2, got {self.treereduction}")
        if self.merge_on not in ("client", "cluster"):
            raise ValueError(f"merge_on is 'client' or 'cluster', got {self.merge_on!r}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")
        if self.gpu_backend not in (None, "cpu"):
            raise ValueError("gpu_backend is None (each GPU worker's own device decides) or "
                             f"'cpu' (GPU tasks on the CPU engine), got {self.gpu_backend!r}")
        self._shared = _SharedState()

    # coffea's ExecutorBase.copy passes every attribute to the constructor; copies must
    # also share the report, so that the executor handed to Runner shows the run.
    def copy(self, **kwargs) -> "GPUExecutor":
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        values.update(kwargs)
        new = type(self)(**values)
        new._shared = self._shared
        return new

    def __getstate__(self):
        state = dict(self.__dict__, client=None)
        state.pop("_shared", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._shared = _SharedState()

    @property
    def report(self) -> RunReport | None:
        """The last run: its preprocessing and processing calls, skipped chunks,
        chunks re-run after a worker died or moved from a GPU to a CPU pool, merged GPU
        tasks, where each chunk ran and the placement decisions."""
        return self._shared.report

    @property
    def reports(self) -> list[RunReport]:
        """The reports of the latest runs (up to ``REPORTS_KEPT``), oldest first: one per
        run, also for runs made at the same time from several threads."""
        return list(self._shared.reports)

    @property
    def dashboard_link(self) -> str | None:
        """The Dask dashboard of the cluster this executor runs on (starting the default
        cluster if need be); gpuexec's page is the same server's ``/gpuexec``
        (docs/monitoring.md). None where the scheduler serves no dashboard."""
        cluster = self.cluster
        link = (cluster.dashboard_link if cluster is not None
                else getattr(self.client, "dashboard_link", None))
        return link or None

    @property
    def nvcomp_on_gpu_workers(self) -> str | None | bool:
        """nvCOMP's version where this executor's NVIDIA GPU workers run, None where it
        is not installed (they inflate on the host), ``NVCOMP_UNKNOWN`` where they could
        not be asked, False before a processing call with such workers has heard."""
        return self._shared.nvcomp

    @property
    def placement(self):
        """The placement policy of the last processing call
        (``gpuexec.scheduler.placement.Placement``: ``decisions()``, ``summary()``)."""
        return self._shared.placement

    # ----------------------------------------------------------------- the cluster
    @property
    def cluster(self) -> GPUCluster | None:
        """The ``GPUCluster`` this executor runs on (the default one when no client was
        given); None for a ``distributed.Client``."""
        if isinstance(self.client, GPUCluster):
            return self.client
        if self.client is not None:
            return None
        with self._shared.lock:
            if self._shared.cluster is None:
                self._shared.cluster = GPUCluster(gpu_backend=self.gpu_backend,
                                                  allowed_failures=self.allowed_failures)
            return self._shared.cluster

    def cluster_spec(self):
        """The plan of the ``GPUCluster`` this executor runs on: the one it holds, else
        the one it would start now."""
        cluster = self.cluster
        if cluster is None:
            raise ValueError("an executor on a distributed.Client has no cluster spec")
        return self._shared.held or cluster.spec

    def _pools(self, client=None) -> dict:
        """The pools tasks go to: the ``GPUCluster``'s plan, or those of a user's
        cluster's workers (only the CPU pool's task resources without ``client``)."""
        if self.cluster is not None:
            pools = {p.name: p for p in self.cluster_spec().pools if p.workers}
            if self.gpu_backend == "cpu":  # GPU tasks on the CPU engine, whatever the plan
                pools = {n: (replace(p, backend="cpu") if p.is_gpu else p)
                         for n, p in pools.items()}
            return pools
        if client is None:
            return {"cpu": planning.WorkerPool.cpu(0, 1)}
        return planning.pools_of_workers(planning.workers_of(client), self.gpu_backend)

    def _connect(self):
        from gpuexec.scheduler import plugins

        cluster = self.cluster
        if cluster is not None:
            with self._shared.lock:  # these copies hold the cluster until close()
                if self._shared.held is None:
                    client, self._shared.held = cluster._join()
                else:
                    client = planning.shared_client(self._shared.held, announce=None)
        else:
            client = self.client
            planning.check_resources(planning.workers_of(client),
                                     {"cpu": self._pools()["cpu"]}, client.scheduler.address)
        ledger = plugins.install(client)
        if dashboard.enabled():
            dashboard.install(client)
        return client, ledger

    def close_files(self) -> int:
        """Close the ROOT files the cluster's workers keep open (``open_files``), e.g.
        after rewriting one in place; returns how many were open. A file a chunk reads
        now closes when that chunk ends."""
        client, _ledger = self._connect()
        return sum(client.run(kept_files.close_all).values())

    def close(self) -> None:
        """Let go of the cluster: a ``GPUCluster`` stops when its last holder lets go (an
        executor's run in flight on it is not disturbed); a client is left to its owner."""
        with self._shared.lock:
            held, self._shared.held = self._shared.held, None
        if held is not None:
            GPUCluster._leave(held)

    def __enter__(self) -> "GPUExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _placement(self, client, pools: dict, tuning: config.PlacementSettings):
        from gpuexec.scheduler.placement import Placement

        seed = calibration(self._shared, self.calibration, client, pools)
        return Placement.from_pools(pools.values(), seed,
                                    gpu_merge=tuning.gpu_merge, crossover=tuning.crossover,
                                    probe=tuning.probe, unmeasured_depth=1,
                                    depth=tuning.window, backup_margin=tuning.backups)

    # ---------------------------------------------------------------------- a call
    def __call__(self, items, function, accumulator):
        items = list(items)
        if not items:  # (Runner's processing call when every file was skipped)
            report = self._shared.record(CallReport(stage="processing", unit="entries",
                                                    chunks=0))
            if report.skipped:
                nothing_left(report.skipped)
            return accumulator, 0
        started = time.perf_counter()
        if self._metadata_here(items):
            return self._call_here(items, function, accumulator, started)
        call = self._plan(items, function, started)
        try:
            result = self._run(call.loop)
        except BaseException as err:
            reran = self._abandon(call)
            explained = explain(err, items)
            report = failed_call(items, call.loop.record, reran,
                                 time.perf_counter() - started, explained)
            self._shared.record(report)
            if dashboard.enabled():
                feed.send_call(call.client, report)
            if explained is err:
                raise
            raise explained from err
        reran = reruns(call.client, call.run) if call.ledger else []
        hear_nvcomp(self._shared, call.client, call.probe)
        if call.policy is not None:
            self._shared.placement = call.policy
        report, mismatch = account(items, call.loop.record, call.loop.labels, result, reran,
                                   time.perf_counter() - started, call.policy)
        if dashboard.enabled():
            feed.send_call(call.client, report)
        return self._finish(report, mismatch, _unpack(result), accumulator)

    def _plan(self, items: list, function, started: float) -> _Call:
        """Connect, choose the pools, policy and task of a call on the cluster."""
        tuning, reading = config.PlacementSettings.read(), config.ReadingSettings.read()
        timeout = config.chunk_timeout()
        client, ledger = self._connect()
        pools = self._pools(client)
        # an embedded cluster of CPU workers leaves tasks unrestricted: Dask queues them
        # for the first free worker (docs/executor.md#pools)
        restrict = self.cluster is None or any(p.is_gpu for p in pools.values())
        chunks = all(isinstance(item, WorkItem) for item in items)
        if not chunks:  # file metadata and generic items: the CPU pool when there is one
            name = "cpu" if pools.get("cpu") is not None and pools["cpu"].workers else next(iter(pools))
            pools = {name: pools[name]}
            # any worker may take them while an earlier call's cancelled copy occupies one
            restrict = restrict and not ClusterEvents.of(client).still_running_now()
        probe = (ask_for_nvcomp(self._shared, client, pools, reading.read_on_device)
                 if chunks else None)
        policy = (self._placement(client, pools, tuning)
                  if chunks and len(pools) > 1 else None)
        # the task travels inside the graph, pickled once per batch sent to a worker (as
        # a future it would be a dependency, pulling every task to one worker)
        task = _Task(function, self.compression, {name: p.backend for name, p in pools.items()},
                     [n for n, p in pools.items() if p.is_gpu], report_runs=policy is not None,
                     # starts: for straggler copies and the chunk timeout
                     report_starts=(policy is not None and policy.backup_margin is not None
                                    or timeout is not None),
                     reading=reading, retries=self.retries)
        run = keys.new_run_token()
        loop = _Loop(self, client, pools, items, [keys.item_label(item) for item in items],
                     run, task, policy, restrict, started, tuning, timeout)
        return _Call(client, ledger, pools, run, probe, policy, loop)

    def _run(self, loop: _Loop) -> _Partial:
        """Run the loop under the progress bar (``status``)."""
        progress = None
        if self.status:
            from gpuexec.scheduler.progress import WindowProgress

            try:
                progress = WindowProgress(self.desc, self.unit).__enter__()
            except Exception as err:  # the bar is a view: a broken one must not fail the run
                warnings.warn(f"gpuexec progress bar failed: {err!r}", RuntimeWarning,
                              stacklevel=3)
        loop.progress = progress
        try:
            result = loop.run()
            loop.mark("merged")
            if progress is not None:
                progress.merges(done=loop.merges_submitted)
            return result
        finally:
            if progress is not None:
                progress.__exit__(None, None, None)

    def _abandon(self, call: _Call) -> list:
        """A failed call: its tasks and probe cancelled; returns the scheduler's record of
        its re-runs (taken off the scheduler)."""
        call.loop.cancel()
        if call.probe is not None:
            call.probe.cancel()
        if call.ledger:
            with contextlib.suppress(Exception):
                return reruns(call.client, call.run)
        return []

    def _finish(self, call: CallReport, mismatch, value, accumulator, stacklevel: int = 3):
        """A call's end, once its report is made: recorded, its entry mismatch raised, its
        skipped chunks warned of and (processing) put in the metrics; the output added to
        ``accumulator`` (``stacklevel``: of the warning, from here to the executor's
        caller)."""
        report = self._shared.record(call)
        if mismatch is not None:
            raise mismatch
        if call.stage == "processing" and call.skipped and len(call.skipped) == call.chunks:
            nothing_left(report.skipped)
        if call.skipped:
            warnings.warn(skipped_warning(call.skipped), SkippedChunksWarning,
                          stacklevel=stacklevel)
        if call.stage == "processing" and isinstance(value, dict) \
                and isinstance(value.get("metrics"), dict):
            value["metrics"]["skipped"] = [s.as_dict() for s in report.skipped]
            value["metrics"]["chunks_per_pool"] = call.pools
        return accumulate([value], accumulator), 0

    def _metadata_here(self, items: list) -> bool:
        """Whether Runner's preprocessing of ``items`` runs in this process: file
        metadata of at most ``METADATA_HERE`` files on the embedded cluster, whose
        workers read the same file system; a Dask round trip costs more than such a
        read (docs/executor.md#reading). Many files go to the cluster."""
        return (self.cluster is not None and len(items) <= METADATA_HERE
                and all(isinstance(item, FileMeta) for item in items))

    def _call_here(self, items: list, function, accumulator, started: float):
        """``__call__`` for file metadata read in this process (``_metadata_here``): the
        same task (retries, error messages naming the file), one thread per file, and the
        same report, its runs on the "client" pool."""
        from concurrent.futures import ThreadPoolExecutor

        task = _Task(function, self.compression, {CLIENT_POOL: "cpu"})
        units = [expected_units(item) for item in items]

        def read(i: int) -> _Partial:
            return task._outcome(items[i], (i,), CLIENT_POOL, (units[i],), in_client=True)

        try:
            if len(items) == 1:  # a thread costs more than the read (docs/executor.md#reading)
                parts = [read(0)]
            else:
                with ThreadPoolExecutor(len(items), thread_name_prefix="gpuexec-metadata") as th:
                    parts = list(th.map(read, range(len(items))))
        except Exception as err:
            explained = explain(err, items)
            self._shared.record(failed_call(items, None, [], time.perf_counter() - started,
                                            explained))
            if explained is err:  # (a ChunkError already, its cause kept)
                raise
            raise explained from err
        result = _merge(parts, self.compression)
        call, mismatch = account(
            items, CallRecord(pool_of=dict.fromkeys(range(len(items)), CLIENT_POOL)),
            [keys.item_label(item) for item in items], result, [],
            time.perf_counter() - started, None)
        return self._finish(call, mismatch, _unpack(result), accumulator, stacklevel=4)


# A keyword that moved out of GPUExecutor names its new home (MOVED, REMOVED) instead of
# the dataclass's bare "unexpected keyword argument".
_dataclass_init = GPUExecutor.__init__


@functools.wraps(_dataclass_init)
def _init(self, *args, **kwargs):
    _refuse_moved(kwargs)
    _dataclass_init(self, *args, **kwargs)


GPUExecutor.__init__ = _init
