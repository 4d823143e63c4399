"""Device discovery, pinning and the core split (gpuexec.scheduler.devices), with faked
command outputs and sysfs trees; and gpuexec.deploy.workers' per-task plan."""

import argparse
import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path

import pytest

from gpuexec.scheduler import devices as dv

ROOT = Path(__file__).resolve().parents[1]

UUID0 = "GPU-11111111-2222-3333-4444-555555555555"
UUID1 = "GPU-aaaaaaaa-2222-3333-4444-555555555555"
SMI_L = f"GPU 0: NVIDIA H200 (UUID: {UUID0})\nGPU 1: NVIDIA H200 (UUID: {UUID1})\n"
SMI_CAPS = f"{UUID0}, 9.0\n{UUID1}, 9.0\n"
MIG_L = ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
         "  MIG 1g.5gb      Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n"
         "  MIG 1g.5gb      Device  1: (UUID: MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb)\n"
         "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-0f0f0f0f-d33d-2b2c-524d-9e3d8d2b8a77)\n")


def runner(outputs: dict):
    """A fake ``run``: the output for a command's first two words, None otherwise."""
    calls = []

    def run(cmd):
        calls.append(list(cmd))
        return outputs.get(tuple(cmd[:2]))

    run.calls = calls
    return run


def nvidia(list_output=SMI_L, caps=SMI_CAPS):
    return runner({("nvidia-smi", "-L"): list_output,
                   ("nvidia-smi", "--query-gpu=uuid,compute_cap"): caps})


def discover(env, run=None, kfd="/nonexistent/kfd", drm="/nonexistent/drm"):
    return dv.discover(env, run=run or runner({}), kfd_nodes=kfd, drm=drm, use_cupy=False)


def test_no_gpu_gives_an_empty_list_and_no_error():
    run = runner({})
    assert discover({}, run) == []
    assert ["nvidia-smi", "-L"] in run.calls
    assert dv.run_command(["surely-not-a-command-gpuexec"]) is None


def test_nvidia_all_visible_pinned_by_uuid():
    found = discover({}, nvidia())
    assert [(d.index, d.vendor, d.name, d.arch, d.pin) for d in found] == [
        (0, "nvidia", "NVIDIA H200", "sm_90", UUID0), (1, "nvidia", "NVIDIA H200", "sm_90", UUID1)]
    assert found[1].pin_env() == {"CUDA_VISIBLE_DEVICES": UUID1}
    assert dv.pin_envs(found) == [{"CUDA_VISIBLE_DEVICES": UUID0}, {"CUDA_VISIBLE_DEVICES": UUID1}]
    no_caps = discover({}, nvidia(caps=None))
    assert [d.arch for d in no_caps] == [None, None]


@pytest.mark.parametrize("visible, pins", [
    ("1", ["1"]),
    ("1,0", ["1", "0"]),
    ("GPU-aaaa", ["GPU-aaaa"]),  # a unique UUID prefix, as CUDA accepts
    ("1,7,0", ["1"]),  # CUDA stops at the first invalid entry
    ("0,0", ["0"]),
    ("GPU-", []),  # ambiguous prefix: invalid from the start
    ("", []),
    ("-1", []),
])
def test_nvidia_honours_cuda_visible_devices(visible, pins):
    found = discover({"CUDA_VISIBLE_DEVICES": visible}, nvidia())
    assert [d.pin for d in found] == pins
    assert [d.index for d in found] == list(range(len(pins)))
    for d in found:
        assert d.pin_env() == {"CUDA_VISIBLE_DEVICES": d.pin}
    if visible == "1":
        assert found[0].uuid == UUID1


def test_nvidia_mig_instances_replace_their_gpu():
    found = discover({}, nvidia(MIG_L, caps=None))
    assert [d.name for d in found] == ["NVIDIA A100-SXM4-40GB MIG 1g.5gb"] * 2 + ["NVIDIA A100-SXM4-40GB"]
    assert found[0].pin.startswith("MIG-c6d4") and found[2].pin.startswith("GPU-0f0f")
    only = discover({"CUDA_VISIBLE_DEVICES": "MIG-cba663e8"}, nvidia(MIG_L, caps=None))
    assert [d.pin for d in only] == ["MIG-cba663e8"]


def make_kfd(tmp_path, gpus=4, with_product_name=False):
    """A KFD topology like one MI250X node's: node 0 the CPU, then GPU (GCD) nodes."""
    nodes = tmp_path / "kfd" / "nodes"
    drm = tmp_path / "drm"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0" / "properties").write_text("cpu_cores_count 64\nsimd_count 0\ngfx_target_version 0\n")
    for i in range(gpus):
        node = nodes / str(i + 1)
        node.mkdir()
        node.joinpath("properties").write_text(
            f"cpu_cores_count 0\nsimd_count 440\ngfx_target_version 90010\n"
            f"drm_render_minor {128 + i}\nunique_id {0x1000 + i}\nvendor_id 4098\n")
        if with_product_name:
            d = drm / f"renderD{128 + i}" / "device"
            d.mkdir(parents=True)
            d.joinpath("product_name").write_text("AMD Instinct MI250X\n")
    (nodes / "notanode").mkdir()
    return str(nodes), str(drm)


