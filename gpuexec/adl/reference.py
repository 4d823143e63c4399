"""Independent references for the ADL queries: plain Python, one event at a time,
over numpy arrays read by uproot (``library="np"``; no awkward, no gpuexec).

Each ``q<N>(columns, n_events)`` returns ``{histogram name: [values to fill]}`` written
straight from the query's English definition, with explicit loops over objects and
pairs/triplets in index order; ``run(number, path)`` reads the file and fills the same
histograms (axes) as the processor, returning the same output structure.

Kinematics are in float64 (Python floats) from the stored float32 values. Ties are
broken as an arg-min/arg-max over a list does (first wins); for Q8 the light
leptons are listed electrons first, then muons. Which events fill follows each
query's docstring in ``queries.py`` (Q7: every event, HT = 0 without a clean jet).
"""

from __future__ import annotations

import math

import uproot

from gpuexec.adl import columns as colmap
from gpuexec.adl.queries import QUERIES

Z_MASS = 91.2
TOP_MASS = 172.5


def _four_vector(pt, eta, phi, mass):
    px = pt * math.cos(phi)
    py = pt * math.sin(phi)
    pz = pt * math.sinh(eta)
    return (px, py, pz, math.sqrt(px * px + py * py + pz * pz + mass * mass))


def _sum(*vectors):
    px, py, pz, e = vectors[0]
    for v in vectors[1:]:
        px, py, pz, e = px + v[0], py + v[1], pz + v[2], e + v[3]
    return (px, py, pz, e)


def _mass(v):
    px, py, pz, e = v
    return math.sqrt(max(e * e - (px * px + py * py + pz * pz), 0.0))


def _delta_r(eta1, phi1, eta2, phi2):
    dphi = (phi1 - phi2 + math.pi) % (2 * math.pi) - math.pi
    deta = eta1 - eta2
    return math.sqrt(deta * deta + dphi * dphi)


def _objects(cols, i, collection, fields):
    """The objects of ``collection`` in event ``i`` as a list of dicts of Python floats."""
    arrays = [cols[f"{collection}.{f}"][i] for f in fields]
    return [{f: float(a[k]) for f, a in zip(fields, arrays)} for k in range(len(arrays[0]))]


KINEMATICS = ("pt", "eta", "phi", "mass")


def q1(cols, n):
    return {"met": [float(cols["MET.pt"][i]) for i in range(n)]}


def q2(cols, n):
    return {"jet_pt": [float(pt) for i in range(n) for pt in cols["Jet.pt"][i]]}


def q3(cols, n):
    out = []
    for i in range(n):
        for pt, eta in zip(cols["Jet.pt"][i], cols["Jet.eta"][i]):
            if abs(float(eta)) < 1.0:
                out.append(float(pt))
    return {"jet_pt": out}


def q4(cols, n):
    out = []
    for i in range(n):
        hard = sum(1 for pt in cols["Jet.pt"][i] if float(pt) > 40.0)
        if hard >= 2:
            out.append(float(cols["MET.pt"][i]))
    return {"met": out}


def q5(cols, n):
    out = []
    for i in range(n):
        muons = _objects(cols, i, "Muon", KINEMATICS + ("charge",))
        found = False
        for a in range(len(muons)):
            for b in range(a + 1, len(muons)):
                if muons[a]["charge"] * muons[b]["charge"] >= 0:
                    continue
                m = _mass(_sum(*(_four_vector(*(mu[f] for f in KINEMATICS)) for mu in (muons[a], muons[b]))))
                if 60.0 < m < 120.0:
                    found = True
        if found:
            out.append(float(cols["MET.pt"][i]))
    return {"met": out}


