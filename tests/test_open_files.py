"""gpuexec.io.kept_files: Runner's work function on files kept open per worker thread gives
Runner's results, opens each file once, and drops a file that changed or failed."""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading

import awkward as ak
import numpy as np
import pytest
import uproot
from coffea import processor
from coffea.nanoevents import BaseSchema, NanoAODSchema, NanoEventsFactory
from runner_work import work_of

from gpuexec.io import kept_files as open_files
from gpuexec.executor import GPUExecutor
from gpuexec.executor.task import _kept_open

SAMPLES = os.path.join(os.path.dirname(__file__), "..", "data", "samples")
DY = os.path.abspath(os.path.join(SAMPLES, "nano_dy.root"))
DIMUON = os.path.abspath(os.path.join(SAMPLES, "nano_dimuon.root"))

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


class MuonSums(processor.ProcessorABC):
    def process(self, events):
        if getattr(self, "fail", False):
            raise RuntimeError("the processor failed")
        pt = events.Muon.pt
        return {"events": len(events), "muons": int(ak.sum(ak.num(pt))),
                "pt": float(ak.sum(pt)), "counts": ak.to_list(ak.num(pt))}

    def postprocess(self, accumulator):
        return accumulator


_preprocessed: dict = {}


def _runner_work(paths, chunksize, **runner_options):
    """(WorkItems, Runner's work function for ``MuonSums``) for ``paths``. The data
    samples are preprocessed once for the module (0.7 s for both: their trees hold
    1500-1600 branches); a file a test writes, every time."""
    if not set(paths) <= {DY, DIMUON}:
        return work_of(paths, chunksize, MuonSums(), **runner_options)
    key = (tuple(paths), chunksize, tuple(sorted(runner_options.items())))
    if key not in _preprocessed:
        _preprocessed[key] = work_of(paths, chunksize, MuonSums(), **runner_options)
    return _preprocessed[key]


@pytest.fixture(autouse=True)
def _fresh_thread_files():
    open_files.close_all()
    yield
    open_files.close_all()


@pytest.fixture
def opens(monkeypatch):
    """The paths uproot.open was called with, in order."""
    seen = []
    original = uproot.open

    def counting(path, *args, **kwargs):
        seen.append(next(iter(path)) if isinstance(path, dict) else path)
        return original(path, *args, **kwargs)

    monkeypatch.setattr(uproot, "open", counting)
    return seen


def test_kept_files_give_runners_results_and_open_each_file_once(opens):
    items, work = _runner_work([DY, DIMUON], 20)  # (real NanoAOD: 0.3-0.9 s a chunk)
    opens.clear()  # (the preprocessing's)
    assert [i.filename for i in items] == [DY, DY, DIMUON, DIMUON]
    want = [work(item) for item in items]
    assert len(opens) == len(items)  # coffea's own: one open per chunk
    opens.clear()
    kept = _kept_open(work, 4)
    got = [kept(item) for item in items]
    assert got == want  # values, event counts, the processed WorkItems
    assert opens == [DY, DIMUON]  # items run file by file: each file opened once
    assert sum(g["out"]["events"] for g in got) == 40 + 40


def test_the_last_files_stay_open_and_the_others_close(opens):
    items, work = _runner_work([DY, DIMUON], 20)
    dy, mu = [i for i in items if i.filename == DY], [i for i in items if i.filename == DIMUON]
    opens.clear()
    run = _kept_open(work, 1)
    run(dy[0])
    (first,) = open_files._kept_files().values()
    run(mu[0])
    assert first.directory.closed  # evicted: one file kept
    run(dy[1])
    assert opens == [DY, DIMUON, DY]
    run2 = _kept_open(work, 2)
    run2(mu[1])
    run2(dy[0])
    assert opens == [DY, DIMUON, DY, DIMUON] and len(open_files._kept_files()) == 2


def test_a_file_whose_uuid_changed_is_opened_again(opens, tmp_path):
    path = str(tmp_path / "sample.root")
    shutil.copy(DY, path)
    items, work = _runner_work([path], 40)
    opens.clear()
    run = _kept_open(work, 4)
    run(items[0])
    (first,) = open_files._kept_files().values()
    shutil.copy(DIMUON, path + ".new")
    os.replace(path + ".new", path)  # rewritten after preprocessing
    (again,), _ = _runner_work([path], 40)
    del opens[1:]
    assert again.fileuuid != items[0].fileuuid
    out = run(again)
    assert out["out"]["events"] == 40 and first.directory.closed
    assert opens == [path, path]
    assert out == work(again)  # the new file's results


