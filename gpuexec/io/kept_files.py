"""coffea Runner's work function, with the files of a worker thread's last chunks kept open.

``Runner._work_function`` opens a chunk's file with ``uproot.open`` and closes it when
the chunk is done, so every chunk deserializes the tree's metadata (its TTree and TBranch
objects) again before reading a byte of data, and coffea derives the NanoEvents base form
from every branch again. ``work_function`` does what Runner's does for ROOT files read into
NanoEvents, on a file that stays open in the worker thread: uproot keeps the tree in that
file's object cache, so the next chunk of the file starts from it, and the base form is
built once per kept file and tree (``_factory``). What a chunk costs before its processor
reads, with Runner's function and with this one, is in docs/reading.md#kept-files
(1.85 s against 0.39 s for the 2656-branch NanoAOD sample on a 2-core x86 machine). A
processor that builds its own events from the factory (``process_nanoevents_factory``:
a GPU worker's, reading columns directly) is given the factory instead of coffea's events.

A kept file is opened without uproot's array cache (``array_cache=None`` unless the
Runner's ``uproot_options`` name one): arrays of a file open for many chunks would
otherwise stay in memory (up to 100 MB per file) and a chunk read twice, as a retry, would
not be read again. A file whose UUID is no longer the chunk's (rewritten since the
Runner's preprocessing) is opened again, and so is one whose chunk failed. A kept file
costs memory: about 25 MB for the 2656-branch sample (its tree's objects), and 0.66 MB
for its pickled base form and type names.
Everything else (parquet, checkpoints, saved metrics, dataframes, a processor sent as Dask
heavy input) runs Runner's own function.
"""

from __future__ import annotations

import pickle
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

import uproot
from coffea.nanoevents import NanoEventsFactory, schemas
from coffea.nanoevents.mapping.uproot import TrivialUprootOpener, UprootSourceMapping
from coffea.processor import ProcessorABC
from coffea.processor.executor import Runner

KEPT = 4  # files kept open per worker thread (GPUExecutor's ``open_files``)


@dataclass
class Kept:
    """A file kept open, and the base forms of its trees (see ``_factory``)."""

    directory: object  # uproot ReadOnlyDirectory
    # (tree path, iteritems options) -> the pickled base form, with the tree's typenames
    forms: dict = field(default_factory=dict)
    reading: bool = False  # a chunk of its thread reads it now
    closing: bool = False  # close_all ran meanwhile: the chunk's end closes it


# thread ident -> OrderedDict key -> Kept (least recently used first); each thread uses
# only its own (uproot's TTree objects are not shared between threads)
_by_thread: dict[int, OrderedDict] = {}
_registry_lock = threading.Lock()


def _kept_files() -> OrderedDict:
    """This thread's kept files (call it holding ``_registry_lock``)."""
    return _by_thread.setdefault(threading.get_ident(), OrderedDict())


def close_all() -> int:
    """Close every file kept open in this process (every thread's, e.g. between runs:
    ``client.run(close_all)``); returns how many. A file a chunk reads now is closed when
    that chunk ends: closed under it, the chunk failed (a cancelled copy of an earlier
    run, still running on its worker, was retried with "file ... is closed" on the
    H200 host)."""
    with _registry_lock:
        kept = [k for files in _by_thread.values() for k in files.values()]
        _by_thread.clear()
        idle = []
        for entry in kept:
            if entry.reading:
                entry.closing = True
            else:
                idle.append(entry)
    for entry in idle:
        _close(entry.directory)
    return len(kept)


def _done(entry: Kept) -> None:
    """A chunk's end on ``entry``: closed now if ``close_all`` asked meanwhile."""
    with _registry_lock:
        entry.reading = False
        close = entry.closing
    if close:
        _close(entry.directory)


def _close(directory) -> None:
    try:
        directory.close()
    except Exception:  # a file that cannot close cleanly is dropped all the same
        pass


def _open(item, timeout, uproot_options: dict, kept: int) -> Kept:
    """``item``'s file, open, reused while this thread keeps it."""
    options = dict(uproot_options)
    options.setdefault("array_cache", None)
    key = (item.filename, timeout, repr(sorted(options.items(), key=lambda kv: kv[0])))
    with _registry_lock:
        entry = _kept_files().get(key)
        if entry is not None:
            entry.reading = True  # (from here close_all leaves it to the chunk's end)
    if entry is not None and (entry.directory.closed or (
            item.fileuuid and entry.directory.file.uuid.bytes != bytes(item.fileuuid))):
        _forget(entry)  # closed elsewhere, or rewritten since preprocessing
        entry = None
    if entry is None:
        entry = Kept(uproot.open({item.filename: None}, timeout=timeout, **options))
    with _registry_lock:  # (close_all may have emptied the registry meanwhile)
        files = _kept_files()
        entry.reading = True
        if not entry.closing:  # most recently used last
            files[key] = entry
            files.move_to_end(key)
        evicted = [files.popitem(last=False)[1] for _ in range(len(files) - kept)]
    for old in evicted:
        _close(old.directory)
    return entry


def _forget(entry: Kept) -> None:
    """Close and drop ``entry`` (a chunk failed on it: the next one opens it anew)."""
    with _registry_lock:
        files = _kept_files()
        for key, value in list(files.items()):
            if value is entry:
                del files[key]
    _close(entry.directory)


