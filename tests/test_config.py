"""gpuexec's settings: the executor's few keywords, ``GPUCluster``, and tuning in Dask's
configuration under ``gpuexec.*`` (docs/configuration.md): the shipped defaults, overrides
that reach the workers, moved and removed keywords, a cluster shared by several
executors, and the GPU backend chosen on each worker from its own device."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import subprocess
import sys
import threading
import time

import cloudpickle
import dask
import pytest
from coffea.processor.executor import ExecutorBase

from gpuexec import GPUCluster, GPUExecutor, config
from gpuexec.scheduler import cluster as planning
from test_executor import DIMUON, DY, TT, DimuonProcessor, runner

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ------------------------------------------------------------------ the shipped defaults
def test_the_shipped_yaml_keeps_the_defaults_the_code_had():
    """The values GPUExecutor's keywords, device_reading, open_files and the cluster's
    housekeeping had before they moved into Dask's configuration."""
    from gpuexec.io import device_read as device_reading
    from gpuexec.io import kept_files as open_files
    from gpuexec.kernels.gpu.runtime import SYNC_MODES

    assert config.PlacementSettings.read() == config.PlacementSettings(
        gpu_merge=7, window=2.0, crossover=None, probe=0, gpu_lost_after=5.0, backups=0.5)
    assert config.ReadingSettings.read() == config.ReadingSettings(
        read_on_device=True, read_ahead=True, inflate="auto", open_files=4,
        nvcomp_min_streams=32, nvcomp_slots=4, nvcomp_wait=0.4)
    assert config.WorkerSettings.read() == config.WorkerSettings(
        profile_interval=0.1, tick_interval=0.2, system_monitor_interval=1.0, gpu_sync="auto")
    assert config.calibration_dir() is None
    assert config.restart_timeout() == 120.0
    # the worker-side module defaults agree with the shipped keys
    reading = config.ReadingSettings.read()
    assert (device_reading.NVCOMP_MIN_STREAMS, device_reading.NVCOMP_SLOTS,
            device_reading.NVCOMP_WAIT) == (reading.nvcomp_min_streams, reading.nvcomp_slots,
                                            reading.nvcomp_wait)
    assert open_files.KEPT == reading.open_files and config.SYNC_MODES == SYNC_MODES
    # shipped as package data
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert '"gpuexec" = ["gpuexec.yaml"]' in f.read()


