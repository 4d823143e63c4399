"""gpuexec.io.device_read with numpy as the array module: every plain NanoAOD branch
(flat, jagged content, offsets from counts) of real CMS samples and of generated files
with several baskets equals uproot's arrays for entry ranges on and across basket edges;
what it does not read is refused with ``Unsupported``; and NanoEvents staged through it
give every ADL query's output unchanged, without uproot interpreting those branches."""

from __future__ import annotations

import os
import time
import warnings

import device_reading_cases as cases
import numpy as np
import pytest
import uproot

from gpuexec.io import device_read as device_reading
from gpuexec.io.staging import Timings, stage_events


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    return cases.generated(tmp_path_factory.mktemp("dr"))


def test_host_module_inflates_on_the_host_and_few_streams_too(monkeypatch):
    assert device_reading.inflater(np) == "host"
    device_module = object()
    monkeypatch.setattr(device_reading, "_nvcomp_codec", lambda: None)
    assert device_reading.inflater(device_module) == "host"  # nvCOMP not installed
    monkeypatch.setattr(device_reading, "_nvcomp_codec", lambda: object())
    assert device_reading.inflater(device_module) == "nvcomp"
    few = device_reading.NVCOMP_MIN_STREAMS - 1
    assert device_reading.inflater(device_module, few) == "host"
    assert device_reading.inflater(device_module, few + 1) == "nvcomp"


@pytest.mark.parametrize("sample", ["multi", *cases.REAL])
def test_every_branch_equals_uproot(sample, multi):
    path = multi if sample == "multi" else sample
    assert cases.compare_file(path, np) > 0


@pytest.mark.parametrize("compression", ["lzma:9", "lz4:1", "zstd:5"])
def test_every_compression_of_root_equals_uproot(compression, tmp_path):
    """LZMA (CMS NanoAOD's usual setting), LZ4 (its checksum checked) and ZSTD baskets,
    decompressed by uproot's own decompressors, with no uproot interpretation."""
    path = cases.generated(tmp_path, compression=compression, events=6000, basket=2000)
    with uproot.open(path) as f:
        found = device_reading.find_baskets(f["Events"]["nMuon"], 0, 6000)
    assert {algo for b in found for algo, _d, _u in b.blocks} == {
        {"lzma": b"XZ", "lz4": b"L4", "zstd": b"ZS"}[compression.split(":")[0]]}
    assert cases.compare_file(path, np) > 0


def test_offsets_from_counts_equal_uproots_lists(multi):
    with uproot.open(multi) as f:
        tree = f["Events"]
        for start, stop in cases.ranges(tree["nMuon"]):
            got = device_reading.read_offsets(tree["nMuon"], start, stop, np)
            lists = tree["Muon_pt"].array(entry_start=start, entry_stop=stop)
            assert got.dtype == np.int64
            assert got.tolist() == [0, *np.cumsum(np.asarray(
                [len(x) for x in lists.tolist()], dtype=np.int64)).tolist()]


def test_other_kinds_are_refused(tmp_path):
    path = cases.generated(tmp_path, events=3000, basket=3000)
    with uproot.open(path) as f:
        with pytest.raises(device_reading.Unsupported, match="not a plain numeric"):
            device_reading.read_flat(f["Events"]["Muon_pt"], 0, 3000, np)
        with pytest.raises(device_reading.Unsupported, match="not a plain jagged"):
            device_reading.read_content(f["Events"]["MET_pt"], 0, 3000, np)
    assert device_reading.column_for(["Muon_pt", "!load", "!content"]) == ("Muon_pt", "content")
    assert device_reading.column_for(["Muon_jetIdx", "!load", "!content", "!local2global"]) is None
    assert device_reading.column_for(["!invalid", "Muon"]) is None


def _events(path, start, stop):
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return NanoEventsFactory.from_root({path: "Events"}, schemaclass=NanoAODSchema,
                                           mode="virtual", entry_start=start,
                                           entry_stop=stop).events()


def _same(a, b):
    assert a["n_events"] == b["n_events"]
    assert a["sums"] == b["sums"]
    for name, h in a["hists"].items():
        assert (h.values(flow=True) == b["hists"][name].values(flow=True)).all(), name


