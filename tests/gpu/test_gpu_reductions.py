"""Differential tests of the GPU reductions against awkward on the host: every public
reduction x dtype x layout x strategy (split, fused, naive, "per-thread-staged": the staged
one-list-per-thread kernel the flattened strategies may use for short lists, and "per-wave":
short lists one per lane, medium ones by groups of lanes, longer ones streamed by the wave,
with its "per-wave-ordered", "per-wave-stretch", "per-wave-whole-wave", "per-wave-group4" and
"per-wave-staged" and "long-tail" variants, conftest.PER_WAVE_LAUNCH). Integers, counts, min/max and
arg-reductions must be identical (values, types, option structure); float sum/prod agree
within the summation error bound |got - want| <= n * eps * sum|x| (prod: n * eps * |want|)
per list. Lists on which the bound is undefined (sum|x| overflows; a product whose partial
products can leave the normal range) are compared for NaN-ness only."""

from __future__ import annotations

import math

import awkward as ak
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpuexec.kernels as gk
from tests.jagged import ALL_DTYPES, LAYOUTS, assert_same, build, jagged, random_values

pytestmark = pytest.mark.gpu

STRATEGIES = ["split", "fused", "naive", "per-thread-staged", "per-wave", "per-wave-ordered",
              "per-wave-stretch", "per-wave-whole-wave", "per-wave-group4", "per-wave-staged",
              "long-tail"]
FUNCS = ["sum", "prod", "min", "max", "argmin", "argmax", "count", "count_nonzero", "any", "all"]


# -- data ------------------------------------------------------------------------------------
def _values(rng, dtype, m):
    return random_values(rng, dtype, m, ties=0.2, special=0.03)


def _counts(rng, kind):
    if kind == "small":
        n = int(rng.integers(0, 60))
        c = rng.poisson(3, n)
        c[rng.random(n) < 0.2] = 0
        return c
    if kind == "edge":
        return np.array([0, 1, 0, 0, 2, 0], dtype=np.int64)
    # "long": lists crossing many tiles, runs of empty lists, one list over 16 tiles
    c = np.concatenate([rng.poisson(4, 300), rng.integers(900, 9000, 12), np.zeros(40, np.int64),
                        [70_000], rng.poisson(2, 200), np.zeros(3, np.int64)])
    return rng.permutation(c)


def make_case(dtype, layout, kind, seed):
    rng = np.random.default_rng(seed)
    c = np.asarray(_counts(rng, kind), dtype=np.int64)
    offsets = np.zeros(len(c) + 1, dtype=np.int64)
    np.cumsum(c, out=offsets[1:])
    content = _values(rng, dtype, int(offsets[-1]))
    return build(layout, offsets, content)


CASES = [("small", 1), ("edge", 2), ("long", 3)]


# -- comparison --------------------------------------------------------------------------------
def _reference(fname, x):
    return getattr(ak, fname)(x, axis=-1)


def _bound_parts(fname, x):
    """Per-list (n, scale, defined) with the structure of the reduction's result."""
    a = ak.values_astype(abs(x), np.float64)
    n = ak.count(x, axis=-1)
    eps = np.finfo(_leaf_dtype(x)).eps
    if fname == "sum":
        scale = ak.sum(a, axis=-1)
        return n, scale, eps
    big = ak.prod(ak.where(a > 1, a, 1), axis=-1)
    nonzero_small = ak.prod(ak.where((a < 1) & (a > 0), a, 1), axis=-1)
    has_nan = ak.any(np.isnan(a), axis=-1)
    return n, (big, nonzero_small, has_nan), eps


def _leaf_dtype(x):
    layout = ak.to_layout(x)
    while not isinstance(layout, ak.contents.NumpyArray):
        layout = layout.content
    return layout.dtype


