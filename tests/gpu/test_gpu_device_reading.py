"""gpuexec.io.device_read on a GPU: every plain NanoAOD branch of real CMS samples and of a
generated file with several baskets, read into CuPy arrays, equals uproot's arrays, with
nvCOMP inflating on the device (skipped where ``nvidia-nvcomp-cu13`` is not installed) and
with the host inflating; and every ADL query staged on the device through it gives the
same output as staged through uproot. Skipped without a GPU (tests/gpu/conftest.py)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
import device_reading_cases as cases  # noqa: E402

from gpuexec.io import device_read as device_reading  # noqa: E402
from gpuexec.io.staging import Timings, stage_events  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    return cases.generated(tmp_path_factory.mktemp("dr"))


@pytest.fixture(params=["nvcomp", "host"])
def inflater(request, monkeypatch):
    import cupy

    if request.param == "host":
        monkeypatch.setattr(device_reading, "_nvcomp_codec", lambda: None)
    elif device_reading.inflater(cupy) != "nvcomp":
        pytest.skip("nvidia-nvcomp-cu13 is not installed")
    else:  # these reads have a few streams each: nvCOMP takes them all the same
        monkeypatch.setattr(device_reading, "NVCOMP_MIN_STREAMS", 1)
    assert device_reading.inflater(cupy) == request.param
    return request.param


# one real sample (its 1500 branches, each read alone, take a minute per inflater here);
# tests/test_device_reading.py compares all three with numpy
@pytest.mark.parametrize("sample", ["multi", cases.REAL[0]])
def test_every_branch_equals_uproot_on_the_device(sample, multi, inflater):
    import cupy

    path = multi if sample == "multi" else sample
    assert cases.compare_file(path, cupy, to_host=cupy.asnumpy) > 0


def test_staged_queries_on_the_device_are_unchanged(multi, inflater):
    import awkward as ak
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    from examples.adl import QUERIES, make

    def events():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return NanoEventsFactory.from_root({multi: "Events"}, schemaclass=NanoAODSchema,
                                               mode="virtual", entry_start=1234,
                                               entry_stop=7777).events()

    for q in QUERIES:
        want = make(q).process(stage_events(events(), "cuda"))
        # twice with a read-ahead token: the second task reads the first's columns at its
        # first touch, in one batch
        for _task in range(2):
            timings = Timings()
            staged = stage_events(events(), "cuda", timings, read_on_device=True,
                                  read_ahead=f"Q{q}")
            assert ak.backend(staged) == "cuda"
            got = make(q).process(staged)
            assert got["n_events"] == want["n_events"]
            assert got["sums"] == want["sums"], q
            for name, h in want["hists"].items():
                assert (h.values(flow=True) == got["hists"][name].values(flow=True)).all(), \
                    (q, name)
            assert timings.read > 0


@pytest.mark.parametrize("read_on_device", [False, True])
def test_cross_references_of_staged_events_stay_on_the_device(read_on_device):
    """``Muon.matched_jet`` of events staged on the device indexes the staged Jets (the
    host events coffea built were found before: device indices into host arrays)."""
    import awkward as ak
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        host = NanoEventsFactory.from_root({cases.REAL[0]: "Events"}, schemaclass=NanoAODSchema,
                                           mode="virtual", entry_start=0,
                                           entry_stop=40).events()
    want = ak.materialize(host.Muon.matched_jet.pt).tolist()
    staged = stage_events(host, "cuda", read_on_device=read_on_device)
    assert staged.Muon._events() is staged
    got = staged.Muon.matched_jet.pt
    assert ak.backend(got) == "cuda"
    assert ak.to_backend(ak.materialize(got), "cpu").tolist() == want


def test_read_many_on_the_device_in_one_batch(multi, inflater):
    """Columns of every kind read together into CuPy arrays (with nvCOMP: one call for
    the batch) equal uproot's; a refused column comes back as its Unsupported."""
    import cupy
    import numpy as np
    import uproot

    with uproot.open(multi) as f:
        tree = f["Events"]
        for start, stop in cases.ranges(tree["Muon_pt"]):
            columns = [("content", tree["Muon_pt"], start, stop),
                       ("content", tree["Electron_pt"], start, stop),
                       ("offsets", tree["nMuon"], start, stop),
                       ("flat", tree["MET_phi"], start, stop),
                       ("flat", tree["Muon_pt"], start, stop)]
            got = device_reading.read_many(columns, cupy)
            assert isinstance(got[-1], device_reading.Unsupported)
            for (kind, branch, a, b), value in zip(columns[:-1], got[:-1]):
                if kind == "offsets":
                    counts = branch.array(entry_start=a, entry_stop=b, library="np")
                    want = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
                else:
                    want = cases.expected(branch, a, b)[1]
                assert isinstance(value, cupy.ndarray) and value.dtype == want.dtype
                assert np.array_equal(cupy.asnumpy(value), want), (kind, branch.name, a, b)
