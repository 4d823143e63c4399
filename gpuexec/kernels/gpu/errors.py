"""Errors of the GPU engine (importable without any GPU package)."""

from __future__ import annotations


class GPUCallError(RuntimeError):
    """A driver, runtime-compiler or launch call failed."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class DeviceOutOfMemory(MemoryError):
    """The device could not hold a buffer that a kernel needs. Names the kernel and the
    bytes asked for; the executor falls back to the CPU on it."""

    def __init__(self, kernel: str, nbytes: int, detail: str = ""):
        self.kernel = kernel
        self.nbytes = int(nbytes)
        self.detail = detail
        msg = f"GPU out of memory in {kernel}: could not allocate {self.nbytes:,} bytes"
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)

    def __reduce__(self):  # it travels from a worker inside a ChunkError
        return (type(self), (self.kernel, self.nbytes, self.detail))