def _close(fname, got, want, n, scale, eps, tiny, fmax):
    """``scale`` is computed in float64 whatever the dtype; the bound is undefined where the
    dtype's own arithmetic can overflow (scale > fmax) or underflow (products below tiny)."""
    if want is None or got is None:
        assert got is None and want is None, (got, want)
        return
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for i in range(len(want)):
            sc = scale[i] if fname == "sum" else (scale[0][i], scale[1][i], scale[2][i])
            _close(fname, got[i], want[i], n[i], sc, eps, tiny, fmax)
        return
    if got == want:
        return
    if math.isnan(want):
        if fname == "sum" and not scale <= fmax:  # inf - inf, or overflow in some orders
            assert math.isnan(scale) is False or math.isnan(got), (got, want)
            return
        if fname == "prod" and not scale[2]:
            big, small, _ = scale
            if not big <= fmax or (small != 1 and small < tiny):
                # no NaN in the list: inf * 0 after an overflow in awkward's order, where a
                # partial product taken in another order may have stayed finite (or reached 0)
                return
        assert math.isnan(got), (got, want)
        return
    if fname == "sum":
        if not scale <= fmax:
            return
        assert abs(got - want) <= n * eps * scale, (got, want, n, scale)
    else:
        big, small, _ = scale
        if not big <= fmax or (small != 1 and small < tiny):
            return
        assert abs(got - want) <= n * eps * abs(want), (got, want, n)


def check(fname, x, backend):
    """gk.<fname> on the device copy of ``x`` with ``backend`` against awkward on the host."""
    want = _reference(fname, x)
    xd = ak.to_backend(x, "cuda")
    got = getattr(gk, fname)(xd, axis=-1, backend=backend)
    assert ak.backend(got) == "cuda"
    got = ak.to_backend(got, "cpu")
    dtype = _leaf_dtype(x)
    if fname in ("sum", "prod") and dtype.kind == "f":
        assert str(got.type) == str(want.type), (got.type, want.type)
        n, scale, eps = _bound_parts(fname, x)
        scale_l = scale.to_list() if fname == "sum" else tuple(p.to_list() for p in scale)
        _close(fname, got.to_list(), want.to_list(), n.to_list(), scale_l, eps,
               np.finfo(dtype).tiny, np.finfo(dtype).max)
    else:
        assert_same(got, want)


# -- the full product ------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("fname", FUNCS)
def test_reduction_matches_awkward(fname, dtype, layout, strategy, gpu_backend_factory):
    be = gpu_backend_factory(strategy)
    for kind, seed in CASES:
        x = make_case(dtype, layout, kind, seed)
        check(fname, x, be)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("fname", FUNCS)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_reduction_random_shapes(fname, strategy, data, gpu_backend_factory):
    x = data.draw(jagged(max_lists=60, max_len=40))
    check(fname, x, gpu_backend_factory(strategy))