def _factory(entry: Kept, item, schema, metadata: dict, iteritems_options: dict, preload,
             buffer_cache):
    """``NanoEventsFactory.from_root(...)`` for ``item`` on a kept file, as Runner calls it, but
    for the base form: coffea builds it from every branch of the tree for every chunk (its
    ``_extract_base_form`` and ``typenames``: 115 and 24 ms of a 2656-branch NanoAOD tree
    on a 2-core x86 machine); here it is built once per file and tree, and each chunk
    unpickles a copy (3 ms; the schema changes the dict it is given). The steps are
    ``from_root``'s, through coffea's private ``_extract_base_form`` and ``_from_mapping``
    (coffea is pinned below 2027; tests/test_open_files.py compares the events with
    ``from_root``'s). Preloaded branches and podio (EDM4HEP) schemas, which read more per
    chunk, go to ``from_root``."""
    if preload is not None or issubclass(schema, schemas.EDM4HEPSchema):
        return NanoEventsFactory.from_root(
            file=entry.directory, treepath=item.treename, schemaclass=schema,
            metadata=metadata, access_log=[], mode="virtual", entry_start=item.entrystart,
            entry_stop=item.entrystop, iteritems_options=iteritems_options,
            preload=preload, buffer_cache=buffer_cache)
    tree = entry.directory[item.treename]
    form_key = (item.treename, repr(sorted(iteritems_options.items(), key=lambda kv: kv[0])))
    pickled = entry.forms.get(form_key)
    if pickled is None:
        form = UprootSourceMapping._extract_base_form(tree, iteritems_options=iteritems_options)
        form["typenames"] = tree.typenames()
        pickled = entry.forms[form_key] = pickle.dumps(form, protocol=pickle.HIGHEST_PROTOCOL)
    start = item.entrystart if item.entrystart is not None and item.entrystart >= 0 else 0
    stop = (tree.num_entries if item.entrystop is None or item.entrystop > tree.num_entries
            else item.entrystop)
    partition_key = (str(tree.file.uuid), tree.object_path, f"{start}-{stop}")
    mapping = UprootSourceMapping(
        TrivialUprootOpener({partition_key[0]: tree.file.file_path}, {}), start, stop,
        cache={}, access_log=[], file_handle=entry.directory, use_ak_forth=True,
        virtual=True, buffer_cache=buffer_cache)
    mapping.preload_column_source(partition_key[0], partition_key[1], tree)
    return NanoEventsFactory._from_mapping(mapping, partition_key, pickle.loads(pickled),
                                           schema, metadata, mode="virtual")


def unpacked(processor_instance):
    """The processor Runner sends its work function: itself, or unpickled where
    ``Runner(processor_compression=...)`` sent it compressed."""
    if isinstance(processor_instance, (bytes, bytearray)):
        import cloudpickle
        import lz4.frame

        return cloudpickle.loads(lz4.frame.decompress(processor_instance))
    return processor_instance


def _handled(format, schema, use_dataframes, savemetrics, processor_instance,
             checkpointer) -> bool:
    return (format == "root" and isinstance(schema, type)
            and issubclass(schema, schemas.BaseSchema) and not use_dataframes
            and not savemetrics and checkpointer is None
            and not isinstance(processor_instance, str))  # "heavy": Dask's heavy input


def work_function(format, xrootdtimeout, schema, use_dataframes, savemetrics, item,
                  processor_instance, uproot_options, iteritems_options, checkpointer,
                  cache_function, *, kept: int = KEPT):
    """``Runner._work_function``'s result for ``item``, its file kept open (see the module
    docstring); its messages on failure are Runner's."""
    if kept < 1 or not _handled(format, schema, use_dataframes, savemetrics,
                                processor_instance, checkpointer):
        return Runner._work_function(format, xrootdtimeout, schema, use_dataframes,
                                     savemetrics, item, processor_instance, uproot_options,
                                     iteritems_options, checkpointer, cache_function)
    uproot_options = dict(uproot_options)
    timeout = uproot_options.pop("timeout", xrootdtimeout)
    processor_instance = unpacked(processor_instance)
    metadata = {"dataset": item.dataset, "filename": item.filename,
                "treename": item.treename, "entrystart": item.entrystart,
                "entrystop": item.entrystop,
                "fileuuid": str(uuid.UUID(bytes=item.fileuuid)) if len(item.fileuuid) else ""}
    if item.usermeta is not None:
        metadata.update(item.usermeta)
    try:
        entry = _open(item, timeout, uproot_options, kept)
    except Exception as e:
        raise Exception(f"Failed to open file: {item!r}. The error was: {e!r}.") from e
    try:
        return _work_on(entry, item, schema, metadata, processor_instance, iteritems_options,
                        cache_function())
    finally:
        _done(entry)


def _work_on(entry: Kept, item, schema, metadata, processor_instance, iteritems_options,
             buffer_cache):
    """``work_function``'s part on the open file ``entry``."""
    # a GPU worker's processor (gpuexec.io.staging.StagedProcessor) builds the events from
    # the factory itself: coffea's host events would be built for nothing
    takes_factory = getattr(processor_instance, "process_nanoevents_factory", None)
    try:
        factory = _factory(entry, item, schema, metadata, iteritems_options, item.preload,
                           buffer_cache)
        events = None if takes_factory is not None else factory.events()
    except Exception as e:
        _forget(entry)
        raise Exception(f"Failed creating nanoevents: {item!r}. The error was: {e!r}.") from e
    try:
        if events is None:
            out = takes_factory(factory)
        elif isinstance(processor_instance, ProcessorABC):
            out = processor_instance.process(events)
        else:
            out = processor_instance(events)
    except Exception as e:
        _forget(entry)  # (a read that failed may have left its file in a bad state)
        raise Exception(f"Failed processing file: {item!r}. The error was: {e!r}.") from e
    if out is None:
        raise ValueError("Output of process() should not be None. Make sure your processor's "
                         "process() function returns an accumulator.")
    return {"out": out, "processed": {item}}
