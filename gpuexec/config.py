"""gpuexec's tuning in Dask's configuration, under ``gpuexec.*`` (docs/configuration.md).

The defaults ship in ``gpuexec/gpuexec.yaml`` and are registered with Dask's
configuration on import, as distributed registers its own: a YAML in ``~/.config/dask``,
``DASK_GPUEXEC__...`` environment variables and ``dask.config.set`` override them. Only
the executor and worker layer imports this module; the kernel engine and the placement
policy take the values as arguments and load without Dask.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import dask
import yaml
from dask.utils import parse_timedelta

PATH = os.path.join(os.path.dirname(__file__), "gpuexec.yaml")

with open(PATH) as _f:
    defaults = yaml.safe_load(_f)

dask.config.update_defaults(defaults)

SYNC_MODES = ("auto", "spin", "yield", "block")  # gpuexec.kernels.gpu.runtime.SYNC_MODES


def get(key: str):
    """The value of ``gpuexec.<key>`` (e.g. ``get("reading.open-files")``)."""
    return dask.config.get(f"gpuexec.{key}")


def seconds(key: str) -> float | None:
    """``gpuexec.<key>`` as seconds (a number or a duration such as "200ms"); None stays."""
    value = get(key)
    if value is None or isinstance(value, (int, float)):
        return None if value is None else float(value)
    try:
        return float(parse_timedelta(value, default="seconds"))
    except (TypeError, ValueError, KeyError) as err:
        raise ValueError(f"gpuexec.{key} must be a duration, got {value!r}") from err


def _check(ok: bool, key: str, rule: str, value) -> None:
    if not ok:
        raise ValueError(f"gpuexec.{key} must be {rule}, got {value!r}")


@dataclass(frozen=True)
class PlacementSettings:
    """``gpuexec.placement.*``, read on the client for one call."""

    gpu_merge: int
    window: float
    crossover: float | None
    probe: int
    gpu_lost_after: float
    backups: float | None

    @classmethod
    def read(cls) -> "PlacementSettings":
        s = cls(int(get("placement.gpu-merge")), float(get("placement.window")),
                _number(get("placement.crossover")), int(get("placement.probe")),
                seconds("placement.gpu-lost-after"), _number(get("placement.backups")))
        _check(s.gpu_merge >= 1, "placement.gpu-merge", ">= 1", s.gpu_merge)
        _check(s.window > 0, "placement.window", "> 0", s.window)
        _check(s.probe >= 0, "placement.probe", ">= 0", s.probe)
        _check(s.gpu_lost_after >= 0, "placement.gpu-lost-after", ">= 0 seconds",
               s.gpu_lost_after)
        return s


@dataclass(frozen=True)
class ReadingSettings:
    """``gpuexec.reading.*``, read on the client for one call and shipped with its tasks
    (a worker applies them to each task: they follow ``dask.config.set`` around a run)."""

    read_on_device: bool
    read_ahead: bool
    inflate: str
    open_files: int
    nvcomp_min_streams: int
    nvcomp_slots: int
    nvcomp_wait: float

    @classmethod
    def read(cls) -> "ReadingSettings":
        s = cls(bool(get("reading.read-on-device")), bool(get("reading.read-ahead")),
                str(get("reading.inflate")), int(get("reading.open-files")),
                int(get("reading.nvcomp.min-streams")), int(get("reading.nvcomp.slots")),
                seconds("reading.nvcomp.wait"))
        _check(s.inflate in ("auto", "isal", "zlib"), "reading.inflate",
               "'auto', 'isal' or 'zlib'", s.inflate)
        _check(s.open_files >= 0, "reading.open-files", ">= 0", s.open_files)
        _check(s.nvcomp_min_streams >= 1, "reading.nvcomp.min-streams", ">= 1",
               s.nvcomp_min_streams)
        _check(s.nvcomp_slots >= 0, "reading.nvcomp.slots", ">= 0", s.nvcomp_slots)
        _check(s.nvcomp_wait >= 0, "reading.nvcomp.wait", ">= 0 seconds", s.nvcomp_wait)
        return s


@dataclass(frozen=True)
class WorkerSettings:
    """``gpuexec.worker.*`` and ``gpuexec.gpu.sync``: read where worker processes start
    (the embedded cluster's process, or ``gpuexec.scheduler.worker_cli`` on a worker host)."""

    profile_interval: float | None
    tick_interval: float | None
    system_monitor_interval: float | None
    gpu_sync: str

    @classmethod
    def read(cls) -> "WorkerSettings":
        s = cls(seconds("worker.profile-interval"), seconds("worker.tick-interval"),
                seconds("worker.system-monitor-interval"), str(get("gpu.sync")))
        for key in ("profile_interval", "tick_interval", "system_monitor_interval"):
            value = getattr(s, key)
            _check(value is None or value >= 0, "worker." + key.replace("_", "-"),
                   ">= 0 seconds or null", value)
        _check(s.gpu_sync in SYNC_MODES, "gpu.sync", f"one of {SYNC_MODES}", s.gpu_sync)
        return s


def chunk_timeout() -> float | None:
    """``gpuexec.chunk-timeout`` in seconds, None when off (docs/executor.md#faults)."""
    value = seconds("chunk-timeout")
    _check(value is None or value > 0, "chunk-timeout", "> 0 seconds or null", value)
    return value


def restart_timeout() -> float:
    """``gpuexec.worker.restart-timeout`` in seconds: how long a worker restarted after a
    chunk timeout, or lost, may take to come back (docs/executor.md#chunk-timeout)."""
    value = seconds("worker.restart-timeout")
    _check(value is not None and value > 0, "worker.restart-timeout", "> 0 seconds", value)
    return value


def calibration_dir() -> str | None:
    """``gpuexec.calibration-dir``, read in the process that loads or saves a calibration."""
    value = get("calibration-dir")
    return None if value in (None, "") else os.path.expanduser(str(value))


def _number(value) -> float | None:
    return None if value is None else float(value)
