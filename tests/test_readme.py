"""The README's contract: its first fenced code block holds exactly two commands (run the
main job, run the tests), `.ci/run` runs the second, and the first one works."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def first_block() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_first_block_holds_the_run_and_test_commands():
    assert first_block() == ["bash scripts/run.sh", "bash scripts/test.sh"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "sed -n 2p" in ci and "README.md" in ci  # CI runs the README's test command


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
