"""The maintained benchmarks (benchmarks/) run: each in its ``--smoke`` mode as a
subprocess, as a user runs it, so that none of them rots; the GPU ones skip cleanly
without a GPU; and benchmarks/results/ holds only results that say how they were made
(docs/benchmarks.md)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
# the maintained benchmarks: the scripts of benchmarks/ (helpers start with "_"); results
# are <benchmark>_<machine>_<YYYY-MM-DD>.<json|png>, beside the compile gates' ISA table
BENCHMARKS = sorted(p.stem for p in (ROOT / "benchmarks").glob("[!_]*.py"))
RESULT_NAME = re.compile(rf"^(?P<bench>{'|'.join(BENCHMARKS)})_[a-z0-9-]+_\d{{4}}-\d{{2}}-\d{{2}}"
                         r"\.(json|png)$")
CI_TABLE = {"gpu_isa_table.json", "gpu_isa_table.md"}


def run(script: str, *args: str, timeout: float = 240) -> tuple[subprocess.CompletedProcess,
                                                                   dict | None]:
    """``python benchmarks/<script>.py ARGS --out <tmp>`` from the repository root; its
    process and its JSON (None where it wrote none)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".cache" / "numba"))
    done = subprocess.run([sys.executable, f"benchmarks/{script}.py", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = args[args.index("--out") + 1] if "--out" in args else (
        args[args.index("--json") + 1] if "--json" in args else None)
    return done, json.loads(Path(out).read_text()) if out and Path(out).exists() else None


def assert_provenance(result: dict, script: str) -> None:
    assert result["command"].startswith(f"python benchmarks/{script}.py ")
    assert "--smoke" in result["command"]
    assert re.fullmatch(r"[0-9a-f]{7,40}(\+dirty)?|unknown", result["commit"])
    machine = result["machine"]
    assert machine["cores"] >= 1 and machine["cpu"] and machine["description"]


@pytest.mark.slow
def test_cpu_kernels_smoke(tmp_path):
    out = str(tmp_path / "cpu.json")
    done, result = run("cpu_kernels", "--smoke", "--out", out)
    assert_provenance(result, "cpu_kernels")
    kernels = {r["kernel"] for r in result["rows"]}
    assert {"reduce_sum", "reduce_argmax", "compact_offsets", "missing_repeat"} <= kernels
    assert all(r["seconds"]["awkward"] > 0 and r["ratio_1thread"] > 0 for r in result["rows"])
    assert not [n for n in result["notes"] if n.startswith("failed")]
    assert "geometric mean" in done.stdout


@pytest.mark.slow
def test_call_floor_smoke_on_the_cpu_engine(tmp_path):
    out = str(tmp_path / "floor.json")
    done, result = run("call_floor", "--smoke", "--json", out)
    assert_provenance(result, "call_floor")
    assert result["backend"] == "cpu"
    assert 0 < result["kernel_only_us"] and 0 < result["public_gk_sum_us"]
    assert "kernel call" in result["stages_us"]


@pytest.mark.slow
def test_executor_overhead_smoke(tmp_path):
    out = str(tmp_path / "overhead.json")
    done, result = run("executor_overhead", "--smoke", "--out", out)
    assert_provenance(result, "executor_overhead")
    rows = {(r["mode"], r["executor"]): r for r in result["rows"]}
    assert set(rows) == {(m, e) for m in ("runner", "bare")
                         for e in ("coffea DaskExecutor", "GPUExecutor")}
    assert all(r["median_s"] > 0 for r in rows.values())
    assert result["setup"]["chunks"] == 20


@pytest.mark.slow
def test_executor_smoke(tmp_path):
    out = str(tmp_path / "executor.json")
    done, result = run("executor", "--smoke", "--out", out, timeout=300)
    assert_provenance(result, "executor")
    for query in ("Q1", "Q8"):
        row = result["queries"][query]
        assert row["placement"]["events_per_s"] > 0 and row["dask"]["events_per_s"] > 0
        assert row["placement"]["chunks_per_pool"]  # GPUExecutor's own account of the run


def test_placement_variants_set_each_setting_once():
    """``--executors placement:NAME=VALUE`` puts each setting where it belongs (a
    GPUCluster parameter, a gpuexec.* key, a GPUExecutor field), once, the variant's value
    winning over the command line's (``gpu_workers`` was once passed twice)."""
    done, _ = run("executor", "--settings-only", "--gpu-backend", "cpu", "--gpu-workers", "2",
                  "--executors", "placement:gpu_workers=3,placement:placement.gpu-merge=8,"
                  "placement:retries=2/gpuexec.gpu.sync='block',all-gpu,all-cpu,dask")
    settings = json.loads(done.stdout)
    assert set(settings) == {"placement:gpu_workers=3", "placement:placement.gpu-merge=8",
                             "placement:retries=2/gpuexec.gpu.sync='block'", "all-gpu",
                             "all-cpu"}
    assert settings["placement:gpu_workers=3"]["cluster"]["gpu_workers"] == 3
    merged = settings["placement:placement.gpu-merge=8"]
    assert merged["tuning"]["gpuexec.placement.gpu-merge"] == 8
    assert merged["cluster"]["gpu_workers"] == 2 and "gpu_merge" not in merged["executor"]
    both = settings["placement:retries=2/gpuexec.gpu.sync='block'"]
    assert both["executor"]["retries"] == 2 and both["tuning"]["gpuexec.gpu.sync"] == "block"
    assert settings["all-gpu"]["cluster"]["cpu_workers"] == 0
    assert settings["all-cpu"]["cluster"]["gpu_workers"] == 0
    for each in settings.values():
        assert each["executor"]["gpu_backend"] == "cpu" and each["executor"]["status"] is False
        assert each["cluster"]["dashboard_address"].startswith("127.0.0.1:")


def _gpu_visible() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - CuPy missing, no driver, no device
        return False


@pytest.mark.parametrize("script,args", [("gpu_kernels", ["--smoke"]),
                                         ("gpu_reduce", ["--smoke"]),
                                         ("call_floor", ["--backend", "cuda"])])
def test_gpu_benchmarks_skip_cleanly_without_a_gpu(script, args, tmp_path):
    if _gpu_visible():
        pytest.skip("a GPU is visible: tests/gpu covers the GPU engine")
    out = tmp_path / f"{script}.json"
    done, result = run(script, *args, "--json" if script == "call_floor" else "--out",
                       str(out), timeout=120)
    assert "nothing measured" in done.stdout and result is None


def test_every_result_records_command_commit_and_machine():
    found = sorted(p.name for p in RESULTS.iterdir() if p.suffix == ".json")
    assert "gpu_isa_table.json" in found and len(found) > 1
    for name in found:
        result = json.loads((RESULTS / name).read_text())
        missing = {"command", "commit", "machine"} - set(result)
        assert not missing, f"{name} lacks {sorted(missing)}"
        assert result["command"].startswith("python ") and result["commit"]
        assert result["machine"]["description"], name


def test_results_are_the_latest_of_each_benchmark_per_machine_under_5_mb():
    names = [p.name for p in RESULTS.iterdir() if not p.name.endswith(".tmp")]
    assert sum((RESULTS / n).stat().st_size for n in names) < 5 * 1024 * 1024
    for name in names:
        assert name in CI_TABLE or RESULT_NAME.match(name), f"{name}: not <bench>_<machine>_<date>"
    # one result per benchmark and machine: the latest
    kinds = [re.sub(r"_\d{4}-\d{2}-\d{2}", "", n) for n in names if n.endswith(".json")]
    assert len(kinds) == len(set(kinds)), sorted(kinds)


def test_no_test_imports_a_benchmark_script():
    pattern = re.compile(r"^\s*(from|import)\s+benchmarks\b|sys\.path.*benchmarks", re.M)
    offenders = [p.name for p in (ROOT / "tests").rglob("*.py")
                 if p.name != Path(__file__).name and pattern.search(p.read_text())]
    assert offenders == []
