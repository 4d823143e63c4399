"""Host side of the indexing and structure kernel families: the buffer-level contract
(``gpuexec/kernels/backend.py``; same names and results as the CPU kernels) turned into
launches of the kernels in ``src/indexing.cu`` and ``src/structure.cu``, with the variant
the backend's strategy picks (``families.py``).

``Launchers(device)`` works on any object that offers what ``GPUBackend`` offers:
``nplike`` (the array module), ``asarray(x)``, ``int64(x)`` (contiguous int64),
``alloc(shape, dtype, kernel)`` (raises
``DeviceOutOfMemory``), ``launch(name, function, grid, block, args)`` (records the launch
in ``gk.stats()``), ``family_functions(family)`` ({extern "C" name: function} of the
family's compiled unit), ``family_block(family)`` and ``strategy`` (its name). Host
synchronisation happens only where an output must be sized or the contract returns a
count to the host (as on the CPU).
"""

from __future__ import annotations

import numpy as np

from gpuexec.kernels.backend import ALL_DTYPES
from gpuexec.kernels.gpu import families as F

_I64 = np.dtype(np.int64)
_U8 = np.dtype(np.uint8)
_U64 = np.dtype(np.uint64)
_UINT_OF_WIDTH = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def ptr(a) -> int:
    """Device (or, for host arrays, host) address of an array's first element."""
    data = a.data
    return data.ptr if hasattr(data, "ptr") else a.ctypes.data


def _p(a) -> int:
    return 0 if a is None else ptr(a)


