"""``python -m gpuexec.scheduler.worker_cli <dask worker options>``: distributed's ``dask
worker`` with the Dask settings of gpuexec's workers, for the workers the Slurm scripts
start (deploy/start_workers.py). They come from this host's Dask configuration
(``gpuexec.worker.*``, ``gpuexec.gpu.sync``: a YAML next to the job or DASK_GPUEXEC__...
variables; docs/configuration.md#slurm). A timer or profiler setting that the site's Dask
configuration sets to other than Dask's default is kept."""

from __future__ import annotations

import os


def main() -> None:
    import dask
    from distributed.cli.dask_worker import main as dask_worker

    from gpuexec import config
    from gpuexec.scheduler.cluster import profile_settings, unless_configured, worker_settings

    s = config.WorkerSettings.read()
    if s.gpu_sync != "auto":  # read by the kernel engine as it opens the device
        from gpuexec.kernels.gpu.runtime import SYNC_ENV

        os.environ.setdefault(SYNC_ENV, s.gpu_sync)
    # the timers' settings; the profiler's too unless the site configures it
    profiler = unless_configured(profile_settings(s.profile_interval))
    settings = worker_settings(None, s.tick_interval, s.system_monitor_interval)
    with dask.config.set({**settings, **profiler}):
        dask_worker()  # a click command: reads sys.argv, exits


if __name__ == "__main__":
    main()
