"""What a worker runs for each chunk: coffea's work function under the pool's kernel
backend, with Runner's retries and skip rule, its output packed with the chunk counts and
timings that travel up the reduction (docs/executor.md#faults)."""

from __future__ import annotations

import functools
import logging
import pickle
import time
from dataclasses import dataclass
from typing import Any

from coffea.processor.executor import FileMeta, Runner, WorkItem

from gpuexec import config, dashboard, gpu_cluster
from gpuexec.dashboard import feed
from gpuexec.executor.errors import (
    ChunkError,
    NotRootOrNoTree,
    chain,
    describe_item,
    origin,
    retryable,
    root_cause,
)
from gpuexec.executor.events import RUNS_TOPIC, TaskRun
from gpuexec.io import device_read as device_reading
from gpuexec.io import inflate as inflater
from gpuexec.io import kept_files
from gpuexec.io.staging import StagedProcessor, Timings, processor_token
from gpuexec.scheduler import cluster as planning
from gpuexec.scheduler.heap import freeze_once

logger = logging.getLogger("gpuexec.executor")

AUTO = planning.AUTO  # a pool backend chosen on each worker from its own device


def device_backend() -> str:
    """The kernel backend of this worker's GPU: its vendor's (cuda or hip)."""
    return planning.device_backend(gpu_cluster._visible_devices())


# ------------------------------------------------------------------ chunk units
def units(item, out) -> int:
    """Entries a chunk processed: the processor's own count where coffea reports it
    (``savemetrics``), else the chunk's range; one per file or other item."""
    if isinstance(item, WorkItem):
        metrics = out.get("metrics") if isinstance(out, dict) else None
        if isinstance(metrics, dict) and "entries" in metrics:
            return int(metrics["entries"])
        return len(item)
    return 1


def expected_units(item) -> int:
    return len(item) if isinstance(item, WorkItem) else 1


def stage(item) -> tuple[str, str]:
    """(stage, unit) of a call over items like ``item``."""
    if isinstance(item, WorkItem):
        return "processing", "entries"
    if isinstance(item, FileMeta):
        return "preprocessing", "files"
    return "items", "items"


def _split_units(indices, part_units, total: int) -> dict:
    """Units per original chunk of a (possibly merged) task: each part's own when the
    task's total is right; otherwise the difference lands on the first part, which the
    entry check then names."""
    counts = dict(zip(indices, part_units))
    counts[indices[0]] += total - sum(part_units)
    return counts


# ------------------------------------------------------------------ task outputs
@dataclass(slots=True)
class _Partial:
    """A task's output on its way up the reduction tree."""

    value: Any  # accumulated output; lz4-pickled bytes when ``packed``
    packed: bool
    counts: dict  # chunk index -> units processed
    doubled: list  # chunk indices merged more than once
    skipped: list  # (chunk index, exception text)
    runs: list  # TaskRun of each task

    @classmethod
    def empty(cls, skipped=()) -> "_Partial":
        """No output and no chunk counted (``skipped``: (chunk index, why) pairs)."""
        return cls(None, False, {}, [], list(skipped), [])


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


# ------------------------------------------------------------------ Runner's wrappers
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
        # True: coffea's OSError, and beyond coffea a file that is not ROOT or lacks the
        # tree (docs/executor.md#skipbadfiles)
        skip_on = (OSError, NotRootOrNoTree) if skipbadfiles is True else tuple(skipbadfiles or ())
        return work, int(retries), skip_on
    return function, None, ()


def _kept_open(work, kept: int):
    """Runner's work function ``work`` run by ``open_files.work_function`` with ``kept``
    files open per worker thread; ``work`` itself for 0 or any other function."""
    if kept and isinstance(work, functools.partial) and work.func is Runner._work_function:
        return functools.partial(kept_files.work_function, *work.args,
                                 **dict(work.keywords, kept=kept))
    return work


