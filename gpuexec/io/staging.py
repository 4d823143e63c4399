"""How a GPU-pool task sees its chunk: the events staged on an awkward backend, each
column read (and copied to the device) once, when the processor first touches it, and
the processor's output brought back to the host.

``StagedProcessor`` wraps the user's processor for such a task; ``stage_events`` and
``stage_factory`` stage a chunk's events (coffea's, or read directly by
``gpuexec.io.device_read``); ``Timings`` collects the seconds spent reading and moving
columns, which the executor reports beside compute; ``to_host`` brings results back.
The executor decides where a chunk runs; this module only knows how it is staged.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import threading
import time
import weakref
from collections.abc import Mapping

import numpy as np
from coffea.processor import ProcessorABC
from coffea.processor.executor import Runner

from gpuexec.io import device_read

__all__ = ["StagedProcessor", "Timings", "awkward_messages_on_error", "processor_token",
           "stage_events", "stage_factory", "to_host"]


class Timings:
    """Seconds of one task spent reading columns (uproot, decompression) and moving them
    to the device; the rest of the processor's time is compute."""

    __slots__ = ("read", "transfer")

    def __init__(self):
        self.read = 0.0
        self.transfer = 0.0


def _device_copier(ak_backend: str):
    """(copy host array -> device array, wait for the copy) for an awkward backend."""
    if ak_backend == "cpu":
        return (lambda a: a), (lambda: None)
    import cupy

    return cupy.asarray, (lambda: cupy.cuda.get_current_stream().synchronize())


def _read_then_copy(read, copy, wait, timings: Timings):
    """``read()`` (a host array) copied by ``copy`` once the copy is done, the seconds of
    each added to ``timings``. The device's queued work is waited for first, uncounted:
    a copy on the same stream would wait for it too, and that wait is the processor's
    compute, not the column's transfer."""
    wait()
    t0 = time.perf_counter()
    host = read()
    t1 = time.perf_counter()
    out = copy(host)
    wait()
    timings.read += t1 - t0
    timings.transfer += time.perf_counter() - t1
    return out


def _array_module(ak_backend: str):
    if ak_backend == "cpu":
        return np
    import cupy

    return cupy


# The plain-branch buffers a processor's tasks on this worker have read through
# device_reading, per (processor token, tree): a task of the same processor reads all of
# them in one batch at its first touch (one inflate, one copy, one nvCOMP call) instead of
# one read per column as the processor touches them. A column predicted but not touched is
# read for nothing; one touched but not predicted is read alone, and predicted next time.
# Tasks add to the list, never replace it: a worker's tasks running side by side would
# otherwise cut it to what the latest had touched so far.
_READ_AHEAD: dict = {}
_READ_AHEAD_LOCK = threading.Lock()
READ_AHEAD_KEPT = 64  # processors x trees remembered per worker process


def _learned(key) -> tuple:
    with _READ_AHEAD_LOCK:
        return _READ_AHEAD.get(key, ())


def _learn(key, nodes: tuple) -> None:
    """Add the buffer ``nodes`` to the columns read ahead for ``key``."""
    with _READ_AHEAD_LOCK:
        known = _READ_AHEAD.pop(key, ())  # (re-inserted last: the oldest go first)
        _READ_AHEAD[key] = known if nodes in known else (*known, nodes)
        while len(_READ_AHEAD) > READ_AHEAD_KEPT:
            _READ_AHEAD.pop(next(iter(_READ_AHEAD)))


def processor_token(work) -> str | None:
    """A digest of the processor inside Runner's work function (its pickle), naming it
    in ``_READ_AHEAD`` across tasks and calls; None for any other function."""
    if not (isinstance(work, functools.partial) and work.func is Runner._work_function):
        return None
    proc = work.keywords.get("processor_instance")
    if proc is None:
        return None
    try:
        import cloudpickle

        data = proc if isinstance(proc, (bytes, bytearray)) else cloudpickle.dumps(proc)
    except Exception:  # an unpicklable processor runs without read-ahead
        return None
    return hashlib.sha1(bytes(data)).hexdigest()


