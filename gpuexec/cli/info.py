"""``gpuexec info``: what this process sees: GPUs (vendor, arch, wave width), the GPU
runtimes and compilers found, and the pinning variables set."""

from __future__ import annotations

import importlib.util
import os
import shutil

WAVE = {"nvidia": 32}  # AMD: 64 on CDNA (gfx9), 32 on RDNA (gfx10+)
PINNING = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
           "GPU_DEVICE_ORDINAL", "SLURM_LOCALID", "SLURM_JOB_ID", "SLURM_STEP_GPUS",
           "OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "GPUEXEC_FAKE_GPU")
PYTHON_RUNTIMES = ("cupy", "cuda", "hip", "numba", "nvidia.nvcomp")
COMPILERS = ("nvcc", "hipcc", "nvidia-smi", "rocm-smi", "nvidia-cuda-mps-control")


def wave_width(vendor: str, arch: str | None) -> int | None:
    if vendor in WAVE:
        return WAVE[vendor]
    if arch and arch.startswith("gfx"):
        return 64 if arch.startswith("gfx9") else 32
    return None


def _found(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def lines(env=None) -> list[str]:
    from gpuexec.scheduler import devices

    env = os.environ if env is None else env
    found = devices.discover(env)
    out = [f"devices: {len(found)}" if found else "devices: none (CPU workers only)"]
    for d in found:
        width = wave_width(d.vendor, d.arch)
        out.append(f"  {d.describe()}; wave width {width if width else 'unknown'}")
    out.append("python packages: " + ", ".join(
        f"{m} {'yes' if _found(m) else 'no'}" for m in PYTHON_RUNTIMES))
    out.append("tools: " + ", ".join(f"{c} {shutil.which(c) or 'no'}" for c in COMPILERS))
    pins = [f"{k}={env[k]}" for k in PINNING if k in env]
    out.append("pinning: " + (" ".join(pins) if pins else "none set"))
    try:
        cores = sorted(os.sched_getaffinity(0))
        out.append(f"cores: {len(cores)} ({cores[0]}-{cores[-1]})")
    except AttributeError:  # pragma: no cover - not Linux
        pass
    return out


def main(args) -> int:
    print("\n".join(lines()))
    return 0


def add(subs) -> None:
    p = subs.add_parser("info", help="GPUs, runtimes, compilers and pinning this process sees")
    p.set_defaults(func=main)
