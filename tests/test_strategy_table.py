"""The GPU reduction policy without a GPU: defaults per architecture, plan requests, the
short-list rule that maps one list per thread below a mean list length, the policy's
choices pinned over a grid of inputs, and the properties every row must have."""

from __future__ import annotations

import math

import pytest

from gpuexec.kernels.gpu import catalog as C
from gpuexec.kernels.gpu import plan as P
from gpuexec.kernels.gpu import policy, units


def test_defaults_per_vendor():
    assert P.plan_for("gfx90a").strategy.name == "split" and P.plan_for("gfx90a").wave == 64
    assert P.plan_for("gfx942").strategy.name == "split"
    assert P.plan_for("sm_90").strategy.name == "fused" and P.plan_for("sm_90").wave == 32
    with pytest.raises(LookupError):
        P.plan_for("vega-unknown")


def test_short_list_rule_uses_the_mean_list_length():
    p = P.plan_for("sm_90")
    arg, other = p.short_lists["argmax"], p.short_lists["*"]
    assert p.per_list("argmax", 1000, int(1000 * arg) - 1)
    assert not p.per_list("argmax", 1000, int(1000 * arg))
    assert p.per_list("sum", 1000, int(1000 * other) - 1)
    assert not p.per_list("sum", 1000, int(1000 * other))
    assert not p.per_list("sum", 0, 0)  # no lists: nothing to map


def test_short_list_rule_overrides():
    assert not P.plan_for("sm_90", short_lists=0).per_list("argmax", 1000, 10)
    assert P.plan_for("sm_90", short_lists=100).per_list("sum", 10, 999)
    assert not P.plan_for("sm_90", strategy="naive").per_list("sum", 1000, 10)  # already per list
    assert not P.plan_for("sm_90", P.PlanRequest(short_lists=0)).per_list("argmax", 1000, 10)


def test_per_list_kernel_choice():
    p = P.plan_for("sm_90")
    row = policy.arch_row("sm_90").per_list_kernels
    assert p.per_list_kernel("sum") == row.get("sum", row["*"])
    assert p.per_list_kernel("min") == row.get("min", row["*"])
    assert P.plan_for("gfx90a").per_list_kernel("sum") == "per_thread"  # not measured on AMD: the plain port
    staged = P.plan_for("sm_90", per_list_kernel="per_thread_staged")
    assert {staged.per_list_kernel(op) for op in ("sum", "argmax")} == {"per_thread_staged"}
    assert P.plan_for("gfx90a", per_list_kernel="per_thread_staged").per_list_kernel("min") == "per_thread_staged"
    assert P.plan_for("gfx90a", per_list_kernel="per_thread").per_list_kernel("min") == "per_thread"
    with pytest.raises(ValueError, match="per-list kernel"):
        P.plan_for("sm_90", per_list_kernel="warp")
    # "op:dtype" entries before the op's own and the row's "*"
    assert p.per_list_kernel("sum", "float64") == row.get("sum:float64", row["*"])
    assert p.per_list_kernel("sum", "float32") == row.get("sum:float32", row["*"])
    # every per-list kernel is compiled (and gated) in the naive unit
    naive = units.kernel_names(C.OPS_BY_CONTRACT["reduce_sum"], C.STRATEGIES["naive"])
    assert set(naive) == set(C.PER_LIST_KERNELS)


