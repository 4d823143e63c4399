"""What every public function shares: backend resolution, call counting, the
hand-off to awkward for cases the engine does not run natively, and result placement."""

from __future__ import annotations

import functools
import inspect
import threading
import time

import awkward as ak
import numpy as np

from gpuexec.kernels import dispatch, stats
from gpuexec.kernels.api._results import plain_array
from gpuexec.kernels.layout import NotNative, is_numbers  # noqa: F401 (NotNative: api's)


_ARRAYS = (ak.Array, ak.Record, ak.contents.Content)
_ADOPTABLE = (ak.Array, ak.contents.Content)
# argument types that hold no arrays: one type check instead of three isinstance calls
_SCALARS = frozenset([int, float, bool, str, type(None)])


def _arrays_of(args, kwargs):
    out = []
    for group in (args, kwargs.values()) if kwargs else (args,):
        for a in group:
            if type(a) in _SCALARS:
                continue
            if isinstance(a, _ARRAYS):
                out.append(a)
            elif isinstance(a, dict):
                out.extend(v for v in a.values() if isinstance(v, _ADOPTABLE))
            elif isinstance(a, (list, tuple)):
                out.extend(v for v in a if isinstance(v, _ADOPTABLE))
    return out


_nested = threading.local()  # depth of public calls in this thread


def public(awkward_fn):
    """Decorator for a public gk function mirroring ``awkward_fn``.

    The implementation is written as ``impl(*args, backend: Backend, **kwargs)`` and may
    raise ``NotNative(reason)``; the wrapper adds the ``backend=None`` and ``to=None``
    keywords, resolves the backend at the one dispatch point, counts the call, hands
    non-native cases to ``awkward_fn`` (counted in ``gk.stats()["handoffs"]``) and
    places the result (``to="host"`` or ``"device"``)."""

    def decorate(impl):
        name = impl.__name__
        family = impl.__module__.rsplit(".", 1)[-1]  # api module: reductions, indexing, ...
        sig = inspect.signature(impl)

        @functools.wraps(impl)
        def wrapper(*args, backend=None, to=None, **kwargs):
            # one pass over the arguments: the arrays are only scanned when neither
            # backend= nor gk.using names the backend, and adoption is skipped where the
            # scan shows every array already on the backend (the common call)
            if backend is not None:
                be, native = dispatch.get_backend(backend), False
            else:
                be, native = dispatch.current_default(), False
                if be is None:
                    be, native = dispatch.backend_of_arrays(_arrays_of(args, kwargs))
            outer = not getattr(_nested, "depth", 0)  # time outermost calls only
            _nested.depth = getattr(_nested, "depth", 0) + 1
            start = time.perf_counter()
            try:
                if be.adopts and not native:
                    args = tuple(_adopt(be, a) for a in args)
                    kwargs = {k: _adopt(be, v) for k, v in kwargs.items()}
                try:
                    out = impl(*args, backend=be, **kwargs)
                except NotNative as why:
                    stats.record_handoff(name, str(why))
                    out = awkward_fn(*args, **kwargs)
            finally:
                _nested.depth -= 1
                stats.record_call(name, be.name, family if outer else None,
                                  time.perf_counter() - start)
            return out if to is None else place(out, to)

        params = [p for p in sig.parameters.values() if p.name != "backend"]
        params += [
            inspect.Parameter("backend", inspect.Parameter.KEYWORD_ONLY, default=None),
            inspect.Parameter("to", inspect.Parameter.KEYWORD_ONLY, default=None),
        ]
        wrapper.__signature__ = sig.replace(parameters=params)
        wrapper.__gk_awkward__ = awkward_fn
        return wrapper

    return decorate


def _adopt(backend, value):
    if isinstance(value, _ADOPTABLE):
        return backend.adopt(value)
    return value


def place(out, to):
    """Move a result to the host (``"host"``/``"cpu"``) or leave it where it was made."""
    if to is None or not isinstance(out, (ak.Array, ak.Record)):
        return out
    if to in ("host", "cpu"):
        return ak.to_backend(out, "cpu")
    if to == "device":
        return ak.to_backend(out, "cuda")
    raise ValueError(f"to= must be 'host', 'device' or None, not {to!r}")


def wrap(layout, like=None, *, highlevel=True, behavior=None, attrs=None, plain=False):
    """A layout as the caller asked for it (``ak.Array`` unless ``highlevel=False``).
    ``plain``: the layout has no parameters at any depth (``_results.plain_array``)."""
    if not highlevel:
        return layout
    if isinstance(like, (ak.Array, ak.Record)):
        if behavior is None:
            behavior = like.behavior
        if attrs is None:
            # empty attrs read the same as none, and awkward then neither checks nor
            # copies them (about 1 us per call)
            attrs = like.attrs or None
    if plain:
        return plain_array(layout, behavior, attrs)
    return ak.Array(layout, behavior=behavior, attrs=attrs)


def is_integer(value) -> bool:
    """An int or numpy integer, not a bool (an ``axis``, an ``n``)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def signature(value):
    """A hashable stand-in for an argument of ``awkward_leaf_dtype``: an array's form, or
    a number's type and dtype."""
    if isinstance(value, ak.contents.Content):
        return ("form", value.form.to_json())
    if isinstance(value, ak.Array):
        return ("form", value.layout.form.to_json())
    dtype = getattr(value, "dtype", None)
    return ("number", type(value), None if dtype is None else np.dtype(dtype).str)


@functools.lru_cache(maxsize=512)
def awkward_leaf_dtype(awkward_fn, signatures: tuple, options: tuple = ()) -> np.dtype:
    """The dtype of the numbers ``awkward_fn(*arguments, **dict(options))`` returns for
    arguments of these ``signature``s, asked of awkward's type tracer (so the promotion
    rule is awkward's, not a copy of it); NotNative where its result below the lists is
    not plain numbers (a union, an option, ...)."""
    args = []
    for kind, *rest in signatures:
        if kind == "form":
            form = ak.forms.from_json(rest[0])
            args.append(ak.Array(form.length_zero_array().to_typetracer(forget_length=True)))
        else:
            value_type, dtype = rest
            args.append(value_type(0) if dtype is None else np.zeros((), dtype)[()])
    out = awkward_fn(*args, **dict(options), highlevel=False)
    while isinstance(out, (ak.contents.ListOffsetArray, ak.contents.ListArray,
                           ak.contents.RegularArray)):
        out = out.content
    if not is_numbers(out):
        raise NotNative(f"awkward's result holds {type(out).__name__}, not numbers")
    return out.dtype