def test_a_kept_file_keeps_no_arrays_so_a_second_read_reads_again():
    items, work = _runner_work([DY], 40)
    run = _kept_open(work, 4)
    run(items[0])
    (kept,) = open_files._kept_files().values()
    directory = kept.directory
    assert directory.file.array_cache is None
    before = directory.file.source.num_requested_bytes
    assert run(items[0]) == work(items[0])
    assert directory.file.source.num_requested_bytes > before


def test_a_failing_chunk_says_what_runner_says_and_drops_its_file(opens, tmp_path):
    items, work = _runner_work([DY], 20)
    opens.clear()
    run = _kept_open(work, 4)
    failing = MuonSums()
    failing.fail = True
    with pytest.raises(Exception, match=r"Failed processing file: WorkItem\(dataset='sample'"):
        run.func(*run.args, items[0], **dict(run.keywords, processor_instance=failing))
    assert not open_files._kept_files()
    run(items[1])
    assert opens == [DY, DY]  # opened again after the failure
    bad = str(tmp_path / "bad.root")
    with open(bad, "wb") as f:
        f.write(b"not a ROOT file" * 100)
    broken = dataclasses.replace(items[0], filename=bad)
    open_files.close_all()
    with pytest.raises(Exception, match="Failed to open file: WorkItem.*bad.root"):
        run(broken)
    assert not open_files._kept_files()


_MIDWAY: dict = {}  # what ClosingMidway saw (the processor reaches the work as a copy)


class ClosingMidway(MuonSums):
    """Closes every kept file in the middle of its chunk, as ``close_files`` can."""

    def process(self, events):
        (_MIDWAY["entry"],) = open_files._kept_files().values()
        _MIDWAY["closed"] = open_files.close_all()
        _MIDWAY["open meanwhile"] = not _MIDWAY["entry"].directory.closed
        return super().process(events)


def test_close_all_during_a_chunk_closes_its_file_when_the_chunk_ends(opens):
    """``close_all`` (``GPUExecutor.close_files``, between runs) while a chunk reads: the
    chunk ends with Runner's result on its file, left open until then, and the next chunk
    opens the file again. Closed under the chunk, the read failed ("file ... is closed",
    a cancelled copy still running on the H200 host)."""
    items, work = _runner_work([DY], 20)
    want = [work(item) for item in items]  # (Runner's function opens the file itself)
    closing_items, closing_work = work_of([DY], 20, ClosingMidway())
    opens.clear()
    out = _kept_open(closing_work, 4)(closing_items[1])
    assert out["out"] == want[1]["out"]  # read to the end
    entry = _MIDWAY["entry"]
    assert _MIDWAY["closed"] == 1 and _MIDWAY["open meanwhile"] and opens == [DY]
    assert entry.directory.closed and not entry.reading  # closed at the chunk's end
    assert not open_files._kept_files()
    assert _kept_open(work, 4)(items[0]) == want[0] and opens == [DY, DY]  # opened anew
    (reopened,) = open_files._kept_files().values()
    assert reopened is not entry and not reopened.directory.closed


def test_work_kept_open_gives_what_runner_gives_for_metrics_and_compressed_processors():
    items, work = _runner_work([DY], 20, savemetrics=True)
    out = _kept_open(work, 4)(items[0])  # saved metrics: Runner's own function
    assert set(out) == {"out", "metrics", "processed"} and not open_files._kept_files()
    items, work = _runner_work([DY], 20, processor_compression=1)
    assert isinstance(work.keywords["processor_instance"], bytes)
    assert _kept_open(work, 4)(items[1]) == work(items[1])
    assert len(open_files._kept_files()) == 1


def test_each_thread_keeps_its_own_files():
    items, work = _runner_work([DY], 40)
    run = _kept_open(work, 4)
    run(items[0])
    mine = list(open_files._kept_files().values())
    theirs = []

    def other():
        run(items[0])
        theirs.extend(open_files._kept_files().values())

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(theirs) == 1 and theirs[0] is not mine[0]
    assert list(open_files._kept_files().values()) == mine  # this thread's untouched
    assert open_files.close_all() == 2  # both threads' files
    assert theirs[0].directory.closed and mine[0].directory.closed
    assert not open_files._kept_files()


def test_the_executor_setting_is_checked_and_zero_keeps_runners_function():
    import dask

    from gpuexec import config

    with dask.config.set({"gpuexec.reading.open-files": -1}), \
            pytest.raises(ValueError, match="open-files must be >= 0, got -1"):
        config.ReadingSettings.read()
    _, work = _runner_work([DY], 40)
    assert _kept_open(work, 0) is work
    assert _kept_open(len, 4) is len  # any other function runs as it is
    assert _kept_open(work, 3).keywords["kept"] == 3
    assert np.isfinite(config.ReadingSettings.read().open_files)


