"""Which library inflates the zlib-compressed ROOT baskets a process reads.

uproot inflates zlib baskets with Python's ``zlib`` unless told to use Intel's ISA-L
(python-isal), an option it documents on ``uproot.ZLIB.library``. The output is the same
bytes; only the time differs. On a GPU worker, reading is most of a task (ADL Q6 on the
H200 host: 73 % of the GPU pool's task time, most of it in ``zlib.decompress``), so the
inflater bounds how far the GPU can pull ahead of the cores.

uproot's reader does not read ``ZLIB.library`` itself: it inflates through one instance
of ``ZLIB``'s base class (``decompressor()``), and only that instance's ``library`` is set
here. The class attribute is also what ``ZLIB`` *compresses* with, so setting it would
change the files a process writes (ISA-L's level 1 stored generated Jet baskets
uncompressed); it is set only should a later uproot have no such instance.
"""

from __future__ import annotations

import importlib.util

CHOICES = ("auto", "isal", "zlib")


def check(choice: str) -> str:
    """``choice`` if it is one of ``CHOICES``, else ValueError."""
    if choice not in CHOICES:
        raise ValueError(f"inflate is one of {CHOICES}, got {choice!r}")
    return choice


def resolve(choice: str) -> str:
    """The library ``choice`` means in this process: "auto" is "isal" where python-isal
    is installed, else "zlib"; "isal" without python-isal raises ImportError."""
    check(choice)
    has_isal = importlib.util.find_spec("isal") is not None
    if choice == "auto":
        return "isal" if has_isal else "zlib"
    if choice == "isal" and not has_isal:
        raise ImportError("inflate='isal' needs python-isal (pip install isal) in every "
                          "worker's environment")
    return choice


def use(choice: str) -> str:
    """Make uproot inflate zlib baskets in this process with ``choice`` (see
    ``resolve``); returns the library now in use."""
    library = resolve(choice)
    decompressor().library = library
    return library


def in_use() -> str:
    """The library uproot's reader inflates zlib baskets with in this process."""
    return decompressor().library


def decompressor():
    """The object uproot's reader inflates zlib blocks through (its ``decompress(data,
    inflated size)``): the instance ``uproot.compression`` keeps in uproot 5.3-5.7, else
    ``ZLIB`` itself, should a later uproot read the documented class switch."""
    import uproot.compression

    reader = getattr(uproot.compression, "_decompress_ZLIB", None)
    return reader if reader is not None and hasattr(reader, "library") else \
        uproot.compression.ZLIB
