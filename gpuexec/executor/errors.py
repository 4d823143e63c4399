"""Errors of a call: a chunk's failure naming its file and entry range, with the chain of
exceptions that caused it kept across the trip from the worker (docs/executor.md#faults)."""

from __future__ import annotations

import os
import pickle

from coffea.processor.executor import FileMeta, WorkItem

from gpuexec.scheduler import keys

# frames under here are gpuexec's own: ``origin`` names the user's last frame instead
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def root_cause(err: BaseException) -> BaseException:
    """The innermost exception of a chain (what actually went wrong on the worker)."""
    seen = set()
    while id(err) not in seen:
        seen.add(id(err))
        nxt = err.__cause__ or err.__context__
        if nxt is None:
            break
        err = nxt
    return err


def reason(err: BaseException) -> str:
    """One line for a fallback: the root cause, then the wrapper that names file and
    entry range."""
    root = root_cause(err)
    text = f"{type(root).__name__}: {root}".splitlines()[0][:200]
    if root is not err:
        text += f" ({type(err).__name__}: {err})".splitlines()[0][:200]
    return text


class ChunkError(RuntimeError):
    """A chunk failed; the message names its file and entry range. The exception chain
    that caused it (``__cause__`` and further) survives the trip from the worker."""

    __module__ = "gpuexec.executor"  # its import path

    def __init__(self, message: str, causes: tuple = (), retry: str | None = None):
        super().__init__(message)
        self.causes = tuple(causes)
        # ``retryable`` of the chain, decided where it was raised (a cause that cannot be
        # pickled travels as a RuntimeError, its type lost)
        self.retry = retry
        link = self
        for cause in self.causes:
            link.__cause__ = cause
            link = cause

    def __reduce__(self):
        return (type(self), (self.args[0], _picklable_chain(self.causes), self.retry))


class MergeError(RuntimeError):
    """Merging chunk outputs failed on a worker (e.g. outputs that cannot be added);
    ``indices``: the chunks whose outputs were being merged (the executor names them)."""

    __module__ = "gpuexec.executor"

    def __init__(self, message: str, indices=()):
        super().__init__(message)
        self.indices = tuple(indices)

    def __reduce__(self):
        return (type(self), (self.args[0], self.indices))


def chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes (``__cause__``), outermost first."""
    out = []
    while isinstance(exc, BaseException) and exc not in out:
        out.append(exc)
        exc = exc.__cause__
    return out


def _frames(tb) -> list[tuple[str, int, str]]:
    """(file, line, function) of each frame of ``tb``. Code that cloudpickle sent by value
    (a processor defined in a script or notebook) is named ``<dynamic-code>``; its
    module's ``__file__`` names it instead."""
    import traceback

    out = []
    for frame, lineno in traceback.walk_tb(tb):
        filename = frame.f_code.co_filename
        if filename.startswith("<"):
            filename = frame.f_globals.get("__file__") or filename
        out.append((filename, lineno, frame.f_code.co_name))
    return out


def origin(err: BaseException) -> str:
    """Where the innermost cause was raised, and the last frame of the user's code on
    the way (tracebacks do not survive pickling; the message does)."""
    frames = _frames(root_cause(err).__traceback__)
    if not frames:
        return ""

    def here(frame):
        return f"{os.path.basename(frame[0])}:{frame[1]} in {frame[2]}"

    text = f" [raised at {here(frames[-1])}"
    own = [f for f in frames if "site-packages" not in f[0]
           and not os.path.abspath(f[0]).startswith(_PACKAGE)]
    if own and own[-1] is not frames[-1]:
        text += f", from {here(own[-1])}"
    return text + "]"


def _picklable_chain(causes) -> tuple:
    kept = []
    for cause in causes:
        try:  # some exceptions pickle but cannot be rebuilt from their args
            pickle.loads(pickle.dumps(cause))
        except Exception:
            cause = RuntimeError(f"{type(cause).__name__}: {cause}")
        kept.append(cause)
    return tuple(kept)