def processor_events(item, directory, iteritems_options=None, schema=NanoAODSchema):
    """What Runner's work function builds for ``item``."""
    return NanoEventsFactory.from_root(
        file=directory, treepath=item.treename, schemaclass=schema,
        metadata={"dataset": item.dataset, "entrystart": item.entrystart}, access_log=[],
        mode="virtual", entry_start=item.entrystart, entry_stop=item.entrystop,
        iteritems_options=iteritems_options or {}).events()


def test_events_on_a_kept_file_are_coffeas_with_the_base_form_built_once(monkeypatch):
    from coffea.nanoevents.mapping.uproot import UprootSourceMapping

    built = []
    original = UprootSourceMapping._extract_base_form.__func__

    def counting(cls, tree, iteritems_options={}):
        built.append((tree.object_path, dict(iteritems_options)))
        return original(cls, tree, iteritems_options=iteritems_options)

    monkeypatch.setattr(UprootSourceMapping, "_extract_base_form", classmethod(counting))
    items, _ = _runner_work([DY, DIMUON], 20)
    kept, built_events = {}, []
    for item in items:  # two chunks of each file
        entry = kept.setdefault(item.filename, open_files.Kept(uproot.open({item.filename: None})))
        metadata = {"dataset": item.dataset, "entrystart": item.entrystart}
        got = open_files._factory(entry, item, NanoAODSchema, metadata, {}, None, None).events()
        want = processor_events(item, uproot.open({item.filename: None}))
        assert got.layout.form == want.layout.form and len(got) == len(want) == 20
        assert got.metadata == want.metadata and got.behavior == want.behavior
        # (a file's second chunk: its events built from the kept base form)
        assert ak.array_equal(got.Muon, want.Muon) and ak.array_equal(got.Jet.pt, want.Jet.pt)
        assert got.Muon.matched_jet.pt.tolist() == want.Muon.matched_jet.pt.tolist()
        built_events.append((got, metadata))
    assert ak.array_equal(got, want, equal_nan=True)  # every branch of a chunk
    # each chunk's events keep their own metadata after the file's next chunks are built
    assert all(events.metadata == metadata for events, metadata in built_events)
    mine = [b for b in built if b[1] == {}]
    assert len(mine) == 2 + len(items)  # once per file here, once per chunk in coffea
    # other iteritems options: another base form
    muons = {"filter_name": ["run", "luminosityBlock", "event", "nMuon", "Muon_*"]}
    got = open_files._factory(kept[items[0].filename], items[0], NanoAODSchema, {}, muons,
                              None, None).events()
    want = processor_events(items[0], uproot.open({items[0].filename: None}), muons)
    assert got.fields == want.fields and "Jet" not in got.fields and "Muon" in got.fields
    assert ak.array_equal(got.Muon.pt, want.Muon.pt)


class EditingSchema(BaseSchema):
    """A schema that edits the base form it is given, as a schema may."""

    def __init__(self, base_form, *args, **kwargs):
        for content in base_form["contents"]:
            seen = content.setdefault("parameters", {})
            seen["built"] = seen.get("built", 0) + 1
        super().__init__(base_form, *args, **kwargs)


def test_each_chunk_gets_its_own_copy_of_a_kept_base_form():
    items, _ = _runner_work([DY], 20)
    entry = open_files.Kept(uproot.open({DY: None}))
    for item in items:
        got = open_files._factory(entry, item, EditingSchema, {}, {}, None, None).events()
        want = processor_events(item, uproot.open({DY: None}), schema=EditingSchema)
        assert got.layout.form == want.layout.form
        assert got.Muon_pt.layout.parameter("built") == 1


@pytest.mark.parametrize("read_directly", [True, False])
def test_a_staging_processor_gets_the_factory_and_coffeas_events_are_not_built(
        monkeypatch, read_directly):
    """A GPU worker's processor (the ``gpuexec.io.staging.StagedProcessor``) reading columns
    directly builds its events from the NanoEvents factory: coffea's host events, one
    ``ak.from_buffers`` over every branch, are not built. Same results as Runner's."""
    from gpuexec.io.staging import StagedProcessor, Timings

    items, work = _runner_work([DY], 20)
    want = [work(item) for item in items]
    built = []
    original = NanoEventsFactory.events

    def counting(self):
        built.append(self)
        return original(self)

    monkeypatch.setattr(NanoEventsFactory, "events", counting)
    run = _kept_open(work, 4)
    for item, expected in zip(items, want):
        timings = Timings()
        staged = StagedProcessor(MuonSums(), "cpu", timings, read_on_device=read_directly)
        got = run.func(*run.args, item, **dict(run.keywords, processor_instance=staged))
        assert got == expected
        assert timings.read > 0  # (staged columns are read under the timer)
    assert len(built) == (0 if read_directly else len(items))
