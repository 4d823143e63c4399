"""The Backend contract: one object per device kind that owns the kernel lookup.

A backend is what the dispatch layer hands to the public functions. The public
functions (``gpuexec.kernels.api``) know no device: they ask the backend for a kernel
by name and dtypes, pass it flat buffers, and get flat buffers back.

Buffer-level kernel contract (every backend implements the same names and
signatures; results never depend on the backend). ``offsets`` is always an int64
array of length n+1 indexing into ``content`` (it may start above 0: sliced arrays):

  reduce_sum(offsets, content) -> out[n]          int -> int64/uint64, float keeps dtype
  reduce_prod(offsets, content) -> out[n]         same promotion as sum
  reduce_sum_bool(offsets, content) -> int64[n]   ak.sum of bool lists (count of True)
  reduce_prod_bool(offsets, content) -> int64[n]  ak.prod of bool lists (all -> 1/0)
  reduce_min(offsets, content, identity) -> out[n]      empty lists get ``identity``
  reduce_max(offsets, content, identity) -> out[n]
  reduce_argmin(offsets, content) -> int64[n]     local index, -1 for empty lists
  reduce_argmax(offsets, content) -> int64[n]
  reduce_count(offsets) -> int64[n]
  reduce_countnonzero(offsets, content) -> int64[n]
  reduce_any(offsets, content) -> bool[n]
  reduce_all(offsets, content) -> bool[n]
  Every reduce_* but reduce_count also takes ``with_empty=True`` and then returns
  (out, bool[n] True where a list is empty): the option mask of ``mask_identity``, which
  the GPU's per-list kernels write in the same pass as the result.

  Indexing (gpuexec/kernels/cpu/indexing.py; starts/stops int64[n] into the list
  content, index_offsets/mask_offsets int64[n+1] into index/mask, may start above 0;
  masks and ``valid`` are bool; dtype key (dtype,) for carry, () for the others):
  carry(values, index) -> values.dtype[len(index)]         out[i] = values[index[i]]
  compact_offsets(starts, stops) -> int64[n+1]             0, running sum of lengths
  rebase_offsets(offsets) -> (int64[n+1], n_bad)           offsets - offsets[0]; n_bad =
                                                           number of decreasing steps (on
                                                           a GPU a 0-d device array: read
                                                           only where needed, a host sync)
  offsets_summary(offsets, long_factor, long_floor) -> (n_down, longest, n_long, first,
                                      last) host ints from one pass: decreasing steps,
                                      longest list, lists longer than max(factor x mean,
                                      floor), offsets[0], offsets[n] (validate.offsets)
  list_carry_index(starts, offsets) -> int64[offsets[n]-offsets[0]]
                                      positions that gather the lists into one run
  local_to_global(starts, stops, index_offsets, index) -> (int64[m], n_bad)
                                      per-list local index (negative wraps) -> content
                                      position; out-of-range picks -> -1, counted
  missing_repeat(starts, stops, index_offsets, index, valid) -> (int64[m], n_bad)
                                      same, valid[j] False -> -1 (None)
  filter(starts, stops, mask_offsets, mask) -> (offsets int64[n+1], carry int64[k])
  filter_missing(starts, stops, mask_offsets, mask, valid) -> (offsets, outindex)
                                      option mask: None kept as -1

  Structure (gpuexec/kernels/cpu/structure.py; dtype key (dtype,) for argsort/sort,
  () for the others; outputs of list i start at offsets[i]-offsets[0]):
  local_index(offsets) -> int64[offsets[n]-offsets[0]]     position within the list
  argsort(offsets, values, ascending) -> int64[offsets[n]-offsets[0]]
                                      in-list positions, stable in both directions,
                                      NaN first in both (awkward's comparator)
  sort(offsets, values, ascending) -> values.dtype[offsets[n]-offsets[0]]
  combinations(starts, stops, n, replacement, local) -> (offsets int64[m+1], idx_0..idx_{n-1})
                                      n in {2, 3}; tuples a<b(<c) (<= with replacement)
                                      in lexicographic order; int64 content positions
                                      (starts[i]+a), in-list positions if ``local``
  cartesian(starts_a, stops_a, starts_b, stops_b, local) -> (offsets, idx_a, idx_b)
                                      all (a, b) of list i, a major; as above
  ... plus the structural kernels documented in their modules (carry, compact_offsets,
  missing_repeat, filter, local_index, argsort, combinations, cartesian).

Kernels validate nothing: the API layer checks offsets and dtypes first
(``gpuexec.kernels.validate``) so that every backend raises the same errors.
"""

from __future__ import annotations

