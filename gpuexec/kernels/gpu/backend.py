"""GPUBackend: the kernel table of the GPU engine (CUDA or HIP, one implementation).

Buffers are CuPy arrays (cupy-cuda13x on NVIDIA, cupy-rocm on AMD), so results go back
into awkward's "cuda" backend without a copy. Kernels come from ``src/reduce.cu`` through
the runtime layer; which variant runs (split / fused / naive) and with which launch
configuration is the strategy table's decision (``strategies.plan``), never the caller's.

Memory discipline: outputs and temporaries come from CuPy's memory pool; a call does not
synchronise with the host (sizes are known from buffer shapes); an allocation that fails
raises ``DeviceOutOfMemory`` naming the kernel and the bytes; host buffers reach the
device through pinned staging buffers.
"""

from __future__ import annotations

import math
import threading

import awkward as ak
import numpy as np

from gpuexec.kernels.backend import Backend
from gpuexec.kernels.gpu import strategies as S
from gpuexec.kernels.gpu.errors import DeviceOutOfMemory, GPUCallError
from gpuexec.kernels.gpu.runtime import Runtime
from gpuexec.kernels.memo import WeakMemo
from gpuexec.kernels.stats import record_kernel
from gpuexec.kernels.validate import tail_of

# bytes of one carried partial (the widest accumulator: an (value, int64 index) pair)
_ACC_BYTES = 16
_INT64 = np.dtype(np.int64)
_AK_ARRAY = ak.Array


def _out_dtype(op: S.Op, dtype: np.dtype) -> np.dtype:
    kind = op.device
    if kind in ("sum", "prod"):
        if dtype.kind == "f":
            return dtype
        return np.dtype(np.uint64) if dtype.kind == "u" else _INT64
    if kind in ("min", "max"):
        return dtype
    if kind in ("any", "all"):
        return np.dtype(np.bool_)
    return _INT64  # argmin, argmax, countnonzero, sum_bool, prod_bool, count


def _tile_items(strategy: S.Strategy, launch: S.Launch, itemsize: int) -> int:
    """Elements per thread per tile; mirrors ``tile_shape`` in reduce.cu."""
    vec = strategy.vec_bytes // itemsize
    raw = launch.item_bytes // itemsize
    return min(16, max(vec, raw))


_IDENTITY_BITS: dict = {}  # (dtype, op, identity's type and repr) -> bits, for repeated calls


def _identity_bits(identity, dtype: np.dtype, op: S.Op) -> int:
    if op.device not in ("min", "max"):
        return 0
    # repr tells -0.0 from 0.0 and round-trips floats, so equal keys mean equal bits
    key = (dtype, op.device, type(identity), repr(identity))
    bits = _IDENTITY_BITS.get(key)
    if bits is None:
        bits = _bits_of(identity, dtype, op)
        if len(_IDENTITY_BITS) < 4096:
            _IDENTITY_BITS[key] = bits
    return bits


def _bits_of(identity, dtype: np.dtype, op: S.Op) -> int:
    if identity is None:
        if dtype.kind == "b":
            identity = op.device == "min"
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            identity = info.max if op.device == "min" else info.min
        else:
            identity = math.inf if op.device == "min" else -math.inf
    raw = np.asarray(identity).astype(dtype).reshape(1)
    return int(np.frombuffer(raw.tobytes().ljust(8, b"\0"), dtype=np.uint64)[0])


