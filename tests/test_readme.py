"""The README's contract: its first fenced code block holds exactly two commands (run the
main job, run the tests), `.ci/run` runs the second, and the first one works; it stays a
user's document of at most 200 lines; its quick start runs as pasted into a script, with
the executor's own cluster and with a `GPUCluster` held by the script."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAIN_GUARD = 'if __name__ == "__main__":'


def blocks(language: str = "") -> list[str]:
    """The README's fenced code blocks whose info string is ``language`` ("" = any)."""
    found = re.findall(r"^```([^\n]*)\n(.*?)^```", README.read_text(), re.S | re.M)
    return [body for info, body in found if not language or info.strip() == language]


def first_block() -> list[str]:
    return [line for line in blocks()[0].splitlines() if line.strip()]


def quick_start() -> str:
    """The first python block: a complete script."""
    return blocks("python")[0]


def cluster_variant() -> str:
    """The quick start with its main block replaced by the README's `GPUCluster` one."""
    variant = next(b for b in blocks("python") if "GPUCluster(" in b)
    head = quick_start().split(MAIN_GUARD)[0]
    return head + variant


def run_script(source: str, tmp_path: Path) -> subprocess.CompletedProcess:
    script = tmp_path / "quick_start.py"
    script.write_text(source)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_first_block_holds_the_run_and_test_commands():
    assert first_block() == ["bash scripts/run.sh", "bash scripts/test.sh"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "sed -n 2p" in ci and "README.md" in ci  # CI runs the README's test command


def test_readme_is_at_most_200_lines():
    assert len(README.read_text().splitlines()) <= 200


def test_quick_start_is_a_complete_guarded_script_on_a_shipped_sample():
    source = quick_start()
    compile(source, "quick_start.py", "exec")
    assert MAIN_GUARD in source  # process-based local clusters import the script again
    assert "processor.Runner(" in source and "GPUExecutor()" in source
    samples = re.findall(r"data/samples/[\w.]+\.root", source)
    assert samples and all((ROOT / s).is_file() for s in samples)


def test_cluster_variant_replaces_the_main_block():
    variant = next(b for b in blocks("python") if "GPUCluster(" in b)
    assert variant.startswith(MAIN_GUARD)
    source = cluster_variant()
    compile(source, "quick_start.py", "exec")
    assert source.count(MAIN_GUARD) == 1 and "GPUExecutor(client=cluster)" in source


@pytest.mark.slow
def test_quick_start_runs_as_a_script(tmp_path):
    proc = run_script(quick_start(), tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # nano_tt_v15.root: 200 events, each with a jet above 30 GeV
    assert "200 events, " in proc.stdout
    assert "200 leading jets filled" in proc.stdout


@pytest.mark.slow
def test_quick_start_runs_on_a_cluster_the_script_holds(tmp_path):
    proc = run_script(cluster_variant(), tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "dashboard: http" in proc.stdout
    runs = re.findall(r"^(\d+) events, (\d+) jets above 30 GeV$", proc.stdout, re.M)
    assert len(runs) == 2 and runs[0] == runs[1] and runs[0][0] == "200", proc.stdout[-3000:]


@pytest.mark.slow
def test_run_command_runs_an_adl_query_through_gpuexecutor(tmp_path):
    # scripts/run.sh = set up .venv (already there in a test run) + examples/run_adl.py
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "run_adl.py"), "--out", str(tmp_path), "--workers", "2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "PNG written to" in proc.stdout
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["adl_q6_trijet_btag.png", "adl_q6_trijet_pt.png"], pngs
    assert "200 entries" in proc.stdout  # every event of nano_tt_v15.root has >= 3 jets here
