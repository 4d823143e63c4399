"""The ``gpuexec`` command: clear errors and exit status 2 for bad arguments, missing
files and a dead scheduler; exit status 3 and a summary when chunks were skipped; ``info``,
``run`` and ``deploy slurm`` from a wheel installed outside the checkout (conftest.py's
``installed``); a job's scheduler (``python -m gpuexec.deploy.scheduler`` on 127.0.0.1)
refusing a plain-tcp client and a client holding another job's credentials; a processor
file from another folder running on workers started in yet another one."""

from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuexec import security
from gpuexec.cli import main

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "samples" / "nano_tt_v15.root"
DY = ROOT / "data" / "samples" / "nano_dy.root"

COUNTER = '''
import awkward as ak
from coffea import processor


class Counter(processor.ProcessorABC):
    """Events and muons per dataset: defined in a file that no worker can import."""

    def process(self, events):
        ds = events.metadata["dataset"]
        return {ds: {"events": len(events), "muons": int(ak.sum(ak.num(events.Muon)))}}

    def postprocess(self, accumulator):
        return accumulator


processor = Counter()
'''


def _fileset(folder: Path, files) -> Path:
    path = folder / "fileset.json"
    path.write_text(json.dumps({"tt": [str(f) for f in files]}))
    return path


def _fails(capsys, argv, *needles):
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 2, err
    for needle in needles:
        assert needle in err, err
    return err


# ----------------------------------------------------------------- bad arguments, files
def test_bad_arguments_exit_2_with_usage(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["run"])
    assert exc.value.code == 2
    assert "the following arguments are required: PROCESSOR, FILESET" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["run", "adl:1", "f.json", "--chunksize", "0"])
    assert exc.value.code == 2 and "--chunksize" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["run", "adl:1", "f.json", "--local", "--scheduler-file", "s.json"])
    assert exc.value.code == 2 and "not allowed with" in capsys.readouterr().err
    fileset = _fileset(tmp_path, [SAMPLE])
    _fails(capsys, ["run", "adl:99", str(fileset)], "adl:99", "adl:1 .. adl:")
    _fails(capsys, ["run", "adl:1", str(fileset), "--config", "gpu-merge"],
           "--config 'gpu-merge': expected KEY=VALUE")


def test_a_missing_processor_file_is_named(capsys, tmp_path):
    fileset = _fileset(tmp_path, [SAMPLE])
    _fails(capsys, ["run", str(tmp_path / "nowhere.py"), str(fileset)],
           "gpuexec run: processor file", "nowhere.py does not exist")


def test_a_missing_fileset_file_is_named(capsys, tmp_path):
    _fails(capsys, ["run", "adl:1", str(tmp_path / "nofileset.json")],
           "gpuexec run: fileset", "nofileset.json does not exist")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _fails(capsys, ["run", "adl:1", str(bad)], "bad.json is not JSON")


def test_a_missing_root_file_is_named_before_anything_starts(capsys, tmp_path):
    fileset = _fileset(tmp_path, [SAMPLE, tmp_path / "gone.root"])
    _fails(capsys, ["run", "adl:1", str(fileset)], "ROOT file(s) not found",
           "gone.root (dataset 'tt')", "--skip-bad-files")


