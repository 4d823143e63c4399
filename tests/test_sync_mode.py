"""How GPU workers wait for their device (Dask's ``gpuexec.gpu.sync``): the setting
reaches the GPU workers' environment only, and the kernel runtime applies
``$GPUEXEC_GPU_SYNC`` through its binding table before it opens the device, with a
stand-in table here (tests/gpu/test_gpu_sync.py reads the flag back on the H200)."""

from __future__ import annotations

import pytest

import dask

from gpuexec import GPUCluster, GPUExecutor
from gpuexec.kernels.gpu import runtime


class _Table:
    """The binding-table entries the Runtime's constructor calls, recording the order."""

    VENDOR = "cuda"

    def __init__(self):
        self.calls = []

    def set_sync(self, ordinal, mode):
        self.calls.append(("set_sync", ordinal, mode))

    def init(self, ordinal):
        self.calls.append(("init", ordinal))

    def device_properties(self, ordinal):
        return {"name": "stand-in", "arch": "sm_90", "wave": 32, "cu_count": 1,
                "l2_bytes": 1, "max_shared_per_block": 1}

    def compiler_version(self):
        return "none"


def test_runtime_applies_the_sync_mode_before_it_opens_the_device(monkeypatch, tmp_path):
    table = _Table()
    monkeypatch.delenv(runtime.SYNC_ENV, raising=False)
    runtime.Runtime(table, 0, str(tmp_path))
    assert table.calls == [("init", 0)]  # unset: the driver's default, nothing called
    table = _Table()
    monkeypatch.setenv(runtime.SYNC_ENV, "block")
    runtime.Runtime(table, 1, str(tmp_path))
    assert table.calls == [("set_sync", 1, "block"), ("init", 1)]
    monkeypatch.setenv(runtime.SYNC_ENV, "sleep")
    with pytest.raises(ValueError, match="GPUEXEC_GPU_SYNC"):
        runtime.Runtime(_Table(), 0, str(tmp_path))


def test_gpu_sync_reaches_the_gpu_workers_environment_only():
    def envs(**settings):
        cluster = GPUCluster(gpu_backend="cpu", gpu_workers=2, cpu_workers=1)
        with dask.config.set({f"gpuexec.gpu.{k}": v for k, v in settings.items()}):
            spec = GPUExecutor(client=cluster, status=False).cluster_spec()
        return {name: w["options"]["env"] for name, w in spec.worker_specs().items()}

    blocked = envs(sync="block")
    assert {n: e.get(runtime.SYNC_ENV) for n, e in blocked.items()} == \
        {"gpu-0": "block", "gpu-1": "block", "cpu-0": None}
    assert all(runtime.SYNC_ENV not in e for e in envs().values())  # "auto": unset