def test_amd_from_the_kfd_topology(tmp_path):
    kfd, drm = make_kfd(tmp_path)
    found = discover({}, kfd=kfd, drm=drm)
    assert [(d.index, d.vendor, d.arch, d.pin) for d in found] == [
        (i, "amd", "gfx90a", f"GPU-{0x1000 + i:016x}") for i in range(4)]
    assert found[0].name == "AMD GPU gfx90a"
    assert found[2].pin_env({}) == {"ROCR_VISIBLE_DEVICES": f"GPU-{0x1002:016x}",
                                    "HIP_VISIBLE_DEVICES": "0"}
    kfd, drm = make_kfd(tmp_path / "named", with_product_name=True)
    assert {d.name for d in discover({}, kfd=kfd, drm=drm)} == {"AMD Instinct MI250X"}


def test_amd_honours_rocr_then_hip_visible_devices(tmp_path):
    kfd, drm = make_kfd(tmp_path)
    slurm = discover({"ROCR_VISIBLE_DEVICES": "2"}, kfd=kfd, drm=drm)  # Slurm --gpus-per-task=1
    assert [(d.index, d.pin) for d in slurm] == [(0, "2")]
    assert slurm[0].pin_env({}) == {"ROCR_VISIBLE_DEVICES": "2", "HIP_VISIBLE_DEVICES": "0"}
    both = discover({"ROCR_VISIBLE_DEVICES": "3,1,0", "HIP_VISIBLE_DEVICES": "1"}, kfd=kfd, drm=drm)
    assert [d.pin for d in both] == ["1"]
    by_uuid = discover({"ROCR_VISIBLE_DEVICES": f"GPU-{0x1003:016x}"}, kfd=kfd, drm=drm)
    assert [d.uuid for d in by_uuid] == [f"GPU-{0x1003:016x}"]
    # HIP also honours CUDA_VISIBLE_DEVICES; the worker then gets it reset too
    cuda = discover({"CUDA_VISIBLE_DEVICES": "2"}, kfd=kfd, drm=drm)
    assert cuda[0].uuid == f"GPU-{0x1002:016x}"
    assert cuda[0].pin_env({"CUDA_VISIBLE_DEVICES": "2"})["CUDA_VISIBLE_DEVICES"] == "0"
    assert discover({"HIP_VISIBLE_DEVICES": "9"}, kfd=kfd, drm=drm) == []
    assert discover({"ROCR_VISIBLE_DEVICES": ""}, kfd=kfd, drm=drm) == []


def test_nvidia_smi_answer_wins_over_kfd(tmp_path):
    kfd, drm = make_kfd(tmp_path)
    assert {d.vendor for d in discover({}, nvidia(), kfd=kfd, drm=drm)} == {"nvidia"}


def test_gfx_names():
    assert dv._gfx_arch(90010) == "gfx90a"
    assert dv._gfx_arch(90402) == "gfx942"
    assert dv._gfx_arch(110000) == "gfx1100"
    assert dv._gfx_arch(0) is None


def test_cupy_fallback(monkeypatch):
    props = {0: {"name": b"NVIDIA H200"}, 1: {"name": b"NVIDIA H200"}}
    runtime = types.SimpleNamespace(getDeviceCount=lambda: 2, is_hip=False,
                                    getDeviceProperties=lambda i: props[i])
    fake = types.ModuleType("cupy")
    fake.__spec__ = importlib.machinery.ModuleSpec("cupy", None)
    fake.cuda = types.SimpleNamespace(runtime=runtime)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    found = dv.discover({"CUDA_VISIBLE_DEVICES": "4,5"}, run=runner({}), kfd_nodes="/nonexistent")
    assert [(d.index, d.name, d.pin) for d in found] == [(0, "NVIDIA H200", "4"), (1, "NVIDIA H200", "5")]
    assert dv.discover({}, run=runner({}), kfd_nodes="/nonexistent", use_cupy=False) == []


