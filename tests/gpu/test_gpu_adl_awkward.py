"""The plain-awkward ADL queries (examples/adl_awkward) through GPUExecutor on a GPUCluster
of GPU workers only, so that every chunk runs there (their tasks install the awkward
kernel provider, ``gpuexec.awkward.worker_setup``): the outputs equal coffea's
IterativeExecutor's (histogram counts exact, sums within 1e-9), and the run's report
counts the awkward kernel calls the GPU pool's engine served, none fallen back. Skipped
without a GPU (tests/gpu/conftest.py).

    .venv/bin/python -m pytest -q tests/gpu/test_gpu_adl_awkward.py
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import cloudpickle
import pytest
from coffea import processor

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from examples.adl_awkward import QUERIES, make  # noqa: E402
from gpuexec import GPUCluster  # noqa: E402
from gpuexec.executor import GPUExecutor  # noqa: E402
from gpuexec.scheduler.cluster import shared_client  # noqa: E402
from test_adl import _has_columns, assert_same_result  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])
pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

# sample -> (file, chunksize): nano_tt_v15 holds 200 events, nano_dy 40
SAMPLES = {"nano_tt_v15": (ROOT / "data" / "samples" / "nano_tt_v15.root", 50),
           "nano_dy": (ROOT / "data" / "samples" / "nano_dy.root", 20)}


@pytest.fixture(scope="module")
def executor():
    """One GPUCluster of GPU workers only for the module, started before the first query
    (given CPU workers, placement sends a chunk to whichever pool it predicts finishes it
    first, and a crossover never takes CPU pools out of the candidates)."""
    ex = GPUExecutor(client=GPUCluster(cpu_workers=0), status=False)
    with contextlib.redirect_stdout(io.StringIO()):
        shared_client(ex.cluster_spec())
    yield ex
    ex.close()


def _run(executor, query: int, path: Path, chunksize: int):
    return processor.Runner(executor=executor, chunksize=chunksize)(
        {"sample": [str(path)]}, make(query), treename="Events")


@pytest.mark.parametrize("sample", sorted(SAMPLES))
@pytest.mark.parametrize("query", sorted(QUERIES))
def test_plain_awkward_query_on_gpu_workers_matches_iterative(executor, query, sample):
    path, chunksize = SAMPLES[sample]
    if not _has_columns(path, QUERIES[query].columns):
        pytest.skip(f"{path.name} lacks the columns of Q{query}")
    gpu_pools = {p.name for p in executor.cluster_spec().pools
                 if p.is_gpu and p.backend in ("cuda", "hip")}
    assert gpu_pools, executor.cluster_spec().pools
    want = _run(processor.IterativeExecutor(status=False), query, path, chunksize)
    got = _run(executor, query, path, chunksize)
    assert_same_result(got, want)
    call = executor.report.processing
    assert call.processed == want["n_events"]
    assert call.pools and set(call.pools) <= gpu_pools, call.pools
    counts = call.awkward_kernels
    assert set(counts) <= gpu_pools, counts
    assert sum(p["fallback"] for p in counts.values()) == 0, counts
    if query >= 3:  # Q1, Q2 reach no kernel (tests/test_adl_awkward.py)
        assert sum(p["served"] for p in counts.values()) > 0, counts
