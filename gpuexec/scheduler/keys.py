"""Dask task keys of a gpuexec run, readable on the dashboard and in logs.

    chunk-<pool>-<run>-<index>-<label>     one work item (label: dataset:file[start:stop])
    merge-<run>-<level>-<index>            one node of the reduction tree

``dask.utils.key_split`` turns a chunk key into ``chunk-<pool>`` (pool names are
alphabetic, run tokens are hex and stop the split), so progress bars group chunks by
pool with Dask's own grouping.

``POOL_ENV`` is the environment variable that names a worker's pool on the worker.
"""

from __future__ import annotations

import os
import uuid

CHUNK = "chunk"
MERGE = "merge"
POOL_ENV = "GPUEXEC_POOL"  # every worker's environment names its pool


def new_run_token() -> str:
    # 8 hex digits with at least one digit 0-9, so key_split never keeps it as a word
    while True:
        token = uuid.uuid4().hex[:8]
        if not token.isalpha():
            return token


def item_label(item) -> str:
    """``dataset:file[start:stop]`` for a coffea WorkItem, ``dataset:file`` for a file's
    metadata request (FileMeta), ``repr`` otherwise."""
    filename = getattr(item, "filename", None)
    if filename is None:
        return repr(item)[:120]
    label = f"{getattr(item, 'dataset', '')}:{os.path.basename(str(filename))}"
    if hasattr(item, "entrystart") and hasattr(item, "entrystop"):
        label += f"[{item.entrystart}:{item.entrystop}]"
    return label


def chunk_key(pool: str, run: str, index: int, label: str) -> str:
    return f"{CHUNK}-{pool}-{run}-{index}-{label}"


def merge_key(run: str, level: int, index: int) -> str:
    return f"{MERGE}-{run}-{level}-{index}"


def parse(key) -> dict | None:
    """``{"kind", "run", "pool", "index", "label"}`` of a gpuexec key, None for others."""
    if not isinstance(key, str):
        return None
    kind = key.split("-", 1)[0]
    if kind == CHUNK:
        parts = key.split("-", 4)
        if len(parts) == 5 and parts[3].isdigit():
            return {"kind": kind, "pool": parts[1], "run": parts[2], "index": int(parts[3]),
                    "label": parts[4]}
    elif kind == MERGE:
        parts = key.split("-")
        if len(parts) == 4 and parts[3].isdigit():
            return {"kind": kind, "pool": None, "run": parts[1], "index": int(parts[3]),
                    "label": f"merge level {parts[2]} #{parts[3]}"}
    return None
