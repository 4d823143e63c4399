"""gpuexec.io.inflate: which library inflates zlib baskets; the same arrays with either, the
chosen one really called by uproot's reader, and GPUExecutor's workers use the choice."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os

import sys

import awkward as ak
import cloudpickle
import pytest
import uproot

from gpuexec.io import inflate
from gpuexec.executor import GPUExecutor

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/

SAMPLE = os.path.join(os.path.dirname(__file__), "..", "data", "samples", "nano_dy.root")


@pytest.fixture(autouse=True)
def restore_library():
    before = inflate.in_use()
    yield
    inflate.use(before if before != "isal" or importlib.util.find_spec("isal") else "zlib")


def read(path=SAMPLE):
    with uproot.open(path, array_cache=None, object_cache=None) as f:
        return f["Events"].arrays(["Muon_pt", "Jet_eta", "nJet", "event"])


def test_resolve_auto_is_isal_where_installed_and_rejects_unknown_names(monkeypatch):
    assert uproot.open(SAMPLE).file.compression.name == "ZLIB"  # what this file exercises
    assert inflate.resolve("zlib") == "zlib"
    assert inflate.resolve("auto") == ("isal" if importlib.util.find_spec("isal") else "zlib")
    with pytest.raises(ValueError, match="inflate is one of"):
        inflate.resolve("deflate")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "isal" else real(name, *a))
    assert inflate.resolve("auto") == "zlib"
    with pytest.raises(ImportError, match="pip install isal"):
        inflate.resolve("isal")


def test_the_reader_calls_the_chosen_library_and_reads_the_same_arrays(monkeypatch):
    isal_zlib = pytest.importorskip("isal.isal_zlib")
    calls = []
    real = isal_zlib.decompress
    monkeypatch.setattr(isal_zlib, "decompress",
                        lambda data, **kw: calls.append(len(data)) or real(data, **kw))
    assert inflate.use("zlib") == "zlib" and inflate.in_use() == "zlib"
    with_zlib = read()
    assert calls == []
    assert inflate.use("isal") == "isal" and inflate.in_use() == "isal"
    with_isal = read()
    assert calls, "uproot's reader did not call ISA-L"
    assert ak.array_equal(with_isal, with_zlib)


def uproot_inflater(_item):
    return {"library": {inflate.in_use()}}


def test_workers_inflate_with_the_executors_choice():
    pytest.importorskip("isal")
    # a cluster of its own (one worker), closed at the end: tests of other modules
    # check what their shared embedded cluster announces when it starts
    import dask

    from gpuexec import GPUCluster, config

    ex = GPUExecutor(client=GPUCluster(cpu_workers=1, threads_per_worker=1,
                                       dashboard_address="127.0.0.1:0"), status=False)
    with contextlib.redirect_stdout(io.StringIO()), ex:
        with dask.config.set({"gpuexec.reading.inflate": "zlib"}):
            out, _ = ex(list(range(4)), uproot_inflater, None)
        assert out == {"library": {"zlib"}}
        out, _ = ex.copy()(list(range(4)), uproot_inflater, None)  # "auto", the default
        assert out == {"library": {"isal"}}
    with dask.config.set({"gpuexec.reading.inflate": "libdeflate"}), \
            pytest.raises(ValueError, match="gpuexec.reading.inflate must be"):
        config.ReadingSettings.read()


@pytest.mark.parametrize("sample", ["nano_dy", "nano_tt_v15"])
def test_baskets_cut_out_of_the_file_are_the_ones_uproot_reads(sample):
    """``device_reading.find_baskets`` cuts each basket's zlib streams out of the file
    itself (key header, 9-byte ROOT block headers), as GPU workers inflate them: on real
    CMS NanoAOD written by ROOT, every basket it finds inflates (or is stored) to uproot's
    own bytes, and each stream is tagged with its basket's first entry."""
    import zlib

    from gpuexec.io import device_read as device_reading

    path = os.path.join(os.path.dirname(SAMPLE), f"{sample}.root")
    streams, firsts, baskets = [], [], 0
    with uproot.open(path) as f:
        tree = f["Events"]
        names = [k for k in tree.keys() if k.startswith(("nMuon", "Muon_", "Jet_"))]
        for name in names:
            branch = tree[name]
            for i, basket in enumerate(device_reading.find_baskets(branch, 0,
                                                                   branch.num_entries)):
                baskets += 1
                assert basket.stored is not None or basket.streams, basket.where
                inflated = basket.stored if basket.stored is not None else b"".join(
                    zlib.decompress(s) for s, _u in basket.streams)
                assert inflated == bytes(branch.basket(i).raw_data), (name, i)
                assert all(len(zlib.decompress(s)) == u for s, u in basket.streams)
                streams += [s for s, _u in basket.streams]
                firsts += [basket.entry_start] * len(basket.streams)
        assert baskets == sum(tree[n].num_baskets for n in names)
        starts = {int(s) for n in names for s in tree[n].entry_offsets[:-1]}
    assert streams and len(firsts) == len(streams)
    assert set(firsts) <= starts
