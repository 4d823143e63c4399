"""The kernel families beyond the reductions (indexing, structure), described for the
GPU policy table: which extern "C" kernels each strategy launches, the compile units
that define them and what their machine code promises.

A family is compiled from one portable source (``src/indexing.cu`` or
``src/structure.cu``, both including ``src/flat.cuh``) with ``GK_FAMILY_<NAME>`` and the
strategy's ``GK_VARIANT_*``; one unit per (family, strategy), so a call compiles only
what it runs. What the strategies mean for each family (the same rule as the
reductions: lean passes at full occupancy for 64-lane wavefronts, fewer launches for
32-lane warps, both valid everywhere):

  carry         split/fused: runs of outputs per thread, 128-bit index loads and output
                stores, one 128-bit load for a group of indices that is an aligned run;
                naive: one element per thread.
  offsets       compact_offsets: split = tile sums, one-block scan, down pass (three
                launches, no atomics); fused = one pass with decoupled look-back.
                rebase_offsets, offsets_summary (the API layer's offsets check): one
                flat pass in every strategy.
  gather        list_carry_index, local_to_global, missing_repeat: flattened over the
                output positions; split = partition pass + gather pass, fused = the gather
                pass searches its tile's first list; naive = one thread per list (the
                per-list kernel, which every strategy also picks when the lists hold fewer
                than PERLIST_BELOW positions on average).
  filter        filter, filter_missing: split = partition, tile counts, one-block scan,
                fill (exactly sized output); fused = one look-back pass that counts, scans
                and fills; naive = per-list count, list scan, per-list fill.
  local_index   flattened (split: partition + pass; fused: searching pass); naive per list
                (and per list in every strategy below PERLIST_BELOW elements per list).
  combinations  combinations (n = 2, 3) and cartesian: a list scan of the tuple counts
                (split: three passes; fused: look-back) and a fill flattened over the
                output tuples (threads unrank their first tuple, then step); naive: one
                thread per list.
  sort          argsort/sort, stable, by element width: a classify pass buckets the lists;
                lists of <= RANK_MAX elements are ranked by one thread per element
                (flattened), medium lists (<= BITONIC_MAX) bitonic-sorted in shared memory
                by one block each, the largest sorted in BITONIC_MAX chunks and merged
                with merge-path passes. split: rank and bitonic are separate launches;
                fused: one launch runs both (rank tiles and bitonic blocks in one grid);
                naive: one thread per list (merge sort through global memory).

Where a window of the policy table holds (``family_per_list``: short lists below a size,
or the filter's many lists of about five), the flattened strategies run the naive unit's
per-list kernels instead (sort, local_index, filter, combinations).

Host-side launch logic lives in ``launchers.py``; ``units.compile_units`` lists the
families' compile units beside the reductions'.
"""

from __future__ import annotations

from dataclasses import dataclass

INDEXING_SOURCE = "indexing.cu"
STRUCTURE_SOURCE = "structure.cu"

#: element widths of the width-generic kernels (carry, sort): bytes -> suffix
WIDTHS = {1: "b8", 2: "b16", 4: "b32", 8: "b64"}

# tile constants shared with the sources (flat.cuh / indexing.cu / structure.cu)
ITEMS = 8           # GK_ITEMS: flattened positions per thread
FILTER_ITEMS = 16   # mask positions per thread in filter
LIST_ITEMS = 4      # lists per thread in list scans
RANK_MAX = 32       # sort: lists up to this length are ranked by one thread per element
BITONIC_MAX = 2048  # sort: lists up to this length are sorted in shared memory
MERGE_ITEMS = 8     # sort: merged outputs per thread in a merge-path pass
#: gathers over fewer positions than this many per list run one thread per list (the
#: per-list kernel) in every strategy: a flattened tile of lists of about one position
#: spends more on finding its lists than on the positions (H200: missing_repeat with one
#: pick per list, 20M lists: 0.40 ms one thread per list, 0.56 ms fused, 0.61 ms split)
PERLIST_BELOW = 2


