"""Binding table, AMD half: the runtime's needs mapped onto hip-python (``hip.hip`` and
``hip.hiprtc``), entry for entry the mirror of ``bindings_cuda``.

NEVER RUN ON AMD HARDWARE: written from hip-python's documented API (hipModuleLaunchKernel
with ``extra`` = a tuple of ctypes values, hipDeviceProp_t.gcnArchName, hiprtc*). The
kernel sources it compiles are compile-verified with hipcc for gfx90a; this module itself
has only been imported where hip-python is installed. See docs/gpu-engine.md.
"""

from __future__ import annotations

import ctypes

from gpuexec.kernels.gpu.errors import GPUCallError

VENDOR = "hip"
CODE_SUFFIX = "hsaco"
_U64 = (1 << 64) - 1

from hip import hip as _hip  # noqa: E402
from hip import hiprtc as _rtc  # noqa: E402

_HIP_OK = _hip.hipError_t.hipSuccess
_RTC_OK = _rtc.hiprtcResult.HIPRTC_SUCCESS


def _check(result, what: str):
    err, *rest = result
    if err != _HIP_OK and err != _RTC_OK:
        name = getattr(err, "name", str(err))
        raise GPUCallError(f"{what} failed: {name}", code=int(err))
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def init(ordinal: int) -> None:
    """HIP has no separate context API to manage here: select the device in this thread."""
    _check(_hip.hipSetDevice(ordinal), "hipSetDevice")


_SYNC = {"auto": 0, "spin": 1, "yield": 2, "block": 4}  # hipDeviceSchedule*


def set_sync(ordinal: int, mode: str) -> None:
    """How a host thread waits for the device (``runtime.SYNC_MODES``): HIP's device
    flag (not run on AMD hardware here)."""
    init(ordinal)
    _check(_hip.hipSetDeviceFlags(_SYNC[mode]), "hipSetDeviceFlags")


def sync_mode(ordinal: int) -> str:
    init(ordinal)
    flags = int(_check(_hip.hipGetDeviceFlags(), "hipGetDeviceFlags"))
    return next((m for m, f in _SYNC.items() if f == flags & 7), "auto")


def device_properties(ordinal: int) -> dict:
    props = _hip.hipDeviceProp_t()
    _check(_hip.hipGetDeviceProperties(props, ordinal), "hipGetDeviceProperties")
    arch = props.gcnArchName
    if isinstance(arch, bytes):
        arch = arch.decode()
    name = props.name
    if isinstance(name, bytes):
        name = name.split(b"\0", 1)[0].decode(errors="replace")
    return {
        "name": name,
        "arch": arch.split(":", 1)[0],  # "gfx90a:sramecc+:xnack-" -> "gfx90a"
        "wave": int(props.warpSize),
        "cu_count": int(props.multiProcessorCount),
        "l2_bytes": int(props.l2CacheSize),
        "max_shared_per_block": int(props.sharedMemPerBlock),
    }


def compiler_version() -> str:
    major, minor = _check(_rtc.hiprtcVersion(), "hiprtcVersion")
    return f"hiprtc-{major}.{minor}"


def arch_options(arch: str) -> list[str]:
    return [f"--offload-arch={arch}", "-O3", "-std=c++17"]


def compile(source: bytes, name: str, headers: dict[str, bytes], options: list[str]) -> tuple[bytes, str]:
    """(code object, log) from hiprtc; raises GPUCallError with the log on failure."""
    names = list(headers)
    prog = _check(
        _rtc.hiprtcCreateProgram(source, name.encode(), len(names),
                                 [headers[h] for h in names], [h.encode() for h in names]),
        "hiprtcCreateProgram",
    )
    try:
        opts = [o.encode() for o in options]
        (err,) = _rtc.hiprtcCompileProgram(prog, len(opts), opts)
        size = _check(_rtc.hiprtcGetProgramLogSize(prog), "hiprtcGetProgramLogSize")
        log = bytearray(size)
        if size:
            _check(_rtc.hiprtcGetProgramLog(prog, log), "hiprtcGetProgramLog")
        log_text = bytes(log).rstrip(b"\0 ").decode(errors="replace")
        if err != _RTC_OK:
            raise GPUCallError(f"hiprtc could not compile {name}:\n{log_text}", code=int(err))
        size = _check(_rtc.hiprtcGetCodeSize(prog), "hiprtcGetCodeSize")
        image = bytearray(size)
        _check(_rtc.hiprtcGetCode(prog, image), "hiprtcGetCode")
        return bytes(image), log_text
    finally:
        _rtc.hiprtcDestroyProgram(prog.createRef())


def load_module(image: bytes):
    return _check(_hip.hipModuleLoadData(image), "hipModuleLoadData")


def get_function(module, name: str):
    return _check(_hip.hipModuleGetFunction(module, name.encode()), f"hipModuleGetFunction({name})")


def launch(function, grid: int, block: int, shared: int, stream: int, args: tuple) -> None:
    """Launch with ``args``: Python ints, one 8-byte kernel parameter each (pointers,
    int64, the bits of a uint64); hip-python packs the ctypes values, aligned, into the
    ``extra`` buffer."""
    extra = tuple(ctypes.c_uint64(v & _U64) for v in args)
    _check(
        _hip.hipModuleLaunchKernel(function, grid, 1, 1, block, 1, 1, sharedMemBytes=shared,
                                   stream=stream or None, kernelParams=None, extra=extra),
        "hipModuleLaunchKernel",
    )


def occupancy(function, block: int, shared: int = 0) -> int:
    """Resident blocks per compute unit for ``function`` at ``block`` threads."""
    return _check(_hip.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(function, block, shared),
                  "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor")