def test_per_thread_staged_kernel_by_width_and_size():
    """Short lists: the H200 row stages float64 sums/products/extrema and int64 extrema in
    shared memory (per_thread_staged) once the content outgrows L2; smaller content, int64
    sums and 4-byte values run the per_thread kernel (device time, gpu_device_time_widths)."""
    p = P.plan_for("sm_90")
    big, small = (2_000_000, 10_000_000), (200_000, 1_000_000)  # lists, elements: mean 5
    for op in ("sum", "prod", "min", "max"):
        assert p.per_list_role(op, *big, "float64") == "per_thread_staged"
        assert p.per_list_role(op, *small, "float64") == "per_thread"
        assert p.per_list_role(op, *big, "float32") == "per_thread"
        assert p.per_list_role(op, *big, "int32") == "per_thread"
    assert p.per_list_role("max", *big, "int64") == "per_thread_staged"
    assert p.per_list_role("sum", *big, "int64") == "per_thread"
    assert p.per_list_role("argmax", *big, "float64") == "per_thread"
    # the bound is in bytes: 8M float64 elements are 64 MB
    assert p.per_list_role("sum", 1_600_000, 8_000_000, "float64") == "per_thread_staged"
    assert p.per_list_role("sum", 1_600_000, 7_999_999, "float64") == "per_thread"
    rule = p.per_list_rule("sum", "float64")
    assert (rule.short, rule.short_from) == ("per_thread_staged", 64_000_000)
    rule = p.per_list_rule("sum", "float32")
    assert (rule.short, rule.short_from) == ("per_thread", 0)
    # a per-list kernel the caller names runs on every input (no bound)
    for forced in (P.plan_for("sm_90", per_list_kernel="per_thread_staged"),
                   P.plan_for("sm_90", strategy="split", per_list_kernel="per_thread_staged")):
        assert forced.per_list_role("sum", *small, "float32") == "per_thread_staged"
    request = P.PlanRequest(per_list_kernel="per_thread_staged")
    assert P.plan_for("sm_90", request).per_list_role("min", *small, "int8") == "per_thread_staged"
    # not measured on AMD: the plain port everywhere
    assert P.plan_for("gfx90a", per_list_kernel=None).per_thread_staged_from_bytes == 0


def test_long_list_kernel_choice():
    """Above the short-list threshold the row's long-list kernel decides: the strategy's
    flattened passes (``flat``, per_list_role None) or the per_wave kernel."""
    flat = P.plan_for("sm_90", long_list_kernel="flat")
    per_wave = P.plan_for("sm_90", long_list_kernel="per_wave")
    below = int(1000 * flat.short_lists["*"]) - 1
    above = int(1000 * flat.short_lists["*"]) * 10
    assert flat.per_list_role("sum", 1000, below) == flat.per_list_kernel("sum")
    assert flat.per_list_role("sum", 1000, above) is None
    assert per_wave.per_list_role("sum", 1000, below) == per_wave.per_list_kernel("sum")
    assert per_wave.per_list_role("sum", 1000, above) == "per_wave"
    assert per_wave.per_list_role("sum", 0, 0) is None
    # the naive strategy is per list already; split follows the same rule as fused
    assert P.plan_for("sm_90", strategy="naive", long_list_kernel="per_wave").per_list_role("sum", 10, 10**6) is None
    assert P.plan_for("sm_90", strategy="split", long_list_kernel="per_wave").per_list_role("sum", 10, 10**6) == "per_wave"
    # the naive unit is loaded ahead where some input may use it
    assert per_wave.uses_per_list_unit("argmax")
    assert P.plan_for("sm_90", short_lists=0, long_list_kernel="per_wave").uses_per_list_unit("sum")
    assert not P.plan_for("sm_90", short_lists=0, long_list_kernel="flat").uses_per_list_unit("sum")
    assert per_wave.per_list_plan().strategy.name == "naive"
    request = P.PlanRequest(long_list_kernel="per_wave")
    assert P.plan_for("gfx90a", request).long_list_kernel("min") == "per_wave"
    assert P.plan_for("gfx90a", long_list_kernel="flat").long_list_kernel("min") == "flat"
    with pytest.raises(ValueError, match="long-list kernel"):
        P.plan_for("sm_90", long_list_kernel="per_thread_staged")