def test_core_split():
    s = dv.split_cores(1, 16, helper_threads=2)
    assert s.gpu_cores == ((0, 1),) and s.cpu_cores == tuple(range(2, 16))
    assert (s.cpu_workers, s.cpu_threads, s.gpu_threads) == (14, 1, 2)
    node = dv.split_cores(8, 56, helper_threads=2)  # a Frontier/LUMI node, one worker per GCD
    assert len(node.gpu_cores) == 8 and node.cpu_workers == 40
    assert sorted(c for cs in node.gpu_cores for c in cs) + list(node.cpu_cores) == list(range(56))
    assert dv.split_cores(1, 16, cpu_workers=0).cpu_workers == 0  # "no CPU workers"
    assert dv.split_cores(1, 16, cpu_threads=4).cpu_workers == 3
    tight = dv.split_cores(1, 2, helper_threads=4)  # fewer cores than helpers asked for
    assert tight.gpu_cores == ((0, 1),) and tight.cpu_workers == 0
    crowded = dv.split_cores(3, 2)  # more GPUs than cores: one core each, shared
    assert crowded.gpu_cores == ((0,), (1,), (0,)) and crowded.cpu_workers == 0
    ccd = dv.split_cores(1, [49, 50, 51, 52, 53, 54, 55])  # one LUMI task's mask
    assert ccd.gpu_cores == ((49, 50),) and ccd.cpu_cores == (51, 52, 53, 54, 55)
    assert dv.split_cores(0, 4).gpu_cores == () and dv.split_cores(0, 4).cpu_workers == 4
    assert "1 GPU worker(s) x 2 thread(s)" in s.describe()
    with pytest.raises(ValueError):
        dv.split_cores(1, [])
    with pytest.raises(ValueError):
        dv.split_cores(1, 4, helper_threads=0)


def test_cli_runs_here(capsys):
    assert dv.main([]) == 0
    out = capsys.readouterr().out
    assert "cores" in out


def test_cli_shows_the_default_split_with_mps(capsys, monkeypatch):
    from gpuexec.scheduler import mps

    gpu = dv.Device(0, dv.NVIDIA, "NVIDIA H200", "GPU-a", "GPU-a", "sm_90")
    monkeypatch.setattr(dv, "discover", lambda *a, **k: [gpu])
    monkeypatch.setattr(dv, "available_cores", lambda: list(range(16)))
    monkeypatch.setattr(mps, "available", lambda: True)
    assert dv.main([]) == 0
    out = capsys.readouterr().out
    assert "14 single-thread GPU workers per GPU" in out
    assert "14 GPU worker(s) x 1 thread(s); 2 CPU worker(s)" in out
    monkeypatch.setattr(mps, "available", lambda: False)
    assert dv.main([]) == 0
    assert "1 GPU worker(s) x 2 thread(s); 14 CPU worker(s)" in capsys.readouterr().out
    assert dv.shared_gpu_workers(64, 8) == 7 and dv.shared_gpu_workers(2, 4) == 1
    assert dv.shared_gpu_workers(16, 1) == 14 and dv.shared_gpu_workers(128, 8) == 14


# ---------------------------------------------------------- gpuexec.deploy.workers
def start_workers():
    from gpuexec.deploy import workers

    return workers


def args(**kw):
    base = dict(run_dir="/shared/job", host=None, gpu_workers=1, gpu_threads=2, mps=False,
                cpu_threads=1,
                no_cpu_workers=False, no_gpu_worker=False, memory_limit="4GB",
                local_directory="/tmp/dw", interface=None, death_timeout=60)
    base.update(kw)
    return argparse.Namespace(**base)


def test_start_workers_plan_for_a_lumi_task(tmp_path):
    sw = start_workers()
    kfd, drm = make_kfd(tmp_path, gpus=8)
    found = dv.discover({}, run=runner({}), kfd_nodes=kfd, drm=drm, use_cupy=False)
    # LUMI: every task sees the 8 GCDs and is bound to the 7 cores of one CCD
    plan = sw.plan(args(), env={"SLURM_LOCALID": "3"}, cores=range(25, 32), found=found)
    gpu, *cpus = plan["workers"]
    assert gpu["kind"] == "gpu" and gpu["cores"] == [25, 26]
    assert gpu["env"]["ROCR_VISIBLE_DEVICES"] == found[3].pin and gpu["env"]["HIP_VISIBLE_DEVICES"] == "0"
    assert gpu["env"]["NUMBA_NUM_THREADS"] == "2"
    cmd = gpu["cmd"]
    assert cmd[cmd.index("--resources") + 1] == "GPU=1" and cmd[cmd.index("--nthreads") + 1] == "2"
    assert cmd[cmd.index("--scheduler-file") + 1] == "/shared/job/scheduler.json"
    assert cmd[cmd.index("--tls-key") + 1] == "/shared/job/tls/key.pem"  # the job's TLS
    assert cmd[1:3] == ["-m", "gpuexec.scheduler.worker_cli"]  # dask worker, gpuexec's nanny settings
    assert [c["cores"] for c in cpus] == [[27], [28], [29], [30], [31]]
    assert all(c["cmd"][c["cmd"].index("--resources") + 1] == "CPU=1" for c in cpus)
    assert len({w["name"] for w in plan["workers"]}) == 6


