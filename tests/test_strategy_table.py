"""The vendor strategy table without a GPU: defaults per architecture, overrides, and
the short-list rule that maps one list per thread below a mean list length."""

from __future__ import annotations

import pytest

from gpuexec.kernels.gpu import strategies as S


def test_defaults_per_vendor():
    assert S.plan("gfx90a").strategy.name == "split" and S.plan("gfx90a").wave == 64
    assert S.plan("gfx942").strategy.name == "split"
    assert S.plan("sm_90").strategy.name == "fused" and S.plan("sm_90").wave == 32
    with pytest.raises(LookupError):
        S.plan("vega-unknown")


def test_short_list_rule_uses_the_mean_list_length():
    p = S.plan("sm_90")
    arg, other = p.short_lists["argmax"], p.short_lists["*"]
    assert p.per_list("argmax", 1000, int(1000 * arg) - 1)
    assert not p.per_list("argmax", 1000, int(1000 * arg))
    assert p.per_list("sum", 1000, int(1000 * other) - 1)
    assert not p.per_list("sum", 1000, int(1000 * other))
    assert not p.per_list("sum", 0, 0)  # no lists: nothing to map


def test_short_list_rule_overrides(monkeypatch):
    assert not S.plan("sm_90", short_lists=0).per_list("argmax", 1000, 10)
    assert S.plan("sm_90", short_lists=100).per_list("sum", 10, 999)
    assert not S.plan("sm_90", "naive").per_list("sum", 1000, 10)  # already per list
    monkeypatch.setenv("GPUEXEC_GPU_SHORT_LISTS", "0")
    assert not S.plan("sm_90").per_list("argmax", 1000, 10)


def test_per_list_kernel_choice(monkeypatch):
    p = S.plan("sm_90")
    row = S.arch_row("sm_90").per_list_kernels
    assert p.per_list_kernel("sum") == row.get("sum", row["*"])
    assert p.per_list_kernel("min") == row.get("min", row["*"])
    assert S.plan("gfx90a").per_list_kernel("sum") == "naive"  # not measured on AMD: the plain port
    tiled = S.plan("sm_90", per_list_kernel="tiled")
    assert {tiled.per_list_kernel(op) for op in ("sum", "argmax")} == {"tiled"}
    monkeypatch.setenv("GPUEXEC_GPU_PER_LIST_KERNEL", "tiled")
    assert S.plan("gfx90a").per_list_kernel("min") == "tiled"
    # the argument before the environment
    assert S.plan("gfx90a", per_list_kernel="naive").per_list_kernel("min") == "naive"
    with pytest.raises(ValueError, match="per-list kernel"):
        S.plan("sm_90", per_list_kernel="warp")
    # every per-list kernel is compiled (and gated) in the naive unit
    naive = S.kernel_names(S.OPS_BY_CONTRACT["reduce_sum"], S.STRATEGIES["naive"])
    assert set(naive) == set(S.PER_LIST_KERNELS)


def test_launch_overrides_and_block_rule(monkeypatch):
    monkeypatch.setenv("GPUEXEC_GPU_LAUNCH", "fused:block=512")
    assert S.plan("sm_90").launch_of("fused").block == 512
    with pytest.raises(ValueError, match="multiple of 64"):
        S.Launch(block=96)
