"""The NVIDIA and Frontier job scripts as ``gpuexec deploy slurm`` renders them, submitted
with ``sbatch --wait`` to a one-node Slurm (.ci/slurm/setup.sh: fake GPUs as gres) from a
wheel installed outside the checkout. Fake-GPU mode: GPU workers of a faked vendor run
the GPU pool's tasks on CPU kernels (``--gpu-backend cpu``). Skipped where no Slurm is up."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "samples" / "nano_tt_v15.root"
SLURM_TOOLS = ("srun", "slurmstepd", "sbatch")


def _slurm_up() -> bool:
    if shutil.which("sbatch") is None:
        return False
    done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    return done.returncode == 0 and any(s in done.stdout for s in ("idle", "mix", "alloc"))


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not _slurm_up(), reason="no Slurm up (.ci/slurm/setup.sh "
                                 "starts one as root)")]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """gpuexec from a wheel, in a folder outside the checkout (PYTHONPATH), run by this
    interpreter (its site-packages hold the dependencies)."""
    base = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(base / "dist"), str(ROOT)], check=True, cwd=base)
    wheel = next((base / "dist").glob("gpuexec-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(base / "site"), str(wheel)], check=True, cwd=base)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PYTHON"))}
    env.update(PYTHONPATH=str(base / "site"), GPUEXEC_PYTHON=sys.executable,
               PATH=f"{base / 'site' / 'bin'}:{env['PATH']}",
               NUMBA_CACHE_DIR=str(base / "numba"))
    where = subprocess.run([sys.executable, "-c", "import gpuexec; print(gpuexec.__file__)"],
                           env=env, cwd=base, capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(base / "site"))
    return base, env


def _local_output(query: int):
    from coffea import processor
    from coffea.nanoevents import NanoAODSchema

    from gpuexec.adl import make

    runner = processor.Runner(executor=processor.IterativeExecutor(), schema=NanoAODSchema,
                              chunksize=100_000)
    return runner({"tt": [str(SAMPLE)]}, make(query), treename="Events")


def _submit(installed, site: str, fake: str, query: int):
    base, env = installed
    jobdir = base / site
    jobdir.mkdir()
    (jobdir / "fileset.json").write_text(json.dumps({"tt": [str(SAMPLE)]}))
    script = jobdir / "job.sh"
    subprocess.run([sys.executable, "-m", "gpuexec", "deploy", "slurm", "--site", site,
                    "--nodes", "1", "--account", "ci", "--time", "00:10:00", "--partition",
                    "gpu", "--gpus-per-node", "1", "--cores-per-gpu", "2", "--gpu-threads", "1",
                    "--listen-host", "127.0.0.1", "--fake-gpu", fake, "--query", str(query),
                    "--fileset", str(jobdir / "fileset.json"), "-o", str(script)],
                   env=env, cwd=jobdir, check=True)
    env = dict(env, GPUEXEC_RUN_DIR=str(jobdir / "runs"))
    env["BASH_FUNC_module%%"] = '() {  echo "module $*" >> "$SLURM_SUBMIT_DIR/modules.log"; }'
    t0 = time.monotonic()
    job = subprocess.Popen(["sbatch", "--wait", "--parsable", str(script), "--gpu-backend",
                            "cpu"], env=env, cwd=jobdir, stdout=subprocess.PIPE, text=True)
    job_id = job.stdout.readline().strip().split(";")[0]
    listening = _watch_sockets(job, job_id)
    assert job.wait(timeout=400) == 0, (jobdir / "runs").glob("*/*.log")
    seconds = time.monotonic() - t0
    (run,) = (jobdir / "runs").iterdir()
    out = next(jobdir.glob("gpuexec-*.out")).read_text()
    return jobdir, run, out, listening, seconds


def _watch_sockets(job, job_id: str) -> set:
    """The listening sockets of the job's processes while it runs (psutil)."""
    import psutil

    seen = set()
    while job.poll() is None:
        for conn in psutil.net_connections(kind="inet"):
            if conn.status != psutil.CONN_LISTEN or conn.pid is None:
                continue
            try:
                proc = psutil.Process(conn.pid)
                ours = proc.environ().get("SLURM_JOB_ID") == job_id
                name = proc.name()
            except psutil.Error:
                continue
            if ours and not name.startswith(SLURM_TOOLS):  # srun, slurmstepd: Slurm I/O
                seen.add((conn.laddr.ip, conn.laddr.port))
        time.sleep(0.5)
    return seen


