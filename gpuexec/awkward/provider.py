"""The provider: answers awkward's kernel lookups (``Backend.__getitem__((name, *dtypes))``)
and reducer preparation (``Backend.prepare_reducer``) from the engine.

``Provider(mode)``: "device" serves awkward's CuPy backend ("cuda" arrays) from the GPU
engine of the device's vendor (CUDA or HIP) on CuPy's current stream; "cpu" serves
awkward's NumPy backend from the CPU engine (numba), so that every adapter runs and is
checked on machines without a GPU. A name or dtype key it does not serve falls back to
awkward's own kernel on the CPU and on NVIDIA, counted in ``gk.stats()``; on AMD, where
awkward has no kernels, it raises ``KernelNotServed`` naming the kernel.

``shadow=True`` (tests): after each served call, awkward-cpp's own kernel runs on host
copies of the arguments and every output must match; overloaded reducers are compared
with awkward's own reducer.
"""

from __future__ import annotations

import ctypes

import numpy as np

from gpuexec.awkward import adapters, reducers  # noqa: F401  (reducers fills the table)
from gpuexec.kernels.stats import record_awkward

_INT64 = np.dtype(np.int64)


class KernelNotServed(NotImplementedError):
    """awkward asked for a kernel the provider does not serve, where nothing else can."""


class ShadowMismatch(AssertionError):
    """A served kernel's output differs from awkward-cpp's on the same arguments."""


class Engine:
    """What an adapter sees: the engine backend, its array module and a few helpers."""

    def __init__(self, backend):
        self.backend = backend
        self.xp = backend.nplike
        self.on_device = self.xp is not np

    def call(self, name, dtypes, *args):
        return self.backend.kernel(name, *dtypes)(*args)

    def i64(self, a):
        if a.dtype != _INT64:
            a = a.astype(_INT64)
        return self.xp.ascontiguousarray(a)

    def host(self, a):
        return a.get() if self.on_device else np.asarray(a)

    def write_at(self, address: int, values) -> None:
        """Copy ``values`` into the array awkward allocated at ``address``."""
        nbytes = values.size * values.dtype.itemsize
        if nbytes == 0:
            return
        if self.on_device:
            cp = self.xp
            memory = cp.cuda.UnownedMemory(address, nbytes, owner=None)
            dst = cp.ndarray(values.shape, values.dtype, cp.cuda.MemoryPointer(memory, 0))
        else:
            raw = (ctypes.c_char * nbytes).from_address(address)
            dst = np.frombuffer(raw, dtype=values.dtype)
        dst[...] = values


def _materialize(args):
    from awkward._nplikes.array_like import maybe_materialize

    return maybe_materialize(*args)


def _cpu_kernel(key):
    """awkward-cpp's kernel for ``key`` (name, *dtype types), or None."""
    import awkward_cpp

    try:
        return awkward_cpp.cpu_kernels.kernel[key]
    except KeyError:
        return None


class ServedKernel:
    """What the lookup returns: awkward calls it with the spec's arguments."""

    __slots__ = ("_adapter", "_provider", "key", "name")

    def __init__(self, provider, adapter, key):
        self._provider, self._adapter, self.key = provider, adapter, key
        self.name = key[0]

    def __call__(self, *args):
        args = _materialize(args)
        provider = self._provider
        if provider.shadow and self.name not in UNSHADOWED:
            return provider.run_shadowed(self, args)
        self._adapter(provider.engine, *args)
        record_awkward("served", self.name)
        return None

    def __repr__(self):
        return f"<gpuexec served kernel {self.key[0]}>"


#: kernels whose outputs are reached through addresses (ListArray_combinations' tocarry):
#: the conformance tests compare them; the shadow does not
UNSHADOWED = frozenset({"awkward_ListArray_combinations"})