class _DeviceBuffers(Mapping):
    """The buffers of a chunk's NanoEvents as ``ak.from_buffers`` asks for them, each
    loaded when first touched: plain NanoAOD branches read by
    ``gpuexec.io.device_read`` into arrays of the backend's module, any other buffer
    (or branch it does not handle) read by coffea as before and copied. With a
    ``read_ahead`` token, the first plain branch touched is read together with every one
    the same processor's tasks here have touched (``_READ_AHEAD``)."""

    def __init__(self, mapping, ak_backend: str, timings: Timings,
                 read_ahead: str | None = None):
        self.mapping, self.timings = mapping, timings
        self.xp = _array_module(ak_backend)
        self.copy, self.wait = _device_copier(ak_backend)
        self.token = read_ahead
        self.ahead: dict | None = None  # (uuid, tree, start, stop, nodes) -> array
        self.touched: dict = {}  # tree -> nodes this task read through device_reading

    def _direct(self, uuid, treepath, start, stop, nodes, name, kind, copy):
        """The column of ``nodes`` from device_reading (None if it refuses it), read with
        this processor's learned columns on the first call."""
        where = (uuid, treepath, start, stop)
        columns = [(nodes, name, kind)]
        if self.token is not None and self.ahead is None:
            self.ahead = {}
            for other in _learned((self.token, treepath)):
                found = device_read.column_for(other)
                if other != nodes and found is not None:
                    columns.append((other, *found))
        tree = self.mapping._column_source(uuid, treepath)
        requests, kept = [], []
        for k, (n, branch, kind_) in enumerate(columns):
            try:
                requests.append((kind_, tree[branch], start, stop))
            except KeyError:
                if k == 0:  # the column asked for: coffea names the missing branch
                    raise
                continue  # a learned branch this tree lacks
            kept.append(n)
        got = device_read.read_many(requests, self.xp, copy)
        for n, value in zip(kept[1:], got[1:]):
            if not isinstance(value, device_read.Unsupported):
                self.ahead[(*where, n)] = value
        return None if isinstance(got[0], device_read.Unsupported) else got[0]

    def _touch(self, treepath, nodes: tuple) -> None:
        """Learn that this task read ``nodes`` directly (what the next task reads ahead)."""
        if self.token is None:
            return
        seen = self.touched.setdefault(treepath, set())
        if nodes not in seen:
            seen.add(nodes)
            _learn((self.token, treepath), nodes)

    def __getitem__(self, key):
        def load():
            uuid, treepath, start, stop, _partition, nodes = self.mapping.interpret_key(key)
            nodes = tuple(nodes)
            ahead = (uuid, treepath, start, stop, nodes)
            if self.ahead is not None and ahead in self.ahead:
                self._touch(treepath, nodes)
                return self.ahead.pop(ahead)  # read (and timed) with the task's first
            found = device_read.column_for(nodes)
            if found is not None:
                # the device's queued work first, uncounted: it is the processor's compute
                # (a copy on the stream would wait for it inside the read's time)
                self.wait()
                t0 = time.perf_counter()
                copied = [0.0]

                def copy(host):  # the bytes' trip to the device, timed apart
                    t = time.perf_counter()
                    out = self.copy(host)
                    self.wait()
                    copied[0] += time.perf_counter() - t
                    return out
                out = self._direct(uuid, treepath, start, stop, nodes, *found, copy)
                self.wait()  # (a refused column's time so far counts as reading)
                self.timings.read += time.perf_counter() - t0 - copied[0]
                self.timings.transfer += copied[0]
                if out is not None:
                    self._touch(treepath, nodes)
                    return out
            host = self.mapping[key]  # coffea's virtual mode: a partial that reads it
            return _read_then_copy(host if callable(host) else (lambda: host), self.copy,
                                   self.wait, self.timings)
        return load

    def __iter__(self):  # ak.from_buffers only looks buffers up
        return iter(())

    def __len__(self):
        return 0


