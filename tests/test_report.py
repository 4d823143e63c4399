"""The run report's bookkeeping: calls joined into runs, the scheduler's record of
re-runs, and the report saved as files (JSON, HTML) and read back."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest

from gpuexec.scheduler import keys
from gpuexec.scheduler.report import (
    BackupCopy,
    CallReport,
    ChunkRun,
    Fallback,
    Rerun,
    RunReport,
    SkippedChunk,
)


def _preprocessing(*files, skipped=()):
    return CallReport(
        stage="preprocessing", unit="files", chunks=len(files),
        files=frozenset(("DY", f) for f in files),
        skipped=[SkippedChunk("preprocessing", "DY", f, "Events", None, None,
                              "FileNotFoundError: no such file") for f in skipped])


def _processing(*files):
    return CallReport(stage="processing", unit="entries", chunks=len(files),
                      files=frozenset(("DY", f) for f in files))


def test_missing_file_skipped_while_another_file_was_cached_stays_in_the_run():
    """Runner preprocesses only the files its metadata cache lacks: here the missing one,
    skipped, while the processing call reads the cached one."""
    run = RunReport().add(_preprocessing("missing.root", skipped=["missing.root"]))
    joined = run.add(_processing("cached.root"))
    assert joined is run
    assert [s.filename for s in joined.skipped] == ["missing.root"]


def test_unrelated_calls_start_new_runs():
    run = RunReport().add(_preprocessing("a.root"))
    assert run.add(_processing("b.root")) is not run  # a.root was read yet not processed
    run = RunReport().add(_preprocessing("a.root")).add(_processing("a.root"))
    assert run.add(_processing("a.root")) is not run  # the run had its processing call
    failed = _preprocessing("a.root")
    failed.error = "ChunkError: a.root: reading its metadata failed"
    run = RunReport().add(failed)
    assert run.add(_processing("a.root")) is not run and run.error == failed.error


def test_lost_task_is_recorded_once_per_worker_death():
    """The scheduler logs a worker's removal under its address and under "all"; the
    ledger counts the removal once, naming the worker."""
    from distributed import Client, LocalCluster

    from gpuexec.scheduler.plugins import ChunkLedger, ledger_pop

    run = keys.new_run_token()
    key = keys.chunk_key("cpu", run, 0, "DY:f.root[0:20]")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.register_plugin(ChunkLedger())
        victim = sorted(client.scheduler_info()["workers"])[0]
        future = client.submit(time.sleep, 1.0, key=key, workers=[victim],
                               allow_other_workers=True)
        while key not in {str(k) for k in client.processing(workers=[victim])[victim]}:
            threading.Event().wait(0.02)

        async def remove(dask_scheduler, address):
            await dask_scheduler.remove_worker(address=address, stimulus_id="test-remove")

        client.run_on_scheduler(remove, address=victim)
        future.result(timeout=30)
        lost = client.run_on_scheduler(ledger_pop, run)
    assert [tuple(x) for x in lost] == [(key, victim, "assigned to it")]


def _full_report() -> RunReport:
    pre = _preprocessing("a.root", "bad.root", skipped=["bad.root"])
    proc = CallReport(
        stage="processing", unit="entries", chunks=3, expected=300, processed=300,
        files=frozenset({("DY", "a.root")}), seconds=1.5,
        runs=[ChunkRun("DY:a.root[0:100]", "gpu", "tcp://127.0.0.1:1", 100, 0.2, 0.05, 0.01,
                       end=0.4),
              ChunkRun("DY:a.root[100:200]", "cpu", "tcp://127.0.0.1:2", 100, 0.5, 0.1, end=0.9),
              ChunkRun("DY:a.root[200:300]", "cpu", "tcp://127.0.0.1:2", 100, 0.5, 0.1, end=1.4)],
        reruns=[Rerun("DY:a.root[100:200]", "tcp://127.0.0.1:3", "assigned to it")],
        fallbacks=[Fallback("DY:a.root[200:300]", "gpu", "cpu", "CUDARuntimeError")],
        backups=[BackupCopy("DY:a.root[0:100]", "gpu", "cpu", "gpu")],
        placement={"decisions": [{"chunk": 0, "events": 100, "pool": "gpu",
                                  "predicted_seconds": 0.25, "actual_seconds": 0.2}],
                   "summary": {"pools": {}, "crossover": 50.0}})
    return RunReport().add(pre).add(proc)


def test_saved_report_reads_back_equal(tmp_path):
    report = _full_report()
    json_path, html_path = report.save(tmp_path / "out" / "run.json")
    assert (json_path.name, html_path.name) == ("run.json", "run.html")
    data = json.loads(json_path.read_text())
    assert data["processing"]["processed"] == 300 and len(data["processing"]["runs"]) == 3
    back = RunReport.load(json_path)
    assert back == report
    assert str(back) == str(report)


def test_saved_html_is_self_contained(tmp_path):
    """BokehJS inline: no script or stylesheet is fetched from elsewhere."""
    _, html_path = _full_report().save(tmp_path / "run")
    html = html_path.read_text()
    assert "Bokeh" in html and len(html) > 500_000  # the library itself is in the page
    assert re.findall(r"<script[^>]*\bsrc=", html) == []
    assert re.findall(r"<link[^>]*\bhref=", html) == []
    for text in ("events/s", "read", "transfer", "compute", "DY:a.root[100:200]"):
        assert text in html, text


def test_report_cli_prints_a_saved_report(tmp_path, capsys):
    from gpuexec.cli import main

    json_path, _ = _full_report().save(tmp_path / "run")
    assert main(["report", str(json_path)]) == 0
    out = capsys.readouterr().out
    assert "processing: 3 chunk(s) (2 on cpu, 1 on gpu)" in out
    assert "skipped bad.root" in out and "re-ran DY:a.root[100:200]" in out
    for pool in ("cpu", "gpu"):
        assert pool in out
    assert main(["report", str(tmp_path / "absent.json")]) == 2
    assert "absent.json does not exist" in capsys.readouterr().err