def q6(cols, n):
    pts, btags = [], []
    for i in range(n):
        jets = _objects(cols, i, "Jet", KINEMATICS + ("btag",))
        best = None
        for a in range(len(jets)):
            for b in range(a + 1, len(jets)):
                for c in range(b + 1, len(jets)):
                    trio = (jets[a], jets[b], jets[c])
                    p = _sum(*(_four_vector(*(j[f] for f in KINEMATICS)) for j in trio))
                    distance = abs(_mass(p) - TOP_MASS)
                    if best is None or distance < best[0]:
                        best = (distance, math.sqrt(p[0] * p[0] + p[1] * p[1]),
                                max(j["btag"] for j in trio))
        if best is not None:
            pts.append(best[1])
            btags.append(best[2])
    return {"trijet_pt": pts, "trijet_btag": btags}


def q7(cols, n):
    out = []
    for i in range(n):
        leptons = [lep for coll in ("Muon", "Electron")
                   for lep in _objects(cols, i, coll, ("pt", "eta", "phi")) if lep["pt"] > 10.0]
        ht = 0.0  # "in each event": an event without a clean jet fills HT = 0
        for jet in _objects(cols, i, "Jet", ("pt", "eta", "phi")):
            if jet["pt"] <= 30.0:
                continue
            if all(_delta_r(jet["eta"], jet["phi"], lep["eta"], lep["phi"]) >= 0.4 for lep in leptons):
                ht += jet["pt"]
        out.append(ht)
    return {"ht": out}


def q8(cols, n):
    out = []
    for i in range(n):
        leptons = [dict(lep, flavour=coll) for coll in ("Electron", "Muon")
                   for lep in _objects(cols, i, coll, KINEMATICS + ("charge",))]
        if len(leptons) < 3:
            continue
        best = None
        for a in range(len(leptons)):
            for b in range(a + 1, len(leptons)):
                la, lb = leptons[a], leptons[b]
                if la["flavour"] != lb["flavour"] or la["charge"] * lb["charge"] >= 0:
                    continue
                m = _mass(_sum(*(_four_vector(*(lep[f] for f in KINEMATICS)) for lep in (la, lb))))
                if best is None or abs(m - Z_MASS) < best[0]:
                    best = (abs(m - Z_MASS), a, b)
        if best is None:
            continue
        third = None
        for k, lep in enumerate(leptons):
            if k not in best[1:] and (third is None or lep["pt"] > third["pt"]):
                third = lep
        met, met_phi = float(cols["MET.pt"][i]), float(cols["MET.phi"][i])
        out.append(math.sqrt(2.0 * met * third["pt"] * (1.0 - math.cos(met_phi - third["phi"]))))
    return {"mt": out}


REFERENCES = {1: q1, 2: q2, 3: q3, 4: q4, 5: q5, 6: q6, 7: q7, 8: q8}


def read(path, columns, treename: str = "Events", entry_start=None, entry_stop=None):
    """``({logical column: numpy array}, n_events)``; jagged columns are object arrays
    holding one numpy array per event."""
    with uproot.open(path) as f:
        tree = f[treename]
        names = colmap.branch_names(columns, tree.keys())
        arrays = tree.arrays(sorted(set(names.values())), entry_start=entry_start,
                             entry_stop=entry_stop, library="np")
        n = len(next(iter(arrays.values()))) if arrays else tree.num_entries
    return {name: arrays[branch] for name, branch in names.items()}, n


def fill(number: int, cols: dict, n_events: int) -> dict:
    """The reference result for query ``number`` from columns as ``read`` returns them
    (they may hold more columns than the query needs)."""
    query = QUERIES[number]()
    values = REFERENCES[number](cols, n_events)
    hists = query.make_histograms()
    sums = {}
    for name, h in hists.items():
        h.fill(values[name])
        sums[name] = math.fsum(values[name])
    return {"n_events": n_events, "hists": hists, "sums": sums}


def run(number: int, path, treename: str = "Events", entry_start=None, entry_stop=None) -> dict:
    """The reference result for query ``number`` on one file: the processor's output
    structure ``{"n_events", "hists", "sums"}``."""
    cols, n = read(path, QUERIES[number].columns, treename, entry_start, entry_stop)
    return fill(number, cols, n)
