"""NVIDIA MPS for GPU pools sharing a device (gpuexec/scheduler/mps.py), against a
stand-in ``nvidia-cuda-mps-control`` that keeps its state in its pipe directory: the
start, join and quit protocol, and the embedded cluster's and executor's use of it. The
real daemon runs in tests/gpu/test_gpu_executor.py on the H200."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from gpuexec import GPUCluster, GPUExecutor
from gpuexec.scheduler import mps
from gpuexec.scheduler.cluster import ClusterSpec

# The stand-in: "-d" marks the pipe directory as served (unless told to fail); on stdin,
# get_server_list answers 0 where a daemon serves, quit unmarks it. Every call is logged.
FAKE = """#!{python}
import os, sys
pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", {default!r})
log = {log!r}
marker = os.path.join(pipe, "served")
if sys.argv[1:] == ["-d"]:
    with open(log, "a") as f:
        f.write("start " + pipe + "\\n")
    if os.environ.get("FAKE_MPS_FAIL"):
        print("cannot start: no device", file=sys.stderr)
        sys.exit(1)
    os.makedirs(pipe, exist_ok=True)
    open(marker, "w").close()
    sys.exit(0)
command = sys.stdin.read().strip()
with open(log, "a") as f:
    f.write(command + " " + pipe + "\\n")
if not os.path.exists(marker):
    print("Cannot find MPS control daemon process", file=sys.stderr)
    sys.exit(1)
if command == "quit":
    os.remove(marker)