def _runner_processor(work):
    """The processor inside Runner's work function (``partial(Runner._work_function, ...,
    processor_instance=...)``), or None for any other function."""
    if (isinstance(work, functools.partial) and work.func is Runner._work_function
            and "processor_instance" in work.keywords):
        proc = kept_files.unpacked(work.keywords["processor_instance"])
        return proc if callable(proc) or hasattr(proc, "process") else None
    return None


# ------------------------------------------------------------------ the worker process
class _WorkerProcess:
    """Process-wide settings a worker applies once (a worker restarted by its nanny
    applies them again with its first task)."""

    inflate: str | None = None  # the inflate choice applied in this process

    @classmethod
    def setup(cls, choice: str, backend: str) -> None:
        """The inflate ``choice``, and awkward's kernels served by the engine where the
        worker's ``backend`` is a GPU's (``gpuexec.awkward.worker_setup``, once)."""
        if cls.inflate != choice:
            inflater.use(choice)
            cls.inflate = choice
        if backend != "cpu":
            import gpuexec.awkward

            gpuexec.awkward.worker_setup(backend)


def _worker_name() -> str:
    from distributed import get_worker

    try:
        return str(get_worker().name)
    except ValueError:
        return "client"


def _report_runs(runs: list | None) -> None:
    """Send a task's runs (None: it started) to the client as a worker event."""
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:  # not on a worker (a direct call)
        return
    worker.log_event(RUNS_TOPIC, {"key": worker.get_current_task(), "runs": runs,
                                  "worker": worker.address})