from typing import Any, Callable

#: the dtypes the kernels of every backend cover (names as numpy spells them)
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOAT_DTYPES = ("float32", "float64")
NUMBER_DTYPES = INT_DTYPES + FLOAT_DTYPES
ALL_DTYPES = NUMBER_DTYPES + ("bool",)


class KernelNotFound(LookupError):
    """No kernel of that name for those dtypes on this backend."""


class Backend:
    """Base class. Subclasses set ``name``, ``ak_backend`` and ``nplike`` and fill
    ``_table``: {(kernel_name, dtype_key): callable}. ``dtype_key`` is a tuple of numpy
    dtype names (or ``()`` for kernels that read only offsets)."""

    name: str = "abstract"
    #: the awkward backend whose arrays this backend's results live in ("cpu" or "cuda")
    ak_backend: str = "cpu"
    #: the numpy-like array module of this backend (numpy or cupy)
    nplike: Any = None
    #: whether ``adopt`` can change an array (the public wrapper skips it where not)
    adopts: bool = False

    def __init__(self) -> None:
        self._table: dict[tuple[str, tuple[str, ...]], Callable] = {}
        # (name, dtypes as the caller passed them) -> kernel: one dict lookup per call
        # instead of a name per dtype; cleared by ``register``
        self._by_dtypes: dict = {}

    # -- kernel lookup -------------------------------------------------------------
    def register(self, name: str, dtypes: tuple[str, ...], fn: Callable, *, count=True) -> None:
        """Add a kernel. With ``count`` every call is recorded as one launch of ``name``
        in ``gk.stats()``; backends whose kernels launch several device kernels pass
        ``count=False`` and record their real launches themselves."""
        if count:
            fn = _counted(name, fn)
        self._table[(name, tuple(dtypes))] = fn
        self._by_dtypes.clear()

    def kernel(self, name: str, *dtypes) -> Callable:
        """The kernel ``name`` specialised for ``dtypes`` (numpy dtypes or names)."""
        try:
            return self._by_dtypes[(name, dtypes)]
        except (KeyError, TypeError):  # not looked up yet, or an unhashable dtype-like
            pass
        key = (name, tuple(dtype_name(d) for d in dtypes))
        try:
            fn = self._table[key]
        except KeyError:
            raise KernelNotFound(
                f"backend {self.name!r} has no kernel {name!r} for dtypes {key[1]}"
            ) from None
        try:
            self._by_dtypes[(name, dtypes)] = fn
        except TypeError:
            pass
        return fn

    def kernels(self) -> list[tuple[str, tuple[str, ...]]]:
        return sorted(self._table)

    # -- buffers ---------------------------------------------------------------------
    def asarray(self, buffer) -> Any:
        """A buffer of this backend's nplike (materialising virtual buffers and moving
        host data to the device where needed)."""
        raise NotImplementedError

    def to_host(self, buffer):
        raise NotImplementedError

    def adopt(self, array):
        """An awkward array (or layout) whose buffers this backend can read; the GPU
        backends move host arrays to the device here. The default keeps it as it is."""
        return array

    def __repr__(self) -> str:
        return f"<gpuexec Backend {self.name!r} ({len(self._table)} kernels)>"


class BackendUnavailable(RuntimeError):
    """The requested backend cannot run here (missing package, no device, ...)."""

def awkward_backend_of(array) -> str:
    """The awkward backend name of an array, record or layout. ``ak.backend`` would do,
    but on a failure path awkward formats its arguments, and its dispatch wrapper costs
    about a millisecond per call on a device array (it renders the array's repr)."""
    import awkward as ak

    if isinstance(array, (ak.Array, ak.Record)):
        return array.layout.backend.name
    if isinstance(array, ak.contents.Content):
        return array.backend.name
    return ak.backend(array)


def _counted(name: str, fn: Callable) -> Callable:
    from gpuexec.kernels.stats import record_kernel

    def launch(*args, **kwargs):
        record_kernel(name)
        return fn(*args, **kwargs)

    launch.__name__ = getattr(fn, "__name__", name)
    launch.__wrapped__ = fn
    return launch


_DTYPE_NAMES: dict = {}


def dtype_name(d) -> str:
    """``np.dtype(d).name``, remembered per dtype (numpy builds the name string on every
    ``.name``; this sits on every kernel lookup, a few us of each call's floor)."""
    try:
        return _DTYPE_NAMES[d]
    except (KeyError, TypeError):
        import numpy as np

        name = np.dtype(d).name
        try:
            _DTYPE_NAMES[d] = name
        except TypeError:  # an unhashable dtype-like
            pass
        return name
