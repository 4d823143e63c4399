"""What every maintained benchmark records beside its figures: the command that ran it,
the commit of the tree it ran on and the machine (CPU model and cores, GPUs), and where
its JSON goes by default (benchmarks/results/<name>_<machine>_<date>.json)."""

from __future__ import annotations

import datetime
import functools
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def command() -> str:
    """This process's command line, the script named relative to the repository."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)
    return "python " + shlex.join([script, *sys.argv[1:]])


@functools.lru_cache(maxsize=1)
def commit() -> str:
    """``git rev-parse --short HEAD`` of the repository, "+dirty" with local changes;
    ``GPUEXEC_COMMIT`` where the tree is a copy without git."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("GPUEXEC_COMMIT", "unknown")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


@functools.lru_cache(maxsize=1)
def gpu_names() -> list[str]:
    """The GPUs' names from nvidia-smi or rocm-smi, without importing a GPU library."""
    for cmd in (["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                ["rocm-smi", "--showproductname", "--csv"]):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0:
            lines = [line.strip() for line in out.stdout.splitlines() if line.strip()]
            if cmd[0] == "rocm-smi":  # csv: device,Card series,...
                lines = [line.split(",")[1] for line in lines[1:] if "," in line]
            return lines
    return []


@functools.lru_cache(maxsize=1)
def machine() -> dict:
    """CPU model, usable cores, GPUs and a one-line description
    ("NVIDIA H200, 16 host cores"; "AMD EPYC 7B13, 2 cores")."""
    cores = len(os.sched_getaffinity(0))
    gpus = gpu_names()
    cpu = cpu_model()
    description = (f"{gpus[0]}{f' x{len(gpus)}' if len(gpus) > 1 else ''}, {cores} host cores"
                   if gpus else f"{cpu}, {cores} cores")
    return {"description": description, "cpu": cpu, "cores": cores,
            "logical_cpus": os.cpu_count(), "gpus": gpus,
            "python": platform.python_version()}


def stamp(result: dict) -> dict:
    """``result`` led by ``command``, ``commit`` and ``machine`` (the script's own
    machine details, if any, kept inside ``machine``)."""
    own = result.pop("machine", None) or {}
    return {"command": command(), "commit": commit(), "machine": {**machine(), **own},
            **result}


def machine_tag() -> str:
    """Short name of this machine in result file names: the first GPU's model ("h200"),
    else the CPU's family and core count ("epyc-2core")."""
    gpus = gpu_names()
    if gpus:  # its model: "NVIDIA H100 80GB HBM3" -> h100, "AMD Instinct MI250X" -> mi250x
        words = re.split(r"[\s/-]+", gpus[0])
        model = [w for w in words if re.fullmatch(r"[A-Za-z]{1,3}\d{2,4}[A-Za-z]?", w)]
        return (model or words[-1:])[0].lower()
    words = cpu_model().lower().replace("(r)", "").split()
    family = next((w for w in ("epyc", "xeon", "ryzen", "core") if w in words),
                  words[0] if words else "cpu")
    return f"{family}-{len(os.sched_getaffinity(0))}core"


def default_out(name: str, smoke: bool = False, suffix: str = ".json") -> str:
    """benchmarks/results/<name>_<machine>_<date><suffix>; a smoke run's goes to the
    temporary directory, never among the results."""
    if smoke:
        return os.path.join(tempfile.gettempdir(), f"{name}_smoke{suffix}")
    date = datetime.date.today().isoformat()
    return str(RESULTS / f"{name}_{machine_tag()}_{date}{suffix}")


def no_gpu() -> str | None:
    """Why no CUDA or HIP device can run a GPU benchmark here, or None when one can."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return None
        return "no GPU visible"
    except Exception as err:  # noqa: BLE001 - CuPy missing, no driver, no device
        return f"no GPU ({type(err).__name__}: {str(err)[:120]})"