@pytest.mark.parametrize("compression", ["zlib:1", "lzma:1"])
def test_staged_queries_are_unchanged_and_uproot_interprets_nothing(tmp_path, compression,
                                                                    monkeypatch):
    """A chunk that starts and ends inside baskets: no Q1-Q8 column reaches uproot's
    interpretation (its ``TBranch.array`` raises), with zlib or LZMA baskets, and the
    outputs are the same."""
    from examples.adl import QUERIES, make

    path = cases.generated(tmp_path, compression=compression)
    start, stop = 1234, 7777
    before = {q: make(q).process(stage_events(_events(path, start, stop), "cpu"))
              for q in QUERIES}

    def refuse(self, *args, **kwargs):
        raise AssertionError(f"uproot interpreted {self.name}")
    monkeypatch.setattr(uproot.behaviors.TBranch.TBranch, "array", refuse)
    for q in QUERIES:
        timings = Timings()
        staged = stage_events(_events(path, start, stop), "cpu", timings, read_on_device=True)
        _same(make(q).process(staged), before[q])
        assert timings.read > 0


def test_cross_references_fall_back_to_coffea_and_agree():
    """``Muon.matched_jet`` needs coffea's ``local2global`` transform: those buffers are
    read the usual way, beside the plain ones read directly, with the same values."""
    import awkward as ak

    path = cases.REAL[0]
    usual = stage_events(_events(path, 0, 40), "cpu")
    direct = stage_events(_events(path, 0, 40), "cpu", read_on_device=True)
    for get in (lambda e: e.Muon.matched_jet.pt, lambda e: e.Electron.matched_gen.pt):
        assert ak.materialize(get(direct)).tolist() == ak.materialize(get(usual)).tolist()


@pytest.mark.parametrize("read_on_device", [False, True])
def test_staged_collections_find_the_staged_events(read_on_device):
    """A cross-reference (``Muon.matched_jet``) indexes the events its collection came
    from: the staged ones, not the host events coffea built (on a GPU: device indices
    into host arrays), also after the staged events are gone and a collection lives on."""
    import gc

    import awkward as ak

    host = _events(cases.REAL[0], 0, 40)
    want = ak.materialize(host.Muon.matched_jet.pt).tolist()
    assert any(pt is not None for muons in want for pt in muons)
    staged = stage_events(host, "cpu", read_on_device=read_on_device)
    assert staged.Muon._events() is staged and staged.Jet._events() is staged
    muons = staged.Muon
    del staged
    gc.collect()
    again = muons._events()  # built again from the staged buffers
    assert again is not host and again.Muon._events() is again
    assert ak.materialize(muons.matched_jet.pt).tolist() == want
    assert host.Muon._events() is host  # coffea's own events as they were


def test_events_not_from_nanoevents_are_staged_as_before():
    import awkward as ak

    events = ak.Array({"x": [[1.0], [], [2.0, 3.0]]})
    staged = stage_events(events, "cpu", read_on_device=True)
    assert staged.tolist() == events.tolist()


def test_a_basket_whose_blocks_do_not_add_up_is_an_error_naming_branch_and_file(tmp_path):
    """A corrupt block header (its inflated size one byte short) is a ValueError that
    names the branch and the file, not values read from the wrong place."""
    import shutil
    import struct

    good = cases.generated(tmp_path, events=3000, basket=3000)
    bad = tmp_path / "corrupt.root"
    shutil.copy(good, bad)
    with uproot.open(good) as f:
        branch = f["Events"]["nMuon"]
        seek = int(branch.member("fBasketSeek")[0])
        keylen = branch.basket(0).member("fKeylen")
    with open(bad, "r+b") as f:
        f.seek(seek + keylen + 6)  # the block header's 3-byte inflated size
        size = int.from_bytes(f.read(3), "little")
        f.seek(seek + keylen + 6)
        f.write(struct.pack("<I", size - 1)[:3])
    with uproot.open(bad) as f:
        with pytest.raises(ValueError, match=r"nMuon basket 0 in .*corrupt\.root"):
            device_reading.read_flat(f["Events"]["nMuon"], 0, 3000, np)


