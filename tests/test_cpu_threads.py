"""The CPU engine's thread count in a process whose NUMBA_NUM_THREADS arrives after numba
was imported, as a Dask nanny's worker environment does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import os
    import numba
    import numpy as np
    import gpuexec.kernels as gk

    os.environ["NUMBA_NUM_THREADS"] = "1"   # the nanny's env, applied after the imports
    gk.set_num_threads(1)

    @numba.njit(parallel=True, cache=False)
    def total(x):
        s = 0.0
        for i in numba.prange(x.size):
            s += x[i]
        return s

    print(total(np.ones(100)))

    @numba.njit(cache=False)
    def later(x):  # a compile after the threads started re-reads numba's configuration
        return x + 1

    print(later(1))
""")


def test_thread_count_set_after_import_survives_a_later_compile(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=str(tmp_path))
    env.pop("NUMBA_NUM_THREADS", None)
    env["NUMBA_NUM_THREADS"] = "2"  # numba imports with 2 threads configured
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["100.0", "2"]
