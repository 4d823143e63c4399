"""GPUExecutor: a coffea executor on Dask that loses no chunk and counts none twice.

    from coffea.processor import Runner
    from gpuexec import GPUExecutor

    with GPUExecutor() as executor:                     # embedded local cluster
        out = Runner(executor=executor, chunksize=100_000)(fileset, processor, treename="Events")
        print(executor.report)

coffea's ``Runner`` copies the executor (``copy(**kw)``) and calls the copy once to read
the files' metadata and once to process the chunks; each call is
``executor(items, function, accumulator) -> (accumulator, 0)``.

One call: every item (a coffea ``WorkItem``: file, tree, entry range) becomes one Dask
task whose key names the file and range (``gpuexec.scheduler.keys``), placed on a worker
pool and restricted to that pool's resources (``{"CPU": 1}``; GPU pools arrive in part
2); it runs the function under the pool's kernel backend (``gk.using("cpu")``) and
returns the output with the entries it processed. Outputs are merged in a tree on the
cluster (``treereduction`` per merge, like coffea's DaskExecutor). Then:

- entries: the per-chunk counts carried up the tree must equal the entries of the
  chunks submitted and not skipped, each chunk exactly once, or ``EntriesMismatch``;
- failures: a chunk that raises fails the call with a ``ChunkError`` naming its file
  and entry range (the original exception is its ``__cause__``); with
  ``Runner(skipbadfiles=...)`` the chunk (or file, when its metadata cannot be read) is
  skipped instead, listed in ``executor.report.skipped`` and, with ``savemetrics``, in
  ``metrics["skipped"]``, and a ``SkippedChunksWarning`` says so;
- a worker that dies mid-run: Dask re-runs its chunks elsewhere (``allowed_failures``
  worker deaths per task), and ``executor.report`` lists them.

coffea's ``Runner`` retries and skips inside ``Runner.automatic_retries``, which only
hands a warning back for a skipped file; the executor recognises that wrapper
(``partial(Runner.automatic_retries, retries, skipbadfiles, work)``) and applies the
same retries and skip rule itself, so that it knows what was skipped and why
(tests/test_executor.py::test_runner_wraps_work_in_automatic_retries guards the shape).
"""

from __future__ import annotations

import functools
import logging
import pickle
import time
import warnings
from dataclasses import dataclass, fields
from typing import Any

from coffea.processor import accumulate
from coffea.processor.executor import ExecutorBase, FileMeta, Runner, WorkItem

from gpuexec.scheduler import keys
from gpuexec.scheduler.report import (
    CallReport,
    ChunkRun,
    EntriesMismatch,
    Rerun,
    RunReport,
    SkippedChunk,
    SkippedChunksWarning,
    check_entries,
    skipped_warning,
)

__all__ = ["ChunkError", "GPUExecutor"]

logger = logging.getLogger(__name__)


class ChunkError(RuntimeError):
    """A chunk failed; the message names its file and entry range. The exception chain
    that caused it (``__cause__`` and further) survives the trip from the worker."""

    def __init__(self, message: str, causes: tuple = ()):
        super().__init__(message)
        self.causes = tuple(causes)
        link = self
        for cause in self.causes:
            link.__cause__ = cause
            link = cause

    def __reduce__(self):
        return (type(self), (self.args[0], _picklable_chain(self.causes)))


def _chain(exc: BaseException) -> list[BaseException]:
    out = []
    while isinstance(exc, BaseException) and exc not in out:
        out.append(exc)
        exc = exc.__cause__
    return out


def _picklable_chain(causes) -> tuple:
    kept = []
    for cause in causes:
        try:
            pickle.dumps(cause)
        except Exception:
            cause = RuntimeError(f"{type(cause).__name__}: {cause}")
        kept.append(cause)
    return tuple(kept)


def describe_item(item) -> str:
    if isinstance(item, WorkItem):
        return (f"file {item.filename} (dataset {item.dataset!r}, tree {item.treename!r}), "
                f"entries [{item.entrystart}, {item.entrystop})")
    if isinstance(item, FileMeta):
        return (f"file {item.filename} (dataset {item.dataset!r}, tree {item.treename!r}), "
                "reading its metadata")
    return repr(item)


def _units(item, out) -> int:
    """Entries a chunk processed: the processor's own count where coffea reports it
    (``savemetrics``), else the chunk's range; one per file or other item."""
    if isinstance(item, WorkItem):
        metrics = out.get("metrics") if isinstance(out, dict) else None
        if isinstance(metrics, dict) and "entries" in metrics:
            return int(metrics["entries"])
        return len(item)
    return 1


def _expected_units(item) -> int:
    return len(item) if isinstance(item, WorkItem) else 1


