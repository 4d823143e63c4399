"""coffea Runner's work function, with the files of a worker thread's last chunks kept open.

``Runner._work_function`` opens a chunk's file with ``uproot.open`` and closes it when
the chunk is done, so every chunk deserializes the tree's metadata (its TTree and TBranch
objects) again before reading a byte of data. ``work_function`` does what Runner's does
for ROOT files read into NanoEvents, on a file that stays open in the worker thread:
uproot keeps the tree in that file's object cache, so the next chunk of the file starts
from it. What a chunk costs before its processor reads (benchmarks/open_files.py, this
VM): 1.82 s with Runner's function against 0.53 s kept open for the 2656-branch NanoAOD
sample in data/samples, 16.7 against 7.5 ms for a 24-branch generated file; on the H200
host a GPU task of ADL Q8 spent 14 ms (under a profiler) of about 90 ms deserializing the
generated file's tree (docs/executor.md).

A kept file is opened without uproot's array cache (``array_cache=None`` unless the
Runner's ``uproot_options`` name one): arrays of a file open for many chunks would
otherwise stay in memory (up to 100 MB per file) and a chunk read twice, as a retry, would
not be read again. A file whose UUID is no longer the chunk's (rewritten since the
Runner's preprocessing) is opened again, and so is one whose chunk failed. A kept file
costs memory: about 25 MB for the 2656-branch sample (its tree's objects, this VM).
Everything else (parquet, checkpoints, saved metrics, dataframes, a processor sent as Dask
heavy input) runs Runner's own function.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict

import uproot
from coffea.nanoevents import NanoEventsFactory, schemas
from coffea.processor import ProcessorABC
from coffea.processor.executor import Runner

KEPT = 4  # files kept open per worker thread (GPUExecutor's ``open_files``)

# thread ident -> OrderedDict key -> open ReadOnlyDirectory (least recently used first);
# each thread uses only its own (uproot's TTree objects are not shared between threads)
_by_thread: dict[int, OrderedDict] = {}
_registry_lock = threading.Lock()


def _kept_files() -> OrderedDict:
    ident = threading.get_ident()
    files = _by_thread.get(ident)
    if files is None:
        with _registry_lock:
            files = _by_thread[ident] = OrderedDict()
    return files


def close_all() -> int:
    """Close every file kept open in this process (every thread's; call it when no chunk
    runs here, e.g. between runs: ``client.run(close_all)``); returns how many."""
    with _registry_lock:
        kept = [d for files in _by_thread.values() for d in files.values()]
        _by_thread.clear()
    for directory in kept:
        _close(directory)
    return len(kept)


def _close(directory) -> None:
    try:
        directory.close()
    except Exception:  # a file that cannot close cleanly is dropped all the same
        pass


def _open(item, timeout, uproot_options: dict, kept: int):
    """``item``'s file as an open ReadOnlyDirectory, reused while this thread keeps it."""
    options = dict(uproot_options)
    options.setdefault("array_cache", None)
    key = (item.filename, timeout, repr(sorted(options.items(), key=lambda kv: kv[0])))
    files = _kept_files()
    directory = files.pop(key, None)
    if directory is not None and (directory.closed or (
            item.fileuuid and directory.file.uuid.bytes != bytes(item.fileuuid))):
        _close(directory)  # closed elsewhere, or rewritten since preprocessing
        directory = None
    if directory is None:
        directory = uproot.open({item.filename: None}, timeout=timeout, **options)
    files[key] = directory
    while len(files) > kept:
        _close(files.popitem(last=False)[1])
    return directory


def _forget(directory) -> None:
    """Close and drop ``directory`` (a chunk failed on it: the next one opens it anew)."""
    files = _kept_files()
    for key, value in list(files.items()):
        if value is directory:
            del files[key]
    _close(directory)


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
        directory = _open(item, timeout, uproot_options, kept)
    except Exception as e:
        raise Exception(f"Failed to open file: {item!r}. The error was: {e!r}.") from e
    try:
        events = NanoEventsFactory.from_root(
            file=directory, treepath=item.treename, schemaclass=schema, metadata=metadata,
            access_log=[], mode="virtual", entry_start=item.entrystart,
            entry_stop=item.entrystop, iteritems_options=iteritems_options,
            preload=item.preload, buffer_cache=cache_function()).events()
    except Exception as e:
        _forget(directory)
        raise Exception(f"Failed creating nanoevents: {item!r}. The error was: {e!r}.") from e
    try:
        if isinstance(processor_instance, ProcessorABC):
            out = processor_instance.process(events)
        else:
            out = processor_instance(events)
    except Exception as e:
        _forget(directory)  # (a read that failed may have left its file in a bad state)
        raise Exception(f"Failed processing file: {item!r}. The error was: {e!r}.") from e
    if out is None:
        raise ValueError("Output of process() should not be None. Make sure your processor's "
                         "process() function returns an accumulator.")
    return {"out": out, "processed": {item}}
