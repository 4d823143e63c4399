"""GPU differential tests of the indexing and structure kernel families (src/indexing.cu,
src/structure.cu through launchers.py).

Two levels:
- buffer level: every contract kernel (carry, compact_offsets, rebase_offsets,
  offsets_summary, list_carry_index, local_to_global, missing_repeat, filter,
  filter_missing, local_index, argsort, sort, combinations, cartesian) on the device
  against the CPU backend's kernel, bit for bit, for the split, fused and naive variants:
  lists crossing many tiles, runs of empty lists, one list of 70 000 (the merge-path sort),
  offsets starting above 0 and misaligned views;
- public API: take (1-D, jagged and option-type jagged index), filter (jagged, option and
  1-D masks), to_packed, fill_none, where, elementwise, sort, argsort, local_index,
  flatten, num, combinations / argcombinations (n = 2, 3), cartesian / argcartesian for
  every dtype and layout of tests/jagged.py and both strategies of the table (split,
  fused), on device arrays, against awkward on the host (values, types, option
  structure), with no hand-off.

Every step runs in this environment: none reaches a kernel of awkward's own "cuda" backend
that it takes from cuda.compute (those need numba-cuda-mlir, which the device image lacks;
until the ninth session such steps were reported as xfail, 67 of them; a failure there now
fails like any other).
"""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpuexec.kernels as gk
from tests.jagged import ALL_DTYPES, LAYOUTS, assert_same, build, case, jagged, random_values

pytestmark = pytest.mark.gpu

STRATEGIES = ["split", "fused"]
KERNEL_STRATEGIES = ["split", "fused", "naive"]
C = ak.contents


# -- running on the device -------------------------------------------------------------------
def device(x):
    return ak.to_backend(x, "cuda") if isinstance(x, ak.Array) else x


def run(call, be, *, native=True):
    """``call(gk)`` on device copies of its arrays (the caller passes them) -> host result."""
    gk.reset_stats()
    got = call()
    stats = gk.stats()
    if native:
        assert stats["n_handoffs"] == 0, stats["handoff_reasons"]
    if isinstance(got, ak.Array):
        assert ak.backend(got) == "cuda"
        got = ak.to_backend(got, "cpu")
    return got


def same(want_fn, got_fn, be, *, native=True):
    """awkward on the host vs gk on the device (both raise the same error class or agree)."""
    try:
        want = want_fn()
    except Exception as err:
        with pytest.raises(type(err)):
            got_fn()
        return None
    got = run(got_fn, be, native=native)
    assert_same(got, want)
    return got


