"""``--preload gpuexec.deploy.pin``: a Dask worker of a job that runs several worker
processes (dask-jobqueue's ``SLURMCluster``, ``gpuexec.deploy.jobqueue``) picks its role
from its index in the job before it registers with the scheduler:

- the index is the suffix ``-<i>`` that ``dask worker --nworkers`` gives each process's
  name, else ``SLURM_LOCALID`` (one worker per Slurm task);
- index ``i`` below the job's GPU count (``gpuexec.scheduler.devices.discover()``) is a
  GPU worker: pinned to GPU ``i`` (``CUDA_VISIBLE_DEVICES``, or ``ROCR_VISIBLE_DEVICES`` +
  ``HIP_VISIBLE_DEVICES`` on AMD), resources ``GPU=1``; the others are CPU workers,
  resources ``CPU=<threads>``, GPUs hidden on NVIDIA;
- each is bound to its own cores: GPU ``i`` takes the first of the cores next to it
  (``GPUEXEC_PIN_MASKS``: the site's comma-separated hex CPU masks, one per GPU; else
  consecutive blocks of the job's cores), CPU workers the cores left, in order;
- numba's thread count is the worker's thread count.

Fake-GPU mode (``GPUEXEC_FAKE_GPU``) works as for the job scripts (docs/deploy.md).
"""

from __future__ import annotations

import os

MASKS_ENV = "GPUEXEC_PIN_MASKS"


def worker_index(name, env=None) -> int:
    env = os.environ if env is None else env
    tail = str(name).rsplit("-", 1)[-1] if "-" in str(name) else ""
    return int(tail) if tail.isdigit() else int(env.get("SLURM_LOCALID", "0"))


def mask_cores(mask: str) -> list[int]:
    bits = int(mask, 16)
    return [i for i in range(bits.bit_length()) if bits >> i & 1]


def role(index: int, threads: int, cores: list[int], found: list, env=None) -> dict:
    """``{"resources", "env", "cores", "device"}`` of worker ``index`` of a job."""
    from gpuexec.scheduler import devices

    env = os.environ if env is None else env
    masks = [m for m in env.get(MASKS_ENV, "").split(",") if m]
    if masks and len(masks) >= len(found):
        near = [[c for c in mask_cores(m) if c in cores] for m in masks[:len(found)]]
        gpu_cores = [c[:threads] or cores[:threads] for c in near]
        taken = {c for block in gpu_cores for c in block}
        rest = [c for c in cores if c not in taken]
    else:
        split = devices.split_cores(len(found), cores, helper_threads=threads,
                                    cpu_threads=threads, cpu_workers=0)
        gpu_cores, rest = [list(c) for c in split.gpu_cores], list(split.cpu_cores)
    wenv = {"NUMBA_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    if index < len(found):
        device = found[index]
        wenv.update(device.pin_env(env))
        return {"resources": {"GPU": 1}, "env": wenv, "cores": gpu_cores[index],
                "device": device.describe()}
    j = index - len(found)
    mine = rest[j * threads:(j + 1) * threads] or rest or cores
    if found and found[0].vendor == devices.NVIDIA:
        wenv["CUDA_VISIBLE_DEVICES"] = ""  # CPU workers never open a CUDA context
    return {"resources": {"CPU": threads}, "env": wenv, "cores": mine, "device": None}


def dask_setup(worker) -> None:
    from gpuexec.scheduler import devices

    threads = worker.state.nthreads
    mine = role(worker_index(worker.name), threads, sorted(os.sched_getaffinity(0)),
                devices.discover())
    os.environ.update(mine["env"])  # before anything opens a device or starts numba
    for tid in os.listdir("/proc/self/task"):  # every thread, those started later inherit
        os.sched_setaffinity(int(tid), mine["cores"])
    worker.state.total_resources = dict(mine["resources"])  # registered next
    worker.state.available_resources = dict(mine["resources"])
