"""The eight queries of the IRIS-HEP ADL benchmark as coffea processors.

Every jagged operation (reduction, sort, combination, cartesian product, take, filter,
flatten) goes through ``gpuexec.kernels`` so that the same processor runs on whatever
backend its arrays live on; numpy ufuncs are used only for elementwise math, on jagged
arrays through ``gk.elementwise`` (``kinematics``: one structure check per expression
instead of awkward's broadcasting per ufunc), and for event-level masks. Histograms are
filled on the host at the end.

Each axis fits its quantity on the NanoAOD samples of ``data/samples`` and the
generated sample (100 regular bins from 0: MET 0-200 GeV, jet pT 0-400, trijet pT
0-500, b-tag 0-1, HT 0-1200, mT 0-250), so that flow bins hold a tail of under 1 %
(``tests/test_adl.py::test_axes_fit_their_quantity``); values outside still land in
hist's flow bins, which the comparisons include.

Event selection follows the query's wording: a query about "each event" (Q1-Q3, Q7)
fills for every event, one about "events with ..." (Q4-Q6, Q8) only for those. Each
query's docstring states its convention.
"""

from __future__ import annotations

import awkward as ak
import hist
import numpy as np
from coffea import processor

import gpuexec.kernels as gk
from gpuexec.adl import columns as colmap
from gpuexec.adl import kinematics as kin

Z_MASS = 91.2
TOP_MASS = 172.5


class ADLQuery(processor.ProcessorABC):
    """One query: ``observables(cols)`` turns the query's columns into the flat arrays
    to histogram; ``process`` reads the columns, runs it and fills the histograms.

    Output: ``{"n_events": int, "hists": {name: hist.Hist}, "sums": {name: float}}``;
    ``sums`` holds the sum of the values filled (a check finer than the bins)."""

    number: int = 0
    title: str = ""
    columns: tuple[str, ...] = ()
    # histogram name -> (bins, low, high, axis label)
    binning: dict[str, tuple[int, float, float, str]] = {}

    def make_histograms(self) -> dict[str, hist.Hist]:
        return {name: hist.Hist(hist.axis.Regular(n, lo, hi, name=name, label=label),
                                storage=hist.storage.Double())
                for name, (n, lo, hi, label) in self.binning.items()}

    def observables(self, cols: dict) -> dict:
        raise NotImplementedError

    def read(self, events) -> dict:
        return colmap.from_events(events, self.columns)

    def process(self, events):
        return self.fill(len(events), self.observables(self.read(events)))

    def fill(self, n_events: int, values: dict) -> dict:
        hists = self.make_histograms()
        sums = {}
        for name, h in hists.items():
            host = to_host(values[name])
            h.fill(host)
            sums[name] = float(np.sum(host, dtype=np.float64))
        return {"n_events": int(n_events), "hists": hists, "sums": sums}

    def postprocess(self, accumulator):
        return accumulator


def to_host(values) -> np.ndarray:
    """A flat array of values (any backend, option type without missing values) as a
    float64 numpy array."""
    if isinstance(values, ak.Array):
        # materialize: a column passed through unread (Q1's MET) is still virtual
        values = ak.to_numpy(ak.to_backend(ak.materialize(values), "cpu"), allow_missing=False)
    return np.asarray(values, dtype=np.float64)


def _p4(cols, prefix):
    """The four-vectors of every object of collection ``prefix`` (computed once per
    object, then gathered for pairs/triplets: far less trigonometry than per member)."""
    return kin.p4(*(cols[f"{prefix}.{f}"] for f in ("pt", "eta", "phi", "mass")))


def _take(vector, index):
    """The four-vectors at a jagged ``index``."""
    return tuple(gk.take(component, index) for component in vector)


def _opposite(charge1, charge2):
    """Whether two charges (arrays of one list structure) are of opposite sign."""
    return gk.elementwise(lambda a, b: a * b < 0, charge1, charge2)


def _firsts(array, index):
    """``array`` at an arg-reduction with keepdims (one entry per event, None where the
    event had no candidate) as one optional value per event."""
    return gk.flatten(gk.take(array, index), axis=1)


class Q1(ADLQuery):
    """Every event fills its MET once."""

    number, title = 1, "MET of all events"
    columns = ("MET.pt",)
    binning = {"met": (100, 0.0, 200.0, "$E_T^{miss}$ [GeV]")}

    def observables(self, cols):
        return {"met": cols["MET.pt"]}


