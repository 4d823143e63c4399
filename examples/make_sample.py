"""Write a NanoAOD-like TTree of simulated-looking collider events for the ADL queries.

    python examples/make_sample.py --events 1000000 --out data/generated/adl_1M.root

Layout (CMS open-data names of the ADL benchmark, readable by coffea's NanoAODSchema):
``run, luminosityBlock, event, MET_pt, MET_phi, MET_sumet, nJet, Jet_pt, Jet_eta,
Jet_phi, Jet_mass, Jet_btag, nMuon, Muon_pt/eta/phi/mass/charge, nElectron,
Electron_pt/eta/phi/mass/charge``; floats are float32, charges int32, collections
sorted by decreasing pT as in NanoAOD.

Content (not a physics simulation, but the multiplicities and shapes the queries
exercise): Poisson jet multiplicity (mean 5) with a falling (Pareto) pT spectrum above
15 GeV, b-tag discriminants in [0, 1] peaked at 0 with a b-like population near 1;
Poisson muons (mean 0.6) and electrons (mean 0.5) with falling pT; in 8% of events a
same-flavour opposite-charge lepton pair with a Breit-Wigner mass around 91.2 GeV and,
in 30% of those, a third (W-like) lepton and extra MET; charges +-1.

Compression: CMS writes NanoAOD with LZMA level 9 (CMSSW
PhysicsTools/NanoAOD/python/NanoAODEDMEventContent_cff.py: NANOAODEventContent and
NANOAODSIMEventContent set compressionAlgorithm "LZMA", compressionLevel 9), so that is
the default here. LZMA-9 is slow to write; ``--compression zlib:1`` (or lz4:1, zstd:5)
writes large files faster with a different read cost.

Events are generated in chunks of ``--chunk-size``, so any number of events fits in
bounded memory. Chunk k draws from ``numpy.random.default_rng([seed, k])``: the same seed
and chunk size give the same events. Each chunk is written as baskets of
``--basket-entries`` entries per branch (default: one basket per chunk). CMS's NanoAOD
output module flushes a cluster (one basket per branch) every 10 MB of compressed output
(``NanoAODOutputModule``'s ``autoFlush`` default, -10000000), which for NanoAOD's
1-2 kB events is some 5,000-10,000 events; this tree's few branches would need about
70,000 events (zlib:1) for 10 MB. So ``--basket-entries 10000`` gives the basket layout
of a real NanoAOD file, and the default that of a file holding only these branches.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import awkward as ak
import numpy as np
import uproot

MUON_MASS = 0.1056584
ELECTRON_MASS = 0.000511
Z_MASS, Z_WIDTH = 91.1876, 2.4952

JET_MEAN, MUON_MEAN, ELECTRON_MEAN = 5.0, 0.6, 0.5
Z_FRACTION, THIRD_LEPTON_FRACTION = 0.08, 0.30

OBJECT = "var * {pt: float32, eta: float32, phi: float32, mass: float32%s}"
BRANCH_TYPES = {
    "run": "uint32",
    "luminosityBlock": "uint32",
    "event": "uint64",
    "MET_pt": "float32",
    "MET_phi": "float32",
    "MET_sumet": "float32",
    "Jet": OBJECT % ", btag: float32",
    "Muon": OBJECT % ", charge: int32",
    "Electron": OBJECT % ", charge: int32",
}


def parse_compression(spec: str):
    """``"lzma:9"``, ``"zlib:1"``, ``"lz4:1"``, ``"zstd:5"`` or ``"none"``."""
    if spec.lower() == "none":
        return None
    name, _, level = spec.partition(":")
    kinds = {"lzma": uproot.LZMA, "zlib": uproot.ZLIB, "lz4": uproot.LZ4, "zstd": uproot.ZSTD}
    if name.lower() not in kinds:
        raise ValueError(f"unknown compression {spec!r}; use one of {sorted(kinds)}[:level] or none")
    return kinds[name.lower()](int(level) if level else 9 if name.lower() == "lzma" else 1)


def _phi(rng, n):
    return rng.uniform(-np.pi, np.pi, n)


def _eta(rng, n, sigma, limit):
    eta = rng.normal(0.0, sigma, n)
    outside = np.abs(eta) > limit
    eta[outside] = rng.uniform(-limit, limit, int(outside.sum()))
    return eta


class _Objects:
    """Flat pieces of one collection (event index + fields), joined and sorted at the end."""

    def __init__(self):
        self.pieces: list[dict] = []

    def add(self, event, **fields):
        self.pieces.append({"event": np.asarray(event, dtype=np.int64), **fields})

    def jagged(self, n_events: int, fields: dict) -> ak.Array:
        event = np.concatenate([p["event"] for p in self.pieces])
        pt = np.concatenate([p["pt"] for p in self.pieces])
        order = np.lexsort((-pt, event))  # by event, then decreasing pT
        counts = np.bincount(event, minlength=n_events)
        flat = {name: np.concatenate([p[name] for p in self.pieces])[order].astype(dtype)
                for name, dtype in fields.items()}
        return ak.unflatten(ak.zip(flat), counts)


def generate_chunk(rng: np.random.Generator, n: int, first_event: int = 0) -> dict:
    """``n`` events as the dict ``tree.extend`` takes (see ``BRANCH_TYPES``)."""
    lepton_fields = {"pt": np.float32, "eta": np.float32, "phi": np.float32,
                     "mass": np.float32, "charge": np.int32}

    # Jets: Poisson multiplicity, Pareto pT above 15 GeV, masses a few % of pT.
    n_jet = rng.poisson(JET_MEAN, n)
    jet_event = np.repeat(np.arange(n), n_jet)
    m = jet_event.size
    jet_pt = 15.0 * rng.pareto(2.5, m) + 15.0
    is_b = rng.random(m) < 0.2
    jets = _Objects()
    jets.add(jet_event, pt=jet_pt, eta=_eta(rng, m, 1.8, 4.7), phi=_phi(rng, m),
             mass=jet_pt * rng.uniform(0.04, 0.25, m),
             btag=np.where(is_b, rng.beta(5.0, 1.0, m), rng.beta(1.0, 8.0, m)))

    muons, electrons = _Objects(), _Objects()
    for objects, mean, pt_min, eta_max, mass in ((muons, MUON_MEAN, 3.0, 2.4, MUON_MASS),
                                                 (electrons, ELECTRON_MEAN, 5.0, 2.5, ELECTRON_MASS)):
        event = np.repeat(np.arange(n), rng.poisson(mean, n))
        k = event.size
        objects.add(event, pt=pt_min + rng.exponential(15.0, k), eta=_eta(rng, k, 1.2, eta_max),
                    phi=_phi(rng, k), mass=np.full(k, mass), charge=rng.choice([-1, 1], k))

    # Z -> l+ l-: pick l1, a direction for l2, a Breit-Wigner mass; solve for pT2 (massless
    # approximation m^2 = 2 pT1 pT2 (cosh deta - cos dphi)) and keep pairs in acceptance.
    z_event = np.flatnonzero(rng.random(n) < Z_FRACTION)
    k = z_event.size
    pt1 = 20.0 + rng.exponential(25.0, k)
    eta1, phi1 = _eta(rng, k, 1.2, 2.4), _phi(rng, k)
    eta2 = _eta(rng, k, 1.2, 2.4)
    phi2 = np.mod(phi1 + np.pi + rng.normal(0.0, 0.8, k) + np.pi, 2 * np.pi) - np.pi
    mz = np.clip(Z_MASS + 0.5 * Z_WIDTH * rng.standard_cauchy(k), 50.0, 150.0)
    pt2 = mz * mz / (2.0 * pt1 * (np.cosh(eta1 - eta2) - np.cos(phi1 - phi2)))
    ok = (pt2 > 5.0) & (pt2 < 500.0)
    z_event, pt1, eta1, phi1, eta2, phi2, pt2 = (a[ok] for a in (z_event, pt1, eta1, phi1, eta2, phi2, pt2))
    k = z_event.size
    z_is_mu = rng.random(k) < 0.5
    q1 = rng.choice([-1, 1], k)
    for objects, sel, mass in ((muons, z_is_mu, MUON_MASS), (electrons, ~z_is_mu, ELECTRON_MASS)):
        s = int(sel.sum())
        for pt, eta, phi, q in ((pt1, eta1, phi1, q1), (pt2, eta2, phi2, -q1)):
            objects.add(z_event[sel], pt=pt[sel], eta=eta[sel], phi=phi[sel],
                        mass=np.full(s, mass), charge=q[sel])

    # A third (W-like) lepton in some Z events; its neutrino adds MET below.
    w_event = z_event[rng.random(k) < THIRD_LEPTON_FRACTION]
    w = w_event.size
    w_is_mu = rng.random(w) < 0.5
    for objects, sel, mass in ((muons, w_is_mu, MUON_MASS), (electrons, ~w_is_mu, ELECTRON_MASS)):
        s = int(sel.sum())
        objects.add(w_event[sel], pt=10.0 + rng.exponential(30.0, s), eta=_eta(rng, s, 1.2, 2.4),
                    phi=_phi(rng, s), mass=np.full(s, mass), charge=rng.choice([-1, 1], s))

    # MET: resolution (Gaussian x, y) plus a neutrino in the W-like events.
    met_x, met_y = rng.normal(0.0, 15.0, n), rng.normal(0.0, 15.0, n)
    nu_pt, nu_phi = 10.0 + rng.exponential(30.0, w), _phi(rng, w)
    np.add.at(met_x, w_event, nu_pt * np.cos(nu_phi))
    np.add.at(met_y, w_event, nu_pt * np.sin(nu_phi))
    jet_sum = np.bincount(jet_event, weights=jet_pt, minlength=n)

    events = first_event + np.arange(n, dtype=np.uint64) + 1
    return {
        "run": np.full(n, 1, dtype=np.uint32),
        "luminosityBlock": (1 + (events - 1) // 1000).astype(np.uint32),
        "event": events,
        "MET_pt": np.hypot(met_x, met_y).astype(np.float32),
        "MET_phi": np.arctan2(met_y, met_x).astype(np.float32),
        "MET_sumet": (jet_sum + rng.gamma(4.0, 50.0, n)).astype(np.float32),
        "Jet": jets.jagged(n, {"pt": np.float32, "eta": np.float32, "phi": np.float32,
                               "mass": np.float32, "btag": np.float32}),
        "Muon": muons.jagged(n, lepton_fields),
        "Electron": electrons.jagged(n, lepton_fields),
    }


def write_sample(path, n_events: int, *, seed: int = 20240601, chunk_size: int = 100_000,
                 compression: str = "lzma:9", treename: str = "Events", progress=None,
                 basket_entries: int | None = None) -> str:
    """Write ``n_events`` events to ``path`` (a new file); returns ``path``. The file
    is written under a temporary name and renamed when complete, so a killed run never
    leaves a truncated sample behind under the final name. ``basket_entries`` (default
    ``chunk_size``) sets the entries per basket; the events do not depend on it."""
    basket_entries = chunk_size if basket_entries is None else basket_entries
    if n_events < 0 or chunk_size <= 0 or basket_entries <= 0:
        raise ValueError("n_events must be >= 0, chunk_size and basket_entries > 0")
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    partial = path + ".partial"
    with uproot.recreate(partial, compression=parse_compression(compression)) as f:
        tree = f.mktree(treename, BRANCH_TYPES)
        for k, start in enumerate(range(0, n_events, chunk_size)):
            n = min(chunk_size, n_events - start)
            chunk = generate_chunk(np.random.default_rng([seed, k]), n, first_event=start)
            for at in range(0, n, basket_entries):  # tree.extend writes one basket per branch
                tree.extend({name: values[at:at + basket_entries]
                             for name, values in chunk.items()})
            if progress:
                progress(start + n, n_events)
    os.replace(partial, path)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000, help="number of events (default 100000)")
    parser.add_argument("--out", default="data/generated/adl_sample.root", help="output ROOT file")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--chunk-size", type=int, default=100_000,
                        help="events generated at a time (bounds memory)")
    parser.add_argument("--basket-entries", type=int, default=None,
                        help="entries per basket (default: --chunk-size; 10000 is the "
                             "layout of a real NanoAOD file, see above)")
    parser.add_argument("--compression", default="lzma:9",
                        help="lzma:9 (CMS NanoAOD, default), zlib:N, lz4:N, zstd:N or none")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()

    def progress(done, total):
        rate = done / max(time.perf_counter() - t0, 1e-9)
        print(f"\r{done}/{total} events ({rate:,.0f} events/s)", end="", file=sys.stderr, flush=True)

    write_sample(args.out, args.events, seed=args.seed, chunk_size=args.chunk_size,
                 compression=args.compression, progress=progress,
                 basket_entries=args.basket_entries)
    elapsed = time.perf_counter() - t0
    size = os.path.getsize(args.out)
    print(f"\nwrote {args.events} events to {args.out} ({size / 1e6:.1f} MB, "
          f"{args.compression}) in {elapsed:.1f} s ({args.events / max(elapsed, 1e-9):,.0f} events/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
