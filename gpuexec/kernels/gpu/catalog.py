"""What the GPU reduction engine can run, independent of any architecture: the ops and
their dtypes, the strategies (how a unit's kernels map work), the per-list kernels, the
launch configuration of one kernel role and the windows a kernel family's per-list
kernels may take. The policy (policy.py) picks among these per architecture."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from gpuexec.kernels.backend import ALL_DTYPES, NUMBER_DTYPES

SRC_DIR = os.path.join(os.path.dirname(__file__), "src")
REDUCE_SOURCE = "reduce.cu"


@dataclass(frozen=True)
class Op:
    """One reduction: the backend contract name, its device name and its dtypes."""

    contract: str          # name in the Backend kernel table (``reduce_sum``)
    device: str            # name inside extern "C" symbols (``sum`` -> gk_sum_float64_flat_fused)
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


#: GK_STREAM_LOAD in the reduction sources: the PTX of a streamed list's 128-bit loads on CUDA
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
    # per_wave: a wave streaming a long list keeps one accumulator per lane across its tiles
    # and merges the lanes once (0: an ordered wave reduction per tile)
    lane_fold: int = 1
    # per_wave, with lane_fold: the wave's lanes read consecutive 16-byte vectors (one
    # contiguous run per load instruction) instead of a contiguous stretch each
    interleave: int = 0
    # per_wave: elements of a short list (one per lane) loaded before any is folded
    short_batch: int = 1
    # per_wave, with lane_fold: lanes per medium list (a long list of at most half a
    # wave-tile), the wave reducing wave-width / group of them at a time; above 4, those
    # that fit one tile of 4 lanes take 4 (1: the whole wave streams every long list)
    group: int = 1
    # per_wave_staged (the per_wave row): bytes of shared memory per wave through
    # which a batch of lists, half of them at least ``stage_min`` long and none longer
    # than ``stage_max``, is read as one contiguous run
    stage_bytes: int = 4096
    stage_min: int = 16
    stage_max: int = 96
    # per_wave and long_tail: the cache hint of the 128-bit loads that stream a list
    # (STREAM_LOADS); CUDA only, HIP reads plainly
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


DEFAULT_LAUNCH = Launch()  # the configuration of a role the table leaves out


@dataclass(frozen=True)
class Strategy:
    name: str
    define: str                # GK_VARIANT_*
    passes: tuple[str, ...]    # kernel roles launched per reduction, in order
    flatten: bool              # threads walk the flat content rather than one list each
    vec_bytes: int             # width of content loads (16 = 128-bit)


STRATEGIES: dict[str, Strategy] = {
    "split": Strategy("split", "GK_VARIANT_SPLIT", ("partition", "flat_split", "flat_fixup"),
                      True, 16),
    "fused": Strategy("fused", "GK_VARIANT_FUSED", ("flat_fused",), True, 16),
    "naive": Strategy("naive", "GK_VARIANT_NAIVE", ("per_thread",), False, 8),
}


@dataclass(frozen=True)
class ListWindow:
    """Inputs on which a kernel family runs its per-list kernels (the naive strategy's
    unit): mean list length in ``[mean_from, mean_below)``, a list count in ``[lists_from, lists_below)``
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


# the per-list kernels, by list-length class (roles in the naive strategy's compile unit)
PER_LIST_KERNELS = ("per_thread", "per_thread_staged", "per_wave", "per_wave_staged", "long_tail")
# what may reduce a long tail
TAIL_KERNELS = ("per_wave", "long_tail")
# "flat": the strategy's own flattened passes; "per_wave": the per-wave kernel
LONG_LIST_KERNELS = ("flat", "per_wave")


#: the unit of the families' list-count windows in the policy table (2**16)
SMALL_LISTS = 65_536