def test_a_basket_of_several_compression_blocks(tmp_path):
    """ROOT splits a basket above 16 MiB into blocks, each with its own header: the reader
    joins them (flat and jagged), for ranges starting and ending inside the basket."""
    import awkward as ak

    n = 2_200_000
    rng = np.random.default_rng(3)
    counts = rng.poisson(2, n)
    path = str(tmp_path / "big.root")
    with uproot.recreate(path, compression=uproot.ZLIB(1)) as f:
        f.mktree("Events", {"x": "float64", "v": "var * float32"})
        f["Events"].extend({"x": np.round(rng.random(n), 3),
                            "v": ak.unflatten(np.round(rng.random(int(counts.sum())), 2)
                                              .astype(np.float32), counts)})
    with uproot.open(path) as f:
        tree = f["Events"]
        for name in ("x", "v"):
            (basket,) = device_reading.find_baskets(tree[name], 0, n)
            assert len(basket.blocks) >= 2
        start, stop = 123, n - 7
        assert np.array_equal(device_reading.read_flat(tree["x"], start, stop, np),
                              tree["x"].array(entry_start=start, entry_stop=stop,
                                              library="np"))
        want = ak.to_numpy(ak.flatten(tree["v"].array(entry_start=start, entry_stop=stop)))
        assert np.array_equal(device_reading.read_content(tree["v"], start, stop, np), want)


class _FakeNvcomp:
    """nvCOMP's Python API as device_reading uses it, inflating on the host (raw deflate
    through zlib): the packing, alignment and order of the device path run without a GPU."""

    class BitstreamKind:
        RAW = "raw"

    class Codec:
        def __init__(self, algorithm, bitstream_kind):
            assert (algorithm, bitstream_kind) == ("Deflate", "raw")

        def compression_config(self, sizes):
            return list(sizes)

        def decompression_config(self, config):
            return config

        def decode(self, arrays, decompression_config):
            import zlib

            out = []
            for data, size in zip(arrays, decompression_config):
                assert data.ctypes.data % 4 == 0, "nvCOMP wants 4-byte aligned inputs"
                raw = zlib.decompress(data.tobytes(), -15)
                assert len(raw) == size
                out.append(np.frombuffer(raw, dtype=np.uint8))
            return out

    @staticmethod
    def as_arrays(views):
        return list(views)


class _FakeCupy:
    """The few CuPy calls of device_reading's device path, on numpy."""

    uint8 = np.uint8
    asarray = staticmethod(np.asarray)
    ascontiguousarray = staticmethod(np.ascontiguousarray)
    concatenate = staticmethod(np.concatenate)
    zeros = staticmethod(np.zeros)
    arange = staticmethod(np.arange)
    cumsum = staticmethod(np.cumsum)

    class cuda:  # noqa: N801 (CuPy's name)
        @staticmethod
        def alloc_pinned_memory(n):
            return bytearray(n)

        class Device:
            pci_bus_id = "0000:fa:ke.0"


def _fake_nvcomp(monkeypatch):
    """The stand-in nvCOMP installed, and every read inflated by it."""
    import sys
    import types

    nvidia = types.ModuleType("nvidia")
    nvidia.nvcomp = _FakeNvcomp
    monkeypatch.setitem(sys.modules, "nvidia", nvidia)
    monkeypatch.setitem(sys.modules, "nvidia.nvcomp", _FakeNvcomp)
    monkeypatch.setattr(device_reading, "_local", type(device_reading._local)())
    monkeypatch.setattr(device_reading, "NVCOMP_MIN_STREAMS", 1)


def test_the_nvcomp_path_packs_streams_aligned_and_in_order(monkeypatch, multi):
    """With many streams per read the baskets' deflate streams (and stored payloads) go to
    nvCOMP from one aligned buffer and come back in order: every branch still equals
    uproot's (a stand-in nvCOMP and CuPy; the real ones ran on the H200)."""
    _fake_nvcomp(monkeypatch)
    fake = _FakeCupy()
    assert device_reading.inflater(fake) == "nvcomp"
    with uproot.open(multi) as f:
        tree = f["Events"]
        for name in ("MET_pt", "Muon_pt", "Electron_charge", "nJet"):
            branch = tree[name]
            for start, stop in cases.ranges(branch):
                kind, want = cases.expected(branch, start, stop)
                read = (device_reading.read_content if kind == "content"
                        else device_reading.read_flat)
                got = read(branch, start, stop, fake)
                assert got.dtype == want.dtype
                assert np.array_equal(got, want), (name, start, stop)
    # a real sample's baskets, some stored uncompressed (the generated file has none since
    # its zlib is written by zlib whatever the process inflates with)
    with uproot.open(cases.REAL[2]) as f:
        assert any(b.stored is not None for b in device_reading.find_baskets(
            f["Events"]["MET_pt"], 0, f["Events"].num_entries))
    assert cases.compare_file(cases.REAL[2], fake) > 0


