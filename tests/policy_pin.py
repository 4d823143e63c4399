"""The GPU reduction policy's choices over a grid of inputs, as one compact record per
(architecture, plan, op, dtype): the pin that tests/test_strategy_table.py holds the
policy to (tests/data/gpu_policy_pin.json). Regenerate with
``python tests/policy_pin.py`` only where a policy change is meant."""

from __future__ import annotations

import json
import math
import os

ARCHES = ("gfx90a", "gfx942", "gfx1100", "sm_90")
DTYPES = ("float64", "int64", "float32", "int8", "bool")
N_LISTS = (1, 1000, 4_000_000)
MEANS = (0.5, 1, 2, 3, 5, 7.9, 8, 12, 15.9, 16, 24, 32, 47.9, 48, 63.9, 64, 80, 100, 300, 2000)
LONGEST = (None, "1.5x", 64, 65, 2000, 5000)
N_LONG = (None, 0, 0.001, 0.01, 0.03, 0.2)
LETTER = {None: "-", "per_thread": "t", "per_thread_staged": "T", "per_wave": "w",
          "per_wave_staged": "W", "long_tail": "l"}
FAMILY_SIZES = tuple((n, int(n * m)) for n in (1000, 24_400, 65_535, 65_536, 200_000,
                                               400_000, 800_000, 1_600_000, 4_000_000,
                                               20_000_000)
                     for m in (0.5, 2, 4, 5, 8, 12.5, 16, 20.8, 64, 108))

# the plans forced by tests and benchmarks (keyword arguments of the plan request)
FORCED = {
    "default": {},
    "split": {"strategy": "split"},
    "fused": {"strategy": "fused"},
    "naive": {"strategy": "naive"},
    "split-flat": {"strategy": "split", "short_lists": 0, "long_list_kernel": "flat"},
    "fused-flat": {"strategy": "fused", "short_lists": 0, "long_list_kernel": "flat"},
    **{f"per-list-{kernel.replace('_', '-')}": {"strategy": "fused", "short_lists": math.inf,
                                                 "per_list_kernel": kernel}
       for kernel in ("per_thread", "per_thread_staged", "per_wave", "per_wave_staged",
                      "long_tail")},
    "long-per-wave": {"long_list_kernel": "per_wave"},
    "few-long-0": {"few_long": 0},
    "tails-per-wave": {"tail_lists": "per_wave"},
    "no-per-wave-staged": {"per_wave_staged_lists": ()},
    "short-12": {"short_lists": {"sum:int64": 12, "*": 8}},
}


def reduce_record(plan, op: str, dtype: str) -> str:
    """One letter per grid point: the per-list kernel the plan picks (``-``: the
    strategy's flattened passes or its own kernel)."""
    choose = plan.per_list_chooser(op, dtype)
    itemsize = 1 if dtype in ("bool", "int8") else 4 if dtype == "float32" else 8
    out = []
    for n in N_LISTS:
        for mean in MEANS:
            total = int(n * mean)
            for longest in LONGEST:
                longest = (max(1, int(1.5 * mean)) if longest == "1.5x" else longest)
                for share in (N_LONG if longest is not None else (None,)):
                    n_long = None if share is None else int(share * n)
                    out.append(LETTER[choose(n, total, total * itemsize, longest, n_long)])
    return "".join(out)


def family_record(plan, family: str) -> str:
    return "".join("1" if plan.family_runs_per_list(family, n, e) else "0"
                   for n, e in FAMILY_SIZES)


def units_record(compile_units, arch: str) -> list:
    """Per unit: its defines and, per kernel, its promises (the kernels it defines)."""
    return [[u.defines, {k: ",".join(sorted(u.promises.get(k, ()))) for k in sorted(u.kernels)}]
            for u in compile_units(arch)]


def pin(plan_for, ops, families, compile_units) -> dict:
    """``plan_for(arch, **forced)`` -> plan; ``ops``: (device name, dtypes) pairs."""
    out = {"reduce": {}, "families": {}, "units": {}, "strategy": {}}
    for arch in ARCHES:
        out["units"][arch] = units_record(compile_units, arch)
        for label, forced in FORCED.items():
            plan = plan_for(arch, **forced)
            out["strategy"][f"{arch}/{label}"] = [plan.strategy.name, plan.wave]
            for op, dtypes in ops:
                for dt in dtypes:
                    if dt in DTYPES:
                        key = f"{arch}/{label}/{op}:{dt}"
                        out["reduce"][key] = reduce_record(plan, op, dt)
            for family in families:
                out["families"][f"{arch}/{label}/{family}"] = family_record(plan, family)
    # each distinct record once (the grid repeats a few dozen of them)
    for part in ("reduce", "families"):
        distinct = sorted(set(out[part].values()))
        out[part] = {"records": distinct,
                     "by_key": {k: distinct.index(v) for k, v in out[part].items()}}
    return json.loads(json.dumps(out))  # tuples as lists, as read back from the file


PIN_PATH = os.path.join(os.path.dirname(__file__), "data", "gpu_policy_pin.json")


def current() -> dict:
    from gpuexec.kernels.gpu.catalog import OPS
    from gpuexec.kernels.gpu.families import FAMILIES
    from gpuexec.kernels.gpu.plan import plan_for
    from gpuexec.kernels.gpu.units import compile_units

    return pin(plan_for, [(op.device, op.dtypes) for op in OPS if op.dtypes],
               [f.name for f in FAMILIES], compile_units)


if __name__ == "__main__":
    with open(PIN_PATH, "w") as f:
        json.dump(current(), f, sort_keys=True, separators=(",", ":"))
        f.write("\n")