class Q2(ADLQuery):
    """Every jet of every event fills its pT (NanoAOD stores jets above 15 GeV)."""

    number, title = 2, "pT of all jets"
    columns = ("Jet.pt",)
    binning = {"jet_pt": (100, 0.0, 400.0, "jet $p_T$ [GeV]")}

    def observables(self, cols):
        return {"jet_pt": gk.flatten(cols["Jet.pt"], axis=1)}


class Q3(ADLQuery):
    """Every jet with |eta| < 1 fills its pT."""

    number, title = 3, "pT of jets with |eta| < 1"
    columns = ("Jet.pt", "Jet.eta")
    binning = {"jet_pt": (100, 0.0, 400.0, "jet $p_T$ ($|\\eta| < 1$) [GeV]")}

    def observables(self, cols):
        central = gk.elementwise(lambda eta: np.abs(eta) < 1.0, cols["Jet.eta"])
        return {"jet_pt": gk.flatten(gk.filter(cols["Jet.pt"], central), axis=1)}


class Q4(ADLQuery):
    """Only events with at least two jets above 40 GeV fill their MET."""

    number, title = 4, "MET of events with >= 2 jets of pT > 40 GeV"
    columns = ("MET.pt", "Jet.pt")
    binning = {"met": (100, 0.0, 200.0, "$E_T^{miss}$ [GeV]")}

    def observables(self, cols):
        n_hard = gk.count_nonzero(gk.elementwise(lambda pt: pt > 40.0, cols["Jet.pt"]), axis=1)
        return {"met": gk.filter(cols["MET.pt"], gk.elementwise(lambda n: n >= 2, n_hard))}


class Q5(ADLQuery):
    """Only events with an opposite-charge muon pair of mass 60-120 GeV fill their MET
    (once, however many pairs qualify)."""

    number, title = 5, "MET of events with an opposite-charge muon pair of mass 60-120 GeV"
    columns = ("MET.pt", "Muon.pt", "Muon.eta", "Muon.phi", "Muon.mass", "Muon.charge")
    binning = {"met": (100, 0.0, 200.0, "$E_T^{miss}$ [GeV]")}

    def observables(self, cols):
        pairs = gk.argcombinations(cols["Muon.pt"], 2, axis=1)
        first, second = pairs["0"], pairs["1"]
        charge = cols["Muon.charge"]
        opposite = _opposite(gk.take(charge, first), gk.take(charge, second))
        muons = _p4(cols, "Muon")
        m = kin.mass(kin.add(_take(muons, first), _take(muons, second)))
        z_like = gk.elementwise(lambda o, m: o & (m > 60.0) & (m < 120.0), opposite, m)
        has_z = gk.any(z_like, axis=1)
        return {"met": gk.filter(cols["MET.pt"], has_z)}


class Q6(ADLQuery):
    """Only events with at least three jets fill; the trijet whose mass is closest to
    172.5 GeV (the first in index order on a tie) gives the pT and the largest b-tag of
    its three jets."""

    number, title = 6, "trijet with mass closest to 172.5 GeV: its pT and max b-tag"
    columns = ("Jet.pt", "Jet.eta", "Jet.phi", "Jet.mass", "Jet.btag")
    binning = {"trijet_pt": (100, 0.0, 500.0, "trijet $p_T$ [GeV]"),
               "trijet_btag": (100, 0.0, 1.0, "max b-tag in trijet")}

    def observables(self, cols):
        enough = gk.elementwise(lambda n: n >= 3, gk.num(cols["Jet.pt"], axis=1))
        jets = {name: gk.filter(array, enough) for name, array in cols.items()}
        triplets = gk.argcombinations(jets["Jet.pt"], 3, axis=1)
        members = [triplets[k] for k in ("0", "1", "2")]
        p4 = _p4(jets, "Jet")
        trijet = kin.add(*(_take(p4, i) for i in members))
        distance = gk.elementwise(lambda m: np.abs(m - TOP_MASS), kin.mass(trijet))
        best = gk.argmin(distance, axis=1, keepdims=True)
        b0, b1, b2 = (gk.take(jets["Jet.btag"], i) for i in members)
        max_btag = gk.elementwise(lambda a, b, c: np.maximum(np.maximum(a, b), c), b0, b1, b2)
        return {"trijet_pt": _firsts(kin.pt(trijet), best),
                "trijet_btag": _firsts(max_btag, best)}