@pytest.mark.parametrize("message, kind, retry", [
    ("CUDA Runtime API failure: out of memory : code=1000", "DeviceOutOfMemory", "out of memory"),
    ("CUDA Runtime API failure: an illegal memory access : code=1000", "GPUCallError",
     "device fault")])
def test_an_nvcomp_failure_is_a_device_error_that_moves_the_chunk(monkeypatch, multi, message,
                                                                 kind, retry):
    """nvCOMP raises plain RuntimeErrors: its out of memory becomes DeviceOutOfMemory (named
    and sized), any other failure GPUCallError, and either survives the trip from a worker
    as a fault that moves the chunk to the CPU pool."""
    import pickle

    from gpuexec.executor.errors import ChunkError, chain, falls_back, retryable

    _fake_nvcomp(monkeypatch)

    def fail(self, arrays, decompression_config):
        raise RuntimeError(message)

    monkeypatch.setattr(_FakeNvcomp.Codec, "decode", fail)
    with uproot.open(multi) as f:
        branch = f["Events"]["Muon_pt"]
        with pytest.raises(Exception) as info:
            device_reading.read_content(branch, 0, branch.num_entries, _FakeCupy())
    err = info.value
    assert type(err).__name__ == kind and "nvCOMP inflate" in str(err)
    assert message in str(err)
    wrapped = ChunkError("file f.root, entries [0, 10) failed", chain(err), retry=retryable(err))
    back = pickle.loads(pickle.dumps(wrapped))
    assert falls_back(back) == retry
    assert type(back.causes[0]).__name__ == kind and str(back.causes[0]) == str(err)


def _batch(tree, start, stop):
    """Columns of every kind over [start, stop), one refused, one empty."""
    return [("content", tree["Muon_pt"], start, stop), ("flat", tree["MET_pt"], start, stop),
            ("offsets", tree["nMuon"], start, stop), ("flat", tree["Muon_pt"], start, stop),
            ("content", tree["Electron_charge"], start, stop),
            ("flat", tree["nJet"], stop, stop), ("offsets", tree["nJet"], start, stop)]


def _check_batch(columns, got):
    for (kind, branch, start, stop), value in zip(columns, got):
        if kind == "flat" and branch.name == "Muon_pt":
            assert isinstance(value, device_reading.Unsupported)
            continue
        if kind == "offsets":
            counts = branch.array(entry_start=start, entry_stop=stop, library="np")
            want = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        else:
            _kind, want = cases.expected(branch, start, stop)
        assert value.dtype == want.dtype, (kind, branch.name)
        assert np.array_equal(value, want), (kind, branch.name, start, stop)


@pytest.mark.parametrize("inflate", ["host", "nvcomp"])
def test_read_many_reads_every_kind_in_one_batch_and_keeps_a_refusal_apart(
        inflate, multi, monkeypatch):
    """One batch of flat, jagged and counts columns over ranges on and across basket
    edges (inflated on the host, or by a stand-in nvCOMP as one call) equals uproot's
    arrays; a column it cannot read is returned as its ``Unsupported`` while the rest are
    read; an empty range gives an empty array."""
    if inflate == "nvcomp":
        _fake_nvcomp(monkeypatch)
        calls = []
        real = _FakeNvcomp.Codec.decode
        monkeypatch.setattr(_FakeNvcomp.Codec, "decode",
                            lambda self, a, **k: calls.append(len(a)) or real(self, a, **k))
    xp = _FakeCupy() if inflate == "nvcomp" else np
    with uproot.open(multi) as f:
        tree = f["Events"]
        for start, stop in cases.ranges(tree["Muon_pt"]):
            columns = _batch(tree, start, stop)
            _check_batch(columns, device_reading.read_many(columns, xp))
    if inflate == "nvcomp":  # one decode per batch (with baskets), not one per column
        assert len(calls) == sum(b > a for a, b in cases.ranges(tree["Muon_pt"]))


