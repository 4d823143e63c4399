"""The awkward kernel provider on the GPU engine (CuPy arrays, the device's vendor): the
conformance of tests/test_awkward_provider.py on device buffers, and the plain-awkward
ADL queries on awkward "cuda" arrays with the provider, equal to the references with no
fallback. Skipped without a GPU (tests/gpu/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from awkward_conformance import (SEEDS, SIZES, build, check, check_combinations,  # noqa: E402
                                 served_keys)

KEYS = served_keys()


@pytest.fixture(scope="module")
def device():
    import cupy

    import gpuexec.awkward as gak
    from gpuexec.kernels.dispatch import device_backend_name

    import gpuexec.kernels as gk
    vendor = device_backend_name()
    return cupy, gak.Provider(gk.get_backend(vendor), vendor, None)


def _rtol(key):
    """GPU reductions add floats in another order than awkward-cpp's loop."""
    floats = any(np.dtype(t).kind == "f" for t in key[1:])
    return 1e-5 if floats and key[0] in ("awkward_reduce_sum", "awkward_reduce_prod") else 0.0


@pytest.mark.parametrize("item", KEYS, ids=["-".join([k[0].removeprefix("awkward_")] +
                                                     [np.dtype(t).name for t in k[1][1:]])
                                            for k in KEYS])
def test_served_kernel_on_device_matches_awkward_cpp(item, device):
    cupy, provider = device
    name, key = item
    for seed in SEEDS:
        for n in SIZES:
            if name == "awkward_ListArray_combinations":
                check_combinations(key, seed, n, provider, cupy.asarray, cupy.asnumpy,
                                   lambda a: a.data.ptr)
            else:
                check(provider, key, build(name, key, np.random.default_rng([seed, n]), n),
                      cupy.asarray, cupy.asnumpy, rtol=_rtol(key))


@pytest.mark.parametrize("query", range(1, 9))
def test_plain_awkward_query_on_device_with_provider(query):
    import awkward as ak

    import gpuexec.awkward as gak
    import gpuexec.kernels as gk
    from awkward_kernel_recorder import open_events
    from examples.adl import reference
    from examples.adl_awkward import make
    from test_adl import assert_same_result

    path = ROOT / "data" / "samples" / "nano_dy.root"
    events = ak.to_backend(open_events(path, "eager"), "cuda")
    gk.reset_stats()
    with gak.installed("device", shadow=True, shadow_rtol=1e-9):
        out = make(query).process(events)
    stats = gk.stats()
    assert stats["n_awkward_fallback"] == 0, stats["awkward"]["fallback"]
    assert_same_result(out, reference.run(query, str(path)))