class _Task:
    """What a worker runs for each task (one object shared by all tasks of a call).

    On a GPU pool a task makes one attempt, under the pool's backend with its events
    staged on the device; a failure there (out of device memory, a driver error, a
    worker crash) is retried by the executor on a CPU worker, where the retries and the
    skip rule of coffea's ``Runner`` apply."""

    def __init__(self, function, compression, backends: dict[str, str], gpu_pools=(),
                 report_runs: bool = False, report_starts: bool = False,
                 reading: config.ReadingSettings | None = None, retries: int = 0):
        # retries: extra attempts where ``function`` is not Runner's (which brings its own)
        self.function, runner_retries, self.skip_on = _unwrap_runner_retries(function)
        self.retries = retries if runner_retries is None else runner_retries
        reading = reading or config.ReadingSettings.read()
        # what every pool runs: Runner's work function on files kept open (open_files)
        self.base = _kept_open(self.function, reading.open_files)
        # nvCOMP settings, set in the worker on every task (it keeps the last call's otherwise)
        self.reading = {"NVCOMP_MIN_STREAMS": reading.nvcomp_min_streams,
                        "NVCOMP_SLOTS": reading.nvcomp_slots,
                        "NVCOMP_WAIT": reading.nvcomp_wait}
        # names the processor on the workers, whose direct reads learn its columns
        self.read_ahead = processor_token(self.function) if reading.read_ahead else None
        self.compression = compression
        self.inflate = reading.inflate  # gpuexec.io.inflate choice, applied in the worker
        self.read_on_device = reading.read_on_device  # GPU pools: gpuexec.io.device_read
        # pool -> kernel backend its tasks run under; AUTO: the worker's device's
        self.backends = backends
        self.gpu_pools = frozenset(gpu_pools)
        self.report_runs = report_runs  # send each task's runs to the client as it ends
        self.report_starts = report_starts  # and when it starts (copies of stragglers)
        self.feed = dashboard.enabled()  # each task's end to the /gpuexec page

    def backend(self, pool: str) -> str:
        """The kernel backend of ``pool``'s tasks in this worker: AUTO resolves to the
        vendor of the worker's own device (cuda on NVIDIA, hip on AMD)."""
        name = self.backends[pool]
        return device_backend() if name == AUTO else name

    def _work(self, pool: str, timings: Timings):
        """The work function for ``pool``: Runner's, with the processor's events staged
        on the pool's device and their reading timed."""
        import gpuexec.kernels as gk

        ak_backend = "cpu"
        if pool in self.gpu_pools:
            ak_backend = getattr(gk.get_backend(self.backend(pool)), "ak_backend", "cpu")
        direct = self.read_on_device and ak_backend != "cpu"
        if not direct:
            # host columns: coffea's events unchanged (staging would only rebuild them)
            return self.base
        proc = _runner_processor(self.function)
        if proc is None:
            return self.base
        staged = StagedProcessor(proc, ak_backend, timings, direct, self.read_ahead)
        return functools.partial(self.base.func, *self.base.args,
                                 **dict(self.base.keywords, processor_instance=staged))

    def _call(self, item, pool: str, timings: Timings):
        work = self._work(pool, timings)
        if pool in self.gpu_pools:  # a failure is retried on a CPU worker (_Loop._failed)
            return work(item)
        for attempt in range(self.retries + 1):
            try:
                return work(item)
            except Exception as err:
                if attempt < self.retries and retryable(err):
                    logger.warning("gpuexec: %s: attempt %d of %d failed (%s, %s: %s)",
                                   describe_item(item), attempt + 1, self.retries + 1,
                                   retryable(err), type(err).__name__, err)
                    timings.read = timings.transfer = 0.0
                    continue
                if self.skip_on and any(isinstance(c, self.skip_on) for c in chain(err)):
                    raise _Skip(f"{type(err).__name__}: {err}") from err
                raise

    def __call__(self, item, indices: tuple, pool: str, part_units: tuple) -> _Partial:
        from gpuexec.scheduler.plugins import pin_task_thread

        pin_task_thread()
        if self.report_starts:
            _report_runs(None)  # started: the placement predicts its end from now
        runs: list = []  # what the end event says ran: nothing where the task failed
        try:
            part = self._outcome(item, indices, pool, part_units)
            runs = part.runs
            return part
        finally:
            # every end is reported, a failure's too: else its worker looks busy to the
            # next calls (docs/executor.md#faults)
            if self.report_runs:
                _report_runs(runs)
            if self.feed and runs:
                feed.send_task(pool, self.backend(pool), runs)

    def _outcome(self, item, indices: tuple, pool: str, part_units: tuple,
                 in_client: bool = False) -> _Partial:
        import gpuexec.kernels as gk
        from gpuexec.kernels.stats import AWKWARD_OUTCOMES, counting_awkward

        timings = Timings()
        start = time.perf_counter()
        try:
            backend = self.backend(pool)
            if not in_client:  # process-wide settings: the client's stay the user's
                _WorkerProcess.setup(self.inflate, backend)
                for name, value in self.reading.items():
                    setattr(device_reading, name, value)
            with gk.using(backend), counting_awkward() as tally:
                out = self._call(item, pool, timings)
        except _Skip as skip:
            return _Partial.empty((i, str(skip)) for i in indices)
        except Exception as err:
            where = ("in the client" if in_client
                     else f"on worker {_worker_name()} ({pool} pool)")
            # the root cause: coffea's wrapper repeats the WorkItem, raw file UUID included
            root = root_cause(err)
            raise ChunkError(f"{describe_item(item)} failed {where}: "
                             f"{type(root).__name__}: {root}{origin(err)}",
                             chain(err), retry=retryable(err)) from err
        seconds = time.perf_counter() - start
        if out is None:  # the function swallowed its error (e.g. coffea's own skip)
            return _Partial.empty((i, "no output (the work function returned None; its "
                                      "warning is in the worker log)") for i in indices)
        # imports and the first task are behind it: freeze what lives as long as the
        # process (docs/executor.md#pools)
        freeze_once()
        done = units(item, out)
        value, packed = _pack(out, self.compression)
        awkward = tuple(tally[outcome] for outcome in AWKWARD_OUTCOMES)
        runs = [TaskRun(tuple(indices), _worker_name(), done, seconds, timings.read,
                        timings.transfer, awkward)]
        return _Partial(value, packed, _split_units(indices, part_units, done), [], [], runs)


def _run_item(item, indices: tuple, pool: str, part_units: tuple, task: _Task) -> _Partial:
    return task(item, indices, pool, part_units)


def _timing_of(part: _Partial) -> list:
    """The small part of a task's output the client needs as it completes (placement
    feedback, progress); runs where the output is."""
    return part.runs