def test_dask_config_set_and_environment_variables_override_the_defaults():
    with dask.config.set({"gpuexec.placement.gpu-merge": 3, "gpuexec.reading.nvcomp.wait": "1s"}):
        assert config.PlacementSettings.read().gpu_merge == 3
        assert config.ReadingSettings.read().nvcomp_wait == 1.0
    assert config.PlacementSettings.read().gpu_merge == 7
    code = ("from gpuexec import config\n"
            "print(config.PlacementSettings.read().gpu_merge, "
            "config.ReadingSettings.read().nvcomp_wait, config.calibration_dir())")
    env = dict(os.environ, DASK_GPUEXEC__PLACEMENT__GPU_MERGE="2",
               DASK_GPUEXEC__READING__NVCOMP__WAIT="250ms",
               DASK_GPUEXEC__CALIBRATION_DIR="/tmp/cal", PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["2", "0.25", "/tmp/cal"]


def test_invalid_keys_are_refused_naming_the_key():
    for key, value, read in (("placement.gpu-merge", 0, config.PlacementSettings.read),
                             ("placement.window", 0, config.PlacementSettings.read),
                             ("reading.inflate", "gzip", config.ReadingSettings.read),
                             ("worker.tick-interval", -1, config.WorkerSettings.read)):
        with dask.config.set({f"gpuexec.{key}": value}), \
                pytest.raises(ValueError, match=f"gpuexec.{key} must be"):
            read()


# --------------------------------------------------------------- the executor's keywords
def test_the_executor_keeps_few_settings_and_names_the_new_home_of_moved_ones():
    own = [f.name for f in dataclasses.fields(GPUExecutor)
           if f.name not in {g.name for g in dataclasses.fields(ExecutorBase)}]
    assert len(own) <= 12, own
    assert own == ["client", "gpu_backend", "calibration", "merge_on", "treereduction",
                   "retries", "allowed_failures", "priority"]
    import inspect

    kinds = {p.kind for p in inspect.signature(GPUExecutor).parameters.values()}
    assert inspect.Parameter.VAR_KEYWORD not in kinds  # no **kwargs
    for name, home in (("gpu_merge", "gpuexec.placement.gpu-merge"),
                       ("nvcomp_slots", "gpuexec.reading.nvcomp.slots"),
                       ("profile_interval", "gpuexec.worker.profile-interval"),
                       ("gpu_sync", "gpuexec.gpu.sync"),
                       ("cpu_workers", "GPUCluster(cpu_workers=...)"),
                       ("dashboard_address", "GPUCluster(dashboard_address=...)")):
        with pytest.raises(TypeError, match=r"GPUExecutor does not take '\w+'") as raised:
            GPUExecutor(**{name: 1})
        assert home in str(raised.value)
    from gpuexec.executor import MOVED

    for name in MOVED:  # every moved keyword names a home
        with pytest.raises(TypeError, match="it is set with"):
            GPUExecutor(**{name: None})
    for name in ("cpu_direct_read", "nvcomp_share"):
        with pytest.raises(TypeError, match=f"'{name}' was removed"):
            GPUExecutor(**{name: True})
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        GPUExecutor(bogus=1)
    with pytest.raises(ValueError, match="gpu_backend"):
        GPUExecutor(gpu_backend="cuda")  # each GPU worker's own device decides


# ----------------------------------------------------------------- reaching the workers
def kept_files(events):
    from gpuexec.io import kept_files as open_files

    return {"kept": {len(open_files._kept_files())}}


class KeptFiles(DimuonProcessor):
    def process(self, events):
        return kept_files(events)


def test_a_key_set_with_dask_config_set_reaches_the_workers():
    """``gpuexec.reading.open-files`` set around a run is applied by the worker's tasks
    (read on the client, shipped with the call); ``gpuexec.worker.profile-interval`` set
    when a cluster starts is its workers' profiler interval."""
    fileset = {"DY": [DY], "DIMUON": [DIMUON], "TT": [TT]}
    with dask.config.set({"gpuexec.worker.profile-interval": "50ms"}):
        cluster = GPUCluster(cpu_workers=1, dashboard_address="127.0.0.1:0")
        spec = cluster.spec
        with contextlib.redirect_stdout(io.StringIO()):
            cluster.start()
    try:
        assert set(cluster.client.run(
            lambda: dask.config.get("distributed.worker.profile.interval")).values()) \
            == {"50ms"}
        ex = GPUExecutor(client=cluster, status=False)
        with dask.config.set({"gpuexec.reading.open-files": 1}):
            out = runner(ex, chunksize=1000)(fileset, KeptFiles(), treename="Events")
        assert out["kept"] == {1}
        ex.close_files()
        out = runner(ex, chunksize=1000)(fileset, KeptFiles(), treename="Events")
        assert out["kept"] == {1, 2, 3}  # the default: 4 kept per worker thread
        ex.close()
    finally:
        cluster.close()
    assert not planning.holders(spec) and spec not in planning.running_specs()


# ---------------------------------------------------------------------- GPUCluster
def square(x):
    return {"sum": x * x, "items": 1}


def sleepy(x):
    time.sleep(0.5)
    return {"sum": x * x, "items": 1}


def test_a_gpu_cluster_alone_and_passed_as_the_client():
    # a plan of its own (allowed_failures): clusters of equal plans share their processes
    cluster = GPUCluster(cpu_workers=2, dashboard_address="127.0.0.1:0", allowed_failures=2)
    assert "2 CPU worker(s)" in repr(cluster) and "not started" in repr(cluster)
    assert [p.name for p in cluster.spec.pools] == ["cpu"]
    with contextlib.redirect_stdout(io.StringIO()):
        with cluster:
            assert cluster.scheduler_address.startswith("tls://127.0.0.1:")
            assert cluster.dashboard_link.startswith("http://127.0.0.1:")
            assert len(cluster.client.scheduler_info()["workers"]) == 2
            assert "running at tls://127.0.0.1:" in repr(cluster)
            with GPUExecutor(client=cluster, status=False) as ex:
                out, _ = ex(list(range(10)), square, None)
                assert out == {"sum": sum(x * x for x in range(10)), "items": 10}
                assert {r.worker for r in ex.report.processing.runs} <= {"cpu-0", "cpu-1"}
            # the executor let go; the cluster's own holder keeps it up
            assert cluster.client.status == "running"
            client = cluster.client
    assert client.status in ("closed", "closing")
    assert cluster.spec not in planning.running_specs()
    with pytest.raises(ValueError, match="gpu_backend"):
        GPUCluster(gpu_backend="hip")


def test_an_executor_leaving_early_leaves_another_executors_run_on_the_cluster_alone():
    """Two threads, each running an executor on one shared cluster: the one that leaves
    its ``with`` block first does not stop the cluster under the other's run; the last
    one to leave closes it."""
    cluster = GPUCluster(cpu_workers=2, dashboard_address="127.0.0.1:0", allowed_failures=4)
    spec = cluster.spec
    results, errors, left = {}, [], {}

    def run(name, fn, n, priority=0):
        try:
            with GPUExecutor(client=cluster, status=False, priority=priority) as ex:
                results[name] = ex(list(range(n)), fn, None)[0]
            left[name] = time.monotonic()
        except BaseException as err:  # noqa: BLE001 - reported by the assertion below
            errors.append(err)

    slow = threading.Thread(target=run, args=("slow", sleepy, 16))
    with contextlib.redirect_stdout(io.StringIO()):
        slow.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until its tasks run (16 x 0.5 s on 2 workers)
            if planning.holders(spec) and any(
                    planning.shared_client(spec, announce=None).processing().values()):
                break
            time.sleep(0.05)
        # ahead of the slow run's queued tasks: it ends, and leaves, while they still run
        quick = threading.Thread(target=run, args=("quick", square, 4, 10))
        quick.start()
        quick.join()
        slow.join()
    assert errors == []
    assert left["quick"] < left["slow"]
    assert results["quick"]["items"] == 4
    assert results["slow"] == {"sum": sum(x * x for x in range(16)), "items": 16}
    assert spec not in planning.running_specs()  # the last holder closed it


# ------------------------------------------------------------ the backend on the worker
class _AMDDevice:
    vendor = "amd"


def test_a_gpu_worker_chooses_its_backend_from_its_own_devices_vendor(monkeypatch):
    """On a user's cluster the executor names no GPU backend: each GPU worker takes its
    own device's vendor's, here an AMD device faked in the (in-process) workers, so the
    chunks run under "hip" (a recording stand-in for the HIP engine)."""
    from distributed import Client, Scheduler, SpecCluster, Worker

    import gpuexec.kernels as gk
    from gpuexec import gpu_cluster
    from gpuexec.kernels import dispatch

    monkeypatch.setattr(gpu_cluster, "_visible_devices", lambda: (_AMDDevice(),))
    monkeypatch.setitem(dispatch._instances, "hip", gk.get_backend("cpu"))
    chosen = []
    using = gk.using

    def recording(backend):
        chosen.append(backend)
        return using(backend)

    monkeypatch.setattr(gk, "using", recording)
    cluster = SpecCluster(
        scheduler={"cls": Scheduler, "options": {"dashboard_address": "127.0.0.1:0",
                                                 "host": "127.0.0.1"}},
        workers={"cpu": {"cls": Worker, "options": {"nthreads": 1, "resources": {"CPU": 1}}},
                 "gpu": {"cls": Worker, "options": {"nthreads": 1, "resources": {"GPU": 1}}}})
    client = Client(cluster, set_as_default=False)
    try:
        ex = GPUExecutor(client=client, status=False, calibration=None)
        assert ex._pools(client)["gpu"].backend == "auto"  # nothing chosen on the client
        with dask.config.set({"gpuexec.placement.probe": 2}):
            out = runner(ex, chunksize=10)({"DY": [DY]}, DimuonProcessor(), treename="Events")
        call = ex.report.processing
        assert call.processed == 40 and call.pools.get("gpu", 0) >= 1, call.pools
        assert "hip" in chosen and "cuda" not in chosen and "auto" not in chosen
        assert ex.nvcomp_on_gpu_workers is False  # not an NVIDIA device: not warned of
        assert out["DY"]["entries"] == 40
    finally:
        client.close()
        cluster.close()
