"""``python -m gpuexec.scheduler.worker_cli <dask worker options>``: distributed's ``dask
worker`` with the Dask settings of gpuexec's embedded cluster (``cluster.NANNY_SETTINGS``:
no MALLOC_TRIM_THRESHOLD_ in the worker's environment; ``cluster.HOUSEKEEPING``: Dask's
event-loop tick and system monitor slowed where Dask's configuration leaves them at its
defaults; Dask's profiler sampling every ``cluster.PROFILE_INTERVAL`` seconds unless a
``DASK_DISTRIBUTED__WORKER__PROFILE__*`` variable says otherwise), for the workers the
Slurm scripts start (deploy/start_workers.py)."""

from __future__ import annotations

import os


def main() -> None:
    import dask
    from distributed.cli.dask_worker import main as dask_worker

    from gpuexec.scheduler.cluster import (
        NANNY_SETTINGS,
        PROFILE_INTERVAL,
        housekeeping_settings,
        profile_settings,
    )

    settings = {**NANNY_SETTINGS, **housekeeping_settings()}
    if not any(name.startswith("DASK_DISTRIBUTED__WORKER__PROFILE__") for name in os.environ):
        settings.update(profile_settings(PROFILE_INTERVAL))
    with dask.config.set(settings):
        dask_worker()  # a click command: reads sys.argv, exits


if __name__ == "__main__":
    main()
