"""The layouts coffea really produces: NanoEvents in mode="virtual" on the real CMS
NanoAOD samples (lazily loaded buffers), with an IndexedArray above the lists
(``events[cut].Muon.pt``), below them (``events.Muon[mask].pt``) and lists of records
(``events.Muon[mask]``). gk's reductions, take and filter must equal awkward's with zero
hand-offs, and read no column that the call does not need."""

from __future__ import annotations

import os
import warnings

import awkward as ak
import numpy as np
import pytest

import gpuexec.kernels as gk
from jagged import assert_same

SAMPLES = os.path.join(os.path.dirname(__file__), "..", "data", "samples")
FILES = ["nano_dy.root", "nano_tt_v15.root"]


def open_events(name):
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # schema notes about cross-references of the sample
        return NanoEventsFactory.from_root(
            {os.path.join(SAMPLES, name): "Events"}, schemaclass=NanoAODSchema,
            mode="virtual").events()


@pytest.fixture(scope="module", params=FILES)
def events(request):
    return open_events(request.param)


def native(fn, *args, **kwargs):
    gk.reset_stats()
    out = fn(*args, **kwargs)
    s = gk.stats()
    assert s["n_handoffs"] == 0, s["handoff_reasons"]
    return out


CASES = ["plain", "indexed_above", "indexed_below"]


def muon_pt(events, case):
    """events.Muon.pt as a ListOffsetArray, under an IndexedArray, or over one."""
    if case == "plain":
        return events.Muon.pt
    if case == "indexed_above":
        return events[ak.num(events.Muon) > 0].Muon.pt
    return events.Muon[events.Muon.pt > 15].pt


def test_layouts_are_the_intended_ones(events):
    assert isinstance(muon_pt(events, "plain").layout, ak.contents.ListOffsetArray)
    assert isinstance(muon_pt(events, "indexed_above").layout, ak.contents.IndexedArray)
    below = muon_pt(events, "indexed_below").layout
    assert isinstance(below.content, ak.contents.IndexedArray)


REDUCTIONS = ["sum", "prod", "min", "max", "argmin", "argmax", "count", "count_nonzero",
              "any", "all"]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions(events, case, name):
    pt = muon_pt(events, case)
    got = native(getattr(gk, name), pt, axis=1)
    assert_same(got, getattr(ak, name)(pt, axis=1))


@pytest.mark.parametrize("case", CASES)
def test_argmax_keepdims_and_pick(events, case):
    pt = muon_pt(events, case)
    idx = native(gk.argmax, pt, axis=1, keepdims=True)
    assert_same(idx, ak.argmax(pt, axis=1, keepdims=True))
    assert_same(native(gk.take, pt, idx), pt[idx])


@pytest.mark.parametrize("case", CASES)
def test_take_and_filter_numbers(events, case):
    pt = muon_pt(events, case)
    mask = pt > 25
    assert_same(native(gk.filter, pt, mask), pt[mask])
    order = ak.argsort(pt, axis=1, ascending=False)
    assert_same(native(gk.take, pt, order), pt[order])
    lead = order[:, :1]
    assert_same(native(gk.take, pt, lead), pt[lead])
    rows = np.arange(len(pt))[::-3]
    assert_same(native(gk.take, pt, rows), pt[rows])
    assert_same(native(gk.to_packed, pt), ak.to_packed(pt))


def test_records(events):
    muons = events.Muon
    mask = (muons.pt > 15) & (abs(muons.eta) < 2.4)
    got = native(gk.filter, muons, mask)
    want = muons[mask]
    assert str(got.type) == str(want.type)
    for field in ("pt", "eta", "phi", "charge", "tightId"):
        assert_same(got[field], want[field])
    assert_same(native(gk.sum, got.pt, axis=1), ak.sum(want.pt, axis=1))
    idx = ak.argmax(muons.pt, axis=1, keepdims=True)
    leading = native(gk.take, muons, idx)
    assert str(leading.type) == str(muons[idx].type)
    assert_same(leading.pt, muons[idx].pt)
    jets = events.Jet
    got = native(gk.filter, jets, jets.pt > 30)
    assert_same(got.eta, jets[jets.pt > 30].eta)


def test_event_selection_keeps_records_lazy(events):
    cut = ak.num(events.Jet) >= 2
    selected = native(gk.filter, events, cut)
    want = events[cut]
    assert len(selected) == len(want) == int(np.sum(ak.to_numpy(cut)))
    assert_same(selected.Jet.pt, want.Jet.pt)
    assert_same(native(gk.max, selected.Jet.pt, axis=1), ak.max(want.Jet.pt, axis=1))


def _materialized(record_layout):
    out = set()
    for field, content in zip(record_layout.fields, record_layout.contents):
        data = getattr(content, "data", None)
        if getattr(data, "is_materialized", True) and isinstance(content, ak.contents.NumpyArray):
            out.add(field)
    return out


@pytest.mark.parametrize("name", FILES)
def test_no_column_read_that_is_not_needed(name):
    events = open_events(name)
    muons = events.Muon
    record = muons.layout.content
    mask = muons.pt > 10                       # awkward reads Muon_pt (and the offsets)
    assert _materialized(record) == {"pt"}
    selected = native(gk.filter, muons, mask)
    picked = native(gk.take, muons, ak.argmax(muons.pt, axis=1, keepdims=True))
    assert _materialized(record) == {"pt"}     # the records were carried, not read
    native(gk.sum, selected.eta, axis=1)       # now Muon_eta is needed, nothing else
    assert _materialized(record) == {"pt", "eta"}
    assert len(picked) == len(events)
