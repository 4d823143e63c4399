"""Which GPUs this process may use, how to pin one worker to each, and how to split the
CPU cores between GPU workers (helper threads) and CPU workers.

Discovery initialises no GPU runtime in the calling process:

- NVIDIA: ``nvidia-smi -L`` (GPUs and MIG instances with their UUIDs) and
  ``nvidia-smi --query-gpu=uuid,compute_cap`` (the arch). nvidia-smi lists every GPU of
  the node, so an already-set ``CUDA_VISIBLE_DEVICES`` (indices, ``GPU-``/``MIG-`` UUIDs
  or their unique prefixes; CUDA stops at the first invalid entry) is applied here.
  Indices are taken in nvidia-smi's (PCI bus) order, which is CUDA's order with
  ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and on nodes of identical GPUs.
- AMD: the KFD topology (``/sys/class/kfd/kfd/topology/nodes/*/properties``, what
  ``rocm-smi`` and ROCr read): nodes with SIMDs are GPUs (each MI250X GCD is one), in
  ROCr's order; ``gfx_target_version`` gives the arch. ``ROCR_VISIBLE_DEVICES`` (indices
  or ``GPU-<unique id>``) selects among them, then ``HIP_VISIBLE_DEVICES`` (or
  ``CUDA_VISIBLE_DEVICES``, which HIP also honours) indexes the remaining ones.
- Otherwise, if CuPy is importable, CuPy's device count and names (this does load the
  driver in the calling process, but creates no context).

A machine without GPUs gives an empty list, without errors or messages (saying "no GPU
found: CPU workers only" once is the executor's job).

Pinning: ``device.pin_env()`` is the environment that makes ``device`` the only (and
therefore first) device of a worker process: ``CUDA_VISIBLE_DEVICES=<id>`` on NVIDIA;
``ROCR_VISIBLE_DEVICES=<id>`` and ``HIP_VISIBLE_DEVICES=0`` (index into what ROCr leaves
visible) on AMD. ``<id>`` is the entry of the parent's restriction when there was one,
else the device UUID, else its index.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

NVIDIA = "nvidia"
AMD = "amd"
KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"
DRM = "/sys/class/drm"  # renderD<minor>/device/product_name: the marketing name, where exposed
PIN_VARIABLES = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


@dataclass(frozen=True)
class Device:
    """A GPU this process may use. ``index``: its ordinal in this process (0..n-1);
    ``pin``: the identifier that selects it in the pinning variable; ``arch``: "sm_90",
    "gfx90a", ... when known."""

    index: int
    vendor: str
    name: str
    pin: str
    uuid: str | None = None
    arch: str | None = None

    def pin_env(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """Environment variables that pin one worker process to this device. ``env``:
        the parent environment (default ``os.environ``), consulted for AMD, where a
        ``CUDA_VISIBLE_DEVICES`` inherited by the worker would also filter HIP's view."""
        if self.vendor == NVIDIA:
            return {"CUDA_VISIBLE_DEVICES": self.pin}
        out = {"ROCR_VISIBLE_DEVICES": self.pin, "HIP_VISIBLE_DEVICES": "0"}
        if "CUDA_VISIBLE_DEVICES" in (os.environ if env is None else env):
            out["CUDA_VISIBLE_DEVICES"] = "0"
        return out

    def describe(self) -> str:
        arch = f", {self.arch}" if self.arch else ""
        return f"GPU {self.index}: {self.name} ({self.vendor}{arch}), pinned by {self.pin}"


Runner = Callable[[Sequence[str]], "str | None"]