class PinnedStaging:
    """Host -> device copies through reusable pinned buffers: the host data is copied into
    page-locked memory and transferred asynchronously on the current stream; a buffer is
    reused only after the event recorded behind its last transfer has completed."""

    def __init__(self, cupy, slots: int = 4):
        self._cp = cupy
        self._slots = [None] * slots  # (pinned memory, nbytes, event)
        self._next = 0
        self._lock = threading.Lock()

    def to_device(self, host: np.ndarray):
        cp = self._cp
        host = np.ascontiguousarray(host)
        out = cp.empty(host.shape, dtype=host.dtype)
        if host.nbytes == 0:
            return out
        with self._lock:
            i = self._next
            self._next = (i + 1) % len(self._slots)
            slot = self._slots[i]
            if slot is not None:
                slot[2].synchronize()  # the previous transfer from this buffer is done
            if slot is None or slot[1] < host.nbytes:
                mem = cp.cuda.alloc_pinned_memory(max(host.nbytes, 1 << 20))
                slot = [mem, mem.size(), None]
            staged = np.frombuffer(slot[0], dtype=np.uint8, count=host.nbytes)
            staged[...] = host.view(np.uint8).reshape(-1)
            stream = cp.cuda.get_current_stream()
            out.data.copy_from_host_async(slot[0].ptr, host.nbytes, stream)
            event = cp.cuda.Event(block=False, disable_timing=True)
            event.record(stream)
            slot[2] = event
            self._slots[i] = slot
        return out