def carry_items(itemsize: int) -> int:
    """Outputs per thread of gk_carry_*_vec (mirrors carry_shape in indexing.cu)."""
    return 2 if itemsize == 8 else (4 if itemsize == 4 else 16 // itemsize)


@dataclass(frozen=True)
class Family:
    name: str                      # family (and launch-table role) name
    source: str                    # file under src/
    define: str                    # GK_FAMILY_*
    contracts: tuple               # Backend contract names it serves
    kernels: dict                  # strategy -> tuple of extern "C" names in its unit
    vector_loads: frozenset        # kernels reading their inputs with 128-bit loads


def _w(fmt: str) -> tuple:
    return tuple(fmt.format(w=w) for w in WIDTHS.values())


_FILTERS = ("filter", "filter_missing")
_GATHER_PERLIST = ("gk_list_carry_index_perlist", "gk_local_to_global_perlist",
                   "gk_missing_repeat_perlist")
_SORT_SHARED = _w("gk_sort_chunks_{w}") + _w("gk_argsort_merge_{w}") + _w("gk_sort_merge_{w}")

FAMILIES: tuple[Family, ...] = (
    Family("carry", INDEXING_SOURCE, "GK_FAMILY_CARRY", ("carry",),
           {"split": _w("gk_carry_{w}_vec"), "fused": _w("gk_carry_{w}_vec"),
            "naive": _w("gk_carry_{w}_naive")},
           frozenset(_w("gk_carry_{w}_vec"))),
    Family("offsets", INDEXING_SOURCE, "GK_FAMILY_OFFSETS",
           ("compact_offsets", "rebase_offsets", "offsets_summary"),
           {"split": ("gk_rebase_offsets", "gk_offsets_summary", "gk_scan_tiles",
                      "gk_compact_tiles", "gk_compact_down"),
            "fused": ("gk_rebase_offsets", "gk_offsets_summary", "gk_compact_fused"),
            "naive": ("gk_rebase_offsets", "gk_offsets_summary", "gk_scan_tiles",
                      "gk_compact_tiles", "gk_compact_down")},
           frozenset({"gk_rebase_offsets", "gk_offsets_summary", "gk_compact_tiles",
                      "gk_compact_down", "gk_compact_fused"})),
    Family("gather", INDEXING_SOURCE, "GK_FAMILY_GATHER",
           ("list_carry_index", "local_to_global", "missing_repeat"),
           {"split": ("gk_partition", "gk_list_carry_index_split", "gk_local_to_global_split",
                      "gk_missing_repeat_split") + _GATHER_PERLIST,
            "fused": ("gk_list_carry_index_fused", "gk_local_to_global_fused",
                      "gk_missing_repeat_fused") + _GATHER_PERLIST,
            "naive": _GATHER_PERLIST},
           frozenset({"gk_local_to_global_split", "gk_missing_repeat_split",
                      "gk_local_to_global_fused", "gk_missing_repeat_fused"})),
    Family("filter", INDEXING_SOURCE, "GK_FAMILY_FILTER", _FILTERS,
           {"split": ("gk_partition", "gk_scan_tiles") + tuple(
               f"gk_{f}_{r}" for f in _FILTERS for r in ("tiles", "fill")),
            "fused": tuple(f"gk_{f}_fused" for f in _FILTERS),
            "naive": ("gk_scan_tiles", "gk_counts_tiles", "gk_counts_down") + tuple(
                f"gk_{f}_{r}_naive" for f in _FILTERS for r in ("count", "fill"))},
           frozenset(f"gk_{f}_{r}" for f in _FILTERS for r in ("tiles", "fill", "fused"))),
    Family("local_index", STRUCTURE_SOURCE, "GK_FAMILY_LOCAL_INDEX", ("local_index",),
           {"split": ("gk_partition", "gk_local_index_split", "gk_local_index_perlist"),
            "fused": ("gk_local_index_fused", "gk_local_index_perlist"),
            "naive": ("gk_local_index_perlist",)},
           frozenset()),
    Family("combinations", STRUCTURE_SOURCE, "GK_FAMILY_COMBINATIONS",
           ("combinations", "cartesian"),
           {"split": ("gk_partition", "gk_scan_tiles", "gk_choose_tiles", "gk_choose_down",
                      "gk_product_tiles", "gk_product_down", "gk_combinations_split",
                      "gk_cartesian_split"),
            "fused": ("gk_choose_fused", "gk_product_fused", "gk_combinations_fused",
                      "gk_cartesian_fused"),
            "naive": ("gk_scan_tiles", "gk_choose_tiles", "gk_choose_down", "gk_product_tiles",
                      "gk_product_down", "gk_combinations_naive", "gk_cartesian_naive")},
           frozenset({"gk_choose_tiles", "gk_choose_down", "gk_choose_fused",
                      "gk_product_tiles", "gk_product_down", "gk_product_fused"})),
    Family("sort", STRUCTURE_SOURCE, "GK_FAMILY_SORT", ("argsort", "sort"),
           {"split": ("gk_sort_classify", "gk_partition") + _w("gk_argsort_rank_{w}")
            + _w("gk_sort_rank_{w}") + _w("gk_argsort_block_{w}") + _w("gk_sort_block_{w}")
            + _SORT_SHARED,
            "fused": ("gk_sort_classify",) + _w("gk_argsort_fused_{w}") + _w("gk_sort_fused_{w}")
            + _SORT_SHARED,
            "naive": _w("gk_argsort_naive_{w}") + _w("gk_sort_naive_{w}")},
           frozenset()),
)
BY_NAME = {f.name: f for f in FAMILIES}