def run_command(cmd: Sequence[str], timeout: float = 15.0) -> str | None:
    """stdout of ``cmd``, or None when it is not installed, fails or hangs."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as err:
        log.debug("%s failed: %s", " ".join(cmd), err)
        return None
    if done.returncode != 0:
        log.debug("%s exited %d: %s", " ".join(cmd), done.returncode, done.stderr.strip())
        return None
    return done.stdout


def visible_entries(value: str | None) -> list[str] | None:
    """The entries of a ``*_VISIBLE_DEVICES`` value; None when unset (no restriction),
    [] when set to nothing."""
    if value is None:
        return None
    return [e.strip() for e in value.split(",") if e.strip()]


# -------------------------------------------------------------------------- NVIDIA
_GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Za-z-]+)\)")
_MIG_LINE = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[0-9A-Za-z/-]+)\)")


@dataclass(frozen=True)
class _Physical:
    index: str  # physical index ("3"), or "3:1" for MIG instance 1 of GPU 3
    name: str
    uuid: str | None
    arch: str | None


def _nvidia_physical(run: Runner) -> list[_Physical]:
    listing = run(["nvidia-smi", "-L"])
    if not listing:
        return []
    arch_of = {}
    caps = run(["nvidia-smi", "--query-gpu=uuid,compute_cap", "--format=csv,noheader"])
    for line in (caps or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and re.fullmatch(r"\d+\.\d+", parts[1]):
            arch_of[parts[0]] = "sm_" + parts[1].replace(".", "")
    gpus: list[_Physical] = []
    migs: dict[str, list[_Physical]] = {}
    for line in listing.splitlines():
        m = _GPU_LINE.match(line)
        if m:
            gpus.append(_Physical(m.group(1), m.group(2).strip(), m.group(3), arch_of.get(m.group(3))))
            continue
        m = _MIG_LINE.match(line)
        if m and gpus:
            parent = gpus[-1]
            migs.setdefault(parent.index, []).append(_Physical(
                f"{parent.index}:{m.group(2)}", f"{parent.name} MIG {m.group(1)}", m.group(3),
                parent.arch))
    out = []
    for g in gpus:  # a GPU in MIG mode is used through its instances
        out.extend(migs.get(g.index, [g]))
    return out


def _match_nvidia(entry: str, physical: list[_Physical]) -> _Physical | None:
    if entry.isdigit():
        return next((p for p in physical if p.index == entry), None)
    if entry.startswith(("GPU-", "MIG-")):
        hits = [p for p in physical if p.uuid and p.uuid.startswith(entry)]
        return hits[0] if len(hits) == 1 else None
    return None


def _visible(physical: list[_Physical], entries: list[str] | None, match,
             stop_at_unknown: bool) -> list[tuple[_Physical, str]]:
    """(device, the entry that names it) of the devices a visible-devices list selects, in
    its order (all of them, pinned by uuid or index, without a list). An entry that
    ``match`` finds no device for, or one naming a device again, ends the list with
    ``stop_at_unknown``, else is skipped."""
    if entries is None:
        return [(p, p.uuid or p.index) for p in physical]
    chosen, seen = [], set()
    for entry in entries:
        p = match(entry, physical)
        if p is None or p.index in seen:
            if stop_at_unknown:
                break
            continue
        seen.add(p.index)
        chosen.append((p, entry))
    return chosen


def _nvidia(env: Mapping[str, str], run: Runner) -> list[Device]:
    physical = _nvidia_physical(run)
    if not physical:
        return []
    # CUDA ignores the rest of the list from an unknown or repeated entry on
    chosen = _visible(physical, visible_entries(env.get("CUDA_VISIBLE_DEVICES")),
                      _match_nvidia, stop_at_unknown=True)
    return [Device(i, NVIDIA, p.name, pin, p.uuid, p.arch) for i, (p, pin) in enumerate(chosen)]


# ----------------------------------------------------------------------------- AMD
def _gfx_arch(target_version: int) -> str | None:
    """KFD's gfx_target_version (e.g. 90010) as a gfx name (gfx90a)."""
    if target_version <= 0:
        return None
    major, minor, step = target_version // 10000, (target_version // 100) % 100, target_version % 100
    return f"gfx{major}{minor:x}{step:x}"


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _amd_physical(kfd_nodes: str, drm: str) -> list[_Physical]:
    try:
        nodes = sorted((int(n) for n in os.listdir(kfd_nodes) if n.isdigit()))
    except OSError:
        return []
    out = []
    for node in nodes:
        text = _read(os.path.join(kfd_nodes, str(node), "properties"))
        if not text:
            continue
        props = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("-").isdigit():
                props[parts[0]] = int(parts[1])
        if props.get("simd_count", 0) <= 0:  # a CPU node
            continue
        arch = _gfx_arch(props.get("gfx_target_version", 0))
        name = None
        minor = props.get("drm_render_minor")
        if minor is not None:
            name = (_read(os.path.join(drm, f"renderD{minor}", "device", "product_name"))
                    or "").strip() or None
        unique = props.get("unique_id", 0)
        uuid = f"GPU-{unique:016x}" if unique else None
        out.append(_Physical(str(len(out)), name or f"AMD GPU {arch or '(unknown arch)'}", uuid, arch))
    return out


def _match_amd(entry: str, physical: list[_Physical]) -> _Physical | None:
    if entry.isdigit():
        return next((p for p in physical if p.index == entry), None)
    if entry.startswith("GPU-"):
        return next((p for p in physical if p.uuid and p.uuid.lower() == entry.lower()), None)
    return None


