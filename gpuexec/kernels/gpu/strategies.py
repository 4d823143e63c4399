"""The vendor strategy table: which kernel variant and launch configuration each GPU
architecture gets. One data table; the backend looks rows up, call sites never branch on
the vendor.

Strategies (all valid on any wave width; the table only picks the default):

  split  partition pass + reduce pass + fixup pass (three lean kernels, no atomics);
         flattened (threads walk the flat content), 128-bit loads. The paper's HIP recipe
         for 64-lane wavefronts: lean passes at full occupancy beat one fused pass.
  fused  one persistent kernel that searches its start once, walks its tiles in order and
         finishes boundary lists itself; flattened, 128-bit loads. For 32-lane warps.
  naive  one thread per list (the direct port); a baseline for benchmarks and tests.

Short lists: where the mean list length of a reduction's input (content length / lists,
known without reading the data) is below the row's ``short_lists`` threshold for the op,
the flattened strategies map one thread per list instead (CUB's small-segment policy):
a tile of flattened work then holds dozens of list boundaries and its ordered combine
costs more than the per-list loop, which reads coalesced enough when lists are short.
The row's ``per_list_kernels`` names, per op (or per ``"op:dtype"``), the naive unit's kernel
that does it: ``naive`` (each thread reads its own list from global memory) or ``tiled``
(the block first stages its lists' content in shared memory with coalesced 128-bit loads;
the row's ``tiled_from_bytes`` keeps it to content that does not fit in L2). Where the
input's longest list is known (a public call's offsets check reads it back,
``validate.longest_list``), a long tail (``tail``) sends every mean length to the long-list
kernel, and without one the tiled kernel has its own thresholds (``tiled_lists``). The check
also counts the long lists (``validate.long_lists``): a few of them, holding a small share
of the content (``tail``'s third number), are no long tail.

Longer lists: the row's ``long_list_kernels`` names, per op, what reduces them: ``flat``
(the strategy's own flattened passes) or ``hybrid`` (a kernel of the naive unit: each wave
takes a batch of lists, reduces the short ones one per lane, medium ones by groups of lanes
(the row's ``group``) and streams the longer ones with the whole wave; low registers, no
segmented scan). Mixed lengths (mostly short lists, a few long ones holding most of the
content) are where the two differ. On the mean lengths of the row's ``staged_lists`` bands
its ``staged`` variant runs instead: batches of lists of a few dozen elements are read by
the whole wave into shared memory first.

Kernel families (``families.py``) may name windows of inputs on which their per-list
kernels run instead of the strategy's flattened passes (``family_per_list``: mean list
length, list and element counts, optionally only for some strategies): the filter's
per-list count and fill beat its flattened passes on many lists of about five elements on
the H200, and lose on shorter, longer or fewer lists; below a size (up to ~500k short
lists for sort, 6M elements for local_index) one launch per list beats sort's extra passes
and split's partition pass; carry (no lists: one per output) gathers one element per
thread below 1.6M outputs, where its 128-bit runs lose on inputs held in L2.

Overrides: ``GPUEXEC_GPU_STRATEGY=split|fused|naive``, ``GPUEXEC_GPU_LAUNCH``
(``"block=512,item_bytes=32"`` for the reduce pass, or ``"reduce:block=512;fixup:block=128"``)
``GPUEXEC_GPU_SHORT_LISTS`` (one threshold for every op; 0 = always flattened, the
families' windows below included),
``GPUEXEC_GPU_PER_LIST_KERNEL=naive|tiled|hybrid`` and
``GPUEXEC_GPU_LONG_LIST_KERNEL=flat|hybrid``, or the same through
``GPUBackend(strategy=..., launch=..., short_lists=..., per_list_kernel=...,
long_list_kernel=..., family_per_list=...)``.

``compile_units(arch)`` lists every (source, defines) the runtime may compile for an
architecture with the extern "C" kernels each defines and what the strategy promises about
their machine code; the CI compile gates assert those promises.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from gpuexec.kernels.backend import ALL_DTYPES, NUMBER_DTYPES
from gpuexec.kernels.validate import LONG_LIST

SRC_DIR = os.path.join(os.path.dirname(__file__), "src")
REDUCE_SOURCE = "reduce.cu"



@dataclass(frozen=True)
class Op:
    """One reduction: the backend contract name, its device name and its dtypes."""

    contract: str          # name in the Backend kernel table (``reduce_sum``)
    device: str            # name inside extern "C" symbols (``sum`` -> gk_sum_float64_fused)
    define: str            # selects it in reduce.cu
    dtypes: tuple[str, ...]  # content dtypes; () for offsets-only kernels


OPS: tuple[Op, ...] = (
    Op("reduce_sum", "sum", "GK_OP_SUM", NUMBER_DTYPES),
    Op("reduce_prod", "prod", "GK_OP_PROD", NUMBER_DTYPES),
    Op("reduce_sum_bool", "sum_bool", "GK_OP_SUM_BOOL", ("bool",)),
    Op("reduce_prod_bool", "prod_bool", "GK_OP_PROD_BOOL", ("bool",)),
    Op("reduce_min", "min", "GK_OP_MIN", ALL_DTYPES),
    Op("reduce_max", "max", "GK_OP_MAX", ALL_DTYPES),
    Op("reduce_argmin", "argmin", "GK_OP_ARGMIN", ALL_DTYPES),
    Op("reduce_argmax", "argmax", "GK_OP_ARGMAX", ALL_DTYPES),
    Op("reduce_countnonzero", "countnonzero", "GK_OP_COUNTNONZERO", ALL_DTYPES),
    Op("reduce_any", "any", "GK_OP_ANY", ALL_DTYPES),
    Op("reduce_all", "all", "GK_OP_ALL", ALL_DTYPES),
    Op("reduce_count", "count", "GK_OP_COUNT", ()),
)
OPS_BY_CONTRACT = {op.contract: op for op in OPS}


#: GK_STREAM_LOAD in reduce.cu: the PTX of a streamed list's 128-bit loads on CUDA
STREAM_LOADS = {0: "plain", 1: "ld.global.nc", 2: "ld.global.nc.L2::256B",
                3: "ld.global.nc.L1::no_allocate.L2::256B", 4: "ld.global.cs"}


@dataclass(frozen=True)
class Launch:
    """Launch configuration of one kernel role. ``block`` and ``item_bytes`` are compiled
    in (they size shared memory); ``blocks_per_cu`` sizes persistent grids."""

    block: int = 256          # threads per block, a multiple of 64
    item_bytes: int = 64      # content bytes each thread loads per tile
    min_blocks: int = 2       # CUDA launch bound: resident blocks per SM the registers allow
    blocks_per_cu: int = 0    # persistent grid = blocks_per_cu * CU count (0: as many as fit)
    prefetch_tiles: int = 1   # wave-tiles of content asked into L2 ahead (1: none)
    # hybrid: a wave streaming a long list keeps one accumulator per lane across its tiles
    # and merges the lanes once (0: an ordered wave reduction per tile)
    lane_fold: int = 1
    # hybrid, with lane_fold: the wave's lanes read consecutive 16-byte vectors (one
    # contiguous run per load instruction) instead of a contiguous stretch each
    interleave: int = 0
    # hybrid: elements of a short list (one per lane) loaded before any is folded
    short_batch: int = 1
    # hybrid, with lane_fold: lanes per medium list (a long list of at most half a
    # wave-tile), the wave reducing wave-width / group of them at a time; above 4, those
    # that fit one tile of 4 lanes take 4 (1: the whole wave streams every long list)
    group: int = 1
    # the staged kernel (the hybrid one's row): bytes of shared memory per wave through
    # which a batch of lists, half of them at least ``stage_min`` long and none longer
    # than ``stage_max``, is read as one contiguous run
    stage_bytes: int = 4096
    stage_min: int = 16
    stage_max: int = 96
    # hybrid (its medium and streamed long lists, in the shared kernel too): the cache
    # hint of the 128-bit loads that stream a list (STREAM_LOADS); CUDA only, HIP reads
    # plainly
    stream_load: int = 0

    def __post_init__(self):
        if self.block % 64 or not 64 <= self.block <= 1024:
            raise ValueError(f"block size must be a multiple of 64 in [64, 1024], got {self.block}")
        if self.item_bytes not in (16, 32, 64, 128):
            raise ValueError(f"item_bytes must be 16, 32, 64 or 128, got {self.item_bytes}")
        if self.lane_fold not in (0, 1):
            raise ValueError(f"lane_fold must be 0 or 1, got {self.lane_fold}")
        if self.interleave not in (0, 1):
            raise ValueError(f"interleave must be 0 or 1, got {self.interleave}")
        if self.short_batch not in (1, 2, 4, 8):
            raise ValueError(f"short_batch must be 1, 2, 4 or 8, got {self.short_batch}")
        if self.group not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"group must be a power of two up to 32, got {self.group}")
        if self.stage_bytes not in (512, 1024, 2048, 4096, 8192):
            raise ValueError(f"stage_bytes must be a power of two from 512 to 8192, "
                             f"got {self.stage_bytes}")
        if self.stream_load not in STREAM_LOADS:
            raise ValueError(f"stream_load must be one of {sorted(STREAM_LOADS)}, got "
                             f"{self.stream_load}")
        if not 0 <= self.stage_min <= self.stage_max <= 4096:
            raise ValueError(f"need 0 <= stage_min <= stage_max <= 4096, got "
                             f"{self.stage_min} and {self.stage_max}")


_DEFAULT_LAUNCH = Launch()  # the configuration of a role the table leaves out


@dataclass(frozen=True)
class Strategy:
    name: str
    define: str                # GK_VARIANT_*
    passes: tuple[str, ...]    # kernel roles launched per reduction, in order
    flatten: bool              # threads walk the flat content rather than one list each
    vec_bytes: int             # width of content loads (16 = 128-bit)


STRATEGIES: dict[str, Strategy] = {
    "split": Strategy("split", "GK_VARIANT_SPLIT", ("partition", "split", "fixup"), True, 16),
    "fused": Strategy("fused", "GK_VARIANT_FUSED", ("fused",), True, 16),
    "naive": Strategy("naive", "GK_VARIANT_NAIVE", ("naive",), False, 8),
}


# Long lists (counted by the offsets check) that, times the longest, hold at most this
# share of the elements are few, and the mean's kernel runs: (one thread per list from
# global memory, the tiled kernel). 100M elements in Poisson(3) lists with lists of
# 100..2000 among them, as % of copy, the mean's kernel / the hybrid one (H200,
# gpu_reduce_sweep_few_s19_h200.json): 31 of them (share 0.06 %) 66-80 / 57-68 on all
# eight cells; 332 (0.7 %) 62-79 / 57-68 on seven, int64 sum 66.2 / 66.8; 1032 (2.1 %) the
# tiled kernel 69-77 / 66-68, one thread per list 60-64 / 57-67 (int64 sum 63.9 / 66.9);
# 3291 (6.6 %) tiled 65-76 / 66-68, one thread per list 54-61 / 57-67; 24585 (49 %) the
# hybrid kernel wins every cell by 13-30 points
FEW_LONG = (1 / 64, 1 / 8)


@dataclass(frozen=True)
class ArchRow:
    pattern: str                 # regular expression on the architecture name
    vendor: str                  # "cuda" | "hip"
    wave: int                    # lanes per wave
    strategy: str                # default strategy
    launch: dict = field(default_factory=dict)  # role -> Launch (missing roles: Launch())
    # op or "op:dtype" -> mean list length below which flattened strategies reduce one
    # list per thread ("*": every other op); measured by benchmarks/gpu_reduce_sweep.py
    short_lists: dict = field(default_factory=dict)
    # op or "op:dtype" -> the naive unit's kernel for short lists (PER_LIST_KERNELS; "*":
    # every other op)
    per_list_kernels: dict = field(default_factory=lambda: {"*": "naive"})
    # op -> what reduces lists at or above the short-list threshold (LONG_LIST_KERNELS)
    long_list_kernels: dict = field(default_factory=lambda: {"*": "flat"})
    # kernel family -> ListWindow(s) where its per-list kernels beat its flattened passes
    family_per_list: dict = field(default_factory=dict)
    # content bytes from which the table's "tiled" per-list kernel runs (the naive kernel
    # below: staging an input that stays in L2 costs more than it saves)
    tiled_from_bytes: int = 0
    # op or "op:dtype" -> (from, below): mean list lengths on which the long-list kernel
    # "hybrid" is replaced by its "staged" variant (batches read through shared memory)
    staged_lists: dict = field(default_factory=dict)
    # Where the input's longest list is known (the offsets' check read it back) and is at
    # most max(factor x the mean, floor) (``tail``), op or "op:dtype" -> the short-list
    # threshold of the tiled kernel (missing: ``short_lists``); a longer longest list
    # sends every mean length to the long-list kernel (no list per thread, no staging),
    # unless the long lists counted, times the longest, are at most ``few`` x the
    # elements: (factor, floor, few, few for the tiled kernel), the bound being the
    # offsets check's ``LONG_LIST``
    tiled_lists: dict = field(default_factory=dict)
    tail: tuple = (*LONG_LIST, *FEW_LONG)
    # op or "op:dtype" -> the naive unit's kernel for inputs with a long tail (the branch
    # above that sends every mean length to the long-list kernel) where that kernel is
    # "hybrid" (TAIL_KERNELS; missing: "hybrid"), where at least ``tail_from`` of the lists
    # are long (counted by the offsets check; fewer: the long-list kernel)
    tail_lists: dict = field(default_factory=dict)
    tail_from: float = 0.0


@dataclass(frozen=True)
class ListWindow:
    """Inputs on which a kernel family runs its per-list (naive unit) kernels: mean list
    length in ``[mean_from, mean_below)``, a list count in ``[lists_from, lists_below)``
    and fewer than ``elements_below`` elements (all known on the host without reading the
    data), under the flattened strategies named in ``strategies`` (empty: every one)."""

    mean_from: float
    mean_below: float
    lists_from: int = 0
    lists_below: float = math.inf
    elements_below: float = math.inf
    strategies: tuple = ()

    def holds(self, n_lists: int, n_elements: int, strategy: str | None = None) -> bool:
        return (n_lists > 0 and self.lists_from <= n_lists < self.lists_below
                and n_elements < self.elements_below
                and self.mean_from * n_lists <= n_elements < self.mean_below * n_lists
                and (not self.strategies or strategy is None or strategy in self.strategies))


class PerListRule(NamedTuple):
    """``per_list_chooser``'s rule for one op and dtype: lists shorter than ``below`` on
    average run the naive unit's ``short`` kernel where the content holds at least
    ``short_from`` bytes (its naive kernel on less); longer ones its ``long`` kernel (None:
    the strategy's flattened passes), or its "staged" kernel on mean lengths in
    [``staged_from``, ``staged_below``). Where the longest list is known: up to
    max(``tail_factor`` x the mean, ``tail_floor``), the tiled kernel's threshold is
    ``bounded``; above, the ``long`` kernel runs whatever the mean, unless the long lists
    are counted and they times the longest are at most ``tail_few`` x the elements
    (``tail_few_tiled`` where the tiled kernel would run); such a long tail runs ``tail``
    where given and at least ``tail_from`` of the lists are counted long."""

    below: float
    short: str
    long: str | None
    short_from: int
    staged_from: float
    staged_below: float
    bounded: float
    tail_factor: float
    tail_floor: float
    tail_few: float = 0.0
    tail_few_tiled: float = 0.0
    tail: str | None = None  # the kernel for a long tail where ``long`` is hybrid
    tail_from: float = 0.0  # ... where at least this share of the lists is counted long


# the per-list kernels of the naive unit (role names in its compile unit)
PER_LIST_KERNELS = ("naive", "tiled", "hybrid", "staged", "shared")
# what may reduce a long tail in place of the hybrid kernel
TAIL_KERNELS = ("hybrid", "shared")
# "flat": the strategy's own flattened passes; "hybrid": the naive unit's hybrid kernel
LONG_LIST_KERNELS = ("flat", "hybrid")


#: the unit of the families' list-count windows in the table (2**16, see the sm_ row)
SMALL_LISTS = 65_536

# The table. First matching row wins.
ARCHES: tuple[ArchRow, ...] = (
    # CDNA (MI100 gfx908, MI210/MI250X gfx90a, MI300A/X gfx942, MI350 gfx950): 64-lane waves
    ArchRow(r"gfx9\d[0-9a-f]", "hip", 64, "split",
            {"split": Launch(256, 64), "fixup": Launch(256, 64), "partition": Launch(256, 64)}),
    # RDNA (gfx10xx/gfx11xx/gfx12xx) runs wave32 by default
    ArchRow(r"gfx1[0-2]\d[0-9a-f]", "hip", 32, "fused", {"fused": Launch(256, 64)}),
    # NVIDIA: 32-lane warps; fused, with 128-bit loads
    # (register-bound: 3 resident blocks where the kernel fits 85 registers without spills)
    ArchRow(r"sm_\d+a?", "cuda", 32, "fused",
            {"fused": Launch(256, 64, 3), "fused:argmin": Launch(256, 64, 2),
             "fused:argmax": Launch(256, 64, 2), "split": Launch(256, 64, 2),
             # one list per thread is latency-bound: full occupancy (8 x 256 threads, at
             # most 32 registers). ncu on the H200, sum over 20M lists: 48 registers and
             # 51 % achieved occupancy at the default bound, 55 % of DRAM bandwidth
             "naive": Launch(256, 64, 8),
             # the hybrid kernel (naive unit, its own block and bound): 12 blocks of 128,
             # <= 40 registers, no spills; argmin/argmax 18 blocks of 64 (<= 56: their lane
             # merge, see below). H200, mixed lengths, float64 sum / max /
             # count_nonzero / argmax, one run (tenth session): 82.0 / 81.5 / 81.8 / 71.2 %
             # of copy bandwidth at 12 x 128, 79.9 / 80.7 / 80.8 / 65.8 at 10 x 128, 79.8 /
             # 79.2 / 79.0 / 64.4 at 5 x 256 (the fifth session's choice); the next run,
             # argmax float64 / int64: 66.9 / 69.2 at 10 x 128, 67.9 / 70.4 at 20 x 64.
             # Smaller blocks free their slots sooner: a block ends with its slowest wave,
             # the one whose batch held most long lists. Since lanes fold a long list across
             # its tiles (lane_fold, twelfth session) the arg-reductions' merge needs 56
             # registers: at 20 x 64 (48) their 32-bit kernels spilled 4 bytes.
             # Since the fifteenth session the lanes read consecutive vectors (interleave)
             # 128 bytes per lane per tile, 8 blocks of 128 (<= 64 registers), arg 16 of 64:
             # mixed lengths, float64 / int64, one sweep in turns: sum 87.4 / 88.0 % of
             # copy (84.1 / 84.7 before), max 86.4 / 87.2 (82.8 / 83.0), count_nonzero
             # 86.5 / 87.3 (83.9 / 82.1), argmax 82.9 / 82.6 (78.3 / 77.2); 128 bytes
             # without interleaving 73-77, interleaved 64 bytes 76-85. A lane loads 8
             # elements of its short list before folding any (short_batch): +0.1 to +0.9
             # points on all eight mixed-length cells of one sweep (4: -0.2 to +0.6)
             # Since the sixteenth session medium lists (33 to half a wave-tile: 256
             # float64) go to groups of lanes, several at a time: those that fit one tile
             # of 4 lanes (64 float64) 4 lanes each, the others 8 (group). <= 64 registers
             # at 8 blocks of 128; argmin/argmax <= 72 at 14 of 64 (16 spilled). 100M
             # float64, % of copy, sum / max / count_nonzero / argmax, one sweep in turns
             # (gpu_reduce_sweep_s16_two_class_h200.json), the whole wave per long list
             # (the fifteenth session's table) against these groups: Poisson(40) lists
             # 18.9 / 17.6 / 15.7 / 12.0 -> 77.9 / 74.1 / 66.0 / 59.5, Poisson(64) 27.3 /
             # 25.2 / 22.5 / 17.7 -> 91.3 / 87.3 / 81.0 / 68.6, Poisson(100) 41.0 / 37.7
             # / 33.5 / 27.2 -> 98.7 / 98.3 / 98.1 / 88.9, Poisson(200) 79.3 / 71.2 / 65.5
             # / 51.5 -> 99.0 / 98.4 / 97.4 / 92.9; mixed lengths 89.8 / 88.6 / 88.8 / 85.4
             # -> 90.0 / 88.4 / 88.7 / 83.6 (int64 argmax 85.0 -> 82.7). One group size
             # for all medium lists: 4 lost up to 8 points on Poisson(200), 8 up to 25 on
             # Poisson(40) (gpu_reduce_sweep_s16_group_h200.json, _dists_h200.json)
             # Since the thirty-ninth session a streamed list is read with ld.global.cs
             # (evict first, stream_load=4). One H200 run in turns, 100M float64, % of
             # copy, sum / argmax, shipped plain -> .cs (exp_stream_load_s39_h200.json):
             # mixed lengths (shared kernel) 95.6 / 89.8 -> 99.8 / 94.4, 30 % long lists
             # 92.8 / 88.0 -> 96.8 / 93.1, Poisson(300) (hybrid) 95.3 / 70.6 -> 97.7 /
             # 71.7; .nc alone level, .nc with a 256-byte L2 prefetch -0.7 to -3.3,
             # also L1::no_allocate -2.8 to +4.0; results bit-identical
             "hybrid": Launch(128, 128, 8, interleave=1, short_batch=8, group=8,
                              stream_load=4),
             "hybrid:argmin": Launch(64, 128, 14, interleave=1, short_batch=8, group=8,
                                     stream_load=4),
             "hybrid:argmax": Launch(64, 128, 14, interleave=1, short_batch=8, group=8,
                                     stream_load=4),
             # the shared kernel (the hybrid one's shape; only block and bound are its own,
             # <= 64 registers, argmin/argmax <= 72, no spills): 8 blocks of 128, arg 7.
             # H200, 100M elements, % of copy, one sweep in turns with the hybrid kernel
             # (sweep_shared_s36_h200.json), float64 sum / max / count_nonzero / argmax,
             # hybrid -> shared at 256 x 4 (arg 128 x 7) / 128 x 8 (arg 64 x 14) / 512 x 2
             # (arg 256 x 3): mixed lengths 88.1 / 86.6 / 86.9 / 82.3 -> 93.9 / 93.1 /
             # 92.9 / 87.8, 93.0 / 92.2 / 92.2 / 85.1, 92.8 / 91.6 / 91.2 / 84.7; 3 % of
             # lists of 100..2000 among Poisson(3) 94.1 / 92.5 / 92.2 / 83.1 -> 93.0 / 90.6
             # / 89.5 / 83.0, 96.6 / 95.2 / 94.7 / 81.7, 86.2 / 83.6 / 82.6 / 74.4; 30 %
             # 84.3 / 82.2 / 82.8 / 77.8 -> 91.4 / 89.1 / 87.9 / 86.5, 90.9 / 89.5 / 89.0
             # / 85.1, 90.1 / 87.6 / 86.1 / 81.4 (int64 alike). Without a tail it loses:
             # Poisson(300) float64 sum 93.2 -> 89.2, argmax 70.0 -> 61.5 (256 x 4)
             "shared": Launch(128, 128, 8), "shared:argmin": Launch(128, 128, 7),
             "shared:argmax": Launch(128, 128, 7)},
            # H200, 100M float64: per-list argmin/argmax 2x faster than flattened at mean
            # length 5, 3x slower at mean length 108 (gpu_reduce_s5_h200.json)
            {"argmin": 16, "argmax": 16, "*": 8},
            # Where the tiled kernel beats the naive one, on device time (Nsight Compute,
            # gpu_device_time_widths_h200.json, thirteenth session; Poisson(5), 1M-100M
            # elements): float64 sum/prod/min/max and int64 min/max from 8M elements
            # (float64 sum 26.9 vs 29.8 us at 8M, 288.9 vs 296.8 at 100M); int64 sum/prod
            # never (1-25 % slower at every size, most at 4M); 4-byte values never (18-36 %
            # slower at every size); below 8M elements (the content fits in L2) it gains
            # nothing and loses up to 25 %. count_nonzero and argmin/argmax: naive (fifth
            # session). Other widths are not measured: the naive kernel
            {"sum:float64": "tiled", "prod:float64": "tiled", "min:float64": "tiled",
             "max:float64": "tiled", "min:int64": "tiled", "max:int64": "tiled", "*": "naive"},
            # H200, 100M float64 in mixed lengths (90 % Poisson(3), 10 % 100..2000): the
            # hybrid kernel 76-77 % for sum/prod/min/max and 53 % for argmin/argmax vs
            # fused 66-70 % and 38 % (fifth session); count_nonzero since its float test
            # reads the bits (tenth session): hybrid 81.8 % vs fused 67.9 %
            {"sum": "hybrid", "prod": "hybrid", "min": "hybrid", "max": "hybrid",
             "argmin": "hybrid", "argmax": "hybrid", "countnonzero": "hybrid", "*": "flat"},
            # The filter on Poisson(5) lists, device time (gpu_device_time_ladder_h200.json,
            # thirteenth session), fused / split over naive at 200k / 400k / 800k / 1.6M
            # lists: 0.89 / 1.23, 1.00 / 1.26, 1.07 / 1.27, 1.13 / 1.20: split's flattened
            # passes lose at every count, fused's from 400k lists (host-timed, both win up
            # to 1M lists by issuing fewer launches than the per-list path's five).
            # H200, filter kernel ms, fused / split / naive (gpu_filter_sweep.json):
            # Poisson(5) at 2M lists 0.270 / 0.274 / 0.248, 20M lists 1.197 / 1.139 / 1.094
            # (fused wins up to 1M lists: 0.210 / 0.221 / 0.233); Poisson(2) at 20M lists
            # 0.617 / 0.576 / 0.701 and Poisson(10) 2.112 / 2.063 / 2.408: the per-list
            # kernel wins only on many lists of about five (an earlier run agreed).
            # Small and mid-sized inputs (the GPU is not filled, so launches and the host
            # gaps between them are the time, and a flattened strategy's extra pass or host
            # read costs more than its balance gains): H200, kernel ms of fused / split /
            # naive timed in turns (gpu_family_sweep.json, eleventh session, on a host whose
            # Python ran ~2x slower than the ninth session's: the bounds sit where the
            # flattened passes win clearly). Poisson(5) at 100k / 200k / 400k / 800k lists:
            # sort 0.224 / 0.263 / 0.168, 0.221 / 0.264 / 0.218, 0.394 / 0.427 / 0.365,
            # 0.290 / 0.316 / 0.504. local_index (any lengths) naive up to 4M elements
            # (Poisson(5) 0.113 vs 0.126 / 0.160), fused from 8M (0.145 vs 0.153), split
            # from 16M (0.195 vs 0.236; 8M: 0.181 vs 0.153). combinations under split at
            # 100k / 200k / 400k lists, n = 2: 0.215 / 0.258 / 0.260 vs naive 0.171 / 0.200
            # / 0.344; n = 3: 0.224 / 0.263 vs 0.205 / 0.449 (the window's mean is of
            # output tuples: 12.5 per list for pairs of Poisson(5), 20.8 for triplets).
            # The filter's small-input window: split 0.204 vs naive 0.138 ms at 24.4k lists
            # (ninth session), split no slower than naive from 50k lists in this sweep.
            # carry (a 1-D gather of 8-byte values by a jagged carry index), device time
            # (gpu_device_time_carry_h200.json): the 128-bit kernel over naive's 1.10-1.18
            # at 1.25M outputs, 0.99-1.04 at 1.5M, 0.94-0.96 at 1.75M, 0.91 from 2M (up to
            # 0.85 on mixed lengths' long runs); 1.07-1.14 at 2k-1M
            {"filter": (ListWindow(4.0, 8.0, 400_000),
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
            tiled_from_bytes=64_000_000,
            # The staged kernel on mean lengths 16 to 64, the hybrid one around them. H200,
            # 100M float64 / int64, % of copy bandwidth, hybrid -> staged (4 KB per wave,
            # one sweep in turns, gpu_reduce_sweep_s17_stage2_h200.json): Poisson(16) sum
            # 84.7 / 85.2 -> 88.5 / 88.2, max 84.6 / 84.2 -> 87.4 / 86.6, count_nonzero
            # 76.4 / 78.1 -> 83.1 / 81.1, argmax 74.8 / 63.6 -> 78.5 / 70.3; Poisson(24) sum
            # 78.9 / 79.1 -> 90.1 / 90.2, count_nonzero 67.7 / 71.6 -> 86.7 / 87.1, argmax
            # 65.5 / 54.3 -> 79.5 / 72.4; Poisson(48) sum 90.6 / 89.8 -> 92.0 / 92.2,
            # argmax 71.2 / 65.1 -> 77.5 / 64.8. Below: Poisson(12) sum 87.3 -> 85.0 (its
            # batches mostly unstaged, with less L1); above, lanes folding lists of ~100
            # alone lose to the groups (Poisson(100) sum 96.5 -> 83.9 staging up to 128).
            # The next run (gpu_reduce_sweep_s17_verify_h200.json, the table against no
            # staged kernel): Poisson(32) +13.8 to +21.8 points on all eight cells,
            # Poisson(64) +0.9 to +5.2 but int64 argmax 63.0 -> 55.7 (hence 48 there); on
            # 3 % of lists of 100..2000 among Poisson(3) (mean 34) -3.3 to -5.3: batches
            # holding a long list run unstaged, with less L1
            staged_lists={"argmin:int64": (16, 48), "argmax:int64": (16, 48), "*": (16, 64)},
            # Where the offsets' check read the longest list back (every public call on a
            # ListOffsetArray): without a long tail the tiled kernel runs up to a mean of
            # 64; with one, no list per thread. 100M elements, % of copy, the tiled kernel
            # against the hybrid / staged one (gpu_reduce_sweep_s17_short2_h200.json,
            # _verify_): float64 sum at Poisson(24) 97.6 / 90.1, Poisson(32) 96.4 / 92.7,
            # Poisson(48) 95.5 / 91.9, Poisson(64) 94.3 / 90.7; Poisson(80) 89.2 / 91.0 for
            # the hybrid kernel; int64 max at Poisson(24) 96.5 / 87.7. With 1 % of lists of
            # 100..2000 among Poisson(3) (mean 13.5, longest 2000) the per-list kernels run
            # at 12-32 % and the hybrid one at 71-89 (_short3_): argmax went one thread per
            # list there by the mean alone (14.8 against 74.3 %)
            tiled_lists={"sum:float64": 64, "prod:float64": 64, "min:float64": 64,
                         "max:float64": 64, "min:int64": 64, "max:int64": 64},
            # A long tail (lengths whose longest list and counted long lists say so) goes
            # to the shared kernel: a block's waves take its streamed lists from one queue,
            # so that no wave waits on another whose batch held more long lists. Figures:
            # the "shared" launch above; inputs without a tail keep the hybrid kernel. With
            # few long lists a block rarely holds two and the queue costs more than it
            # balances. Lists of 100..2000 among Poisson(3), hybrid -> shared, float64 sum /
            # int64 count_nonzero (sweep_tail_s36_h200.json, the table against hybrid tails
            # in turns): 1 % of them (1.0 % of the lists counted long) 88.4 -> 85.1 / 82.3
            # -> 75.4, all eight cells lost 2.6 to 6.9 points; 3 % (2.9 % counted) 91.8 ->
            # 95.7 / 89.6 -> 91.6; 10 %, the mixed lengths (8.3 %), 90.6 -> 93.3 / 89.9 ->
            # 92.6; 30 % (11.5 %) 85.2 -> 91.5 / 84.5 -> 89.9
            tail_lists={"*": "shared"}, tail_from=0.02),
)


def arch_row(arch: str) -> ArchRow:
    for row in ARCHES:
        if re.fullmatch(row.pattern, arch):
            return row
    raise LookupError(f"no gpuexec strategy row for GPU architecture {arch!r}")


def _parse_launch(text: str) -> dict[str, dict]:
    """``"block=512,item_bytes=32"`` (reduce roles) or ``"fixup:block=128;fused:block=512"``."""
    out: dict[str, dict] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        role, _, kv = part.rpartition(":")
        fields = {}
        for item in filter(None, (x.strip() for x in kv.split(","))):
            key, _, val = item.partition("=")
            if key not in Launch.__dataclass_fields__:
                raise ValueError(f"GPUEXEC_GPU_LAUNCH: unknown field {key!r}")
            fields[key] = int(val)
        for r in ([role] if role else ["split", "fused", "naive"]):
            out.setdefault(r, {}).update(fields)
    return out


@dataclass(frozen=True)
class Plan:
    """What one backend instance runs on one architecture."""

    arch: str
    vendor: str
    wave: int
    strategy: Strategy
    launch: dict  # role -> Launch
    short_lists: dict = field(default_factory=dict)  # op[:dtype] -> mean length threshold
    per_list_kernels: dict = field(default_factory=lambda: {"*": "naive"})  # op[:dtype] -> role
    long_list_kernels: dict = field(default_factory=lambda: {"*": "flat"})  # op -> kernel
    family_per_list: dict = field(default_factory=dict)  # family -> tuple of ListWindow
    tiled_from_bytes: int = 0  # the tiled per-list kernel on smaller content: naive
    staged_lists: dict = field(default_factory=dict)  # op[:dtype] -> (from, below) mean
    tiled_lists: dict = field(default_factory=dict)  # op[:dtype] -> threshold, bounded tails
    # a longest list up to max(factor x mean, floor), or long lists x longest at most few
    # x the elements: no long tail (factor, floor, few, few for the tiled kernel)
    tail: tuple = (*LONG_LIST, *FEW_LONG)
    tail_lists: dict = field(default_factory=dict)  # op[:dtype] -> kernel for a long tail
    tail_from: float = 0.0  # ... where at least this share of the lists is long

    def family_runs_per_list(self, family: str, n_lists: int, n_elements: int) -> bool:
        """Whether a flattened strategy runs ``family``'s per-list kernels on these lists
        (one of the family's windows holds)."""
        if not self.strategy.flatten:
            return False
        return any(w.holds(n_lists, n_elements, self.strategy.name)
                   for w in self.family_per_list.get(family, ()))

    def short_list_threshold(self, op: str, dtype: str | None = None) -> float:
        """The mean list length below which a flattened strategy reduces ``op`` on
        ``dtype`` one list per thread (0: never)."""
        return _per_op(self.short_lists, op, 0, dtype) if self.strategy.flatten else 0

    def per_list(self, op: str, n_lists: int, n_elements: int) -> bool:
        """Whether a flattened strategy reduces these lists one per thread instead."""
        if n_lists <= 0:
            return False
        return n_elements < self.short_list_threshold(op) * n_lists

    def per_list_kernel(self, op: str, dtype: str | None = None) -> str:
        """The naive unit's kernel (role) that reduces ``op`` on ``dtype`` content one list
        per thread (inputs of at least ``tiled_from_bytes`` where it is ``tiled``)."""
        return _per_op(self.per_list_kernels, op, "naive", dtype)

    def long_list_kernel(self, op: str) -> str:
        """What reduces ``op`` on lists above the short-list threshold (LONG_LIST_KERNELS)."""
        return _per_op(self.long_list_kernels, op, "flat")

    def per_list_rule(self, op: str, dtype: str | None = None) -> "PerListRule":
        """How ``per_list_chooser`` maps ``op`` on ``dtype`` (``PerListRule``)."""
        long = self.long_list_kernel(op)
        short = self.per_list_kernel(op, dtype)
        below = self.short_list_threshold(op, dtype)
        staged = _per_op(self.staged_lists, op, (0, 0), dtype) if long == "hybrid" else (0, 0)
        tail = _per_op(self.tail_lists, op, long, dtype) if long == "hybrid" else None
        bounded = below
        if short == "tiled" and self.strategy.flatten:
            bounded = _per_op(self.tiled_lists, op, below, dtype)
        return PerListRule(below=below, short=short, long=None if long == "flat" else long,
                           short_from=self.tiled_from_bytes if short == "tiled" else 0,
                           staged_from=staged[0], staged_below=staged[1], bounded=bounded,
                           tail_factor=self.tail[0], tail_floor=self.tail[1],
                           tail_few=self.tail[2], tail_few_tiled=self.tail[3],
                           tail=tail, tail_from=self.tail_from)

    def per_list_chooser(self, op: str, dtype: str | None = None):
        """``choose(n_lists, n_elements, content_bytes, longest=None, n_long=None)``: the
        naive unit's
        kernel that reduces these lists in place of the strategy's flattened passes (the
        short-list kernel below the threshold, naive below ``short_from`` bytes where that
        is tiled, the long-list kernel above it unless that is ``flat``; ``longest``, the
        longest list where known, moves the tiled kernel's threshold or, for a long tail,
        sends every input to the long-list kernel; ``n_long``, the long lists where
        counted, can say that a tail is few; ``PerListRule``), or None for the
        flattened passes. The rule is looked up once (a reducer takes it at creation, so
        that a call only compares sizes: the call floor)."""
        if not self.strategy.flatten:
            return lambda n_lists, n_elements, content_bytes, longest=None, n_long=None: None
        rule = self.per_list_rule(op, dtype)
        below, short, long, short_from = rule.below, rule.short, rule.long, rule.short_from
        staged_from, staged_below, bounded = rule.staged_from, rule.staged_below, rule.bounded
        factor, floor = rule.tail_factor, rule.tail_floor
        few, few_tiled = rule.tail_few, rule.tail_few_tiled  # by the kernel that would run
        tail, tail_from = rule.tail or long, rule.tail_from

        def choose(n_lists, n_elements, content_bytes, longest=None, n_long=None):
            if n_lists <= 0:
                return None
            tiled = content_bytes >= short_from
            if longest is None:  # the mean alone
                if n_elements < below * n_lists:
                    return short if tiled else "naive"
            elif (longest * n_lists <= max(factor * n_elements, floor * n_lists)
                  or (n_long is not None and n_long * longest <= n_elements * (
                      few_tiled if tiled and short == "tiled" else few))):
                if n_elements < (bounded if tiled else below) * n_lists:
                    return short if tiled else "naive"
            else:  # a long tail: one thread (or lane, staged) per list would wait on it
                if tail_from and (n_long is None or n_long < tail_from * n_lists):
                    return long
                return tail
            if staged_from * n_lists <= n_elements < staged_below * n_lists:
                return "staged"
            return long
        return choose

    def per_list_role(self, op: str, n_lists: int, n_elements: int,
                      dtype: str | None = None, longest: int | None = None,
                      n_long: int | None = None) -> str | None:
        """``per_list_chooser``'s answer for these lists (without a dtype: no size bound;
        ``longest``: the longest list, ``n_long`` the long lists, where known)."""
        content_bytes = n_elements * np.dtype(dtype).itemsize if dtype is not None else math.inf
        return self.per_list_chooser(op, dtype)(n_lists, n_elements, content_bytes, longest,
                                                n_long)

    def uses_per_list_unit(self, op: str) -> bool:
        """Whether some input of ``op`` may run a kernel of the naive unit."""
        return bool(self.strategy.flatten and (self.per_list(op, 1, 0)
                                               or self.long_list_kernel(op) != "flat"))

    def per_list_plan(self) -> "Plan":
        """This plan with the naive unit's strategy (where the per-list kernels live)."""
        return replace(self, strategy=STRATEGIES["naive"])

    def launch_of(self, role: str, op: str | None = None) -> Launch:
        """The launch configuration of ``role`` (``"role:op"`` rows override per op)."""
        if op is not None and f"{role}:{op}" in self.launch:
            return self.launch[f"{role}:{op}"]
        config = self.launch.get(role)
        # one shared default: building one per call cost about 3 us per family launch
        return _DEFAULT_LAUNCH if config is None else config

    @property
    def content_role(self) -> str:
        """The pass that reads the content; its launch configuration is compiled into
        every kernel of the unit (block size, items per thread)."""
        st = self.strategy
        return st.passes[1] if st.name == "split" else st.passes[0]


def plan(arch: str, strategy: str | None = None, launch: dict | str | None = None,
         short_lists: float | dict | None = None, per_list_kernel: str | None = None,
         long_list_kernel: str | None = None, family_per_list: dict | None = None,
         staged_lists: dict | tuple | None = None, few_long: float | None = None,
         tail_lists: dict | str | None = None) -> Plan:
    """The strategy and launch configuration for ``arch`` after overrides (argument, then
    environment, then the table). A ``short_lists`` override (one threshold, or a table
    like the row's) holds for both short-list kernels; one of 0 (always flattened) also
    clears the families' per-list windows; ``family_per_list`` replaces them;
    ``staged_lists`` (a ``(from, below)`` band, a table of them, or ``()``: never) replaces
    the row's bands of the staged kernel; ``few_long`` the share of the elements up to
    which counted long lists are no long tail (0: any long list is); ``tail_lists`` (a
    kernel of TAIL_KERNELS, or a table like the row's) the kernel of a long tail."""
    row = arch_row(arch)
    if short_lists is None and os.environ.get("GPUEXEC_GPU_SHORT_LISTS"):
        short_lists = float(os.environ["GPUEXEC_GPU_SHORT_LISTS"])
    if short_lists is None:
        thresholds = dict(row.short_lists)
    else:  # one threshold, or a table of them like the row's
        thresholds = ({k: float(v) for k, v in short_lists.items()}
                      if isinstance(short_lists, dict) else {"*": float(short_lists)})
    if staged_lists is None:
        staged = dict(row.staged_lists)
    else:  # one band, or a table of them like the row's (() or {}: never)
        staged = (dict(staged_lists) if isinstance(staged_lists, dict)
                  else {"*": tuple(staged_lists)} if staged_lists else {})
    name = strategy or os.environ.get("GPUEXEC_GPU_STRATEGY") or row.strategy
    if name not in STRATEGIES:
        raise ValueError(f"unknown GPU strategy {name!r}; known: {', '.join(STRATEGIES)}")
    configs = dict(row.launch)
    overrides = {}
    env = os.environ.get("GPUEXEC_GPU_LAUNCH")
    if env:
        overrides.update(_parse_launch(env))
    if isinstance(launch, str):
        launch = _parse_launch(launch)
    for role, fields in (launch or {}).items():
        overrides.setdefault(role, {}).update(fields)
    for role, fields in overrides.items():
        configs[role] = replace(configs.get(role, Launch()), **fields)
    kernels = _kernel_choice(row.per_list_kernels, per_list_kernel,
                             "GPUEXEC_GPU_PER_LIST_KERNEL", PER_LIST_KERNELS, "per-list")
    longs = _kernel_choice(row.long_list_kernels, long_list_kernel,
                           "GPUEXEC_GPU_LONG_LIST_KERNEL", LONG_LIST_KERNELS, "long-list")
    windows = dict(row.family_per_list)
    if short_lists is not None and not isinstance(short_lists, dict) and float(short_lists) == 0:
        windows = {}
    if family_per_list is not None:
        windows = dict(family_per_list)
    # one window or several (the table and callers may give either): tuples from here on
    windows = {f: (w if isinstance(w, tuple) else (w,)) for f, w in windows.items()}
    # a per-list kernel named by the caller runs on every input; the table's bound is for
    # the table's choice
    chosen = per_list_kernel or os.environ.get("GPUEXEC_GPU_PER_LIST_KERNEL")
    tiled = dict(row.tiled_lists) if short_lists is None else {}  # an override holds for all
    # a streaming kernel named by the caller runs on long tails too (tests and benchmarks
    # compare one kernel on every input), and one named for tails on every tail; else the
    # row's, from its share of long lists
    tail_from = 0.0
    if tail_lists is None and chosen in TAIL_KERNELS:
        tails = {"*": chosen}
    elif tail_lists is None:
        tails, tail_from = dict(row.tail_lists), row.tail_from
    else:
        tails = {"*": tail_lists} if isinstance(tail_lists, str) else dict(tail_lists)
    for kernel in tails.values():
        if kernel not in TAIL_KERNELS:
            raise ValueError(f"unknown long-tail kernel {kernel!r}; known: "
                             f"{', '.join(TAIL_KERNELS)}")
    return Plan(arch, row.vendor, row.wave, STRATEGIES[name], configs, thresholds, kernels,
                longs, windows, 0 if chosen else row.tiled_from_bytes, staged, tiled,
                row.tail if few_long is None else (*row.tail[:2], float(few_long), float(few_long)),
                tails, tail_from)


def _per_op(table: dict, op: str, default, dtype: str | None = None):
    """``table``'s entry for ``"op:dtype"``, else for ``op``, else its ``"*"`` entry, else
    ``default``."""
    if dtype is not None and f"{op}:{dtype}" in table:
        return table[f"{op}:{dtype}"]
    return table.get(op, table.get("*", default))


def _kernel_choice(row_table: dict, argument: str | None, env: str, known: tuple,
                   what: str) -> dict:
    """op -> kernel: the argument, then the environment variable ``env`` (one kernel for
    every op), then the table row; every name checked against ``known``."""
    chosen = argument or os.environ.get(env)
    table = dict(row_table) if not chosen else {"*": chosen}
    for kernel in table.values():
        if kernel not in known:
            raise ValueError(f"unknown {what} kernel {kernel!r}; known: {', '.join(known)}")
    return table


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
        # the other per-list kernels the flattened strategies may use (tiled: one list per
        # thread, the block's content staged through shared memory; hybrid: short lists
        # one per lane, long ones streamed by the wave); "naive" itself stays the direct
        # port the benchmarks compare with
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
    if st.name == "naive":  # the hybrid kernel's own bound and tile width
        hyb = p.launch_of("hybrid", op.device)
        defines["GK_HYBRID_BLOCK"] = hyb.block
        defines["GK_HYBRID_MIN_BLOCKS"] = hyb.min_blocks
        defines["GK_HYBRID_ITEM_BYTES"] = hyb.item_bytes
        defines["GK_HYBRID_LANE_FOLD"] = hyb.lane_fold
        defines["GK_HYBRID_INTERLEAVE"] = hyb.interleave
        defines["GK_HYBRID_SHORT_BATCH"] = hyb.short_batch
        defines["GK_HYBRID_GROUP"] = hyb.group
        defines["GK_HYBRID_STAGE"] = hyb.stage_bytes  # the staged kernel
        defines["GK_HYBRID_STAGE_MIN"] = hyb.stage_min
        defines["GK_HYBRID_STAGE_MAX"] = hyb.stage_max
        defines["GK_STREAM_LOAD"] = hyb.stream_load
        # the shared kernel: the hybrid one's shape, its own block and bound
        shared = p.launch_of("shared", op.device)
        defines["GK_SHARED_BLOCK"] = shared.block
        defines["GK_SHARED_MIN_BLOCKS"] = shared.min_blocks
    promises: dict[str, set] = {}
    kernels: list[str] = []
    for role, names in kernel_names(op, st).items():
        for name in names:
            kernels.append(name)
            pr = set()
            if p.wave == 64:
                pr.add("wave64")
            flat_pass = st.flatten and role in ("split", "fused")
            # the tiled and hybrid kernels read content with 128-bit loads
            if (st.vec_bytes == 16 and flat_pass) or role in ("tiled", "hybrid", "staged",
                                                               "shared"):
                pr.add("vector_load_128")
            # and the hybrid kernel issues all of a tile's loads before it folds the first
            # (checked in nvcc's SASS: at 64 registers ptxas was seen to order them
            # either way, 12 points of copy bandwidth apart)
            if role in ("hybrid", "shared") and p.vendor == "cuda":
                pr.add("tile_loads_first")
            promises[name] = pr
    return CompileUnit(REDUCE_SOURCE, defines, kernels, promises, st.name, op.contract)


def compile_units(arch: str) -> list[CompileUnit]:
    """Every compile unit the runtime may build for ``arch``: each reduction and each kernel
    family (``families.py``) under each strategy
    (the default one and the alternatives tests and benchmarks select), with the launch
    configuration of the table row (environment overrides ignored: the gates check the
    table itself)."""
    from gpuexec.kernels.gpu import families

    row = arch_row(arch)
    units = []
    for name in STRATEGIES:
        p = Plan(arch, row.vendor, row.wave, STRATEGIES[name], dict(row.launch))
        units.extend(unit_for(p, op) for op in OPS)
    # the indexing and structure families (families.py), one unit per family x strategy
    return units + families.compile_units(arch)
