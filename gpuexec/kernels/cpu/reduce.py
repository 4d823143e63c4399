"""Segmented reductions over the innermost lists (numba).

Results are bit-identical to awkward-cpp's per-list kernels: every list is folded alone,
element by element in list order, starting from the same identity, with the same
comparison rules (see ``gpuexec.kernels.backend`` for the contract):

* sum/prod accumulate in the result dtype (int8..int64 -> int64, uint8..uint64 ->
  uint64, floats keep their dtype, so float32 sums round in float32); integers wrap.
* min/max: ``acc = x if x < acc else acc`` from ``identity`` (NaN never wins; ties keep
  the earlier value, so -0.0 and 0.0 keep their order).
* argmin/argmax: the first element starts, a later one wins only if strictly
  smaller/larger (a leading NaN therefore stays); -1 for empty lists.
* count_nonzero/any/all test ``x != 0`` (NaN counts as nonzero).

Why not a plain per-list loop: with short lists of random length (HEP: Poisson-like
jet/muon counts) the exit branch of the inner loop mispredicts once per list, which
costs more than the arithmetic. Each list therefore first runs ``SLOTS`` unrolled,
branch-free steps (slot k reads element k unconditionally and a select keeps the old
accumulator when k is past the end), then a remainder loop for the rare longer lists.
Floating-point steps keep the exact sequential order; integer sum/prod/count steps mask
the value with a table row (a data-dependent mask keeps LLVM from turning the selects
back into branches). Lists whose slot window would run past the end of the content take
the plain loop.

Lists are split into one block per thread, balanced by elements and lists, and folded
with ``prange`` above ``threads.PARALLEL_THRESHOLD``; below it the serial variant (the
same body compiled without ``parallel``) runs one block. A list is never split, so the
thread count does not change any bit.
"""

from __future__ import annotations


import numba
import numpy as np

from gpuexec.kernels.cpu import threads

from gpuexec.kernels.backend import ALL_DTYPES

#: unrolled branch-free steps per list (Poisson(5) lists: 93% fit in 8)
SLOTS = 8

# row n: the first n of SLOTS lanes all-ones (integer masking of the unrolled steps)
_MASK_I64 = np.zeros((SLOTS + 1, SLOTS), dtype=np.int64)
for _n in range(SLOTS + 1):
    _MASK_I64[_n, :_n] = -1
_MASK_U64 = _MASK_I64.view(np.uint64)
del _n


_variants = threads.serial_and_parallel


def _sum_float_body(offsets, content, out, zero, bounds):
    clen = content.shape[0]
    for b in numba.prange(bounds.shape[0] - 1):
        for i in range(max(bounds[b], 0), bounds[b + 1]):
            start = offsets[i]
            n = offsets[i + 1] - start
            acc = zero
            if start + SLOTS <= clen:
                seg = content[start:]
                for k in range(SLOTS):
                    step = acc + seg[k]
                    acc = step if k < n else acc
                for k in range(SLOTS, n):
                    acc += seg[k]
            else:
                for j in range(start, start + n):
                    acc += content[j]
            out[i] = acc


def _prod_float_body(offsets, content, out, one, bounds):
    clen = content.shape[0]
    for b in numba.prange(bounds.shape[0] - 1):
        for i in range(max(bounds[b], 0), bounds[b + 1]):
            start = offsets[i]
            n = offsets[i + 1] - start
            acc = one
            if start + SLOTS <= clen:
                seg = content[start:]
                for k in range(SLOTS):
                    step = acc * seg[k]
                    acc = step if k < n else acc
                for k in range(SLOTS, n):
                    acc *= seg[k]
            else:
                for j in range(start, start + n):
                    acc *= content[j]
            out[i] = acc


def _sum_int_body(offsets, content, out, zero, masks, bounds):
    # zero/masks are int64 or uint64: the accumulator type (awkward widens each value)
    clen = content.shape[0]
    for b in numba.prange(bounds.shape[0] - 1):
        for i in range(max(bounds[b], 0), bounds[b + 1]):
            start = offsets[i]
            n = offsets[i + 1] - start
            acc = zero
            if start + SLOTS <= clen:
                seg = content[start:]
                m = masks[min(n, SLOTS)]
                for k in range(SLOTS):
                    acc += (zero + seg[k]) & m[k]
                for k in range(SLOTS, n):
                    acc += seg[k]
            else:
                for j in range(start, start + n):
                    acc += content[j]
            out[i] = acc


