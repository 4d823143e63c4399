"""GPU and CPU pools of Slurm jobs from a notebook on a login node: dask-jobqueue's
``SLURMCluster`` configured from a site profile (docs/deploy.md#notebook).

    from distributed import Client
    from gpuexec import GPUExecutor
    from gpuexec.deploy.jobqueue import gpu_slurm_cluster

    cluster = gpu_slurm_cluster(site="frontier", account="abc123", walltime="01:00:00")
    cluster.scale(jobs=2)                       # two nodes
    client = Client(cluster)                    # TLS: the cluster's credentials
    executor = GPUExecutor(client=client)

Each job is one node running ``(GPUs per node x cores per GPU) / threads`` worker
processes of ``threads`` threads (jobqueue gives every process of a job the same thread
count); the preload ``gpuexec.deploy.pin`` makes the first one per GPU a pinned GPU worker
(``GPU=1``) and the rest CPU workers (``CPU=<threads>``). Scheduler, workers and client
talk ``tls://`` with credentials made for this cluster in ``<run_dir>/tls`` (0700, files
0600; ``gpuexec.security``); the workers' and the scheduler's dashboards listen on
127.0.0.1 only. Needs ``dask-jobqueue``.
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
import time
from pathlib import Path

from gpuexec import security
from gpuexec.deploy.pin import MASKS_ENV
from gpuexec.deploy.render import load_profile
from gpuexec.scheduler.devices import FAKE_GPU


def prologue(profile: dict, fake_gpu: str | None) -> list[str]:
    """The job script's lines before the workers start: modules, environment, pinning."""
    lines = [f"module load {' '.join(profile['modules'])}"] if profile["modules"] else []
    env = dict(profile.get("environment") or {})
    if profile.get("cpu_masks"):
        env[MASKS_ENV] = ",".join(profile["cpu_masks"])
    if fake_gpu:
        env[FAKE_GPU] = fake_gpu
    lines += [f"export {k}={shlex.quote(str(v))}" for k, v in env.items()]
    return lines + ["umask 077"]


def gpu_slurm_cluster(site: str | None = "nvidia", *, profile: str | os.PathLike | None = None,
                      account: str | None = None, walltime: str = "01:00:00",
                      partition: str | None = None, qos: str | None = None,
                      gpus_per_node: int | None = None, cores_per_gpu: int | None = None,
                      threads: int | None = None, memory: str | None = None,
                      run_dir: str | os.PathLike | None = None, host: str | None = None,
                      worker_host: str | None = None, fake_gpu: str | None = None,
                      python: str | None = None, **kwargs):
    """A ``dask_jobqueue.SLURMCluster`` whose jobs are nodes of ``site``'s profile (or the
    YAML ``profile``, keys as ``gpuexec deploy slurm --profile``); no job is submitted
    until ``scale``. ``threads``: of every worker (default: the profile's
    ``gpu_threads``); ``memory``: per job, shared by its workers (default: no ``--mem``, each
    worker's share of the node's memory); ``run_dir``: credentials and job logs (default
    ``~/gpuexec-runs/notebook-<time>``); ``host``: the scheduler's address (default: this
    node's name; ``127.0.0.1`` for a one-node Slurm); ``worker_host``: where workers
    listen (default: the profile's interface); ``fake_gpu``: ``GPUEXEC_FAKE_GPU`` of the
    jobs. Other keywords go to ``SLURMCluster``."""
    from dask_jobqueue import SLURMCluster

    prof = load_profile(site, profile)
    gpus = gpus_per_node or prof["gpus_per_node"]
    cores = gpus * (cores_per_gpu or prof["cores_per_gpu"])
    threads = threads or prof["gpu_threads"]
    if threads > cores:
        raise ValueError(f"threads={threads} exceeds the job's {cores} cores")
    run_dir = Path(run_dir or Path.home() / "gpuexec-runs" / f"notebook-{time.strftime('%Y%m%d-%H%M%S')}")
    security.private_dir(run_dir)
    sec = security.make_credentials(run_dir / "tls")
    directives = [f"--gpus-per-node={gpus}", *(f"--qos={qos}",) * bool(qos),
                  *prof.get("sbatch", ())]
    extra = ["--nworkers", str(cores // threads), "--nanny", "--no-dashboard",
             "--dashboard-address", "127.0.0.1:0", "--preload", "gpuexec.deploy.pin"]
    if worker_host:
        extra += ["--host", worker_host]
    if not memory:  # the last --memory-limit wins: each worker's share of the node
        extra += ["--memory-limit", "auto"]
    options = dict(
        queue=partition or prof["partition"], account=account, walltime=walltime,
        cores=(cores // threads) * threads, processes=cores // threads, memory=memory or "1GB",
        job_directives_skip=[] if memory else ["--mem"], job_extra_directives=directives,
        job_script_prologue=prologue(prof, fake_gpu), python=python or sys.executable,
        worker_command="gpuexec.scheduler.worker_cli", worker_extra_args=extra,
        local_directory=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                     f"gpuexec-{os.getuid()}", "dask-worker-space"),
        log_directory=str(security.private_dir(run_dir / "logs")), security=sec,
        protocol="tls://", interface=None if worker_host else prof.get("interface"),
        scheduler_options={"host": host or socket.gethostname(),
                           "dashboard_address": "127.0.0.1:0"},
        shebang="#!/bin/bash -l")
    options.update(kwargs)
    cluster = SLURMCluster(**options)
    cluster.gpuexec_run_dir = run_dir
    return cluster
