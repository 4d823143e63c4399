"""The ADL benchmark processors (examples/adl) against their independent plain-Python
references, bin by bin, on the real NanoAOD samples and on a small generated sample;
each run also checks the event total and that the kernel engine did the jagged work
(gk calls, no hand-offs to awkward)."""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import uproot
from coffea import processor

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `pytest` run from elsewhere than the repository root
    sys.path.insert(0, str(ROOT))

import gpuexec.kernels as gk  # noqa: E402
from examples.adl import QUERIES, columns, make, reference  # noqa: E402
from examples.make_sample import write_sample  # noqa: E402

REAL = {name: ROOT / "data" / "samples" / f"{name}.root"
        for name in ("nano_dy", "nano_tt_v15", "nano_dimuon")}
GENERATED_EVENTS = 3000
# Chunks per file: several where cheap, so accumulation across chunks is part of what
# is compared; one for nano_tt_v15, whose ~8000-branch TTree costs seconds to open per chunk.
CHUNKS = {"generated": 3, "nano_dy": 2, "nano_dimuon": 2, "nano_tt_v15": 1}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    path = tmp_path_factory.mktemp("adl") / "adl_generated.root"
    return write_sample(path, GENERATED_EVENTS, seed=7, chunk_size=1000)


def _sample_path(sample, generated_path):
    return Path(generated_path) if sample == "generated" else REAL[sample]


ALL_COLUMNS = sorted({c for q in QUERIES.values() for c in q.columns})


@functools.lru_cache(maxsize=None)
def _branches(path):
    with uproot.open(path) as f:
        return frozenset(f["Events"].keys()), f["Events"].num_entries


def _has_columns(path, names):
    try:
        columns.branch_names(names, _branches(path)[0])
    except columns.MissingColumn:
        return False
    return True


@functools.lru_cache(maxsize=None)
def _reference_columns(path):
    """Every column the queries read (that the file has), read once per file."""
    return reference.read(path, [c for c in ALL_COLUMNS if _has_columns(path, [c])])


@functools.lru_cache(maxsize=None)
def _reference(query, path):
    return reference.fill(query, *_reference_columns(path))


# File metadata (entries, uuid) read once per file for all the runs of this module.
_METADATA: dict = {}


def _run_processor(query, path, executor, chunksize):
    runner = processor.Runner(executor=executor, chunksize=chunksize, metadata_cache=_METADATA)
    return runner({"sample": [str(path)]}, make(query), treename="Events")


def assert_same_result(out, ref):
    assert out["n_events"] == ref["n_events"]
    assert set(out["hists"]) == set(ref["hists"])
    for name, expected in ref["hists"].items():
        got = out["hists"][name]
        assert got.axes == expected.axes
        got_counts, want_counts = got.values(flow=True), expected.values(flow=True)
        differ = np.flatnonzero(got_counts != want_counts)
        assert differ.size == 0, (
            f"{name}: bins {differ.tolist()} (with flow) hold {got_counts[differ].tolist()}, "
            f"the reference {want_counts[differ].tolist()}")
        assert math.isclose(out["sums"][name], ref["sums"][name], rel_tol=1e-9, abs_tol=1e-9), name


SAMPLES = ["generated", *REAL]