def _prod_int_body(offsets, content, out, one, masks, bounds):
    clen = content.shape[0]
    for b in numba.prange(bounds.shape[0] - 1):
        for i in range(max(bounds[b], 0), bounds[b + 1]):
            start = offsets[i]
            n = offsets[i + 1] - start
            acc = one
            if start + SLOTS <= clen:
                seg = content[start:]
                m = masks[min(n, SLOTS)]
                for k in range(SLOTS):
                    acc *= ((one * seg[k]) & m[k]) | (one & ~m[k])
                for k in range(SLOTS, n):
                    acc *= seg[k]
            else:
                for j in range(start, start + n):
                    acc *= content[j]
            out[i] = acc


def _max_body(offsets, content, out, identity, bounds):
    clen = content.shape[0]
    for b in numba.prange(bounds.shape[0] - 1):
        for i in range(max(bounds[b], 0), bounds[b + 1]):
            start = offsets[i]
            n = offsets[i + 1] - start
            acc = identity
            if start + SLOTS <= clen:
                seg = content[start:]
                for k in range(SLOTS):
                    x = seg[k]
                    step = x if x > acc else acc
                    acc = step if k < n else acc
                for k in range(SLOTS, n):
                    x = seg[k]
                    acc = x if x > acc else acc
            else:
                for j in range(start, start + n):
                    x = content[j]
                    acc = x if x > acc else acc
            out[i] = acc


def _min_body(offsets, content, out, identity, bounds):
    clen = content.shape[0]
    for b in numba.prange(bounds.shape[0] - 1):
        for i in range(max(bounds[b], 0), bounds[b + 1]):
            start = offsets[i]
            n = offsets[i + 1] - start
            acc = identity
            if start + SLOTS <= clen:
                seg = content[start:]
                for k in range(SLOTS):
                    x = seg[k]
                    step = x if x < acc else acc
                    acc = step if k < n else acc
                for k in range(SLOTS, n):
                    x = seg[k]
                    acc = x if x < acc else acc
            else:
                for j in range(start, start + n):
                    x = content[j]
                    acc = x if x < acc else acc
            out[i] = acc


def _argmax_body(offsets, content, out, bounds):
    clen = content.shape[0]
    for b in numba.prange(bounds.shape[0] - 1):
        for i in range(max(bounds[b], 0), bounds[b + 1]):
            start = offsets[i]
            n = offsets[i + 1] - start
            if start + SLOTS <= clen:
                seg = content[start:]
                best = seg[0]
                where = 0 if n > 0 else -1
                for k in range(1, SLOTS):
                    x = seg[k]
                    take = (x > best) & (k < n)
                    best = x if take else best
                    where = k if take else where
                for k in range(SLOTS, n):
                    x = seg[k]
                    if x > best:
                        best = x
                        where = k
            else:
                where = -1
                if n > 0:
                    seg = content[start:]
                    best = seg[0]
                    where = 0
                    for k in range(1, n):
                        x = seg[k]
                        if x > best:
                            best = x
                            where = k
            out[i] = where


def _argmin_body(offsets, content, out, bounds):
    clen = content.shape[0]
    for b in numba.prange(bounds.shape[0] - 1):
        for i in range(max(bounds[b], 0), bounds[b + 1]):
            start = offsets[i]
            n = offsets[i + 1] - start
            if start + SLOTS <= clen:
                seg = content[start:]
                best = seg[0]
                where = 0 if n > 0 else -1
                for k in range(1, SLOTS):
                    x = seg[k]
                    take = (x < best) & (k < n)
                    best = x if take else best
                    where = k if take else where
                for k in range(SLOTS, n):
                    x = seg[k]
                    if x < best:
                        best = x
                        where = k
            else:
                where = -1
                if n > 0:
                    seg = content[start:]
                    best = seg[0]
                    where = 0
                    for k in range(1, n):
                        x = seg[k]
                        if x < best:
                            best = x
                            where = k
            out[i] = where