class _StagedFactory:
    """The ``"@events_factory"`` of staged events. coffea's behaviors find the events
    of a collection through it (``NanoCollection._events``: cross-references such as
    ``Muon.matched_jet`` index the events' other collections); with coffea's factory
    there, a staged collection found the host events coffea built, not the staged ones
    (on a GPU, device indices into host arrays). ``events()`` gives the staged events,
    built again by ``build`` should they be gone while a collection of them lives; any
    other attribute is the original factory's."""

    def __init__(self, factory, build):
        self._original, self._build = factory, build
        self._staged = None  # weak: the events hold this object in their attrs

    def events(self):
        staged = self._staged() if self._staged is not None else None
        if staged is None:
            staged = self._build(self)
            self._staged = weakref.ref(staged)
        return staged

    def __getattr__(self, name):
        original = self.__dict__.get("_original")  # (absent in a copy made without __init__)
        if original is None:
            raise AttributeError(name)
        return getattr(original, name)


def _staged(attrs: dict, build):
    """The staged events ``build(attrs)`` makes, with ``attrs`` (the events' own; coffea's
    factory replaced by a ``_StagedFactory`` when there is one)."""
    attrs = dict(attrs or {})
    factory = attrs.get("@events_factory")
    if factory is None:
        return build(attrs)
    staged_factory = _StagedFactory(factory, lambda f: build({**attrs, "@events_factory": f}))
    return staged_factory.events()


def _read_directly(attrs: dict, length: int, behavior, ak_backend: str, timings: Timings,
                   read_ahead: str | None):
    """Events of the NanoEvents form and factory in ``attrs`` (as coffea's ``events()``
    sets them) over ``_DeviceBuffers``; None where the factory did not read uproot (then
    ``stage_events`` stages the events' own buffers)."""
    import awkward as ak

    form, buffer_key = attrs.get("@form"), attrs.get("@buffer_key")
    mapping = getattr(attrs.get("@events_factory"), "_mapping", None)
    if (form is None or buffer_key is None or mapping is None
            or not hasattr(mapping, "interpret_key") or not hasattr(mapping, "_column_source")
            or len(mapping) != length):
        return None
    buffers = _DeviceBuffers(mapping, ak_backend, timings, read_ahead)
    return _staged(attrs, lambda staged_attrs: ak.from_buffers(
        form, length, buffers, buffer_key=buffer_key, backend=ak_backend, highlevel=True,
        behavior=behavior, attrs=staged_attrs))


def stage_factory(factory, ak_backend: str, timings: Timings | None = None,
                  read_ahead: str | None = None):
    """The events of coffea's virtual-mode NanoEventsFactory ``factory`` read directly, as
    ``stage_events(factory.events(), ..., read_on_device=True)`` gives them, without
    building coffea's host events first: that is one ``ak.from_buffers`` over every
    branch of the tree (250 ms a chunk of the 2656-branch NanoAOD sample on a 2-core x86
    machine), of
    which only the form and the factory were used. None where they cannot be read so."""
    from coffea.nanoevents.factory import _key_formatter

    schema, key = getattr(factory, "_schema", None), getattr(factory, "_partition_key", None)
    if schema is None or key is None or getattr(factory, "_mode", None) != "virtual":
        return None
    form = schema.form
    attrs = {"@events_factory": factory, "@form": form,
             "@buffer_key": functools.partial(_key_formatter, key)}
    return _read_directly(attrs, len(factory), schema.behavior(), ak_backend,
                          timings if timings is not None else Timings(), read_ahead)


