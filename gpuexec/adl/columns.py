"""The column map: the logical columns the ADL queries read (``"Jet.btag"``,
``"MET.pt"``, ...) and where each is found in a given file.

The generated samples use the CMS open-data names of the ADL benchmark (``MET_pt``,
``Jet_btag``, ``MET_sumet``); real NanoAOD differs by release (``Jet_btagDeepB`` in
older files, ``Jet_btagDeepFlavB`` in newer ones; only ``PuppiMET`` in recent ones).
A logical column resolves to the first candidate (collection, field) the file has; the
MET collection is resolved as a whole so that ``pt`` and ``phi`` never come from two
different MET definitions.

The same resolution serves two readers: NanoEvents (processors, ``from_events``) and
flat branch names (the plain-Python references, ``branch_names``).
"""

from __future__ import annotations

from typing import Callable, Iterable

# Collections, in order of preference.
COLLECTIONS: dict[str, tuple[str, ...]] = {
    "MET": ("MET", "PuppiMET"),
    "Jet": ("Jet",),
    "Muon": ("Muon",),
    "Electron": ("Electron",),
}

# Fields whose name differs between files, in order of preference.
FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("Jet", "btag"): ("btag", "btagDeepB", "btagDeepFlavB"),
    ("MET", "sumet"): ("sumet", "sumEt"),
}


class MissingColumn(KeyError):
    """A logical column has none of its candidate names in the file."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0])


def _split(name: str) -> tuple[str, str]:
    collection, _, field = name.partition(".")
    if not field or collection not in COLLECTIONS:
        raise ValueError(f"unknown logical column {name!r} (expected one of the collections "
                         f"{sorted(COLLECTIONS)} as 'Collection.field')")
    return collection, field


def resolve(columns: Iterable[str], has: Callable[[str, str], bool]) -> dict[str, tuple[str, str]]:
    """``{logical name: (collection, field)}`` for ``columns``, where ``has(collection,
    field)`` says whether the file holds that column. Raises ``MissingColumn`` naming
    every candidate that was tried."""
    columns = list(columns)
    wanted: dict[str, list[str]] = {}
    for name in columns:
        collection, field = _split(name)
        wanted.setdefault(collection, []).append(field)

    chosen: dict[str, str] = {}
    for collection, fields in wanted.items():
        for candidate in COLLECTIONS[collection]:
            if all(any(has(candidate, f) for f in FIELDS.get((collection, field), (field,)))
                   for field in fields):
                chosen[collection] = candidate
                break
        else:
            raise MissingColumn(
                f"no collection among {COLLECTIONS[collection]} has all of the fields "
                f"{[FIELDS.get((collection, f), (f,)) for f in fields]}")

    out = {}
    for name in columns:
        collection, field = _split(name)
        source = chosen[collection]
        out[name] = next((source, f) for f in FIELDS.get((collection, field), (field,))
                         if has(source, f))
    return out


def from_events(events, columns: Iterable[str]) -> dict:
    """``{logical name: array}`` read from NanoEvents (any NanoAOD-like schema)."""
    top = set(events.fields)
    collections: dict = {}  # each collection looked up once (a NanoEvents lookup builds
    #                         its record array with behaviors: ~0.1 ms of Python each)

    def collection(name):
        if name not in collections:
            collections[name] = events[name]
        return collections[name]

    def has(name, field):
        return name in top and field in collection(name).fields

    return {name: collection(c)[f] for name, (c, f) in resolve(columns, has).items()}


def branch_names(columns: Iterable[str], branches: Iterable[str]) -> dict[str, str]:
    """``{logical name: flat branch name}`` (``"Jet_pt"``) among ``branches``."""
    available = set(branches)
    return {name: f"{c}_{f}" for name, (c, f)
            in resolve(columns, lambda c, f: f"{c}_{f}" in available).items()}
