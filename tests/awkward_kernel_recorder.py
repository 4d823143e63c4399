"""Which of awkward's kernels a plain-awkward analysis reaches: the recorder behind the
provider's coverage test (tests/test_awkward_provider.py).

    python tests/awkward_kernel_recorder.py            # rewrites tests/data/awkward_kernels.json

It wraps awkward's CPU backend lookup (``NumpyBackend.__getitem__``, the same lookup the
CuPy backend answers on a GPU: both walk the same layout code) to count every
``(spec name, dtypes)`` asked for while it runs

* the eight ADL queries of ``examples/adl_awkward`` on every sample in
  ``data/samples`` that has their columns, with NanoEvents in "eager" and in "virtual"
  mode;
* ``IDIOMS``: common idioms beyond ADL (pad_none, fill_none, where, sort, mean,
  cross-references, ...).
"""

from __future__ import annotations

import contextlib
import json
import sys
import warnings
from collections import Counter
from pathlib import Path

import awkward as ak
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

OUTPUT = ROOT / "tests" / "data" / "awkward_kernels.json"
SAMPLES = sorted((ROOT / "data" / "samples").glob("*.root"))
MODES = ("eager", "virtual")


def dtype_names(key) -> tuple[str, ...]:
    return tuple(np.dtype(t).name for t in key[1:])


@contextlib.contextmanager
def recording():
    """``with recording() as seen:`` counts ``(name, *dtype names)`` of every kernel
    awkward's CPU backend is asked for inside the block."""
    from awkward._backends.numpy import NumpyBackend

    seen: Counter = Counter()
    lookup = NumpyBackend.__getitem__

    def recorded(self, index):
        seen[(index[0], *dtype_names(index))] += 1
        return lookup(self, index)

    NumpyBackend.__getitem__ = recorded
    try:
        yield seen
    finally:
        NumpyBackend.__getitem__ = lookup


def open_events(path, mode: str):
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return NanoEventsFactory.from_root({str(path): "Events"}, schemaclass=NanoAODSchema,
                                           mode=mode).events()


def _idioms(events):
    jets, electrons = events.Jet, events.Electron
    pt = jets.pt
    hard = pt > 30.0
    yield ak.pad_none(pt, 2, clip=True)
    yield ak.fill_none(ak.pad_none(pt, 2), 0.0)
    yield ak.fill_none(ak.firsts(pt), -1.0)
    yield ak.where(hard, pt, 0.0)
    yield ak.sort(pt, ascending=False)
    yield pt[ak.argsort(jets.eta, axis=1)]
    yield ak.mean(pt, axis=1)
    yield ak.mean(pt[hard], axis=1)
    yield ak.max(pt, axis=1), ak.min(jets.eta, axis=1), ak.prod(hard, axis=1)
    yield ak.count(pt, axis=1), ak.count_nonzero(hard, axis=1), ak.all(hard, axis=1)
    yield ak.sum(jets.nConstituents if "nConstituents" in jets.fields else hard, axis=1)
    yield ak.num(pt[hard]), ak.flatten(pt[hard], axis=None), ak.singletons(ak.firsts(pt))
    yield ak.argmax(pt, axis=1), ak.argmin(pt, axis=1)
    yield ak.sum(pt, axis=0) if len(pt) else pt
    if "jetIdx" in electrons.fields:  # a cross-reference: the jet of each electron
        yield electrons.matched_jet.pt
        yield ak.fill_none(electrons.matched_jet.pt, 0.0)


IDIOMS = {"idioms": _idioms}


def record_all(samples=SAMPLES, modes=MODES) -> dict:
    """``{"awkward": version, "runs": {label: {key: count}}, "kernels": [keys]}``."""
    from examples.adl import columns as colmap
    from examples.adl_awkward import QUERIES, make

    runs = {}
    for path in samples:
        for mode in modes:
            for number, query in QUERIES.items():
                events = open_events(path, mode)
                try:
                    colmap.from_events(events, query.columns)
                except colmap.MissingColumn:
                    continue
                with recording() as seen:
                    make(number).process(events)
                runs[f"Q{number} {path.stem} {mode}"] = seen
            for name, idioms in IDIOMS.items():
                events = open_events(path, mode)
                with recording() as seen:
                    for out in idioms(events):
                        ak.materialize(out) if isinstance(out, ak.Array) else None
                runs[f"{name} {path.stem} {mode}"] = seen
    kernels = sorted({key for seen in runs.values() for key in seen})
    return {"awkward": ak.__version__,
            "runs": {label: {"|".join(k): n for k, n in sorted(seen.items())}
                     for label, seen in runs.items()},
            "kernels": [list(k) for k in kernels]}


def main() -> None:
    result = record_all()
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(json.dumps(result, indent=1) + "\n")
    names = {k[0] for k in result["kernels"]}
    print(f"{len(result['kernels'])} (name, dtypes) keys of {len(names)} kernels -> {OUTPUT}")


if __name__ == "__main__":
    main()
