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
