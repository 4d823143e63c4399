"""Kernel-engine calibration (gpuexec.scheduler.calibration): the fit, the crossover,
the on-disk cache and the CLI on the CPU backend."""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuexec.scheduler import calibration as cal
from gpuexec.scheduler.calibration import Calibration, Fit, fit_linear

ROOT = Path(__file__).resolve().parents[1]
HAVE_CUPY = importlib.util.find_spec("cupy") is not None


def synthetic(gpu=True) -> Calibration:
    fits = {"cpu": Fit(1e-4, 1e-7)}
    if gpu:
        fits.update({"cuda": Fit(5e-4, 1e-9), "transfer": Fit(1e-5, 4e-9)})
    return Calibration(
        key="nvidia-sm-90__test-cpu__gpuexec-0.1.0", gpuexec_version="0.1.0",
        created="2026-01-01T00:00:00+00:00", host="h", cpu="test cpu",
        gpu={"vendor": "nvidia", "name": "NVIDIA H200", "arch": "sm_90"} if gpu else None,
        gpu_backend="cuda" if gpu else None, sizes=[1000, 10000], repeats=1, ops=["sum"],
        timings=[{"backend": "cpu", "op": "sum", "events": 1000, "seconds": 2e-4}], fits=fits,
        gpu_unavailable=None if gpu else "cuda: no CuPy")


def test_fit_recovers_a_line_from_noisy_timings():
    fixed, per_event = 2e-4, 3e-8
    noise = [1.02, 0.98, 1.01, 0.99, 1.015]
    sizes = [1_000, 10_000, 100_000, 1_000_000, 3_000_000]
    fit = fit_linear([(n, (fixed + n * per_event) * k) for n, k in zip(sizes, noise)])
    assert fit.fixed == pytest.approx(fixed, rel=0.05)
    assert fit.per_event == pytest.approx(per_event, rel=0.05)
    assert fit.throughput == pytest.approx(1 / fit.per_event)


def test_fit_keeps_costs_physical():
    # times that shrink with size: all fixed cost, a negligible per-event cost
    flat = fit_linear([(1_000, 2e-3), (10_000, 1.9e-3), (100_000, 1.8e-3)])
    assert flat.fixed == pytest.approx(1.9e-3, rel=0.05) and 0 < flat.per_event < 1e-12
    # a line through the origin with a little negative intercept: fixed clamped at 0
    origin = fit_linear([(1_000, 0.9e-6), (10_000, 1e-5), (100_000, 1e-4)])
    assert origin.fixed == 0.0 and origin.per_event == pytest.approx(1e-9, rel=0.1)
    one_size = fit_linear([(1_000, 1e-3), (1_000, 3e-3)])
    assert one_size == Fit(0.0, 2e-6)
    with pytest.raises(ValueError):
        fit_linear([(1_000, 0.0)])


def test_crossover_includes_the_host_to_device_copy():
    c = synthetic()
    gpu = Fit(5e-4 + 1e-5, 1e-9 + 4e-9)
    expected = (gpu.fixed - 1e-4) / (1e-7 - gpu.per_event)
    assert c.crossover == pytest.approx(expected)
    assert c.gpu_fit == gpu
    assert c.seed("cuda") == pytest.approx((gpu.fixed, 1 / gpu.per_event))
    assert c.seed("cpu") == pytest.approx((1e-4, 1e7))
    assert c.seed("hip") == c.seed("cpu")  # a GPU this calibration did not measure: no preference
    assert cal.seed_for(None, "cuda") == cal.seed_for(None, "cpu") == cal.NEUTRAL_SEED
    assert "crossover: " in c.table() and "events per chunk" in c.table()


def test_without_gpu_the_crossover_is_infinite():
    c = synthetic(gpu=False)
    assert math.isinf(c.crossover) and c.gpu_fit is None
    assert c.seed("cuda") == c.seed("cpu")
    assert "crossover: infinite (no GPU)" in c.table()
    assert c.to_dict()["crossover_events"] is None