def stage_events(events, ak_backend: str, timings: Timings | None = None,
                 read_on_device: bool = False, read_ahead: str | None = None):
    """``events`` (coffea NanoEvents, virtual or not) on awkward backend ``ak_backend``,
    still lazy: a column is read (and, for "cuda", copied to the device) once, when the
    processor first touches it; ``timings`` collects the seconds of both. ``ak.to_backend``
    cannot do this: it refuses buffers not yet read. ``read_on_device``: plain NanoAOD
    branches are read by ``gpuexec.io.device_read`` (the host only inflates; on "cuda"
    the values are made on the device) instead of by uproot; ``read_ahead`` (a
    ``processor_token``): their first read takes every column this processor's tasks in
    this process have read, in one batch."""
    import awkward as ak
    from awkward._nplikes.virtual import VirtualNDArray

    timings = timings if timings is not None else Timings()
    if read_on_device:
        staged = _read_directly(getattr(events, "attrs", None) or {}, len(events),
                                events.behavior, ak_backend, timings, read_ahead)
        if staged is not None:
            return staged
    copy, wait = _device_copier(ak_backend)
    form, length, container = ak.to_buffers(events)

    def lazy(buffer):
        read = buffer.materialize if isinstance(buffer, VirtualNDArray) else (lambda: buffer)
        return lambda: _read_then_copy(read, copy, wait, timings)

    container = {k: lazy(v) for k, v in container.items()}
    return _staged(events.attrs, lambda attrs: ak.from_buffers(
        form, length, container, backend=ak_backend, behavior=events.behavior, attrs=attrs))


def to_host(value):
    """``value`` with device arrays (awkward on a GPU backend, CuPy) replaced by host
    copies, through dicts (in place, keeping accumulator types), lists and tuples."""
    import awkward as ak

    from gpuexec.kernels.dispatch import awkward_backend_of

    if isinstance(value, ak.Array):
        if awkward_backend_of(value) == "cpu":
            return value
        # a virtual column the processor passed through unread cannot change backend
        return ak.to_backend(ak.materialize(value), "cpu")
    if hasattr(value, "__cuda_array_interface__") and hasattr(value, "get"):
        return value.get()
    if isinstance(value, dict):
        for key in list(value):
            value[key] = to_host(value[key])
        return value
    if isinstance(value, list):
        value[:] = [to_host(v) for v in value]
        return value
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(to_host(v) for v in value)
    return value


@contextlib.contextmanager
def awkward_messages_on_error(ak_backend: str):
    """Awkward builds the message of every operation on device arrays before running it
    (a CuPy error may surface later): a repr of each argument, read back from the
    device. Measured on the H200: 0.20 s of the
    0.54 s of compute of an ADL Q8 chunk of 200k events. Inside one outer awkward error
    context, nested operations build theirs only when an error is raised, and the error
    names this context (the processor on a GPU worker) instead of the innermost call."""
    if ak_backend == "cpu":  # numpy is eager: awkward already builds messages lazily
        yield
        return
    try:
        from awkward._errors import OperationErrorContext
    except ImportError:  # another awkward layout: keep its behaviour
        yield
        return
    with OperationErrorContext(f"the processor on a GPU worker ({ak_backend})", (), {}):
        yield


class StagedProcessor(ProcessorABC):
    """The user's processor as a GPU-pool task runs it: its events staged on the
    device (``stage_events``), its output brought back to the host."""

    def __init__(self, processor, ak_backend: str, timings: Timings,
                 read_on_device: bool = False, read_ahead: str | None = None):
        self.processor, self.ak_backend, self.timings = processor, ak_backend, timings
        self.read_on_device, self.read_ahead = read_on_device, read_ahead

    def process(self, events):
        return self._run(stage_events(events, self.ak_backend, self.timings,
                                      self.read_on_device, self.read_ahead))

    def process_nanoevents_factory(self, factory):
        """``process`` of ``factory.events()``, which is not built where the events are
        read directly (``stage_factory``; ``open_files.work_function`` calls this)."""
        staged = None
        if self.read_on_device:
            staged = stage_factory(factory, self.ak_backend, self.timings, self.read_ahead)
        if staged is None:
            return self.process(factory.events())
        return self._run(staged)

    def _run(self, staged):
        run = self.processor.process if hasattr(self.processor, "process") else self.processor
        with awkward_messages_on_error(self.ak_backend):
            return to_host(run(staged))

    def postprocess(self, accumulator):
        return self.processor.postprocess(accumulator)
