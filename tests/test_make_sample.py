"""examples/make_sample.py: the generated TTree has the NanoAOD-like layout the ADL
queries read, plausible content, is reproducible from its seed, is written in chunks
without losing or repeating events, and uses the compression it says."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import uproot

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from examples import make_sample  # noqa: E402

N = 2000


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    path = tmp_path_factory.mktemp("make_sample") / "sample.root"
    make_sample.write_sample(path, N, seed=11, chunk_size=700)
    return path


def _arrays(path, library="np"):
    with uproot.open(path) as f:
        return f["Events"].arrays(library=library)


def test_layout_and_types(sample):
    with uproot.open(sample) as f:
        tree = f["Events"]
        assert tree.num_entries == N
        types = {k: tree[k].typename for k in tree.keys()}
    for name in ("MET_pt", "MET_phi", "MET_sumet"):
        assert types[name] == "float", name
    for coll, fields in (("Jet", ("pt", "eta", "phi", "mass", "btag")),
                         ("Muon", ("pt", "eta", "phi", "mass")),
                         ("Electron", ("pt", "eta", "phi", "mass"))):
        assert types[f"n{coll}"] == "int32_t"
        for field in fields:
            assert types[f"{coll}_{field}"] == "float[]", f"{coll}_{field}"
    assert types["Muon_charge"] == types["Electron_charge"] == "int32_t[]"
    assert types["event"] == "uint64_t"


def test_nanoaod_schema_reads_it(sample):
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # missing cross-references of full NanoAOD
        events = NanoEventsFactory.from_root({str(sample): "Events"}, schemaclass=NanoAODSchema,
                                             mode="eager").events()
    assert len(events) == N
    assert {"pt", "eta", "phi", "mass", "btag"} <= set(events.Jet.fields)
    assert {"pt", "eta", "phi", "mass", "charge"} <= set(events.Electron.fields)
    assert {"pt", "phi", "sumet"} <= set(events.MET.fields)
    assert events.Muon.pt.tolist() == [list(x) for x in _arrays(sample)["Muon_pt"]]


def test_content_is_plausible(sample):
    a = _arrays(sample)
    n_jet, n_mu, n_el = a["nJet"], a["nMuon"], a["nElectron"]
    assert 4.0 < n_jet.mean() < 6.0
    assert 0.4 < n_mu.mean() < 1.2 and 0.3 < n_el.mean() < 1.1
    assert ((n_mu + n_el) >= 3).sum() > 0.02 * N

    jet_pt = np.concatenate(a["Jet_pt"])
    assert jet_pt.min() >= 15.0 and np.median(jet_pt) < 30.0 < jet_pt.max()
    btag = np.concatenate(a["Jet_btag"])
    assert btag.min() >= 0.0 and btag.max() <= 1.0
    for coll in ("Jet", "Muon", "Electron"):
        assert all(np.all(np.diff(pt) <= 0) for pt in a[f"{coll}_pt"]), f"{coll} not pT-ordered"
        assert all(len(pt) == k for pt, k in zip(a[f"{coll}_pt"], a[f"n{coll}"]))
        phi = np.concatenate(a[f"{coll}_phi"])
        assert np.all(np.abs(phi) <= np.pi + 1e-6)
    for coll in ("Muon", "Electron"):
        assert set(np.unique(np.concatenate(a[f"{coll}_charge"]))) == {-1, 1}
    assert np.all(a["MET_pt"] >= 0)

    # Z-like pairs: opposite-charge same-flavour pairs pile up at 91 GeV.
    masses = []
    for pts, etas, phis, qs in zip(a["Muon_pt"], a["Muon_eta"], a["Muon_phi"], a["Muon_charge"]):
        for i in range(len(pts)):
            for j in range(i + 1, len(pts)):
                if qs[i] != qs[j]:
                    m2 = 2 * pts[i] * pts[j] * (np.cosh(etas[i] - etas[j]) - np.cos(phis[i] - phis[j]))
                    masses.append(np.sqrt(m2))
    masses = np.asarray(masses)
    near_z = np.count_nonzero(np.abs(masses - 91.2) < 5)
    side = np.count_nonzero((np.abs(masses - 71.2) < 5))
    assert near_z > 20 and near_z > 3 * side


def test_seeded_and_chunk_boundaries(sample, tmp_path):
    again = tmp_path / "again.root"
    make_sample.write_sample(again, N, seed=11, chunk_size=700)
    a, b = _arrays(sample), _arrays(again)
    assert all(np.array_equal(np.concatenate(a[k]) if a[k].dtype == object else a[k],
                              np.concatenate(b[k]) if b[k].dtype == object else b[k]) for k in a)

    other = tmp_path / "other.root"
    make_sample.write_sample(other, N, seed=12, chunk_size=700)
    assert not np.array_equal(_arrays(other)["MET_pt"], a["MET_pt"])

    # 2000 events in chunks of 700: baskets of 700, 700, 600; every event number once.
    with uproot.open(sample) as f:
        assert [f["Events"]["MET_pt"].basket_entry_start_stop(i) for i in range(3)] == [
            (0, 700), (700, 1400), (1400, 2000)]
    assert np.array_equal(a["event"], np.arange(1, N + 1))


def test_basket_entries_lay_out_the_same_events(sample, tmp_path):
    # Chunks of 700 written as baskets of 300: 300, 300, 100 per chunk (300, 300 for the
    # last chunk, of 600); the events are those of the one-basket-per-chunk file.
    small = make_sample.write_sample(tmp_path / "small.root", N, seed=11, chunk_size=700,
                                     basket_entries=300)
    with uproot.open(small) as f:
        branch = f["Events"]["Jet_pt"]
        bounds = [branch.basket_entry_start_stop(i) for i in range(branch.num_baskets)]
    assert bounds[:4] == [(0, 300), (300, 600), (600, 700), (700, 1000)]
    assert bounds[-1] == (1700, 2000) and len(bounds) == 8
    a, b = _arrays(sample), _arrays(small)
    assert all(np.array_equal(np.concatenate(a[k]) if a[k].dtype == object else a[k],
                              np.concatenate(b[k]) if b[k].dtype == object else b[k]) for k in a)
    with pytest.raises(ValueError):
        make_sample.write_sample(tmp_path / "x.root", 10, basket_entries=0)


def test_compression_default_and_option(sample, tmp_path):
    with uproot.open(sample) as f:
        assert isinstance(f.file.compression, uproot.LZMA) and f.file.compression.level == 9
    zpath = make_sample.write_sample(tmp_path / "z.root", 100, compression="zlib:1")
    with uproot.open(zpath) as f:
        assert isinstance(f.file.compression, uproot.ZLIB) and f.file.compression.level == 1
    assert not list(tmp_path.glob("*.partial"))


def test_zlib_files_do_not_depend_on_the_processs_inflate_library(tmp_path):
    """A sample written after ``gpuexec.io.inflate.use`` must still be compressed with zlib,
    as ROOT writes: uproot's ZLIB class attribute compresses too (when it was set, ISA-L
    stored the Jet baskets uncompressed, and a benchmark's file then needed no
    inflating)."""
    pytest.importorskip("isal")
    from gpuexec.io import inflate

    def basket_bytes(library):
        before = inflate.in_use()
        inflate.use(library)
        try:
            path = make_sample.write_sample(tmp_path / f"{library}.root", 20_000, seed=5,
                                            compression="zlib:1", chunk_size=10_000)
        finally:
            inflate.use(before)
        with uproot.open(path) as f:
            return {b: f["Events"][b].member("fBasketBytes")[:2].tolist()
                    for b in ("Jet_pt", "Muon_pt", "nJet")}

    assert basket_bytes("isal") == basket_bytes("zlib")


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="unknown compression"):
        make_sample.parse_compression("brotli:3")
    with pytest.raises(ValueError):
        make_sample.write_sample(tmp_path / "x.root", -1)
    assert not (tmp_path / "x.root").exists()


def test_command_line(tmp_path, capsys):
    out = tmp_path / "cli.root"
    assert make_sample.main(["--events", "50", "--out", str(out), "--compression", "zlib:1"]) == 0
    assert "wrote 50 events" in capsys.readouterr().out
    with uproot.open(out) as f:
        assert f["Events"].num_entries == 50