def _quiet(fn, *args, **kwargs):
    """``fn(*args)`` without numpy's RuntimeWarnings (overflow and invalid values are
    part of the random data; the values are compared, not the warnings)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


@pytest.fixture(scope="module")
def backends(gpu_backend_factory):
    return {s: gpu_backend_factory(s) for s in KERNEL_STRATEGIES}


# -- public API: every function x dtype x layout x strategy ------------------------------------
GROUPS = ["sort", "structure", "combinations", "take", "filter", "choice"]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("group", GROUPS)
def test_public_functions_match_awkward(group, dtype, layout, strategy, backends):
    be = backends[strategy]
    x, y = case(dtype, layout)
    xd, yd = device(x), device(y)
    if group == "sort":
        for asc in (True, False):
            same(lambda: ak.sort(x, ascending=asc), lambda: gk.sort(xd, ascending=asc, backend=be), be)
            same(lambda: ak.argsort(x, ascending=asc),
                 lambda: gk.argsort(xd, ascending=asc, backend=be), be)
    elif group == "structure":
        for axis in (1, -1):
            same(lambda: ak.num(x, axis=axis), lambda: gk.num(xd, axis=axis, backend=be), be)
        same(lambda: ak.local_index(x), lambda: gk.local_index(xd, backend=be), be)
        for axis in (1, -1, None):
            same(lambda: ak.flatten(x, axis=axis), lambda: gk.flatten(xd, axis=axis, backend=be), be)
    elif group == "combinations":
        for n in (2, 3):
            same(lambda: ak.combinations(x, n), lambda: gk.combinations(xd, n, backend=be), be)
            same(lambda: ak.argcombinations(x, n, replacement=True),
                 lambda: gk.argcombinations(xd, n, replacement=True, backend=be), be)
        same(lambda: ak.cartesian([x, y]), lambda: gk.cartesian([xd, yd], backend=be), be)
        same(lambda: ak.argcartesian({"a": x, "b": y}),
             lambda: gk.argcartesian({"a": xd, "b": yd}, backend=be), be)
    elif group == "take":
        perm = ak.argsort(x, axis=-1, stable=True)
        rng = np.random.default_rng(1)
        events = ak.Array(rng.integers(-len(x), len(x), size=2 * len(x)))
        picks = [perm, perm[..., :2], perm - ak.num(x, axis=-1),  # jagged, negative
                 ak.argmax(x, axis=-1, keepdims=True),           # option-type (per-list pick)
                 ak.mask(perm, ak.local_index(perm, axis=-1) % 2 == 0),
                 events]                                          # 1-D: events
        for idx in picks:
            idxd = device(idx)
            same(lambda: x[idx], lambda: gk.take(xd, idxd, backend=be), be)
        same(lambda: ak.to_packed(x), lambda: gk.to_packed(xd, backend=be), be)
    elif group == "choice":  # fill_none of a keepdims pick and where, as the ADL queries use them
        pick = ak.flatten(x[ak.argmax(x, axis=-1, keepdims=True)], axis=-1)
        pickd = device(pick)
        for value in (-1, 2.5):
            same(lambda: ak.fill_none(pick, value), lambda: gk.fill_none(pickd, value, backend=be),
                 be, native=pick.ndim == 1)
        if x.ndim == 2 and not layout.endswith("_above"):
            cond = ak.local_index(x, axis=-1) % 2 == 0
            condd = device(cond)
            same(lambda: ak.where(cond, x, 0), lambda: gk.where(condd, xd, 0, backend=be), be,
                 native=layout in ("listoffset", "sliced", "regular", "indexed_below"))
        # elementwise math on the flat values (numbers as awkward promotes them: NEP 50).
        # Only the layouts it runs natively: the others go to awkward's broadcasting,
        # whose device kernels come from cuda.compute (numba-cuda-mlir, not in the image);
        # their hand-off is tested on the host (tests/test_elementwise.py)
        if layout in ("listoffset", "sliced", "regular", "depth3", "indexed_below"):
            local = ak.local_index(x, axis=-1)
            locald = device(local)
            for fn in (lambda v, i: v * 2.0 + i, lambda v, i: (v > 1) | (i == 0),
                       lambda v, i: np.maximum(v, i) - np.float32(0.5), lambda v, i: v * 3 - i):
                same(lambda: _quiet(fn, x, local),
                     lambda: _quiet(gk.elementwise, fn, xd, locald, backend=be), be)
            if layout != "regular":  # one value per event, repeated into its lists
                outer = ak.Array(np.arange(len(x)) % 3 - 1)
                outerd = device(outer)
                same(lambda: _quiet(lambda v, e: v * e, x, outer),
                     lambda: _quiet(gk.elementwise, lambda v, e: v * e, xd, outerd, backend=be),
                     be)
    else:
        local = ak.local_index(x, axis=-1)
        masks = [local % 3 != 1, ak.from_regular(local % 2 == 0, axis=-1) if layout == "regular"
                 else local >= 0, ak.mask(local % 2 == 0, local % 3 != 1),
                 ak.Array(np.arange(len(x)) % 3 != 0)]
        for m in masks:
            md = device(m)
            same(lambda: x[m], lambda: gk.filter(xd, md, backend=be), be)


# -- public API: random shapes ------------------------------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_random_arrays(strategy, data, backends):
    be = backends[strategy]
    x = data.draw(jagged(max_lists=80, max_len=50))
    asc = data.draw(st.booleans())
    xd = device(x)
    same(lambda: ak.argsort(x, ascending=asc), lambda: gk.argsort(xd, ascending=asc, backend=be), be)
    same(lambda: ak.sort(x, ascending=asc), lambda: gk.sort(xd, ascending=asc, backend=be), be)
    same(lambda: ak.local_index(x), lambda: gk.local_index(xd, backend=be), be)
    same(lambda: ak.flatten(x, axis=None), lambda: gk.flatten(xd, axis=None, backend=be), be)
    same(lambda: ak.argcombinations(x, 2), lambda: gk.argcombinations(xd, 2, backend=be), be)
    perm = ak.argsort(x, axis=-1, stable=True)[..., ::-1]
    same(lambda: x[perm], lambda: gk.take(xd, device(perm), backend=be), be)
    mask = perm % 2 == 0
    same(lambda: x[mask], lambda: gk.filter(xd, device(mask), backend=be), be)


# -- edge cases ---------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", ["float32", "int16", "uint64", "bool"])
def test_one_huge_list(strategy, dtype, backends):
    """70 000 elements in one list: chunk sorts + merge-path passes; lists around it."""
    be = backends[strategy]
    rng = np.random.default_rng(3)
    content = rng.integers(0, 50, size=75_000).astype(dtype)  # long runs of ties
    if dtype == "float32":
        content[rng.integers(0, 75_000, size=300)] = np.nan
        content[rng.integers(0, 75_000, size=300)] = -0.0
    x = build("sliced", np.array([0, 5, 5, 70_005, 72_000, 75_000]), content)
    xd = device(x)
    for asc in (True, False):
        same(lambda: ak.sort(x, ascending=asc), lambda: gk.sort(xd, ascending=asc, backend=be), be)
        same(lambda: ak.argsort(x, ascending=asc),
             lambda: gk.argsort(xd, ascending=asc, backend=be), be)
    same(lambda: ak.local_index(x), lambda: gk.local_index(xd, backend=be), be)
    m = ak.local_index(x) % 3 == 0
    same(lambda: x[m], lambda: gk.filter(xd, device(m), backend=be), be)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_empty_and_all_empty(strategy, backends):
    be = backends[strategy]
    for x in (ak.values_astype(ak.Array([[0]]), "float64")[:0],
              ak.values_astype(ak.Array([[], [], []]), "int32")):
        xd = device(x)
        for name in ("sort", "argsort", "local_index", "flatten"):
            same(lambda: getattr(ak, name)(x), lambda: getattr(gk, name)(xd, backend=be), be)
        for n in (2, 3):
            same(lambda: ak.combinations(x, n), lambda: gk.combinations(xd, n, backend=be), be)
        same(lambda: ak.cartesian([x, x]), lambda: gk.cartesian([xd, xd], backend=be), be)


# -- buffer level: every contract kernel against the CPU kernel ---------------------------------
def _lists(rng, kind):
    if kind == "edge":
        c = np.array([0, 1, 0, 0, 2, 0, 33, 31, 32, 2048, 2049])
    elif kind == "small":
        c = rng.poisson(3, 200)
    elif kind == "zeros":
        c = np.zeros(9, np.int64)
    else:  # lists across many tiles, empty runs, one of 70 000
        c = np.concatenate([rng.poisson(4, 3000), rng.integers(30, 300, 40),
                            rng.integers(300, 3000, 12), np.zeros(500, np.int64), [70_000],
                            rng.poisson(2, 2000)])
        c = rng.permutation(c)
    off = np.zeros(len(c) + 1, np.int64)
    np.cumsum(c, out=off[1:])
    return off


def _values(rng, dtype, m):
    return random_values(rng, dtype, m, ties=0.3, special=0.05)


def _equal(name, got, want):
    import cupy as cp

    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), name
        for g, w in zip(got, want):
            _equal(name, g, w)
        return
    if isinstance(want, (int, np.integer)):
        assert int(got) == int(want), (name, got, want)
        return
    g = cp.asnumpy(got)
    assert g.dtype == want.dtype and g.shape == want.shape, (name, g.dtype, want.dtype,
                                                             g.shape, want.shape)
    assert np.array_equal(g.view(np.uint8), want.view(np.uint8)), (
        name, np.nonzero(g != want)[0][:10], g[:20], want[:20])


@pytest.mark.parametrize("strategy", KERNEL_STRATEGIES)
@pytest.mark.parametrize("kind", ["edge", "small", "zeros", "long"])
def test_kernels_match_cpu_kernels(strategy, kind, backends):
    import cupy as cp

    be = backends[strategy]
    cpu = gk.get_backend("cpu")
    rng = np.random.default_rng(len(kind))
    off = _lists(rng, kind) + 5          # lists start 5 elements into the content
    n = len(off) - 1
    dev = cp.asarray

    def both(name, *args, dtypes=()):
        want = cpu.kernel(name, *dtypes)(*args)
        got = be.kernel(name, *dtypes)(*[dev(a) if isinstance(a, np.ndarray) else a
                                         for a in args])
        _equal(f"{name}{dtypes}", got, want)

    starts, stops = off[:-1].copy(), off[1:].copy()
    perm = rng.permutation(n)
    ls, lt = starts[perm].copy(), stops[perm].copy()
    total = int(off[-1]) + 3
    for dt in ALL_DTYPES:
        v = _values(rng, dt, total)
        idx = rng.integers(0, total, 5000)
        both("carry", v, idx, dtypes=(dt,))
        both("carry", v, np.arange(1, total - 1), dtypes=(dt,))  # one run (packing)
        both("argsort", off, v, True, dtypes=(dt,))
        both("sort", off, v, False, dtypes=(dt,))
    both("compact_offsets", ls, lt)
    both("rebase_offsets", off)
    bad = off.copy()
    if len(bad) > 4:
        bad[3] = bad[2] - 1
    both("rebase_offsets", bad)
    both("offsets_summary", off, 4.0, 64)
    both("offsets_summary", bad, 4.0, 64)
    both("offsets_summary", off, 0.5, 1)  # most lists long
    both("offsets_summary", off[1:], 4.0, 64)  # a misaligned view
    both("offsets_summary", off[:1], 4.0, 64)  # no lists
    co = cpu.kernel("compact_offsets")(ls, lt)
    both("list_carry_index", ls, co)
    ic = rng.integers(0, 5, n)
    ioff = np.zeros(n + 1, np.int64)
    np.cumsum(ic, out=ioff[1:])
    ioff += 2
    index = np.concatenate([[0, 0], rng.integers(-6, 6, int(ic.sum()))]).astype(np.int64)
    valid = rng.random(len(index)) < 0.7
    both("local_to_global", ls, lt, ioff, index)
    both("missing_repeat", ls, lt, ioff, index, valid)
    mask = rng.random(int(off[-1])) < 0.5
    mvalid = rng.random(int(off[-1])) < 0.8
    both("filter", ls, lt, off, mask)
    both("filter_missing", ls, lt, off, mask, mvalid)
    both("local_index", off)
    small = (lt - ls) <= 50
    cs, ct = np.where(small, ls, 0), np.where(small, lt, 0)
    for k in (2, 3):
        for repl in (False, True):
            both("combinations", cs, ct, k, repl, k == 3)
    p2 = rng.permutation(n)
    both("cartesian", cs, ct, cs[p2].copy(), ct[p2].copy(), False)
    both("cartesian", cs, ct, cs[p2].copy(), ct[p2].copy(), True)


@pytest.mark.parametrize("strategy", KERNEL_STRATEGIES)
@pytest.mark.parametrize("start", [1, 3, 7])
def test_kernels_on_misaligned_views(strategy, start, backends):
    """Views that start off a 16-byte boundary take the scalar paths of the vector loads."""
    import cupy as cp

    be = backends[strategy]
    cpu = gk.get_backend("cpu")
    rng = np.random.default_rng(start)
    c = rng.integers(0, 40, 500)
    off = np.zeros(len(c) + 1, np.int64)
    np.cumsum(c, out=off[1:])
    m = int(off[-1])
    for dt in ("int8", "float32", "float64"):
        full = _values(rng, dt, m + start)
        v, vd = full[start:], cp.asarray(full)[start:]
        idx_full = rng.integers(0, m, 3000 + start)
        idx, idxd = idx_full[start:], cp.asarray(idx_full)[start:]
        _equal("carry", be.kernel("carry", dt)(vd, idxd), cpu.kernel("carry", dt)(v, idx))
        _equal("argsort", be.kernel("argsort", dt)(cp.asarray(off), vd, True),
               cpu.kernel("argsort", dt)(off, v, True))
    mfull = rng.random(m + start) < 0.5
    mask, maskd = mfull[start:], cp.asarray(mfull)[start:]
    offd = cp.asarray(np.concatenate([[0], off]))[1:]  # offsets view off 16 bytes too
    _equal("filter", be.kernel("filter")(offd[:-1], offd[1:], offd, maskd),
           cpu.kernel("filter")(off[:-1], off[1:], off, mask))
    _equal("local_index", be.kernel("local_index")(offd), cpu.kernel("local_index")(off))
    _equal("compact_offsets", be.kernel("compact_offsets")(offd[:-1], offd[1:]),
           cpu.kernel("compact_offsets")(off[:-1], off[1:]))


# family -> (the public call on module ``m`` (gk or ak), a kernel of the naive unit it must
# launch under a window, kernels of the flattened strategies it must not)
_WINDOW_CALLS = {
    "filter": (lambda m, x, msk, **kw: m.filter(x, msk, **kw) if m is gk else x[msk],
               "gk_filter_fill_naive", ("gk_filter_fused", "gk_filter_fill")),
    "sort": (lambda m, x, msk, **kw: m.argsort(x, axis=-1, **kw), "gk_argsort_naive_b64",
             ("gk_sort_classify",)),
    "local_index": (lambda m, x, msk, **kw: m.local_index(x, axis=-1, **kw),
                    "gk_local_index_perlist", ("gk_local_index_fused", "gk_local_index_split")),
    "combinations": (lambda m, x, msk, **kw: m.argcombinations(x, 2, **kw),
                     "gk_combinations_naive",
                     ("gk_combinations_fused", "gk_combinations_split")),
}


@pytest.mark.parametrize("family", sorted(_WINDOW_CALLS))
def test_per_list_windows_run_the_per_list_kernels(family):
    """Where a window of the strategy table holds (here: every input), the fused and split
    backends run the family's per-list kernels from the naive unit, with the same results
    as awkward."""
    from gpuexec.kernels.gpu.backend import GPUBackend
    from gpuexec.kernels.gpu.plan import PlanRequest
    from gpuexec.kernels.gpu.catalog import ListWindow

    call, naive_kernel, flat_kernels = _WINDOW_CALLS[family]
    everywhere = {family: ListWindow(0, float("inf"))}
    for strategy in ("fused", "split"):
        be = GPUBackend(plan=PlanRequest(strategy=strategy, family_per_list=everywhere))
        for layout in ("listoffset", "listarray"):
            x = case("float64", layout)[0]
            m = ak.local_index(x) % 3 != 1
            dx, dm = device(x), device(m)
            with gk.counting() as s:
                got = call(gk, dx, dm, backend=be)
            assert ak.to_list(ak.to_backend(got, "cpu")) == ak.to_list(call(ak, x, m))
            names = {k for k in s["kernels"] if k.startswith("gk_")}
            assert naive_kernel in names, (strategy, layout, names)
            assert not names & set(flat_kernels), (strategy, layout, names)


# -- strategies really differ; memory errors --------------------------------------------------
def test_family_strategies_launch_different_kernels(backends):
    x = device(case("float64", "listarray")[0])
    m = device(ak.local_index(case("float64", "listarray")[0]) % 2 == 0)
    seen = {}
    for strategy in KERNEL_STRATEGIES:
        be = backends[strategy]
        with gk.counting() as s:
            gk.filter(x, m, backend=be)
            gk.argsort(x, backend=be)
            gk.combinations(x, 2, backend=be)
        seen[strategy] = {k: v for k, v in s["kernels"].items() if k.startswith("gk_")}
    assert "gk_filter_fused" in seen["fused"] and "gk_filter_fill" in seen["split"]
    assert "gk_filter_fill_naive" in seen["naive"]
    assert "gk_argsort_fused_b64" in seen["fused"] and "gk_argsort_rank_b64" in seen["split"]
    assert "gk_choose_fused" in seen["fused"] and "gk_choose_down" in seen["split"]
    assert "gk_partition" in seen["split"] and "gk_partition" not in seen["fused"]
    assert sum(seen["split"].values()) > sum(seen["fused"].values())
    assert not any(k.startswith("cupy:") for s in seen.values() for k in s)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_carry_gathers_one_element_per_thread_below_the_window(strategy):
    """As shipped (the H200 row), carry runs the one-element-per-thread kernel below 1.6M
    outputs and its 128-bit runs above; both give the CPU kernel's bits."""
    import cupy as cp

    from gpuexec.kernels.gpu.backend import GPUBackend

    from gpuexec.kernels.gpu.plan import PlanRequest

    be = GPUBackend(plan=PlanRequest(strategy=strategy))
    if "carry" not in be.plan.family_per_list:
        pytest.skip(f"the {be.device.arch} row has no carry window")
    cpu = gk.get_backend("cpu")
    rng = np.random.default_rng(9)
    values = rng.normal(size=3_000_000)
    for n, kernel in ((1_000_000, "gk_carry_b64_naive"), (2_000_000, "gk_carry_b64_vec")):
        index = np.sort(rng.integers(0, values.shape[0], n))
        with gk.counting() as s:
            got = be.kernel("carry", "float64")(cp.asarray(values), cp.asarray(index))
        assert {k for k in s["kernels"] if k.startswith("gk_carry")} == {kernel}
        assert np.array_equal(cp.asnumpy(got).view(np.uint64),
                              cpu.kernel("carry", "float64")(values, index).view(np.uint64))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_out_of_memory_in_a_family_kernel_names_it(strategy, backends):
    import cupy as cp

    from gpuexec.kernels.gpu import DeviceOutOfMemory

    be = backends[strategy]
    n = 4_000_000
    values = cp.ones(n, dtype=np.float64)
    index = cp.arange(n, dtype=np.int64)
    be.kernel("carry", "float64")(values, index[:10])  # module loaded first
    pool = cp.cuda.MemoryPool()
    pool.set_limit(size=1 << 20)
    with cp.cuda.using_allocator(pool.malloc):
        with pytest.raises(DeviceOutOfMemory) as info:
            be.kernel("carry", "float64")(values, index)
    assert "gk_carry_b64_vec" in str(info.value) and info.value.nbytes == 8 * n