class Provider:
    def __init__(self, engine_backend, vendor: str, fallback, shadow: bool = False,
                 shadow_rtol: float = 0.0):
        self.engine = Engine(engine_backend)
        self.vendor = vendor          # "cpu", "cuda" or "hip"
        self._fallback = fallback     # awkward's own lookup, or None (AMD)
        self.shadow = shadow
        self.shadow_rtol = shadow_rtol
        self._served: dict = {}

    # -- lookup ----------------------------------------------------------------------
    def serves(self, key) -> bool:
        return key[0] in adapters.ADAPTERS and _cpu_kernel(key) is not None

    def lookup(self, backend, key):
        kernel = self._served.get(key)
        if kernel is not None:
            return kernel
        if self.serves(key):
            kernel = self._served[key] = ServedKernel(self, adapters.ADAPTERS[key[0]], key)
            return kernel
        if self._fallback is None:
            raise KernelNotServed(
                f"awkward kernel {key[0]} for dtypes "
                f"{tuple(np.dtype(t).name for t in key[1:])} is not served by gpuexec's "
                f"provider, and awkward has no kernels on {self.vendor} devices")
        record_awkward("fallback", key[0])
        return self._fallback(backend, key)

    # -- reducers ----------------------------------------------------------------------
    def prepare_reducer(self, reducer):
        overload = _overload_class(type(reducer))
        if overload is None:
            return reducer
        new = overload.__new__(overload)
        new.__dict__.update(getattr(reducer, "__dict__", {}))
        new._gpuexec_provider = self
        return new

    # -- shadow ----------------------------------------------------------------------
    def run_shadowed(self, kernel, args):
        host = [self.engine.host(a).copy() if _is_array(a) else a for a in args]
        self._adapter_call(kernel, args)
        from awkward._kernels import NumpyKernel

        fn = _cpu_kernel(kernel.key)
        error = NumpyKernel(fn, kernel.key)(*host)
        if error is not None and error.str is not None:
            raise ShadowMismatch(f"{kernel.name}: awkward-cpp raises "
                                 f"{error.str.decode()!r}, the served kernel did not")
        for i, (direction, expected) in enumerate(zip(fn.dir, host)):
            if direction == "out" and _is_array(args[i]):
                self.compare(kernel.name, i, self.engine.host(args[i]), expected)
        return None

    def _adapter_call(self, kernel, args):
        kernel._adapter(self.engine, *args)
        record_awkward("served", kernel.name)

    def compare(self, name, what, got, expected):
        if got.dtype.kind == "f" and self.shadow_rtol:
            same = np.allclose(got, expected, rtol=self.shadow_rtol, equal_nan=True)
        else:
            same = np.array_equal(got, expected, equal_nan=got.dtype.kind == "f")
        if not same:
            bad = np.flatnonzero(~((got == expected) | ((got != got) & (expected != expected))))
            raise ShadowMismatch(f"{name}: output {what} differs from awkward's at "
                                 f"{bad[:8].tolist()}: {got[bad[:8]].tolist()} != "
                                 f"{expected[bad[:8]].tolist()}")


def _is_array(a) -> bool:
    return hasattr(a, "dtype") and getattr(a, "ndim", 0) > 0


_OVERLOADS: dict = {}


def _overload_class(cls):
    """The engine-backed subclass of awkward reducer class ``cls`` (exact class only:
    the axis=None variants keep awkward's code), or None."""
    if cls in _OVERLOADS:
        return _OVERLOADS[cls]
    overload = None
    if cls.__module__ == "awkward._reducers" and cls.__name__ in reducers.OVERLOADED:
        overload = type(f"Engine{cls.__name__}", (cls,), {"apply": _overloaded_apply})
    _OVERLOADS[cls] = overload
    return overload


def _overloaded_apply(self, array, offsets, starts, shifts, outlength):
    import awkward as ak

    provider = self._gpuexec_provider
    base = super(type(self), self).apply
    result = reducers._engine_apply(provider.engine, self, array, offsets, starts, shifts,
                                    outlength)
    if result is None:
        record_awkward("left", f"reducer {self.name}")
        return base(array, offsets, starts, shifts, outlength)
    record_awkward("served", f"reducer {self.name}")
    if not isinstance(result, ak.contents.NumpyArray):
        result = ak.contents.NumpyArray(result, backend=array.backend)
    if provider.shadow:
        expected = base(array, offsets, starts, shifts, outlength)
        provider.compare(f"reducer {self.name}", "result", provider.engine.host(result.data),
                         provider.engine.host(expected.data))
        if result.dtype != expected.dtype:
            raise ShadowMismatch(f"reducer {self.name}: dtype {result.dtype} != awkward's "
                                 f"{expected.dtype}")
    return result
