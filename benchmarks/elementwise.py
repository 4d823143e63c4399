"""Element-wise kinematics on jagged arrays: ``gk.elementwise`` (one structure check, the
ufuncs on the flat values) against the same functions applied by awkward (a broadcast
of the lists per ufunc), side by side in one run, on every backend this machine has.

The inputs are NanoAOD-like lepton columns (pt, eta, phi, mass; Poisson(2) leptons per
event), four separate arrays with equal offsets in separate buffers, as columns filtered
one by one arrive. Two expressions of the ADL queries: the four-vectors
(``kinematics.p4_values``: 4 inputs, 4 outputs, 15 ufuncs) and the mass of the sum of two of
them (``add_values`` + ``mass_values`` on 8 components). Each result is checked against awkward's
before timing (bit for bit on the host; within 1e-12 relative on a GPU).

    python benchmarks/elementwise.py [--events 2000,50000,1000000] [--json out.json]

Prints a table (median milliseconds per call, the ratio) and writes JSON naming the
machine. On a GPU, awkward's route here includes its per-operation error context (a repr
of each argument, read back from the device), which GPUExecutor's workers turn off
(``gpuexec.io.staging.awkward_messages_on_error``): what a processor pays outside the
executor, more than inside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import awkward as ak
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gpuexec.kernels as gk  # noqa: E402
from _gputime import wall_median  # noqa: E402 - beside this script
from examples.adl import kinematics as kin  # noqa: E402


def columns(n_events: int, seed: int = 5) -> list:
    """pt, eta, phi, mass as float32 lists, each with its own offsets buffer."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(2.0, n_events)
    offsets = np.zeros(n_events + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    n = int(offsets[-1])
    values = [rng.exponential(30.0, n) + 5.0, rng.normal(0.0, 1.5, n),
              rng.uniform(-np.pi, np.pi, n), rng.uniform(0.0, 0.2, n)]
    return [ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(offsets.copy()),
                                                 ak.contents.NumpyArray(v.astype(np.float32))))
            for v in values]


def _sync(backend: str):
    if backend == "cuda":
        import cupy

        return cupy.cuda.get_current_stream().synchronize
    return lambda: None


def median_ms(fn, sync, calls: int) -> float:
    return wall_median(fn, sync, calls, warmup=1) * 1e3


def _pair_mass(*components):
    return kin.mass_values(*kin.add_values(*components))


def _same(got, want, backend: str) -> None:
    if not isinstance(got, tuple):
        got, want = (got,), (want,)
    for g, w in zip(got, want, strict=True):
        g = ak.to_numpy(ak.flatten(ak.to_backend(g, "cpu"), axis=None))
        w = ak.to_numpy(ak.flatten(ak.to_backend(w, "cpu"), axis=None))
        if backend == "cpu":
            assert g.dtype == w.dtype and np.array_equal(g, w, equal_nan=True)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-12)


def run(backend: str, n_events: int, calls: int) -> list[dict]:
    cols = [ak.to_backend(c, backend) for c in columns(n_events)]
    sync = _sync(backend)
    # two four-vectors per list, as takes of one pair index give them (one offsets buffer)
    p4 = gk.elementwise(kin.p4_values, *cols)
    second = gk.elementwise(lambda *c: tuple(x * 0.5 for x in c), *p4)
    cases = {
        "p4 (4 in, 4 out)": (kin.p4_values, cols),
        "pair mass (8 in)": (_pair_mass, list(p4) + list(second)),
    }
    rows = []
    for name, (fn, args) in cases.items():
        with gk.counting() as seen:
            ours = gk.elementwise(fn, *args)
        if seen["n_handoffs"]:
            raise RuntimeError(f"{name}: handed off ({seen['handoff_reasons']})")
        _same(ours, fn(*args), backend)
        awkward_ms = median_ms(lambda: fn(*args), sync, calls)
        ours_ms = median_ms(lambda: gk.elementwise(fn, *args), sync, calls)
        rows.append({"backend": backend, "events": n_events,
                     "values": int(len(ak.flatten(cols[0], axis=None))), "expression": name,
                     "awkward_ms": awkward_ms, "elementwise_ms": ours_ms,
                     "ratio": awkward_ms / ours_ms})
    return rows


def _backends() -> list[str]:
    out = ["cpu"]
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            out.append("cuda")
    except Exception:  # no CuPy or no device: the host only
        pass
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", default="2000,50000,1000000")
    ap.add_argument("--calls", type=int, default=21)
    out_dir = os.environ.get("OUT", str(ROOT / "out"))
    ap.add_argument("--json", default=os.path.join(out_dir, "elementwise.json"))
    args = ap.parse_args(argv)
    rows = [r for backend in _backends() for n in map(int, args.events.split(","))
            for r in run(backend, n, args.calls)]
    print(f"{'backend':<8}{'events':>9}{'values':>10}  {'expression':<18}{'awkward ms':>11}"
          f"{'gk ms':>9}{'ratio':>8}")
    for r in rows:
        print(f"{r['backend']:<8}{r['events']:>9}{r['values']:>10}  {r['expression']:<18}"
              f"{r['awkward_ms']:>11.3f}{r['elementwise_ms']:>9.3f}{r['ratio']:>7.1f}x")
    machine = {"host": platform.node(), "cpu": platform.processor() or platform.machine(),
               "python": platform.python_version(), "awkward": ak.__version__,
               "numpy": np.__version__}
    if "cuda" in _backends():
        import cupy

        machine["gpu"] = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": machine, "rows": rows}, indent=1))
    print("wrote", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