def _amd(env: Mapping[str, str], kfd_nodes: str, drm: str) -> list[Device]:
    physical = _amd_physical(kfd_nodes, drm)
    if not physical:
        return []
    chosen = _visible(physical, visible_entries(env.get("ROCR_VISIBLE_DEVICES")),
                      _match_amd, stop_at_unknown=False)
    hip = visible_entries(env.get("HIP_VISIBLE_DEVICES", env.get("CUDA_VISIBLE_DEVICES")))
    if hip is not None:
        picked, seen = [], set()
        for entry in hip:
            if not entry.isdigit() or int(entry) >= len(chosen) or entry in seen:
                break
            seen.add(entry)
            picked.append(chosen[int(entry)])
        chosen = picked
    return [Device(i, AMD, p.name, pin, p.uuid, p.arch) for i, (p, pin) in enumerate(chosen)]


# ---------------------------------------------------------------------------- CuPy
def _cupy(env: Mapping[str, str]) -> list[Device]:
    import importlib.util

    if importlib.util.find_spec("cupy") is None:
        return []
    try:
        import cupy

        runtime = cupy.cuda.runtime
        count = int(runtime.getDeviceCount())
        hip = bool(getattr(runtime, "is_hip", False))
        names = []
        for i in range(count):
            props = runtime.getDeviceProperties(i)
            name = props.get("name", b"GPU")
            names.append(name.decode() if isinstance(name, bytes) else str(name))
    except Exception as err:  # no driver, no device: no GPU
        log.debug("CuPy found no GPU: %s", err)
        return []
    vendor = AMD if hip else NVIDIA
    # the i-th visible device is the i-th entry of the innermost restriction, if any
    var = "HIP_VISIBLE_DEVICES" if hip and "HIP_VISIBLE_DEVICES" in env else (
        "ROCR_VISIBLE_DEVICES" if hip else "CUDA_VISIBLE_DEVICES")
    entries = visible_entries(env.get(var))
    pins = [entries[i] if entries and i < len(entries) else str(i) for i in range(count)]
    return [Device(i, vendor, names[i], pins[i]) for i in range(count)]


# ------------------------------------------------------------------------ fake GPUs
FAKE_GPU = "GPUEXEC_FAKE_GPU"  # "amd:gfx90a", "nvidia:sm_90": docs/deploy.md#fake-gpus


def _fake(env: Mapping[str, str]) -> list[Device] | None:
    """The devices ``GPUEXEC_FAKE_GPU=<vendor>[:<arch>]`` pretends, one per entry of the
    vendor's pinning variable (``ROCR_VISIBLE_DEVICES`` or ``CUDA_VISIBLE_DEVICES``, as
    Slurm's gres set it; else device 0): for checking jobs on nodes without GPUs."""
    spec = env.get(FAKE_GPU)
    if not spec:
        return None
    vendor, _, arch = spec.partition(":")
    if vendor not in (NVIDIA, AMD):
        raise ValueError(f"{FAKE_GPU}={spec!r}: the vendor must be {NVIDIA} or {AMD}")
    own = "ROCR_VISIBLE_DEVICES" if vendor == AMD else "CUDA_VISIBLE_DEVICES"
    pins = visible_entries(env.get(own, env.get("CUDA_VISIBLE_DEVICES"))) or ["0"]
    return [Device(i, vendor, f"fake {vendor} GPU", pin, None, arch or None)
            for i, pin in enumerate(pins)]


# ---------------------------------------------------------------------------- API
def discover(env: Mapping[str, str] | None = None, *, run: Runner = run_command,
             kfd_nodes: str = KFD_NODES, drm: str = DRM, use_cupy: bool = True) -> list[Device]:
    """The GPUs this process may use (see the module docstring); [] without any.
    ``env``, ``run`` (command -> stdout or None), ``kfd_nodes`` and ``drm`` (sysfs
    directories) are for tests."""
    env = os.environ if env is None else env
    fake = _fake(env)
    if fake is not None:
        return fake
    found = _nvidia(env, run)
    if not found:
        found = _amd(env, kfd_nodes, drm)
    if not found and use_cupy:
        found = _cupy(env)
    return found


