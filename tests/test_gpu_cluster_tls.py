"""``GPUCluster(security=True)``: scheduler, workers and clients on ``tls://127.0.0.1``
with credentials of that cluster alone; the executor, ``cluster.client`` and the
dashboard (HTTP on 127.0.0.1) work as with plain TCP; other clients are refused."""

from __future__ import annotations

import pytest

from gpuexec import GPUCluster, GPUExecutor


def one(_item):
    return {"n": 1}


def test_a_tls_cluster_serves_the_executor_and_refuses_others():
    """The default: a cluster of its own credentials, refusing plain and foreign clients."""
    from distributed import Client
    from distributed.security import Security

    with GPUCluster(cpu_workers=1, gpu_workers=0, dashboard_address="127.0.0.1:0") as cluster:
        assert cluster.scheduler_address.startswith("tls://127.0.0.1:")
        assert cluster.dashboard_link.startswith("http://127.0.0.1:")
        assert all(a.startswith("tls://127.0.0.1:")
                   for a in cluster.client.scheduler_info()["workers"])
        executor = GPUExecutor(client=cluster, status=False)
        out, _ = executor(list(range(5)), one, None)
        executor.close()
        assert out == {"n": 5}
        address = cluster.scheduler_address
        with pytest.raises(OSError):
            Client(address.replace("tls://", "tcp://"), timeout=5, set_as_default=False)
        with pytest.raises(OSError, match="TLS certificate does not match"):
            Client(address, security=Security.temporary(), timeout=5, set_as_default=False)


def test_security_takes_booleans_or_a_security():
    with pytest.raises(TypeError, match="security is True, False or a distributed Security"):
        GPUCluster(cpu_workers=1, gpu_workers=0, security="yes")
    assert GPUCluster(cpu_workers=1, gpu_workers=0).spec.security is True
    assert GPUCluster(cpu_workers=1, gpu_workers=0, security=False).spec.security is False


def test_a_restarted_worker_comes_back_however_short_dasks_lost_worker_timeout():
    """Dask's SpecCluster closes the nanny of a worker that left and has not come back
    within distributed.deploy.lost-worker-timeout; the embedded cluster waits
    gpuexec.worker.restart-timeout instead, so a restart slower than Dask's limit (here
    a limit of 0 s) still brings the worker back."""
    import dask

    with dask.config.set({"distributed.deploy.lost-worker-timeout": "0s"}), \
            GPUCluster(cpu_workers=1, gpu_workers=0, dashboard_address="127.0.0.1:0") as cluster:
        client = cluster.client
        (before,) = client.scheduler_info()["workers"]
        client.restart_workers([before], timeout=60)
        client.wait_for_workers(1, timeout=60)
        (after,) = client.scheduler_info()["workers"]
        assert after != before and len(client.cluster.workers) == 1  # its nanny kept
