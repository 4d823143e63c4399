"""gpuexec's page on the Dask dashboard, without a browser: the scheduler plugin fed by
workers' and clients' events, ``/gpuexec/json`` and ``/gpuexec`` on the scheduler's own
HTTP server, loaded by ``--preload gpuexec.dashboard`` or registered by a client."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
from distributed import Client, LocalCluster

from gpuexec.dashboard import GPUExecPlugin

pytestmark = pytest.mark.slow


def _get(cluster, path):
    base = f"http://127.0.0.1:{cluster.scheduler.http_server.port}"
    with urllib.request.urlopen(base + path, timeout=10) as response:
        return response.status, response.read().decode()


def _feed(dask_worker):
    for events in (100, 250):
        dask_worker.log_event("gpuexec", {
            "kind": "chunk", "worker": dask_worker.address, "pool": "cpu", "device": "CPU",
            "events": events, "seconds": 0.1, "kernels": {"reductions[cpu]": 0.02}})


def _json_when(cluster, ready, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        data = json.loads(_get(cluster, "/gpuexec/json")[1])
        if ready(data) or time.monotonic() > deadline:
            return data
        time.sleep(0.05)


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address="127.0.0.1:0",
                      scheduler_kwargs={"preload": ["gpuexec.dashboard"]}) as cluster:
        yield cluster


def test_preloaded_page_counts_what_the_workers_report(cluster):
    with Client(cluster) as client:
        client.run(_feed)
        client.log_event("gpuexec", {"kind": "call", "decisions": [
            {"chunk": 0, "events": 350, "pool": "cpu", "predicted_seconds": 0.2,
             "actual_seconds": 0.25}], "crossover": 5000.0,
            "skipped": ["f.root skipped"], "reruns": [], "fallbacks": ["x: gpu -> cpu"]})
        data = _json_when(cluster, lambda d: d["counts"]["calls"] == 1
                          and sum(r["chunks"] for r in d["workers"]) == 4)
        workers = sorted(client.scheduler_info()["workers"])
    assert [(r["worker"], r["pool"], r["chunks"], r["events"]) for r in data["workers"]] == [
        (w, "cpu", 2, 350) for w in workers]
    assert data["kernel_seconds"] == pytest.approx({"reductions[cpu] CPU": 0.08})
    assert sum(sum(v) for p, v in data["throughput"].items() if p != "t") > 0
    assert data["placement"]["crossover"] == 5000.0
    assert (data["counts"]["skipped"], data["counts"]["fallbacks"]) == (1, 1)
    status, page = _get(cluster, "/gpuexec")
    assert status == 200 and "bokeh" in page.lower()


def test_a_client_registers_the_page_on_a_running_scheduler():
    with LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0") as cluster, \
            Client(cluster) as client:
        with pytest.raises(urllib.error.HTTPError):
            _get(cluster, "/gpuexec/json")
        client.register_plugin(GPUExecPlugin())
        client.run(_feed)
        data = _json_when(cluster, lambda d: d["workers"])
        assert data["workers"][0]["events"] == 350
        client.unregister_scheduler_plugin(GPUExecPlugin.name)
        with pytest.raises(urllib.error.HTTPError, match="404"):
            _get(cluster, "/gpuexec/json")