def pin_envs(devices: Sequence[Device], env: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """One pinning environment per device (one GPU worker each)."""
    return [d.pin_env(env) for d in devices]


@dataclass(frozen=True)
class CoreSplit:
    """``gpu_cores[i]``: the cores of GPU worker i (its helper threads read and
    decompress while the GPU computes); ``cpu_cores``: the cores left to
    ``cpu_workers`` CPU workers of ``cpu_threads`` threads each."""

    gpu_cores: tuple[tuple[int, ...], ...]
    cpu_cores: tuple[int, ...]
    cpu_workers: int
    cpu_threads: int

    @property
    def gpu_threads(self) -> int:
        return min((len(c) for c in self.gpu_cores), default=0)

    def describe(self) -> str:
        gpu = (f"{len(self.gpu_cores)} GPU worker(s) x {self.gpu_threads} thread(s)"
               if self.gpu_cores else "no GPU workers")
        return (f"{gpu}; {self.cpu_workers} CPU worker(s) x {self.cpu_threads} thread(s) "
                f"on {len(self.cpu_cores)} core(s)")


def available_cores() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return list(range(os.cpu_count() or 1))


def split_cores(gpu_workers: int, cores: Sequence[int] | int | None = None, *,
                helper_threads: int = 2, cpu_threads: int = 1,
                cpu_workers: int | None = None) -> CoreSplit:
    """Give each of ``gpu_workers`` GPU workers ``helper_threads`` cores (fewer when the
    cores do not suffice, at least one, shared when there are more GPUs than cores) and
    the remaining cores to CPU workers of ``cpu_threads`` threads: as many as fit, or
    ``cpu_workers`` (0: no CPU workers). ``cores``: core ids, a count, or None for the
    cores this process may run on."""
    if cores is None:
        cores = available_cores()
    elif isinstance(cores, int):
        cores = list(range(cores))
    cores = list(cores)
    if not cores:
        raise ValueError("no cores to split")
    if gpu_workers < 0 or helper_threads < 1 or cpu_threads < 1:
        raise ValueError("gpu_workers must be >= 0, helper_threads and cpu_threads >= 1")
    if cpu_workers is not None and cpu_workers < 0:
        raise ValueError(f"cpu_workers must be >= 0, got {cpu_workers}")
    if gpu_workers == 0:
        gpu, rest = (), cores
    elif gpu_workers * helper_threads <= len(cores):
        k = helper_threads
        gpu = tuple(tuple(cores[i * k:(i + 1) * k]) for i in range(gpu_workers))
        rest = cores[gpu_workers * k:]
    elif gpu_workers <= len(cores):
        k = len(cores) // gpu_workers
        gpu = tuple(tuple(cores[i * k:(i + 1) * k]) for i in range(gpu_workers))
        rest = cores[gpu_workers * k:]
    else:  # more GPUs than cores: one core each, shared round robin
        gpu = tuple((cores[i % len(cores)],) for i in range(gpu_workers))
        rest = []
    if cpu_workers is None:
        cpu_workers = len(rest) // cpu_threads
    return CoreSplit(gpu, tuple(rest), cpu_workers, cpu_threads)


def shared_gpu_workers(cores: int, n_devices: int) -> int:
    """GPU workers per device where several processes can drive one device concurrently
    (NVIDIA with MPS): seven eighths of its share of ``cores``, the rest for CPU workers.
    One process's Python feeds a GPU at a fraction of its speed; with MPS, 14 GPU workers
    and 2 CPU workers of 16 cores ran ADL Q8 3-17 % faster than 12 GPU workers on an
    NVIDIA H200 (docs/executor.md#pools)."""
    return max(1, 7 * (cores // max(1, n_devices)) // 8)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m gpuexec.scheduler.devices",
                                     description="List the GPUs gpuexec would pin workers to.")
    parser.add_argument("--helper-threads", type=int, default=2,
                        help="cores per GPU worker (default %(default)s)")
    args = parser.parse_args(argv)
    devices = discover()
    if not devices:
        print("no GPU found: CPU workers only")
    for d in devices:
        print(f"{d.describe()}; worker env {d.pin_env()}")
    cores = available_cores()
    from gpuexec.scheduler import mps

    if devices and devices[0].vendor == NVIDIA and mps.available():
        per_device = shared_gpu_workers(len(cores), len(devices))
        print(f"NVIDIA MPS available: GPUExecutor's default is {per_device} single-thread GPU "
              "workers per GPU sharing it through MPS")
        split = split_cores(per_device * len(devices), cores, helper_threads=1)
    else:
        split = split_cores(len(devices), cores, helper_threads=args.helper_threads)
    print(f"cores {len(cores)}: " + split.describe())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
