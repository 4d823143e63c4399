"""GPUExecutor with a real GPU worker (pinned, CuPy-backed columns) and CPU workers:
ADL queries match coffea's IterativeExecutor (histogram counts exact, float sums within
1e-5 relative), and a chunk that runs out of device memory is retried on a CPU worker
with exact totals. Skipped without a GPU (tests/gpu/conftest.py).

    .venv/bin/python -m pytest -q tests/gpu/test_gpu_executor.py
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

import cloudpickle
import pytest
from coffea import processor
from coffea.nanoevents import NanoAODSchema

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from examples.adl import make  # noqa: E402

import dask  # noqa: E402

from gpuexec import GPUCluster  # noqa: E402
from gpuexec.executor import GPUExecutor  # noqa: E402
from gpuexec.scheduler.cluster import shared_client  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])
pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

TT = str(ROOT / "data" / "samples" / "nano_tt_v15.root")
QUERIES = (1, 2, 3, 4, 5, 6, 7, 8)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """A generated NanoAOD-like file big enough for GPU-sized chunks."""
    from examples.make_sample import write_sample

    return write_sample(tmp_path_factory.mktemp("adl") / "adl_200k.root", 200_000,
                        compression="zlib:1")


@pytest.fixture(autouse=True)
def probe_two():
    """Every pool gets its first two chunks whatever the models say (placement.probe)."""
    with dask.config.set({"gpuexec.placement.probe": 2}):
        yield


@pytest.fixture(scope="module")
def executor():
    ex = GPUExecutor(client=GPUCluster(gpu_workers=1, cpu_workers=4,
                                       dashboard_address="127.0.0.1:0"), status=False)
    with contextlib.redirect_stdout(io.StringIO()):
        shared_client(ex.cluster_spec())
    assert any(p.is_gpu and p.backend in ("cuda", "hip") for p in ex.cluster_spec().pools)
    yield ex
    ex.close()


def _modules_not_loaded(dask_worker=None):
    import gpuexec.kernels as gk
    from gpuexec.kernels.gpu import catalog, families

    backend = gk.get_backend("cuda")
    missing = [op.contract for op in catalog.OPS
               if (op.contract, backend.strategy) not in backend._prepared]
    missing += [f"{op.contract} per-list" for op in catalog.OPS
                if op.dtypes and backend.plan.uses_per_list_unit(op.device)
                and (op.contract, "naive") not in backend._prepared]
    missing += [f.name for f in families.FAMILIES if (f.name, False) not in backend._family_modules]
    return missing + [f"{f.name} per-list" for f in families.FAMILIES
                      if f.name in backend.plan.family_per_list
                      and (f.name, True) not in backend._family_modules]


def test_gpu_workers_start_warm_with_every_kernel_module_loaded(executor):
    from gpuexec.scheduler.cluster import shared_client

    client = shared_client(executor.cluster_spec(), announce=None)
    gpu_workers = [a for a, w in client.scheduler_info()["workers"].items()
                   if w.get("resources", {}).get("GPU")]
    assert gpu_workers
    assert list(client.run(_modules_not_loaded, workers=gpu_workers).values()) == [[]] * len(gpu_workers)


def run(executor, query, files, chunksize):
    return processor.Runner(executor=executor, chunksize=chunksize, schema=NanoAODSchema,
                            metadata_cache={})({"adl": files}, query, treename="Events")


def assert_same(got, want):
    assert got["n_events"] == want["n_events"]
    for name, h in want["hists"].items():
        assert got["hists"][name].values(flow=True).tolist() == h.values(flow=True).tolist(), name
        assert got["sums"][name] == pytest.approx(want["sums"][name], rel=1e-5), name


@pytest.mark.parametrize("number", QUERIES)
def test_adl_query_on_gpu_and_cpu_workers_matches_iterative(executor, sample, number):
    want = run(processor.IterativeExecutor(status=False), make(number), [sample], 25_000)
    # without copies of straggling tasks (as by default): the GPU's outputs must be the
    # ones compared (with backups=0.5 on the H200, a query's first GPU tasks, filling
    # caches, ran late, and their copies on CPU workers counted instead: Q3, Q5, Q7 and Q8
    # came out all-CPU)
    with dask.config.set({"gpuexec.placement.backups": None}):
        got = run(executor.copy(), make(number), [sample], 25_000)
    assert_same(got, want)
    call = executor.report.processing
    assert call.processed == 200_000
    assert call.pools.get("gpu", 0) >= 2, call.pools  # probe: the GPU ran chunks
    timing = call.timing()["gpu"]
    assert timing["transfer"] > 0  # columns were copied to the device


def test_shipped_sample_matches_iterative(executor):
    want = run(processor.IterativeExecutor(status=False), make(6), [TT], 50)
    got = run(executor.copy(), make(6), [TT], 50)
    assert_same(got, want)
    # the GPU worker was asked for nvCOMP, and found what this process finds (one install)
    from gpuexec.io import device_read as device_reading

    assert executor.nvcomp_on_gpu_workers == device_reading.nvcomp_version(), \
        executor.nvcomp_on_gpu_workers


class OOMQ6(type(make(6))):
    """Q6 that asks the device for more memory than it has, on GPU workers only."""

    def process(self, events):
        if os.environ.get("GPUEXEC_POOL") == "gpu":
            import cupy

            cupy.empty(1 << 50, dtype=cupy.uint8)  # 1 PiB: cupy.cuda.memory.OutOfMemoryError
        return super().process(events)


def test_device_out_of_memory_is_retried_on_cpu_with_exact_totals(executor, sample):
    want = run(processor.IterativeExecutor(status=False), make(6), [sample], 25_000)
    ex = executor.copy()
    with dask.config.set({"gpuexec.placement.probe": 3}):
        got = run(ex, OOMQ6(), [sample], 25_000)
    assert_same(got, want)
    call = ex.report.processing
    assert call.processed == 200_000 and call.pools == {"cpu": 8}
    assert call.fallbacks and all("Memory" in f.reason for f in call.fallbacks)


def _gpu_count() -> int:
    try:  # evaluated at collection, also where conftest.py skips every GPU test
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


def _mps_control(command: str, pipe: str | None) -> str:
    """The answer of the MPS control daemon of ``pipe`` (None: the default one)."""
    import subprocess

    env = dict(os.environ)
    if pipe:
        env["CUDA_MPS_PIPE_DIRECTORY"] = pipe
    done = subprocess.run(["nvidia-cuda-mps-control"], input=command + "\n", env=env,
                          capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _gpu_workers(client) -> list:
    return [a for a, w in client.scheduler_info()["workers"].items()
            if w.get("resources", {}).get("GPU")]


def test_default_pools_share_the_gpu_through_mps_and_match_iterative(sample):
    """What ``GPUExecutor()`` starts on an NVIDIA host with MPS: several single-thread GPU
    workers per device, all clients of one MPS server; Q6 and Q8 equal the
    IterativeExecutor's with exact totals; the daemon gpuexec started is quit on close."""
    from gpuexec.scheduler import mps

    if not mps.available():
        pytest.skip("nvidia-cuda-mps-control is not on PATH")
    ex = GPUExecutor(client=GPUCluster(cpu_workers=2, dashboard_address="127.0.0.1:0"),
                     status=False)
    spec = ex.cluster_spec()
    gpu = next(p for p in spec.pools if p.is_gpu)
    assert spec.gpu_sharing == "mps" and gpu.workers > 1 and gpu.threads == 1, spec
    pipe = None
    try:
        client = shared_client(spec, announce=None)
        gpu_workers = _gpu_workers(client)
        pipes = set(client.run(lambda: os.environ.get("CUDA_MPS_PIPE_DIRECTORY"),
                               workers=gpu_workers).values())
        assert len(pipes) == 1, pipes  # one daemon for the pool
        pipe = pipes.pop()
        # one server, and every GPU worker (warm: its device is open) is its client
        servers = _mps_control("get_server_list", pipe).split()
        assert len(servers) == 1, servers
        clients = set(_mps_control(f"get_client_list {servers[0]}", pipe).split())
        pids = set(map(str, client.run(os.getpid, workers=gpu_workers).values()))
        assert pids <= clients, (pids, clients)
        for number in (6, 8):
            want = run(processor.IterativeExecutor(status=False), make(number), [sample], 10_000)
            got = run(ex, make(number), [sample], 10_000)
            assert_same(got, want)
            call = ex.report.processing
            assert call.processed == 200_000 and call.pools.get("gpu", 0) >= 2, call.pools
    finally:
        ex.close()
    if pipe and os.path.basename(pipe).startswith("gpuexec-mps-"):  # ours: quit and removed
        assert not os.path.exists(pipe)


