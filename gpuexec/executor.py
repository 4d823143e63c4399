"""GPUExecutor: a coffea executor on Dask that loses no chunk and counts none twice.

    from coffea.processor import Runner
    from gpuexec import GPUExecutor

    with GPUExecutor() as executor:                     # a default GPUCluster
        out = Runner(executor=executor, chunksize=100_000)(fileset, processor, treename="Events")
        print(executor.report)

Settings: the executor's few keywords, ``GPUCluster``'s, and tuning in Dask's
configuration under ``gpuexec.*`` (docs/configuration.md).

coffea's ``Runner`` copies the executor (``copy(**kw)``) and calls the copy once to read
the files' metadata and once to process the chunks; each call is
``executor(items, function, accumulator) -> (accumulator, 0)``. On the embedded cluster
the metadata of up to ``METADATA_HERE`` files is read in this process, where a Dask round
trip would cost more than the read (``GPUExecutor._metadata_here``).

One call: every item (a coffea ``WorkItem``: file, tree, entry range) becomes one Dask
task whose key names the file and range (``gpuexec.scheduler.keys``; adjacent items of
one file may share a GPU task, ``gpuexec.placement.gpu-merge``), placed on a worker pool by
``gpuexec.scheduler.placement`` (a GPU pool for chunks above the crossover while it
finishes first, else CPU) and restricted to that pool's resources (``{"GPU": 1}`` or
``{"CPU": 1}``). It runs the function under the pool's kernel backend (``gk.using``; on
a GPU pool with the events staged on the device, ``gpuexec.io.staging``) and returns the
output with the entries it processed. Outputs are fetched into the calling process as
their tasks complete and merged there in chunk order (``merge_on="client"``, as coffea's
FuturesExecutor does), or merged in a tree of tasks on the cluster
(``merge_on="cluster"``, ``treereduction`` per merge, like coffea's DaskExecutor). Then:

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

import contextlib
import functools
import logging
import os
import pickle
import queue
import threading
import time
import warnings
from collections import deque
from dataclasses import dataclass, field, fields, replace
from typing import Any

from coffea.processor import accumulate
from coffea.processor.executor import ExecutorBase, FileMeta, Runner, WorkItem

from gpuexec import dashboard
from gpuexec.io import device_read as device_reading
from gpuexec.io import inflate as inflater
from gpuexec.io import kept_files
from gpuexec.io.staging import StagedProcessor, Timings, processor_token
from gpuexec import config
from gpuexec import gpu_cluster
from gpuexec.dashboard import feed
from gpuexec.gpu_cluster import GPUCluster
from gpuexec.scheduler import keys
from gpuexec.scheduler.cluster import backend_of
from gpuexec.scheduler.heap import freeze_once
from gpuexec.scheduler.placement import BACKUP_TICK, straggler_end
from gpuexec.scheduler.report import (
    BackupCopy,
    CallReport,
    ChunkRun,
    EntriesMismatch,
    Fallback,
    Rerun,
    RunReport,
    SkippedChunk,
    SkippedChunksWarning,
    check_entries,
    skipped_warning,
)

__all__ = ["ChunkError", "GPUCluster", "GPUExecutor"]

logger = logging.getLogger(__name__)


def _root_cause(err: BaseException) -> BaseException:
    """The innermost exception of a chain (what actually went wrong on the worker)."""
    seen = set()
    while id(err) not in seen:
        seen.add(id(err))
        nxt = err.__cause__ or err.__context__
        if nxt is None:
            break
        err = nxt
    return err


def _reason(err: BaseException) -> str:
    """One line for a fallback: the root cause, then the wrapper that names file and
    entry range."""
    root = _root_cause(err)
    reason = f"{type(root).__name__}: {root}".splitlines()[0][:200]
    if root is not err:
        reason += f" ({type(err).__name__}: {err})".splitlines()[0][:200]
    return reason


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


class MergeError(RuntimeError):
    """Merging chunk outputs failed on a worker (e.g. outputs that cannot be added);
    ``indices``: the chunks whose outputs were being merged (the executor names them)."""

    def __init__(self, message: str, indices=()):
        super().__init__(message)
        self.indices = tuple(indices)

    def __reduce__(self):
        return (type(self), (self.args[0], self.indices))


def _chain(exc: BaseException) -> list[BaseException]:
    out = []
    while isinstance(exc, BaseException) and exc not in out:
        out.append(exc)
        exc = exc.__cause__
    return out


def _origin(err: BaseException) -> str:
    """Where the innermost cause was raised, and the last frame of the user's code on
    the way (tracebacks do not survive pickling; the message does)."""
    import traceback

    frames = traceback.extract_tb(_root_cause(err).__traceback__)
    if not frames:
        return ""

    def here(frame):
        return f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}"

    text = f" [raised at {here(frames[-1])}"
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    own = [f for f in frames if "site-packages" not in f.filename
           and not os.path.abspath(f.filename).startswith(package)]
    if own and own[-1] is not frames[-1]:
        text += f", from {here(own[-1])}"
    return text + "]"


def _picklable_chain(causes) -> tuple:
    kept = []
    for cause in causes:
        try:
            pickle.dumps(cause)
        except Exception:
            cause = RuntimeError(f"{type(cause).__name__}: {cause}")
        kept.append(cause)
    return tuple(kept)


# OSErrors that may pass on a second try (a network or storage hiccup); a missing or
# unreadable file, or a file that is not ROOT, fails the same way every time
PASSING_OS_ERRORS = (TimeoutError, ConnectionError, InterruptedError, BlockingIOError)
DEVICE_ERROR_MODULES = ("cupy", "cupy_backends", "cuda", "hip", "gpuexec.kernels.gpu")


def retryable(err: BaseException) -> str | None:
    """Why another attempt of a chunk that raised ``err`` may succeed: a device fault
    (CuPy/CUDA/HIP error, out of memory) or an I/O error that may pass; None for any
    other exception, such as one of the user's processor, which surfaces at once."""
    for cause in _chain(err):
        if isinstance(cause, MemoryError):
            return "out of memory"
        if type(cause).__module__.split(".")[0] in DEVICE_ERROR_MODULES or \
                type(cause).__module__.startswith(DEVICE_ERROR_MODULES):
            return "device fault"
        if isinstance(cause, PASSING_OS_ERRORS):
            return "I/O error that may pass"
    return None


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
    runs: list  # (chunk indices of the task, worker, units, seconds, read s, transfer s)

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


def _nothing_left(report: RunReport) -> None:
    """Fail a run whose every file or chunk was skipped (beyond coffea, which returns an
    empty output: docs/executor.md#skipbadfiles)."""
    raise ChunkError(f"gpuexec: no file yielded events; all {len(report.skipped)} file(s) or "
                     "chunk(s) were skipped (skipbadfiles):\n" + skipped_warning(report.skipped))


class _NotRootOrNoTreeMeta(type):
    def __instancecheck__(cls, err) -> bool:
        import uproot

        return (isinstance(err, uproot.KeyInFileError)
                or (isinstance(err, ValueError) and "not a ROOT file" in str(err)))


class NotRootOrNoTree(metaclass=_NotRootOrNoTreeMeta):
    """Matches (``isinstance``) uproot's errors for a file that is not ROOT or lacks the
    requested tree."""


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


