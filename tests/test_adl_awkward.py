"""The plain-awkward ADL queries (examples/adl_awkward) against the plain-Python
references, bin by bin, in both NanoEvents modes: with awkward alone, with the kernel
provider installed on the CPU engine, and in shadow mode (awkward-cpp re-runs every
served kernel and must agree); the kernels they reach are all served (no fallback)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import gpuexec.awkward as gak  # noqa: E402
import gpuexec.kernels as gk  # noqa: E402
from awkward_kernel_recorder import open_events  # noqa: E402
from examples.adl import columns, reference  # noqa: E402
from examples.adl_awkward import QUERIES, make  # noqa: E402
from test_adl import assert_same_result  # noqa: E402

SAMPLES = {name: ROOT / "data" / "samples" / f"{name}.root" for name in ("nano_dy", "nano_tt_v15")}
_REFERENCES: dict = {}


def _reference(query, path):
    if (query, path) not in _REFERENCES:
        _REFERENCES[query, path] = reference.run(query, path)
    return _REFERENCES[query, path]


_EVENTS: dict = {}


def _events(path, mode):
    """One NanoEvents per file and mode for the module (nano_tt_v15's ~8000-branch tree
    costs seconds to open)."""
    if (path, mode) not in _EVENTS:
        _EVENTS[path, mode] = open_events(path, mode)
    return _EVENTS[path, mode]


RUNS = [("nano_dy", "eager"), ("nano_dy", "virtual"), ("nano_tt_v15", "virtual")]


@pytest.mark.parametrize("provider", ["cpu", "shadow"])
@pytest.mark.parametrize("sample,mode", RUNS)
@pytest.mark.parametrize("query", sorted(QUERIES))
def test_plain_awkward_query_matches_reference(query, sample, mode, provider):
    path = SAMPLES[sample]
    events = _events(path, mode)
    try:
        columns.from_events(events, QUERIES[query].columns)
    except columns.MissingColumn:
        pytest.skip(f"{path.name} lacks the columns of Q{query}")
    gk.reset_stats()
    with gak.installed("cpu", shadow=provider == "shadow"):
        out = make(query).process(events)
    assert_same_result(out, _reference(query, str(path)))
    stats = gk.stats()
    assert stats["n_awkward_fallback"] == 0, stats["awkward"]["fallback"]
    if query >= 3:  # Q1, Q2 reach no kernel
        assert stats["n_awkward_served"] > 0


def _install_cpu_provider() -> bool:
    """On a worker: the provider in its "cpu" mode (awkward's NumPy arrays served by the
    engine), as a GPU worker's ``worker_setup`` installs it for CuPy arrays."""
    if not gak.is_installed("cpu"):
        gak.install("cpu")
    return True


@pytest.mark.slow
def test_plain_awkward_processor_through_gpuexecutor_counts_its_kernel_calls():
    """A plain-awkward processor through GPUExecutor on a CPU-backed GPU pool with the
    provider installed: the output equals IterativeExecutor's, and the report counts the
    awkward kernel calls the engine served (no fallback) per pool."""
    import cloudpickle
    from coffea import processor

    from gpuexec import GPUCluster, GPUExecutor

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    path = str(SAMPLES["nano_tt_v15"])
    fileset = {"sample": [path]}
    ref = processor.Runner(executor=processor.IterativeExecutor(), chunksize=50)(
        fileset, make(8), treename="Events")
    cluster = GPUCluster(gpu_backend="cpu", gpu_workers=1, gpu_threads=1, cpu_workers=1,
                         threads_per_worker=1, dashboard_address="127.0.0.1:0")
    with GPUExecutor(client=cluster, gpu_backend="cpu", status=False) as executor:
        assert all(cluster.client.run(_install_cpu_provider).values())
        out = processor.Runner(executor=executor, chunksize=50)(fileset, make(8),
                                                               treename="Events")
        report = executor.report.processing
    assert_same_result(out, ref)
    counts = report.awkward_kernels
    assert counts, "no awkward kernel call was counted"
    assert sum(p["served"] for p in counts.values()) > 0
    assert sum(p["fallback"] for p in counts.values()) == 0
    assert set(counts) <= set(report.pools)
    assert "awkward kernel calls" in report.summary()
