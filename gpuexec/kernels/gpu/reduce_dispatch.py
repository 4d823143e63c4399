"""``ReduceDispatch``: one reduction (op, dtype) on one GPU backend, CUB's dispatch shape.
It holds what the plan fixed for the op (kernel names, launch configurations, the tile
shape, the per-list chooser) and, per call, picks the kernel from the input's sizes
(``Plan.per_list_chooser``) and launches it: one per-list kernel, the fused pass, or
the split strategy's three passes over a scratch buffer laid out by ``ScratchLayout``."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpuexec.kernels.gpu.catalog import Op, Strategy
from gpuexec.kernels.gpu.plan import Launch, Plan
from gpuexec.kernels.memo import WeakMemo
from gpuexec.kernels.validate import tail_of

ACC_BYTES = 16  # one carried partial: the widest accumulator, a (value, int64 index) pair
_INT64 = np.dtype(np.int64)
_IDENTITY_BITS: dict = {}  # (dtype, op, identity's type and repr) -> bits


@dataclass(frozen=True)
class ScratchLayout:
    """The split strategy's scratch buffer for ``ranges`` waves: per wave its first list
    (int64), the list its tail record belongs to (int64), then its lead and tail partials
    (ACC_BYTES each), every array starting at its byte offset below."""

    ranges: int

    @property
    def first_list(self) -> int:
        return 0

    @property
    def tail_list(self) -> int:
        return 8 * self.ranges

    @property
    def lead(self) -> int:
        return 16 * self.ranges

    @property
    def tail(self) -> int:
        return self.lead + ACC_BYTES * self.ranges

    @property
    def nbytes(self) -> int:
        return self.tail + ACC_BYTES * self.ranges


def out_dtype(op: Op, dtype: np.dtype) -> np.dtype:
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


def tile_items(strategy: Strategy, launch: Launch, itemsize: int) -> int:
    """Elements per thread per tile; mirrors ``tile_shape`` in the reduction sources."""
    vec = strategy.vec_bytes // itemsize
    raw = launch.item_bytes // itemsize
    return min(16, max(vec, raw))


def identity_bits(identity, dtype: np.dtype, op: Op) -> int:
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


def _bits_of(identity, dtype: np.dtype, op: Op) -> int:
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


class ReduceDispatch:
    """``dispatch(offsets, content, identity=None, with_empty=False)``: the reduction of
    ``op`` over ``dtype`` content on ``backend`` (a GPUBackend), under its plan."""

    def __init__(self, backend, op: Op, dtype: np.dtype):
        plan: Plan = backend.plan
        self.backend, self.op, self.dtype = backend, op, dtype
        self.out_dtype = out_dtype(op, dtype)
        self.strategy = plan.strategy
        self.role = plan.content_role
        self.config = plan.launch_of(self.role, op.device)
        wave = backend.device.wave
        self.tile = wave * tile_items(self.strategy, self.config, dtype.itemsize)
        self.waves_per_block = self.config.block // wave
        dt = dtype.name
        self.names = {r: f"gk_{op.device}_{dt}_{r}" for r in self.strategy.passes}
        self.names["partition"] = "gk_partition"
        # the per-list kernels live in the naive unit; each runs with the block it was
        # compiled for (per_wave's for per_wave_staged, per_thread's for both per-thread)
        self.per_list_plan = plan.per_list_plan()
        blocks = {r: self.per_list_plan.launch_of(r, op.device).block
                  for r in ("per_thread", "per_wave", "long_tail")}
        self.per_list_blocks = {"per_wave": blocks["per_wave"],
                                "per_wave_staged": blocks["per_wave"],
                                "long_tail": blocks["long_tail"]}
        self.per_thread_block = blocks["per_thread"]
        self.choose = plan.per_list_chooser(op.device, dt)
        self.per_list_launch: dict = {}  # role -> (kernel name, function, block)
        self.resident_waves = 0          # waves resident at once (the persistent grid)
        self.has_identity = op.device in ("min", "max")  # identity_bits is 0 otherwise
        # a launch found for checked offsets and content read as given, kept until either
        # buffer dies: a repeated call only allocates and launches (docs/gpu-reduction.md
        # #call-floor)
        self.remembered = WeakMemo()
        self.__name__ = f"{op.contract}_{dt}"

    def __call__(self, offsets, content, identity=None, with_empty=False):
        entry = self.remembered.get(offsets, content)
        if entry is None:
            return self._first_call(offsets, content, identity, with_empty)
        name, fn, grid, block, lead, n = entry
        backend = self.backend
        out = backend.alloc(n, self.out_dtype, self.names[self.role])
        empty = backend.alloc(n, np.bool_, self.names[self.role]) if with_empty else None
        bits = identity_bits(identity, self.dtype, self.op) if self.has_identity else 0
        backend.launch(name, fn, grid, block,
                       (*lead, bits, out.data.ptr, 0 if empty is None else empty.data.ptr))
        return (out, empty) if with_empty else out

    def _per_list_entry(self, role: str):
        entry = self.per_list_launch.get(role)
        if entry is None:
            name = f"gk_{self.op.device}_{self.dtype.name}_{role}"
            fn = self.backend.functions(self.op, self.per_list_plan)[name]
            entry = self.per_list_launch[role] = (
                name, fn, self.per_list_blocks.get(role, self.per_thread_block))
        return entry

    def _max_waves(self, fn) -> int:
        if not self.resident_waves:
            backend = self.backend
            per_cu = self.config.blocks_per_cu or backend.runtime.occupancy(fn, self.config.block)
            self.resident_waves = per_cu * backend.device.cu_count * self.waves_per_block
        return self.resident_waves

    def _first_call(self, offsets, content, identity, with_empty):
        backend, dtype, names = self.backend, self.dtype, self.names
        given = (offsets, content)
        longest, n_long = tail_of(offsets)  # where the API layer checked these offsets
        offsets = backend.int64(offsets)
        content = backend.asarray(content)
        n = offsets.shape[0] - 1
        out = backend.alloc(n, self.out_dtype, names[self.role])
        if n <= 0:
            return (out, backend.alloc(0, np.bool_, names[self.role])) if with_empty else out
        if content.dtype != dtype:
            content = content.astype(dtype)
        if not content.flags.c_contiguous:
            content = backend.nplike.ascontiguousarray(content)
        # remembered only for checked offsets and buffers read as given (no converted copy
        # whose pointer dies with this call)
        memorable = longest is not None and offsets is given[0] and content is given[1]
        if dtype.kind == "b":
            content = content.view(np.uint8)
        ptr = content.data.ptr
        shift = (ptr % 16) // dtype.itemsize
        ntiles = max(1, -(-(content.shape[0] + shift) // self.tile))
        # kernel arguments: plain ints, one 8-byte parameter each (bindings.launch)
        lead = (offsets.data.ptr, n, ptr - shift * dtype.itemsize, shift, ntiles, 0)
        bits = identity_bits(identity, dtype, self.op) if self.has_identity else 0
        role = self.choose(n, content.shape[0], content.nbytes, longest, n_long)
        if self.strategy.name == "naive" or role is not None:
            # with_empty: the per-list kernels also write the option mask (empty lists)
            empty = backend.alloc(n, np.bool_, names[self.role]) if with_empty else None
            if self.strategy.name == "naive":
                name = names["per_thread"]
                fn, block = backend.functions(self.op)[name], self.config.block
            else:
                name, fn, block = self._per_list_entry(role)
            grid = -(-n // block)
            backend.launch(name, fn, grid, block,
                           (*lead, bits, out.data.ptr, 0 if empty is None else empty.data.ptr))
            if memorable:
                self.remembered.put((name, fn, grid, block, lead, n), *given)
            return (out, empty) if with_empty else out
        self._flattened(lead, bits, out)
        # the flattened passes do not write the mask: one comparison pass
        return (out, offsets[1:] == offsets[:-1]) if with_empty else out

    def _flattened(self, lead: tuple, bits: int, out) -> None:
        """The strategy's flattened passes: fused (one persistent pass) or split
        (partition, reduce and fixup passes over a scratch buffer)."""
        backend, names, block = self.backend, self.names, self.config.block
        funcs = backend.functions(self.op)
        fn = funcs[names[self.role]]
        c_off, n, c_content, shift, ntiles, _ = lead
        ranges = min(ntiles, self._max_waves(fn))  # waves, each walking a range of tiles
        grid = -(-ranges // self.waves_per_block)
        if self.strategy.name == "fused":
            backend.launch(names["flat_fused"], fn, grid, block,
                           (c_off, n, c_content, shift, ntiles, ranges, bits, out.data.ptr))
            return
        layout = ScratchLayout(ranges)
        scratch = backend.alloc(layout.nbytes, np.uint8, names["flat_split"])
        base = scratch.data.ptr
        first, tail_list = base + layout.first_list, base + layout.tail_list
        lead_acc, tail_acc = base + layout.lead, base + layout.tail
        # every kernel of a unit runs with the block size it was compiled for
        backend.launch("gk_partition", funcs["gk_partition"], grid, block,
                       (c_off, n, shift, self.tile, ntiles, ranges, first))
        backend.launch(names["flat_split"], fn, grid, block,
                       (c_off, n, c_content, shift, ntiles, ranges, bits, first, lead_acc,
                        tail_acc, tail_list, out.data.ptr))
        backend.launch(names["flat_fixup"], funcs[names["flat_fixup"]], -(-ranges // block), block,
                       (c_off, n, shift, ntiles, ranges, self.tile, bits, lead_acc, tail_acc,
                        tail_list, out.data.ptr))
