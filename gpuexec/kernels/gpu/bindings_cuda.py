"""Binding table, NVIDIA half: the runtime's needs mapped onto cuda-python
(``cuda.bindings.driver`` and ``cuda.bindings.nvrtc``). ``bindings_hip`` is its mirror.

Every entry returns plain Python values and raises ``GPUCallError`` on a failed call;
nothing here knows about kernels or strategies.
"""

from __future__ import annotations

import ctypes
import threading

from gpuexec.kernels.gpu.errors import GPUCallError

VENDOR = "cuda"
CODE_SUFFIX = "cubin"

try:
    from cuda.bindings import driver as _drv
    from cuda.bindings import nvrtc as _rtc
except ImportError:  # cuda-python < 12.6 layout
    from cuda import cuda as _drv  # type: ignore[no-redef]
    from cuda import nvrtc as _rtc  # type: ignore[no-redef]

_DRV_OK = _drv.CUresult.CUDA_SUCCESS
_RTC_OK = _rtc.nvrtcResult.NVRTC_SUCCESS


def _check(result, what: str):
    err, *rest = result
    if err != _DRV_OK and err != _RTC_OK:
        name = getattr(err, "name", str(err))
        raise GPUCallError(f"{what} failed: {name}", code=int(err))
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


_initialised = False
_contexts: dict[int, object] = {}


def _driver() -> None:
    global _initialised
    if not _initialised:
        _check(_drv.cuInit(0), "cuInit")
        _initialised = True


def _device(ordinal: int):
    """The driver's handle of device ``ordinal`` (the driver initialised first)."""
    _driver()
    return _check(_drv.cuDeviceGet(ordinal), "cuDeviceGet")


def init(ordinal: int) -> None:
    """Initialise the driver and make the device's primary context (the one CuPy uses)
    current in this thread."""
    _driver()
    ctx = _contexts.get(ordinal)
    if ctx is None:
        ctx = _check(_drv.cuDevicePrimaryCtxRetain(_device(ordinal)), "cuDevicePrimaryCtxRetain")
        _contexts[ordinal] = ctx
    _check(_drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


_SYNC = {"auto": "CU_CTX_SCHED_AUTO", "spin": "CU_CTX_SCHED_SPIN",
         "yield": "CU_CTX_SCHED_YIELD", "block": "CU_CTX_SCHED_BLOCKING_SYNC"}


def set_sync(ordinal: int, mode: str) -> None:
    """How a host thread waits for the device (``runtime.SYNC_MODES``): the primary
    context's scheduling flag, which CUDA lets a process change while the context is
    active."""
    dev = _device(ordinal)
    flag = getattr(_drv.CUctx_flags, _SYNC[mode])
    _check(_drv.cuDevicePrimaryCtxSetFlags(dev, int(flag)), "cuDevicePrimaryCtxSetFlags")


def sync_mode(ordinal: int) -> str:
    """The primary context's scheduling flag, as a ``set_sync`` mode."""
    dev = _device(ordinal)
    flags, _active = _check(_drv.cuDevicePrimaryCtxGetState(dev), "cuDevicePrimaryCtxGetState")
    sched = int(flags) & int(_drv.CUctx_flags.CU_CTX_SCHED_MASK)
    return next(m for m, f in _SYNC.items() if int(getattr(_drv.CUctx_flags, f)) == sched)


def device_properties(ordinal: int) -> dict:
    dev = _device(ordinal)
    A = _drv.CUdevice_attribute

    def attr(a):
        return _check(_drv.cuDeviceGetAttribute(a, dev), "cuDeviceGetAttribute")

    major = attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    minor = attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    name = _check(_drv.cuDeviceGetName(256, dev), "cuDeviceGetName")
    return {
        "name": bytes(name).split(b"\0", 1)[0].decode(errors="replace"),
        "arch": f"sm_{major}{minor}",
        "wave": attr(A.CU_DEVICE_ATTRIBUTE_WARP_SIZE),
        "cu_count": attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        "l2_bytes": attr(A.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
        "max_shared_per_block": attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
    }


def compiler_version() -> str:
    major, minor = _check(_rtc.nvrtcVersion(), "nvrtcVersion")
    return f"nvrtc-{major}.{minor}"


def arch_options(arch: str) -> list[str]:
    return [f"--gpu-architecture={arch}", "-std=c++17"]


def compile(source: bytes, name: str, headers: dict[str, bytes], options: list[str]) -> tuple[bytes, str]:
    """(code object, log) from NVRTC; raises GPUCallError with the log on failure."""
    names = list(headers)
    prog = _check(
        _rtc.nvrtcCreateProgram(source, name.encode(), len(names),
                                [headers[h] for h in names], [h.encode() for h in names]),
        "nvrtcCreateProgram",
    )
    try:
        opts = [o.encode() for o in options]
        (err,) = _rtc.nvrtcCompileProgram(prog, len(opts), opts)
        size = _check(_rtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        log = b" " * size
        _check(_rtc.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
        log_text = log.rstrip(b"\0 ").decode(errors="replace")
        if err != _RTC_OK:
            raise GPUCallError(f"NVRTC could not compile {name}:\n{log_text}", code=int(err))
        size = _check(_rtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        image = b" " * size
        _check(_rtc.nvrtcGetCUBIN(prog, image), "nvrtcGetCUBIN")
        return bytes(image), log_text
    finally:
        _rtc.nvrtcDestroyProgram(prog)


def load_module(image: bytes):
    return _check(_drv.cuModuleLoadData(image), "cuModuleLoadData")


def get_function(module, name: str):
    return _check(_drv.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")


class _ParamSlots(threading.local):
    """Per thread, per argument count: an int64 array holding the values and the array of
    their addresses that cuLaunchKernel reads. The driver copies the values during the
    call, so the slots are reused at once; per thread, since launches run from several."""

    def __init__(self):
        self.by_count: dict[int, tuple] = {}

    def get(self, count: int) -> tuple:
        slot = self.by_count.get(count)
        if slot is None:
            values = (ctypes.c_int64 * count)()
            base = ctypes.addressof(values)
            addresses = (ctypes.c_void_p * count)(*(base + 8 * i for i in range(count)))
            # the address array itself rides along: cuLaunchKernel gets only its address
            slot = self.by_count[count] = (values, ctypes.addressof(addresses), addresses)
        return slot


_slots = _ParamSlots()


def launch(function, grid: int, block: int, shared: int, stream: int, args: tuple) -> None:
    """Launch with ``args``: Python ints, one 8-byte kernel parameter each (pointers,
    int64, the bits of a uint64). Packing ints into a reused ctypes array instead of
    building a ctypes object per argument saves a few microseconds per launch."""
    values, address, _ = _slots.get(len(args))
    values[:] = args  # ctypes stores the low 64 bits: uint64 bits and pointers fit
    err = _drv.cuLaunchKernel(function, grid, 1, 1, block, 1, 1, shared, stream, address, 0)[0]
    if err != _DRV_OK:
        _check((err,), "cuLaunchKernel")


def occupancy(function, block: int, shared: int = 0) -> int:
    """Resident blocks per multiprocessor for ``function`` at ``block`` threads."""
    return _check(_drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(function, block, shared),
                  "cuOccupancyMaxActiveBlocksPerMultiprocessor")