def _record_batches(monkeypatch) -> list:
    """The number of columns of every ``read_many`` call from now on."""
    batches = []
    real = device_reading.read_many
    monkeypatch.setattr(device_reading, "read_many",
                        lambda columns, *a: batches.append(len(columns)) or real(columns, *a))
    return batches


def _record_nvcomp_calls(monkeypatch) -> list:
    """A 1 for every batch handed to nvCOMP from now on."""
    called = []
    real = device_reading._nvcomp_payloads
    monkeypatch.setattr(device_reading, "_nvcomp_payloads",
                        lambda *a: called.append(1) or real(*a))
    return called


def test_read_ahead_reads_the_last_tasks_columns_at_the_first_touch(multi, monkeypatch):
    """With a read-ahead token, a task's first direct read takes every column the same
    processor's last task read, in one ``read_many``; its later touches of those columns
    read nothing; a column not predicted is read alone; another processor learns apart;
    the values equal coffea's."""
    import awkward as ak

    from gpuexec.io import staging

    monkeypatch.setattr(staging, "_READ_AHEAD", {})
    batches = _record_batches(monkeypatch)

    def task(start, stop, token, touch):
        staged = stage_events(_events(multi, start, stop), "cpu", read_on_device=True,
                              read_ahead=token)
        usual = _events(multi, start, stop)
        for get in touch:
            assert ak.materialize(get(staged)).tolist() == ak.materialize(get(usual)).tolist()

    muon, electron = (lambda e: e.Muon.pt), (lambda e: e.Electron.charge)
    met, jet = (lambda e: e.MET.pt), (lambda e: e.Jet.pt)
    task(0, 3000, "q", [muon, electron, met])
    assert batches == [1, 1, 1, 1, 1]  # nMuon offsets, Muon_pt, ..., MET_pt: one by one
    batches.clear()
    task(3000, 7000, "q", [electron, muon, met, jet])
    assert batches == [5, 1, 1]  # the five learned at once; then nJet and Jet_pt alone
    batches.clear()
    task(7000, 9000, "other", [met])
    assert batches == [1]
    batches.clear()
    task(100, 8000, "q", [jet])  # now predicted: the last task of "q" read Jet too
    assert batches == [7]


def test_read_ahead_keeps_what_tasks_running_side_by_side_learned(multi, monkeypatch):
    """Two tasks of one processor on one worker (a worker of two threads): one that has
    touched only some columns so far does not cut down what the next task reads ahead
    (it did: each touch replaced the list with the touching task's own)."""
    import awkward as ak

    from gpuexec.io import staging

    monkeypatch.setattr(staging, "_READ_AHEAD", {})
    batches = _record_batches(monkeypatch)

    def staged(start, stop):
        return stage_events(_events(multi, start, stop), "cpu", read_on_device=True,
                            read_ahead="q")

    first = staged(0, 3000)
    for get in (lambda e: e.Muon.pt, lambda e: e.Electron.charge, lambda e: e.MET.pt):
        ak.materialize(get(first))
    running = staged(3000, 5000)
    ak.materialize(running.Muon.pt)  # still running: two of the five columns touched
    batches.clear()
    ak.materialize(staged(5000, 9000).MET.pt)
    assert batches == [5]


def test_the_devices_queued_work_is_not_counted_as_reading(multi, monkeypatch):
    """A column touched while the device still runs the processor's earlier kernels
    waits for them before its read starts: that wait is compute, not reading or transfer
    (a stand-in device whose first wait takes 0.3 s); a column read ahead waits for
    nothing."""
    import time

    import awkward as ak

    from gpuexec.io import staging

    queued = {"seconds": 0.0}

    def wait():  # the device finishing what was queued before
        time.sleep(queued["seconds"])
        queued["seconds"] = 0.0

    monkeypatch.setattr(staging, "_device_copier", lambda backend: ((lambda a: a), wait))
    monkeypatch.setattr(staging, "_READ_AHEAD", {})
    for task in range(2):
        timings = Timings()
        staged = stage_events(_events(multi, 0, 3000), "cpu", timings, read_on_device=True,
                              read_ahead="q")
        ak.materialize(staged.MET.pt)
        queued["seconds"] = 0.3
        t0 = time.perf_counter()
        ak.materialize(staged.Muon.pt)  # the first task reads it: it waits, uncounted
        waited = time.perf_counter() - t0
        assert timings.read + timings.transfer < 0.25, (task, timings.read)
        assert (waited >= 0.3) == (task == 0)  # read ahead by the second: no wait at all
        queued["seconds"] = 0.0