def _argmax_float_body(offsets, content, out, pad, bounds):
    # as _argmax_body, but slots past the end read ``pad`` (-inf, never wins), which
    # keeps the k < n test off the compare-select chain (faster for floats; integers
    # are faster with the combined test, where LLVM keeps the selects as cmovs)
    clen = content.shape[0]
    for b in numba.prange(bounds.shape[0] - 1):
        for i in range(max(bounds[b], 0), bounds[b + 1]):
            start = offsets[i]
            n = offsets[i + 1] - start
            if start + SLOTS <= clen:
                seg = content[start:]
                best = seg[0]
                where = 0 if n > 0 else -1
                for k in range(1, SLOTS):
                    x = seg[k]
                    x = x if k < n else pad
                    take = x > best
                    best = x if take else best
                    where = k if take else where
                for k in range(SLOTS, n):
                    x = seg[k]
                    if x > best:
                        best = x
                        where = k
            else:
                where = -1
                if n > 0:
                    seg = content[start:]
                    best = seg[0]
                    where = 0
                    for k in range(1, n):
                        x = seg[k]
                        if x > best:
                            best = x
                            where = k
            out[i] = where


def _argmin_float_body(offsets, content, out, pad, bounds):
    # as _argmin_body, but slots past the end read ``pad`` (+inf, never wins), which
    # keeps the k < n test off the compare-select chain (faster for floats; integers
    # are faster with the combined test, where LLVM keeps the selects as cmovs)
    clen = content.shape[0]
    for b in numba.prange(bounds.shape[0] - 1):
        for i in range(max(bounds[b], 0), bounds[b + 1]):
            start = offsets[i]
            n = offsets[i + 1] - start
            if start + SLOTS <= clen:
                seg = content[start:]
                best = seg[0]
                where = 0 if n > 0 else -1
                for k in range(1, SLOTS):
                    x = seg[k]
                    x = x if k < n else pad
                    take = x < best
                    best = x if take else best
                    where = k if take else where
                for k in range(SLOTS, n):
                    x = seg[k]
                    if x < best:
                        best = x
                        where = k
            else:
                where = -1
                if n > 0:
                    seg = content[start:]
                    best = seg[0]
                    where = 0
                    for k in range(1, n):
                        x = seg[k]
                        if x < best:
                            best = x
                            where = k
            out[i] = where


def _countnonzero_body(offsets, content, out, masks, bounds):
    clen = content.shape[0]
    for b in numba.prange(bounds.shape[0] - 1):
        for i in range(max(bounds[b], 0), bounds[b + 1]):
            start = offsets[i]
            n = offsets[i + 1] - start
            acc = 0
            if start + SLOTS <= clen:
                seg = content[start:]
                m = masks[min(n, SLOTS)]
                for k in range(SLOTS):
                    acc += np.int64(seg[k] != 0) & m[k]
                for k in range(SLOTS, n):
                    acc += np.int64(seg[k] != 0)
            else:
                for j in range(start, start + n):
                    acc += np.int64(content[j] != 0)
            out[i] = acc


def _any_body(offsets, content, out, masks, bounds):
    clen = content.shape[0]
    for b in numba.prange(bounds.shape[0] - 1):
        for i in range(max(bounds[b], 0), bounds[b + 1]):
            start = offsets[i]
            n = offsets[i + 1] - start
            acc = 0
            if start + SLOTS <= clen:
                seg = content[start:]
                m = masks[min(n, SLOTS)]
                for k in range(SLOTS):
                    acc |= np.int64(seg[k] != 0) & m[k]
                for k in range(SLOTS, n):
                    acc |= np.int64(seg[k] != 0)
            else:
                for j in range(start, start + n):
                    acc |= np.int64(content[j] != 0)
            out[i] = acc != 0


def _all_body(offsets, content, out, masks, bounds):
    # out: bool (ak.all) or int64 (ak.prod of bools)
    clen = content.shape[0]
    for b in numba.prange(bounds.shape[0] - 1):
        for i in range(max(bounds[b], 0), bounds[b + 1]):
            start = offsets[i]
            n = offsets[i + 1] - start
            acc = 1
            if start + SLOTS <= clen:
                seg = content[start:]
                m = masks[min(n, SLOTS)]
                for k in range(SLOTS):
                    acc &= np.int64(seg[k] != 0) | ~m[k]
                for k in range(SLOTS, n):
                    acc &= np.int64(seg[k] != 0)
            else:
                for j in range(start, start + n):
                    acc &= np.int64(content[j] != 0)
            out[i] = acc != 0


