#!/usr/bin/env python3
"""``python -m gpuexec.deploy.workers --run-dir DIR``: start gpuexec's Dask workers for one Slurm task: ``--gpu-workers`` GPU workers (default
one) pinned to the task's GPU (GCD), ``--gpu-threads`` cores each from the first of the
task's cores, and CPU workers on the rest.

The job scripts run this once per GPU (``srun --ntasks-per-node=<GPUs per node>``), so
that Slurm's CPU binding gives each task the cores closest to its GPU:

    python -m gpuexec.deploy.workers --run-dir "$RUN_DIR" --gpu-threads 2

- ``--run-dir``: the job's run directory (``gpuexec.deploy.scheduler`` made it): the
  scheduler file ``scheduler.json``, the TLS credentials ``tls/`` every worker uses, and
  ``plans/``, where this task writes how many workers it starts (the driver waits for
  that many, ``gpuexec run --wait-plans``);
- fake-GPU mode (``GPUEXEC_FAKE_GPU=amd:gfx90a`` or ``nvidia:sm_90`` in the job's
  environment; ``gpuexec.scheduler.devices``): each task's "GPU" is a device of that
  vendor pinned by the variable Slurm set for the task, its GPU workers declare ``GPU=1``
  and see that vendor, and the client runs their kernels with ``gpu_backend="cpu"``. It
  checks a job's layout, pinning and backend choice on nodes without GPUs;

- the task's cores are its CPU affinity (what ``--cpus-per-task``/``--cpu-bind`` gave);
- its GPU is what ``gpuexec.scheduler.devices.discover()`` sees: one device when Slurm
  bound one (``--gpus-per-task=1``), else device ``SLURM_LOCALID`` of those visible (the
  LUMI way: every task sees all eight GCDs and picks its own);
- each GPU worker gets the device's pinning variables (``ROCR_VISIBLE_DEVICES`` +
  ``HIP_VISIBLE_DEVICES`` on AMD, ``CUDA_VISIBLE_DEVICES`` on NVIDIA), declares
  ``GPU=1`` and runs ``--gpu-threads`` threads; CPU workers declare ``CPU=<threads>``;
- ``--mps`` (NVIDIA): the task's GPU workers share the device through an MPS control
  daemon: one already answering (e.g. started for the node by the job script) or one this
  task starts for its own GPU in a private pipe directory and quits when its workers end
  (``gpuexec.scheduler.mps``). Several processes per GPU are what make one GPU busy; on one
  H200 16 of them ran ADL Q8 at 3.2 M events/s without MPS and 13.0 with it
  (docs/executor.md);
- every worker process is bound (``sched_setaffinity``) to its own cores, and its numba
  thread count equals its Dask threads.

``--dry-run`` prints the plan (cores, device, environment, commands) as JSON and starts
nothing. SIGTERM/SIGINT are passed on to the workers; the exit status is the first
non-zero one of the workers.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from gpuexec import security
from gpuexec.scheduler import devices

SCHEDULER_FILE = "scheduler.json"
TLS_DIR = "tls"
PLANS_DIR = "plans"


def default_local_directory() -> str:
    bb = f"/mnt/bb/{os.environ.get('USER', '')}"  # Frontier's node-local NVMe (-C nvme)
    if os.environ.get("USER") and os.path.isdir(bb) and os.access(bb, os.W_OK):
        return os.path.join(bb, "dask-worker-space")
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), f"gpuexec-{os.getuid()}",
                        "dask-worker-space")


def memory_share(cores: int) -> int:
    """Bytes for a worker on ``cores`` cores: the node's memory shared by core count."""
    import psutil

    total = psutil.virtual_memory().total
    node_cores = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    return int(total * min(1.0, cores / node_cores))


