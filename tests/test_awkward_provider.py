"""The awkward kernel provider (gpuexec.awkward) on the CPU engine: every served kernel
and dtype key against awkward-cpp's own on generated arguments, the coverage of the
kernels the plain-awkward ADL queries reach (tests/data/awkward_kernels.json, written by
tests/awkward_kernel_recorder.py), shadow mode, reducer overloads, the fallback rules,
the AMD lookup path and the version gate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import awkward as ak
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpuexec.awkward as gak  # noqa: E402
import gpuexec.kernels as gk  # noqa: E402
from awkward_conformance import (SEEDS, SIZES, build, check, check_combinations,  # noqa: E402
                                 served_keys)

RECORDED = json.loads((Path(__file__).parent / "data" / "awkward_kernels.json").read_text())
KEYS = served_keys()


@pytest.fixture(scope="module")
def provider():
    return gak.Provider(gk.get_backend("cpu"), "cpu", None)


def _id(item):
    name, key = item
    return "-".join([name.removeprefix("awkward_")] + [np.dtype(t).name for t in key[1:]])


@pytest.mark.parametrize("item", KEYS, ids=[_id(k) for k in KEYS])
def test_served_kernel_matches_awkward_cpp(item, provider):
    name, key = item
    for seed in SEEDS:
        for n in SIZES:
            if name == "awkward_ListArray_combinations":
                check_combinations(key, seed, n, provider)
            else:
                check(provider, key, build(name, key, np.random.default_rng([seed, n]), n))


def test_every_served_name_has_conformance_cases():
    assert {name for name, _ in KEYS} == set(gak.served_names())


def test_every_recorded_kernel_is_served():
    provider = gak.Provider(gk.get_backend("cpu"), "cpu", None)
    keys = [(name, *(np.dtype(t).type for t in dtypes)) for name, *dtypes in RECORDED["kernels"]]
    assert keys, "the recording is empty"
    assert [k[0] for k in keys if not provider.serves(k)] == []


def test_recording_is_of_this_awkward():
    assert RECORDED["awkward"].split(".")[:2] == ak.__version__.split(".")[:2]


def test_adl_queries_reach_at_least_the_jagged_trio():
    names = {k[0] for k in RECORDED["kernels"]}
    for name in ("awkward_ListArray_getitem_jagged_apply", "awkward_ListArray_combinations",
                 "awkward_IndexedArray_getitem_nextcarry", "awkward_reduce_argmin"):
        assert name in names


def _sample():
    return ak.Array([[3.0, 1.0, 2.0], [], [5.0, 4.0], [7.0]])


def test_shadow_mode_runs_awkward_and_counts(provider):
    x = _sample()
    gk.reset_stats()
    with gak.installed("cpu", shadow=True):
        out = {"sort": ak.sort(x), "argmax": ak.argmax(x, axis=1), "sum": ak.sum(x, axis=1),
               "mean": ak.mean(x, axis=1), "pad": ak.fill_none(ak.pad_none(x, 2), 0.0),
               "pick": x[x > 1.5], "pairs": ak.combinations(x, 2)}
    stats = gk.stats()
    assert stats["n_awkward_served"] > 0 and stats["n_awkward_fallback"] == 0
    assert "reducer argmax" in stats["awkward"]["served"]
    assert out["sort"].tolist() == [[1.0, 2.0, 3.0], [], [4.0, 5.0], [7.0]]
    assert out["argmax"].tolist() == [0, None, 0, 0]
    assert out["mean"].tolist()[0] == 2.0


def test_shadow_mode_catches_a_wrong_adapter(monkeypatch):
    from gpuexec.awkward import adapters

    def wrong(E, tooffsets, fromstarts, fromstops, length):
        tooffsets[:length + 1] = 0

    monkeypatch.setitem(adapters.ADAPTERS, "awkward_ListArray_compact_offsets", wrong)
    x = ak.Array([[1, 2], [3]])[[1, 0]]
    with gak.installed("cpu", shadow=True), pytest.raises(gak.ShadowMismatch,
                                                           match="compact_offsets"):
        ak.to_packed(x)


def test_unserved_kernel_falls_back_and_is_counted(monkeypatch):
    from gpuexec.awkward import adapters

    monkeypatch.delitem(adapters.ADAPTERS, "awkward_ListArray_compact_offsets")
    gk.reset_stats()
    with gak.installed("cpu"):
        assert ak.to_packed(ak.Array([[1, 2], [3]])[[1, 0]]).tolist() == [[3], [1, 2]]
    assert gk.stats()["awkward"]["fallback"] == {"awkward_ListArray_compact_offsets": 1}


def test_faked_amd_takes_the_lookup_path_without_cuda_compute(monkeypatch):
    """With the vendor "hip", CupyBackend's lookup is the provider's (here on the CPU
    engine: no GPU needed) and awkward's cuda.compute module is never imported; a kernel
    the provider does not serve is an error naming it."""
    from awkward._backends.cupy import CupyBackend

    for module in [m for m in sys.modules if m.startswith(("awkward._connect.cuda._compute",
                                                            "cuda.compute"))]:
        monkeypatch.delitem(sys.modules, module)
    original = CupyBackend.__getitem__
    with gak.installed("device", vendor="hip", engine=gk.get_backend("cpu")) as provider:
        assert provider._fallback is None
        kernel = CupyBackend.__getitem__(None, ("awkward_ListArray_compact_offsets",
                                                np.int64, np.int64, np.int64))
        out = np.zeros(3, np.int64)
        kernel(out, np.array([0, 5]), np.array([2, 6]), 2)
        assert out.tolist() == [0, 2, 3]
        with pytest.raises(gak.KernelNotServed, match="awkward_UnionArray_flatten_length"):
            CupyBackend.__getitem__(None, ("awkward_UnionArray_flatten_length", np.int8,
                                           np.int64, np.int64, np.int64))
    assert CupyBackend.__getitem__ is original
    assert not [m for m in sys.modules if m.startswith(("awkward._connect.cuda._compute",
                                                         "cuda.compute"))]


def test_install_nests_and_uninstall_restores():
    from awkward._backends.numpy import NumpyBackend

    original = NumpyBackend.__getitem__
    with gak.installed("cpu") as outer:
        with gak.installed("cpu", shadow=True) as inner:
            assert inner is not outer and gak.is_installed("cpu")
        assert NumpyBackend.__getitem__ is not original
    assert NumpyBackend.__getitem__ is original and not gak.is_installed("cpu")


def test_untested_awkward_is_refused_or_warned(monkeypatch):
    monkeypatch.setattr(ak, "__version__", "2.99.0")
    with pytest.raises(gak.UntestedAwkward, match="2.99.0"):
        gak.install("cpu")
    with pytest.warns(RuntimeWarning, match="2.99.0"):
        gak.install("cpu", allow_untested=True)
    gak.uninstall()


def test_worker_setup_leaves_cpu_workers_alone():
    assert gak.worker_setup("cpu") is None
    assert not gak.is_installed("device")


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16", "float32", "float64", "bool"])
def test_reducer_overloads_match_awkward(dtype):
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 5, 40)
    values = rng.integers(-9, 9, int(counts.sum())).astype(dtype)
    x = ak.unflatten(values, counts)
    calls = {"sum": lambda: ak.sum(x, axis=1), "min": lambda: ak.min(x, axis=1),
             "max": lambda: ak.max(x, axis=1, mask_identity=False),
             "argmin": lambda: ak.argmin(x, axis=1), "argmax": lambda: ak.argmax(x, axis=1),
             "count": lambda: ak.count(x, axis=1), "any": lambda: ak.any(x, axis=1),
             "count_nonzero": lambda: ak.count_nonzero(x, axis=1),
             "mean": lambda: ak.mean(x, axis=1), "all": lambda: ak.all(x, axis=1)}
    expected = {k: f() for k, f in calls.items()}
    with gak.installed("cpu", shadow=True):
        got = {k: f() for k, f in calls.items()}
    for k in calls:
        assert got[k].type == expected[k].type, k
        a, b = (ak.to_numpy(ak.fill_none(v, -1)) for v in (got[k], expected[k]))
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), (k, a, b)