def test_start_workers_plan_for_a_slurm_bound_nvidia_task():
    sw = start_workers()
    found = dv.discover({"CUDA_VISIBLE_DEVICES": "1"}, run=nvidia(), kfd_nodes="/nonexistent",
                        use_cupy=False)
    plan = sw.plan(args(gpu_threads=4), env={"SLURM_LOCALID": "1", "CUDA_VISIBLE_DEVICES": "1"},
                   cores=range(16, 32), found=found)
    gpu, *cpus = plan["workers"]
    assert gpu["env"]["CUDA_VISIBLE_DEVICES"] == "1" and gpu["cores"] == [16, 17, 18, 19]
    assert len(cpus) == 12 and all(c["env"]["CUDA_VISIBLE_DEVICES"] == "" for c in cpus)
    only_gpu = sw.plan(args(no_cpu_workers=True), env={}, cores=range(4), found=found)
    assert [w["kind"] for w in only_gpu["workers"]] == ["gpu"]
    no_gpu = sw.plan(args(), env={}, cores=range(4), found=[])
    assert [w["kind"] for w in no_gpu["workers"]] == ["cpu"] * 4 and no_gpu["device"] is None


def test_start_workers_plan_with_several_gpu_workers_sharing_the_task_gpu_through_mps(
        monkeypatch, tmp_path):
    sw = start_workers()
    found = dv.discover({"CUDA_VISIBLE_DEVICES": "1"}, run=nvidia(), kfd_nodes="/nonexistent",
                        use_cupy=False)
    plan = sw.plan(args(gpu_workers=3, gpu_threads=1, mps=True),
                   env={"SLURM_LOCALID": "1", "CUDA_VISIBLE_DEVICES": "1"},
                   cores=range(16, 32), found=found)
    gpus = [w for w in plan["workers"] if w["kind"] == "gpu"]
    assert plan["mps"] and [g["cores"] for g in gpus] == [[16], [17], [18]]
    assert len({g["name"] for g in gpus}) == 3 and all(g["mps"] for g in gpus)
    assert {g["env"]["CUDA_VISIBLE_DEVICES"] for g in gpus} == {found[0].pin}
    assert sum(w["kind"] == "cpu" for w in plan["workers"]) == 13
    # the daemon's pipe directory reaches the GPU workers only, and it is quit at the end
    seen = {}

    class Daemon:
        def client_env(self):
            return {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/p"}

        def describe(self):
            return "NVIDIA MPS (test)"

        def stop(self):
            seen["stopped"] = True

    from gpuexec.scheduler import mps

    monkeypatch.setattr(mps, "start", lambda: Daemon())
    monkeypatch.setattr(sw, "_run_workers", lambda p, env: seen.setdefault("env", env) and 0)
    assert sw.launch(plan) == 0 and seen == {"env": {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/p"},
                                             "stopped": True}
    kfd, drm = make_kfd(tmp_path, gpus=8)
    amd = dv.discover({}, run=runner({}), kfd_nodes=kfd, drm=drm, use_cupy=False)
    with pytest.raises(SystemExit, match="NVIDIA's"):
        sw.plan(args(gpu_workers=2, mps=True), env={}, cores=range(8), found=amd)
    # without --mps nothing is started
    assert not sw.plan(args(gpu_workers=2), env={}, cores=range(8), found=found)["mps"]


def test_a_fake_gpu_takes_the_vendor_and_the_pins_slurm_gave():
    """GPUEXEC_FAKE_GPU: one device per entry of the vendor's pinning variable, of the
    named vendor and arch; a worker pinned to one of them sees that one only."""
    found = dv.discover({"GPUEXEC_FAKE_GPU": "amd:gfx90a", "CUDA_VISIBLE_DEVICES": "2,3"},
                        run=runner({}), kfd_nodes="/nonexistent", use_cupy=False)
    assert [(d.vendor, d.arch, d.pin) for d in found] == [("amd", "gfx90a", "2"), ("amd", "gfx90a", "3")]
    pinned = dict(found[1].pin_env({"CUDA_VISIBLE_DEVICES": "2,3"}), GPUEXEC_FAKE_GPU="amd:gfx90a")
    assert pinned["ROCR_VISIBLE_DEVICES"] == "3"
    assert [d.pin for d in dv.discover(pinned, run=runner({}), use_cupy=False)] == ["3"]
    nv = dv.discover({"GPUEXEC_FAKE_GPU": "nvidia"}, run=runner({}), use_cupy=False)
    assert [(d.vendor, d.pin) for d in nv] == [("nvidia", "0")]
    with pytest.raises(ValueError, match="vendor"):
        dv.discover({"GPUEXEC_FAKE_GPU": "intel"}, run=runner({}), use_cupy=False)