# OSErrors that may pass on a second try (a network or storage hiccup); a missing or
# unreadable file, or a file that is not ROOT, fails the same way every time
PASSING_OS_ERRORS = (TimeoutError, ConnectionError, InterruptedError, BlockingIOError)
DEVICE_ERROR_MODULES = ("cupy", "cupy_backends", "cuda", "hip", "numba.cuda",
                        "gpuexec.kernels.gpu", "gpuexec.awkward")


def retryable(err: BaseException) -> str | None:
    """Why another attempt of a chunk that raised ``err`` may succeed: a device fault
    (CuPy/CUDA/HIP error, out of memory) or an I/O error that may pass; None for any
    other exception, such as one of the user's processor, which surfaces at once."""
    for cause in chain(err):
        if getattr(cause, "retry", None) is not None:
            return cause.retry
        if isinstance(cause, MemoryError):
            return "out of memory"
        module = type(cause).__module__
        if module.split(".")[0] in DEVICE_ERROR_MODULES or module.startswith(DEVICE_ERROR_MODULES):
            return "device fault"
        if isinstance(cause, PASSING_OS_ERRORS):
            return "I/O error that may pass"
    return None


def falls_back(err: BaseException) -> str | None:
    """Why a GPU task's failure ``err`` moves its chunks to the CPU pool: a device fault,
    out of memory, an I/O error that may pass (``retryable``), or a failure outside the
    chunk's code (a lost worker, a Dask error); None for an exception of the user's
    processor, which surfaces at once (docs/executor.md#faults)."""
    if not isinstance(err, ChunkError):
        return "not raised by the chunk's code"
    return retryable(err)


class _NotRootOrNoTreeMeta(type):
    def __instancecheck__(cls, err) -> bool:
        import uproot

        return (isinstance(err, uproot.KeyInFileError)
                or (isinstance(err, ValueError) and "not a ROOT file" in str(err)))


class NotRootOrNoTree(metaclass=_NotRootOrNoTreeMeta):
    """Matches (``isinstance``) uproot's errors for a file that is not ROOT or lacks the
    requested tree."""


def nothing_left(skipped: list) -> None:
    """Fail a run whose every file or chunk was skipped (beyond coffea, which returns an
    empty output: docs/executor.md#skipbadfiles)."""
    from gpuexec.scheduler.report import skipped_warning

    raise ChunkError(f"gpuexec: no file yielded events; all {len(skipped)} file(s) or "
                     "chunk(s) were skipped (skipbadfiles):\n" + skipped_warning(skipped))


def describe_item(item) -> str:
    """A work item in words: its file, dataset, tree and entry range."""
    if isinstance(item, WorkItem):
        return (f"file {item.filename} (dataset {item.dataset!r}, tree {item.treename!r}), "
                f"entries [{item.entrystart}, {item.entrystop})")
    if isinstance(item, FileMeta):
        return (f"file {item.filename} (dataset {item.dataset!r}, tree {item.treename!r}), "
                "reading its metadata")
    return repr(item)


def explain(err: BaseException, items: list) -> BaseException:
    """The error to raise for a failed call, naming the chunk where Dask knows it."""
    from distributed.scheduler import KilledWorker

    if isinstance(err, ChunkError) or not isinstance(err, Exception):
        return err
    if isinstance(err, MergeError) and err.indices:
        first, last = err.indices[0], err.indices[-1]
        span = describe_item(items[first])
        if last != first:
            span += " ... " + describe_item(items[last])
        return ChunkError(f"merging the outputs of {len(err.indices)} chunk(s) failed "
                          f"({span}): {err}", (err,))
    if isinstance(err, KilledWorker):
        parsed = keys.parse(err.task)
        what = (describe_item(items[parsed["index"]])
                if parsed and parsed["kind"] == keys.CHUNK else str(err.task))
        return ChunkError(f"{what}: killed {err.allowed_failures + 1} workers while running "
                          "(a crash or out-of-memory?)", (err,))
    return ChunkError(f"gpuexec run failed: {type(err).__name__}: {err}", (err,))
