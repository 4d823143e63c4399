"""``python -m gpuexec.scheduler.worker_cli <dask worker options>``: distributed's ``dask
worker`` with the Dask settings of gpuexec's embedded cluster (``cluster.NANNY_SETTINGS``:
no MALLOC_TRIM_THRESHOLD_ in the worker's environment; ``cluster.HOUSEKEEPING``: Dask's
event-loop tick and system monitor slowed; Dask's profiler sampling every
``cluster.PROFILE_INTERVAL`` seconds), for the workers the Slurm scripts start
(deploy/start_workers.py). A timer or profiler setting that the site's Dask configuration
(a YAML file, a DASK_* variable) sets to other than Dask's default is kept."""

from __future__ import annotations


def main() -> None:
    import dask
    from distributed.cli.dask_worker import main as dask_worker

    from gpuexec.scheduler.cluster import (
        PROFILE_INTERVAL,
        profile_settings,
        unless_configured,
        worker_settings,
    )

    # the embedded cluster's settings; the profiler's too unless the site configures it
    profiler = unless_configured(profile_settings(PROFILE_INTERVAL))
    with dask.config.set({**worker_settings(None), **profiler}):
        dask_worker()  # a click command: reads sys.argv, exits


if __name__ == "__main__":
    main()