def _check_private(run: Path):
    for path in [run, *run.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


@pytest.mark.parametrize("site, fake, backend, query", [
    ("nvidia", "nvidia:sm_90", "cuda", 1),
    ("frontier", "amd:gfx90a", "hip", 6),
])
def test_a_rendered_job_runs_an_adl_query_like_a_local_run(installed, site, fake, backend, query):
    jobdir, run, out, listening, seconds = _submit(installed, site, fake, query)
    print(f"{site} job: {seconds:.0f} s")
    result = pickle.loads((run / "output.pkl").read_bytes())
    local = _local_output(query)
    assert result["output"]["n_events"] == local["n_events"] == 200
    assert result["processed"] == 200 and result["skipped"] == []
    assert result["output"]["hists"] == local["hists"]
    gpu = {n: w for n, w in result["workers"].items() if "GPU" in w["resources"]}
    cpu = {n: w for n, w in result["workers"].items() if "CPU" in w["resources"]}
    assert len(gpu) == 1 and len(cpu) == 1
    (g,) = gpu.values()
    assert g["backend"] == backend  # chosen on the worker from its (faked) vendor
    pin = "ROCR_VISIBLE_DEVICES" if backend == "hip" else "CUDA_VISIBLE_DEVICES"
    assert g["env"][pin] == g["env"]["SLURM_STEP_GPUS"]  # the GPU Slurm gave the task
    assert g["env"]["NUMBA_NUM_THREADS"] == "1" and len(g["cores"]) == 1
    assert all(w["address"].startswith("tls://") for w in result["workers"].values())
    info = json.loads((run / "scheduler.json").read_text())
    assert info["address"].startswith("tls://127.0.0.1:")
    port = info["dashboard_port"]
    assert f"ssh -J frontier.olcf.ornl.gov -L {port}:127.0.0.1:{port} " in out or site != "frontier"
    assert f"-L {port}:127.0.0.1:{port}" in out
    assert listening and {ip for ip, _ in listening} == {"127.0.0.1"}
    assert ("127.0.0.1", port) in listening
    _check_private(run)
    if site == "frontier":
        assert (jobdir / "modules.log").read_text() == "module load PrgEnv-gnu rocm\n"


def test_the_lumi_script_carries_the_sites_directives(installed):
    """LUMI's CPU masks need 64 cores: its script is rendered and read line by line."""
    base, env = installed
    text = subprocess.run([sys.executable, "-m", "gpuexec", "deploy", "slurm", "--site", "lumi",
                           "--nodes", "2", "--account", "project_465000000", "--time",
                           "01:00:00", "--qos", "normal"], env=env, cwd=base, check=True,
                          capture_output=True, text=True).stdout
    directives = [line.split(None, 1)[1] for line in text.splitlines()
                  if line.startswith("#SBATCH ")]
    assert directives == ["--job-name=gpuexec", "--account=project_465000000", "--nodes=2",
                          "--time=01:00:00", "--output=gpuexec-%j.out", "--ntasks-per-node=8",
                          "--gpus-per-node=8", "--partition=standard-g", "--qos=normal"]
    assert "module load LUMI partition/G rocm" in text
    masks = ("fe000000000000,fe00000000000000,fe0000,fe000000,fe,fe00,fe00000000,"
             "fe0000000000")
    assert f"--ntasks-per-node=8 --cpu-bind=mask_cpu:{masks}" in text
    assert "--interface hsn0" in text and "--login lumi.csc.fi" in text
    assert "--wait-plans $((SLURM_NNODES * 8))" in text
    done = subprocess.run(["bash", "-n"], input=text, text=True)
    assert done.returncode == 0