# -- the arg-reductions' empty accumulator holds the worst value of the type ----------------------
def _worst_case_lists(dtype):
    """Lists made of the type's extreme values and NaN at heads, in the middle and at the
    end; short ones and long ones that cross lanes, wave-tiles and waves."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        lo, hi, nan = -np.inf, np.inf, np.nan
    elif dt.kind == "b":
        lo, hi, nan = False, True, None
    else:
        lo, hi, nan = np.iinfo(dt).min, np.iinfo(dt).max, None
    short = [[lo], [hi], [lo, lo], [hi, hi], [lo, hi, lo], [hi, lo, hi], [hi, lo], [lo, hi]]
    if nan is not None:
        short += [[nan], [nan, lo], [lo, nan], [nan, hi, lo], [lo, nan, hi], [hi, nan, lo, nan]]
    long = []
    for n in (33, 257, 5000):
        long += [[lo] * n, [hi] * n, [lo] * (n - 1) + [hi], [hi] * (n - 1) + [lo],
                 [hi] + [lo] * (n - 1), [lo] + [hi] * (n - 1)]
        if nan is not None:
            long += [[nan] + [lo] * (n - 1), [lo] * (n // 2) + [nan] * (n - n // 2),
                     [nan] * (n - 1) + [hi]]
    lists = short + long + short
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in lists], out=offsets[1:])
    return build("listoffset", offsets, np.array([v for x in lists for v in x], dtype=dt))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int8", "uint8", "uint64", "bool"])
@pytest.mark.parametrize("fname", ["argmin", "argmax", "min", "max"])
def test_extreme_values_and_nan_in_every_position(fname, dtype, strategy, gpu_backend_factory):
    check(fname, _worst_case_lists(dtype), gpu_backend_factory(strategy))


# -- the long_tail kernel's queue: blocks whose waves stream many lists, and waves past the end --
@pytest.mark.parametrize("launch", ["", "long_tail:block=64,min_blocks=8;long_tail:argmin:block=256,"
                                        "min_blocks=3;long_tail:argmax:block=256,min_blocks=3"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int16", "uint8", "bool"])
def test_long_tail_kernel_streams_every_queued_list_once(dtype, launch):
    """Half of the lists streamed by a whole wave (longer than half a wave-tile: queued in
    the block's shared memory and taken by whichever wave is free), the others short or
    medium, the last block mostly past the end (its empty waves still reach the barrier
    and take queued lists): every reduction equals awkward's, at the table's block size
    and at two others."""
    from gpuexec.kernels.gpu.backend import GPUBackend
    from gpuexec.kernels.gpu.plan import PlanRequest

    be = GPUBackend(plan=PlanRequest(strategy="fused", short_lists=float("inf"),
                                     per_list_kernel="long_tail", launch=launch or None))
    rng = np.random.default_rng(5)
    n = 1000  # not a multiple of any block's lists
    counts = np.where(rng.random(n) < 0.5, rng.integers(257, 3000, n), rng.poisson(20, n))
    counts[rng.random(n) < 0.05] = 0
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    x = build("listoffset", offsets, _values(rng, dtype, int(offsets[-1])))
    for fname in FUNCS:
        with gk.counting() as s:
            check(fname, x, be)
        if fname != "count":  # (count reads the offsets only)
            launched = [k for k in s["kernels"] if k != "gk_offsets_summary"]
            assert len(launched) == 1 and launched[0].endswith("_long_tail"), s["kernels"]


# -- signed zeros: which zero comes first decides min/max, wherever the lanes meet it ---------
def _signed_zero_lists(dtype, sign):
    """Long lists (lanes, wave-tiles, waves) of values on one side of zero with zeros of
    both signs: the first zero at the head, in the middle, at the end, alone or followed
    by zeros of the other sign in other lanes and tiles; and lists without a zero."""
    rng = np.random.default_rng(17)
    lists = []
    for n in (33, 64, 129, 257, 1000, 5000):
        for first in (0, 1, 31, n // 2, n - 1):
            for lead in (1.0, -1.0):  # the sign of the first zero; later ones have the other
                x = sign * (1.0 + rng.random(n))
                later = rng.integers(first, n, size=3)
                x[later] = np.copysign(0.0, -lead)
                x[first] = np.copysign(0.0, lead)
                lists.append(x)
        lists.append(sign * (1.0 + rng.random(n)))
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in lists], out=offsets[1:])
    return build("listoffset", offsets, np.concatenate(lists).astype(dtype))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("fname", ["min", "max", "argmin", "argmax"])
def test_first_of_signed_zeros_wins(fname, dtype, strategy, gpu_backend_factory):
    sign = 1.0 if fname.endswith("min") else -1.0
    check(fname, _signed_zero_lists(dtype, sign), gpu_backend_factory(strategy))


# -- the option mask written by the kernel ----------------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("fname", [f for f in FUNCS if f != "count"])
def test_mask_identity_and_keepdims(fname, strategy, gpu_backend_factory):
    """mask_identity either way (the per-list kernels write the mask of empty lists in
    their pass, the flattened strategies compare offsets) and keepdims, on short and long
    lists and offsets that start late."""
    be = gpu_backend_factory(strategy)
    for kind, seed in CASES:
        x = make_case("float64", "listoffset", kind, seed)
        x = x[1:]  # offsets from the second list on
        xd = ak.to_backend(x, "cuda")
        for mask_identity in (False, True):
            for keepdims in (False, True):
                kw = {"mask_identity": mask_identity, "keepdims": keepdims}
                got = getattr(gk, fname)(xd, axis=-1, backend=be, **kw)
                want = getattr(ak, fname)(x, axis=-1, **kw)
                got = ak.to_backend(got, "cpu")
                if fname in ("sum", "prod"):
                    assert str(got.type) == str(want.type), (got.type, want.type)
                    np.testing.assert_array_equal(ak.is_none(got, axis=-1),
                                                  ak.is_none(want, axis=-1))
                else:
                    assert_same(got, want)


# -- buffer level: misaligned content, offsets starting late, lists across tiles ----------------
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", ["float64", "int32", "int8", "bool", "uint16"])
@pytest.mark.parametrize("start", [0, 1, 3, 7])
def test_kernel_on_misaligned_views(strategy, dtype, start, gpu_backend_factory):
    import cupy as cp

    be = gpu_backend_factory(strategy)
    cpu = gk.get_backend("cpu")
    rng = np.random.default_rng(start)
    c = rng.integers(0, 700, 400)
    offsets = np.zeros(len(c) + 1, dtype=np.int64)
    np.cumsum(c, out=offsets[1:])
    offsets += 5  # lists begin 5 elements into the (view of the) content
    full = _values(rng, dtype, int(offsets[-1]) + start + 9)
    content = full[start:]
    d_content = cp.asarray(full)[start:]
    kinds = ["reduce_countnonzero", "reduce_argmax", "reduce_any"]
    if dtype == "bool":
        kinds += ["reduce_sum_bool", "reduce_prod_bool"]
    else:
        kinds += ["reduce_sum", "reduce_max"]
    for name in kinds:
        args = (offsets, content)
        d_args = (cp.asarray(offsets), d_content)
        if name == "reduce_max":
            ident = -np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min
            args, d_args = args + (ident,), d_args + (ident,)
        want = cpu.kernel(name, dtype)(*args)
        got = cp.asnumpy(be.kernel(name, dtype)(*d_args))
        if name == "reduce_sum" and np.dtype(dtype).kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


# -- repeated calls on the same buffers (the remembered launch) ----------------------------------
@pytest.mark.parametrize("strategy", ["naive", "per-thread-staged", "per-wave", "long-tail", "split"])
@pytest.mark.parametrize("fname", ["sum", "min", "argmax", "any"])
def test_repeated_calls_on_the_same_buffers(fname, strategy, gpu_backend_factory):
    """From its second call on the same checked buffers a reduction takes the launch it
    remembered (ReduceDispatch): other options (initial, mask_identity, keepdims) still
    give awkward's answers, every call counts its launch, and buffers made after the first
    ones died, at the very device addresses the pool hands out again, get their own
    results, not the remembered ones."""
    import cupy as cp

    be = gpu_backend_factory(strategy)
    options = [{}, {"mask_identity": True}, {"keepdims": True}, {"mask_identity": False}]
    if fname == "min":
        options += [{"initial": 0.25}, {"initial": -0.0, "mask_identity": False},
                    {"initial": 0.0, "mask_identity": False}]
    for seed in (31, 32, 33):  # each array dies before the next is made (same sizes)
        x = make_case("float64", "listoffset", "long", 30)
        x = ak.Array(ak.contents.ListOffsetArray(  # new values in the same list structure
            x.layout.offsets, ak.contents.NumpyArray(_values(np.random.default_rng(seed),
                                                             "float64", len(x.layout.content)))))
        xd = ak.to_backend(x, "cuda")
        for kw in options * 2:
            with gk.counting() as s:
                got = getattr(gk, fname)(xd, axis=1, backend=be, **kw)
            launches = {k: v for k, v in s["kernels"].items() if k != "gk_offsets_summary"}
            assert sum(launches.values()) >= 1 and all(v == 1 for v in launches.values())
            want = getattr(ak, fname)(x, axis=1, **kw)
            got = ak.to_backend(got, "cpu")
            if fname == "sum":
                np.testing.assert_allclose(ak.to_numpy(ak.flatten(got, axis=None)),
                                           ak.to_numpy(ak.flatten(want, axis=None)),
                                           rtol=1e-9, atol=1e-6)
                assert str(got.type) == str(want.type)
            else:
                assert_same(got, want)
                if fname == "min" and kw.get("initial") is not None:
                    # -0.0 and 0.0 compare equal but are different identities
                    def signs(a):
                        a = ak.to_numpy(ak.fill_none(a, 1.0))
                        return np.signbit(a) & ~np.isnan(a)

                    np.testing.assert_array_equal(signs(got), signs(want))
        del xd
        cp.cuda.runtime.deviceSynchronize()


# -- strategies really differ --------------------------------------------------------------------
def test_strategies_launch_different_kernels(gpu_backend_factory):
    x = ak.to_backend(make_case("float64", "listoffset", "long", 5), "cuda")
    seen, checks = {}, 0
    for strategy in ("split", "fused"):
        with gk.counting() as s:
            with gk.using(gpu_backend_factory(strategy)):
                gk.sum(x, axis=1)
        checks += s["kernels"].get("gk_offsets_summary", 0)
        seen[strategy] = {k: v for k, v in s["kernels"].items()
                          if k.startswith("gk_") and k != "gk_offsets_summary"}
    assert checks == 1  # the API layer's offsets check: one launch for the buffer's first call
    assert seen["split"] == {"gk_partition": 1, "gk_sum_float64_flat_split": 1,
                             "gk_sum_float64_flat_fixup": 1}
    assert seen["fused"] == {"gk_sum_float64_flat_fused": 1}
    assert sum(seen["split"].values()) == 3 * sum(seen["fused"].values())


@pytest.mark.parametrize("long_kernel", ["flat", "per_wave"])
@pytest.mark.parametrize("per_list", ["per_thread", "per_thread_staged"])
@pytest.mark.parametrize("strategy", ["split", "fused"])
@pytest.mark.parametrize("fname", ["sum", "argmax"])
def test_short_lists_reduce_one_per_thread_long_ones_flattened(strategy, fname, per_list,
                                                                long_kernel):
    """The table's short-list rule: the mean list length picks the mapping (and the row's
    per-list kernel runs it); longer lists go to the strategy's flattened kernel or the
    per_wave one (or per_wave_staged) as the long-list kernel says; all give the same
    result as awkward. (Poisson lengths have no long tail: per_thread_staged's threshold
    for such inputs, ``bounded``, holds, and the long lists are above it.)"""
    from gpuexec.kernels.gpu.backend import GPUBackend
    from gpuexec.kernels.gpu.plan import PlanRequest, plan_for

    be = GPUBackend(plan=PlanRequest(strategy=strategy, per_list_kernel=per_list,
                                     long_list_kernel=long_kernel))
    threshold = be.plan.short_lists.get(fname, be.plan.short_lists.get("*", 0))
    assert threshold > 1
    above = 4 * max(threshold, be.plan.per_list_rule(fname, "float64").bounded)
    rng = np.random.default_rng(3)
    for mean, mapping in ((2, "per_thread"), (above, strategy)):
        counts = rng.poisson(mean, 3000)
        host = ak.unflatten(rng.normal(size=int(counts.sum())), counts)
        with gk.counting() as s:
            got = getattr(gk, fname)(ak.to_backend(host, "cuda"), axis=1, backend=be)
        launched = [k for k in s["kernels"] if k.startswith(f"gk_{fname}_")]
        one_per_thread = [k.endswith(f"_{per_list}") for k in launched]
        assert launched and all(one_per_thread) == (mapping == "per_thread"), (mean, launched)
        assert any(one_per_thread) == all(one_per_thread), (mean, launched)
        if mapping != "per_thread":
            if long_kernel == "flat":
                assert f"gk_{fname}_float64_flat_{strategy}" in launched, launched
            else:  # per_wave, or per_wave_staged on the table's band
                role = be.plan.per_list_role(fname, len(counts), int(counts.sum()), "float64")
                assert role in ("per_wave", "per_wave_staged")
                assert launched == [f"gk_{fname}_float64_{role}"], launched
        want = getattr(ak, fname)(host, axis=1)
        if fname == "sum":
            np.testing.assert_allclose(ak.to_numpy(ak.to_backend(got, "cpu")), ak.to_numpy(want),
                                       rtol=1e-12)
        else:
            assert ak.to_list(ak.to_backend(got, "cpu")) == ak.to_list(want)
    flat = plan_for(be.device.arch, strategy=strategy, short_lists=0)
    assert flat.per_list(fname, 10, 10) is False


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint32"])
def test_the_offsets_check_on_the_device_reads_longest_and_long_lists(dtype):
    """The offsets check of a device buffer (one ``gk_offsets_summary`` launch, one host
    read) remembers its longest list, how many lists are long (as numpy computes them) and
    its ends, and the same bad offsets raise the same errors on the device as on the
    host."""
    import cupy as cp

    from gpuexec.kernels import validate

    rng = np.random.default_rng(3)
    for counts in (rng.poisson(3, 100_000), np.r_[rng.poisson(3, 50_000), [900, 70, 2000]],
                   np.zeros(10, np.int64), np.array([5])):
        host = np.concatenate([[0], np.cumsum(counts)]).astype(dtype)
        device = cp.asarray(host)
        assert validate.offsets(device, int(host[-1])) == (0, int(host[-1]))
        assert validate.ends(device) == (0, int(host[-1]))
        want_long = int((np.diff(host.astype(np.int64))
                         > max(4.0 * host[-1] / (host.size - 1), 64)).sum())
        assert validate.longest_list(device) == int(np.diff(host.astype(np.int64)).max())
        assert validate.long_lists(device) == want_long
    good = np.array([0, 3, 3, 7, 9], dtype=dtype)
    bad_cases = [(np.array([0, 3, 2, 9], dtype=dtype), 9, "not monotonically increasing at "
                                                          "position 1"),
                 (good, 8, "exceeds the length of the content")]
    if dtype != "uint32":
        bad_cases.append((np.array([-1, 3, 9], dtype=dtype), 9, "is negative"))
    for offsets, length, message in bad_cases:
        with pytest.raises(validate.InvalidLayout, match=message):
            validate.offsets(cp.asarray(offsets), length)
        with pytest.raises(validate.InvalidLayout, match=message):
            validate.offsets(offsets, length)  # the host says the same
        assert validate.longest_list(cp.asarray(offsets)) is None
    unknown = cp.asarray(good)
    validate.offsets(unknown, None)  # a content length not known: only the order checked
    assert validate.longest_list(unknown) is None  # (nothing remembered without it)


def test_the_longest_list_picks_the_kernel_of_a_public_call():
    """A public call's offsets pass the API layer's check, which reads their longest list
    back: a long tail sends lists of a short mean to the per_wave kernel, and to the long_tail
    one where the check counted many long lists; bounded lengths keep per_thread_staged
    above the mean threshold, a handful of long lists (the check counts them) keeps the
    mean's kernel; the buffer-level kernel, given offsets nobody checked, decides by the
    mean alone. Every result equals awkward's."""
    from gpuexec.kernels.gpu.backend import GPUBackend

    be = GPUBackend()  # the table
    rng = np.random.default_rng(11)
    n = 200_000
    tail = np.where(rng.random(n) < 0.01, rng.integers(100, 2001, n), rng.poisson(3, n))
    # 10 % of the lists 100..2000 long: about 8 % of them long (above 4 x the mean of 108)
    many = np.where(rng.random(n // 4) < 0.1, rng.integers(100, 2001, n // 4),
                    rng.poisson(3, n // 4))
    bounded = rng.poisson(24, 420_000)  # about 10M float64: past per_thread_staged's 64 MB
    handful = rng.poisson(3, n)  # three long lists: counted, they are no long tail
    handful[rng.choice(n, 3, replace=False)] = 2000  # 1 % of the elements
    for counts, fname, by_mean, by_longest in ((tail, "argmax", "per_thread", "per_wave"),
                                                (many, "max", "per_wave", "long_tail"),
                                                (bounded, "sum", "per_wave_staged",
                                                 "per_thread_staged"),
                                                (handful, "argmax", "per_thread", "per_thread")):
        host = ak.unflatten(rng.normal(size=int(counts.sum())), counts)
        x = ak.to_backend(host, "cuda")
        with gk.counting() as s:
            got = getattr(gk, fname)(x, axis=1, backend=be)
        assert [k for k in s["kernels"] if k.startswith("gk_")] == [
            "gk_offsets_summary", f"gk_{fname}_float64_{by_longest}"], s["kernels"]
        want, got = getattr(ak, fname)(host, axis=1), ak.to_backend(got, "cpu")
        if fname == "sum":
            np.testing.assert_allclose(ak.to_numpy(got), ak.to_numpy(want), rtol=1e-12)
        else:
            assert_same(got, want)
        offsets = x.layout.offsets.data.copy()  # not checked: the mean decides
        with gk.counting() as s:
            be.kernel(f"reduce_{fname}", "float64")(offsets, x.layout.content.data)
        assert list(s["kernels"]) == [f"gk_{fname}_float64_{by_mean}"], s["kernels"]


@pytest.mark.parametrize("strategy", ["split", "fused"])
def test_table_picks_the_per_thread_staged_kernel_by_width_and_size(strategy):
    """As shipped (the H200 row), short lists of float64 run per_thread_staged once
    the content outgrows L2 (64 MB) and per_thread below; 4-byte values run per_thread
    one at any size; every choice gives awkward's result."""
    from gpuexec.kernels.gpu.backend import GPUBackend
    from gpuexec.kernels.gpu.plan import PlanRequest

    be = GPUBackend(plan=PlanRequest(strategy=strategy))
    if be.plan.per_thread_staged_from_bytes == 0:
        pytest.skip(f"the {be.device.arch} row has no per_thread_staged bound")
    rng = np.random.default_rng(5)
    for dtype, elements, kernel in (("float64", 9_000_000, "per_thread_staged"),
                                    ("float64", 1_000_000, "per_thread"),
                                    ("float32", 9_000_000, "per_thread")):
        counts = rng.poisson(5, elements // 5)
        host = ak.unflatten(rng.normal(size=int(counts.sum())).astype(dtype), counts)
        with gk.counting() as s:
            got = gk.max(ak.to_backend(host, "cuda"), axis=1, backend=be)
        launched = [k for k in s["kernels"] if k.startswith("gk_max_")]
        assert launched == [f"gk_max_{dtype}_{kernel}"], (dtype, elements, launched)
        assert ak.to_list(ak.to_backend(got, "cpu")) == ak.to_list(ak.max(host, axis=1))


def test_default_strategy_comes_from_the_table(gpu_backend_factory):
    from gpuexec.kernels.gpu.backend import GPUBackend
    from gpuexec.kernels.gpu.plan import plan_for
    from gpuexec.kernels.gpu.policy import arch_row

    be = GPUBackend()
    row = arch_row(be.device.arch)
    assert be.strategy == row.strategy
    assert be.device.wave == row.wave
    assert plan_for("gfx90a").strategy.name == "split"


# -- memory ------------------------------------------------------------------------------------
def test_absurd_allocation_raises_device_out_of_memory(gpu_backend_factory):
    from gpuexec.kernels.gpu import DeviceOutOfMemory

    be = gpu_backend_factory("fused")
    with pytest.raises(DeviceOutOfMemory) as info:
        be.alloc(1 << 50, np.float64, "gk_sum_float64_flat_fused")
    assert isinstance(info.value, MemoryError)
    assert "gk_sum_float64_flat_fused" in str(info.value) and info.value.nbytes == 8 << 50


@pytest.mark.parametrize("strategy", ["split", "fused"])
def test_out_of_memory_in_a_reduction_names_kernel_and_bytes(strategy, gpu_backend_factory):
    import cupy as cp

    from gpuexec.kernels.gpu import DeviceOutOfMemory

    be = gpu_backend_factory(strategy)
    n = 4_000_000
    offsets = cp.arange(n + 1, dtype=np.int64)
    content = cp.ones(n, dtype=np.float64)
    be.kernel("reduce_sum", "float64")(offsets[:11], content)  # modules loaded first
    pool = cp.cuda.MemoryPool()
    pool.set_limit(size=1 << 20)  # a device with 1 MiB left
    with cp.cuda.using_allocator(pool.malloc):
        with pytest.raises(DeviceOutOfMemory) as info:
            be.kernel("reduce_sum", "float64")(offsets, content)
    assert f"gk_sum_float64_flat_{strategy}" in str(info.value)
    assert info.value.nbytes == 8 * n


def test_failed_launch_names_the_kernel(gpu_backend_factory):
    import cupy as cp

    from gpuexec.kernels.gpu import GPUCallError
    from gpuexec.kernels.gpu.catalog import OPS_BY_CONTRACT

    be = gpu_backend_factory("fused")
    offsets = cp.arange(11, dtype=np.int64)
    out = cp.empty(10, dtype=np.int64)
    fn = be.functions(OPS_BY_CONTRACT["reduce_count"])["gk_count"]
    with pytest.raises(GPUCallError) as info:  # no device runs 2048 threads per block
        be._launch("gk_count", fn, 1, 2048, (offsets.data.ptr, 10, out.data.ptr))
    assert "gk_count" in str(info.value) and "block 2048" in str(info.value)
    assert info.value.code is not None


# -- host input, placement, call floor -----------------------------------------------------------
def test_host_array_with_cuda_backend_is_staged_and_stays_on_device(gpu_backend_factory):
    be = gpu_backend_factory("fused")
    x = make_case("float32", "listoffset", "long", 11)
    got = gk.max(x, axis=1, backend=be)
    assert ak.backend(got) == "cuda"
    assert_same(ak.to_backend(got, "cpu"), ak.max(x, axis=1))
    host = gk.argmin(x, axis=1, backend=be, to="host")
    assert ak.backend(host) == "cpu"
    assert_same(host, ak.argmin(x, axis=1))
    adopted = be.adopt(make_case("int16", "indexed_above", "small", 3))
    assert ak.backend(adopted) == "cuda"


def test_results_are_what_awkwards_constructors_make(gpu_backend_factory):
    """The common call's result on a device array is built without awkward's
    constructors (api/_results.py): it must be the object they make, on the device."""
    from gpuexec.kernels.api import _results

    assert _results.FAST
    be = gpu_backend_factory("fused")
    x = ak.to_backend(make_case("float64", "listoffset", "small", 7), "cuda")
    for fname, kwargs in [("sum", {}), ("argmax", {}), ("min", {"keepdims": True})]:
        got = getattr(gk, fname)(x, axis=1, backend=be, **kwargs)
        fields = dict(vars(got))
        want = ak.Array(fields["_layout"], behavior=fields["_behavior"],
                        attrs=fields["_attrs"])
        assert type(got) is type(want) and fields.keys() == vars(want).keys()
        node = got.layout
        while not isinstance(node, ak.contents.NumpyArray):
            node = node.content
        fresh = ak.contents.NumpyArray(node.data, backend=node.backend)
        assert vars(node).keys() == vars(fresh).keys() and node.backend is fresh.backend
        assert type(node.data) is type(fresh.data) and node.data.data.ptr == fresh.data.data.ptr
        assert ak.backend(got) == "cuda"
        host = ak.to_backend(x, "cpu")
        assert_same(ak.to_backend(got, "cpu"), getattr(ak, fname)(host, axis=1, **kwargs))


def test_call_floor_is_sane(gpu_backend_factory):
    import time

    import cupy as cp

    be = gpu_backend_factory("fused")
    x = ak.to_backend(ak.Array(np.random.default_rng(0).random((1000, 5)).tolist()), "cuda")
    for _ in range(20):
        gk.sum(x, axis=1, backend=be)
    cp.cuda.runtime.deviceSynchronize()
    times = []
    for _ in range(200):
        t0 = time.perf_counter()
        gk.sum(x, axis=1, backend=be)
        times.append(time.perf_counter() - t0)
    assert np.median(times) < 2e-3  # the benchmark reports the real floor


@pytest.mark.parametrize("strategy", ["split", "fused"])
def test_threads_launching_at_once_get_their_own_arguments(strategy, gpu_backend_factory):
    """Launch arguments are packed into per-thread slots that every launch of a thread
    reuses (bindings_cuda.launch): threads calling at once, each on its own arrays and
    reductions (so their argument counts and values differ), get their own results."""
    from concurrent.futures import ThreadPoolExecutor

    import cupy as cp

    be = gpu_backend_factory(strategy)
    cases = [(fname, make_case(dtype, "listoffset", kind, seed))
             for seed, (fname, dtype, kind) in enumerate(
                 [("sum", "int64", "long"), ("argmax", "int32", "small"),
                  ("max", "float32", "long"), ("count_nonzero", "int64", "small"),
                  ("min", "uint8", "long"), ("argmin", "float64", "small")])]
    device = [(fname, be.adopt(x)) for fname, x in cases]
    for fname, x in device:  # modules loaded before the threads start
        getattr(gk, fname)(x, axis=1, backend=be)
    cp.cuda.runtime.deviceSynchronize()

    def run(i):
        fname, x = device[i % len(device)]
        return [getattr(gk, fname)(x, axis=1, backend=be, to="host") for _ in range(30)]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(run, range(16)))
    for i, got in enumerate(results):  # every case exact: no float sum among them
        fname, x = cases[i % len(cases)]
        want = getattr(ak, fname)(x, axis=1)
        for g in got:
            assert_same(g, want)