def test_local_files_are_read_mapped_and_a_rewritten_file_is_mapped_again(tmp_path,
                                                                         monkeypatch):
    """A local file's baskets come through uproot's MemmapSource (one per file and
    process), any other file through the source uproot opened it with, with the same
    values; a file written again under the same name is read anew, not from the old
    map."""
    from uproot.source.file import MemmapSource

    monkeypatch.setattr(device_reading, "_MAPPED", {})
    path = tmp_path / "rewritten.root"

    def write(value):
        with uproot.recreate(path) as f:
            f.mktree("Events", {"x": "float64"})
            f["Events"].extend({"x": np.full(5000, value, dtype=np.float64)})

    write(1.0)
    with uproot.open(path) as f:
        branch = f["Events"]["x"]
        assert isinstance(device_reading._source(branch.file), MemmapSource)
        assert device_reading.read_flat(branch, 0, 5000, np).tolist() == [1.0] * 5000
    write(2.0)
    with uproot.open(path) as f:
        assert device_reading.read_flat(f["Events"]["x"], 10, 20, np).tolist() == [2.0] * 10
    assert len(device_reading._MAPPED) == 2

    def opened_as(file):  # a file that is not a local path (a URL): uproot's own source
        return file.source
    monkeypatch.setattr(device_reading, "_source", opened_as)
    with uproot.open(cases.REAL[0]) as f:
        tree = f["Events"]
        for name in ("Muon_pt", "nMuon"):
            kind, want = cases.expected(tree[name], 3, 37)
            read = device_reading.read_content if kind == "content" else device_reading.read_flat
            assert np.array_equal(read(tree[name], 3, 37, np), want)


