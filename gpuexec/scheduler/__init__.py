"""What the executor asks of Dask: the local cluster's worker pools (``cluster``), the
plugins that pin worker threads and record where chunks ran (``plugins``), the run
report and its entry bookkeeping (``report``), the per-pool progress bar (``progress``)
and the names of a run's Dask tasks (``keys``).

Submodules are imported on demand, so that importing the package pulls in no Dask.
"""