class Q7(ADLQuery):
    """Every event fills its HT ("in each event"): an event without a jet left after
    the lepton cleaning fills HT = 0, as coffea's ADL implementation does."""

    number, title = 7, "HT of jets (pT > 30) not within dR 0.4 of a light lepton (pT > 10)"
    columns = ("Jet.pt", "Jet.eta", "Jet.phi", "Muon.pt", "Muon.eta", "Muon.phi",
               "Electron.pt", "Electron.eta", "Electron.phi")
    binning = {"ht": (100, 0.0, 1200.0, "$\\sum p_T$ of isolated jets [GeV]")}

    def observables(self, cols):
        hard = gk.elementwise(lambda pt: pt > 30.0, cols["Jet.pt"])
        jet_pt, jet_eta, jet_phi = (gk.filter(cols[f"Jet.{f}"], hard) for f in ("pt", "eta", "phi"))
        near = []
        for lepton in ("Muon", "Electron"):
            keep = gk.elementwise(lambda pt: pt > 10.0, cols[f"{lepton}.pt"])
            eta = gk.cartesian([jet_eta, gk.filter(cols[f"{lepton}.eta"], keep)], axis=1,
                               nested=True)
            phi = gk.cartesian([jet_phi, gk.filter(cols[f"{lepton}.phi"], keep)], axis=1,
                               nested=True)
            close = gk.elementwise(lambda dr: dr < 0.4,
                                   kin.delta_r(eta["0"], phi["0"], eta["1"], phi["1"]))
            near.append(gk.any(close, axis=2))
        isolated = gk.elementwise(lambda mu, e: ~(mu | e), *near)
        isolated_pt = gk.filter(kin.f64(jet_pt), isolated)
        return {"ht": gk.sum(isolated_pt, axis=1)}  # an empty list sums to 0


class Q8(ADLQuery):
    """Only events with at least three light leptons and a same-flavour opposite-charge
    pair fill; the leading lepton outside the pair closest to the Z mass gives mT."""

    number, title = 8, ("mT of MET and the leading light lepton outside the same-flavour "
                        "opposite-charge pair closest to the Z mass (>= 3 leptons)")
    columns = ("MET.pt", "MET.phi") + tuple(
        f"{lepton}.{f}" for lepton in ("Electron", "Muon")
        for f in ("pt", "eta", "phi", "mass", "charge"))
    binning = {"mt": (100, 0.0, 250.0, "$m_T$(MET, third lepton) [GeV]")}

    # Leptons are ordered electrons first, then muons: ties (in |m - 91.2| or in pT)
    # go to the electron, as an arg-min/arg-max over the concatenated list would.
    # A GPU task's time here is the fixed cost of each engine call, not the events, so
    # the query makes few calls: a pair or lepton that does not qualify gets inf/-inf in
    # the math instead of being filtered out, several steps share one elementwise call,
    # and a pair's two lepton indices travel as one integer.

    @staticmethod
    def _best_pair(cols, flavour):
        """Per event: |m - 91.2| of the opposite-charge pair of ``flavour`` closest to
        the Z mass (inf where none) and that pair (``_packed`` local indices; only
        meaningful where the distance is finite)."""
        pairs = gk.argcombinations(cols[f"{flavour}.pt"], 2, axis=1)
        first, second = pairs["0"], pairs["1"]
        leptons = _p4(cols, flavour) + (cols[f"{flavour}.charge"],)
        members = [gk.take(x, slot) for slot in (first, second) for x in leptons]
        distance, packed = gk.elementwise(
            lambda *x: (_z_distance(*x[:10]), _packed(*x[10:])), *members, first, second)
        best = gk.argmin(distance, axis=1, keepdims=True)
        return (gk.min(distance, axis=1, mask_identity=False),
                gk.fill_none(_firsts(packed, best), -1))

    @staticmethod
    def _leading_outside(cols, flavour, pair_is_ee, ee, pair):
        """Per event: pT (float64) and phi of the highest-pT lepton of ``flavour`` that
        is not in the chosen pair (``pair`` where ``pair_is_ee == ee``); pT -inf where
        none is left."""
        pt = cols[f"{flavour}.pt"]
        free = gk.elementwise(
            lambda i, is_ee, pair: (is_ee != ee) | _not_in(i, pair),
            gk.local_index(pt, axis=1), pair_is_ee, pair)
        # a second call: pt carries NanoAOD's parameters, and event-level arrays broadcast
        # natively only into lists without them
        free_pt = gk.elementwise(lambda free, pt: np.where(free, pt.astype(np.float64), -np.inf),
                                 free, pt)
        lead = gk.argmax(free_pt, axis=1, keepdims=True)
        return (gk.max(free_pt, axis=1, mask_identity=False),
                gk.fill_none(_firsts(cols[f"{flavour}.phi"], lead), 0.0))

    def observables(self, cols):
        three = gk.elementwise(lambda n_e, n_mu: n_e + n_mu >= 3,
                               gk.num(cols["Electron.pt"], axis=1),
                               gk.num(cols["Muon.pt"], axis=1))
        cols = {name: gk.filter(array, three) for name, array in cols.items()}

        e_dist, e_pair = self._best_pair(cols, "Electron")
        mu_dist, mu_pair = self._best_pair(cols, "Muon")
        pair_is_ee, has_pair = gk.elementwise(lambda e, mu: (e <= mu, np.minimum(e, mu) < np.inf),
                                              e_dist, mu_dist)
        e_pt, e_phi = self._leading_outside(cols, "Electron", pair_is_ee, True, e_pair)
        mu_pt, mu_phi = self._leading_outside(cols, "Muon", pair_is_ee, False, mu_pair)
        mt = gk.elementwise(_mt_of_third, cols["MET.pt"], cols["MET.phi"],
                            e_pt, e_phi, mu_pt, mu_phi)
        return {"mt": gk.filter(mt, has_pair)}


