"""The eight ADL queries written as a physicist writes them: plain awkward on NanoEvents
collections, with the Lorentz-vector behaviours coffea ships
(``coffea.nanoevents.methods.vector``, scikit-hep vector underneath). No ``gk`` call:
on a GPU worker these processors reach the kernel engine only through
``gpuexec.awkward``, the provider that answers awkward's own kernel lookups.

Histograms, binning and output structure are those of ``examples/adl/queries.py``
(``ADLQuery.fill``), and so are the conventions that decide a result:

* kinematics in float64 from NanoAOD's float32 values (``_vectors``);
* ties go to the first candidate (``ak.argmin``/``ak.argmax`` keep the first);
* Q7 fills HT only for events with at least one clean jet, as
  ``examples/adl/reference.py`` does;
* Q8 lists electrons before muons.
"""

from __future__ import annotations

import awkward as ak
import numpy as np
from coffea.nanoevents.methods import vector

from examples.adl import columns as colmap
from examples.adl.queries import ADLQuery, QUERIES as GK_QUERIES

Z_MASS = 91.2
TOP_MASS = 172.5


def _collection(events, name):
    """``events.<name>``, under the first name the file has (``MET`` or ``PuppiMET``)."""
    for candidate in colmap.COLLECTIONS[name]:
        if candidate in events.fields:
            return events[candidate]
    raise colmap.MissingColumn(f"no collection among {colmap.COLLECTIONS[name]}")


def _btag(jets):
    """The jets' b-tag discriminant under the name the file has."""
    for candidate in colmap.FIELDS[("Jet", "btag")]:
        if candidate in jets.fields:
            return jets[candidate]
    raise colmap.MissingColumn(f"no b-tag field among {colmap.FIELDS[('Jet', 'btag')]}")


def _vectors(objects, **extra):
    """Lorentz vectors in float64 of ``objects`` (pt, eta, phi, mass), with ``extra``
    fields riding along."""
    fields = {f: ak.values_astype(objects[f], np.float64) for f in ("pt", "eta", "phi", "mass")}
    return ak.zip({**fields, **extra}, with_name="PtEtaPhiMLorentzVector",
                  behavior=vector.behavior)


class PlainQuery(ADLQuery):
    """An ADL query over NanoEvents: ``compute(events)`` returns the values to fill."""

    def compute(self, events) -> dict:
        raise NotImplementedError

    def process(self, events):
        return self.fill(len(events), self.compute(events))


class Q1(PlainQuery):
    def compute(self, events):
        return {"met": _collection(events, "MET").pt}


class Q2(PlainQuery):
    def compute(self, events):
        return {"jet_pt": ak.flatten(events.Jet.pt)}


class Q3(PlainQuery):
    def compute(self, events):
        jets = events.Jet
        return {"jet_pt": ak.flatten(jets.pt[abs(jets.eta) < 1.0])}


class Q4(PlainQuery):
    def compute(self, events):
        n_hard = ak.sum(events.Jet.pt > 40.0, axis=1)
        return {"met": _collection(events, "MET").pt[n_hard >= 2]}


class Q5(PlainQuery):
    def compute(self, events):
        muons = _vectors(events.Muon, charge=events.Muon.charge)
        pairs = ak.combinations(muons, 2, fields=["a", "b"])
        mass = (pairs.a + pairs.b).mass
        z_like = (pairs.a.charge * pairs.b.charge < 0) & (mass > 60.0) & (mass < 120.0)
        return {"met": _collection(events, "MET").pt[ak.any(z_like, axis=1)]}


class Q6(PlainQuery):
    def compute(self, events):
        jets = events.Jet[ak.num(events.Jet) >= 3]
        jets = _vectors(jets, btag=_btag(jets))
        trijets = ak.combinations(jets, 3, fields=["j1", "j2", "j3"])
        p4 = trijets.j1 + trijets.j2 + trijets.j3
        best = ak.argmin(abs(p4.mass - TOP_MASS), axis=1, keepdims=True)
        btag = np.maximum(np.maximum(trijets.j1.btag, trijets.j2.btag), trijets.j3.btag)
        return {"trijet_pt": ak.flatten(p4.pt[best]), "trijet_btag": ak.flatten(btag[best])}


class Q7(PlainQuery):
    def compute(self, events):
        jets = _vectors(events.Jet[events.Jet.pt > 30.0])
        near = []
        for leptons in (events.Muon, events.Electron):
            leptons = _vectors(leptons[leptons.pt > 10.0])
            pairs = ak.cartesian([jets, leptons], nested=True)
            near.append(ak.any(pairs["0"].delta_r(pairs["1"]) < 0.4, axis=2))
        clean = jets[~(near[0] | near[1])]
        return {"ht": ak.sum(clean.pt, axis=1)}  # HT = 0 without a clean jet, as gpuexec.adl Q7


class Q8(PlainQuery):
    def compute(self, events):
        electrons = _vectors(events.Electron, charge=events.Electron.charge,
                             flavour=ak.zeros_like(events.Electron.charge))
        muons = _vectors(events.Muon, charge=events.Muon.charge,
                         flavour=ak.ones_like(events.Muon.charge))
        leptons = ak.concatenate([electrons, muons], axis=1)
        met = _collection(events, "MET")
        three = ak.num(leptons) >= 3
        leptons, met = leptons[three], met[three]

        pairs = ak.argcombinations(leptons, 2, fields=["a", "b"])
        a, b = leptons[pairs.a], leptons[pairs.b]
        sfos = (a.flavour == b.flavour) & (a.charge * b.charge < 0)
        pairs, distance = pairs[sfos], abs((a + b).mass - Z_MASS)[sfos]
        has_pair = ak.num(pairs) > 0
        leptons, met = leptons[has_pair], met[has_pair]
        best = ak.firsts(pairs[has_pair][ak.argmin(distance[has_pair], axis=1, keepdims=True)])

        index = ak.local_index(leptons)
        others = leptons[(index != best.a) & (index != best.b)]
        third = ak.firsts(others[ak.argmax(others.pt, axis=1, keepdims=True)])
        met_pt, met_phi = ak.values_astype(met.pt, np.float64), ak.values_astype(met.phi, np.float64)
        mt = np.sqrt(2.0 * met_pt * third.pt * (1.0 - np.cos(met_phi - third.phi)))
        return {"mt": mt}


def _described(cls):
    """Number, title, columns and binning of the gk query of the same number."""
    gk_query = GK_QUERIES[int(cls.__name__[1:])]
    for attr in ("number", "title", "columns", "binning"):
        setattr(cls, attr, getattr(gk_query, attr))
    return cls


QUERIES: dict[int, type[PlainQuery]] = {
    q.number: q for q in map(_described, (Q1, Q2, Q3, Q4, Q5, Q6, Q7, Q8))}


def make(number: int | str) -> PlainQuery:
    try:
        return QUERIES[int(number)]()
    except (KeyError, ValueError):
        raise ValueError(f"no ADL query {number!r}; the queries are {sorted(QUERIES)}") from None
