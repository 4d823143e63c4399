"""What the engine's native calls ask of awkward's own kernels.

awkward 2.14's CUDA backend takes some kernels from cuda.compute (CCCL), which JIT-compiles
Python callables and needs numba-cuda-mlir; where that is not installed those kernels fail
on the device. A gk call that runs natively must not ask awkward for one of them, or it
would depend on awkward's CUDA backend after all. The CPU engine walks the same layout
code, so the kernels it asks awkward's NumPy backend for show what the device path asks
for (found this way: a ByteMaskedArray above lists made structure and combinations calls
convert it with awkward's ``to_IndexedOptionArray64``, a cuda.compute kernel)."""

from __future__ import annotations

import awkward as ak
import pytest
from awkward._backends.cupy import CupyBackend
from awkward._backends.numpy import NumpyBackend

if not hasattr(CupyBackend, "_supports_cuda_compute"):  # awkward's table (2.14) moved
    pytest.skip("this awkward has no table of cuda.compute kernels to check against",
                allow_module_level=True)

import gpuexec.kernels as gk
from jagged import LAYOUTS, case

def _cuda_compute_kernel(name: str) -> bool:
    """Whether awkward's CUDA backend takes kernel ``name`` from cuda.compute (its own
    table; the method reads only the name)."""
    return CupyBackend._supports_cuda_compute(None, name)


def _calls(x, y):
    local = ak.local_index(x, axis=-1)
    cond = local % 2 == 0
    pick = ak.flatten(x[ak.argmax(x, axis=-1, keepdims=True)], axis=-1)
    perm = ak.argsort(x, axis=-1)  # the arguments are awkward's business: made before
    mask = local % 3 != 1
    return {
        "sort": lambda: gk.sort(x, backend="cpu"),
        "argsort": lambda: gk.argsort(x, backend="cpu"),
        "num": lambda: gk.num(x, axis=1, backend="cpu"),
        "local_index": lambda: gk.local_index(x, backend="cpu"),
        "flatten": lambda: gk.flatten(x, axis=1, backend="cpu"),
        "flatten None": lambda: gk.flatten(x, axis=None, backend="cpu"),
        "combinations": lambda: gk.combinations(x, 2, backend="cpu"),
        "argcombinations": lambda: gk.argcombinations(x, 3, replacement=True, backend="cpu"),
        "cartesian": lambda: gk.cartesian([x, y], backend="cpu"),
        "filter": lambda: gk.filter(x, mask, backend="cpu"),
        "take": lambda: gk.take(x, perm, backend="cpu"),
        "sum": lambda: gk.sum(x, axis=-1, backend="cpu"),
        "argmax": lambda: gk.argmax(x, axis=-1, keepdims=True, backend="cpu"),
        "fill_none": lambda: gk.fill_none(pick, -1, backend="cpu"),
        "where": lambda: gk.where(cond, x, 0, backend="cpu"),
    }


@pytest.mark.parametrize("layout", LAYOUTS)
def test_native_calls_ask_awkward_for_no_cuda_compute_kernel(layout, monkeypatch):
    x, y = (ak.Array(a) for a in case("float64", layout))
    asked: list[str] = []
    real = NumpyBackend.__getitem__

    def recording(self, index):
        asked.append(index[0])
        return real(self, index)

    monkeypatch.setattr(NumpyBackend, "__getitem__", recording)
    native, offending = [], {}
    for name, call in _calls(x, y).items():
        asked.clear()
        gk.reset_stats()
        try:
            call()
        except Exception:  # a case awkward itself rejects: not this test's business
            continue
        if gk.stats()["n_handoffs"]:
            continue
        native.append(name)
        bad = sorted({k for k in asked if _cuda_compute_kernel(k)})
        if bad:
            offending[name] = bad
    assert native, "no call ran natively"
    assert not offending, offending