def _count_body(offsets, out, bounds):
    for b in numba.prange(bounds.shape[0] - 1):
        lo, hi = bounds[b], bounds[b + 1]
        edges = offsets[lo:hi + 1]
        counts = out[lo:hi]
        for k in range(hi - lo):  # non-negative k: no index wrap-around, vectorizes
            counts[k] = edges[k + 1] - edges[k]


_sum_float = _variants(_sum_float_body)
_prod_float = _variants(_prod_float_body)
_sum_int = _variants(_sum_int_body)
_prod_int = _variants(_prod_int_body)
_max = _variants(_max_body)
_min = _variants(_min_body)
_argmax = _variants(_argmax_body)
_argmin = _variants(_argmin_body)
_argmax_float = _variants(_argmax_float_body)
_argmin_float = _variants(_argmin_float_body)
_countnonzero = _variants(_countnonzero_body)
_any = _variants(_any_body)
_all = _variants(_all_body)
_count = _variants(_count_body)


# -- launching -----------------------------------------------------------------------------
@numba.njit(cache=True, nogil=True)
def _balanced_cuts(offsets, nblocks):
    # cut where the work so far, elements + lists, passes b/nblocks of the total
    n = offsets.shape[0] - 1
    first = offsets[0]
    total = offsets[n] - first + n
    bounds = np.empty(nblocks + 1, dtype=np.int64)
    bounds[0] = 0
    bounds[nblocks] = n
    for b in range(1, nblocks):
        target = total * b // nblocks
        lo, hi = 0, n
        while lo < hi:  # first i with work(i) >= target
            mid = (lo + hi) // 2
            if offsets[mid] - first + mid < target:
                lo = mid + 1
            else:
                hi = mid
        bounds[b] = lo
    return bounds


def block_bounds(offsets, nblocks: int) -> np.ndarray:
    """int64[nblocks+1] list indices cutting the lists into ``nblocks`` runs of about
    equal work, counting elements and lists (so neither one huge list nor millions of
    empty lists leave a thread idle). A list is never cut."""
    return _balanced_cuts(offsets, np.int64(nblocks))


def _launch(variants, offsets, content_length: int, args):
    """Run a body over all lists: its parallel variant with one block per thread when
    the call is big enough, else its serial variant as one block."""
    n = offsets.shape[0] - 1
    if n > 1 and threads.use_parallel(content_length + n):
        nthreads = threads.apply_thread_count()
        variants[1](*args, block_bounds(offsets, nthreads))
    else:
        variants[0](*args, np.array([0, max(n, 0)], dtype=np.int64))


def _prepare(offsets, content):
    """Contiguous native-endian buffers (numba compiles for those; ROOT files are
    big-endian) and int64 offsets."""
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    content = np.ascontiguousarray(content)
    if not content.dtype.isnative:
        content = content.astype(content.dtype.newbyteorder("="))
    return offsets, content


def sum_dtype(dtype) -> np.dtype:
    """Result dtype of ak.sum/ak.prod at an axis (awkward's integer rank promotion on
    64-bit platforms): signed ints and bool -> int64, unsigned -> uint64, floats kept."""
    dtype = np.dtype(dtype)
    if dtype.kind == "u":
        return np.dtype(np.uint64)
    if dtype.kind in "ib":
        return np.dtype(np.int64)
    return dtype


def _n(offsets) -> int:
    return offsets.shape[0] - 1


# -- the contract ------------------------------------------------------------------------
def reduce_sum(offsets, content):
    offsets, content = _prepare(offsets, content)
    acc = sum_dtype(content.dtype)
    out = np.empty(_n(offsets), dtype=acc)
    if content.dtype.kind == "f":
        _launch(_sum_float, offsets, content.shape[0], (offsets, content, out, acc.type(0)))
    else:
        masks = _MASK_U64 if acc.kind == "u" else _MASK_I64
        _launch(_sum_int, offsets, content.shape[0],
                (offsets, content, out, acc.type(0), masks))
    return out


def reduce_prod(offsets, content):
    offsets, content = _prepare(offsets, content)
    acc = sum_dtype(content.dtype)
    out = np.empty(_n(offsets), dtype=acc)
    if content.dtype.kind == "f":
        _launch(_prod_float, offsets, content.shape[0], (offsets, content, out, acc.type(1)))
    else:
        masks = _MASK_U64 if acc.kind == "u" else _MASK_I64
        _launch(_prod_int, offsets, content.shape[0],
                (offsets, content, out, acc.type(1), masks))
    return out


