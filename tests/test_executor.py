"""GPUExecutor (executor part 1): coffea's executor contract on a real Dask cluster.

End-to-end runs compare with coffea's IterativeExecutor on the CMS NanoAOD samples in
data/samples. Clusters are small (2 worker processes of 1 thread); the embedded one is
shared by this module and tests/test_executor_faults.py (same settings, one cluster).
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import pickle
import sys
import warnings

import awkward as ak
import cloudpickle
import hist
import pytest
from coffea import processor
from coffea.nanoevents import NanoAODSchema
from dask.utils import key_split

import dask

import gpuexec
from gpuexec import GPUCluster
from gpuexec.executor import ChunkError, GPUExecutor
from gpuexec.executor import probes
from gpuexec.executor.errors import explain
from gpuexec.executor.merging import _gather_each, _merge
from gpuexec.executor.task import _Partial, _unwrap_runner_retries
from gpuexec.executor.errors import NotRootOrNoTree
from gpuexec.scheduler import keys
from gpuexec.scheduler.cluster import ClusterSpec, WorkerPool, close_shared, shared_client
from gpuexec.scheduler.report import EntriesMismatch, check_entries

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/

SAMPLES = os.path.join(os.path.dirname(__file__), "..", "data", "samples")
DY = os.path.abspath(os.path.join(SAMPLES, "nano_dy.root"))
TT = os.path.abspath(os.path.join(SAMPLES, "nano_tt_v15.root"))
DIMUON = os.path.abspath(os.path.join(SAMPLES, "nano_dimuon.root"))
ENTRIES = {DY: 40, TT: 200, DIMUON: 40}

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


class DimuonProcessor(processor.ProcessorABC):
    """Opposite-charge dimuon mass histogram and per-dataset counters."""

    def process(self, events):
        import gpuexec.kernels as gk

        dataset = events.metadata["dataset"]
        muons = events.Muon
        nmuons = gk.num(muons.pt, axis=1)
        pairs = ak.combinations(muons[nmuons >= 2], 2, fields=["first", "second"])
        opposite = pairs[pairs.first.charge != pairs.second.charge]
        mass = (opposite.first + opposite.second).mass
        h = (hist.Hist.new.StrCat([], growth=True, name="dataset")
             .Reg(60, 0, 120, name="mass", label="m(mu mu) [GeV]").Double())
        h.fill(dataset=dataset, mass=ak.flatten(mass))
        return {"mass": h, dataset: {
            "entries": len(events),
            "muons": int(ak.sum(nmuons)),
            "pairs": int(ak.sum(gk.num(mass, axis=1))),
            "pt_sum": float(ak.sum(gk.sum(muons.pt, axis=1))),
        }}

    def postprocess(self, accumulator):
        return accumulator


def assert_same_output(got, want):
    assert got.keys() == want.keys()
    assert got["mass"] == want["mass"]  # hist: axes and every bin exactly
    for dataset in want:
        if dataset == "mass":
            continue
        for key in ("entries", "muons", "pairs"):
            assert got[dataset][key] == want[dataset][key], (dataset, key)
        # float sums merged in a different order: equal to rounding
        assert got[dataset]["pt_sum"] == pytest.approx(want[dataset]["pt_sum"], rel=1e-12)


def runner(executor, **kw):
    # a fresh metadata cache, so that every run preprocesses through its executor
    kw.setdefault("metadata_cache", {})
    kw.setdefault("schema", NanoAODSchema)
    return processor.Runner(executor=executor, **kw)


EMBEDDED = dict(client=GPUCluster(cpu_workers=2, threads_per_worker=1,
                                   dashboard_address="127.0.0.1:0"), status=False)


@pytest.fixture(scope="module")
def executor():
    """The embedded cluster (2 CPU workers), stdout of its start kept for a test (started
    afresh: another module may have left one of the same settings running)."""
    ex = GPUExecutor(**EMBEDDED)
    close_shared(ex.cluster_spec())
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        client = shared_client(ex.cluster_spec())
    ex.printed_at_start = printed.getvalue()
    ex.live_client = client
    return ex


FILESET = {"DY": [DY], "DIMUON": [DIMUON], "TT": [TT]}


@pytest.fixture(scope="module")
def reference():
    return runner(processor.IterativeExecutor(status=False), chunksize=100)(
        FILESET, DimuonProcessor(), treename="Events")


# --------------------------------------------------------------------- no cluster
def test_gpuexec_exposes_the_executor():
    assert gpuexec.GPUExecutor is GPUExecutor
    assert issubclass(GPUExecutor, processor.executor.ExecutorBase)


def test_runner_wraps_work_in_automatic_retries():
    """The executor relies on the shape of coffea Runner's retry/skip wrapper to report
    skipped chunks with their exceptions; this breaks loudly if coffea changes it."""
    seen = []

    class Recording(processor.IterativeExecutor):
        def __call__(self, items, function, accumulator):
            seen.append(function)
            return super().__call__(items, function, accumulator)

    out = runner(Recording(status=False, retries=2), skipbadfiles=True, chunksize=100)(
        {"DY": [DY]}, DimuonProcessor(), treename="Events")
    assert out["DY"]["entries"] == 40
    assert len(seen) == 2  # preprocessing, processing
    for function in seen:
        work, retries, skip_on = _unwrap_runner_retries(function)
        assert work is not function and callable(work)
        # skipbadfiles=True: coffea's OSError, and a file not ROOT or without the tree
        assert retries == 2 and skip_on == (OSError, NotRootOrNoTree)
    # use_result_type wants the exception itself: left to coffea, as is a plain function
    wrapped = functools.partial(processor.Runner.automatic_retries, 1, True, len,
                                use_result_type=True)
    assert _unwrap_runner_retries(wrapped) == (wrapped, None, ())
    assert _unwrap_runner_retries(len) == (len, None, ())


def test_check_entries_catches_lost_doubled_and_short_chunks():
    expected = {0: 10, 1: 10, 2: 5}
    describe = "chunk #{}".format
    assert check_entries(expected, {0: 10, 1: 10, 2: 5}, [], [], describe, "entries") == 25
    assert check_entries(expected, {0: 10, 2: 5}, [], [1], describe, "entries") == 15
    with pytest.raises(EntriesMismatch, match=r"chunk #1: lost"):
        check_entries(expected, {0: 10, 2: 5}, [], [], describe, "entries")
    with pytest.raises(EntriesMismatch, match=r"chunk #2: 4 entries processed, 5 expected"):
        check_entries(expected, {0: 10, 1: 10, 2: 4}, [], [], describe, "entries")
    with pytest.raises(EntriesMismatch, match=r"chunk #0: result merged more than once"):
        check_entries(expected, {0: 20, 1: 10, 2: 5}, [0], [], describe, "entries")
    with pytest.raises(EntriesMismatch, match=r"reported skipped"):
        check_entries(expected, {0: 10, 1: 10, 2: 5}, [], [1], describe, "entries")
    with pytest.raises(EntriesMismatch, match=r"never submitted"):
        check_entries(expected, {0: 10, 1: 10, 2: 5, 7: 1}, [], [], describe, "entries")


def test_merge_flags_a_chunk_merged_twice_and_keeps_order():
    a = _Partial({"n": 1, "seq": [0]}, False, {0: 3}, [], [], [(0, "w", 3, 0.1)])
    b = _Partial({"n": 2, "seq": [1]}, False, {1: 4}, [], [(2, "OSError: x")], [])
    merged = _merge([a, b, _merge([a], 1)], compression=1)
    assert merged.doubled == [0] and merged.counts == {0: 6, 1: 4}
    assert merged.skipped == [(2, "OSError: x")]
    from gpuexec.executor.task import _unpack

    assert _unpack(merged) == {"n": 4, "seq": [0, 1, 0]}
    with pytest.raises(EntriesMismatch, match="merged more than once"):
        check_entries({0: 3, 1: 4}, merged.counts, merged.doubled, [], str, "entries")


def test_chunk_error_keeps_its_cause_chain_through_pickle():
    try:
        try:
            raise OSError("file gone")
        except OSError as err:
            raise Exception("Failed to open file") from err
    except Exception as err:
        from gpuexec.executor.errors import chain as _chain

        error = ChunkError("file x, entries [0, 10) failed", _chain(err))
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == "file x, entries [0, 10) failed"
    assert type(again.__cause__) is Exception and type(again.__cause__.__cause__) is OSError


class _BuiltFromSizes(MemoryError):
    """Pickles, but cannot be rebuilt from its args (as some libraries' errors)."""

    def __init__(self, size, total):
        super().__init__(f"out of memory allocating {size} of {total} bytes")


def test_chunk_error_keeps_a_cause_that_cannot_be_rebuilt_as_its_text():
    from gpuexec.executor.errors import falls_back, retryable

    cause = _BuiltFromSizes(8, 16)
    error = ChunkError("file x, entries [0, 10) failed", (cause,), retry=retryable(cause))
    again = pickle.loads(pickle.dumps(error))
    assert type(again.__cause__) is RuntimeError
    assert str(again.__cause__) == "_BuiltFromSizes: out of memory allocating 8 of 16 bytes"
    assert falls_back(again) == "out of memory"


def test_keys_name_the_chunk_and_group_by_pool():
    run = keys.new_run_token()
    key = keys.chunk_key("cpu", run, 7, "DY:nano_dy.root[0:20]")
    assert key_split(key) == "chunk-cpu"
    assert keys.parse(key) == {"kind": "chunk", "pool": "cpu", "run": run, "index": 7,
                               "label": "DY:nano_dy.root[0:20]"}
    assert key_split(keys.merge_key(run, 0, 3)) == "merge"
    assert keys.parse(keys.merge_key(run, 1, 3))["run"] == run
    assert keys.parse("something-else") is None


def test_embedded_workers_start_without_dasks_malloc_trim_threshold(monkeypatch):
    """Dask's nanny gives workers MALLOC_TRIM_THRESHOLD_=65536, which made an ADL chunk
    1.5x slower (cluster.NANNY_SETTINGS); gpuexec's workers start without it, and keep a
    value the user set. Their Dask profiler samples every 100 ms (Dask's: 10 ms), or not
    at all with gpuexec.worker.profile-interval 0; their event-loop tick and system
    monitor run every 200 ms and 1 s (Dask's: 20 ms and 500 ms, gpuexec.worker.*) unless
    Dask's configuration sets another interval."""
    import dask

    def seen(dask_worker):
        return (os.environ.get("MALLOC_TRIM_THRESHOLD_"),
                dask.config.get("distributed.worker.profile.enabled"),
                dask.config.get("distributed.worker.profile.interval"),
                # the timers as the worker runs them, in ms
                dask_worker.periodic_callbacks["tick"].callback_time,
                dask_worker.periodic_callbacks["monitor"].callback_time)

    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    spec = GPUCluster(1, 1, dashboard_address="127.0.0.1:0").spec
    try:
        client = shared_client(spec, announce=None)
        assert set(client.run(seen).values()) == {(None, True, "100ms", 200, 1000)}
        assert client.run_on_scheduler(
            lambda dask_scheduler: dask_scheduler.periodic_callbacks["tick"].callback_time) == 200
    finally:
        close_shared(spec)
    assert dask.config.get("distributed.worker.profile.interval") == "10ms"  # here: Dask's
    assert dask.config.get("distributed.admin.tick.interval") == "20ms"
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1048576")
    with dask.config.set({"gpuexec.worker.profile-interval": 0}):
        spec = GPUCluster(1, 1, dashboard_address="127.0.0.1:0").spec
    try:
        with dask.config.set({"distributed.admin.tick.interval": "50ms"}):  # the user's
            client = shared_client(spec, announce=None)
        assert set(client.run(seen).values()) == {("1048576", False, "10ms", 50, 1000)}
    finally:
        close_shared(spec)


def test_the_deploy_worker_command_applies_the_same_nanny_settings(monkeypatch):
    import dask
    import distributed.cli.dask_worker as dask_worker

    from gpuexec.scheduler import worker_cli

    seen = {}
    monkeypatch.delenv("DASK_DISTRIBUTED__WORKER__PROFILE__INTERVAL", raising=False)
    monkeypatch.setattr(dask_worker, "main", lambda: seen.update(
        dask.config.get("distributed.nanny.pre-spawn-environ"),
        interval=dask.config.get("distributed.worker.profile.interval"),
        tick=dask.config.get("distributed.admin.tick.interval"),
        monitor=dask.config.get("distributed.admin.system-monitor.interval")))
    worker_cli.main()
    assert seen.get("MALLOC_TRIM_THRESHOLD_", "absent") is None
    assert seen["interval"] == "100ms"
    assert (seen["tick"], seen["monitor"]) == ("200ms", "1s")
    assert dask.config.get("distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_") == 65536
    # an interval the Slurm script's environment sets is kept
    monkeypatch.setenv("DASK_DISTRIBUTED__WORKER__PROFILE__INTERVAL", "20ms")
    with dask.config.set({"distributed.worker.profile.interval": "20ms"}):
        worker_cli.main()
    assert seen["interval"] == "20ms"


def test_cluster_spec_lists_pools_with_resources_env_and_threads():
    spec = ClusterSpec.local(cpu_workers=3, threads_per_worker=2)
    assert spec == ClusterSpec.local(cpu_workers=3, threads_per_worker=2)  # shared by key
    (pool,) = spec.pools
    assert pool.task_resources_dict() == {"CPU": 1} and pool.backend == "cpu"
    workers = spec.worker_specs()
    assert sorted(workers) == ["cpu-0", "cpu-1", "cpu-2"]
    options = workers["cpu-0"]["options"]
    assert options["resources"] == {"CPU": 2} and options["nthreads"] == 2
    assert options["env"]["NUMBA_NUM_THREADS"] == "2" and options["host"] == "127.0.0.1"
    with pytest.raises(ValueError, match="lower-case letters"):
        WorkerPool("gpu0", 1, task_resources={"GPU": 1})
    with pytest.raises(ValueError, match="task_resources"):
        WorkerPool("gpu", 1)
    with pytest.raises(ValueError, match="unique"):
        ClusterSpec(pools=(WorkerPool.cpu(1), WorkerPool.cpu(1)))


def test_a_task_that_kills_its_workers_is_named_by_file_and_range():
    from distributed.scheduler import KilledWorker

    item = processor.executor.WorkItem("DY", DY, "Events", 20, 40, b"")
    key = keys.chunk_key("cpu", keys.new_run_token(), 1, keys.item_label(item))
    err = explain(KilledWorker(key, None, 3), ["first", item])
    assert isinstance(err, ChunkError) and type(err.__cause__) is KilledWorker
    assert str(err).startswith(f"file {DY} (dataset 'DY', tree 'Events'), entries [20, 40): "
                               "killed 4 workers")


def test_outputs_that_cannot_be_merged_name_their_chunks():
    from gpuexec.executor import MergeError

    a = _Partial({"n": 1}, False, {3: 5}, [], [], [])
    b = _Partial({"n": "one"}, False, {4: 5}, [], [], [])
    with pytest.raises(MergeError) as caught:
        _merge([a, b], compression=1)
    again = pickle.loads(pickle.dumps(caught.value))  # it crosses from a worker
    assert again.indices == (3, 4) and "TypeError" in str(again)
    items = [processor.executor.WorkItem("DY", DY, "Events", 10 * i, 10 * i + 10, b"")
             for i in range(5)]
    err = explain(again, items)
    assert isinstance(err, ChunkError) and err.__cause__ is again
    assert str(err).startswith("merging the outputs of 2 chunk(s) failed (file "
                               f"{DY} (dataset 'DY', tree 'Events'), entries [30, 40) ... ")
    assert "entries [40, 50)" in str(err) and "TypeError" in str(err)


def test_a_processing_call_joins_the_preprocessing_of_its_files():
    from gpuexec.scheduler.report import CallReport, RunReport

    def call(stage, *files):
        return CallReport(stage, "entries", len(files), files=frozenset(("DY", f) for f in files))

    run = RunReport().add(call("preprocessing", "a.root", "bad.root"))
    assert run.add(call("processing", "a.root")) is run and run.processing.files
    # a later processing call (files preprocessed earlier, or others) starts a new run
    assert run.add(call("processing", "a.root")) is not run
    # files not preprocessed join too when every file read there is processed (Runner with
    # c.root's metadata cached); a call missing a file read there starts a new run
    other = RunReport().add(call("preprocessing", "a.root"))
    assert other.add(call("processing", "a.root", "c.root")).preprocessing is other.preprocessing
    other = RunReport().add(call("preprocessing", "a.root"))
    assert other.add(call("processing", "b.root", "c.root")).preprocessing is None


def test_processor_token_names_a_processor_by_its_pickle():
    """Read-ahead learns columns per processor: equal processors (the same pickle) share a
    token, different ones do not, compressed ones (Runner(processor_compression=...)) are
    named by their bytes, and any other work function gets none."""
    from gpuexec.io.staging import processor_token

    def work(proc):
        return functools.partial(processor.Runner._work_function, processor_instance=proc)

    class Tagged(DimuonProcessor):
        def __init__(self, tag):
            self.tag = tag

    assert processor_token(work(Tagged(1))) == processor_token(work(Tagged(1)))
    assert processor_token(work(Tagged(1))) != processor_token(work(Tagged(2)))
    assert processor_token(work(b"lz4 bytes")) == processor_token(work(b"lz4 bytes"))
    assert processor_token(functools.partial(print, processor_instance=Tagged(1))) is None
    assert processor_token(work(None)) is None


def test_copies_share_the_report_and_settings():
    ex = GPUExecutor(client=GPUCluster(cpu_workers=2), treereduction=5, status=False)
    copy = ex.copy(desc="Preprocessing", compression=None)
    assert copy._shared is ex._shared and copy.desc == "Preprocessing"
    assert copy.treereduction == 5 and copy.cluster_spec() == ex.cluster_spec()
    with pytest.raises(ValueError):
        GPUExecutor(treereduction=1)
    with pytest.raises(ValueError, match="merge_on"):
        GPUExecutor(merge_on="scheduler")
    from gpuexec import config

    for key, value in (("reading.nvcomp.min-streams", 0), ("reading.nvcomp.slots", -1),
                       ("reading.nvcomp.wait", -0.1), ("reading.nvcomp.wait", float("nan")),
                       ("reading.open-files", -2), ("gpu.sync", "sleep"),
                       ("worker.profile-interval", -0.1)):
        with dask.config.set({f"gpuexec.{key}": value}), \
                pytest.raises(ValueError, match=f"gpuexec.{key}"):
            config.ReadingSettings.read()
            config.WorkerSettings.read()
    with dask.config.set({"gpuexec.worker.profile-interval": 0}):
        assert GPUExecutor(client=GPUCluster(cpu_workers=1)).cluster_spec().profile_interval == 0


class _ProbeClient:
    """Answers ``submit`` with a future of ``answer`` (an exception: raised by
    ``result``), done at once unless ``done`` is False; one scheduler address each."""

    def __init__(self, answer, done: bool = True):
        self.answer, self.is_done, self.submitted, self.cancelled = answer, done, [], 0
        self.scheduler = type("Scheduler", (), {"address": f"tcp://probe-{id(self)}"})()

    def submit(self, fn, *args, pure=True, resources=None, key=None):
        self.submitted.append((fn, resources, key))
        client = self

        class Future:
            def done(self):
                return client.is_done

            def cancel(self):
                client.cancelled += 1

            def result(self, timeout=None):
                if isinstance(client.answer, BaseException):
                    raise client.answer
                return client.answer

        return Future()


def _probe_pools(backend: str) -> dict:
    return {"cpu": WorkerPool("cpu", 1, resources={"CPU": 1}, task_resources={"CPU": 1}),
            "gpu": WorkerPool("gpu", 1, resources={"GPU": 1}, task_resources={"GPU": 1},
                              backend=backend)}


def _probe_call(ex, client, backend: str = "cuda", read_on_device: bool = True) -> list:
    """What a processing call does about nvCOMP (ask before the chunks, hear after);
    the nvCOMP warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        probe = probes.ask_for_nvcomp(ex._shared, client, _probe_pools(backend),
                                      read_on_device)
        probes.hear_nvcomp(ex._shared, client, probe)
    return [w for w in caught if "nvCOMP is not installed" in str(w.message)]


def test_nvidia_gpu_workers_without_nvcomp_are_warned_of_once_per_cluster():
    """A processing call asks an NVIDIA GPU worker whether nvCOMP is installed there, and
    warns where it is not (the workers would inflate on the host); a cluster is asked
    once, and its answer reaches every executor on it."""
    from gpuexec.io import device_read as device_reading
    from gpuexec.executor import NVCOMP_UNKNOWN, nvcomp_probe

    ex, client = GPUExecutor(status=False), _ProbeClient(None)
    assert ex.nvcomp_on_gpu_workers is False  # not heard yet
    found = _probe_call(ex, client)
    assert len(found) == 1 and "gpuexec[cuda]" in str(found[0].message)
    assert [(fn, res) for fn, res, _k in client.submitted] == [(nvcomp_probe, {"GPU": 1})]
    assert client.submitted[0][2].startswith("nvcomp-probe-")
    assert ex.copy(desc="Processing").nvcomp_on_gpu_workers is None
    other = GPUExecutor(status=False)  # another executor on the same cluster
    assert not _probe_call(other, client) and not _probe_call(ex, client)
    assert len(client.submitted) == 1 and other.nvcomp_on_gpu_workers is None

    installed = GPUExecutor(status=False)
    assert not _probe_call(installed, _ProbeClient("6.0.0.12"))
    assert installed.nvcomp_on_gpu_workers == "6.0.0.12"

    # a probe that failed leaves it unknown; one not run by the call's end is cancelled
    # (the call is not held up) and asked again next call
    lost = GPUExecutor(status=False)
    assert not _probe_call(lost, _ProbeClient(TimeoutError("no GPU worker")))
    assert lost.nvcomp_on_gpu_workers == NVCOMP_UNKNOWN
    late, busy = GPUExecutor(status=False), _ProbeClient(None, done=False)
    assert not _probe_call(late, busy)
    assert busy.cancelled == 1 and late.nvcomp_on_gpu_workers is False
    busy.is_done = True
    assert len(_probe_call(late, busy)) == 1 and len(busy.submitted) == 2

    # not asked: a CPU-backed or AMD GPU pool, or GPU workers that read through uproot
    # (gpuexec.reading.read-on-device false)
    for ex, backend, direct in ((GPUExecutor(status=False), "cpu", True),
                                (GPUExecutor(status=False), "hip", True),
                                (GPUExecutor(status=False), "cuda", False)):
        client = _ProbeClient(None)
        assert not _probe_call(ex, client, backend, direct)
        assert client.submitted == [] and ex.nvcomp_on_gpu_workers is False
    # a user's GPU workers pick their backend: asked, and one that is not NVIDIA's says so
    import gpuexec.executor as executor_module

    amd = GPUExecutor(status=False)
    client = _ProbeClient(executor_module.NOT_NVIDIA)
    assert not _probe_call(amd, client, "auto") and len(client.submitted) == 1
    assert amd.nvcomp_on_gpu_workers is False


# ------------------------------------------------------------------- on a cluster
def test_runner_matches_iterative_on_real_samples(executor, reference):
    out = runner(executor, chunksize=100)(FILESET, DimuonProcessor(), treename="Events")
    assert_same_output(out, reference)
    assert out["mass"].sum() > 0 and out["DIMUON"]["pairs"] > 0

    report = executor.report
    pre, proc = report.preprocessing, report.processing
    assert (pre.stage, pre.chunks, pre.expected, pre.processed) == ("preprocessing", 3, 3, 3)
    assert proc.stage == "processing" and proc.chunks == 4  # DY 1, DIMUON 1, TT 2
    assert proc.expected == proc.processed == sum(ENTRIES.values())
    assert proc.pools == {"cpu": 4} and not report.skipped
    assert sum(run.units for run in proc.runs) == 280
    assert {run.worker for run in proc.runs} <= {"cpu-0", "cpu-1"}
    assert "nano_tt_v15.root[100:200]" in {run.label.split(":", 1)[1] for run in proc.runs}
    # the workers keep the files they read open (open_files), and close them on request
    assert 3 <= executor.close_files() <= 3 * 2
    assert executor.close_files() == 0


def test_one_cpu_pool_submits_every_chunk_at_once(executor, reference, monkeypatch):
    """No placement, no window: the first submission holds every chunk (as coffea's
    DaskExecutor does), and the output is unchanged."""
    from gpuexec.executor.loop import _Loop

    batches = []
    submit = _Loop._submit

    def recording(self, pool, indices, *args, **kwargs):
        batches.append(len(indices))
        return submit(self, pool, indices, *args, **kwargs)

    monkeypatch.setattr(_Loop, "_submit", recording)
    with dask.config.set({"gpuexec.placement.window": 0.5}):
        out = runner(executor, chunksize=100)(FILESET, DimuonProcessor(), treename="Events")
    assert_same_output(out, reference)
    from gpuexec.scheduler.placement import pool_slots

    chunks = executor.report.processing.chunks
    assert chunks > pool_slots(executor.cluster_spec().pools[-1])  # more than a window held
    assert batches[-1] == chunks  # processing: one batch of every chunk


def test_an_embedded_cluster_of_cpu_workers_submits_unrestricted_tasks(executor, reference,
                                                                       monkeypatch):
    """Every worker is a CPU worker: chunk and merge tasks carry no resources, so Dask
    queues them and hands each to the next free worker (restricted tasks are bound to a
    worker when submitted); a client's cluster keeps them (next tests)."""
    client = executor.live_client
    seen = []
    for name in ("map", "submit"):
        real = getattr(client, name)

        def recording(*args, _real=real, **kwargs):
            seen.append(kwargs.get("resources"))
            return _real(*args, **kwargs)

        monkeypatch.setattr(client, name, recording)
    out = runner(executor, chunksize=100)(FILESET, DimuonProcessor(), treename="Events")
    assert_same_output(out, reference)
    assert seen and set(map(repr, seen)) == {"None"}


def heap_frozen(_item):
    import gc

    return {"frozen": {gc.get_freeze_count() > 0}}


def test_workers_and_the_client_freeze_their_long_lived_heap(executor):
    """After a worker's first task (and in the process that started the embedded
    cluster) the objects alive are frozen: full collections then skip the imported stack."""
    import gc

    assert gc.get_freeze_count() > 0  # the client: frozen when its cluster started
    executor(list(range(8)), heap_frozen, None)  # every worker runs a first task
    out, _ = executor(list(range(8)), heap_frozen, None)
    assert out == {"frozen": {True}}


def nvcomp_settings(_item):
    from gpuexec.io import device_read as device_reading

    return {"nvcomp": {(device_reading.NVCOMP_MIN_STREAMS, device_reading.NVCOMP_SLOTS,
                        device_reading.NVCOMP_WAIT)}}


def test_the_nvcomp_settings_reach_every_task(executor):
    """gpuexec.reading.nvcomp.* (min-streams, slots, wait) are set in the worker for each
    task (a worker keeps the last call's values otherwise); unset, the defaults."""
    from gpuexec.io import device_read as device_reading

    with dask.config.set({"gpuexec.reading.nvcomp.min-streams": 9,
                          "gpuexec.reading.nvcomp.slots": 3,
                          "gpuexec.reading.nvcomp.wait": "250ms"}):
        out, _ = executor(list(range(8)), nvcomp_settings, None)
    assert out == {"nvcomp": {(9, 3, 0.25)}}
    out, _ = executor(list(range(8)), nvcomp_settings, None)
    assert out == {"nvcomp": {(device_reading.NVCOMP_MIN_STREAMS, device_reading.NVCOMP_SLOTS,
                               device_reading.NVCOMP_WAIT)}}


def test_preprocessing_through_the_executor_gives_coffeas_chunks(executor):
    fileset = {"DY": [DY], "DIMUON": [DIMUON]}
    ours = list(runner(executor, chunksize=15).preprocess(fileset, treename="Events"))
    theirs = list(runner(processor.IterativeExecutor(status=False), chunksize=15)
                  .preprocess(fileset, treename="Events"))
    assert sorted(ours, key=str) == sorted(theirs, key=str)
    assert len(ours) == 6 and sum(len(item) for item in ours) == 80
    assert executor.report.preprocessing.processed == 2


def test_a_few_files_are_preprocessed_in_the_client_more_on_the_cluster(executor):
    """Up to METADATA_HERE files' metadata is read in the client (a Dask round trip cost
    more than the read); more go to the embedded cluster's workers. Both give coffea's
    chunks, and the report says where each file was read."""
    from gpuexec.executor import METADATA_HERE

    def preprocessed(n_datasets):
        fileset = {f"d{k}": [DY] for k in range(n_datasets)}
        ours = list(runner(executor, chunksize=15).preprocess(fileset, treename="Events"))
        theirs = list(runner(processor.IterativeExecutor(status=False), chunksize=15)
                      .preprocess(fileset, treename="Events"))
        assert sorted(ours, key=str) == sorted(theirs, key=str)
        report = executor.report.preprocessing
        assert report.processed == n_datasets
        return {(run.pool, run.worker) for run in report.runs}

    assert preprocessed(1) == preprocessed(METADATA_HERE) == {("client", "client")}
    assert {pool for pool, _ in preprocessed(METADATA_HERE + 1)} == {"cpu"}


def test_embedded_cluster_is_shared_bound_locally_and_announced_once(executor):
    assert executor.printed_at_start.count("dashboard: http://127.0.0.1:") == 1
    spec = executor.cluster_spec()
    announced = []
    client = shared_client(spec, announce=announced.append)
    assert client is executor.live_client and announced == []  # already running: silent
    assert executor.copy(desc="x").cluster_spec() == spec
    workers = client.scheduler_info()["workers"]
    assert len(workers) == 2
    for address, info in workers.items():
        assert address.startswith("tls://127.0.0.1:")
        assert info["resources"] == {"CPU": 1} and info["nthreads"] == 1
    assert client.scheduler.address.startswith("tls://127.0.0.1:")


def worker_threads(_item):
    import numba

    import gpuexec.kernels as gk

    return {"numba": {numba.get_num_threads()}, "gk": {gk.get_num_threads()},
            "backend": {gk.get_backend("cpu") is not None}}


def test_workers_numba_threads_equal_their_threads(executor):
    """On this 2-core machine numba would start 2 threads per process by default."""
    out, status = executor(list(range(6)), worker_threads, None)
    assert status == 0
    assert out == {"numba": {1}, "gk": {1}, "backend": {True}}
    import numba

    pools = executor.live_client.run(lambda: numba.config.NUMBA_NUM_THREADS)
    assert set(pools.values()) == {1}


def square(x):
    return {"sum": x * x, "items": 1}


@pytest.mark.parametrize("merge_on", ["client", "cluster"])
def test_generic_items_merged_in_the_client_or_a_tree_and_status_0(executor, merge_on):
    from gpuexec.executor.merging import TreeMerge

    merge_tasks = []
    real = TreeMerge.submit

    def counted(self, groups, level):
        merge_tasks.extend(groups)
        return real(self, groups, level)

    ex = executor.copy(treereduction=3, merge_on=merge_on)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(TreeMerge, "submit", counted)
        out, status = ex(list(range(50)), square, {"sum": 0, "items": 0})
    assert status == 0 and out == {"sum": sum(x * x for x in range(50)), "items": 50}
    call = ex.report.processing
    assert call.stage == "items" and call.processed == 50
    # where the call's time went: submission, the last task seen, the output merged
    p = call.phases
    assert 0 < p["first_submitted"] <= p["last_task_seen"] <= p["merged"] <= call.seconds
    if merge_on == "client":
        assert p["last_task_seen"] <= p["last_output_fetched"] <= p["merged"]
    # the client adds the outputs up itself; the tree merges 3 at a time on the cluster
    assert (len(merge_tasks) == 0) if merge_on == "client" else (len(merge_tasks) >= 50 // 3)
    assert GPUExecutor(**EMBEDDED)([], square, "untouched") == ("untouched", 0)


def square_or_text(x):
    return {"sum": "text" if x == 7 else x * x}


def test_outputs_the_client_cannot_add_name_their_chunks(executor):
    ex = executor.copy(merge_on="client")
    with pytest.raises(ChunkError, match=r"merging the outputs of \d+ chunk\(s\) failed") as caught:
        ex(list(range(12)), square_or_text, None)
    assert "TypeError" in str(caught.value)


def test_progress_bar_shows_chunks_per_pool(executor, capsys):
    ex = executor.copy(status=True, desc="Processing", unit="chunk")
    out, _ = ex(list(range(30)), square, None)
    assert out["items"] == 30
    shown = capsys.readouterr().out
    assert "Processing (cpu)" in shown and "30/30" in shown and "Merging" in shown
    # merged in the client: the merges bar counts the 30 outputs added up there
    assert any("Merging" in line and "30/30" in line for line in shown.splitlines())


@pytest.fixture(scope="module")
def client_with_a_bare_worker():
    """A user's cluster: one worker declaring CPU, one declaring nothing (in-process
    workers, cheap to start)."""
    from distributed import Client, Scheduler, SpecCluster, Worker

    cluster = SpecCluster(
        scheduler={"cls": Scheduler, "options": {"dashboard_address": "127.0.0.1:0",
                                                 "host": "127.0.0.1"}},
        workers={"with-cpu": {"cls": Worker, "options": {"nthreads": 1, "resources": {"CPU": 1}}},
                 "bare": {"cls": Worker, "options": {"nthreads": 1}}})
    client = Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


def test_client_passed_in_runs_only_on_workers_with_the_resource(client_with_a_bare_worker):
    client = client_with_a_bare_worker
    ex = GPUExecutor(client=client, status=False)
    out = runner(ex, chunksize=20)({"DY": [DY]}, DimuonProcessor(), treename="Events")
    want = runner(processor.IterativeExecutor(status=False), chunksize=20)(
        {"DY": [DY]}, DimuonProcessor(), treename="Events")
    assert_same_output(out, want)
    out, _ = ex(list(range(40)), square, None)
    assert out["items"] == 40
    assert {run.worker for run in ex.report.processing.runs} == {"with-cpu"}
    ex.close()  # a client passed in belongs to its owner
    assert client.status == "running"


def test_client_without_the_resource_is_refused_up_front():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address="127.0.0.1:0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        with pytest.raises(RuntimeError, match=r"declares the resources \{'CPU': 1\}"):
            GPUExecutor(client=client, status=False)(list(range(3)), square, None)


def test_close_stops_the_embedded_cluster_and_a_later_call_restarts_it():
    ex = GPUExecutor(client=GPUCluster(cpu_workers=1, dashboard_address="127.0.0.1:0"),
                     status=False)
    with contextlib.redirect_stdout(io.StringIO()):
        with ex:
            assert ex(list(range(3)), square, None)[0]["items"] == 3
            client = shared_client(ex.cluster_spec())
        assert client.status in ("closed", "closing")
    from gpuexec.scheduler.cluster import running_specs

    assert ex.cluster_spec() not in running_specs()
    ex.close()  # closing twice is harmless


def test_outputs_fetched_together_fail_alone():
    """The outputs of tasks seen complete together are fetched in one gather; where that
    fails, each is fetched alone, so one output that cannot be fetched (its GPU worker
    died) fails alone and the others are kept."""

    class Done:  # a completed future: its output, or the error fetching it raises
        def __init__(self, value=None, error=None):
            self.value, self.error = value, error

        def result(self):
            if self.error is not None:
                raise self.error
            return self.value

    class Client:  # distributed's gather raises at the first output it cannot fetch
        gathers = 0

        def gather(self, futures):
            self.gathers += 1
            return [f.result() for f in futures]

    client = Client()
    assert _gather_each(client, [Done(1), Done(2)]) == [(1, None), (2, None)]
    assert client.gathers == 1
    lost = OSError("worker gone")
    outcomes = _gather_each(client, [Done(1), Done(error=lost), Done(3)])
    assert outcomes[0] == (1, None) and outcomes[2] == (3, None)
    assert outcomes[1] == (None, lost)
