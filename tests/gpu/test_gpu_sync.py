"""``$GPUEXEC_GPU_SYNC`` on a real device: the primary context's scheduling flag reads
back as set, whether or not CuPy opened the context first (a GPU worker's CuPy may).
Skipped without a GPU (tests/gpu/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.gpu

PROBE = """
import sys
if sys.argv[1] == "cupy-first":
    import cupy
    cupy.zeros(1).sum().get()
from gpuexec.kernels.gpu import bindings_cuda, runtime
runtime.Runtime(bindings_cuda, 0)
print(bindings_cuda.sync_mode(0))
"""


@pytest.mark.parametrize("order", ["runtime-first", "cupy-first"])
@pytest.mark.parametrize("mode", ["block", "spin", "yield"])
def test_the_sync_mode_reads_back_from_the_driver(mode, order):
    pytest.importorskip("cuda.bindings")
    env = dict(os.environ, GPUEXEC_GPU_SYNC=mode,
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", PROBE, order], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == mode
