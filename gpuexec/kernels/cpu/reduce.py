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

The bodies are generated from op descriptors (``OPS``: ``Fold`` for sum, prod, min, max,
count_nonzero, any, all; ``Select`` for argmin/argmax) into one skeleton per kind, each
compiled in a serial and a parallel variant and disk-cached under its own name.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from gpuexec.kernels.backend import ALL_DTYPES
from gpuexec.kernels.cpu import threads

#: unrolled branch-free steps per list (Poisson(5) lists: 93% fit in 8)
SLOTS = 8

# row n: the first n of SLOTS lanes all-ones (integer masking of the unrolled steps)
_MASK_I64 = np.zeros((SLOTS + 1, SLOTS), dtype=np.int64)
for _n in range(SLOTS + 1):
    _MASK_I64[_n, :_n] = -1
_MASK_U64 = _MASK_I64.view(np.uint64)
del _n


_variants = threads.serial_and_parallel


# -- op descriptors --------------------------------------------------------------------------
@dataclass(frozen=True)
class Fold:
    """A reduction that folds each list into an accumulator: ``acc = identity``, then
    ``acc = combine`` (an expression of ``acc`` and the element ``x``) per element, and
    ``finish`` (of ``acc``) is stored. The unrolled slots either select (``step =
    combine; acc = step if k < n else acc``) or, with ``masked`` (a statement of ``acc``,
    ``x`` and the mask lane ``m[k]``), apply a branch-free masked step. ``params``: the
    body's arguments after ``out`` (``masks`` last when ``masked``)."""

    name: str
    params: tuple[str, ...]
    identity: str
    combine: str
    masked: str | None = None
    finish: str = "acc"


@dataclass(frozen=True)
class Select:
    """An arg-reduction: the first element starts, a later one wins only where ``better``
    (an expression of ``x`` and ``best``) holds; -1 for an empty list. With ``padded``,
    unrolled slots past the end read the body's ``pad`` argument (a value that never
    wins), which keeps ``k < n`` off the compare-select chain (faster for floats; integers
    are faster with the combined test, where LLVM keeps the selects as cmovs)."""

    name: str
    better: str
    padded: bool = False


_NONZERO = "np.int64(x != 0)"
OPS = (
    Fold("sum_float", ("zero",), "zero", "acc + x"),
    Fold("prod_float", ("one",), "one", "acc * x"),
    # zero/one and masks are int64 or uint64: the accumulator type (awkward widens values)
    Fold("sum_int", ("zero", "masks"), "zero", "acc + x", masked="acc += (zero + x) & m[k]"),
    Fold("prod_int", ("one", "masks"), "one", "acc * x",
         masked="acc *= ((one * x) & m[k]) | (one & ~m[k])"),
    Fold("max", ("identity",), "identity", "x if x > acc else acc"),
    Fold("min", ("identity",), "identity", "x if x < acc else acc"),
    Fold("countnonzero", ("masks",), "0", f"acc + {_NONZERO}",
         masked=f"acc += {_NONZERO} & m[k]"),
    Fold("any", ("masks",), "0", f"acc | {_NONZERO}", masked=f"acc |= {_NONZERO} & m[k]",
         finish="acc != 0"),
    # out: bool (ak.all) or int64 (ak.prod of bools)
    Fold("all", ("masks",), "1", f"acc & {_NONZERO}", masked=f"acc &= {_NONZERO} | ~m[k]",
         finish="acc != 0"),
    Select("argmax", "x > best"),
    Select("argmin", "x < best"),
    Select("argmax_float", "x > best", padded=True),
    Select("argmin_float", "x < best", padded=True),
)

# the skeleton every body shares: lists in one block per thread, a list never split
_SKELETON = """
def _{name}_body(offsets, content, out, {params}bounds):
    clen = content.shape[0]
    for b in numba.prange(bounds.shape[0] - 1):
        for i in range(max(bounds[b], 0), bounds[b + 1]):
            start = offsets[i]
            n = offsets[i + 1] - start
{per_list}
            out[i] = {result}
"""

_FOLD = """\
acc = {identity}
if start + SLOTS <= clen:
    seg = content[start:]
{mask}    for k in range(SLOTS):
        x = seg[k]
{slot}
    for k in range(SLOTS, n):
        x = seg[k]
        acc = {combine}
else:
    for j in range(start, start + n):
        x = content[j]
        acc = {combine}"""

_SELECT = """\
if start + SLOTS <= clen:
    seg = content[start:]
    best = seg[0]
    where = 0 if n > 0 else -1
    for k in range(1, SLOTS):
        x = seg[k]
{slot}
        best = x if take else best
        where = k if take else where
    for k in range(SLOTS, n):
        x = seg[k]
        if {better}:
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
            if {better}:
                best = x
                where = k"""


def _indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line if line else line for line in text.splitlines())