def reduce_sum_bool(offsets, content):
    """ak.sum of bool lists: the number of True (nonzero) entries, int64."""
    return reduce_countnonzero(offsets, content)


def reduce_prod_bool(offsets, content):
    """ak.prod of bool lists: 1 if every entry is True (nonzero), else 0; int64."""
    offsets, content = _prepare(offsets, content)
    out = np.empty(_n(offsets), dtype=np.int64)
    _launch(_all, offsets, content.shape[0], (offsets, content, out, _MASK_I64))
    return out


def _identity(content, identity):
    return content.dtype.type(identity)


def reduce_max(offsets, content, identity):
    offsets, content = _prepare(offsets, content)
    out = np.empty(_n(offsets), dtype=content.dtype)
    _launch(_max, offsets, content.shape[0],
            (offsets, content, out, _identity(content, identity)))
    return out


def reduce_min(offsets, content, identity):
    offsets, content = _prepare(offsets, content)
    out = np.empty(_n(offsets), dtype=content.dtype)
    _launch(_min, offsets, content.shape[0],
            (offsets, content, out, _identity(content, identity)))
    return out


def reduce_argmax(offsets, content):
    offsets, content = _prepare(offsets, content)
    out = np.empty(_n(offsets), dtype=np.int64)
    if content.dtype.kind == "f":
        _launch(_argmax_float, offsets, content.shape[0],
                (offsets, content, out, content.dtype.type(-np.inf)))
    else:
        _launch(_argmax, offsets, content.shape[0], (offsets, content, out))
    return out


def reduce_argmin(offsets, content):
    offsets, content = _prepare(offsets, content)
    out = np.empty(_n(offsets), dtype=np.int64)
    if content.dtype.kind == "f":
        _launch(_argmin_float, offsets, content.shape[0],
                (offsets, content, out, content.dtype.type(np.inf)))
    else:
        _launch(_argmin, offsets, content.shape[0], (offsets, content, out))
    return out


def reduce_count(offsets):
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    out = np.empty(_n(offsets), dtype=np.int64)
    _launch(_count, offsets, 0, (offsets, out))
    return out


def reduce_countnonzero(offsets, content):
    offsets, content = _prepare(offsets, content)
    out = np.empty(_n(offsets), dtype=np.int64)
    _launch(_countnonzero, offsets, content.shape[0], (offsets, content, out, _MASK_I64))
    return out


def reduce_any(offsets, content):
    offsets, content = _prepare(offsets, content)
    out = np.empty(_n(offsets), dtype=np.bool_)
    _launch(_any, offsets, content.shape[0], (offsets, content, out, _MASK_I64))
    return out


def reduce_all(offsets, content):
    offsets, content = _prepare(offsets, content)
    out = np.empty(_n(offsets), dtype=np.bool_)
    _launch(_all, offsets, content.shape[0], (offsets, content, out, _MASK_I64))
    return out


KERNELS = {
    "reduce_sum": reduce_sum,
    "reduce_prod": reduce_prod,
    "reduce_sum_bool": reduce_sum_bool,
    "reduce_prod_bool": reduce_prod_bool,
    "reduce_min": reduce_min,
    "reduce_max": reduce_max,
    "reduce_argmin": reduce_argmin,
    "reduce_argmax": reduce_argmax,
    "reduce_countnonzero": reduce_countnonzero,
    "reduce_any": reduce_any,
    "reduce_all": reduce_all,
}


def _with_empty(fn):
    """The contract's ``with_empty=True``: (result, True where a list is empty)."""
    def kernel(offsets, *args, with_empty=False):
        out = fn(offsets, *args)
        if not with_empty:
            return out
        offsets = np.asarray(offsets)
        return out, offsets[1:] == offsets[:-1]

    kernel.__name__ = kernel.__qualname__ = fn.__name__
    kernel.__doc__ = fn.__doc__
    return kernel


def register(backend) -> None:
    for name, fn in KERNELS.items():
        kernel = _with_empty(fn)
        for dt in ALL_DTYPES:
            backend.register(name, (dt,), kernel)
    backend.register("reduce_count", (), reduce_count)