def _stage(item) -> tuple[str, str]:
    if isinstance(item, WorkItem):
        return "processing", "entries"
    if isinstance(item, FileMeta):
        return "preprocessing", "files"
    return "items", "items"


# ----------------------------------------------------------------------------- tasks
@dataclass(slots=True)
class _Partial:
    """A task's output on its way up the reduction tree."""

    value: Any  # accumulated output; lz4-pickled bytes when ``packed``
    packed: bool
    counts: dict  # chunk index -> units processed
    doubled: list  # chunk indices merged more than once
    skipped: list  # (chunk index, exception text)
    runs: list  # (chunk index, worker, units, seconds)


def _pack(value, compression):
    if value is None or compression is None:
        return value, False
    import lz4.frame

    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return lz4.frame.compress(data, compression_level=compression), True


def _unpack(part: _Partial):
    if not part.packed:
        return part.value
    import lz4.frame

    return pickle.loads(lz4.frame.decompress(part.value))


class _Skip(Exception):
    pass


def _unwrap_runner_retries(function):
    """(work function, retries, exceptions to skip) when ``function`` is coffea Runner's
    ``partial(automatic_retries, retries, skipbadfiles, work)``; else (function, None, ())."""
    if (isinstance(function, functools.partial)
            and function.func is Runner.automatic_retries
            and len(function.args) == 3
            and set(function.keywords) <= {"use_result_type"}
            and not function.keywords.get("use_result_type", False)):
        retries, skipbadfiles, work = function.args
        skip_on = (OSError,) if skipbadfiles is True else tuple(skipbadfiles or ())
        return work, int(retries), skip_on
    return function, None, ()


class _Task:
    """What a worker runs for each item (one object shared by all tasks of a call)."""

    def __init__(self, function, compression, backends: dict[str, str]):
        self.function, self.retries, self.skip_on = _unwrap_runner_retries(function)
        self.compression = compression
        self.backends = backends  # pool -> kernel backend its tasks run under

    def _call(self, item):
        if self.retries is None:
            return self.function(item)
        for attempt in range(self.retries + 1):
            try:
                return self.function(item)
            except Exception as err:
                if attempt < self.retries:
                    logger.warning("gpuexec: %s: attempt %d of %d failed (%s: %s)",
                                   describe_item(item), attempt + 1, self.retries + 1,
                                   type(err).__name__, err)
                    continue
                if self.skip_on and any(isinstance(c, self.skip_on) for c in _chain(err)):
                    raise _Skip(f"{type(err).__name__}: {err}") from err
                raise

    def __call__(self, item, index: int, pool: str) -> _Partial:
        import gpuexec.kernels as gk
        from gpuexec.scheduler.plugins import pin_task_thread

        pin_task_thread()
        start = time.perf_counter()
        try:
            with gk.using(self.backends[pool]):
                out = self._call(item)
        except _Skip as skip:
            return _Partial(None, False, {}, [], [(index, str(skip))], [])
        except Exception as err:
            raise ChunkError(f"{describe_item(item)} failed on worker {_worker_name()}: "
                             f"{type(err).__name__}: {err}", _chain(err)) from err
        seconds = time.perf_counter() - start
        if out is None:  # the function swallowed its error (e.g. coffea's own skip)
            return _Partial(None, False, {}, [], [(index, "no output (the work function returned "
                                                   "None; its warning is in the worker log)")], [])
        units = _units(item, out)
        value, packed = _pack(out, self.compression)
        return _Partial(value, packed, {index: units}, [], [],
                        [(index, _worker_name(), units, seconds)])


def _worker_name() -> str:
    from distributed import get_worker

    try:
        return str(get_worker().name)
    except ValueError:
        return "client"


def _run_item(item, index: int, pool: str, task: _Task) -> _Partial:
    return task(item, index, pool)


def _merge(parts: list[_Partial], compression) -> _Partial:
    counts, doubled, skipped, runs, outputs = {}, [], [], [], []
    for part in parts:
        for index, units in part.counts.items():
            if index in counts:
                doubled.append(index)
                counts[index] += units
            else:
                counts[index] = units
        doubled += part.doubled
        skipped += part.skipped
        runs += part.runs
        if part.value is not None:
            outputs.append(part)
    if len(outputs) == 1:
        return _Partial(outputs[0].value, outputs[0].packed, counts, doubled, skipped, runs)
    value, packed = _pack(accumulate(_unpack(p) for p in outputs), compression)
    return _Partial(value, packed, counts, doubled, skipped, runs)


# -------------------------------------------------------------------------- executor
class _SharedState:
    """What every copy of one executor shares: the report of the last run."""

    def __init__(self):
        self.report: RunReport | None = None

    def record(self, call: CallReport) -> RunReport:
        self.report = (self.report or RunReport()).add(call)
        return self.report


