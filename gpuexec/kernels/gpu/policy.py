"""The GPU reduction policy: per architecture, which strategy, launch configuration and
per-list kernels run, as table data only (the rocPRIM shape: one row per gfx family,
one for NVIDIA's sm_ architectures). Every choice is measured; the figures behind each
row are in docs/gpu-reduction.md. ``plan.py`` turns a row into a ``Plan``."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from gpuexec.kernels.gpu.catalog import SMALL_LISTS, Launch, ListWindow
from gpuexec.kernels.validate import LONG_LIST

# counted long lists x the longest up to this share of the elements are no long tail:
# (for one thread per list, for per_thread_staged) (docs/gpu-reduction.md#few-long-lists)
FEW_LONG = (1 / 64, 1 / 8)


@dataclass(frozen=True)
class ArchRow:
    """One architecture family's choices (fields explained in docs/gpu-reduction.md#rows)."""

    pattern: str                 # regular expression on the architecture name
    vendor: str                  # "cuda" | "hip"
    wave: int                    # lanes per wave
    strategy: str                # default strategy (catalog.STRATEGIES)
    launch: dict = field(default_factory=dict)  # role or "role:op" -> Launch
    # op or "op:dtype" -> mean list length below which lists run one per thread
    short_lists: dict = field(default_factory=dict)
    # op or "op:dtype" -> the per-list kernel of short lists (catalog.PER_LIST_KERNELS)
    per_list_kernels: dict = field(default_factory=lambda: {"*": "per_thread"})
    # op -> what reduces longer lists (catalog.LONG_LIST_KERNELS)
    long_list_kernels: dict = field(default_factory=lambda: {"*": "flat"})
    # kernel family -> ListWindow(s) where its per-list kernels run
    family_per_list: dict = field(default_factory=dict)
    # content bytes from which the per_thread_staged kernel runs
    per_thread_staged_from_bytes: int = 0
    # op or "op:dtype" -> (from, below) mean lengths of the per_wave_staged kernel
    per_wave_staged_lists: dict = field(default_factory=dict)
    # op or "op:dtype" -> per_thread_staged's threshold where no list is far above the mean
    per_thread_staged_lists: dict = field(default_factory=dict)
    # (factor, floor, few, few for per_thread_staged): what is a long tail
    tail: tuple = (*LONG_LIST, *FEW_LONG)
    # op or "op:dtype" -> the kernel of a long tail (catalog.TAIL_KERNELS) ...
    tail_lists: dict = field(default_factory=dict)
    tail_from: float = 0.0       # ... where at least this share of the lists is long


_PER_WAVE = dict(interleave=1, short_batch=8, group=8, stream_load=4)
_STAGED = "per_thread_staged"

# The table. First matching row wins.
ARCHES: tuple[ArchRow, ...] = (
    # CDNA (gfx908, gfx90a, gfx942, gfx950): 64-lane waves, three lean passes at full
    # occupancy (docs/gpu-reduction.md#cdna)
    ArchRow(r"gfx9\d[0-9a-f]", "hip", 64, "split",
            {"flat_split": Launch(256, 64), "flat_fixup": Launch(256, 64),
             "partition": Launch(256, 64)}),
    # RDNA (gfx10xx, gfx11xx, gfx12xx): wave32 by default, one fused pass
    ArchRow(r"gfx1[0-2]\d[0-9a-f]", "hip", 32, "fused", {"flat_fused": Launch(256, 64)}),
    # NVIDIA sm_*: 32-lane warps, fused with 128-bit loads (docs/gpu-reduction.md#sm_90)
    ArchRow(r"sm_\d+a?", "cuda", 32, "fused",
            {"flat_fused": Launch(256, 64, 3), "flat_fused:argmin": Launch(256, 64, 2),
             "flat_fused:argmax": Launch(256, 64, 2), "flat_split": Launch(256, 64, 2),
             # full occupancy for one list per thread (docs/gpu-reduction.md#per-thread)
             "per_thread": Launch(256, 64, 8),
             # docs/gpu-reduction.md#per-wave
             "per_wave": Launch(128, 128, 8, **_PER_WAVE),
             "per_wave:argmin": Launch(64, 128, 14, **_PER_WAVE),
             "per_wave:argmax": Launch(64, 128, 14, **_PER_WAVE),
             # docs/gpu-reduction.md#long-tails
             "long_tail": Launch(128, 128, 8), "long_tail:argmin": Launch(128, 128, 7),
             "long_tail:argmax": Launch(128, 128, 7)},
            # docs/gpu-reduction.md#short-lists
            short_lists={"argmin": 16, "argmax": 16, "*": 8},
            # docs/gpu-reduction.md#per-thread
            per_list_kernels={"sum:float64": _STAGED, "prod:float64": _STAGED,
                              "min:float64": _STAGED, "max:float64": _STAGED,
                              "min:int64": _STAGED, "max:int64": _STAGED, "*": "per_thread"},
            # docs/gpu-reduction.md#per-wave
            long_list_kernels={"sum": "per_wave", "prod": "per_wave", "min": "per_wave",
                               "max": "per_wave", "argmin": "per_wave", "argmax": "per_wave",
                               "countnonzero": "per_wave", "*": "flat"},
            # docs/gpu-reduction.md#families
            family_per_list={
                "filter": (ListWindow(4.0, 8.0, 400_000),
                           ListWindow(4.0, 8.0, strategies=("split",)),
                           ListWindow(0, 16, lists_below=SMALL_LISTS, strategies=("split",))),
                "carry": ListWindow(0, math.inf, elements_below=1_600_000),
                "sort": ListWindow(0, 16, lists_below=8 * SMALL_LISTS),
                "local_index": (ListWindow(0, math.inf, elements_below=6_000_000),
                                ListWindow(0, math.inf, elements_below=12_000_000,
                                           strategies=("split",))),
                "combinations": (ListWindow(0, 64, lists_below=2 * SMALL_LISTS,
                                            strategies=("split",)),
                                 ListWindow(0, 16, lists_below=4 * SMALL_LISTS,
                                            strategies=("split",)))},
            per_thread_staged_from_bytes=64_000_000,  # docs/gpu-reduction.md#per-thread
            # docs/gpu-reduction.md#staged
            per_wave_staged_lists={"argmin:int64": (16, 48), "argmax:int64": (16, 48),
                                   "*": (16, 64)},
            # docs/gpu-reduction.md#bounded-lengths
            per_thread_staged_lists={"sum:float64": 64, "prod:float64": 64, "min:float64": 64,
                                     "max:float64": 64, "min:int64": 64, "max:int64": 64},
            # docs/gpu-reduction.md#long-tails
            tail_lists={"*": "long_tail"}, tail_from=0.02),
)


def arch_row(arch: str) -> ArchRow:
    for row in ARCHES:
        if re.fullmatch(row.pattern, arch):
            return row
    raise LookupError(f"no gpuexec policy row for GPU architecture {arch!r}")
