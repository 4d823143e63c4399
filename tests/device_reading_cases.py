"""Shared by tests/test_device_reading.py (numpy) and tests/gpu/test_gpu_device_reading.py
(CuPy): files with several baskets per branch, entry ranges that start and stop inside
and on basket edges, and the comparison of gpuexec.io.device_read with uproot."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import awkward as ak
import numpy as np
import uproot

from gpuexec.io import device_read as device_reading

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # examples/
REAL = [str(ROOT / "data" / "samples" / f"{n}.root")
        for n in ("nano_dy", "nano_tt_v15", "nano_dimuon")]


def generated(folder, compression="zlib:1", events=9000, basket=2000) -> str:
    from examples.make_sample import write_sample

    return write_sample(Path(folder) / f"multi_{compression.replace(':', '')}.root", events,
                        seed=11, compression=compression, chunk_size=basket)


def ranges(branch, seed: int = 0) -> list[tuple[int, int]]:
    """Whole, empty, on and around basket edges, and random."""
    n = branch.num_entries
    edges = [int(e) for e in branch.entry_offsets]
    rng = random.Random(seed)
    out = [(0, n), (0, 0), (n, n)]
    for e in edges[1:-1]:
        out += [(e, n), (0, e), (e - 1, e + 1), (e, e + 1)]
    out += [tuple(sorted((rng.randrange(n + 1), rng.randrange(n + 1)))) for _ in range(4)]
    return [(a, b) for a, b in out if 0 <= a <= b <= n]


def _uproot(branch, start=None, stop=None):
    """uproot's values of entries [start, stop) as (kind, values, offsets): a flat
    branch's values (offsets None), or a jagged branch's content and its offsets from 0."""
    arr = branch.array(entry_start=start, entry_stop=stop, library="ak")
    if isinstance(arr.layout, ak.contents.ListOffsetArray):
        offsets = np.asarray(arr.layout.offsets)
        content = ak.to_numpy(arr.layout.content)[offsets[0]:offsets[-1]]
        return "content", content, offsets - offsets[0]
    return "flat", ak.to_numpy(arr), None


def expected(branch, start, stop):
    """uproot's values of entries [start, stop): flat, or a jagged branch's content."""
    kind, values, _offsets = _uproot(branch, start, stop)
    return kind, values


def compare_file(path, xp, to_host=lambda a: a) -> int:
    """Every branch of ``path`` over ``ranges``: equal to uproot (values and dtype);
    returns how many reads were compared. Raises on any difference."""
    compared = 0
    with uproot.open(path) as f:
        tree = f["Events"]
        for name in tree.keys():
            branch = tree[name]
            # one uproot read per branch (most of the time), each range a slice of it
            kind, values, offsets = _uproot(branch)
            for start, stop in ranges(branch):
                want = (values[start:stop] if offsets is None
                        else values[offsets[start]:offsets[stop]])
                read = (device_reading.read_content if kind == "content"
                        else device_reading.read_flat)
                got = to_host(read(branch, start, stop, xp))
                assert got.dtype == want.dtype, (path, name, got.dtype, want.dtype)
                assert np.array_equal(got, want, equal_nan=want.dtype.kind == "f"), (
                    path, name, start, stop)
                compared += 1
    return compared


def host_baskets_freeing(monkeypatch, after: int, given_back: list) -> list:
    """The baskets the host inflates from now on, in order (``_host_payload`` counted);
    once ``after`` of them are done, the nvCOMP slot in ``given_back`` (if any) is given
    back, as another batch's end would free it (``NVCOMP_WAIT`` tests)."""
    inflated = []
    host_payload = device_reading._host_payload

    def counting(basket, decompressors):
        inflated.append(basket)
        if len(inflated) == after and given_back:
            device_reading._DeviceSlots.release(given_back.pop())
        return host_payload(basket, decompressors)

    monkeypatch.setattr(device_reading, "_host_payload", counting)
    return inflated