def test_per_wave_kernel_gets_its_own_launch_bound():
    p = P.plan_for("sm_90").per_list_plan()
    unit = units.unit_for(p, C.OPS_BY_CONTRACT["reduce_min"])
    assert unit.defines["GK_PER_WAVE_MIN_BLOCKS"] == p.launch_of("per_wave", "min").min_blocks
    # and its own block size, apart from the unit's (per_thread, per_thread_staged)
    assert unit.defines["GK_PER_WAVE_BLOCK"] == p.launch_of("per_wave", "min").block
    assert unit.defines["GK_BLOCK"] == p.launch_of("per_thread", "min").block
    assert P.plan_for("sm_90", launch="per_wave:block=64").per_list_plan().launch_of("per_wave").block == 64
    assert "gk_min_float64_per_wave" in unit.kernels
    assert "vector_load_128" in unit.promises["gk_min_float64_per_wave"]
    # on NVIDIA the SASS gate also holds it to issuing a tile's loads before its folds (the
    # per_wave_staged's copy loop stores each load to shared memory: not promised; CDNA rows
    # do not run the per_wave kernel and have no SASS)
    assert "tile_loads_first" in unit.promises["gk_min_float64_per_wave"]
    assert "tile_loads_first" not in unit.promises["gk_min_float64_per_wave_staged"]
    # the long_tail kernel streams with the same loop: same promises, its own block and bound
    assert {"vector_load_128", "tile_loads_first"} <= unit.promises["gk_min_float64_long_tail"]
    for u, op in ((unit, "min"), (units.unit_for(p, C.OPS_BY_CONTRACT["reduce_argmax"]), "argmax")):
        assert u.defines["GK_LONG_TAIL_BLOCK"] == p.launch_of("long_tail", op).block
        assert u.defines["GK_LONG_TAIL_MIN_BLOCKS"] == p.launch_of("long_tail", op).min_blocks
    assert p.launch_of("long_tail", "argmax") != p.launch_of("long_tail", "min")
    cdna = units.unit_for(P.plan_for("gfx90a").per_list_plan(), C.OPS_BY_CONTRACT["reduce_min"])
    assert "tile_loads_first" not in cdna.promises["gk_min_float64_per_wave"]
    # the lanes' read layout and tile width are compiled in, per op, and overridable
    arg = units.unit_for(p, C.OPS_BY_CONTRACT["reduce_argmax"])
    for u, op in ((unit, "min"), (arg, "argmax")):
        assert u.defines["GK_PER_WAVE_INTERLEAVE"] == p.launch_of("per_wave", op).interleave == 1
        assert u.defines["GK_PER_WAVE_ITEM_BYTES"] == p.launch_of("per_wave", op).item_bytes
        assert u.defines["GK_PER_WAVE_SHORT_BATCH"] == p.launch_of("per_wave", op).short_batch == 8
        assert u.defines["GK_PER_WAVE_GROUP"] == p.launch_of("per_wave", op).group == 8
    stretch = P.plan_for("sm_90", launch="per_wave:interleave=0").per_list_plan()
    assert units.unit_for(stretch, C.OPS_BY_CONTRACT["reduce_min"]).defines["GK_PER_WAVE_INTERLEAVE"] == 0
    with pytest.raises(ValueError, match="interleave"):
        C.Launch(interleave=2)
    with pytest.raises(ValueError, match="short_batch"):
        C.Launch(short_batch=3)
    whole = P.plan_for("sm_90", launch="per_wave:group=1").per_list_plan()
    assert units.unit_for(whole, C.OPS_BY_CONTRACT["reduce_min"]).defines["GK_PER_WAVE_GROUP"] == 1
    with pytest.raises(ValueError, match="group"):
        C.Launch(group=3)


def test_launch_overrides_and_block_rule():
    assert P.plan_for("sm_90", launch="flat_fused:block=512").launch_of("flat_fused").block == 512
    assert P.plan_for("sm_90", launch={"flat_fused": {"block": 512}}).launch_of("flat_fused").block == 512
    with pytest.raises(ValueError, match="unknown field"):
        P.plan_for("sm_90", launch="flat_fused:blocks=512")
    with pytest.raises(ValueError, match="multiple of 64"):
        C.Launch(block=96)