@dataclass
class GPUExecutor(ExecutorBase):
    """coffea executor on Dask (see the module docstring).

    Parameters (besides coffea's ``status``, ``unit``, ``desc``, ``compression``):
        client: an existing ``distributed.Client``; its workers must declare the
            resource ``CPU`` (e.g. ``LocalCluster(resources={"CPU": threads})``).
            None (default): gpuexec's embedded local cluster, started on first use,
            shared by all executors with the same settings, closed by ``close()``, the
            ``with`` block or at interpreter exit.
        cpu_workers: CPU worker processes of the embedded cluster (default: one per
            ``threads_per_worker`` cores this process may use).
        threads_per_worker: threads of each embedded worker; the kernel engine's numba
            thread count is set to the same number.
        memory_limit: per embedded worker ("auto": a share of the machine's memory).
        dashboard_address: of the embedded cluster (localhost; a busy port is replaced
            by a free one).
        treereduction: outputs merged per reduction task.
        retries: extra attempts of a chunk that raises, as in coffea's executors (inside
            the task for ``Runner``'s work, by Dask for other functions); a worker's
            death is not an attempt (see ``allowed_failures``).
        allowed_failures: worker deaths a task may witness before the run fails
            (embedded cluster; for a client, the cluster's own setting applies).
        priority: Dask priority of the run's tasks.
    """

    client: Any = None
    cpu_workers: int | None = None
    threads_per_worker: int = 1
    memory_limit: str | int | float = "auto"
    dashboard_address: str = "127.0.0.1:8787"
    treereduction: int = 20
    retries: int = 3
    allowed_failures: int = 3
    priority: int = 0

    def __post_init__(self):
        if self.treereduction < 2:
            raise ValueError(f"treereduction must be >= 2, got {self.treereduction}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")
        if self.threads_per_worker < 1:
            raise ValueError(f"threads_per_worker must be >= 1, got {self.threads_per_worker}")
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
        chunks re-run after a worker died, where each chunk ran."""
        return self._shared.report

    # ----------------------------------------------------------------- the cluster
    def cluster_spec(self):
        """The embedded cluster this executor uses when no client is given."""
        from gpuexec.scheduler.cluster import ClusterSpec

        return ClusterSpec.local(self.cpu_workers, self.threads_per_worker, self.memory_limit,
                                 self.dashboard_address, self.allowed_failures)

    def _pools(self) -> dict:
        from gpuexec.scheduler.cluster import WorkerPool

        if self.client is None:
            return {p.name: p for p in self.cluster_spec().pools if p.workers}
        return {"cpu": WorkerPool.cpu(0, self.threads_per_worker)}

    def _connect(self):
        from gpuexec.scheduler import cluster, plugins

        if self.client is None:
            client = cluster.shared_client(self.cluster_spec())
        else:
            client = self.client
            _check_resources(client, self._pools())
        ledger = plugins.install(client)
        return client, ledger

    def close(self) -> None:
        """Close the embedded cluster (shared with every executor of the same settings);
        a client passed in is left to its owner."""
        if self.client is None:
            from gpuexec.scheduler.cluster import close_shared

            close_shared(self.cluster_spec())

    def __enter__(self) -> "GPUExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _place(self, items: list, pools: dict) -> list[str]:
        """The pool of each item. Part 1 has a CPU pool only; part 2 puts the
        size-aware placement policy (gpuexec.scheduler) here."""
        return ["cpu"] * len(items)

    # ---------------------------------------------------------------------- a call
    def __call__(self, items, function, accumulator):
        items = list(items)
        if not items:
            return accumulator, 0
        started = time.perf_counter()
        client, ledger = self._connect()
        pools = self._pools()
        placement = self._place(items, pools)
        run = keys.new_run_token()
        labels = [keys.item_label(item) for item in items]

        # The task callable travels inside the graph: pickled once per message, so once
        # per batch of tasks sent to a worker. (As a future it would be a dependency, and
        # Dask places tasks where their dependencies are: all on one worker.)
        task = _Task(function, self.compression, {name: p.backend for name, p in pools.items()})
        futures = [None] * len(items)
        for name, pool in pools.items():
            indices = [i for i, p in enumerate(placement) if p == name]
            if not indices:
                continue
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "Large object of size")
                submitted = client.map(
                    _run_item, [items[i] for i in indices], indices, [name] * len(indices),
                    task=task,
                    key=[keys.chunk_key(name, run, i, labels[i]) for i in indices],
                    resources=pool.task_resources_dict(), pure=False, priority=self.priority,
                    retries=self.retries if task.retries is None else 0,
                )
            for i, future in zip(indices, submitted):
                futures[i] = future
        final = self._reduce_tree(client, futures, run, pools["cpu"].task_resources_dict())
        del futures  # the client holds the final merge only: workers free merged outputs
        try:
            if self.status:
                self._show_progress(client, final)
            result: _Partial = final.result()
        except BaseException as err:
            client.cancel([final])
            explained = self._explain(err, items)
            if explained is err:
                raise
            raise explained from err
        reruns = self._reruns(client, run) if ledger else []
        value = _unpack(result)
        call, mismatch = self._account(items, placement, labels, result, reruns,
                                       time.perf_counter() - started)
        report = self._shared.record(call)
        if mismatch is not None:
            raise mismatch
        if call.skipped:
            warnings.warn(skipped_warning(call.skipped), SkippedChunksWarning, stacklevel=2)
        if call.stage == "processing" and isinstance(value, dict) \
                and isinstance(value.get("metrics"), dict):
            value["metrics"]["skipped"] = [s.as_dict() for s in report.skipped]
            value["metrics"]["chunks_per_pool"] = call.pools
        return accumulate([value], accumulator), 0

    def _reduce_tree(self, client, work: list, run: str, resources: dict):
        level = 0
        while len(work) > 1:
            groups = [work[i:i + self.treereduction]
                      for i in range(0, len(work), self.treereduction)]
            work = client.map(
                _merge, groups, compression=self.compression,
                key=[keys.merge_key(run, level, j) for j in range(len(groups))],
                resources=resources, pure=False, priority=self.priority,
            )
            level += 1
        return work[0]

    def _show_progress(self, client, final) -> None:
        from gpuexec.scheduler.progress import PoolProgress

        try:
            PoolProgress(final, client, self.desc, self.unit).run()
        except Exception as err:  # the bar is a view: a broken one must not fail the run
            warnings.warn(f"gpuexec progress bar failed: {err!r}", RuntimeWarning, stacklevel=3)

    def _explain(self, err: BaseException, items: list) -> BaseException:
        """The error to raise for a failed call, naming the chunk where Dask knows it."""
        from distributed.scheduler import KilledWorker

        if isinstance(err, ChunkError) or not isinstance(err, Exception):
            return err
        if isinstance(err, KilledWorker):
            parsed = keys.parse(err.task)
            what = (describe_item(items[parsed["index"]])
                    if parsed and parsed["kind"] == keys.CHUNK else str(err.task))
            return ChunkError(f"{what}: killed {err.allowed_failures + 1} workers while running "
                              "(a crash or out-of-memory?)", (err,))
        return ChunkError(f"gpuexec run failed: {type(err).__name__}: {err}", (err,))

    def _reruns(self, client, run: str) -> list[Rerun]:
        from gpuexec.scheduler.plugins import ledger_pop

        out = []
        for key, worker, what in client.run_on_scheduler(ledger_pop, run):
            parsed = keys.parse(key)
            out.append(Rerun(parsed["label"] if parsed else str(key), worker, what))
        return out

    def _account(self, items, placement, labels, result: _Partial, reruns, seconds):
        """The call's report, and the EntriesMismatch to raise (None if all is well)."""
        stage, unit = _stage(items[0])
        skipped = {index: text for index, text in result.skipped}
        mismatch = None
        try:
            processed = check_entries(
                {i: _expected_units(item) for i, item in enumerate(items)},
                result.counts, result.doubled, skipped,
                lambda i: f"chunk #{i} ({describe_item(items[i])})", unit)
        except EntriesMismatch as err:
            processed, mismatch = sum(result.counts.values()), err
        call = CallReport(
            stage=stage, unit=unit, chunks=len(items),
            expected=sum(_expected_units(item) for i, item in enumerate(items) if i not in skipped),
            processed=processed,
            skipped=[SkippedChunk.of(items[i], stage, text) for i, text in sorted(skipped.items())],
            reruns=reruns,
            runs=[ChunkRun(labels[i], placement[i], worker, units, secs)
                  for i, worker, units, secs in sorted(result.runs)],
            seconds=seconds,
            files=frozenset((getattr(item, "dataset", None), getattr(item, "filename", None))
                            for item in items),
        )
        return call, mismatch


def _check_resources(client, pools: dict) -> None:
    """Tasks request their pool's resources: a cluster without a worker declaring them
    would queue them forever, so say so up front."""
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:  # distributed before 2025: always all workers
        info = client.scheduler_info()
    workers = info.get("workers", {})
    for name, pool in pools.items():
        need = pool.task_resources_dict()
        if not any(all(w.get("resources", {}).get(r, 0) >= n for r, n in need.items())
                   for w in workers.values()):
            example = ", ".join(f"{r}={n:g}" for r, n in need.items())
            raise RuntimeError(
                f"no worker of the Dask cluster at {client.scheduler.address} declares the "
                f"resources {need} that gpuexec's {name} tasks request; start its workers with "
                f"resources (e.g. `dask worker --resources {example}` or "
                f"LocalCluster(resources={need})), or use GPUExecutor() without a client")