def _args(items) -> tuple:
    """Launch arguments (plain ints, one 8-byte kernel parameter each): ints as int64,
    arrays as pointers."""
    return tuple(int(x) if isinstance(x, (int, np.integer)) else _p(x) for x in items)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Launchers:
    """The contract functions of the indexing and structure families on one device."""

    def __init__(self, device):
        self.dev = device
        self.xp = device.nplike

    # -- buffers -----------------------------------------------------------------------
    def _i64(self, a):
        return self.dev.int64(a)

    def _bytes(self, a):
        """A bool/uint8 buffer as contiguous uint8 (no copy for contiguous bools)."""
        a = self.xp.ascontiguousarray(self.dev.asarray(a))
        if a.dtype.kind == "b":
            return a.view(_U8)
        return a.astype(np.bool_).view(_U8) if a.dtype != _U8 else a

    def _zeros(self, n, dtype, kernel):
        out = self.dev.alloc(n, dtype, kernel)
        out.fill(0)
        return out

    def _run(self, family: str, name: str, grid: int, args: tuple, block: int | None = None,
             per_list: bool = False):
        fn = self.dev.family_functions(family, per_list)[name]
        self.dev.launch(name, fn, int(grid), block or self.dev.family_block(family), args)

    def _variant(self) -> str:
        return self.dev.strategy

    # -- carry -------------------------------------------------------------------------
    def carry(self, values, index):
        values = self.xp.ascontiguousarray(self.dev.asarray(values))
        index = self._i64(index)
        n = index.shape[0]
        w = values.dtype.itemsize
        # the table's window: below a size, one element per thread (the naive unit's kernel)
        per_list = self.dev.plan.family_runs_per_list("carry", n, n)
        naive = self._variant() == "naive" or per_list
        name = f"gk_carry_{F.WIDTHS[w]}_{'naive' if naive else 'vec'}"
        out = self.dev.alloc(n, values.dtype, name)
        if n == 0:
            return out
        raw = values.view(_UINT_OF_WIDTH[w])
        per = 1 if naive else F.carry_items(w)
        block = self.dev.family_block("carry")
        self._run("carry", name, _cdiv(n, block * per),
                  (_p(raw), _p(index), int(n), _p(out)), per_list=per_list)
        return out

    # -- offsets -----------------------------------------------------------------------
    def _list_scan(self, family: str, what: str, n: int, count_args: tuple,
                   per_list: bool = False):
        """offsets int64[n+1] = exclusive running sum of the per-list counts the
        ``gk_<what>_*`` kernels compute from ``count_args`` (``per_list``: the family's
        naive unit, whose scan is the three-pass one)."""
        block = self.dev.family_block(family)
        ntiles = _cdiv(n + 1, block * F.LIST_ITEMS)
        out = self.dev.alloc(n + 1, _I64, f"gk_{what}")
        if self._variant() == "fused" and not per_list:
            status = self._zeros(ntiles + 1, _U64, f"gk_{what}_fused")
            self._run(family, f"gk_{what}_fused", ntiles,
                      count_args + (int(n), _p(status), _p(out)))
            return out
        sums = self.dev.alloc(ntiles + 1, _I64, f"gk_{what}_tiles")
        self._run(family, f"gk_{what}_tiles", ntiles, count_args + (int(n), _p(sums)),
                  per_list=per_list)
        self._run(family, "gk_scan_tiles", 1, (_p(sums), int(ntiles)), per_list=per_list)
        self._run(family, f"gk_{what}_down", ntiles, count_args + (int(n), _p(sums), _p(out)),
                  per_list=per_list)
        return out

    def compact_offsets(self, starts, stops):
        starts, stops = self._i64(starts), self._i64(stops)
        n = starts.shape[0]
        if n == 0:
            return self._zeros(1, _I64, "gk_compact")
        return self._list_scan("offsets", "compact", n, (_p(starts), _p(stops)))

    def rebase_offsets(self, offsets):
        offsets = self._i64(offsets)
        length = offsets.shape[0]
        out = self.dev.alloc(length, _I64, "gk_rebase_offsets")
        if length == 0:
            return out, 0
        n_bad = self._zeros((), _I64, "gk_rebase_offsets")
        block = self.dev.family_block("offsets")
        self._run("offsets", "gk_rebase_offsets", _cdiv(length, block * F.ITEMS),
                  (_p(offsets), int(length), _p(out), _p(n_bad)), block)
        # left on the device: reading it is a host sync, and the API layer's callers have
        # checked the order already (validate.offsets)
        return out, n_bad

    def offsets_summary(self, offsets, long_factor, long_floor):
        offsets = self._i64(offsets)
        length = offsets.shape[0]
        sums = self._zeros(5, _I64, "gk_offsets_summary")
        block = self.dev.family_block("offsets")
        factor_bits = int(np.array(long_factor, dtype=np.float64).view(np.int64))
        self._run("offsets", "gk_offsets_summary", _cdiv(length, block * F.ITEMS),
                  (_p(offsets), int(length), factor_bits, int(long_floor), _p(sums)), block)
        return tuple(int(v) for v in sums.get())  # the call's one host read

    # -- gathers flattened over list positions ---------------------------------------------
    def _flat(self, family, kernel, off, n, total, before, after, tile_items=F.ITEMS,
              per_list=None):
        """Launch ``gk_<kernel>_<variant>`` over the ``total`` positions of the lists of
        ``off`` with arguments ``before + (P,) + after`` (split: P from the partition
        pass; fused: P unused, the kernel searches; naive: one thread per list). With
        ``per_list`` (a kernel name) the naive strategy, and every strategy when the lists
        are shorter than PERLIST_BELOW on average, run that one-thread-per-list kernel;
        where a window of the strategy table holds, every strategy runs the naive unit's
        per-list kernel."""
        block = self.dev.family_block(family)
        variant = self._variant()
        name = f"gk_{kernel}_{variant}"
        args = _args(before) + (_p(None),) + _args(after)
        if variant == "naive" or (per_list is not None and total < F.PERLIST_BELOW * n):
            self._run(family, per_list or name, _cdiv(n, block), args)
            return
        if self.dev.plan.family_runs_per_list(family, n, total):
            self._run(family, per_list or f"gk_{kernel}_naive", _cdiv(n, block), args,
                      per_list=True)
            return
        tile = block * tile_items
        ntiles = max(1, _cdiv(total, tile))
        P = None
        if variant == "split":
            P = self.dev.alloc(ntiles, _I64, "gk_partition")
            self._run(family, "gk_partition", _cdiv(ntiles, block),
                      (_p(off), int(n), int(tile), int(ntiles), _p(P)))
        self._run(family, name, ntiles, _args(before) + (_p(P),) + _args(after))

    def list_carry_index(self, starts, offsets):
        starts, offsets = self._i64(starts), self._i64(offsets)
        n = starts.shape[0]
        total = int(offsets[-1] - offsets[0]) if n else 0
        out = self.dev.alloc(total, _I64, f"gk_list_carry_index_{self._variant()}")
        if total == 0:
            return out
        self._flat("gather", "list_carry_index", offsets, n, total,
                   (starts, offsets, n), (out,), per_list="gk_list_carry_index_perlist")
        return out

    def _local_to_global(self, kernel, starts, stops, index_offsets, index, valid):
        starts, stops = self._i64(starts), self._i64(stops)
        ioff, index = self._i64(index_offsets), self._i64(index)
        n = starts.shape[0]
        total = int(ioff[-1] - ioff[0]) if n else 0
        out = self.dev.alloc(total, _I64, f"gk_{kernel}_{self._variant()}")
        if total == 0:
            return out, 0
        n_bad = self._zeros(1, _I64, f"gk_{kernel}")
        vbytes = None if valid is None else self._bytes(valid)
        self._flat("gather", kernel, ioff, n, total,
                   (starts, stops, ioff, n, index, _p(vbytes)), (out, n_bad),
                   per_list=f"gk_{kernel}_perlist")
        return out, int(n_bad[0])

    def local_to_global(self, starts, stops, index_offsets, index):
        return self._local_to_global("local_to_global", starts, stops, index_offsets, index, None)

    def missing_repeat(self, starts, stops, index_offsets, index, valid):
        return self._local_to_global("missing_repeat", starts, stops, index_offsets, index, valid)

    # -- filter ------------------------------------------------------------------------
    def _filter(self, kind, starts, mask_offsets, mask, valid):
        starts, moff = self._i64(starts), self._i64(mask_offsets)
        n = starts.shape[0]
        if n == 0:
            return self._zeros(1, _I64, f"gk_{kind}"), self.dev.alloc(0, _I64, f"gk_{kind}")
        m = int(moff[-1] - moff[0])
        mbytes = self._bytes(mask)
        vbytes = None if valid is None else self._bytes(valid)
        block = self.dev.family_block("filter")
        variant = self._variant()
        offsets = self.dev.alloc(n + 1, _I64, f"gk_{kind}")
        # the strategy table's window: many lists of about five run one per thread
        per_list = self.dev.plan.family_runs_per_list("filter", n, m)
        if variant == "naive" or per_list:
            counts = self.dev.alloc(n, _I64, f"gk_{kind}_count_naive")
            self._run("filter", f"gk_{kind}_count_naive", _cdiv(n, block),
                      (_p(moff), int(n), _p(mbytes), _p(vbytes), _p(counts)), per_list=per_list)
            offsets = self._list_scan("filter", "counts", n, (_p(counts),), per_list)
            k = int(offsets[n])
            carry = self.dev.alloc(k, _I64, f"gk_{kind}_fill_naive")
            self._run("filter", f"gk_{kind}_fill_naive", _cdiv(n, block),
                      (_p(starts), _p(moff), int(n), _p(mbytes), _p(vbytes), _p(offsets),
                       _p(carry)), per_list=per_list)
            return offsets, carry
        tile = block * F.FILTER_ITEMS
        ntiles = max(1, _cdiv(m, tile))
        if variant == "fused":
            status = self._zeros(ntiles + 1, _U64, f"gk_{kind}_fused")
            carry = self.dev.alloc(m, _I64, f"gk_{kind}_fused")  # sized by the mask
            self._run("filter", f"gk_{kind}_fused", ntiles,
                      (_p(starts), _p(moff), int(n), _p(mbytes), _p(vbytes), _p(status),
                       _p(offsets), _p(carry)))
            return offsets, carry[: int(offsets[n])]
        P = self.dev.alloc(ntiles, _I64, "gk_partition")
        self._run("filter", "gk_partition", _cdiv(ntiles, block),
                  (_p(moff), int(n), int(tile), int(ntiles), _p(P)))
        sums = self.dev.alloc(ntiles + 1, _I64, f"gk_{kind}_tiles")
        self._run("filter", f"gk_{kind}_tiles", ntiles,
                  (_p(moff), int(n), _p(mbytes), _p(vbytes), _p(sums)))
        self._run("filter", "gk_scan_tiles", 1, (_p(sums), int(ntiles)))
        k = int(sums[ntiles])
        carry = self.dev.alloc(k, _I64, f"gk_{kind}_fill")
        self._run("filter", f"gk_{kind}_fill", ntiles,
                  (_p(starts), _p(moff), int(n), _p(mbytes), _p(vbytes), _p(P), _p(sums),
                   _p(offsets), _p(carry)))
        return offsets, carry

    def filter(self, starts, stops, mask_offsets, mask):  # noqa: A003 - the contract's name
        return self._filter("filter", starts, mask_offsets, mask, None)

    def filter_missing(self, starts, stops, mask_offsets, mask, valid):
        return self._filter("filter_missing", starts, mask_offsets, mask, valid)

    # -- local_index -------------------------------------------------------------------
    def local_index(self, offsets):
        offsets = self._i64(offsets)
        n = offsets.shape[0] - 1
        total = int(offsets[-1] - offsets[0]) if n > 0 else 0
        out = self.dev.alloc(total, _I64, f"gk_local_index_{self._variant()}")
        if total == 0:
            return out
        self._flat("local_index", "local_index", offsets, n, total, (offsets, n), (out,),
                   per_list="gk_local_index_perlist")
        return out

    # -- combinations, cartesian ---------------------------------------------------------
    def combinations(self, starts, stops, n, replacement, local):
        if n not in (2, 3):
            raise ValueError(f"combinations kernel builds pairs and triplets (n=2, 3), not n={n}")
        starts, stops = self._i64(starts), self._i64(stops)
        lists = starts.shape[0]
        repl, loc = int(bool(replacement)), int(bool(local))
        if lists == 0:
            return (self._zeros(1, _I64, "gk_choose"),) + tuple(
                self.dev.alloc(0, _I64, "gk_combinations") for _ in range(n))
        offsets = self._list_scan("combinations", "choose", lists,
                                  (_p(starts), _p(stops), int(n), int(repl)))
        total = int(offsets[lists])
        name = f"gk_combinations_{self._variant()}"
        idx = [self.dev.alloc(total, _I64, name) for _ in range(n)]
        if total:
            self._flat("combinations", "combinations", offsets, lists, total,
                       (starts, stops, n, repl, loc, offsets, lists),
                       (idx[0], idx[1], idx[2] if n == 3 else None))
        return (offsets, *idx)

    def cartesian(self, starts_a, stops_a, starts_b, stops_b, local):
        sa, ta = self._i64(starts_a), self._i64(stops_a)
        sb, tb = self._i64(starts_b), self._i64(stops_b)
        if sa.shape[0] != sb.shape[0]:
            raise ValueError(f"cartesian: starts_a has {sa.shape[0]} lists, "
                             f"starts_b {sb.shape[0]}")
        lists = sa.shape[0]
        if lists == 0:
            return (self._zeros(1, _I64, "gk_product"), self.dev.alloc(0, _I64, "gk_cartesian"),
                    self.dev.alloc(0, _I64, "gk_cartesian"))
        offsets = self._list_scan("combinations", "product", lists,
                                  (_p(sa), _p(ta), _p(sb), _p(tb)))
        total = int(offsets[lists])
        name = f"gk_cartesian_{self._variant()}"
        ia, ib = self.dev.alloc(total, _I64, name), self.dev.alloc(total, _I64, name)
        if total:
            self._flat("combinations", "cartesian", offsets, lists, total,
                       (sa, ta, sb, tb, int(bool(local)), offsets, lists), (ia, ib))
        return offsets, ia, ib

    # -- argsort, sort -------------------------------------------------------------------
    def argsort(self, offsets, values, ascending):
        return self._sort(offsets, values, ascending, positions=True)

    def sort(self, offsets, values, ascending):
        return self._sort(offsets, values, ascending, positions=False)

    def _sort(self, offsets, values, ascending, *, positions):
        offsets = self._i64(offsets)
        values = self.xp.ascontiguousarray(self.dev.asarray(values))
        n = offsets.shape[0] - 1
        total = int(offsets[-1] - offsets[0]) if n > 0 else 0
        w = values.dtype.itemsize
        ws = F.WIDTHS[w]
        what = "argsort" if positions else "sort"
        out = self.dev.alloc(total, _I64 if positions else values.dtype, f"gk_{what}_{ws}")
        if total == 0:
            return out
        raw = values.view(_UINT_OF_WIDTH[w])
        kind = 2 if values.dtype.kind == "f" else (0 if values.dtype.kind == "i" else 1)
        desc = 0 if ascending else 1
        keys = np.uint64 if w == 8 else np.uint32
        block = self.dev.family_block("sort")
        variant = self._variant()
        # the table's window (few short lists): the naive unit's one thread per list
        per_list = self.dev.plan.family_runs_per_list("sort", n, total)
        if variant == "naive" or per_list:
            name = f"gk_{what}_naive_{ws}"
            tmp = [self.dev.alloc(total, dt, name) for dt in (keys, np.uint32, keys, np.uint32)]
            self._run("sort", name, _cdiv(n, block),
                      _args((offsets, n, raw, kind, desc, *tmp, out)), per_list=per_list)
            return out
        stats = self._zeros(4, _I64, "gk_sort_classify")
        ids = self.dev.alloc(n, _I64, "gk_sort_classify")
        self._run("sort", "gk_sort_classify", _cdiv(n, block), _args((offsets, n, stats, ids)))
        n_medium, n_large, longest, large_total = (int(x) for x in self._host(stats))
        ntiles = _cdiv(total, block * F.ITEMS)
        if variant == "split":
            P = self.dev.alloc(ntiles, _I64, "gk_partition")
            self._run("sort", "gk_partition", _cdiv(ntiles, block),
                      _args((offsets, n, block * F.ITEMS, ntiles, P)))
            self._run("sort", f"gk_{what}_rank_{ws}", ntiles,
                      _args((offsets, n, raw, kind, desc, P, out)))
            if n_medium:
                self._run("sort", f"gk_{what}_block_{ws}", n_medium,
                          _args((offsets, n, raw, kind, desc, ids, out)))
        else:
            self._run("sort", f"gk_{what}_fused_{ws}", ntiles + n_medium,
                      _args((offsets, n, raw, kind, desc, ids, ntiles, out)))
        if n_large:
            self._sort_large(offsets, ids[n - n_large:], raw, kind, desc, keys, longest,
                             large_total, what, ws, out)
        return out

    def _host(self, a):
        to_host = getattr(self.dev, "to_host", None)
        return to_host(a) if to_host is not None else np.asarray(a)

    def _sort_large(self, offsets, large_ids, raw, kind, desc, keys, longest, large_total,
                    what, ws, out):
        """Lists longer than BITONIC_MAX: chunks sorted in shared memory, then merge-path
        passes until one run covers the longest list (the last pass writes ``out``)."""
        block = self.dev.family_block("sort")
        ids = self._host(large_ids).astype(np.int64)
        off = self._host(offsets)
        lstart = off[ids]
        llen = off[ids + 1] - lstart
        ltmp = np.zeros(len(ids), np.int64)
        np.cumsum(llen[:-1], out=ltmp[1:])
        lout = lstart - off[0]
        nch = -(-llen // F.BITONIC_MAX)
        chunk_slot = np.repeat(np.arange(len(ids), dtype=np.int64), nch)
        chunk_lo = (np.arange(int(nch.sum()), dtype=np.int64)
                    - np.repeat(np.cumsum(nch) - nch, nch)) * F.BITONIC_MAX
        mtile = block * F.MERGE_ITEMS
        ntm = -(-llen // mtile)
        tile_slot = np.repeat(np.arange(len(ids), dtype=np.int64), ntm)
        tile_d0 = (np.arange(int(ntm.sum()), dtype=np.int64)
                   - np.repeat(np.cumsum(ntm) - ntm, ntm)) * mtile
        d = [self.dev.asarray(np.ascontiguousarray(a)) for a in
             (chunk_slot, chunk_lo, lstart, llen, ltmp, lout, tile_slot, tile_d0)]
        c_slot, c_lo, d_start, d_len, d_tmp, d_out, t_slot, t_d0 = d
        name = f"gk_sort_chunks_{ws}"
        bufs = [self.dev.alloc(large_total, dt, name) for dt in (keys, np.uint32, keys, np.uint32)]
        self._run("sort", name, len(chunk_slot),
                  _args((c_slot, c_lo, d_start, d_len, d_tmp, raw, kind, desc, bufs[0], bufs[1])))
        width, src, dst = F.BITONIC_MAX, bufs[:2], bufs[2:]
        while True:
            final = 2 * width >= longest
            self._run("sort", f"gk_{what}_merge_{ws}", len(tile_slot),
                      _args((t_slot, t_d0, d_start, d_len, d_tmp, d_out, width, src[0], src[1],
                             dst[0], dst[1], int(final), raw, out)))
            if final:
                return
            src, dst = dst, src
            width *= 2




def register(backend) -> None:
    """Put the family kernels into ``backend``'s kernel table (each records its own
    launches in ``gk.stats()``)."""
    fams = Launchers(backend)
    for dt in ALL_DTYPES:
        for name in ("carry", "argsort", "sort"):
            backend.register(name, (dt,), getattr(fams, name), count=False)
    for name in ("compact_offsets", "rebase_offsets", "offsets_summary", "list_carry_index",
                 "local_to_global", "missing_repeat", "filter", "filter_missing",
                 "local_index", "combinations", "cartesian"):
        backend.register(name, (), getattr(fams, name), count=False)
    backend.families = fams
