"""GPUExecutor under faults: nothing lost, nothing doubled, every failure named.

A worker process killed mid-run (SIGKILL from the test while its chunks run), files
truncated or with a corrupt basket (copies of a real sample in tmp_path), chunks
skipped with ``Runner(skipbadfiles=True)`` and a chunk whose file holds fewer entries
than its work item says. Exact event totals throughout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import signal
import sys
import threading
import time

import cloudpickle
import pytest
import uproot
from coffea import processor

from gpuexec.executor import ChunkError, GPUExecutor
from gpuexec.executor.errors import chain as _chain
from gpuexec.scheduler.cluster import shared_client
from gpuexec.scheduler.report import EntriesMismatch, SkippedChunksWarning
from test_executor import DIMUON, DY, EMBEDDED, DimuonProcessor, assert_same_output, runner

cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


class SlowDimuonProcessor(DimuonProcessor):
    """Takes its time, so that a worker can be killed while it runs."""

    def process(self, events):
        time.sleep(0.5)
        return super().process(events)


@pytest.fixture(scope="module")
def executor():
    # same settings as tests/test_executor.py: the same embedded cluster; no retries
    # inside tasks, so that failing chunks fail fast
    ex = GPUExecutor(**EMBEDDED, retries=0)
    with contextlib.redirect_stdout(io.StringIO()):
        ex.live_client = shared_client(ex.cluster_spec())
    return ex


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    """A truncated copy of nano_dy.root (cannot be opened) and one whose Muon_pt basket
    is zeroed (opens, fails when Muon_pt is read)."""
    folder = tmp_path_factory.mktemp("bad")
    data = open(DY, "rb").read()
    truncated = folder / "nano_dy_truncated.root"
    truncated.write_bytes(data[: len(data) // 2])

    branch = uproot.open(DY)["Events"]["Muon_pt"]
    seek, size = int(branch.member("fBasketSeek")[0]), int(branch.member("fBasketBytes")[0])
    corrupt = bytearray(data)
    corrupt[seek + 40: seek + size] = bytes(size - 40)  # keep the key header, zero the payload
    corrupt_path = folder / "nano_dy_corrupt_basket.root"
    corrupt_path.write_bytes(bytes(corrupt))
    return {"truncated": str(truncated), "corrupt": str(corrupt_path)}


@pytest.fixture(scope="module")
def dy_items(executor):
    return list(runner(executor, chunksize=20).preprocess({"DY": [DY]}, treename="Events"))


@pytest.fixture(scope="module")
def dy_reference():
    return runner(processor.IterativeExecutor(status=False), chunksize=20)(
        {"DY": [DY]}, DimuonProcessor(), treename="Events")


def test_worker_killed_mid_run_has_its_chunks_rerun_elsewhere(executor):
    client = executor.live_client
    items = list(runner(executor, chunksize=20).preprocess(
        {"DY": [DY], "DIMUON": [DIMUON]}, treename="Events"))
    assert len(items) == 4
    clean = runner(executor)(items, SlowDimuonProcessor())

    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    killed = []

    def kill_when_busy():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            running = client.processing(workers=[victim]).get(victim, ())
            if any(str(key).startswith("chunk-cpu-") for key in running):
                time.sleep(0.2)
                os.kill(pids[victim], signal.SIGKILL)
                killed.append(victim)
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_when_busy)
    killer.start()
    try:
        out = runner(executor)(items, SlowDimuonProcessor())
    finally:
        killer.join()
        client.wait_for_workers(2, timeout=120)  # the nanny restarts the worker
    assert killed == [victim], "the worker was not killed while it ran chunks"

    assert_same_output(out, clean)
    assert out["DY"]["entries"] == 40 and out["DIMUON"]["entries"] == 40
    report = executor.report.processing
    assert report.expected == report.processed == 80
    assert len(report.runs) == 4 and sum(run.units for run in report.runs) == 80
    rerun = [r for r in report.reruns if r.worker == victim]
    assert rerun, f"no task recorded as re-run after {victim} died: {report.reruns}"
    assert all(r.what in ("assigned to it", "result lost") for r in rerun)
    assert any("[" in r.label for r in rerun)  # at least one chunk (file[start:stop])


def test_truncated_file_raises_naming_file_and_entry_range(executor, dy_items, bad_files):
    truncated = bad_files["truncated"]
    bad = [dataclasses.replace(item, filename=truncated) for item in dy_items]
    with pytest.raises(ChunkError) as info:
        runner(executor)(bad, DimuonProcessor())
    message = str(info.value)
    assert truncated in message
    assert "entries [0, 20)" in message or "entries [20, 40)" in message
    assert any(isinstance(cause, OSError) for cause in _chain(info.value))


def test_result_type_runner_gets_the_error_as_err(executor, dy_items, bad_files):
    """Runner(use_result_type=True) matches skipbadfiles against the exception chain,
    which therefore survives the trip from the worker."""
    bad = [dataclasses.replace(item, filename=bad_files["truncated"]) for item in dy_items]
    result = runner(executor, skipbadfiles=True, use_result_type=True)(bad, DimuonProcessor())
    assert isinstance(result, processor.Err) and isinstance(result.exception, ChunkError)
    assert bad_files["truncated"] in str(result.exception)


def test_unreadable_file_in_a_fileset_fails_naming_it(executor, bad_files):
    truncated = bad_files["truncated"]
    with pytest.raises(ChunkError, match=f"file {truncated}.*reading its metadata"):
        runner(executor, chunksize=20)({"DY": [truncated]}, DimuonProcessor(), treename="Events")


def test_corrupt_basket_raises_naming_file_and_entry_range(executor, bad_files):
    corrupt = bad_files["corrupt"]
    with pytest.raises(ChunkError, match=r"entries \[(0, 20|20, 40)\)") as info:
        runner(executor, chunksize=20)({"DY": [corrupt]}, DimuonProcessor(), treename="Events")
    assert corrupt in str(info.value)
    assert any(isinstance(cause, ValueError) for cause in _chain(info.value))
    # it was read fine in preprocessing: the failure is the chunk's
    assert executor.report.preprocessing.processed == 1


def test_skipbadfiles_skips_an_unreadable_file_and_says_so(executor, bad_files, dy_reference):
    truncated = bad_files["truncated"]
    with pytest.warns(SkippedChunksWarning, match="nano_dy_truncated.root"):
        out = runner(executor, skipbadfiles=True, chunksize=20)(
            {"DY": [DY, truncated]}, DimuonProcessor(), treename="Events")
    assert_same_output(out, dy_reference)
    (skipped,) = executor.report.skipped
    assert (skipped.stage, skipped.filename) == ("preprocessing", truncated)
    assert skipped.entrystart is None and skipped.entries is None  # the whole file
    assert skipped.exception.startswith("OSError: ") and "received 0 bytes" in skipped.exception
    assert executor.report.processing.processed == executor.report.processing.expected == 40


def test_skipped_chunks_are_reported_in_metrics(executor, dy_items, bad_files, dy_reference):
    truncated = bad_files["truncated"]
    bad = [dataclasses.replace(item, filename=truncated) for item in dy_items]
    with pytest.warns(SkippedChunksWarning, match=r"entries \[0, 20\)"):
        out, metrics = runner(executor, skipbadfiles=True, savemetrics=True)(
            dy_items + bad, DimuonProcessor())
    assert_same_output(out, dy_reference)
    assert metrics["entries"] == 40 and metrics["chunks"] == 4
    skipped = sorted(metrics["skipped"], key=lambda s: s["entrystart"])
    assert [(s["filename"], s["entrystart"], s["entrystop"], s["stage"]) for s in skipped] == [
        (truncated, 0, 20, "processing"), (truncated, 20, 40, "processing")]
    assert all("OSError" in s["exception"] for s in skipped)
    report = executor.report.processing
    assert report.expected == report.processed == 40 and len(report.skipped) == 2


def test_fewer_entries_than_the_work_item_says_is_an_error(executor, dy_items):
    """A stale work item (file now shorter than its metadata said): uproot clamps the
    range and coffea would process 40 of 60 entries without a word."""
    stale = dataclasses.replace(dy_items[0], entrystart=0, entrystop=60)
    with pytest.raises(EntriesMismatch,
                       match=r"entries \[0, 60\)\): 40 entries processed, 60 expected"):
        runner(executor, savemetrics=True)([stale], DimuonProcessor())
    report = executor.report.processing  # recorded all the same, for the post-mortem
    assert (report.expected, report.processed) == (60, 40)


def test_embedded_cluster_is_closed_at_interpreter_exit(tmp_path):
    """A script that never calls close(): its cluster goes down with it, cleanly, and
    no worker process outlives it."""
    import subprocess

    script = tmp_path / "run.py"
    script.write_text(
        "import os\n"
        "from gpuexec import GPUCluster, GPUExecutor\n"
        "from gpuexec.scheduler.cluster import shared_client\n"
        "def double(x):\n    return {'n': 2 * x}\n"
        "if __name__ == '__main__':\n"
        "    ex = GPUExecutor(client=GPUCluster(cpu_workers=1, dashboard_address='127.0.0.1:0'),\n"
        "                     status=False)\n"
        "    out, _ = ex(list(range(5)), double, None)\n"
        "    pids = shared_client(ex.cluster_spec()).run(os.getpid).values()\n"
        "    print('result', out['n'], 'workers', *pids)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("dashboard: http://127.0.0.1:") == 1
    result = done.stdout.split("result ", 1)[1].split()
    assert result[0] == "20" and result[1] == "workers"
    for pid in map(int, result[2:]):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


class FailingProcessor(DimuonProcessor):
    def process(self, events):
        raise ValueError("no muons here (test)")


def test_missing_file_is_reported_skipped_when_another_was_cached(executor, dy_reference,
                                                                    tmp_path):
    """Runner preprocesses only the files missing from its metadata cache: the missing
    file, skipped there, stays in the run's report next to the cached file's chunks."""
    cache = {}
    runner(executor, chunksize=20, metadata_cache=cache)(
        {"DY": [DY]}, DimuonProcessor(), treename="Events")
    missing = str(tmp_path / "missing.root")
    with pytest.warns(SkippedChunksWarning, match="missing.root"):
        out = runner(executor, skipbadfiles=True, chunksize=20, metadata_cache=cache)(
            {"DY": [DY, missing]}, DimuonProcessor(), treename="Events")
    assert_same_output(out, dy_reference)
    report = executor.report
    assert [s.filename for s in report.skipped] == [missing]
    assert report.processing.processed == 40


def test_a_failed_call_is_in_the_report(executor, dy_items):
    with pytest.raises(ChunkError, match="no muons here"):
        runner(executor)(dy_items, FailingProcessor())
    call = executor.report.processing
    assert call.error is not None and "no muons here" in call.error
    assert executor.report.error == call.error and call.chunks == len(dy_items)


def test_the_report_exists_when_preprocessing_fails(executor, bad_files):
    with pytest.raises(ChunkError):
        runner(executor, chunksize=20)({"DY": [bad_files["truncated"]]}, DimuonProcessor(),
                                       treename="Events")
    report = executor.report
    assert report is not None and report.processing is None
    assert report.preprocessing.error is not None
    assert bad_files["truncated"] in report.preprocessing.error


def test_concurrent_runs_each_get_their_own_report(executor):
    """Two Runners on one executor at once, in two threads: two reports, each with its
    own files and entries."""
    before = len(executor.reports)
    outs = {}

    def run(name, path):
        outs[name] = runner(executor, chunksize=20)({name: [path]}, SlowDimuonProcessor(),
                                                    treename="Events")

    threads = [threading.Thread(target=run, args=a) for a in (("DY", DY), ("DIMUON", DIMUON))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(outs) == {"DY", "DIMUON"}
    reports = executor.reports[before:]
    assert len(reports) == 2
    for report in reports:
        datasets = {d for d, _ in report.processing.files}
        assert len(datasets) == 1
        assert {d for d, _ in report.preprocessing.files} == datasets
        assert report.processing.processed == 40


def test_skipbadfiles_skips_a_file_that_is_not_root_or_lacks_the_tree(executor, tmp_path,
                                                                     dy_reference):
    """Beyond coffea (OSError only): with skipbadfiles=True a file that is not ROOT or has
    no such tree is skipped and reported; a run left with no file fails."""
    text = tmp_path / "notes.root"
    text.write_text("not a ROOT file\n" * 100)
    with pytest.warns(SkippedChunksWarning, match="notes.root"):
        out = runner(executor, skipbadfiles=True, chunksize=20)(
            {"DY": [DY, str(text)]}, DimuonProcessor(), treename="Events")
    assert_same_output(out, dy_reference)
    assert [s.filename for s in executor.report.skipped] == [str(text)]
    # (coffea's Runner refuses a run with no chunk left before gpuexec would)
    with pytest.raises((ChunkError, ValueError),
                       match="no file yielded events|No chunks survived preprocessing"):
        runner(executor, skipbadfiles=True, chunksize=20)(
            {"DY": [DY]}, DimuonProcessor(), treename="NoSuchTree")
    assert executor.report.skipped[0].filename == DY


def test_a_processor_error_surfaces_after_one_attempt(executor, dy_items):
    """What is retried is decided by the exception's type: the user's ValueError is not
    retried, even with retries left."""
    start = time.perf_counter()
    with pytest.raises(ChunkError, match=r"no muons here.*entries \[\d+, \d+\)|entries.*no muons"):
        runner(executor.copy(retries=3))(dy_items, FailingProcessor())
    assert time.perf_counter() - start < 5.0
    from gpuexec.executor import retryable

    assert retryable(ValueError("x")) is None and retryable(KeyError("x")) is None
    assert retryable(TimeoutError("read timed out")) == "I/O error that may pass"
    assert retryable(ConnectionResetError()) == "I/O error that may pass"
    assert retryable(FileNotFoundError("gone")) is None
    assert retryable(MemoryError("device")) == "out of memory"


class HangingProcessor(DimuonProcessor):
    """Hangs on the chunk of ``dataset`` that starts at entry ``start``: on its first
    attempt only (``once``: the marker file says it was made) or on every attempt."""

    def __init__(self, marker: str, dataset: str = "DY", start: int = 20, once: bool = True):
        self.marker, self.dataset, self.start, self.once = marker, dataset, start, once

    def process(self, events):
        meta = events.metadata
        if meta["dataset"] == self.dataset and meta["entrystart"] == self.start:
            if not (self.once and os.path.exists(self.marker)):
                open(self.marker, "a").close()
                time.sleep(120)  # the worker's restart ends it
        return super().process(events)


@pytest.mark.parametrize("once", [True, False], ids=["hangs-once", "hangs-always"])
def test_a_chunk_past_the_timeout_restarts_its_worker_and_runs_once_more(
        executor, tmp_path, dy_reference, once):
    """gpuexec.chunk-timeout: the hanging chunk's worker is restarted and the chunk run
    once more; a chunk that hangs again fails the run, named with its entry range."""
    import dask

    client = executor.live_client
    fileset = {"DY": [DY]}
    proc = HangingProcessor(str(tmp_path / "hung"), once=once)
    runner(executor, chunksize=20)(fileset, DimuonProcessor(), treename="Events")  # warm
    start = time.monotonic()
    try:
        with dask.config.set({"gpuexec.chunk-timeout": "6s"}):
            if once:
                out = runner(executor, chunksize=20)(fileset, proc, treename="Events")
            else:
                with pytest.raises(ChunkError, match=r"DY.*entries \[20, 40\).*timed out "
                                                     r"after 6 s"):
                    runner(executor, chunksize=20)(fileset, proc, treename="Events")
        # the run, bounded by the timeout (each hang is 120 s) and its workers' restarts
        elapsed = time.monotonic() - start
        # the call returned with the workers it restarted back: none is left to restart
        workers = client.scheduler_info()["workers"]
    finally:
        client.wait_for_workers(2, timeout=180)  # (for the next test, whatever happened)
    assert elapsed < 100
    report = executor.report.processing
    timed_out = [r for r in report.reruns if "timed out" in r.what]
    assert [r.label for r in timed_out] == [f"DY:{os.path.basename(DY)}[20:40]"]
    assert len(workers) == 2 and timed_out[0].worker not in workers
    restarted = [t for t in threading.enumerate() if t.name == "gpuexec-restart"]
    assert not restarted
    if once:
        assert_same_output(out, dy_reference)
        assert report.expected == report.processed == 40
    else:
        assert report.error is not None and "timed out after 6 s" in report.error