class _Task:
    """What a worker runs for each task (one object shared by all tasks of a call).

    On a GPU pool a task makes one attempt, under the pool's backend with its events
    staged on the device; a failure there (out of device memory, a driver error, a
    worker crash) is retried by the executor on a CPU worker, where the retries and the
    skip rule of coffea's ``Runner`` apply."""

    def __init__(self, function, compression, backends: dict[str, str], gpu_pools=(),
                 report_runs: bool = False, report_starts: bool = False,
                 reading: config.ReadingSettings | None = None):
        self.function, self.retries, self.skip_on = _unwrap_runner_retries(function)
        reading = reading or config.ReadingSettings.read()
        # what every pool runs: Runner's work function on files kept open (open_files)
        self.base = _kept_open(self.function, reading.open_files)
        # device_reading's nvCOMP settings, set in the worker on every task (a worker keeps
        # the last call's otherwise)
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
        self.generic_retries = 0  # attempts more of a function that is not Runner's

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
            # host columns: the processor runs on coffea's events unchanged (staging on the
            # host only adds a rebuild of the events; its reads are then not timed apart),
            # and coffea unpickles it itself
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
        retries = self.retries if self.retries is not None else self.generic_retries
        for attempt in range(retries + 1):
            try:
                return work(item)
            except Exception as err:
                if attempt < retries and retryable(err):
                    logger.warning("gpuexec: %s: attempt %d of %d failed (%s, %s: %s)",
                                   describe_item(item), attempt + 1, retries + 1,
                                   retryable(err), type(err).__name__, err)
                    timings.read = timings.transfer = 0.0
                    continue
                if self.skip_on and any(isinstance(c, self.skip_on) for c in _chain(err)):
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
            # every end is reported, a failure's too: a cancelled copy that failed would
            # otherwise look busy to the next calls on its worker (_route_around_busy)
            # until its record is forgotten
            if self.report_runs:
                _report_runs(runs)
            if self.feed and runs:
                feed.send_task(pool, self.backend(pool), runs)

    def _outcome(self, item, indices: tuple, pool: str, part_units: tuple,
                 in_client: bool = False) -> _Partial:
        import gpuexec.kernels as gk

        timings = Timings()
        start = time.perf_counter()
        try:
            if not in_client:  # process-wide settings: the client's stay the user's
                _use_inflate(self.inflate)
                for name, value in self.reading.items():
                    setattr(device_reading, name, value)
            with gk.using(self.backend(pool)):
                out = self._call(item, pool, timings)
        except _Skip as skip:
            return _Partial.empty((i, str(skip)) for i in indices)
        except Exception as err:
            where = ("in the client" if in_client
                     else f"on worker {_worker_name()} ({pool} pool)")
            raise ChunkError(f"{describe_item(item)} failed {where}: "
                             f"{type(err).__name__}: {err}{_origin(err)}",
                             _chain(err)) from err
        seconds = time.perf_counter() - start
        if out is None:  # the function swallowed its error (e.g. coffea's own skip)
            return _Partial.empty((i, "no output (the work function returned None; its "
                                      "warning is in the worker log)") for i in indices)
        # the worker's imports and first task are behind it: what is alive now lives as
        # long as the process (scheduler/heap.py: full collections 100 ms -> 0.3 ms)
        freeze_once()
        units = _units(item, out)
        value, packed = _pack(out, self.compression)
        runs = [(tuple(indices), _worker_name(), units, seconds, timings.read, timings.transfer)]
        return _Partial(value, packed, _split_units(indices, part_units, units), [], [], runs)


AUTO = "auto"  # a pool backend chosen on each worker from its own device (device_backend)


def device_backend() -> str:
    """The kernel backend of this worker's GPU: its vendor's (cuda or hip)."""
    devices = gpu_cluster._visible_devices()
    if not devices:
        raise RuntimeError("this worker declares the GPU resource but sees no GPU "
                           "(CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES?)")
    return backend_of(devices[0].vendor)


_inflate_in_use: str | None = None  # the choice applied in this worker process


def _use_inflate(choice: str) -> None:
    """Apply the call's inflate choice once per worker process (a worker restarted by its
    nanny applies it again with its first task)."""
    global _inflate_in_use
    if _inflate_in_use != choice:
        inflater.use(choice)
        _inflate_in_use = choice


def calibrate_on_worker(gpu: bool):
    """On a GPU worker: its cached calibration, measured where there is none, in the
    worker's own ``gpuexec.calibration-dir``."""
    from gpuexec.scheduler.calibration import get_calibration

    return get_calibration(directory=config.calibration_dir(), gpu=gpu)


def _split_units(indices, part_units, units: int) -> dict:
    """Units per original chunk of a (possibly merged) task: each part's own when the
    task's total is right; otherwise the difference lands on the first part, which the
    entry check then names."""
    counts = dict(zip(indices, part_units))
    counts[indices[0]] += units - sum(part_units)
    return counts


def _worker_name() -> str:
    from distributed import get_worker

    try:
        return str(get_worker().name)
    except ValueError:
        return "client"


def _run_item(item, indices: tuple, pool: str, part_units: tuple, task: _Task) -> _Partial:
    return task(item, indices, pool, part_units)


def _timing_of(part: _Partial) -> list:
    """The small part of a task's output the client needs as it completes (placement
    feedback, progress); runs where the output is."""
    return part.runs


# A task's runs reach the client as a worker event on this topic, ahead of the task's own
# completion (the worker and the scheduler send both down the same ordered streams), so the
# placement policy learns each task's time without a task and a fetch per chunk. A task
# also says when it starts (runs None): the policy predicts when tasks in flight end.
RUNS_TOPIC = "gpuexec-runs"
_reported_runs: dict = {}  # task key -> runs, filled by the client's event handler
_reported_starts: dict = {}  # run token -> SimpleQueue of (task key, time.monotonic())
_watching: set = set()  # run tokens of this process's runs in progress (other clients' runs
#                         on a shared cluster send events on the same topic)


@dataclass(frozen=True)
class _StillRunning:
    """A task cancelled while it ran (the copy that lost): Dask cannot stop it, so its
    worker stays busy until it ends, and the next call on that cluster counts the worker
    busy (``_Loop._route_around_busy``) until the task's end event arrives
    (``_store_runs``). Without it, the next call's tasks queued behind the cancelled one
    (docs/executor.md)."""

    scheduler: str  # the cluster's scheduler address
    worker: str  # the worker's address
    pool: str
    started: float  # time.monotonic() of the start event's arrival
    seconds: float  # the placement's prediction of the whole task


_still_running: dict[str, _StillRunning] = {}  # task key -> its worker, until it ends
# what a task of a call without placement (file metadata) is guessed to take: a worker
# busy longer than this is avoided
UNPLACED_TASK_SECONDS = 0.1
# a record older than this is dropped (its end event will not come: its cluster closed)
STILL_RUNNING_FORGOTTEN = 600.0


def _still_running_at(address: str) -> dict:
    """The records of cancelled copies still running on the cluster of scheduler
    ``address`` (task key -> _StillRunning); records older than
    ``STILL_RUNNING_FORGOTTEN`` are dropped on the way (their cluster closed)."""
    now = time.monotonic()
    mine = {}
    for key, entry in list(_still_running.items()):
        if now - entry.started > STILL_RUNNING_FORGOTTEN:
            _still_running.pop(key, None)
        elif entry.scheduler == address:
            mine[key] = entry
    return mine


def _report_runs(runs: list | None) -> None:
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:  # not on a worker (a direct call)
        return
    worker.log_event(RUNS_TOPIC, {"key": worker.get_current_task(), "runs": runs,
                                  "worker": worker.address})


def _store_runs(event) -> None:
    _timestamp, msg = event
    key = str(msg["key"])
    for run in list(_watching):
        if run in key:
            if msg["runs"] is None:
                starts = _reported_starts.get(run)
                if starts is not None:
                    starts.put((key, time.monotonic(), msg.get("worker")))
            else:
                _reported_runs[key] = msg["runs"]
            break
    if msg["runs"] is not None:  # (after storing: see _Loop._leave_still_running)
        _still_running.pop(key, None)


def _tally(total: _Partial, part: _Partial) -> None:
    """Add ``part``'s chunk counts, doubled and skipped chunks and runs into ``total``'s (a
    chunk counted twice is listed in ``doubled``); the values are the caller's."""
    for index, units in part.counts.items():
        if index in total.counts:
            total.doubled.append(index)
            total.counts[index] += units
        else:
            total.counts[index] = units
    total.doubled.extend(part.doubled)
    total.skipped.extend(part.skipped)
    total.runs.extend(part.runs)


def _merge(parts: list[_Partial], compression) -> _Partial:
    total = _Partial.empty()
    outputs = []
    for part in parts:
        _tally(total, part)
        if part.value is not None:
            outputs.append(part)
    if len(outputs) == 1:
        total.value, total.packed = outputs[0].value, outputs[0].packed
        return total
    try:
        total.value, total.packed = _pack(accumulate(_unpack(p) for p in outputs), compression)
    except Exception as err:
        raise MergeError(f"{type(err).__name__}: {err}", sorted(total.counts)) from err
    return total


#: file-metadata items (Runner's preprocessing) read in the client process instead of on
#: the embedded cluster, at most (``GPUExecutor._metadata_here``)
METADATA_HERE = 4
CLIENT_POOL = "client"  # the report's pool of what ran in the client process


