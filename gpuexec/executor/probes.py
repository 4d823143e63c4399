"""Small tasks that ask the cluster's GPU workers about themselves: the kernel-engine
calibration seeding the placement, and whether nvCOMP is installed where the NVIDIA GPU
workers run (docs/executor.md#reading)."""

from __future__ import annotations

import logging
import warnings

from gpuexec import config
from gpuexec.executor.events import ClusterEvents
from gpuexec.executor.task import AUTO, device_backend
from gpuexec.io import device_read as device_reading
from gpuexec.scheduler import keys

logger = logging.getLogger("gpuexec.executor")

NVCOMP_UNKNOWN = "unknown"  # the GPU workers could not be asked
NOT_NVIDIA = "not-nvidia"  # the probe's answer on a GPU worker whose device is not NVIDIA's

# the figures it quotes: docs/executor.md#reading
NVCOMP_MISSING = ("gpuexec: nvCOMP is not installed where the NVIDIA GPU workers run: they "
                  "inflate every zlib basket on the host, and reading bounds them (ADL Q8 on "
                  "the H200: 0.263 s a run, 0.193 s with nvCOMP). pip install "
                  "'gpuexec[cuda]' installs it (nvidia-nvcomp-cu13)")


def nvcomp_probe():
    """On a GPU worker: nvCOMP's version (None: not installed), or NOT_NVIDIA."""
    if device_backend() != "cuda":
        return NOT_NVIDIA
    return device_reading.nvcomp_version()


def calibrate_on_worker(gpu: bool):
    """On a GPU worker: its cached calibration, measured where there is none, in the
    worker's own ``gpuexec.calibration-dir``."""
    from gpuexec.scheduler.calibration import get_calibration

    return get_calibration(directory=config.calibration_dir(), gpu=gpu)


def calibration(shared, setting, client, pools: dict):
    """The calibration seeding the placement (``setting``: the executor's): measured
    where the GPU is (one task on a GPU worker, cached on disk there and in ``shared``
    for the executor's copies)."""
    if setting != "auto":
        return setting
    if shared.calibration is None:
        gpu = next((p for p in pools.values() if p.is_gpu), None)
        if gpu is None:
            return None
        try:
            shared.calibration = client.submit(
                calibrate_on_worker, gpu=gpu.backend != "cpu", pure=False,
                resources=gpu.task_resources_dict(), key=f"calibration-{keys.new_run_token()}",
            ).result()
        except Exception as err:  # the policy works without it: observed times decide
            warnings.warn(f"gpuexec: calibration on the GPU worker failed ({err!r}); "
                          "placement starts from a neutral seed", RuntimeWarning,
                          stacklevel=5)
            shared.calibration = False
    return shared.calibration or None


def ask_for_nvcomp(shared, client, pools: dict, read_on_device: bool = True):
    """A probe asking an NVIDIA GPU worker whether nvCOMP is installed there, submitted
    beside a processing call's chunks (None: nothing to ask). Asked once per cluster;
    an executor on a cluster already asked takes the answer (into ``shared.nvcomp``).
    GPU workers without nvCOMP read on the device but inflate on the host: a setup that
    looks like the shipped one and is slower."""
    gpu = next((p for p in pools.values()
                if p.is_gpu and p.backend in ("cuda", AUTO)), None)
    if gpu is None or not read_on_device:
        return None
    events = ClusterEvents.of(client)
    if events.nvcomp_heard:
        if events.nvcomp is not NOT_NVIDIA:
            shared.nvcomp = events.nvcomp
        return None
    try:
        return client.submit(nvcomp_probe, pure=False, resources=gpu.task_resources_dict(),
                             key=f"nvcomp-probe-{keys.new_run_token()}")
    except Exception as err:  # noqa: BLE001 - advisory; the chunks report real faults
        logger.debug("gpuexec: asking a GPU worker for nvCOMP failed: %r", err)
        return None


def hear_nvcomp(shared, client, probe) -> None:
    """The probe's answer after the call (submitted before the chunks, it has come
    unless no GPU worker was free all along: then it is cancelled and asked again next
    call, rather than holding up this one). Recorded per cluster and in
    ``shared.nvcomp``; warned of once where nvCOMP is missing. A probe that failed
    leaves the answer unknown."""
    if probe is None:
        return
    if not probe.done():
        probe.cancel()
        return
    try:
        version = probe.result()
    except Exception as err:  # noqa: BLE001 - advisory
        logger.debug("gpuexec: asking a GPU worker for nvCOMP failed: %r", err)
        version = NVCOMP_UNKNOWN
    events = ClusterEvents.of(client)
    events.nvcomp, events.nvcomp_heard = version, True
    if version == NOT_NVIDIA:  # a worker whose own device is not NVIDIA's
        return
    shared.nvcomp = version
    if version is None:
        warnings.warn(NVCOMP_MISSING, RuntimeWarning, stacklevel=3)
