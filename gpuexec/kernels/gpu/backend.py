"""GPUBackend: the kernel table of the GPU engine (CUDA or HIP, one implementation).

Buffers are CuPy arrays (cupy-cuda13x on NVIDIA, cupy-rocm on AMD), so results go back
into awkward's "cuda" backend without a copy. Kernels come from ``src/`` through the
runtime layer; which kernel runs and with which launch configuration is the plan's
decision (``plan.plan_for``: the policy row of the device's architecture), never the
call site's; tests and benchmarks force one with ``GPUBackend(plan=PlanRequest(...))``.

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

from gpuexec.kernels.backend import Backend, awkward_backend_of
from gpuexec.kernels.gpu import _cupy, _unavailable, device_count, vendor_of_current_device
from gpuexec.kernels.gpu import families
from gpuexec.kernels.gpu.catalog import OPS, OPS_BY_CONTRACT, Op
from gpuexec.kernels.gpu.errors import DeviceOutOfMemory, GPUCallError
from gpuexec.kernels.gpu.plan import Plan, PlanRequest, plan_for
from gpuexec.kernels.gpu.reduce_dispatch import ReduceDispatch
from gpuexec.kernels.gpu.runtime import Runtime
from gpuexec.kernels.gpu.units import family_unit, unit_for
from gpuexec.kernels.stats import record_kernel

_INT64 = np.dtype(np.int64)
_AK_ARRAY = ak.Array


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
    """``GPUBackend(vendor=None, plan=None, device=0, cache_dir=None)``.

    ``plan``: None (the policy row of the device's architecture), a ``PlanRequest`` forced
    over that row (tests and benchmarks run one kernel on every input this way), or a
    ``Plan``; ``vendor`` "cuda" or "hip" (default: the one present)."""

    ak_backend = "cuda"
    adopts = True  # host arrays are moved to the device

    def __init__(self, vendor: str | None = None, plan: Plan | PlanRequest | None = None,
                 device: int = 0, cache_dir: str | None = None):
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
        self.plan = plan if isinstance(plan, Plan) else plan_for(self.device.arch, plan)
        self.strategy = self.plan.strategy.name
        self._staging = PinnedStaging(cupy)
        self._prepared: dict = {}
        for op in OPS:
            if not op.dtypes:
                self.register(op.contract, (), self._count, count=False)
                continue
            for dt in op.dtypes:
                self.register(op.contract, (dt,), ReduceDispatch(self, op, np.dtype(dt)),
                              count=False)
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
    def functions(self, op: Op, plan: Plan | None = None):
        """{extern "C" name: function} of ``op``'s unit under ``plan`` (this backend's)."""
        plan = plan or self.plan
        key = (op.contract, plan.strategy.name)
        module = self._prepared.get(key)
        if module is None:
            module = self._prepared[key] = self.runtime.module(unit_for(plan, op))
        return module

    def _count(self, offsets):
        offsets = self.int64(offsets)
        n = offsets.shape[0] - 1
        out = self.alloc(n, _INT64, "gk_count")
        if n <= 0:
            return out
        fn = self.functions(OPS_BY_CONTRACT["reduce_count"])["gk_count"]
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
            plan = self.plan.per_list_plan() if per_list else self.plan
            unit = family_unit(plan, families.BY_NAME[family])
            funcs = self._family_modules[key] = self.runtime.module(unit)
        return funcs

    def preload(self) -> None:
        """Load every module of this backend's plan into the device now (from the disk
        cache, compiling what is missing) instead of at each kernel's first call. Workers
        call it at start so that their first chunk does not pay for it."""
        per_list_plan = self.plan.per_list_plan()
        for op in OPS:
            self.functions(op)
            if op.dtypes and self.plan.uses_per_list_unit(op.device):
                self.functions(op, per_list_plan)
        for family in families.FAMILIES:
            self.family_functions(family.name)
            if self.plan.strategy.flatten and family.name in self.plan.family_per_list:
                self.family_functions(family.name, per_list=True)

    def family_block(self, family: str) -> int:
        return self.plan.launch_of(family).block

def _create(vendor: str, **kwargs):
    """A GPUBackend of ``vendor``, or BackendUnavailable saying why none can run here."""
    cupy = _cupy()
    have = vendor_of_current_device()
    if have != vendor:
        raise _unavailable(f"backend {vendor!r} asked for, but CuPy here is built for {have!r}")
    if device_count() < 1:
        raise _unavailable(f"no {vendor} GPU is visible to CuPy")
    try:
        return GPUBackend(vendor, **kwargs)
    except cupy.cuda.runtime.CUDARuntimeError as err:
        raise _unavailable(f"the {vendor} device could not be initialised ({err})", err)


def create_cuda_backend(**kwargs):
    return _create("cuda", **kwargs)


def create_hip_backend(**kwargs):
    return _create("hip", **kwargs)