def _source(op) -> str:
    """The numba body of ``op`` as Python source."""
    if isinstance(op, Fold):
        if op.masked:
            mask, slot = "    m = masks[min(n, SLOTS)]\n", op.masked
        else:
            mask, slot = "", f"step = {op.combine}\nacc = step if k < n else acc"
        per_list = _FOLD.format(identity=op.identity, mask=mask, slot=_indent(slot, 8),
                                combine=op.combine)
        params, result = op.params, op.finish
    else:
        if op.padded:
            slot = f"x = x if k < n else pad\ntake = {op.better}"
        else:
            slot = f"take = ({op.better}) & (k < n)"
        per_list = _SELECT.format(slot=_indent(slot, 8), better=op.better)
        params, result = ("pad",) if op.padded else (), "where"
    return _SKELETON.format(name=op.name, params="".join(f"{p}, " for p in params),
                            per_list=_indent(per_list, 12), result=result)


def _compile_ops(ops) -> dict:
    """name -> (serial, parallel) dispatchers of each op's body. The source is compiled
    under this file's name, which numba's disk cache needs to locate and stamp it (the
    stamp is this file's, from which the source is generated); the bodies' distinct
    names key their cache entries."""
    out = {}
    for op in ops:
        namespace: dict = {}
        exec(compile(_source(op), __file__, "exec"), globals(), namespace)
        body = namespace[f"_{op.name}_body"]
        body.__module__ = __name__
        out[op.name] = _variants(body)
    return out


def _count_body(offsets, out, bounds):
    for b in numba.prange(bounds.shape[0] - 1):
        lo, hi = bounds[b], bounds[b + 1]
        edges = offsets[lo:hi + 1]
        counts = out[lo:hi]
        for k in range(hi - lo):  # non-negative k: no index wrap-around, vectorizes
            counts[k] = edges[k + 1] - edges[k]


_OPS = _compile_ops(OPS)  # op name -> (serial, parallel)
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
def _run(kernel, offsets, content, out_dtype, *params):
    """``out_dtype[lists]`` from ``kernel`` (an op's variants) over the lists; ``params``:
    the op's arguments after ``out``."""
    offsets, content = _prepare(offsets, content)
    out = np.empty(_n(offsets), dtype=out_dtype)
    _launch(kernel, offsets, content.shape[0], (offsets, content, out, *params))
    return out


def _arith(float_kernel, int_kernel, start: int, offsets, content):
    """ak.sum (``start`` 0) or ak.prod (1): folded in awkward's result dtype."""
    acc = sum_dtype(np.asarray(content).dtype)
    if acc.kind == "f":
        return _run(float_kernel, offsets, content, acc, acc.type(start))
    masks = _MASK_U64 if acc.kind == "u" else _MASK_I64
    return _run(int_kernel, offsets, content, acc, acc.type(start), masks)


def reduce_sum(offsets, content):
    return _arith(_OPS["sum_float"], _OPS["sum_int"], 0, offsets, content)


def reduce_prod(offsets, content):
    return _arith(_OPS["prod_float"], _OPS["prod_int"], 1, offsets, content)


def reduce_sum_bool(offsets, content):
    """ak.sum of bool lists: the number of True (nonzero) entries, int64."""
    return reduce_countnonzero(offsets, content)


def reduce_prod_bool(offsets, content):
    """ak.prod of bool lists: 1 if every entry is True (nonzero), else 0; int64."""
    return _run(_OPS["all"], offsets, content, np.int64, _MASK_I64)


def _native(content):
    """The dtype numba sees: ``content``'s in native byte order."""
    return np.asarray(content).dtype.newbyteorder("=")


def reduce_max(offsets, content, identity):
    dtype = _native(content)
    return _run(_OPS["max"], offsets, content, dtype, dtype.type(identity))


def reduce_min(offsets, content, identity):
    dtype = _native(content)
    return _run(_OPS["min"], offsets, content, dtype, dtype.type(identity))


def reduce_argmax(offsets, content):
    dtype = _native(content)
    if dtype.kind == "f":
        return _run(_OPS["argmax_float"], offsets, content, np.int64, dtype.type(-np.inf))
    return _run(_OPS["argmax"], offsets, content, np.int64)


def reduce_argmin(offsets, content):
    dtype = _native(content)
    if dtype.kind == "f":
        return _run(_OPS["argmin_float"], offsets, content, np.int64, dtype.type(np.inf))
    return _run(_OPS["argmin"], offsets, content, np.int64)


def reduce_count(offsets):
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    out = np.empty(_n(offsets), dtype=np.int64)
    _launch(_count, offsets, 0, (offsets, out))
    return out


def reduce_countnonzero(offsets, content):
    return _run(_OPS["countnonzero"], offsets, content, np.int64, _MASK_I64)


def reduce_any(offsets, content):
    return _run(_OPS["any"], offsets, content, np.bool_, _MASK_I64)


def reduce_all(offsets, content):
    return _run(_OPS["all"], offsets, content, np.bool_, _MASK_I64)


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
