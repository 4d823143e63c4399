"""Compile units: which source, with which defines, each plan compiles, the extern "C"
kernels each defines and what their machine code promises (wave64, 128-bit loads, the
SASS load order); the runtime compiles them and the CI compile gates
(.ci/compile_gates.py) assert the promises for every unit ``compile_units(arch)`` lists."""

from __future__ import annotations

from dataclasses import dataclass

from gpuexec.kernels.gpu.catalog import (OPS, PER_LIST_KERNELS, REDUCE_SOURCE, STRATEGIES, Op,
                                         Strategy)
from gpuexec.kernels.gpu.families import FAMILIES, ITEMS, Family
from gpuexec.kernels.gpu.plan import Plan
from gpuexec.kernels.gpu.policy import arch_row


@dataclass
class CompileUnit:
    """One compilation of a source with defines, as the runtime and the CI gates do it."""

    source: str                         # file name under gpuexec/kernels/gpu/src
    defines: dict                       # name -> value (str or int)
    kernels: list                       # extern "C" names it defines
    promises: dict                      # kernel -> set of strings ("vector_load_128", "wave64")
    strategy: str = ""
    op: str = ""


def kernel_names(op: Op, strategy: Strategy) -> dict[str, list[str]]:
    """role -> extern "C" names of ``op`` under ``strategy`` (one per dtype)."""
    if not op.dtypes:
        return {"count": ["gk_count"]}
    roles: dict[str, list[str]] = {}
    for role in strategy.passes:
        if role == "partition":
            roles[role] = ["gk_partition"]
        else:
            roles[role] = [f"gk_{op.device}_{dt}_{role}" for dt in op.dtypes]
    if strategy.name == "naive":
        # the other per-list kernels the flattened strategies may pick (catalog.py)
        for role in PER_LIST_KERNELS[1:]:
            roles[role] = [f"gk_{op.device}_{dt}_{role}" for dt in op.dtypes]
    return roles


def unit_for(p: Plan, op: Op) -> CompileUnit:
    st = p.strategy
    cfg = p.launch_of(p.content_role, op.device)
    defines = {
        st.define: 1,
        op.define: 1,
        "GK_BLOCK": cfg.block,
        "GK_ITEM_BYTES": cfg.item_bytes,
        "GK_VEC_BYTES": st.vec_bytes,
        "GK_MIN_BLOCKS": cfg.min_blocks,
        "GK_PREFETCH_TILES": cfg.prefetch_tiles,
    }
    if st.name == "naive":  # the per-wave kernels' own bound and tile width
        wave = p.launch_of("per_wave", op.device)
        defines["GK_PER_WAVE_BLOCK"] = wave.block
        defines["GK_PER_WAVE_MIN_BLOCKS"] = wave.min_blocks
        defines["GK_PER_WAVE_ITEM_BYTES"] = wave.item_bytes
        defines["GK_PER_WAVE_LANE_FOLD"] = wave.lane_fold
        defines["GK_PER_WAVE_INTERLEAVE"] = wave.interleave
        defines["GK_PER_WAVE_SHORT_BATCH"] = wave.short_batch
        defines["GK_PER_WAVE_GROUP"] = wave.group
        defines["GK_PER_WAVE_STAGE"] = wave.stage_bytes  # per_wave_staged
        defines["GK_PER_WAVE_STAGE_MIN"] = wave.stage_min
        defines["GK_PER_WAVE_STAGE_MAX"] = wave.stage_max
        defines["GK_STREAM_LOAD"] = wave.stream_load
        # long_tail: the per-wave shape, its own block and bound
        tail = p.launch_of("long_tail", op.device)
        defines["GK_LONG_TAIL_BLOCK"] = tail.block
        defines["GK_LONG_TAIL_MIN_BLOCKS"] = tail.min_blocks
    promises: dict[str, set] = {}
    kernels: list[str] = []
    for role, names in kernel_names(op, st).items():
        for name in names:
            kernels.append(name)
            pr = set()
            if p.wave == 64:
                pr.add("wave64")
            flat_pass = st.flatten and role in ("flat_split", "flat_fused")
            # the staged and per-wave kernels read content with 128-bit loads
            if (st.vec_bytes == 16 and flat_pass) or role in PER_LIST_KERNELS[1:]:
                pr.add("vector_load_128")
            # and the streaming ones issue a tile's loads before its first fold, checked
            # in nvcc's SASS (docs/gpu-reduction.md#load-order)
            if role in ("per_wave", "long_tail") and p.vendor == "cuda":
                pr.add("tile_loads_first")
            promises[name] = pr
    return CompileUnit(REDUCE_SOURCE, defines, kernels, promises, st.name, op.contract)


def family_unit(plan: Plan, family: Family) -> CompileUnit:
    """The compile unit of ``family`` under ``plan``."""
    st = plan.strategy
    cfg = plan.launch_of(family.name)
    defines = {
        st.define: 1,
        family.define: 1,
        "GK_BLOCK": cfg.block,
        "GK_ITEMS": ITEMS,
        "GK_VEC_BYTES": st.vec_bytes,
        "GK_MIN_BLOCKS": cfg.min_blocks,
    }
    kernels = list(family.kernels[st.name])
    promises = {}
    for k in kernels:
        pr = set()
        if plan.wave == 64:
            pr.add("wave64")
        if st.vec_bytes == 16 and k in family.vector_loads:
            pr.add("vector_load_128")
        promises[k] = pr
    return CompileUnit(family.source, defines, kernels, promises, st.name, family.name)


def compile_units(arch: str) -> list[CompileUnit]:
    """Every compile unit the runtime may build for ``arch``: each reduction, then each
    kernel family (``families.py``), under each strategy (the default one and the ones
    tests and benchmarks force), with the launch configuration of the policy row."""
    row = arch_row(arch)
    plans = [Plan(arch, row.vendor, row.wave, STRATEGIES[name], dict(row.launch))
             for name in STRATEGIES]
    units = [unit_for(p, op) for p in plans for op in OPS]
    return units + [family_unit(p, fam) for p in plans for fam in FAMILIES]