@pytest.mark.skipif("_gpu_count() < 2", reason="needs 2 GPUs (device kind nvidia-h200-x2)")
def test_pinned_gpu_workers_on_every_device_of_a_multi_gpu_host(sample):
    """The embedded default on a host with several GPUs: GPU workers pinned round robin
    (``CUDA_VISIBLE_DEVICES``: UUIDs, which name the same device through an MPS daemon),
    each seeing one device, every device running chunks; results equal the
    IterativeExecutor's with exact totals."""
    n_gpus = _gpu_count()
    ex = GPUExecutor(client=GPUCluster(cpu_workers=2, dashboard_address="127.0.0.1:0"),
                     status=False)
    merge_one = dask.config.set({"gpuexec.placement.gpu-merge": 1})
    try:
        gpu_pools = [p for p in ex.cluster_spec().pools if p.is_gpu]
        n_workers = sum(p.workers for p in gpu_pools)
        assert n_workers >= n_gpus and n_workers % n_gpus == 0
        client = shared_client(ex.cluster_spec())

        def where(dask_worker):  # client.run passes the worker it runs on
            import cupy

            return (dask_worker.name, os.environ.get("CUDA_VISIBLE_DEVICES"),
                    cupy.cuda.runtime.getDeviceCount(),
                    cupy.cuda.runtime.getDeviceProperties(0)["uuid"])

        seen = {}
        for info in client.run(where).values():
            seen[info[0]] = info[1:]
        gpus = {k: v for k, v in seen.items() if str(k).startswith("gpu")}
        assert len(gpus) == n_workers, seen
        assert all(count == 1 for _, count, _ in gpus.values()), seen  # pinned: sees one
        assert len({visible for visible, _, _ in gpus.values()}) == n_gpus, seen
        assert len({uuid for _, _, uuid in gpus.values()}) == n_gpus, seen  # distinct devices
        pins = {visible: uuid for visible, _, uuid in gpus.values()}
        assert all(len({u for v, _, u in gpus.values() if v == pin}) == 1 for pin in pins), seen

        want = run(processor.IterativeExecutor(status=False), make(6), [sample], 10_000)
        with merge_one:
            got = run(ex, make(6), [sample], 10_000)
        assert_same(got, want)
        call = ex.report.processing
        assert call.processed == 200_000
        ran = {gpus[r.worker][2] for r in call.runs if r.pool == "gpu"}
        assert len(ran) == n_gpus, ran  # every GPU ran chunks
    finally:
        ex.close()