@pytest.mark.parametrize("sample", SAMPLES)
@pytest.mark.parametrize("query", sorted(QUERIES))
def test_query_matches_reference(query, sample, generated):
    path = _sample_path(sample, generated)
    if not _has_columns(path, QUERIES[query].columns):
        pytest.skip(f"{path.name} lacks the columns of Q{query}")
    n_entries = _branches(path)[1]
    chunksize = -(-n_entries // CHUNKS[sample])

    gk.reset_stats()
    out = _run_processor(query, path, processor.IterativeExecutor(), chunksize)
    stats = gk.stats()

    assert out["n_events"] == n_entries
    assert_same_result(out, _reference(query, str(path)))
    assert stats["n_handoffs"] == 0, stats["handoff_reasons"]
    if query != 1:  # Q1 (MET of all events) has no jagged operation to run
        assert stats["n_calls"] > 0


def _cuda_compute_only(name: str) -> bool:
    """Whether awkward's CUDA backend may run kernel ``name`` through cuda.compute
    (which JIT-compiles Python callables and so needs numba-cuda-mlir on the GPU
    worker). Asked of awkward's own support table; no GPU needed."""
    from awkward._backends.cupy import CupyBackend

    return CupyBackend._supports_cuda_compute(None, name)


@pytest.mark.parametrize("query", sorted(QUERIES))
def test_query_runs_no_awkward_kernel_that_needs_cuda_compute(query, generated, monkeypatch):
    """On a GPU worker the queries' jagged work is gk's; the awkward kernels they still
    reach (broadcasting, masking) must be ones awkward's CUDA backend has as plain
    kernels, or a GPU worker without numba-cuda-mlir fails the chunk (seen on the H200:
    Q6 and Q8 moved to CPU workers). Recorded on the CPU backend, which takes the
    same layout paths."""
    from awkward._backends.numpy import NumpyBackend

    from gpuexec.io.staging import stage_events
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    reached: dict = {}
    lookup = NumpyBackend.__getitem__

    def recording(self, index):
        if _cuda_compute_only(index[0]):
            reached[index[0]] = reached.get(index[0], 0) + 1
        return lookup(self, index)

    events = NanoEventsFactory.from_root({str(generated): "Events"}, schemaclass=NanoAODSchema,
                                         mode="virtual").events()
    proc = make(query)
    cols = proc.read(stage_events(events, "cpu"))
    monkeypatch.setattr(NumpyBackend, "__getitem__", recording)
    proc.observables(cols)
    assert reached == {}, f"Q{query} reaches awkward kernels that need cuda.compute: {reached}"


@pytest.mark.parametrize("query", [1, 8])
def test_reading_floor_reads_what_its_query_reads(query, generated):
    """``make("8r")`` (benchmarks/executor.py's reading floor under Q8) reads every
    branch Q8 reads and only those, and computes nothing: no engine call, no histogram."""
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    def branches_read(proc):
        log = []
        events = NanoEventsFactory.from_root({str(generated): "Events"}, access_log=log,
                                             schemaclass=NanoAODSchema, mode="virtual").events()
        gk.reset_stats()
        out = proc.process(events)
        return {a.branch for a in log}, out, gk.stats()["n_calls"]

    query_read, _, _ = branches_read(make(query))
    floor_read, out, calls = branches_read(make(f"{query}r"))
    assert floor_read == query_read
    assert out == {"n_events": GENERATED_EVENTS, "hists": {}, "sums": {}}
    assert calls == 0


def test_reference_selects_something_on_generated(generated):
    """The generated sample exercises every query (no histogram left empty), so the
    comparisons above are not vacuous."""
    for query in QUERIES:
        ref = _reference(query, str(generated))
        for name, h in ref["hists"].items():
            assert h.values(flow=True).sum() > 0, f"Q{query} {name} is empty on the generated sample"


def test_column_map_resolves_each_sample_layout():
    """Jet_btag/btagDeepB/btagDeepFlavB and MET/PuppiMET as the files have them."""
    expect = {"nano_dy": ("Jet_btagDeepB", "MET_pt"),
              "nano_tt_v15": ("Jet_btagDeepFlavB", "PuppiMET_pt"),
              "nano_dimuon": ("Jet_btagDeepB", "MET_pt")}
    for sample, (btag, met) in expect.items():
        keys = uproot.open(REAL[sample])["Events"].keys()
        names = columns.branch_names(["Jet.btag", "MET.pt", "MET.phi"], keys)
        assert (names["Jet.btag"], names["MET.pt"]) == (btag, met)
        assert names["MET.phi"] == met.replace("_pt", "_phi")  # one MET definition
    with pytest.raises(columns.MissingColumn, match="tau21"):
        columns.branch_names(["Jet.tau21"], ["Jet_pt"])  # clear error naming the candidates
    with pytest.raises(ValueError, match="unknown logical column"):
        columns.branch_names(["Tau.pt"], ["Tau_pt"])


def test_met_collection_is_not_mixed():
    """MET.pt from MET and MET.phi from PuppiMET would be a silent physics error."""
    keys = ["MET_pt", "PuppiMET_pt", "PuppiMET_phi"]
    assert columns.branch_names(["MET.pt", "MET.phi"], keys) == {
        "MET.pt": "PuppiMET_pt", "MET.phi": "PuppiMET_phi"}


@pytest.mark.slow
def test_q6_through_gpuexecutor_matches_reference():
    """The same processor through gpuexec's own executor (embedded Dask cluster)."""
    executor_module = pytest.importorskip("gpuexec.executor")
    path = REAL["nano_tt_v15"]
    cluster = executor_module.GPUCluster(cpu_workers=1, dashboard_address="127.0.0.1:0")
    with executor_module.GPUExecutor(client=cluster) as executor:
        out = _run_processor(6, path, executor, chunksize=100)
    assert out["n_events"] == 200
    assert_same_result(out, _reference(6, str(path)))


def test_q7_fills_every_event(generated):
    """Q7 asks for HT "in each event": an event without a clean jet fills HT = 0 (coffea's
    ADL convention), in the processor and in the reference alike."""
    out = _run_processor(7, generated, processor.IterativeExecutor(), 1000)
    ref = _reference(7, str(generated))
    for result in (out, ref):
        ht = result["hists"]["ht"]
        assert ht.values(flow=True).sum() == GENERATED_EVENTS
        assert ht.values()[0] > 0  # the HT = 0 events, in the first bin
    assert_same_result(out, ref)


def test_axes_fit_their_quantity(generated):
    """Summed over every sample, under 1 % of each histogram's entries fall outside its
    axis (a trijet-pT axis of 15-40 GeV left 171 of nano_tt_v15's 200 in overflow)."""
    for query in QUERIES:
        totals: dict[str, list[float]] = {}
        for sample in SAMPLES:
            path = _sample_path(sample, generated)
            if not _has_columns(path, QUERIES[query].columns):
                continue
            for name, h in _reference(query, str(path))["hists"].items():
                t = totals.setdefault(name, [0.0, 0.0])
                t[0] += h.values(flow=True).sum()
                t[1] += h.values(flow=True).sum() - h.values().sum()
        for name, (entries, outside) in totals.items():
            assert entries > 0, f"Q{query} {name}"
            assert outside < 0.01 * entries, (
                f"Q{query} {name}: {outside:.0f} of {entries:.0f} entries outside the axis")


def test_each_png_has_a_title_of_its_own(tmp_path, monkeypatch):
    """examples/run_adl.py titles every PNG after its own histogram (Q6 writes two)."""
    import examples.run_adl as run_adl

    titles = {}
    monkeypatch.setattr(run_adl, "save_png",
                        lambda h, path, title: titles.setdefault(path.name, title) and path)
    assert run_adl.main(["--query", "6", "--executor", "iterative", "--out", str(tmp_path),
                         "--file", str(REAL["nano_dy"])]) == 0
    assert sorted(titles) == ["adl_q6_trijet_btag.png", "adl_q6_trijet_pt.png"]
    assert len(set(titles.values())) == 2
    every = [run_adl.plot_title(make(q), name) for q in QUERIES for name in make(q).binning]
    assert len(set(every)) == len(every)
