"""``python -m gpuexec.scheduler.worker_cli <dask worker options>``: distributed's ``dask
worker`` with the nanny settings of gpuexec's embedded cluster (``cluster.NANNY_SETTINGS``:
no MALLOC_TRIM_THRESHOLD_ in the worker's environment), for the workers the Slurm scripts
start (deploy/start_workers.py)."""

from __future__ import annotations


def main() -> None:
    import dask
    from distributed.cli.dask_worker import main as dask_worker

    from gpuexec.scheduler.cluster import NANNY_SETTINGS

    with dask.config.set(NANNY_SETTINGS):
        dask_worker()  # a click command: reads sys.argv, exits


if __name__ == "__main__":
    main()
