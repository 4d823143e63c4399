"""On a GPU host: /gpuexec/json names the card of each GPU worker (model and arch)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
import urllib.request

import dask
from coffea import processor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from examples.adl import make  # noqa: E402
from gpuexec import GPUCluster  # noqa: E402
from gpuexec.executor import GPUExecutor  # noqa: E402

SAMPLE = os.path.join(ROOT, "data", "samples", "nano_tt_v15.root")


def test_gpu_rows_name_the_card():
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    cluster = GPUCluster(gpu_workers=1, cpu_workers=1, dashboard_address="127.0.0.1:0")
    executor = GPUExecutor(client=cluster, status=False)
    try:
        # every pool gets chunks first, whatever the models say: the GPU worker runs some
        with contextlib.redirect_stdout(io.StringIO()), \
                dask.config.set({"gpuexec.placement.probe": 2}):
            runner = processor.Runner(executor=executor, chunksize=50, metadata_cache={})
            out = runner({"tt": [SAMPLE]}, make(6), treename="Events")
        assert out["n_events"] == 200
        url = executor.dashboard_link.rsplit("/", 1)[0] + "/gpuexec/json"
        deadline = time.monotonic() + 20
        while True:
            data = json.loads(urllib.request.urlopen(url, timeout=10).read())
            gpu_rows = [r for r in data["workers"] if r["pool"] == "gpu"]
            if gpu_rows and sum(r["chunks"] for r in data["workers"]) >= 4 \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        executor.close()
        cluster.close()
    assert gpu_rows, data["workers"]
    for row in gpu_rows:
        assert name in row["device"], row
        assert "(sm_" in row["device"] or "(gfx" in row["device"], row
    assert any(k.endswith(row["device"]) and "[cuda]" in k or "[hip]" in k
               for k in data["kernel_seconds"] for row in gpu_rows), data["kernel_seconds"]
