"""The WorkItems and the work function coffea's Runner hands its executor, captured
without running any of them: what GPUExecutor's tasks are given."""

from __future__ import annotations

from coffea import processor
from coffea.nanoevents import NanoAODSchema

_captured: dict = {}


class _Capture(processor.IterativeExecutor):
    """Keeps the WorkItems and the work function Runner hands its executor."""

    def __call__(self, items, function, accumulator):
        _captured.update(items=list(items), function=function)
        return accumulator, 0


def work_of(paths: list, chunksize: int, processor_instance, **runner_options):
    """(WorkItems of ``paths``, Runner's work function for ``processor_instance``), as
    GPUExecutor's tasks get them: without Runner's retry wrapper (the executor retries
    itself). Runner raises once its executor returns, having run none."""
    from gpuexec.executor.task import _unwrap_runner_retries

    runner = processor.Runner(executor=_Capture(), pre_executor=processor.IterativeExecutor(),
                              chunksize=chunksize, schema=NanoAODSchema, metadata_cache={},
                              **runner_options)
    _captured.clear()
    try:
        runner({"sample": list(paths)}, processor_instance, treename="Events")
    except ValueError as err:
        if "No chunks returned results" not in str(err):
            raise
    return _captured["items"], _unwrap_runner_retries(_captured["function"])[0]