class GPUBackend(Backend):
    """``GPUBackend(vendor=None, strategy=None, launch=None, device=0, short_lists=None,
    per_list_kernel=None, long_list_kernel=None, family_per_list=None, staged_lists=None,
    few_long=None, tail_lists=None)``.

    ``strategy``/``launch``/``short_lists``/``per_list_kernel``/``long_list_kernel``
    override the strategy table (tests and benchmarks run every strategy on the same device;
    ``short_lists=0`` keeps the flattened kernels on short lists too, a dict of
    ``op[:dtype]`` thresholds replaces the table's, ``long_list_kernel="flat"`` keeps them
    on long ones, ``staged_lists=()`` keeps the hybrid kernel on every mean length,
    ``few_long=0`` counts any long list as a long tail, ``tail_lists="hybrid"`` or
    ``"shared"`` names the kernel of a long tail);
    ``vendor`` "cuda" or "hip" (default: the one present)."""

    ak_backend = "cuda"
    adopts = True  # host arrays are moved to the device

    def __init__(self, vendor: str | None = None, strategy: str | None = None,
                 launch=None, device: int = 0, cache_dir: str | None = None,
                 short_lists: float | dict | None = None, per_list_kernel: str | None = None,
                 long_list_kernel: str | None = None, family_per_list: dict | None = None,
                 staged_lists: dict | tuple | None = None, few_long: float | None = None,
                 tail_lists: dict | str | None = None):
        super().__init__()
        import cupy

        from gpuexec.kernels.gpu import load_bindings

        bindings = load_bindings(vendor)
        self.name = bindings.VENDOR
        self.nplike = cupy
        self._cp = cupy
        self._ndarray = cupy.ndarray
        with cupy.cuda.Device(device):
            cupy.empty(1)  # the runtime's primary context exists before the driver is used
            self.runtime = Runtime(bindings, device, cache_dir)
        self.device = self.runtime.device
        self.plan = S.plan(self.device.arch, strategy, launch, short_lists, per_list_kernel,
                           long_list_kernel, family_per_list, staged_lists, few_long,
                           tail_lists)
        self.strategy = self.plan.strategy.name
        self._staging = PinnedStaging(cupy)
        self._prepared: dict = {}
        for op in S.OPS:
            if not op.dtypes:
                self.register(op.contract, (), self._count, count=False)
                continue
            for dt in op.dtypes:
                self.register(op.contract, (dt,), self._reducer(op, np.dtype(dt)), count=False)
        self._family_modules: dict = {}
        from gpuexec.kernels.gpu.launchers import register

        register(self)

    def __repr__(self) -> str:
        d = self.device
        return (f"<gpuexec GPUBackend {self.name!r} {d.name} ({d.arch}, wave {d.wave}, "
                f"{d.cu_count} CUs) strategy={self.strategy!r}>")

    # -- buffers ---------------------------------------------------------------------------
    def asarray(self, data):
        if type(data) is self._ndarray:  # the common case, before the hasattr miss
            return data
        if hasattr(data, "materialize"):  # awkward VirtualNDArray
            data = data.materialize()
        if isinstance(data, self._cp.ndarray):
            return data
        if hasattr(data, "__cuda_array_interface__"):
            return self._cp.asarray(data)
        return self._staging.to_device(np.asarray(data))

    def to_host(self, buffer):
        return self._cp.asnumpy(buffer)

    def adopt(self, array):
        """An awkward array (or layout) with every buffer on this device; host buffers go
        through pinned staging. Device arrays are returned as they are."""
        if type(array) is _AK_ARRAY and array.layout.backend.name == "cuda":
            return array  # the common call: no further checks
        from gpuexec.kernels.dispatch import awkward_backend_of

        if awkward_backend_of(array) == "cuda":
            return array
        form, length, container = ak.to_buffers(array)
        moved = {k: self.asarray(v) for k, v in container.items()}
        out = ak.from_buffers(form, length, moved, backend="cuda", highlevel=False)
        if isinstance(array, ak.contents.Content):
            return out
        return ak.Array(out, behavior=array.behavior, attrs=array.attrs)

    def alloc(self, shape, dtype, kernel: str):
        """An uninitialised device array from CuPy's pool; DeviceOutOfMemory on failure."""
        cp = self._cp
        dtype = np.dtype(dtype)
        try:
            return cp.empty(shape, dtype=dtype)
        except cp.cuda.memory.OutOfMemoryError as err:
            count = math.prod(shape) if isinstance(shape, tuple) else int(shape)
            raise DeviceOutOfMemory(kernel, count * dtype.itemsize, str(err)) from err

    def int64(self, a):
        """``a`` as a contiguous int64 device array (offsets, indices; no copy when it
        is one already)."""
        if type(a) is self._ndarray and a.dtype == _INT64 and a.ndim and a.flags.c_contiguous:
            return a  # already one: no conversion calls (the call floor)
        a = self.asarray(a)
        if a.dtype != _INT64:
            a = a.astype(_INT64)
        return self._cp.ascontiguousarray(a)

    # -- kernels ---------------------------------------------------------------------------
    def _functions(self, op: S.Op, plan: S.Plan | None = None):
        """{extern "C" name: function} of ``op``'s unit under ``plan`` (this backend's)."""
        plan = plan or self.plan
        key = (op.contract, plan.strategy.name)
        module = self._prepared.get(key)
        if module is None:
            module = self._prepared[key] = self.runtime.module(S.unit_for(plan, op))
        return module

    def _count(self, offsets):
        offsets = self.int64(offsets)
        n = offsets.shape[0] - 1
        out = self.alloc(n, _INT64, "gk_count")
        if n <= 0:
            return out
        fn = self._functions(S.OPS_BY_CONTRACT["reduce_count"])["gk_count"]
        block = self.plan.launch_of(self.plan.content_role, "count").block
        self._launch("gk_count", fn, -(-n // block), block,
                     (offsets.data.ptr, n, out.data.ptr))
        return out

    def _launch(self, name: str, fn, grid: int, block: int, args: tuple) -> None:
        stream = self._cp.cuda.get_current_stream().ptr
        try:
            self.runtime.launch(fn, grid, block, args, stream)
        except GPUCallError as err:
            # the binding knows only the driver call; the kernel and its shape are here
            raise GPUCallError(f"launching {name} (grid {grid} x block {block}) on "
                               f"{self.device.arch}: {err}", code=err.code) from err
        record_kernel(name)

    # what launchers.Launchers needs (the indexing and structure families)
    launch = _launch

    def family_functions(self, family: str, per_list: bool = False) -> dict:
        """{extern "C" name: function} of ``family``'s unit under this backend's plan
        (``per_list``: its naive unit, whose per-list kernels the plan may pick)."""
        key = (family, per_list)
        funcs = self._family_modules.get(key)
        if funcs is None:
            from gpuexec.kernels.gpu import families

            plan = self.plan.per_list_plan() if per_list else self.plan
            unit = families.unit_for(plan, families.BY_NAME[family])
            funcs = self._family_modules[key] = self.runtime.module(unit)
        return funcs

    def preload(self) -> None:
        """Load every module of this backend's plan into the device now (from the disk
        cache, compiling what is missing) instead of at each kernel's first call. Workers
        call it at start so that their first chunk does not pay for it."""
        from gpuexec.kernels.gpu import families

        per_list_plan = self.plan.per_list_plan()
        for op in S.OPS:
            self._functions(op)
            if op.dtypes and self.plan.uses_per_list_unit(op.device):
                self._functions(op, per_list_plan)
        for family in families.FAMILIES:
            self.family_functions(family.name)
            if self.plan.strategy.flatten and family.name in self.plan.family_per_list:
                self.family_functions(family.name, per_list=True)

    def family_block(self, family: str) -> int:
        return self.plan.launch_of(family).block

    def _reducer(self, op: S.Op, dtype: np.dtype):
        dt = dtype.name
        out_dtype = _out_dtype(op, dtype)
        st = self.plan.strategy
        role = self.plan.content_role
        cfg = self.plan.launch_of(role, op.device)
        items = _tile_items(st, cfg, dtype.itemsize)
        wave = self.device.wave
        tile = wave * items                    # elements of one wave-tile
        waves_per_block = cfg.block // wave
        names = {r: f"gk_{op.device}_{dt}_{r}" for r in st.passes}
        names["partition"] = "gk_partition"
        resident = {}
        # the per-list kernels for short lists and, where the table says so, long ones
        # (strategies.py): kernels of the naive unit, launched one thread per list
        per_list_plan = self.plan.per_list_plan()
        per_list_block = per_list_plan.launch_of("naive", op.device).block
        # the blocks the hybrid kernel (its staged variant's too) and the shared one were
        # compiled for; the other per-list kernels take the naive role's
        hybrid_block = per_list_plan.launch_of("hybrid", op.device).block
        own_block = {"hybrid": hybrid_block, "staged": hybrid_block,
                     "shared": per_list_plan.launch_of("shared", op.device).block}
        choose_per_list = self.plan.per_list_chooser(op.device, dt)
        per_list_launch = {}  # role -> (kernel name, function, block), filled on first use

        def per_list_entry(role):
            entry = per_list_launch.get(role)
            if entry is None:
                name = f"gk_{op.device}_{dt}_{role}"
                entry = per_list_launch[role] = (
                    name, self._functions(op, per_list_plan)[name],
                    own_block.get(role, per_list_block))
            return entry

        def max_waves(fn):
            """Waves that are resident at once (the persistent grid)."""
            if "w" not in resident:
                per_cu = cfg.blocks_per_cu or self.runtime.occupancy(fn, cfg.block)
                resident["w"] = per_cu * self.device.cu_count * waves_per_block
            return resident["w"]

        has_identity = op.device in ("min", "max")  # _identity_bits is 0 for the others
        # what a per-list launch over these very buffers is, apart from the output and the
        # identity: (kernel name, function, grid, block, leading arguments, lists). Found
        # once per (offsets, content) pair whose offsets passed the check (their summary,
        # and so the kernel chosen, never changes) and that the call reads as they are;
        # forgotten with either buffer (memo.WeakMemo). A repeated call then goes
        # straight to the allocation and the launch: its kernel started 6-9 us sooner on
        # the H200 (docs/gpu-engine.md, thirty-ninth session).
        known = WeakMemo()

        def reduce(offsets, content, identity=None, with_empty=False):
            entry = known.get(offsets, content)
            if entry is not None:
                name, fn, grid, block, lead, n = entry
                out = self.alloc(n, out_dtype, names[role])
                empty = self.alloc(n, np.bool_, names[role]) if with_empty else None
                self._launch(name, fn, grid, block,
                             (*lead, _identity_bits(identity, dtype, op) if has_identity else 0,
                              out.data.ptr, 0 if empty is None else empty.data.ptr))
                return (out, empty) if with_empty else out
            return first_reduce(offsets, content, identity, with_empty)

        def first_reduce(offsets, content, identity, with_empty):
            cp = self._cp
            given = (offsets, content)
            # where the API layer checked this buffer: its longest list, its long lists
            longest, n_long = tail_of(offsets)
            offsets = self.int64(offsets)
            content = self.asarray(content)
            n = offsets.shape[0] - 1
            out = self.alloc(n, out_dtype, names[role])
            if n <= 0:
                return (out, self.alloc(0, np.bool_, names[role])) if with_empty else out
            if content.dtype != dtype:
                content = content.astype(dtype)
            if not content.flags.c_contiguous:
                content = cp.ascontiguousarray(content)
            # the launch may be remembered for these buffers: checked offsets, both read
            # as given (no converted copy whose pointer would die with this call)
            memorable = (longest is not None and offsets is given[0] and content is given[1])
            if dtype.kind == "b":
                content = content.view(np.uint8)
            itemsize = dtype.itemsize
            ptr = content.data.ptr
            shift = (ptr % 16) // itemsize
            base = ptr - shift * itemsize
            ntiles = max(1, -(-(content.shape[0] + shift) // tile))
            funcs = self._functions(op)
            # kernel arguments (c_*): plain ints, one 8-byte parameter each (bindings.launch)
            c_off, c_n, c_content, c_shift, c_ntiles = offsets.data.ptr, n, base, shift, ntiles
            c_ident = _identity_bits(identity, dtype, op) if has_identity else 0
            c_out = out.data.ptr
            per_list_role = choose_per_list(n, content.shape[0], content.nbytes, longest,
                                            n_long)
            # with_empty: also the option mask of mask_identity (True where a list is
            # empty), written by the per-list kernels in the same pass
            empty, c_empty = None, 0
            if with_empty and (st.name == "naive" or per_list_role is not None):
                empty = self.alloc(n, np.bool_, names[role])
                c_empty = empty.data.ptr
            lead = (c_off, c_n, c_content, c_shift, c_ntiles, 0)
            if st.name == "naive" or per_list_role is not None:
                name, fn, block = ((names["naive"], funcs[names["naive"]], cfg.block)
                                   if st.name == "naive" else per_list_entry(per_list_role))
                grid = -(-n // block)
                self._launch(name, fn, grid, block, (*lead, c_ident, c_out, c_empty))
                if memorable:
                    known.put((name, fn, grid, block, lead, n), *given)
                return (out, empty) if with_empty else out
            fn = funcs[names[role]]
            R = min(ntiles, max_waves(fn))     # waves, each walking a range of tiles
            grid = -(-R // waves_per_block)
            if st.name == "fused":
                self._launch(names["fused"], fn, grid, cfg.block,
                             (c_off, c_n, c_content, c_shift, c_ntiles, R, c_ident, c_out))
            else:
                # split: partition pass, reduce pass, fixup pass (every kernel of a unit
                # runs with the block size it was compiled for)
                scratch = self.alloc(R * (16 + 2 * _ACC_BYTES), np.uint8, names["split"])
                sp = scratch.data.ptr
                c_P = sp                                 # int64[R]
                c_tlist = sp + 8 * R                     # int64[R]
                c_lead = sp + 16 * R                     # acc[R]
                c_tail = sp + (16 + _ACC_BYTES) * R
                self._launch("gk_partition", funcs["gk_partition"], grid, cfg.block,
                             (c_off, c_n, c_shift, tile, c_ntiles, R, c_P))
                self._launch(names["split"], fn, grid, cfg.block,
                             (c_off, c_n, c_content, c_shift, c_ntiles, R, c_ident, c_P,
                              c_lead, c_tail, c_tlist, c_out))
                self._launch(names["fixup"], funcs[names["fixup"]], -(-R // cfg.block),
                             cfg.block, (c_off, c_n, c_shift, c_ntiles, R, tile, c_ident,
                                         c_lead, c_tail, c_tlist, c_out))
            # the flattened passes do not write the mask: one comparison pass
            return (out, offsets[1:] == offsets[:-1]) if with_empty else out

        reduce.__name__ = f"{op.contract}_{dt}"
        reduce.remembered = known  # benchmarks forget an entry to time the full path
        return reduce