def test_cache_round_trip(tmp_path):
    for original in (synthetic(), synthetic(gpu=False)):
        path = cal.save(original, tmp_path)
        assert path == tmp_path / f"{original.key}.json"
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
        data = json.loads(path.read_text())  # plain JSON: no Infinity, no pickles
        assert data["format"] == cal.FORMAT
        loaded = cal.load(original.key, tmp_path)
        assert loaded == original
        assert loaded.to_dict() == original.to_dict()
    assert cal.load("no-such-key", tmp_path) is None
    (tmp_path / "broken.json").write_text("{not json")
    assert cal.load("broken", tmp_path) is None
    stale = synthetic().to_dict()
    stale["format"] = cal.FORMAT + 1
    (tmp_path / "stale.json").write_text(json.dumps(stale))
    assert cal.load("stale", tmp_path) is None


def test_cache_location(monkeypatch, tmp_path):
    import dask

    from gpuexec import config

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cal.cache_dir() == tmp_path / "xdg" / "gpuexec" / "calibration"
    assert cal.cache_dir(config.calibration_dir()) == tmp_path / "xdg" / "gpuexec" / "calibration"
    with dask.config.set({"gpuexec.calibration-dir": str(tmp_path / "mine")}):
        assert cal.cache_dir(config.calibration_dir()) == tmp_path / "mine"
    assert cal.cache_dir(tmp_path / "arg") == tmp_path / "arg"


def test_key_names_device_cpu_and_version():
    key = cal.calibration_key({"vendor": "amd", "name": "AMD Instinct MI250X", "arch": "gfx90a"},
                              "AMD EPYC 7A53 64-Core Processor", "0.1.0")
    assert key == "amd-gfx90a__amd-epyc-7a53-64-core-processor__gpuexec-0.1.0"
    assert cal.calibration_key(None, "cpu", "0.2.0") == "nogpu__cpu__gpuexec-0.2.0"
    assert cal.calibration_key()  # this machine's, without touching a GPU runtime


def test_get_calibration_loads_the_cache_and_measures_on_demand(monkeypatch, tmp_path):
    stored = synthetic(gpu=False)
    monkeypatch.setattr(cal, "calibration_key", lambda *a, **k: stored.key)
    cal.save(stored, tmp_path)

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured although a calibration was cached")

    monkeypatch.setattr(cal, "calibrate", no_measuring)
    assert cal.get_calibration(directory=tmp_path) == stored
    fresh = synthetic()
    fresh.key = stored.key
    monkeypatch.setattr(cal, "calibrate", lambda sizes, repeats, gpu=True: fresh)
    assert cal.get_calibration(force=True, directory=tmp_path) == fresh
    assert cal.load(stored.key, tmp_path) == fresh


def test_calibrate_on_the_cpu_backend():
    c = cal.calibrate(sizes=[300, 3000], repeats=1, gpu=False)
    assert c.gpu is None and c.gpu_backend is None and "not requested" in c.gpu_unavailable
    assert math.isinf(c.crossover)
    assert c.ops == list(cal.OPS) and not c.skipped_ops
    assert {(t["backend"], t["op"], t["events"]) for t in c.timings} == \
        {("cpu", op, n) for op in cal.OPS for n in (300, 3000)}
    assert all(t["seconds"] > 0 for t in c.timings)
    assert c.cpu_fit.per_event > 0 and c.cpu_fit.fixed >= 0
    with pytest.raises(ValueError):
        cal.calibrate(sizes=[0], repeats=1, gpu=False)


def test_cli_measures_prints_the_table_and_caches(tmp_path, capsys):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "gpuexec.scheduler.calibration", "--force",
           "--sizes", "200,2000", "--repeats", "1", "--cache-dir", str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "fit cpu" in done.stdout and "measured now and written to" in done.stdout
    if not HAVE_CUPY:
        assert "crossover: infinite (no GPU)" in done.stdout
    (written,) = tmp_path.glob("*.json")
    assert json.loads(written.read_text())["sizes"] == [200, 2000]
    # without --force: loaded, not measured again
    assert cal.main(["--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"loaded from {written}" in out and "fit cpu" in out
    assert cal.main(["--cache-dir", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["key"] == written.stem