sys.exit(0)
"""


@pytest.fixture
def fake_control(tmp_path, monkeypatch):
    """Put the stand-in first on PATH; returns (its call log, its default pipe dir)."""
    bin_dir, default = tmp_path / "bin", tmp_path / "default-pipe"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    log.touch()
    program = bin_dir / mps.CONTROL
    program.write_text(FAKE.format(python=sys.executable, default=str(default), log=str(log)))
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv(mps.PIPE_VARIABLE, raising=False)
    monkeypatch.delenv("FAKE_MPS_FAIL", raising=False)
    return log, default


def calls(log) -> list[str]:
    return [line.split()[0] for line in log.read_text().splitlines()]


def test_start_runs_a_private_daemon_and_stop_quits_it(fake_control):
    log, _ = fake_control
    daemon = mps.start()
    assert daemon.owned and os.path.basename(daemon.pipe_dir).startswith("gpuexec-mps-")
    env = daemon.client_env()
    assert env[mps.PIPE_VARIABLE] == daemon.pipe_dir and os.path.isdir(env[mps.LOG_VARIABLE])
    assert calls(log) == ["get_server_list", "start", "get_server_list"]  # asked, started, checked
    assert mps.running(dict(os.environ, **env))
    daemon.stop()
    assert calls(log)[-1] == "quit" and not os.path.exists(daemon.pipe_dir)
    daemon.stop()  # once only
    assert calls(log).count("quit") == 1


def test_a_running_daemon_is_joined_and_left_running(fake_control):
    log, default = fake_control
    default.mkdir()
    (default / "served").touch()  # e.g. started by the job script
    daemon = mps.start()
    assert not daemon.owned and daemon.client_env() == {}
    assert "already running" in daemon.describe()
    daemon.stop()
    assert "quit" not in calls(log) and (default / "served").exists()


def test_missing_or_failing_daemon_is_a_clear_error(fake_control, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_FAIL", "1")
    with pytest.raises(mps.MPSError, match="did not start.*no device"):
        mps.start()
    monkeypatch.setenv("PATH", "/nonexistent")
    assert not mps.available() and not mps.running()
    with pytest.raises(mps.MPSError, match="nvidia-cuda-mps-control is not on PATH"):
        mps.start()


def test_gpu_workers_get_the_daemons_pipe_directory():
    envs = [{"CUDA_VISIBLE_DEVICES": "GPU-a"}] * 2
    spec = ClusterSpec.local(1, 1, gpu_envs=envs, gpu_threads=1, gpu_sharing="mps")
    assert "NVIDIA MPS" in spec.describe()
    workers = spec.worker_specs({mps.PIPE_VARIABLE: "/tmp/p"})
    assert workers["gpu-1"]["options"]["env"][mps.PIPE_VARIABLE] == "/tmp/p"
    assert workers["gpu-1"]["options"]["env"]["CUDA_VISIBLE_DEVICES"] == "GPU-a"
    assert mps.PIPE_VARIABLE not in workers["cpu-0"]["options"]["env"]
    # no GPU pool, nothing to share
    assert ClusterSpec.local(1, 1, gpu_sharing="mps").gpu_sharing == "none"
    with pytest.raises(ValueError, match="gpu_sharing"):
        ClusterSpec.local(1, 1, gpu_envs=envs, gpu_sharing="yes")


class _Device:
    def __init__(self, pin, vendor="nvidia"):
        self.pin, self.vendor = pin, vendor

    def pin_env(self):
        return {"CUDA_VISIBLE_DEVICES": self.pin}


def _sharing(monkeypatch, devices, **kwargs) -> str:
    from gpuexec import gpu_cluster

    monkeypatch.setattr(gpu_cluster, "_visible_devices", lambda: tuple(devices))
    return GPUExecutor(client=GPUCluster(cpu_workers=1, **kwargs)).cluster_spec().gpu_sharing


def test_auto_uses_mps_where_workers_share_an_nvidia_device(fake_control, monkeypatch):
    one, two = [_Device("GPU-a")], [_Device("GPU-a"), _Device("GPU-b")]
    assert _sharing(monkeypatch, one, gpu_workers=4) == "mps"
    assert _sharing(monkeypatch, two, gpu_workers=2) == "none"  # one worker per device
    assert _sharing(monkeypatch, two, gpu_workers=2, gpu_share="mps") == "mps"
    assert _sharing(monkeypatch, one, gpu_workers=4, gpu_share="none") == "none"
    assert _sharing(monkeypatch, one, gpu_workers=4, gpu_backend="cpu") == "none"
    with pytest.raises(ValueError, match="NVIDIA's"):
        _sharing(monkeypatch, [_Device("GPU-a", "amd")] * 1, gpu_workers=2, gpu_share="mps")
    with pytest.raises(ValueError, match="gpu_share"):
        GPUCluster(gpu_share="always")


def test_auto_without_the_control_program_warns_once(monkeypatch):
    from gpuexec import gpu_cluster

    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(gpu_cluster, "_said", set())
    with pytest.warns(RuntimeWarning, match="without MPS"):
        assert _sharing(monkeypatch, [_Device("GPU-a")], gpu_workers=3) == "none"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _sharing(monkeypatch, [_Device("GPU-a")], gpu_workers=3)


def test_the_embedded_cluster_starts_and_quits_its_daemon(fake_control, monkeypatch):
    """A cluster with MPS: the daemon runs before its workers and is quit after them;
    a cluster that fails to start leaves no daemon behind."""
    from gpuexec.scheduler import cluster as cluster_module

    log, _ = fake_control
    started = {}

    def fake_start_cluster(spec, gpu_env=None):
        started["env"] = gpu_env
        raise RuntimeError("no workers today")

    monkeypatch.setattr(cluster_module, "start_cluster", fake_start_cluster)
    spec = ClusterSpec.local(0, 1, gpu_envs=[{"CUDA_VISIBLE_DEVICES": "GPU-a"}] * 2,
                             gpu_threads=1, gpu_backend="cpu", gpu_sharing="mps")
    with pytest.raises(RuntimeError, match="no workers today"):
        cluster_module.shared_client(spec, announce=None)
    assert started["env"][mps.PIPE_VARIABLE].startswith(os.path.join(os.path.dirname(
        started["env"][mps.PIPE_VARIABLE]), "gpuexec-mps-"))
    assert calls(log)[-1] == "quit" and not os.path.exists(started["env"][mps.PIPE_VARIABLE])


def test_gpu_workers_of_a_running_cluster_see_the_daemon(fake_control):
    from gpuexec.scheduler.cluster import close_shared, shared_client

    log, _ = fake_control
    spec = ClusterSpec.local(1, 1, gpu_envs=[{"GPUEXEC_DEVICE": "cpu-0"}] * 2, gpu_threads=1,
                             gpu_backend="cpu", gpu_sharing="mps",
                             dashboard_address="127.0.0.1:0")
    said = []
    try:
        client = shared_client(spec, announce=said.append)
        seen = client.run(lambda: os.environ.get(mps.PIPE_VARIABLE))
    finally:
        close_shared(spec)
    pipes = {name: value for name, value in seen.items()}
    gpu = [v for v in pipes.values() if v]
    assert len(gpu) == 2 and len(set(gpu)) == 1 and len(pipes) == 3  # not the CPU worker
    assert any("NVIDIA MPS (started by gpuexec" in s for s in said)
    assert calls(log)[-1] == "quit" and not os.path.exists(gpu[0])


def _default_pools(monkeypatch, devices, cores=16, **kwargs) -> dict:
    from gpuexec import gpu_cluster
    from gpuexec.scheduler import devices as devices_module

    monkeypatch.setattr(gpu_cluster, "_visible_devices", lambda: tuple(devices))
    monkeypatch.setattr(devices_module, "available_cores", lambda: list(range(cores)))
    spec = GPUExecutor(client=GPUCluster(**kwargs)).cluster_spec()
    return {p.name: (p.workers, p.threads) for p in spec.pools} | {"sharing": spec.gpu_sharing}


def test_default_pools_put_several_gpu_workers_on_a_device_only_with_mps(fake_control,
                                                                        monkeypatch):
    one = [_Device("GPU-a")]
    # MPS available: 7/8 of the cores drive the GPU, one thread each; the rest CPU workers
    assert _default_pools(monkeypatch, one) == {"gpu": (14, 1), "cpu": (2, 1), "sharing": "mps"}
    assert _default_pools(monkeypatch, [_Device("GPU-a"), _Device("GPU-b")], cores=64) \
        == {"gpu": (56, 1), "cpu": (8, 1), "sharing": "mps"}
    # told not to share, or an AMD device (not measured): one worker per device, 2 threads
    assert _default_pools(monkeypatch, one, gpu_share="none") \
        == {"gpu": (1, 2), "cpu": (14, 1), "sharing": "none"}
    assert _default_pools(monkeypatch, [_Device("GPU-a", "amd")]) \
        == {"gpu": (1, 2), "cpu": (14, 1), "sharing": "none"}
    # explicit settings win
    assert _default_pools(monkeypatch, one, gpu_workers=6, gpu_threads=2)["gpu"] == (6, 2)
    monkeypatch.setenv("PATH", "/nonexistent")  # no MPS on this machine
    assert _default_pools(monkeypatch, one) == {"gpu": (1, 2), "cpu": (14, 1), "sharing": "none"}


def test_clusters_of_one_process_share_one_daemon(fake_control):
    from gpuexec.scheduler.cluster import close_shared, shared_client

    log, _ = fake_control
    specs = [ClusterSpec.local(0, 1, gpu_envs=[{"GPUEXEC_DEVICE": "cpu-0"}] * n, gpu_threads=1,
                               gpu_backend="cpu", gpu_sharing="mps",
                               dashboard_address="127.0.0.1:0") for n in (2, 3)]
    pipes = []
    try:
        for spec in specs:
            client = shared_client(spec, announce=None)
            pipes += client.run(lambda: os.environ.get(mps.PIPE_VARIABLE)).values()
        assert len(set(pipes)) == 1 and calls(log).count("start") == 1
        close_shared(specs[0])
        assert "quit" not in calls(log)  # the other cluster's workers still use it
    finally:
        for spec in specs:
            close_shared(spec)
    assert calls(log).count("quit") == 1 and not os.path.exists(pipes[0])


def test_auto_falls_back_to_one_gpu_worker_per_device_when_the_daemon_fails(
        fake_control, monkeypatch):
    """gpu_share="auto" on a host whose MPS daemon does not start (e.g. a GPU in exclusive
    mode): a warning, and the pools of a host without MPS; "mps" raises."""
    from gpuexec import gpu_cluster
    from gpuexec.scheduler import devices as devices_module

    monkeypatch.setenv("FAKE_MPS_FAIL", "1")
    # a pretend NVIDIA device: its workers' warm-up fails (logged), the cluster starts
    monkeypatch.setattr(gpu_cluster, "_visible_devices", lambda: (_Device("GPU-a"),))
    monkeypatch.setattr(devices_module, "available_cores", lambda: list(range(4)))
    ex = GPUExecutor(client=GPUCluster(cpu_workers=1, dashboard_address="127.0.0.1:0"),
                     status=False)
    assert ex.cluster_spec().gpu_sharing == "mps"
    try:
        with pytest.warns(RuntimeWarning, match="did not start.*without MPS"):
            client, _ = ex._connect()
        spec = ex.cluster_spec()
        assert spec.gpu_sharing == "none" and spec.pools[0].workers == 1
        assert ex.copy().cluster_spec() == spec  # copies share what was learned
        assert len(client.scheduler_info()["workers"]) == 2
    finally:
        ex.close()
    with pytest.raises(mps.MPSError, match="did not start"):
        GPUExecutor(client=GPUCluster(cpu_workers=1, gpu_share="mps",
                                      dashboard_address="127.0.0.1:0"))._connect()
