"""The one runtime layer: compile kernel sources at run time (NVRTC or hiprtc), cache the
modules in memory and on disk, load them and launch kernels; device properties.

Everything vendor-specific comes from a binding table module (``bindings_cuda`` or
``bindings_hip``) with the same entries: ``init, set_sync, sync_mode, device_properties,
compiler_version, arch_options, compile, load_module, get_function, occupancy, launch,
VENDOR, CODE_SUFFIX``.

Module cache key: (arch, sha256 of source + header + defines + compiler version,
strategy). Disk cache: ``$GPUEXEC_KERNEL_CACHE`` or ``~/.cache/gpuexec/kernels``; a file
is written atomically and trusted by its name (the hash), so a stale file is never used
for a changed source.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import time
from dataclasses import dataclass

from gpuexec.kernels.gpu.catalog import SRC_DIR
from gpuexec.kernels.gpu.units import CompileUnit

#: every header a source may include (passed to the runtime compiler by name, hashed into
#: the module-cache key so that a changed header never reuses a stale module)
HEADERS = ("portability.cuh", "flat.cuh", "reduce_ops.cuh", "reduce_flat_walk.cuh",
           "reduce_flat_split.cuh", "reduce_flat_fused.cuh", "reduce_per_thread.cuh",
           "reduce_per_thread_staged.cuh", "reduce_wave_stream.cuh",
           "reduce_per_wave_staged.cuh", "reduce_long_tail.cuh", "reduce_per_wave.cuh")

#: How a host thread waits for its device (CUDA's context scheduling flags, HIP's device
#: flags): "auto" is the driver's default (spin while the process has fewer active
#: contexts than cores, else yield); "block" sleeps until the device signals, leaving the
#: core to other processes, as many GPU workers sharing one device through MPS on few
#: cores want. A Runtime applies ``$GPUEXEC_GPU_SYNC``, when it is set, to its device.
SYNC_MODES = ("auto", "spin", "yield", "block")
SYNC_ENV = "GPUEXEC_GPU_SYNC"


@dataclass(frozen=True)
class DeviceInfo:
    vendor: str
    ordinal: int
    name: str
    arch: str
    wave: int
    cu_count: int
    l2_bytes: int
    max_shared_per_block: int


def default_cache_dir() -> str:
    env = os.environ.get("GPUEXEC_KERNEL_CACHE")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpuexec", "kernels")


_SOURCES: dict[str, bytes] = {}


def source(name: str) -> bytes:
    src = _SOURCES.get(name)
    if src is None:
        with open(os.path.join(SRC_DIR, name), "rb") as f:
            src = _SOURCES[name] = f.read()
    return src


def unit_options(bindings, arch: str, unit: CompileUnit) -> list[str]:
    defs = [f"-D{k}={v}" for k, v in sorted(unit.defines.items())]
    return bindings.arch_options(arch) + defs


def unit_key(bindings, arch: str, unit: CompileUnit, compiler: str) -> tuple[str, str, str]:
    """(arch, source hash, strategy): the hash covers the source, the header, the options
    (defines) and the compiler version."""
    h = hashlib.sha256()
    for part in (source(unit.source), *(source(h) for h in HEADERS),
                 "\0".join(unit_options(bindings, arch, unit)).encode(), compiler.encode()):
        h.update(part)
        h.update(b"\0")
    return (arch, h.hexdigest()[:32], unit.strategy)


def cache_path(bindings, cache_dir: str, key, unit: CompileUnit) -> str:
    arch, digest, strategy = key
    return os.path.join(cache_dir, f"{bindings.VENDOR}-{arch}-{strategy}-{unit.op or 'unit'}-"
                                   f"{digest}.{bindings.CODE_SUFFIX}")


def _store(path: str, image: bytes) -> None:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(image)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs a recompile next time


def build_image(bindings, arch: str, unit: CompileUnit, cache_dir: str, compiler: str):
    """(code object, "disk" | "compiled"): from the disk cache, else compiled and stored.
    Needs no device (runtime compilers run anywhere)."""
    key = unit_key(bindings, arch, unit, compiler)
    path = cache_path(bindings, cache_dir, key, unit)
    try:
        with open(path, "rb") as f:
            image = f.read()
        if image:
            return image, "disk"
    except OSError:
        pass
    image, _log = bindings.compile(source(unit.source), unit.source,
                                   {h: source(h) for h in HEADERS},
                                   unit_options(bindings, arch, unit))
    _store(path, image)
    return image, "compiled"


class Runtime:
    """Compiles, caches and launches kernels on one device through one binding table."""

    def __init__(self, bindings, ordinal: int = 0, cache_dir: str | None = None):
        self.bindings = bindings
        self.ordinal = ordinal
        sync = os.environ.get(SYNC_ENV)
        if sync:
            if sync not in SYNC_MODES:
                raise ValueError(f"${SYNC_ENV} is one of {SYNC_MODES}, got {sync!r}")
            bindings.set_sync(ordinal, sync)
        bindings.init(ordinal)
        self._bound = threading.local()
        self._bound.ok = True
        props = bindings.device_properties(ordinal)
        self.device = DeviceInfo(bindings.VENDOR, ordinal, **props)
        self.compiler = bindings.compiler_version()
        self.cache_dir = cache_dir or default_cache_dir()
        self._modules: dict[tuple, dict] = {}
        self._lock = threading.Lock()
        #: one record per module built or loaded: (key, "compiled"|"disk", seconds)
        self.module_log: list[tuple] = []

    # -- sources and keys ----------------------------------------------------------------
    def options(self, unit: CompileUnit) -> list[str]:
        return unit_options(self.bindings, self.device.arch, unit)

    def key(self, unit: CompileUnit) -> tuple[str, str, str]:
        return unit_key(self.bindings, self.device.arch, unit, self.compiler)

    # -- modules -------------------------------------------------------------------------
    def module(self, unit: CompileUnit) -> dict:
        """{kernel name: function handle} of ``unit``, compiled or loaded once."""
        key = self.key(unit)
        mod = self._modules.get(key)
        if mod is not None:
            return mod
        with self._lock:
            mod = self._modules.get(key)
            if mod is None:
                mod = self._modules[key] = self._build(unit, key)
        return mod

    def _build(self, unit: CompileUnit, key) -> dict:
        t0 = time.perf_counter()
        image, how = build_image(self.bindings, self.device.arch, unit, self.cache_dir,
                                 self.compiler)
        self._ensure_thread()
        module = self.bindings.load_module(image)
        funcs = {name: self.bindings.get_function(module, name) for name in unit.kernels}
        funcs["__module__"] = module
        self.module_log.append((key, unit.op, how, time.perf_counter() - t0))
        return funcs

    # -- launches ------------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if not getattr(self._bound, "ok", False):
            self.bindings.init(self.ordinal)
            self._bound.ok = True

    def occupancy(self, function, block: int) -> int:
        """Blocks of ``function`` resident per CU/SM at ``block`` threads (>= 1)."""
        return max(1, int(self.bindings.occupancy(function, block, 0)))

    def launch(self, function, grid: int, block: int, args: tuple, stream: int = 0,
               shared: int = 0) -> None:
        if grid <= 0:
            return
        if not getattr(self._bound, "ok", False):
            self._ensure_thread()
        self.bindings.launch(function, int(grid), int(block), shared, stream, args)
