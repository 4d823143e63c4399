"""GPUExecutor: a coffea executor on Dask that loses no chunk and counts none twice.

    from coffea.processor import Runner
    from gpuexec import GPUExecutor

    with GPUExecutor() as executor:                     # a default GPUCluster
        out = Runner(executor=executor, chunksize=100_000)(fileset, processor, treename="Events")
        print(executor.report)

Settings: the executor's few keywords, ``GPUCluster``'s, and tuning in Dask's
configuration under ``gpuexec.*`` (docs/configuration.md).

coffea's ``Runner`` copies the executor (``copy(**kw)``) and calls the copy once to read
the files' metadata and once to process the chunks; each call is
``executor(items, function, accumulator) -> (accumulator, 0)``. On the embedded cluster
the metadata of up to ``METADATA_HERE`` files is read in this process, where a Dask round
trip would cost more than the read (``GPUExecutor._metadata_here``).

One call: every item (a coffea ``WorkItem``: file, tree, entry range) becomes one Dask
task whose key names the file and range (``gpuexec.scheduler.keys``; adjacent items of
one file may share a GPU task, ``gpuexec.placement.gpu-merge``), placed on a worker pool by
``gpuexec.scheduler.placement`` (a GPU pool for chunks above the crossover while it
finishes first, else CPU) and restricted to that pool's resources (``{"GPU": 1}`` or
``{"CPU": 1}``). It runs the function under the pool's kernel backend (``gk.using``; on
a GPU pool with the events staged on the device, ``gpuexec.io.staging``) and returns the
output with the entries it processed. Outputs are fetched into the calling process as
their tasks complete and merged there in chunk order (``merge_on="client"``, as coffea's
FuturesExecutor does), or merged in a tree of tasks on the cluster
(``merge_on="cluster"``, ``treereduction`` per merge, like coffea's DaskExecutor). Then:

- entries: the per-chunk counts carried up the tree must equal the entries of the
  chunks submitted and not skipped, each chunk exactly once, or ``EntriesMismatch``;
- failures: a chunk that raises fails the call with a ``ChunkError`` naming its file
  and entry range (the original exception is its ``__cause__``); with
  ``Runner(skipbadfiles=...)`` the chunk (or file, when its metadata cannot be read) is
  skipped instead, listed in ``executor.report.skipped`` and, with ``savemetrics``, in
  ``metrics["skipped"]``, and a ``SkippedChunksWarning`` says so;
- a worker that dies mid-run: Dask re-runs its chunks elsewhere (``allowed_failures``
  worker deaths per task), and ``executor.report`` lists them.

coffea's ``Runner`` retries and skips inside ``Runner.automatic_retries``, which only
hands a warning back for a skipped file; the executor recognises that wrapper
(``partial(Runner.automatic_retries, retries, skipbadfiles, work)``) and applies the
same retries and skip rule itself, so that it knows what was skipped and why
(tests/test_executor.py::test_runner_wraps_work_in_automatic_retries guards the shape).

Modules: ``core`` (``GPUExecutor``), ``task`` (what a worker runs), ``loop`` (one call's
submission loop, one handler per kind of completion), ``busy`` (workers that cancelled
copies still occupy), ``events`` (what the client hears from a cluster, one object per
scheduler), ``merging`` (outputs in chunk order, in the client or a tree of tasks),
``accounting`` (the call's report), ``errors``, ``probes`` (calibration, nvCOMP).
"""

from gpuexec.executor.core import CLIENT_POOL, METADATA_HERE, MOVED, REMOVED, GPUExecutor
from gpuexec.executor.errors import (
    ChunkError,
    MergeError,
    NotRootOrNoTree,
    describe_item,
    retryable,
)
from gpuexec.executor.probes import (
    NOT_NVIDIA,
    NVCOMP_MISSING,
    NVCOMP_UNKNOWN,
    calibrate_on_worker,
    nvcomp_probe,
)
from gpuexec.executor.task import device_backend
from gpuexec.gpu_cluster import GPUCluster

__all__ = ["CLIENT_POOL", "METADATA_HERE", "MOVED", "NOT_NVIDIA", "NVCOMP_MISSING",
           "NVCOMP_UNKNOWN", "REMOVED", "ChunkError", "GPUCluster", "GPUExecutor",
           "MergeError", "NotRootOrNoTree", "calibrate_on_worker", "describe_item",
           "device_backend", "nvcomp_probe", "retryable"]