def test_family_per_list_window():
    """The filter runs its per-list kernels on many lists of about five (measured on the
    H200); shorter, longer or fewer lists keep the strategy's flattened passes."""
    p = P.plan_for("sm_90")
    assert p.family_runs_per_list("filter", 20_000_000, 100_000_000)
    assert not p.family_runs_per_list("filter", 200_000, 1_000_000)  # too few lists
    assert p.family_runs_per_list("filter", 400_000, 2_000_000)
    assert not p.family_runs_per_list("filter", 20_000_000, 40_000_000)  # mean 2
    assert not p.family_runs_per_list("filter", 20_000_000, 200_000_000)  # mean 10
    assert not p.family_runs_per_list("filter", 0, 0)
    assert not p.family_runs_per_list("local_index", 20_000_000, 100_000_000)
    assert not p.family_runs_per_list("gather", 400, 2000)
    assert not P.plan_for("sm_90", strategy="naive").family_runs_per_list("filter", 20_000_000,
                                                                       100_000_000)
    assert not P.plan_for("gfx90a").family_runs_per_list("filter", 20_000_000, 100_000_000)
    # "always flattened" clears the windows; an argument replaces them
    assert not P.plan_for("sm_90", short_lists=0).family_runs_per_list("filter", 20_000_000,
                                                                    100_000_000)
    everywhere = {"filter": C.ListWindow(0, float("inf"))}
    assert P.plan_for("sm_90", family_per_list=everywhere).family_runs_per_list("filter", 3, 1)
    window = C.ListWindow(4, 8, 10)
    assert window.holds(10, 40) and not window.holds(10, 80) and not window.holds(9, 45)
    bounded = C.ListWindow(0, 16, lists_below=100, elements_below=500, strategies=("split",))
    assert bounded.holds(99, 400, "split") and not bounded.holds(100, 400, "split")
    assert not bounded.holds(40, 500, "split") and not bounded.holds(99, 400, "fused")


def test_small_inputs_run_the_per_list_kernels_where_the_h200_measured_them_faster():
    """Few or mid-sized inputs of short lists: sort under both flattened strategies,
    local_index below a size, the filter and combinations under split (its partition
    pass) run one thread per list; more lists, or long ones, keep the flattened passes
    (the sm_ row's windows, from gpu_family_sweep.json)."""
    fused, split = P.plan_for("sm_90", strategy="fused"), P.plan_for("sm_90", strategy="split")
    small, mid = (24_400, 122_000), (400_000, 2_000_000)
    many, long_lists = (800_000, 4_000_000), (9_285, 1_000_000)  # mean length 5, 108
    for p in (fused, split):
        assert p.family_runs_per_list("sort", *small) and p.family_runs_per_list("sort", *mid)
        assert not p.family_runs_per_list("sort", *many)
        assert not p.family_runs_per_list("sort", *long_lists)
        # local_index by size alone: per list below 6M elements, split's below 12M
        assert p.family_runs_per_list("local_index", *many)
        assert p.family_runs_per_list("local_index", *long_lists)
        assert not p.family_runs_per_list("local_index", 3_200_000, 16_000_000)
    assert split.family_runs_per_list("local_index", 1_600_000, 8_000_000)
    assert not fused.family_runs_per_list("local_index", 1_600_000, 8_000_000)
    for family in ("filter", "combinations"):
        assert split.family_runs_per_list(family, *small)
        assert not fused.family_runs_per_list(family, *small)
    # split's flattened filter lost to the per-list one at every count of lists of about
    # five (device time); on shorter or longer lists it keeps its passes above 2**16 lists
    assert split.family_runs_per_list("filter", 200_000, 1_000_000)
    assert not split.family_runs_per_list("filter", 200_000, 400_000)
    assert not split.family_runs_per_list("filter", 200_000, 3_000_000)
    # carry: one element per thread below 1.6M outputs, its 128-bit runs above
    for p in (fused, split):
        assert p.family_runs_per_list("carry", 1_000_000, 1_000_000)
        assert not p.family_runs_per_list("carry", 2_000_000, 2_000_000)
    assert not P.plan_for("sm_90", short_lists=0).family_runs_per_list("carry", 1000, 1000)
    # combinations' mean is of tuples: pairs of Poisson(5) 12.5 per list, triplets 20.8
    assert split.family_runs_per_list("combinations", 200_000, 2_500_000)
    assert not split.family_runs_per_list("combinations", 200_000, 4_160_000)
    assert split.family_runs_per_list("combinations", 100_000, 2_080_000)
    assert not split.family_runs_per_list("combinations", *many)
    assert not P.plan_for("sm_90", strategy="naive").family_runs_per_list("sort", *small)
    assert not P.plan_for("sm_90", short_lists=0).family_runs_per_list("sort", *small)