def test_an_unreachable_scheduler_fails_fast_and_says_where(capsys, tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run_dir = security.private_dir(tmp_path / "run")
    security.make_credentials(run_dir / "tls")
    (run_dir / "scheduler.json").write_text(json.dumps({"address": f"tls://127.0.0.1:{port}"}))
    fileset = _fileset(tmp_path, [SAMPLE])
    t0 = time.monotonic()
    _fails(capsys, ["run", "adl:1", str(fileset), "--scheduler-file",
                    str(run_dir / "scheduler.json")],
           f"cannot reach the scheduler at tls://127.0.0.1:{port}", "has the job ended?")
    assert time.monotonic() - t0 < 10  # not Dask's retries for --connect-timeout
    _fails(capsys, ["run", "adl:1", str(fileset), "--scheduler-file", str(tmp_path / "no.json")],
           "scheduler file", "no.json does not exist")


def test_skipped_chunks_exit_3_with_a_summary(capsys, tmp_path):
    truncated = tmp_path / "nano_dy_truncated.root"
    data = DY.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    fileset = _fileset(tmp_path, [DY, truncated])
    out = tmp_path / "out.pkl"
    (tmp_path / "counter.py").write_text(COUNTER)
    status = main(["run", str(tmp_path / "counter.py"), str(fileset), "--local",
                   "--skip-bad-files", "--out", str(out)])
    err = capsys.readouterr().err
    assert status == 3, err
    assert "gpuexec run: 1 chunk(s)/file(s) skipped, not in the output:" in err
    assert "nano_dy_truncated.root" in err
    result = pickle.loads(out.read_bytes())
    assert [s for s in result["skipped"] if "nano_dy_truncated.root" in s]
    assert result["output"]["tt"]["events"] == 40  # nano_dy.root's own events still counted


# ----------------------------------------------------------------- from an installed wheel
def _gpuexec(installed, *args, cwd, check=True):
    base, env = installed
    return subprocess.run(["gpuexec", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, check=check, timeout=300)


def test_info_run_and_deploy_work_from_an_installed_wheel(installed, tmp_path):
    base, _ = installed
    info = _gpuexec(installed, "info", cwd=tmp_path)
    assert "gpuexec" in info.stdout and str(base / "site") in info.stdout + info.stderr
    script = _gpuexec(installed, "deploy", "slurm", "--site", "frontier", "--nodes", "2",
                      "--account", "abc123", "--time", "00:30:00", cwd=tmp_path).stdout
    assert "#SBATCH --account=abc123" in script and "module load PrgEnv-gnu rocm" in script
    fileset = _fileset(tmp_path, [SAMPLE])
    out = tmp_path / "q1.pkl"
    done = _gpuexec(installed, "run", "adl:1", str(fileset), "--local", "--out", str(out),
                    "--config", "gpuexec.placement.gpu-merge=4", cwd=tmp_path)
    assert "200 entries" in done.stdout, done.stdout + done.stderr
    result = pickle.loads(out.read_bytes())
    assert result["output"]["n_events"] == 200 and result["skipped"] == []
    from coffea import processor
    from coffea.nanoevents import NanoAODSchema

    from gpuexec.adl import make

    local = processor.Runner(executor=processor.IterativeExecutor(), schema=NanoAODSchema,
                             chunksize=100_000)({"tt": [str(SAMPLE)]}, make(1), treename="Events")
    assert result["output"]["hists"] == local["hists"]


# ----------------------------------------------------------------- a job's scheduler, TLS
def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PYTHON"))}
    return dict(env, PYTHONPATH=str(ROOT))  # gpuexec, not the folders the files are in


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """A job's scheduler started as a job starts it (on 127.0.0.1) and one task's CPU
    workers started by the worker starter, each in a folder of its own."""
    base = tmp_path_factory.mktemp("job")
    run_dir = base / "run"
    (base / "sched").mkdir()
    (base / "workers").mkdir()
    procs = [subprocess.Popen([sys.executable, "-m", "gpuexec.deploy.scheduler", "--run-dir",
                               str(run_dir), "--host", "127.0.0.1"], env=_env(),
                              cwd=base / "sched", stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]
    try:
        for _ in range(120):
            if (run_dir / "scheduler.json").is_file():
                break
            assert procs[0].poll() is None, "the scheduler exited"
            time.sleep(0.5)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "gpuexec.deploy.workers", "--run-dir", str(run_dir),
             "--host", "127.0.0.1", "--no-gpu-worker", "--cpu-threads", "2",
             "--local-directory", str(base / "workers" / "space")],
            env=_env(), cwd=base / "workers", stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL))
        yield run_dir, json.loads((run_dir / "scheduler.json").read_text())["address"]
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            p.wait(timeout=60)


def test_the_jobs_scheduler_refuses_plain_tcp_and_other_credentials(job, tmp_path):
    from distributed import Client

    run_dir, address = job
    assert address.startswith("tls://127.0.0.1:")
    with Client(address, security=security.load(run_dir / "tls"), timeout=30,
                set_as_default=False) as client:  # the job's own credentials are let in
        assert client.scheduler_info()["address"] == address
    with pytest.raises(OSError, match="Connection reset by peer|closed"):
        Client(address.replace("tls://", "tcp://"), timeout=5, set_as_default=False)
    other = security.make_credentials(tmp_path / "other-job" / "tls")
    with pytest.raises(OSError, match="TLS certificate does not match"):
        Client(address, security=other, timeout=5, set_as_default=False)


def test_a_processor_file_from_another_folder_runs_on_the_workers(job, tmp_path, capsys):
    run_dir, _ = job
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "my_counter.py").write_text(COUNTER)
    fileset = _fileset(tmp_path, [SAMPLE])
    out = tmp_path / "out.pkl"
    cwd = os.getcwd()
    os.chdir(tmp_path)  # neither the workers' folder nor the processor's
    try:
        status = main(["run", str(tmp_path / "analysis" / "my_counter.py"), str(fileset),
                       "--scheduler-file", str(run_dir / "scheduler.json"),
                       "--wait-plans", "1", "--wait-timeout", "120", "--out", str(out)])
    finally:
        os.chdir(cwd)
    assert status == 0, capsys.readouterr().err
    result = pickle.loads(out.read_bytes())
    assert result["output"] == {"tt": {"events": 200, "muons": result["output"]["tt"]["muons"]}}
    import awkward as ak
    import uproot

    with uproot.open(SAMPLE) as f:
        muons = int(ak.sum(f["Events"]["nMuon"].array()))
    assert result["output"]["tt"]["muons"] == muons
    workers = result["workers"].values()
    assert workers and all(w["address"].startswith("tls://127.0.0.1:") for w in workers)
    assert {w["cwd"] for w in workers} == {str(run_dir.parent / "workers")}