@dataclass
class _RanHere:
    """What ``GPUExecutor._account`` reads of a call's ``_Loop``, for a call run in this
    process: every item on the client pool, and no Dask (no merged tasks, fallbacks,
    copies, phases or busy workers)."""

    pool_of: dict
    task_of: dict = field(default_factory=dict)
    fallbacks: list = field(default_factory=list)
    copies: dict = field(default_factory=dict)
    merge_notes: list = field(default_factory=list)
    phases: dict = field(default_factory=dict)
    busy_at_start: dict = field(default_factory=dict)
    left_running: list = field(default_factory=list)


# -------------------------------------------------------------------------- executor
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
        # NVCOMP_UNKNOWN; False until heard (``_ask_for_nvcomp``, ``_hear_nvcomp``)
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


REPORTS_KEPT = 20  # runs whose reports ``GPUExecutor.reports`` keeps
NVCOMP_UNKNOWN = "unknown"  # the GPU workers could not be asked
NOT_NVIDIA = "not-nvidia"  # the probe's answer on a GPU worker whose device is not NVIDIA's


def nvcomp_probe():
    """On a GPU worker: nvCOMP's version (None: not installed), or NOT_NVIDIA."""
    if device_backend() != "cuda":
        return NOT_NVIDIA
    return device_reading.nvcomp_version()
# scheduler address -> nvCOMP's version on its NVIDIA GPU workers (None: not installed)
_nvcomp_heard: dict[str, str | None] = {}


# the figures it quotes: docs/executor.md#nvcomp
NVCOMP_MISSING = ("gpuexec: nvCOMP is not installed where the NVIDIA GPU workers run: they "
                  "inflate every zlib basket on the host, and reading bounds them (ADL Q8 on "
                  "the H200: 0.263 s a run, 0.193 s with nvCOMP). pip install "
                  "'gpuexec[cuda]' installs it (nvidia-nvcomp-cu13)")


@dataclass
class _Submitted:
    """One task in flight: the chunks (indices) it runs, on which pool, and the workers
    it is bound to strictly (``_submit``; empty: not bound so)."""

    indices: tuple
    pool: str
    future: Any
    bound: tuple = ()


@dataclass
class _Fetched:
    """A completed task's output fetched into this process (``merge_on="client"``) for
    task ``key``: the output, or the error that fetching it raised."""

    key: str
    value: Any
    error: BaseException | None


#: threads that fetch completed tasks' outputs into the client (``merge_on="client"``);
#: each waits on Dask's event loop, which does the transfers
FETCH_THREADS = 4


def _gather_each(client, futures: list) -> list:
    """(value, None) or (None, error) per future: one gather for all of them, and where
    that fails one fetch each, so that an output that cannot be fetched fails alone."""
    try:
        return [(value, None) for value in client.gather(futures)]
    except Exception:
        outcomes = []
        for future in futures:
            try:
                outcomes.append((future.result(), None))
            except Exception as err:
                outcomes.append((None, err))
        return outcomes


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


