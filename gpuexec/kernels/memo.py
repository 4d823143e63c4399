"""Results remembered per buffer object.

Layouts are immutable (awkward's contract), so what was worked out for these very
buffers (an offsets check's summary, the rows a mask keeps, the lists an event selection
keeps) stays true while they live. Entries are held through weak references and
forgotten with any of their buffers; a buffer type without weak references is never
remembered. Lookups sit on every public call: one buffer is keyed by its ``id`` alone.
"""

from __future__ import annotations

import weakref


def _key(buffers: tuple):
    return id(buffers[0]) if len(buffers) == 1 else tuple(map(id, buffers))


class WeakMemo:
    """``put(value, *buffers)`` / ``get(*buffers)``: ``value`` while these very objects
    live (an id reused by a later object does not match)."""

    __slots__ = ("_entries",)

    def __init__(self):
        self._entries: dict = {}

    def get(self, *buffers):
        entry = self._entries.get(_key(buffers))
        if entry is None:
            return None
        refs, value = entry
        for ref, buffer in zip(refs, buffers):
            if ref() is not buffer:
                return None
        return value

    def put(self, value, *buffers) -> None:
        key, entries = _key(buffers), self._entries
        try:
            refs = tuple(weakref.ref(b, lambda _, key=key: entries.pop(key, None))
                         for b in buffers)
        except TypeError:  # a buffer type without weak references: never remembered
            return
        entries[key] = (refs, value)

    def forget(self, *buffers) -> None:
        self._entries.pop(_key(buffers), None)