def test_per_wave_staged_kernel_band():
    """On the mean lengths of the row's ``per_wave_staged_lists`` band the per_wave_staged
    kernel runs, around it the per_wave one; ops whose long lists run the flattened passes
    never stage; ``per_wave_staged_lists`` and per-(op, dtype) ``short_lists`` overrides."""
    p = P.plan_for("sm_90")
    lo, hi = p.per_wave_staged_lists["*"]
    n = 10_000
    assert p.per_list_role("sum", n, int(n * lo), "float64") == "per_wave_staged"
    assert p.per_list_role("sum", n, int(n * hi) - 1, "float64") == "per_wave_staged"
    assert p.per_list_role("sum", n, int(n * hi), "float64") == "per_wave"
    assert p.short_list_threshold("sum") < lo
    assert p.per_list_role("sum", n, int(n * lo) - 1, "float64") == "per_wave"
    assert p.per_list_role("argmax", n, int(n * lo) - 1, "float64") == "per_thread"
    assert p.per_list_role("argmax", n, int(n * lo), "int64") == "per_wave_staged"
    assert p.per_list_role("any", n, n * 20, "bool") is None  # flattened long lists
    assert P.plan_for("sm_90", per_wave_staged_lists=()).per_list_role("sum", n, n * 20) == "per_wave"
    forced = P.plan_for("sm_90", per_wave_staged_lists=(0, math.inf))
    assert forced.per_list_role("sum", n, n * 200) == "per_wave_staged"
    assert forced.uses_per_list_unit("sum")
    assert P.plan_for("gfx90a").per_wave_staged_lists == {}  # not measured on AMD
    q = P.plan_for("sm_90", short_lists={"sum:int64": 12, "*": 8})
    assert q.per_list_role("sum", n, n * 10, "int64") == "per_thread"
    assert q.per_list_role("sum", n, n * 10, "int32") == "per_wave"
    assert q.family_per_list  # a table of thresholds keeps the families' windows


def test_the_longest_list_moves_the_short_list_rule():
    """Where the longest list is known, the per_thread_staged kernel's threshold moves up when no list
    is far above the mean, and a long tail sends every mean length to the long-list
    kernel (no list per thread, no staging), or to the row's kernel for long tails (the
    long_tail one) where the offsets check counted enough long lists; unknown, the mean
    decides as before."""
    p = P.plan_for("sm_90")
    n = 4_000_000  # float64 content from 20M elements: past the per_thread_staged kernel's 64 MB
    rule = p.per_list_rule("sum", "float64")
    assert rule.bounded > rule.below and rule.short == "per_thread_staged"
    mean = 24
    assert p.per_list_role("sum", n, mean * n, "float64") == "per_wave_staged"  # the mean alone
    assert p.per_list_role("sum", n, mean * n, "float64", longest=60) == "per_thread_staged"
    assert p.per_list_role("sum", n, mean * n, "float64", longest=5000) == "per_wave"
    # below the mean threshold: one thread per list unless a long tail
    assert p.per_list_role("argmax", n, 13 * n, "float64") == "per_thread"
    assert p.per_list_role("argmax", n, 13 * n, "float64", longest=40) == "per_thread"
    assert p.per_list_role("argmax", n, 13 * n, "float64", longest=2000) == "per_wave"
    assert p.per_list_role("sum", n, 5 * n, "float64", longest=64) == "per_thread_staged"  # the floor
    assert p.per_list_role("sum", n, 5 * n, "float64", longest=65) == "per_wave"
    # per_thread short kernels (int64 sum; small content) keep the mean threshold
    assert p.per_list_role("sum", n, 12 * n, "int64", longest=30) == "per_wave"
    assert p.per_list_role("sum", 1000, 24_000, "float64", longest=30) == "per_wave_staged"
    # an override of the thresholds holds for every kernel
    assert P.plan_for("sm_90", short_lists=8).per_list_role("sum", n, mean * n, "float64",
                                                        longest=60) == "per_wave_staged"
    # long lists counted: a few, holding a small share of the elements, are no long tail;
    # the per_thread_staged kernel bears a larger share than one thread per list from global memory
    few = int(p.tail[2] * 13 * n / 2000)
    assert p.per_list_role("argmax", n, 13 * n, "float64", longest=2000, n_long=few) == "per_thread"
    assert p.per_list_role("argmax", n, 13 * n, "float64", longest=2000,
                           n_long=few + 1) == "per_wave"
    assert p.tail[3] > p.tail[2]
    assert p.per_list_role("max", n, 13 * n, "float64", longest=2000, n_long=few + 1) == "per_thread_staged"
    few_staged = int(p.tail[3] * 13 * n / 2000)
    assert p.per_list_role("max", n, 13 * n, "float64", longest=2000,
                           n_long=few_staged + 1) == "per_wave"
    assert p.per_list_role("sum", n, mean * n, "float64", longest=5000, n_long=3) == "per_thread_staged"
    assert P.plan_for("sm_90", few_long=0).per_list_role("sum", n, mean * n, "float64",
                                                     longest=5000, n_long=3) == "per_wave"
    # many long lists: a block's waves share them (the long_tail kernel), from the row's share
    many = math.ceil(p.tail_from * n)
    assert p.tail_from > 0
    for fname, total in (("argmax", 13 * n), ("sum", mean * n), ("max", 13 * n)):
        assert p.per_list_role(fname, n, total, "float64", longest=2000,
                               n_long=many) == "long_tail"
        assert p.per_list_role(fname, n, total, "float64", longest=2000,
                               n_long=many - 1) == "per_wave"
    # the kernel of a long tail: a table entry or one for all (on every tail), never an
    # unknown one
    assert P.plan_for("sm_90", tail_lists="per_wave").per_list_role(
        "sum", n, mean * n, "float64", longest=5000, n_long=many) == "per_wave"
    assert P.plan_for("sm_90", tail_lists={"argmax": "long_tail"}).per_list_role(
        "argmax", n, 13 * n, "float64", longest=2000) == "long_tail"
    # a streaming kernel named by the caller holds for long tails too; a per-list one not
    for forced, want in (("per_wave", "per_wave"), ("long_tail", "long_tail"), ("per_thread_staged", "per_wave")):
        assert P.plan_for("sm_90", per_list_kernel=forced).per_list_role(
            "argmax", n, 13 * n, "float64", longest=2000) == want
    with pytest.raises(ValueError, match="long-tail kernel"):
        P.plan_for("sm_90", tail_lists="per_wave_staged")