def worker_command(args, name: str, threads: int, resources: str, cores: int) -> list[str]:
    # distributed's `dask worker`, with the Dask settings of gpuexec's embedded cluster
    # (gpuexec/scheduler/worker_cli.py)
    run_dir = Path(args.run_dir)
    cmd = [sys.executable, "-m", "gpuexec.scheduler.worker_cli",
           "--scheduler-file", str(run_dir / SCHEDULER_FILE),
           *security.worker_options(run_dir / TLS_DIR),
           "--name", name, "--nthreads", str(threads), "--nworkers", "1",
           "--resources", resources,
           "--memory-limit", args.memory_limit or str(memory_share(cores)),
           "--local-directory", args.local_directory,
           "--death-timeout", str(args.death_timeout),
           "--no-dashboard", "--dashboard-address", "127.0.0.1:0"]  # its HTTP routes too
    if args.interface:
        cmd += ["--interface", args.interface]
    if args.host:
        cmd += ["--host", args.host]
    return cmd


def choose_device(found: list, localid: int):
    if not found:
        return None
    if len(found) == 1:
        return found[0]
    return found[localid % len(found)]


def plan(args, env=None, cores=None, found=None) -> dict:
    env = dict(os.environ if env is None else env)
    cores = sorted(devices.available_cores() if cores is None else cores)
    localid = int(env.get("SLURM_LOCALID", "0"))
    host = socket.gethostname().split(".")[0]
    device = None if args.no_gpu_worker else choose_device(
        devices.discover(env) if found is None else found, localid)
    n_gpu = args.gpu_workers if device is not None else 0
    split = devices.split_cores(n_gpu, cores, helper_threads=args.gpu_threads,
                                cpu_threads=args.cpu_threads,
                                cpu_workers=0 if args.no_cpu_workers else None)
    mps = bool(args.mps and device is not None)
    if mps and device.vendor != devices.NVIDIA:
        raise SystemExit("gpuexec workers: --mps is NVIDIA's; AMD GPUs share without it")
    workers = []
    for k, gcores in enumerate(split.gpu_cores):
        gcores = list(gcores)
        threads = len(gcores)
        wenv = {"NUMBA_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
        wenv.update(device.pin_env(env))
        name = f"gpu-{host}-{localid}" + (f"-{k}" if n_gpu > 1 else "")
        workers.append({"kind": "gpu", "name": name, "cores": gcores,
                        "device": device.describe(), "env": wenv, "mps": mps,
                        "cmd": worker_command(args, name, threads, "GPU=1", threads)})
    rest = list(split.cpu_cores)
    t = split.cpu_threads
    for i in range(split.cpu_workers):
        wcores = rest[i * t:(i + 1) * t] or rest  # explicit --cpu-workers may oversubscribe
        wenv = {"NUMBA_NUM_THREADS": str(t), "OMP_NUM_THREADS": str(t)}
        if device is not None and device.vendor == devices.NVIDIA:
            wenv["CUDA_VISIBLE_DEVICES"] = ""  # CPU workers never open a CUDA context
        name = f"cpu-{host}-{localid}-{i}"
        workers.append({"kind": "cpu", "name": name, "cores": wcores, "env": wenv,
                        "cmd": worker_command(args, name, t, f"CPU={t}", len(wcores))})
    return {"host": host, "slurm_localid": localid, "cores": cores,
            "device": device.describe() if device else None, "mps": mps,
            "split": split.describe(), "workers": workers}


def write_plan(the_plan: dict, run_dir: Path) -> Path:
    """This task's plan in ``<run dir>/plans/<host>-<task>.json`` (0600): what the driver
    counts before it waits for the workers."""
    plans = security.private_dir(run_dir / PLANS_DIR)
    name = f"{the_plan['host']}-{the_plan['slurm_localid']}.json"
    return security.write_private(plans / name, json.dumps(the_plan))


def read_plans(run_dir: Path) -> list[dict]:
    """Every task's plan written so far."""
    out = []
    for path in sorted((Path(run_dir) / PLANS_DIR).glob("*.json")):
        out.append(json.loads(path.read_text()))
    return out


def launch(the_plan: dict) -> int:
    daemon = None
    if the_plan.get("mps"):
        from gpuexec.scheduler import mps

        daemon = mps.start()  # this task's view of the devices: its own GPU
        print(f"gpuexec workers: GPU workers use {daemon.describe()}", flush=True)
    try:
        return _run_workers(the_plan, daemon.client_env() if daemon else {})
    finally:
        if daemon is not None:
            daemon.stop()


def _run_workers(the_plan: dict, mps_env: dict) -> int:
    children = []
    for w in the_plan["workers"]:
        env = dict(os.environ, **w["env"], **(mps_env if w.get("mps") else {}))
        env["DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION"] = "True"  # tls:// only
        cores = set(w["cores"])
        children.append(subprocess.Popen(
            w["cmd"], env=env, preexec_fn=lambda cores=cores: os.sched_setaffinity(0, cores)))
        print(f"gpuexec workers: {w['name']} on cores {w['cores']}"
              + (f", {w['device']}" if w.get("device") else ""), flush=True)

    def forward(signum, frame):
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    status = 0
    for child in children:
        rc = child.wait()
        status = status or rc
    return status


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuexec.deploy.workers",
                                     description="Start the Dask workers of one Slurm task.")
    parser.add_argument("--run-dir", required=True,
                        help="the job's run directory: scheduler file, TLS credentials, plans")
    parser.add_argument("--host", default=None,
                        help="address the workers listen on (default: the one that reaches "
                             "the scheduler)")
    parser.add_argument("--gpu-workers", type=int, default=1,
                        help="GPU worker processes on the task's GPU (default %(default)s; "
                             "several want --mps on NVIDIA)")
    parser.add_argument("--gpu-threads", type=int, default=2,
                        help="cores/threads of each GPU worker (reading and decompression "
                             "overlap the GPU); default %(default)s")
    parser.add_argument("--mps", action="store_true",
                        help="NVIDIA: the GPU workers share the GPU through an MPS daemon")
    parser.add_argument("--cpu-threads", type=int, default=1,
                        help="threads per CPU worker (default %(default)s)")
    parser.add_argument("--no-cpu-workers", action="store_true",
                        help="GPU worker only (e.g. for a GPU scaling series)")
    parser.add_argument("--no-gpu-worker", action="store_true", help="CPU workers only")
    parser.add_argument("--memory-limit", default=None,
                        help="per worker (default: the node's memory shared by cores)")
    parser.add_argument("--local-directory", default=default_local_directory())
    parser.add_argument("--interface", default=None,
                        help="network interface of the workers (e.g. hsn0 on Slingshot)")
    parser.add_argument("--death-timeout", type=int, default=120,
                        help="seconds a worker waits for the scheduler before exiting")
    parser.add_argument("--dry-run", action="store_true", help="print the plan as JSON")
    args = parser.parse_args(argv)
    if args.gpu_threads < 1 or args.cpu_threads < 1 or args.gpu_workers < 1:
        parser.error("--gpu-workers, --gpu-threads and --cpu-threads must be >= 1")
    the_plan = plan(args)
    if args.dry_run:
        print(json.dumps(the_plan, indent=1))
        return 0
    write_plan(the_plan, Path(args.run_dir))
    security.private_dir(args.local_directory)  # spilled data: this user's only
    if not the_plan["workers"]:
        print("gpuexec workers: nothing to start (no GPU and no CPU workers)", file=sys.stderr)
        return 1
    if the_plan["device"] is None and not args.no_gpu_worker:
        print(f"gpuexec workers: no GPU visible to Slurm task {the_plan['slurm_localid']} on "
              f"{the_plan['host']}: CPU workers only", flush=True)
    return launch(the_plan)


if __name__ == "__main__":
    sys.exit(main())