@dataclass
class GPUExecutor(ExecutorBase):
    """coffea executor on Dask (see the module docstring).

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
        from gpuexec.scheduler.cluster import CPU, GPU, WorkerPool

        if self.cluster is not None:
            pools = {p.name: p for p in self.cluster_spec().pools if p.workers}
            if self.gpu_backend == "cpu":  # GPU tasks on the CPU engine, whatever the plan
                pools = {n: (replace(p, backend="cpu") if p.is_gpu else p)
                         for n, p in pools.items()}
            return pools
        pools = {"cpu": WorkerPool.cpu(0, 1)}
        if client is None:  # only the pools' task resources are asked for
            return pools
        # a user's cluster: pools of the workers declaring CPU and GPU, sized by them (the
        # window and the placement count their slots); each GPU worker picks its backend
        workers = _workers(client).values()
        for name, resource in (("cpu", CPU), ("gpu", GPU)):
            declaring = [w for w in workers if w.get("resources", {}).get(resource)]
            if not declaring:
                continue
            slots = max(1, int(min(w["resources"][resource] for w in declaring)))
            backend = "cpu" if name == "cpu" or self.gpu_backend == "cpu" else AUTO
            pools[name] = WorkerPool(name, len(declaring), slots, resources={resource: slots},
                                     task_resources={resource: 1}, backend=backend)
        return dict(sorted(pools.items(), key=lambda item: item[0] != "gpu"))

    def _connect(self):
        from gpuexec.scheduler import cluster as planning
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
            _check_resources(client, {"cpu": self._pools()["cpu"]})
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

    # -------------------------------------------------------------- placement
    def _calibration(self, client, pools: dict):
        """The calibration seeding the placement: measured where the GPU is (one task
        on a GPU worker, cached on disk there and here for this executor's copies)."""
        if self.calibration != "auto":
            return self.calibration
        if self._shared.calibration is None:
            gpu = next((p for p in pools.values() if p.is_gpu), None)
            if gpu is None:
                return None
            try:
                self._shared.calibration = client.submit(
                    calibrate_on_worker, gpu=gpu.backend != "cpu", pure=False,
                    resources=gpu.task_resources_dict(), key=f"calibration-{keys.new_run_token()}",
                ).result()
            except Exception as err:  # the policy works without it: observed times decide
                warnings.warn(f"gpuexec: calibration on the GPU worker failed ({err!r}); "
                              "placement starts from a neutral seed", RuntimeWarning,
                              stacklevel=3)
                self._shared.calibration = False
        return self._shared.calibration or None

    def _ask_for_nvcomp(self, client, pools: dict, read_on_device: bool = True):
        """A probe asking an NVIDIA GPU worker whether nvCOMP is installed there, submitted
        beside a processing call's chunks (None: nothing to ask). Asked once per cluster;
        an executor on a cluster already asked takes the answer. GPU workers without
        nvCOMP read with ``read_on_device`` but inflate on the host: a setup that looks
        like the shipped one and is slower."""
        gpu = next((p for p in pools.values()
                    if p.is_gpu and p.backend in ("cuda", AUTO)), None)
        if gpu is None or not read_on_device:
            return None
        address = client.scheduler.address
        if address in _nvcomp_heard:
            if _nvcomp_heard[address] is not NOT_NVIDIA:
                self._shared.nvcomp = _nvcomp_heard[address]
            return None
        try:
            return client.submit(nvcomp_probe, pure=False,
                                 resources=gpu.task_resources_dict(),
                                 key=f"nvcomp-probe-{keys.new_run_token()}")
        except Exception as err:  # noqa: BLE001 - advisory; the chunks report real faults
            logger.debug("gpuexec: asking a GPU worker for nvCOMP failed: %r", err)
            return None

    def _hear_nvcomp(self, client, probe) -> None:
        """The probe's answer after the call (submitted before the chunks, it has come
        unless no GPU worker was free all along: then it is cancelled and asked again
        next call, rather than holding up this one). Recorded per cluster and in
        ``nvcomp_on_gpu_workers``; warned of once where nvCOMP is missing. A probe that
        failed leaves the answer unknown."""
        if probe is None:
            return
        if not probe.done():
            probe.cancel()
            return
        try:
            version = probe.result()
        except Exception as err:  # noqa: BLE001 - advisory
            logger.debug("gpuexec: asking a GPU worker for nvCOMP failed: %r", err)
            version = NVCOMP_UNKNOWN
        _nvcomp_heard[client.scheduler.address] = version
        if version == NOT_NVIDIA:  # a worker whose own device is not NVIDIA's
            return
        self._shared.nvcomp = version
        if version is None:
            warnings.warn(NVCOMP_MISSING, RuntimeWarning, stacklevel=3)

    def _placement(self, client, pools: dict, tuning: config.PlacementSettings):
        from gpuexec.scheduler.placement import Placement

        return Placement.from_pools(pools.values(), self._calibration(client, pools),
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
                _nothing_left(report)
            return accumulator, 0
        started = time.perf_counter()
        if self._metadata_here(items):
            return self._call_here(items, function, accumulator, started)
        tuning, reading = config.PlacementSettings.read(), config.ReadingSettings.read()
        client, ledger = self._connect()
        pools = self._pools(client)
        # Tasks carry their pool's resources so that each runs on its pool's workers; an
        # embedded cluster of CPU workers only needs none: unrestricted tasks are queued by
        # Dask's scheduler and handed to whichever worker frees first, where restricted
        # ones are bound to a worker when submitted (128 tasks of 25-75 ms on 16 workers:
        # the workers idle 0.10 s at the end bound, 0.07 s queued; benchmarks/scheduling.py)
        restrict = self.cluster is None or any(p.is_gpu for p in pools.values())
        run = keys.new_run_token()
        labels = [keys.item_label(item) for item in items]
        chunks = all(isinstance(item, WorkItem) for item in items)
        if not chunks:  # file metadata and generic items: the CPU pool when there is one
            name = "cpu" if pools.get("cpu") is not None and pools["cpu"].workers else next(iter(pools))
            pools = {name: pools[name]}
            # where an earlier call's cancelled copy still occupies a worker, any other
            # worker may take them (they would otherwise wait behind it on a lone CPU worker)
            restrict = restrict and not _still_running_at(client.scheduler.address)
        probe = self._ask_for_nvcomp(client, pools, reading.read_on_device) if chunks else None
        policy = (self._placement(client, pools, tuning)
                  if chunks and len(pools) > 1 else None)

        # The task callable travels inside the graph: pickled once per message, so once
        # per batch of tasks sent to a worker. (As a future it would be a dependency, and
        # Dask places tasks where their dependencies are: all on one worker.)
        task = _Task(function, self.compression, {name: p.backend for name, p in pools.items()},
                     [n for n, p in pools.items() if p.is_gpu], report_runs=policy is not None,
                     report_starts=policy is not None and policy.backup_margin is not None,
                     reading=reading)
        task.generic_retries = self.retries
        loop = _Loop(self, client, pools, items, labels, run, task, policy, restrict, started,
                     tuning)
        progress = None
        if self.status:
            from gpuexec.scheduler.progress import WindowProgress

            try:
                progress = WindowProgress(self.desc, self.unit).__enter__()
            except Exception as err:  # the bar is a view: a broken one must not fail the run
                warnings.warn(f"gpuexec progress bar failed: {err!r}", RuntimeWarning,
                              stacklevel=2)
        try:
            loop.progress = progress
            try:
                result: _Partial = loop.run()
                loop.mark("merged")
                if progress is not None:
                    progress.merges(done=loop.merges_submitted)
            finally:
                if progress is not None:
                    progress.__exit__(None, None, None)
        except BaseException as err:
            loop.cancel()
            if probe is not None:
                probe.cancel()
            reruns = []
            if ledger:
                with contextlib.suppress(Exception):
                    reruns = self._reruns(client, run)
            explained = self._explain(err, items)
            call = self._failed_call(items, loop, reruns, started, explained)
            self._shared.record(call)
            if dashboard.enabled():
                feed.send_call(client, call)
            if explained is err:
                raise
            raise explained from err
        reruns = self._reruns(client, run) if ledger else []
        self._hear_nvcomp(client, probe)
        if policy is not None:
            self._shared.placement = policy
        call, mismatch = self._account(items, loop, labels, result, reruns,
                                       time.perf_counter() - started, policy)
        if dashboard.enabled():
            feed.send_call(client, call)
        return self._finish(call, mismatch, _unpack(result), accumulator)

    def _finish(self, call: CallReport, mismatch, value, accumulator, stacklevel: int = 3):
        """A call's end, once its report is made: recorded, its entry mismatch raised, its
        skipped chunks warned of and (processing) put in the metrics; the output added to
        ``accumulator`` (``stacklevel``: of the warning, from here to the executor's
        caller)."""
        report = self._shared.record(call)
        if mismatch is not None:
            raise mismatch
        if call.stage == "processing" and call.skipped and len(call.skipped) == call.chunks:
            _nothing_left(report)
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
        metadata (entries, UUID) of at most ``METADATA_HERE`` files, on the embedded
        cluster (its workers read the same file system as this process). A Dask round trip
        costs more than such a read (one file: 26-29 ms through the cluster against about
        5 ms here on the H200 host; docs/executor.md#metadata). Many files go to the
        cluster, whose processes read them side by side."""
        return (self.cluster is not None and len(items) <= METADATA_HERE
                and all(isinstance(item, FileMeta) for item in items))

    def _call_here(self, items: list, function, accumulator, started: float):
        """``__call__`` for file metadata read in this process (``_metadata_here``): the
        same task (retries, error messages naming the file), one thread per file, and the
        same report, its runs on the "client" pool."""
        from concurrent.futures import ThreadPoolExecutor

        task = _Task(function, self.compression, {CLIENT_POOL: "cpu"})
        units = [_expected_units(item) for item in items]

        def read(i: int) -> _Partial:
            return task._outcome(items[i], (i,), CLIENT_POOL, (units[i],), in_client=True)

        try:
            if len(items) == 1:  # a thread costs more than the read (docs/executor.md#metadata)
                parts = [read(0)]
            else:
                with ThreadPoolExecutor(len(items), thread_name_prefix="gpuexec-metadata") as th:
                    parts = list(th.map(read, range(len(items))))
        except Exception as err:
            explained = self._explain(err, items)
            self._shared.record(self._failed_call(items, None, [], started, explained))
            if explained is err:  # (a ChunkError already, its cause kept)
                raise
            raise explained from err
        result = _merge(parts, self.compression)
        call, mismatch = self._account(
            items, _RanHere(dict.fromkeys(range(len(items)), CLIENT_POOL)),
            [keys.item_label(item) for item in items], result, [],
            time.perf_counter() - started, None)
        return self._finish(call, mismatch, _unpack(result), accumulator, stacklevel=4)

    @staticmethod
    def _failed_call(items, loop, reruns, started: float, err: BaseException) -> CallReport:
        """The report of a call that raised ``err``: what is known of it at that point."""
        stage, unit = _stage(items[0])
        return CallReport(
            stage=stage, unit=unit, chunks=len(items),
            expected=sum(_expected_units(item) for item in items), reruns=list(reruns),
            seconds=time.perf_counter() - started,
            files=frozenset((getattr(item, "dataset", None), getattr(item, "filename", None))
                            for item in items),
            fallbacks=list(getattr(loop, "fallbacks", ())),
            backups=list(getattr(loop, "copies", {}).values()),
            error=f"{type(err).__name__}: {err}")

    def _explain(self, err: BaseException, items: list) -> BaseException:
        """The error to raise for a failed call, naming the chunk where Dask knows it."""
        from distributed.scheduler import KilledWorker

        if isinstance(err, ChunkError) or not isinstance(err, Exception):
            return err
        if isinstance(err, MergeError) and err.indices:
            first, last = err.indices[0], err.indices[-1]
            span = describe_item(items[first])
            if last != first:
                span += " ... " + describe_item(items[last])
            return ChunkError(f"merging the outputs of {len(err.indices)} chunk(s) failed "
                              f"({span}): {err}", (err,))
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

    def _account(self, items, loop: "_Loop", labels, result: _Partial, reruns, seconds,
                 policy):
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
        runs = []
        for indices, worker, units, secs, read, transfer in result.runs:
            task = loop.task_of.get(indices[0]) if len(indices) > 1 else None
            total = sum(_expected_units(items[i]) for i in indices) or 1
            for i in indices:
                share = _expected_units(items[i]) / total
                runs.append((i, ChunkRun(labels[i], loop.pool_of[i], worker,
                                         units if len(indices) == 1 else _expected_units(items[i]),
                                         secs * share, read * share, transfer * share, task)))
        call = CallReport(
            stage=stage, unit=unit, chunks=len(items),
            expected=sum(_expected_units(item) for i, item in enumerate(items) if i not in skipped),
            processed=processed,
            skipped=[SkippedChunk.of(items[i], stage, text) for i, text in sorted(skipped.items())],
            reruns=reruns,
            runs=[r for _, r in sorted(runs, key=lambda x: x[0])],
            seconds=seconds,
            files=frozenset((getattr(item, "dataset", None), getattr(item, "filename", None))
                            for item in items),
            fallbacks=loop.fallbacks,
            backups=list(loop.copies.values()),
            merges=loop.merge_notes,
            phases=dict(loop.phases),
            busy_at_start=dict(loop.busy_at_start),
            left_running=list(loop.left_running),
            placement=(None if policy is None else
                       {"decisions": policy.decisions(), "summary": policy.summary()}),
        )
        return call, mismatch


class _Loop:
    """One call's windowed submission: chunks are placed as earlier ones complete (at
    most ``window`` x a pool's slots in flight on each pool), GPU-placed chunks of one
    file are merged into larger tasks, completed outputs are merged on the cluster as
    they come, failed GPU tasks are re-run on CPU workers, and a GPU pool without
    workers hands its chunks to the CPU pool."""

    def __init__(self, ex: GPUExecutor, client, pools: dict, items, labels, run, task, policy,
                 restrict: bool = True, started: float | None = None,
                 tuning: config.PlacementSettings | None = None):
        from gpuexec.scheduler.placement import pool_slots

        self.ex, self.client, self.pools, self.items = ex, client, pools, items
        self.tuning = tuning or config.PlacementSettings.read()  # gpuexec.placement.*
        self.labels, self.run_token, self.task, self.policy = labels, run, task, policy
        self.gpu = [n for n, p in pools.items() if p.is_gpu]
        self.cpu = [n for n, p in pools.items() if not p.is_gpu]
        self.slots = sum(pool_slots(p) for p in pools.values())
        # One CPU pool and nothing to place: every chunk at once, as coffea's DaskExecutor
        # does. A window there made each worker wait for the client between tasks (400
        # one-entry chunks on 2 workers, the bare call: 1.40 s with a window of 2 x slots,
        # 0.24 s without; benchmarks/executor_overhead.py). A lone GPU pool keeps it: its
        # later batches are cut into smaller merged tasks (``_merge_count``).
        # With a policy, each pool's depth bounds what is in flight instead (None here).
        self.limit = None if policy is not None else (
            len(items) if not self.gpu else max(1, int(round(self.tuning.window * self.slots))))
        self.pending = list(range(len(items)))[::-1]  # stack: pop() gives the next chunk
        self.pending_units = sum(_expected_units(item) for item in items)
        self.in_flight: dict = {}  # task key -> _Submitted
        self.chunks_in_flight = 0
        self.levels: list[list] = []  # the reduction tree's open levels (futures)
        self.ready: dict = {}  # first chunk index -> (output future, its chunk indices)
        self.frontier = 0  # lowest chunk index whose output has not joined the tree
        self.accounted: set[int] = set()
        # backup copies: chunks whose output was taken (from whichever copy completed
        # first), the tasks in flight that run each chunk, and the report's records
        self.taken: set[int] = set()
        self.cover: dict[int, set] = {}
        self.copies: dict[tuple, BackupCopy] = {}
        self.cancelled: dict = {}  # task key -> _Submitted: lost to a copy, may still run
        self.starts: queue.SimpleQueue = queue.SimpleQueue()  # (key, monotonic time, worker)
        self.began: dict = {}  # task key -> (monotonic time, worker address) of its start
        # cancelled tasks of earlier calls still running here (task key -> _StillRunning),
        # the cluster's workers when there are some; what the report says of both
        self.avoid: dict = {}
        self.held: dict = {}  # their task key -> (pool, slot) held in the policy
        self.live: dict = {}
        self.busy_at_start: dict = {}
        self.left_running: list[str] = []
        self.moving: dict = {}  # key of a GPU output's copy to a CPU worker -> (copy, _Submitted)
        # merge_on="client": outputs being fetched (task key -> _Submitted), the merged
        # output of the chunks taken so far
        self.on_client = ex.merge_on == "client"
        self.fetching: dict = {}
        self.fetcher = None
        self.total = _Partial.empty()
        self.owned = False  # whether self.total.value may be added into in place
        self.pool_of: dict[int, str] = {}
        self.task_of: dict[int, int] = {}
        self.fallbacks: list = []
        self.merge_notes: list[str] = []
        self.merges_submitted = 0
        self.dead: set[str] = set()  # GPU pools without workers
        self.missing_since: dict[str, float] = {}
        self.progress = None
        self._tasks = 0
        # the call's start (perf_counter), from which CallReport.phases are counted
        self.started = time.perf_counter() if started is None else started
        self.phases: dict[str, float] = {}  # CallReport.phases
        # completed watched futures, put by their done callbacks (O(1) per completion; a
        # wait over every future in flight per completion cost the client a core share)
        self.completed: queue.SimpleQueue = queue.SimpleQueue()
        merge_pool = pools[self.cpu[0]] if self.cpu else pools[self.gpu[0]]
        self.restrict = restrict  # tasks name their pool's resources (see __call__)
        self.merge_resources = merge_pool.task_resources_dict() if restrict else None

    def mark(self, phase: str, first: bool = False) -> None:
        """Seconds since the call's start at ``phase`` (``first``: keep the first)."""
        if not (first and phase in self.phases):
            self.phases[phase] = time.perf_counter() - self.started

    # ------------------------------------------------------------------ placing
    def _choose(self, i: int) -> str | None:
        """The pool of chunk ``i``, or None: its pool is full, the chunk waits (the
        policy binds a chunk to a pool when that pool has room: ``Placement.depth``)."""
        if self.policy is None:
            name = self.cpu[0] if self.cpu else self.gpu[0]
            self.pool_of[i] = name
            return name
        from gpuexec.scheduler.placement import Chunk

        item = self.items[i]
        backlog = self.pending_units - _expected_units(item)
        pool = self.policy.assign(Chunk.of(item, i), backlog_events=backlog, may_wait=True)
        if pool is None:
            return None
        self.pending_units = backlog
        if pool in self.dead and self.cpu:
            self.policy.retry(i, self.cpu[0], reason=f"{pool} pool has no worker")
            pool = self.cpu[0]
        self.pool_of[i] = pool
        return pool

    def _refill(self) -> None:
        batch: dict[str, list[int]] = {}
        while self.pending:
            # with a policy, each pool's depth bounds what is in flight (a merged GPU
            # task counts its chunks); without one, the window over all slots does
            if (self.limit is not None
                    and self.chunks_in_flight + sum(map(len, batch.values())) >= self.limit):
                break
            pool = self._choose(self.pending[-1])
            if pool is None:
                break
            batch.setdefault(pool, []).append(self.pending.pop())
        if self.policy is not None:
            self.policy.end_batch()
        remaining = len(self.pending) + sum(map(len, batch.values()))
        for pool, indices in batch.items():
            self._submit(pool, indices, remaining=remaining)
        if not self.pending and self.policy is not None:
            self._copy_stragglers()

    def _copy_stragglers(self) -> None:
        """Every chunk is placed: copy the tasks that the policy predicts another pool's
        idle slots finish clearly earlier (``Placement.backups``)."""
        for b in self.policy.backups():
            self.copies[b.chunks] = BackupCopy(self._label(b.chunks), b.from_pool, b.pool)
            logger.info("gpuexec: %s copied from the %s pool to idle %s slots (predicted "
                        "to finish at %.2f s there, %.2f s where it runs)",
                        self.copies[b.chunks].label, b.from_pool, b.pool, b.copy_finish,
                        b.original_finish)
            self._submit(b.pool, list(b.chunks), merge=False, backup=True)

    def _label(self, group) -> str:
        """A task's label: its first chunk's, and how many more it merges."""
        return self.labels[group[0]] + (f"+{len(group) - 1}" if len(group) > 1 else "")

    def _merge_count(self, remaining: int | None) -> int:
        """Chunks per merged GPU task: ``gpu_merge``, or fewer as the run ends (guided
        self-scheduling: at most the ``remaining`` chunks' share of one slot), so that the
        last GPU tasks are short (on the H200, ADL Q6 at 24 GPU slots: the 25th task of
        four chunks started when the first 24 ended and set the makespan)."""
        if remaining is None:
            return self.tuning.gpu_merge
        return max(1, min(self.tuning.gpu_merge, -(-remaining // self.slots)))

    def _submit(self, pool: str, indices: list[int], merge: bool = True,
                remaining: int | None = None, backup: bool = False) -> None:
        """Submit the chunks ``indices`` to ``pool``; on a GPU pool adjacent chunks of one
        file are merged (``remaining``: chunks not yet submitted, these included;
        ``backup``: second copies of chunks in flight elsewhere)."""
        from gpuexec.scheduler.placement import merge_for_gpu

        count = self._merge_count(remaining)
        if pool in self.gpu and merge and count > 1 and len(indices) > 1:
            sizes = sorted(_expected_units(self.items[i]) for i in indices)
            target = count * sizes[len(sizes) // 2]
            merged = merge_for_gpu([self.items[i] for i in indices], max(1, target))
            groups = [tuple(indices[k] for k in part) for part in merged.parts]
            tasks = list(merged.items)
            for m in merged.merges:
                note = m.describe()
                self.merge_notes.append(note)
                logger.info("gpuexec: %s", note)
        else:
            groups = [(i,) for i in indices]
            tasks = [self.items[i] for i in indices]
        spec = self.pools[pool]
        around = self._around_busy(pool, groups)
        resources = spec.task_resources_dict() if self.restrict else None
        # Bound around a busy worker: loosely where any worker may run the task, so that
        # Dask places it elsewhere should its workers all leave. A task that needs a
        # pool's resources is bound strictly: Dask's work stealing moves a loosely bound
        # task to any idle worker, resources or not, and a worker without them failed
        # (KeyError 'CPU' in its state machine, seen on the H200). ``_watch_bound``
        # resubmits such a task should its workers all leave.
        strict = around is not None and bool(resources)
        keys_ = []
        for group in groups:
            number = None
            if len(group) > 1 and self.policy is not None:
                number = self.policy.mark_merged(group)
                for i in group:
                    self.task_of[i] = number
            # a copy says so in its key (the dashboard's task stream shows it)
            keys_.append(keys.chunk_key(pool, self.run_token, group[0], self._label(group)
                                        + ("~copy" if backup else "") + f"~{self._tasks}"))
            self._tasks += 1
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Large object of size")
            futures = self.client.map(
                _run_item, tasks, groups, [pool] * len(groups),
                [tuple(_expected_units(self.items[i]) for i in g) for g in groups],
                task=self.task, key=keys_, pure=False,
                resources=resources,
                workers=around, allow_other_workers=around is not None and not strict,
                priority=self.ex.priority,
                retries=0,  # the task retries what may pass (retryable); Dask re-runs lost tasks
            )
        # the loop watches the chunk futures themselves: the placement policy gets a task's
        # runs from its worker event (RUNS_TOPIC); a timing task per chunk cost a quarter of
        # a 40-chunk run on 2 cores
        for group, future in zip(groups, futures):
            self.in_flight[future.key] = _Submitted(group, pool, future,
                                                    tuple(around) if strict else ())
            self.chunks_in_flight += len(group)
            for i in group:
                self.cover.setdefault(i, set()).add(future.key)
            future.add_done_callback(self.completed.put)
        self.mark("first_submitted", first=True)
        if self.progress is not None:
            self.progress.placed(pool, sum(map(len, groups)))

    # ------------------------------------------------------------------ outputs
    def _collect(self, future, indices) -> None:
        """Take a task's output into the reduction, in chunk order whatever the order of
        completion (so that outputs such as growing categorical axes come out as in
        coffea's executors): outputs wait until every earlier chunk's is in, then join
        level 0 of the tree; a level holding ``treereduction`` outputs merges them into
        one output of the level above."""
        self.ready[min(indices)] = (future, indices)
        while True:
            if self.frontier in self.accounted:
                self.frontier += 1
            elif self.frontier in self.ready:
                output, covered = self.ready.pop(self.frontier)
                self.accounted.update(covered)
                if self.on_client:
                    self._absorb(output)
                else:
                    self._push(0, output)
            else:
                break

    def _absorb(self, part: _Partial) -> None:
        """Add a fetched output to the run's merged output (in chunk order, by
        ``_collect``), as ``_merge`` does on a worker."""
        total = self.total
        _tally(total, part)
        if self.progress is not None:
            self.progress.merges(done=1)
        if part.value is None:
            return
        try:
            value = _unpack(part)
            if total.value is None:
                # unpickled here (packed) it is this process's own object; unpacked it
                # may be the very object an in-process worker holds: not added into
                total.value, self.owned = value, part.packed
            elif self.owned:
                total.value = accumulate([value], total.value)
            else:  # a new object, added into in place from now on
                total.value, self.owned = accumulate([total.value, value]), True
        except Exception as err:
            raise MergeError(f"{type(err).__name__}: {err}", sorted(total.counts)) from err

    def _fetch(self, subs: list[_Submitted]) -> None:
        """Fetch completed tasks' outputs into this process in the background, those
        seen complete together in one gather: one request per worker that holds some,
        not a round trip each (on the H200 host the last outputs of ADL Q1, 31 tasks that
        end within a few ms, reached the client 25-50 ms after its last task had ended,
        fetched four at a time). A ``_Fetched`` per output joins the completion queue
        when it is here."""
        from concurrent.futures import ThreadPoolExecutor

        if self.fetcher is None:
            self.fetcher = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="gpuexec-fetch")
        futures = [sub.future for sub in subs]
        for sub in subs:
            self.fetching[sub.future.key] = sub
        if self.progress is not None:  # the merges bar counts the outputs added up here
            self.progress.merges(submitted=len(subs))
        job = self.fetcher.submit(_gather_each, self.client, futures)
        job.add_done_callback(functools.partial(self._fetched, futures))

    def _fetched(self, futures: list, job) -> None:
        """A fetch job's outputs into the completion queue, one ``_Fetched`` each."""
        try:
            outcomes = job.result()
        except BaseException as err:  # cancelled at shutdown, or a bug: each output fails
            outcomes = [(None, err)] * len(futures)
        for future, (value, err) in zip(futures, outcomes):
            self.completed.put(_Fetched(future.key, value, err))

    def _push(self, level: int, future) -> None:
        while len(self.levels) <= level:
            self.levels.append([])
        self.levels[level].append(future)
        if len(self.levels[level]) >= self.ex.treereduction:
            group, self.levels[level] = self.levels[level], []
            self._push(level + 1, self._submit_merges([group], level)[0])

    def _submit_merges(self, groups: list, level: int) -> list:
        """One ``_merge`` task per group of outputs, on the merge pool, counted in the
        progress bar."""
        futures = self.client.map(
            _merge, groups, compression=self.ex.compression,
            key=[keys.merge_key(self.run_token, level, self.merges_submitted + j)
                 for j in range(len(groups))],
            resources=self.merge_resources, pure=False, priority=self.ex.priority)
        self.merges_submitted += len(groups)
        if self.progress is not None:
            self.progress.merges(submitted=len(groups))
        return futures

    @property
    def outputs(self) -> list:
        """The futures of outputs not merged yet (``merge_on="cluster"``)."""
        if self.on_client:
            return []
        # higher levels hold earlier chunks
        return [f for level in reversed(self.levels) for f in level] + \
            [f for f, _ in self.ready.values()]

    def _finish(self) -> _Partial:
        if self.ready:
            raise RuntimeError("gpuexec: internal error: outputs of chunks "
                               f"{sorted(self.ready)} wait for chunk #{self.frontier}")
        return self.total if self.on_client else self._finish_tree().result()

    def _finish_tree(self):
        work, level = self.outputs, len(self.levels)
        while len(work) > 1:
            groups = [work[i:i + self.ex.treereduction]
                      for i in range(0, len(work), self.ex.treereduction)]
            work = self._submit_merges(groups, level)
            level += 1
        return work[0]

    # ------------------------------------------------------------------ faults
    def _drop(self, sub: _Submitted) -> None:
        """``sub`` leaves the tasks in flight (completed, failed or cancelled)."""
        if self.in_flight.pop(sub.future.key, None) is not None:
            self.chunks_in_flight -= len(sub.indices)
        for i in sub.indices:
            self.cover.get(i, set()).discard(sub.future.key)

    def _take(self, sub: _Submitted) -> None:
        """``sub``'s output counts for its chunks: any other copy of them is cancelled
        (a running one finishes on its worker; its output is never looked at). A task
        cancelled so has its other chunks run by their own copies, or run again."""
        self.taken.update(sub.indices)
        for i in sub.indices:
            self.pool_of[i] = sub.pool
        if self.policy is not None:
            self.policy.settle(list(sub.indices), sub.pool)
        for chunks, note in self.copies.items():
            if set(chunks) & set(sub.indices):
                note.taken_from = sub.pool
        losers = {key for i in sub.indices for key in self.cover.get(i, ())}
        orphans = []
        for key in losers:
            other = self.in_flight.get(key)
            if other is None:
                continue
            self._drop(other)
            self.client.cancel([other.future])
            self.cancelled[key] = other
            if self.progress is not None:
                self.progress.done(other.pool, len(other.indices))
            orphans += [i for i in other.indices if i not in self.taken and not self.cover.get(i)]
        for i in orphans:  # none while copies of a task's chunks are made together
            pool = self.pool_of[i]
            if self.policy is not None:
                self.policy.retry(i, pool, reason="its task was cancelled: a copy of a "
                                                  "chunk merged with it counted first")
            self._submit(pool, [i], merge=False)

    def _fall_back(self, sub: _Submitted, reason: str) -> None:
        """Re-run the chunks of a GPU task on the CPU pool (each chunk alone), but for
        those that a copy in flight still runs (recorded as moved to the copy's pool)."""
        covered = [i for i in sub.indices if self.cover.get(i)]
        if covered:
            logger.warning("gpuexec: %d chunk(s) (%s) failed on the %s pool (%s); a copy "
                           "of each runs elsewhere", len(covered), self.labels[covered[0]],
                           sub.pool, reason)
            if self.policy is not None:
                self.policy.release(covered, pool=sub.pool)
            for i in covered:
                to = min(self.in_flight[key].pool for key in self.cover[i])
                self.fallbacks.append(Fallback(self.labels[i], sub.pool, to,
                                               f"{reason} (a copy was running there)"))
        sub = _Submitted(tuple(i for i in sub.indices if i not in covered), sub.pool,
                         sub.future)
        if not sub.indices:
            return
        self.taken.difference_update(sub.indices)  # an output taken and then lost
        cpu = self.cpu[0]
        for i in sub.indices:
            if self.policy is not None:
                self.policy.retry(i, cpu, reason=f"retry on CPU: {reason}")
            self.pool_of[i] = cpu
            self.fallbacks.append(Fallback(self.labels[i], sub.pool, cpu, reason))
        logger.warning("gpuexec: %d chunk(s) (%s) moved from the %s pool to the CPU pool: %s",
                       len(sub.indices), self.labels[sub.indices[0]], sub.pool, reason)
        self._submit(cpu, list(sub.indices), merge=False)

    def _failed(self, sub: _Submitted, err: BaseException) -> None:
        if sub.pool in self.gpu and self.cpu:
            self._fall_back(sub, _reason(err))
            return
        if all(self.cover.get(i) for i in sub.indices):  # a copy failed, another runs
            logger.warning("gpuexec: a copy of %s failed on the %s pool (%s); another runs",
                           self.labels[sub.indices[0]], sub.pool, _reason(err))
            if self.policy is not None:
                self.policy.release(list(sub.indices), pool=sub.pool)
            return
        raise err

    def _watch_gpu_pools(self) -> None:
        """A GPU pool none of whose workers is alive for ``gpu_lost_after`` seconds hands
        its tasks (which Dask would keep waiting for a GPU worker) to the CPU pool."""
        if not self.gpu or not self.cpu:
            return
        live = _workers(self.client)
        now = time.monotonic()
        for name in self.gpu:
            if name in self.dead:
                continue
            if _any_worker_holds(live, self.pools[name].task_resources_dict()):
                self.missing_since.pop(name, None)
                continue
            since = self.missing_since.setdefault(name, now)
            if now - since < self.tuning.gpu_lost_after:
                continue
            self.dead.add(name)
            logger.warning("gpuexec: the %s pool has had no worker for %.0f s: its chunks run "
                           "on CPU workers", name, now - since)
            for key, sub in list(self.in_flight.items()):
                if sub.pool == name:
                    self._drop(sub)
                    self.client.cancel([sub.future])
                    self._fall_back(sub, f"the {name} pool lost its last worker")
            for key, (copy, sub) in list(self.moving.items()):
                if sub.pool == name:
                    del self.moving[key]
                    self.client.cancel([copy, sub.future])
                    self._fall_back(sub, f"the {name} pool lost its last worker "
                                         "before its output was merged")
            for key, sub in list(self.fetching.items()):
                if sub.pool == name:  # its fetch waits for a recomputation on the GPU pool
                    del self.fetching[key]
                    self.client.cancel([sub.future])
                    self._fall_back(sub, f"the {name} pool lost its last worker "
                                         "before its output was fetched")

    def _watch_bound(self) -> None:
        """A task bound strictly to workers that have all left would wait in Dask's
        "no-worker" state forever: it is cancelled and its chunks submitted again to its
        pool (bound to whichever of its workers are free now, or not at all)."""
        stranded = [sub for sub in self.in_flight.values() if sub.bound]
        if not stranded:
            return
        live = _workers(self.client)
        self.live = live
        for sub in stranded:
            if any(address in live for address in sub.bound):
                continue
            self._drop(sub)
            self.client.cancel([sub.future])
            logger.warning("gpuexec: the workers that %s was bound to have left; it is "
                           "submitted again to the %s pool", self._label(sub.indices), sub.pool)
            if self.policy is not None:
                for i in sub.indices:
                    self.policy.retry(i, sub.pool, reason="resubmitted: the workers it was "
                                                          "bound to left")
            self._submit(sub.pool, list(sub.indices), merge=False)

    # ------------------------------------------------------------------ the loop
    def _completed(self, timeout: float) -> list:
        """Watched futures that completed (waiting up to ``timeout`` for the first); a
        future cancelled or already handled is skipped by the caller."""
        try:
            done = [self.completed.get(timeout=timeout)]
        except queue.Empty:
            return []
        while True:
            try:
                done.append(self.completed.get_nowait())
            except queue.Empty:
                return done

    def _worker_events(self) -> None:
        """Tell the policy which tasks started, and the times of cancelled copies that
        ran to their end anyway (their runs arrive as any task's; their outputs are
        never fetched)."""
        if self.policy is None:
            return
        offset = self.policy.clock() - time.monotonic()
        while True:
            try:
                key, at, worker = self.starts.get_nowait()
            except queue.Empty:
                break
            self.began[key] = (at, worker)
            sub = self.in_flight.get(key)
            if sub is not None:
                self.policy.started(list(sub.indices), now=at + offset, pool=sub.pool)
        for key, sub in list(self.cancelled.items()):
            runs = _reported_runs.pop(key, None)
            if runs is not None:
                del self.cancelled[key]
                for indices, _worker, _units, seconds, _r, _t in runs:
                    self.policy.lost(list(indices), seconds, pool=sub.pool)

    def _runs_of(self, future) -> list:
        """A completed task's runs: from its worker event, or (should the event be late or
        lost) fetched by a small task where its output is."""
        runs = _reported_runs.pop(str(future.key), None)
        if runs is None:
            runs = self.client.submit(_timing_of, future, pure=False,
                                      priority=self.ex.priority + 1).result()
        return runs

    # ------------------------------------------------------ cancelled copies running on
    def _route_around_busy(self) -> None:
        """Workers that an earlier call's cancelled copies still occupy (on this cluster):
        the policy counts one slot of their pool busy until each copy's predicted end,
        and ``_submit`` binds tasks to the pool's other workers while a copy is predicted
        to run longer than they take (``_around_busy``)."""
        mine = _still_running_at(self.client.scheduler.address)
        if not mine:
            return
        self.live = _workers(self.client)
        now = time.monotonic()
        for key, entry in mine.items():
            if entry.worker not in self.live:  # the worker is gone (and its task with it)
                _still_running.pop(key, None)
                continue
            self.avoid[key] = entry
            until = straggler_end(entry.started, entry.seconds, now)
            self.busy_at_start[entry.worker] = max(self.busy_at_start.get(entry.worker, 0.0),
                                                   until - now)
            if self.policy is not None and entry.pool in self.policy.pools:
                slot = self.policy.occupied(entry.pool, until + self.policy.clock() - now)
                self.held[key] = (entry.pool, slot)
        if self.busy_at_start:
            logger.info("gpuexec: %d worker(s) still run copies that an earlier call "
                        "cancelled; tasks keep off them while they are predicted to run "
                        "longer than a task: %s",
                        len(self.busy_at_start), ", ".join(sorted(self.busy_at_start)))

    def _update_held(self) -> None:
        """Slots held by an earlier call's cancelled copies: one that runs on past its
        predicted end is predicted anew (``straggler_end``), one that ended is free."""
        if not self.held:
            return
        now = time.monotonic()
        offset = self.policy.clock() - now
        for key, (pool, slot) in list(self.held.items()):
            entry = _still_running.get(key)
            if entry is None:  # its end event arrived
                del self.held[key]
                until = now
            else:
                until = straggler_end(entry.started, entry.seconds, now)
            self.policy.occupied(pool, until + offset, slot)

    def _around_busy(self, pool: str, groups) -> list | None:
        """The workers of ``pool`` not occupied by an earlier call's cancelled copy, for
        the ``workers=`` of tasks running ``groups`` of chunks (a preference Dask drops if
        all of them leave: ``allow_other_workers``); None when none is occupied
        for longer than such a task takes (no restriction: a restricted task stays so
        after the copy ends; binding whatever the prediction, one H200 run of ADL Q6 that
        found 2 of 4 CPU workers so busy took 1.37 s instead of 0.9), or all are (nowhere
        else to go)."""
        running = [e for k, e in self.avoid.items() if k in _still_running]
        if not running:  # (every submission passes here: nothing to do in most calls)
            return None
        now = time.monotonic()
        seconds = UNPLACED_TASK_SECONDS
        if self.policy is not None and pool in self.policy.pools:
            seconds = max(self.policy.predict(pool, sum(_expected_units(self.items[i])
                                                        for i in group)) for group in groups)
        busy = {e.worker for e in running
                if straggler_end(e.started, e.seconds, now) - now > seconds}
        if not busy:
            return None
        need = self.pools[pool].task_resources_dict() if self.restrict else {}
        mine = [a for a, w in self.live.items() if _holds(w, need)]
        free = [a for a in mine if a not in busy]
        return free if free and len(free) < len(mine) else None

    def _leave_still_running(self) -> None:
        """Record this call's cancelled copies that had started and have not ended, for
        the next call on the cluster (``_route_around_busy``)."""
        if self.policy is None:
            return
        address = self.client.scheduler.address
        for key, sub in self.cancelled.items():
            began = self.began.get(key)
            seconds = self.policy.task_seconds(list(sub.indices), sub.pool)
            if began is None or began[1] is None or seconds is None:
                continue  # never started (Dask drops it), or not known where
            _still_running[key] = _StillRunning(address, began[1], sub.pool, began[0], seconds)
            # its end may have been reported meanwhile (_store_runs pops after storing)
            if key in _reported_runs:
                _still_running.pop(key, None)
            else:
                self.left_running.append(self._label(sub.indices))

    def run(self) -> _Partial:
        self._route_around_busy()
        if self.policy is not None:
            _reported_starts[self.run_token] = self.starts
            _watching.add(self.run_token)
            self.client.subscribe_topic(RUNS_TOPIC, _store_runs)
        try:
            return self._run()
        finally:
            self._leave_still_running()
            _watching.discard(self.run_token)
            _reported_starts.pop(self.run_token, None)
            for key in [k for k in _reported_runs if self.run_token in k]:
                _reported_runs.pop(key, None)
            if self.fetcher is not None:
                self.fetcher.shutdown(wait=False, cancel_futures=True)

    def _run(self):
        self._refill()
        last_check = 0.0
        while self.in_flight or self.moving or self.fetching:
            to_fetch = []  # outputs of the tasks seen complete in this batch
            # once every chunk is placed, look for stragglers to copy between completions
            watch = (not self.pending and self.policy is not None
                     and self.policy.backup_margin is not None)
            for done in self._completed(timeout=BACKUP_TICK if watch else 1.0):
                if isinstance(done, _Fetched):
                    sub = self.fetching.pop(done.key, None)
                    if sub is None:  # moved to the CPU pool meanwhile
                        continue
                    err = done.error
                    if err is not None:
                        if isinstance(err, Exception) and sub.pool in self.gpu and self.cpu:
                            self._fall_back(sub, "its output could not be fetched from the "
                                                 f"GPU worker ({_reason(err)})")
                            continue
                        raise err
                    part = done.value
                    self.mark("last_output_fetched")
                    self._collect(part, sub.indices)
                    continue
                if done.key in self.moving:
                    copy, sub = self.moving.pop(done.key)
                    if copy.status == "error":  # the GPU worker's output was lost: re-run
                        self._fall_back(sub, "its output could not be moved off the GPU "
                                             f"worker ({_reason(copy.exception())})")
                        continue
                    self._collect(copy, sub.indices)
                    continue
                sub = self.in_flight.get(done.key)
                if sub is None:  # cancelled: another copy counted, or its pool was lost
                    continue
                self._drop(sub)
                self.mark("last_task_seen")
                if done.status == "error":
                    self._failed(sub, done.exception())
                    continue
                if done.status == "cancelled":
                    raise ChunkError(f"{describe_item(self.items[sub.indices[0]])}: its task "
                                     "was cancelled")
                if self.policy is not None:
                    timed = set()
                    for indices, _worker, _units, seconds, _r, _t in self._runs_of(sub.future):
                        self.policy.observe(list(indices), seconds, pool=sub.pool)
                        timed.update(indices)
                    # a chunk without a run of its own still leaves its pool's queue (a
                    # pool at its depth would otherwise wait for it forever)
                    self.policy.release([i for i in sub.indices if i not in timed],
                                        pool=sub.pool)
                self._take(sub)
                if self.on_client:
                    # fetched here, where a GPU worker that dies later cannot take it along
                    to_fetch.append(sub)
                elif sub.pool in self.gpu and self.cpu:
                    # its output moves to a CPU worker at once: a GPU worker that dies later
                    # takes no result with it (Dask could only recompute it on a GPU)
                    copy = self._submit_merges([[sub.future]], 0)[0]
                    self.moving[copy.key] = (copy, sub)
                    copy.add_done_callback(self.completed.put)
                else:
                    self._collect(sub.future, sub.indices)
                if self.progress is not None:
                    self.progress.done(sub.pool, len(sub.indices))
            if to_fetch:
                self._fetch(to_fetch)
            self._worker_events()
            self._update_held()
            if time.monotonic() - last_check >= 1.0:
                self._watch_gpu_pools()
                self._watch_bound()
                last_check = time.monotonic()
            self._refill()
        return self._finish()

    def cancel(self) -> None:
        futures = [s.future for s in self.in_flight.values()]
        futures += [s.future for s in self.fetching.values()]
        futures += [copy for copy, _ in self.moving.values()]
        try:
            self.client.cancel(futures + self.outputs)
        except Exception:  # cancelling is best effort while an error propagates
            pass


def _workers(client) -> dict:
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:  # distributed before 2025: always all workers
        info = client.scheduler_info()
    return info.get("workers", {})


def _holds(worker: dict, need: dict) -> bool:
    """Whether ``worker`` (scheduler worker info) declares the resources ``need``."""
    return all(worker.get("resources", {}).get(r, 0) >= n for r, n in need.items())


def _any_worker_holds(workers: dict, need: dict) -> bool:
    """Whether one of ``workers`` (scheduler worker info) declares the resources ``need``."""
    return any(_holds(w, need) for w in workers.values())


def _check_resources(client, pools: dict) -> None:
    """Tasks request their pool's resources: a cluster without a worker declaring them
    would queue them forever, so say so up front."""
    workers = _workers(client)
    for name, pool in pools.items():
        need = pool.task_resources_dict()
        if not _any_worker_holds(workers, need):
            example = ", ".join(f"{r}={n:g}" for r, n in need.items())
            raise RuntimeError(
                f"no worker of the Dask cluster at {client.scheduler.address} declares the "
                f"resources {need} that gpuexec's {name} tasks request; start its workers with "
                f"resources (e.g. `dask worker --resources {example}` or "
                f"LocalCluster(resources={need})), or use GPUExecutor() without a client")


# A keyword that moved out of GPUExecutor names its new home (MOVED, REMOVED) instead of
# the dataclass's bare "unexpected keyword argument".
_dataclass_init = GPUExecutor.__init__


@functools.wraps(_dataclass_init)
def _init(self, *args, **kwargs):
    _refuse_moved(kwargs)
    _dataclass_init(self, *args, **kwargs)


GPUExecutor.__init__ = _init
