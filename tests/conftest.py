import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hypothesis import HealthCheck, settings

# Fewer full (generation-2) collections in the test process. Each walks every object the
# collector tracks, and reading the samples' trees (1500-2656 branches) keeps ~100k new
# objects alive for a while: at CPython's default (a full collection considered every 10
# generation-1 collections) the suite ran 207 of them, 103 s of its 10 min on 2 cores
# (half of tests/test_open_files.py's time). Every 100: a quarter as many, 53 s, and
# ~100 MB more at peak. Tests that need a collection call gc.collect() themselves.
gc.set_threshold(gc.get_threshold()[0], gc.get_threshold()[1], 100)

os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".cache", "numba"))

# Differential tests: enough examples to hit empty lists, extremes and every layout,
# few enough that the whole suite stays within minutes on 2 cores.
settings.register_profile(
    "ci", max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough", max_examples=500, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="package")  # once for every test below this folder
def installed(tmp_path_factory):
    """gpuexec from a wheel of this checkout, installed in a folder outside it: (folder,
    environment). The environment puts the install on PYTHONPATH (this interpreter's
    site-packages hold the dependencies) and its ``gpuexec`` entry point on PATH."""
    root = Path(__file__).resolve().parents[1]
    base = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(base / "dist"), str(root)], check=True, cwd=base)
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