# -- the policy pinned, and the properties of every row ----------------------------------
def _current_pin():
    import policy_pin

    from gpuexec.kernels.gpu.families import FAMILIES

    return policy_pin.pin(lambda arch, **kw: P.plan_for(arch, **kw),
                          [(op.device, op.dtypes) for op in C.OPS if op.dtypes],
                          [f.name for f in FAMILIES], units.compile_units)


def test_policy_choices_and_compile_units_match_the_pin():
    """For a grid of list counts, mean and longest lengths and long-list shares, every
    architecture, forced plan, op and dtype picks the kernel it is pinned to, every family
    window holds where pinned, and every compile unit keeps its defines, kernels and
    promises (tests/policy_pin.py; regenerated only where a policy change is meant)."""
    import json

    import policy_pin

    with open(policy_pin.PIN_PATH) as f:
        pinned = json.load(f)
    current = _current_pin()
    for part in ("strategy", "units"):
        assert current[part] == pinned[part], part
    for part in ("reduce", "families"):
        got = {k: current[part]["records"][i] for k, i in current[part]["by_key"].items()}
        want = {k: pinned[part]["records"][i] for k, i in pinned[part]["by_key"].items()}
        assert got.keys() == want.keys(), part
        assert [k for k in want if got[k] != want[k]] == [], part


def _op_keys_valid(table: dict) -> list:
    """Keys of an op table that name no op (or no dtype of it)."""
    ops = {op.device: op.dtypes for op in C.OPS}
    bad = []
    for key in table:
        op, _, dtype = key.partition(":")
        if key != "*" and (op not in ops or (dtype and dtype not in ops[op])):
            bad.append(key)
    return bad


