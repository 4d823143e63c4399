"""Render a Slurm job script from a site profile (``profiles/<site>.yaml``, or a YAML file
of the same keys) and the job's own settings; ``gpuexec deploy slurm`` prints it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

SITES = ("frontier", "lumi", "nvidia")
KEYS = {"description", "login", "partition", "gpus_per_node", "cores_per_gpu", "modules",
        "environment", "sbatch", "srun_workers", "cpu_masks", "interface", "run_dir",
        "gpu_threads", "mps"}


def load_profile(site: str | None = None, path: str | Path | None = None) -> dict:
    """The profile of ``site``, with the keys of the YAML file ``path`` over it (either
    alone works: a file that names every key needs no site)."""
    if site is None and path is None:
        raise ValueError("give a site or a profile file")
    profile: dict = {}
    if site is not None:
        if site not in SITES:
            raise ValueError(f"unknown site {site!r}; known: {', '.join(SITES)}")
        text = resources.files("gpuexec.deploy").joinpath("profiles", f"{site}.yaml").read_text()
        profile.update(yaml.safe_load(text))
    if path is not None:
        extra = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(extra, dict):
            raise ValueError(f"{path}: a profile is a mapping of keys")
        unknown = set(extra) - KEYS
        if unknown:
            raise ValueError(f"{path}: unknown profile keys {sorted(unknown)}; known: "
                             f"{sorted(KEYS)}")
        profile.update(extra)
    missing = KEYS - {"cpu_masks"} - set(profile)
    if missing:
        raise ValueError(f"the profile lacks {sorted(missing)}")
    return profile


@dataclass
class Job:
    """What one job asks of the batch system and runs (``gpuexec deploy slurm``'s
    options); None takes the profile's value."""

    nodes: int
    account: str
    time: str
    partition: str | None = None
    qos: str | None = None
    gpus_per_node: int | None = None  # default: the profile's
    cores_per_gpu: int | None = None
    gpu_threads: int | None = None  # cores of each GPU worker; default: the profile's
    analysis: tuple[str, ...] = ()  # gpuexec run's PROCESSOR FILESET, if fixed now
    listen_host: str | None = None  # e.g. 127.0.0.1 for a one-node job
    fake_gpu: str | None = None  # GPUEXEC_FAKE_GPU for the job (docs/deploy.md#fake-gpus)
    job_name: str = "gpuexec"


def _directives(p: dict, job: Job, gpus: int, cores: int) -> list[str]:
    partition = job.partition or p.get("partition")
    lines = [f"--job-name={job.job_name}", f"--account={job.account}",
             f"--nodes={job.nodes}", f"--time={job.time}", "--output=gpuexec-%j.out",
             f"--ntasks-per-node={gpus}", f"--gpus-per-node={gpus}"]
    if partition:
        lines.append(f"--partition={partition}")
    if job.qos:
        lines.append(f"--qos={job.qos}")
    if "{cores}" in " ".join(p["srun_workers"]):
        lines.append(f"--cpus-per-task={cores}")
    lines += list(p["sbatch"])
    return [f"#SBATCH {line}" for line in lines]


def _srun_workers(p: dict, gpus: int, cores: int) -> str:
    masks = p.get("cpu_masks") or []
    if "{masks}" in " ".join(p["srun_workers"]) and len(masks) < gpus:
        raise ValueError(f"the profile has {len(masks)} CPU masks for {gpus} GPUs per node")
    out = [o.format(cores=cores, masks=",".join(masks[:gpus])) for o in p["srun_workers"]]
    return " ".join(shlex.quote(o) for o in out)


def _setup(p: dict, job: Job) -> str:
    lines = []
    if p["modules"]:
        lines.append("module load " + " ".join(shlex.quote(m) for m in p["modules"]))
    env = dict(p["environment"] or {})
    if job.fake_gpu:
        env["GPUEXEC_FAKE_GPU"] = job.fake_gpu
    for key, value in sorted(env.items()):
        lines.append(f"export {key}={shlex.quote(str(value))}")
    lines.append('if [[ -n "${GPUEXEC_VENV:-}" ]]; then source "${GPUEXEC_VENV}/bin/activate"; fi')
    return "\n".join(lines)


def render(profile: dict, job: Job) -> str:
    """The job script of ``job`` at the site of ``profile``."""
    if job.nodes < 1:
        raise ValueError(f"--nodes must be >= 1, got {job.nodes}")
    gpus = job.gpus_per_node or profile["gpus_per_node"]
    cores = job.cores_per_gpu or profile["cores_per_gpu"]
    options = ["--gpu-threads", str(min(job.gpu_threads or profile["gpu_threads"], cores))]
    listen = ""
    if job.listen_host:
        listen = f"--host {shlex.quote(job.listen_host)}"
        options += ["--host", job.listen_host]
    elif profile.get("interface"):
        listen = f"--interface {shlex.quote(profile['interface'])}"
        options += ["--interface", profile["interface"]]
    mps = ""
    if profile["mps"] == "auto":  # NVIDIA: share each GPU through MPS where the node has it
        mps = ('if command -v nvidia-cuda-mps-control > /dev/null; then '
               'WORKER_OPTIONS+=(--mps --gpu-threads 1 --gpu-workers '
               f'{max(1, 7 * cores // 8)}); fi')
    values = {
        "DESCRIPTION": profile["description"],
        "DIRECTIVES": "\n".join(_directives(profile, job, gpus, cores)),
        "SETUP": _setup(profile, job),
        "RUN_DIR": profile["run_dir"],
        "LOGIN": shlex.quote(profile["login"]),
        "LISTEN": listen,
        "GPUS": str(gpus),
        "WORKER_OPTIONS": " ".join(shlex.quote(o) for o in options),
        "MPS": mps,
        "SRUN_WORKERS": _srun_workers(profile, gpus, cores),
        "ANALYSIS": " ".join(shlex.quote(a) for a in job.analysis),
    }
    text = resources.files("gpuexec.deploy").joinpath("templates", "slurm.sh").read_text()
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    return text
