"""The /gpuexec page in a real browser: a run on a local cluster (one CPU worker and a
GPU pool of one worker on the CPU engine), the page opened in headless Chromium, the
counts read from its DOM and compared with ``executor.report`` worker by worker.

``GPUEXEC_SCREENSHOT=docs/images/dashboard.png`` also writes the screenshot there (it is
always written under the test's tmp_path)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections import Counter
from pathlib import Path

import dask
import pytest
from coffea import processor

from browser import DEEP_QUERY, FIGURES_DRAWN, chromium, wait_for
from gpuexec.dashboard import GPUExecPlugin
from gpuexec import GPUCluster
from gpuexec.executor import GPUExecutor
from test_executor import DIMUON, DY

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from examples.adl import make  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

ROWS = """
return Array.from(arguments[0]).map((tr) => ({name: tr.dataset.name, pool: tr.dataset.pool,
  chunks: Number(tr.dataset.chunks), events: Number(tr.dataset.events),
  device: tr.querySelector('.device').textContent}));
"""
LABEL = """
const note = document.createElement('div');
note.textContent = arguments[0];
note.style = 'position:fixed;top:6px;right:12px;padding:4px 8px;background:#fffbe6;' +
  'border:1px solid #d4b106;font:13px sans-serif;z-index:1000';
document.body.appendChild(note);
"""


def _rows(driver):
    return driver.execute_script(ROWS, driver.execute_script(DEEP_QUERY, "tr.gpuexec-worker"))


def test_page_shows_the_counts_of_the_report_per_worker(tmp_path):
    # a plan of its own (allowed_failures): equal plans share processes, and their counts
    cluster = GPUCluster(gpu_backend="cpu", gpu_workers=1, gpu_threads=1, cpu_workers=1,
                         threads_per_worker=1, dashboard_address="127.0.0.1:0",
                         allowed_failures=11)
    executor = GPUExecutor(client=cluster, status=False, calibration=None)
    with contextlib.redirect_stdout(io.StringIO()):
        client = cluster.client
    try:
        runner = processor.Runner(executor=executor, chunksize=10, metadata_cache={})
        # both pools get counted chunks: probes first, and no copy of a slow CPU probe
        # chunk on the idle GPU pool (the copy could count instead)
        with dask.config.set({"gpuexec.placement.probe": 2, "gpuexec.placement.backups": None}):
            out = runner({"DY": [DY], "DIMUON": [DIMUON]}, make(6), treename="Events")
        report = executor.report.processing
        assert out["n_events"] == 80 and report.processed == 80
        want = {}
        for run in report.runs:
            w = want.setdefault(run.worker, {"pool": run.pool, "chunks": 0, "events": 0})
            w["chunks"] += 1
            w["events"] += run.units
        assert set(Counter(run.pool for run in report.runs)) == {"cpu", "gpu"}

        assert executor.dashboard_link == cluster.dashboard_link == client.dashboard_link
        page = executor.dashboard_link.rsplit("/", 1)[0] + "/gpuexec"
        with chromium() as driver:
            driver.get(page)
            drawn = wait_for(driver, FIGURES_DRAWN, lambda n: n >= 4)
            rows = wait_for(driver, ROWS, lambda r: sum(x["chunks"] for x in r) >= len(report.runs),
                            30.0, driver.execute_script(DEEP_QUERY, "tr.gpuexec-worker"))
            rows = _rows(driver)
            driver.execute_script(LABEL, "CPU-backed GPU pool (gpu_backend='cpu'): "
                                         "ADL Q6, 80 events, a 2-core x86 machine")
            shot = tmp_path / "dashboard.png"
            driver.save_screenshot(str(shot))
            if os.environ.get("GPUEXEC_SCREENSHOT"):
                driver.save_screenshot(os.environ["GPUEXEC_SCREENSHOT"])

            # the page's numbers come from the plugin alone: without it, no rows
            client.unregister_scheduler_plugin(GPUExecPlugin.name)
            driver.get(page)
            missing = wait_for(driver, FIGURES_DRAWN, lambda n: n >= 4)
            gone = _rows(driver)
            note = [e.text for e in driver.execute_script(DEEP_QUERY, "#gpuexec-missing")]
    finally:
        client.register_plugin(GPUExecPlugin())  # for the next test on this cluster
        executor.close()
        cluster.close()
    assert drawn >= 4 and shot.stat().st_size > 10_000
    got = {r["name"]: {"pool": r["pool"], "chunks": r["chunks"], "events": r["events"]}
           for r in rows}
    assert got == want
    assert all(r["device"].startswith("CPU") for r in rows)  # a CPU-backed GPU pool
    assert missing >= 4 and gone == [] and note and "not registered" in note[0]