@pytest.mark.parametrize("row", policy.ARCHES, ids=lambda r: r.pattern)
def test_every_policy_row_is_valid(row):
    from gpuexec.kernels.gpu.families import BY_NAME

    assert row.vendor in ("cuda", "hip") and row.wave in (32, 64)
    assert row.strategy in C.STRATEGIES
    roles = {r for st in C.STRATEGIES.values() for r in st.passes} | set(C.PER_LIST_KERNELS)
    for key, launch in row.launch.items():
        role, _, op = key.partition(":")
        assert isinstance(launch, C.Launch) and (role in roles or role in BY_NAME), key
        assert not op or not _op_keys_valid({op: None}), key
    for table, known in ((row.per_list_kernels, C.PER_LIST_KERNELS),
                         (row.long_list_kernels, C.LONG_LIST_KERNELS),
                         (row.tail_lists, C.TAIL_KERNELS)):
        assert set(table.values()) <= set(known) and _op_keys_valid(table) == []
    for table in (row.short_lists, row.per_wave_staged_lists, row.per_thread_staged_lists):
        assert _op_keys_valid(table) == []
    assert all(0 <= lo <= hi for lo, hi in row.per_wave_staged_lists.values())
    assert all(v >= 0 for v in (*row.short_lists.values(), *row.per_thread_staged_lists.values()))
    for family, windows in row.family_per_list.items():
        assert family in BY_NAME
        for w in windows if isinstance(windows, tuple) else (windows,):
            assert isinstance(w, C.ListWindow) and w.mean_from <= w.mean_below
            assert set(w.strategies) <= {n for n, st in C.STRATEGIES.items() if st.flatten}
    assert 0 <= row.tail_from <= 1 and row.tail[2] <= row.tail[3]


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx1100", "sm_90"])
def test_every_kernel_the_policy_names_is_compiled(arch):
    """Each per-list kernel a plan may pick, and each pass of its strategy, is a kernel of
    a compile unit of ``compile_units(arch)`` (so the CI gates check it)."""
    compiled = {k for u in units.compile_units(arch) for k in u.kernels}
    p = P.plan_for(arch)
    for op in C.OPS:
        for dt in op.dtypes:
            rule = p.per_list_rule(op.device, dt)
            named = {rule.short, "per_thread", *p.strategy.passes}
            named |= {k for k in (rule.long, rule.tail) if k}
            named |= {"per_wave_staged"} if rule.staged_below > rule.staged_from else set()
            for role in named:
                name = "gk_partition" if role == "partition" else f"gk_{op.device}_{dt}_{role}"
                assert name in compiled, (arch, name)


@pytest.mark.parametrize("arch", ["gfx90a", "sm_90"])
def test_lists_leave_the_per_thread_kernels_once_as_they_grow(arch):
    """For a fixed list count, as the mean length grows (or, at a fixed mean, the longest
    list), a reduction leaves the one-list-per-thread kernels (per_thread, per_thread_staged) at most once
    and never comes back."""
    p = P.plan_for(arch)
    per_thread = {"per_thread", "per_thread_staged"}
    means = [0.5 * 1.25 ** k for k in range(40)]
    for op in C.OPS:
        for dt in op.dtypes:
            choose = p.per_list_chooser(op.device, dt)
            size = 8 if dt in ("float64", "int64") else 4
            for n in (1000, 4_000_000):
                for longest in (None, 64, 5000):
                    picks = [choose(n, int(n * m), int(n * m) * size, longest) in per_thread
                             for m in means if longest is None or longest >= m]
                    assert picks == sorted(picks, reverse=True), (op.device, dt, n, longest)
                picks = [choose(n, 12 * n, 12 * n * size, longest) in per_thread
                         for longest in (12, 24, 64, 65, 200, 2000, 20_000)]
                assert picks == sorted(picks, reverse=True), (op.device, dt, n)


def test_runtime_ships_every_header_the_sources_include():
    """NVRTC/hiprtc get the headers by name (runtime.HEADERS, hashed into the module cache
    key): every header a kernel source includes is among them, and each one exists."""
    import glob
    import os
    import re

    from gpuexec.kernels.gpu import runtime

    included = set()
    for path in glob.glob(os.path.join(C.SRC_DIR, "*.cu*")):
        with open(path) as f:
            included |= set(re.findall(r'^\s*#include "([^"]+)"', f.read(), re.M))
    assert included <= set(runtime.HEADERS), included - set(runtime.HEADERS)
    assert all(os.path.isfile(os.path.join(C.SRC_DIR, h)) for h in runtime.HEADERS)