def test_a_batch_of_few_large_streams_is_inflated_on_the_host(monkeypatch):
    """nvCOMP's call lasts as long as its largest stream: a batch counts its inflated
    bytes in streams of its largest one's size. Q8-like baskets (equal sizes) count one
    each; Q6-like ones (one basket five times the others) count less, and stay on the
    host where the plain count would have sent them to nvCOMP."""
    monkeypatch.setattr(device_reading, "_nvcomp_codec", lambda: object())
    device_module = object()
    n = device_reading.NVCOMP_MIN_STREAMS
    assert device_reading.stream_equivalents([680_000] * n) == n
    assert device_reading.inflater(device_module, device_reading.stream_equivalents(
        [680_000] * n)) == "nvcomp"
    lopsided = [2_400_000] * (n // 4) + [480_000] * n
    assert len(lopsided) > n
    assert device_reading.stream_equivalents(lopsided) == pytest.approx(n // 4 + n / 5)
    assert device_reading.inflater(device_module,
                                   device_reading.stream_equivalents(lopsided)) == "host"
    assert device_reading.stream_equivalents([]) == 0.0


def test_payloads_route_a_batch_by_its_stream_equivalents(multi, monkeypatch):
    """``_payloads`` sends a batch to nvCOMP by its stream equivalents, not its count of
    streams (a stand-in nvCOMP records the calls)."""
    _fake_nvcomp(monkeypatch)
    called = _record_nvcomp_calls(monkeypatch)
    with uproot.open(multi) as f:
        tree = f["Events"]
        baskets = [b for name in ("Jet_pt", "MET_pt", "nJet")
                   for b in device_reading.find_baskets(tree[name], 0, 9000)]
    sizes = [u for b in baskets for _a, _d, u in b.blocks]
    equivalents = device_reading.stream_equivalents(sizes)
    assert equivalents < len(sizes) - 1  # baskets of unequal sizes
    for threshold, nvcomp in ((len(sizes), False), (int(equivalents) + 1, False),
                              (int(equivalents), True)):
        called.clear()
        monkeypatch.setattr(device_reading, "NVCOMP_MIN_STREAMS", threshold)
        device_reading._payloads(baskets, _FakeCupy(), np.asarray)
        assert bool(called) == nvcomp, threshold


def _hold_slot(path, ready, done):
    """Another process holding one slot's lock file until told to let go."""
    import fcntl
    import os

    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    ready.set()
    done.wait(30)


def test_nvcomp_slots_are_per_user_and_private(tmp_path, monkeypatch):
    """Each user has a slot folder of their own (0700, lock files 0600); a folder of that
    name made by another user is not used: the calls go unlimited instead of sharing it."""
    import stat

    monkeypatch.setattr(device_reading.tempfile, "gettempdir", lambda: str(tmp_path))
    slots = device_reading._DeviceSlots("0000:01:00.0", 1)
    folder = tmp_path / f"gpuexec-{os.getuid()}-nvcomp-slots"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert [stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()] == [0o600]
    assert slots.acquire() not in (None, True)
    stranger = os.getuid() + 4242  # the folder this uid would use exists, made by us
    (tmp_path / f"gpuexec-{stranger}-nvcomp-slots").mkdir(mode=0o700)
    monkeypatch.setattr(device_reading.os, "getuid", lambda: stranger)
    assert device_reading._DeviceSlots("0000:01:00.0", 1).acquire() is True


def test_nvcomp_slots_are_shared_by_the_processes_of_a_host(tmp_path, monkeypatch):
    """At most n nvCOMP calls per device at once: a slot is a lock file per device and
    slot, so another process holding one leaves n - 1; a slot given back is free again."""
    import multiprocessing

    monkeypatch.setattr(device_reading.tempfile, "gettempdir", lambda: str(tmp_path))
    slots = device_reading._DeviceSlots("0000:01:00.0", 2)
    a, b = slots.acquire(), slots.acquire()
    assert a not in (None, True) and b not in (None, True)
    assert slots.acquire() is None  # both taken, in this process
    device_reading._DeviceSlots.release(a)
    c = slots.acquire()
    assert c is not None
    device_reading._DeviceSlots.release(b)
    device_reading._DeviceSlots.release(c)

    path = next(tmp_path.glob("gpuexec-*-nvcomp-slots/0000_01_00.0-0.lock"))
    ctx = multiprocessing.get_context("spawn")
    ready, done = ctx.Event(), ctx.Event()
    other = ctx.Process(target=_hold_slot, args=(str(path), ready, done))
    other.start()
    try:
        assert ready.wait(30)
        held = slots.acquire()
        assert held is not None and slots.acquire() is None  # one left, and it is taken
        device_reading._DeviceSlots.release(held)
    finally:
        done.set()
        other.join(30)
    both = [slots.acquire(), slots.acquire()]  # the other process's lock went with it
    assert None not in both
    for slot in both:
        device_reading._DeviceSlots.release(slot)
    # another device has its own slots
    assert device_reading._DeviceSlots("0000:02:00.0", 1).acquire() is not None
    # no folder for the lock files: no limit (True), as without slots
    (tmp_path / "a file").write_text("")
    monkeypatch.setattr(device_reading.tempfile, "gettempdir",
                        lambda: str(tmp_path / "a file"))
    unkept = device_reading._DeviceSlots("0000:01:00.0", 1)
    assert unkept.acquire() is True and unkept.acquire() is True
    device_reading._DeviceSlots.release(True)


def test_a_batch_finding_every_nvcomp_slot_taken_is_inflated_on_the_host(
        multi, monkeypatch, tmp_path):
    """nvCOMP calls from many processes stop overlapping, so a batch that finds every
    slot of its device taken is inflated on the host (at once with ``NVCOMP_WAIT`` 0),
    with the same bytes; with ``NVCOMP_SLOTS`` 0 there is no limit."""
    _fake_nvcomp(monkeypatch)
    monkeypatch.setattr(device_reading, "NVCOMP_WAIT", 0.0)
    monkeypatch.setattr(device_reading.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(device_reading, "_SLOTS", {})
    called = _record_nvcomp_calls(monkeypatch)
    with uproot.open(multi) as f:
        baskets = device_reading.find_baskets(f["Events"]["Muon_pt"], 0, 9000)
    want, _ = device_reading._payloads(baskets, np, np.asarray)
    monkeypatch.setattr(device_reading, "NVCOMP_SLOTS", 1)
    got, _ = device_reading._payloads(baskets, _FakeCupy(), np.asarray)
    assert called == [1] and np.array_equal(got, want)

    (slots,) = device_reading._SLOTS.values()
    held = slots.acquire()  # the one slot busy (another batch on nvCOMP)
    called.clear()
    got, _ = device_reading._payloads(baskets, _FakeCupy(), np.asarray)
    assert called == [] and np.array_equal(got, want)
    monkeypatch.setattr(device_reading, "NVCOMP_SLOTS", 0)
    got, _ = device_reading._payloads(baskets, _FakeCupy(), np.asarray)
    assert called == [1] and np.array_equal(got, want)
    device_reading._DeviceSlots.release(held)
    monkeypatch.setattr(device_reading, "NVCOMP_SLOTS", 1)
    called.clear()
    device_reading._payloads(baskets, _FakeCupy(), np.asarray)
    assert called == [1]  # given back after the call before


def test_a_batch_waits_nvcomp_wait_seconds_for_a_slot_before_the_host_takes_it(
        multi, monkeypatch, tmp_path):
    """With ``NVCOMP_WAIT`` a batch finding every slot taken waits for one: a slot given
    back within the wait takes the batch to nvCOMP; none given back, the host inflates it
    after the wait. The bytes are the same either way."""
    import threading
    import time

    _fake_nvcomp(monkeypatch)
    monkeypatch.setattr(device_reading.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(device_reading, "_SLOTS", {})
    monkeypatch.setattr(device_reading, "NVCOMP_SLOTS", 1)
    called = _record_nvcomp_calls(monkeypatch)
    with uproot.open(multi) as f:
        baskets = device_reading.find_baskets(f["Events"]["Muon_pt"], 0, 9000)
    want, _ = device_reading._payloads(baskets, np, np.asarray)
    device_reading._payloads(baskets, _FakeCupy(), np.asarray)  # makes the device's slots
    (slots,) = device_reading._SLOTS.values()

    monkeypatch.setattr(device_reading, "NVCOMP_WAIT", 5.0)
    held = slots.acquire()
    threading.Timer(0.2, device_reading._DeviceSlots.release, args=(held,)).start()
    called.clear()
    start = time.perf_counter()
    got, _ = device_reading._payloads(baskets, _FakeCupy(), np.asarray)
    assert called == [1] and np.array_equal(got, want)  # nvCOMP, once the slot was free
    assert 0.15 < time.perf_counter() - start < 4.0

    monkeypatch.setattr(device_reading, "NVCOMP_WAIT", 0.2)
    held = slots.acquire()  # never given back within the wait
    called.clear()
    start = time.perf_counter()
    got, _ = device_reading._payloads(baskets, _FakeCupy(), np.asarray)
    assert called == [] and np.array_equal(got, want)  # the host, after the wait
    assert time.perf_counter() - start >= 0.2
    device_reading._DeviceSlots.release(held)


def test_nvcomp_version_is_none_without_any_nvidia_package(monkeypatch):
    """Without the "nvidia" namespace package, finding "nvidia.nvcomp" raises
    ModuleNotFoundError: that means nvCOMP is not installed, not an error."""
    from importlib import util

    def find_spec(name):
        raise ModuleNotFoundError("No module named 'nvidia'")
    monkeypatch.setattr(util, "find_spec", find_spec)
    assert device_reading.nvcomp_version() is None


def test_nvcomp_version_says_whether_nvcomp_is_installed(monkeypatch):
    """``nvcomp_version`` (which ``benchmarks/executor.py`` writes into its JSON): a run
    without nvCOMP reads slower on the GPU, and its JSON must say so."""
    from importlib import metadata, util

    found = {"nvidia.nvcomp": None}
    monkeypatch.setattr(util, "find_spec", lambda name: found.get(name, object()))
    assert device_reading.nvcomp_version() is None

    found["nvidia.nvcomp"] = object()
    versions = {"nvidia-nvcomp-cu13": "6.0.0.12"}

    def version(name):
        if name not in versions:
            raise metadata.PackageNotFoundError(name)
        return versions[name]
    monkeypatch.setattr(metadata, "version", version)
    assert device_reading.nvcomp_version() == "6.0.0.12"
    versions.clear()  # unpacked without its metadata
    assert device_reading.nvcomp_version() == "installed"