def _packed(first, second):
    """On flat values: two local indices (int64, below 2**31) as one int64."""
    return (first << 32) | second


def _not_in(index, pair):
    """On flat values: whether each local index is neither of the ``_packed`` pair's two
    (-1, no pair, unpacks to two indices no list has)."""
    return (index != (pair >> 32)) & (index != (pair & 0xFFFFFFFF))


def _z_distance(px1, py1, pz1, e1, charge1, px2, py2, pz2, e2, charge2):
    """On flat values: |m - 91.2| of each lepton pair (four-vectors and charges), inf
    where the charges are not opposite."""
    m = kin.mass_values(*kin.add_values(px1, py1, pz1, e1, px2, py2, pz2, e2))
    return np.where(charge1 * charge2 < 0, np.abs(m - Z_MASS), np.inf)


def _mt_of_third(met_pt, met_phi, e_pt, e_phi, mu_pt, mu_phi):
    """On flat values: mT of MET and the third lepton, the electron where its pT is not
    below the muon's."""
    third_is_e = e_pt >= mu_pt
    return kin.transverse_mass_values(met_pt, met_phi, np.where(third_is_e, e_pt, mu_pt),
                                      np.where(third_is_e, e_phi, mu_phi))


QUERIES: dict[int, type[ADLQuery]] = {q.number: q for q in (Q1, Q2, Q3, Q4, Q5, Q6, Q7, Q8)}


class ReadColumns(ADLQuery):
    """Query ``number``'s columns read (on a GPU worker: also moved to its device) and
    nothing computed: the reading floor under that query's time, which no speed of the
    computation can go below (``benchmarks/executor.py --queries 8r``)."""

    binning = {}

    def __init__(self, number: int):
        query = QUERIES[int(number)]
        self.number, self.columns = query.number, query.columns
        self.title = f"the columns of Q{query.number}, read only"

    def process(self, events):
        for array in self.read(events).values():
            ak.materialize(array)  # reads the column (staged: and copies it to the device)
        return self.fill(len(events), {})


def make(number: int | str) -> ADLQuery:
    """Query ``number`` (1-8); ``"8r"``: ``ReadColumns(8)``, its reading floor."""
    try:
        if isinstance(number, str) and number.endswith("r"):
            return ReadColumns(int(number[:-1]))
        return QUERIES[int(number)]()
    except (KeyError, ValueError):
        raise ValueError(f"no ADL query {number!r}; the queries are {sorted(QUERIES)}") from None
