"""Content-addressed cache of successful compiles, so a second run of the gates (the
pytest run right after .ci/run's, or a developer's rerun) re-checks without recompiling.

The key covers the compiler's identity, the full command line (less output paths) and
the bytes of every file in the unit's source directory, so any change recompiles. The
source directory's own path is left out of the key (its files' bytes are in it): a
cache filled in one checkout serves another clone of the same sources.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil

from .units import REPO, Unit

CACHE_DIR = os.environ.get("GK_GATES_CACHE", os.path.join(REPO, ".cache", "compile-gates"))


def key(compiler: str, args: list[str], unit: Unit) -> str:
    # where the checkout lives is not part of what is compiled
    args = [a.replace(unit.src_dir, "<src>") for a in args]
    h = hashlib.sha256(json.dumps([compiler, args]).encode())
    for name in sorted(os.listdir(unit.src_dir)):
        path = os.path.join(unit.src_dir, name)
        if os.path.isfile(path):
            h.update(name.encode())
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def get(k: str, files: dict[str, str]) -> str | None:
    """Copy the cached artifacts to files' paths and return the compile log, or None."""
    d = os.path.join(CACHE_DIR, k)
    if not all(os.path.exists(os.path.join(d, n)) for n in [*files, "log"]):
        return None
    for name, dest in files.items():
        shutil.copyfile(os.path.join(d, name), dest)
    with open(os.path.join(d, "log")) as f:
        return f.read()


def put(k: str, files: dict[str, str], log: str):
    d = os.path.join(CACHE_DIR, k)
    tmp = f"{d}.tmp{os.getpid()}"
    os.makedirs(tmp, exist_ok=True)
    for name, src in files.items():
        shutil.copyfile(src, os.path.join(tmp, name))
    with open(os.path.join(tmp, "log"), "w") as f:
        f.write(log)
    try:
        os.replace(tmp, d)
    except OSError:                 # another run stored it first
        shutil.rmtree(tmp, ignore_errors=True)
