"""Calibration of the kernel engine per device kind: the seed of the placement policy.

A small representative bundle of gk calls (sum, max, argmax with keepdims, pairs by
``combinations(n=2)``, a jagged ``filter``) runs on Poisson(5)-jagged float32 columns of
a few sizes, on the "cpu" backend (one thread: the cost of one CPU slot) and on the GPU
backend when one is available (``gk.get_backend("cuda")``/``"hip"`` raise
``BackendUnavailable`` otherwise). For each backend a line ``seconds = fixed + events x
per_event`` is fitted to the bundle's times (relative least squares, so small sizes fix
the fixed cost and large ones the slope); the host->device copy of the columns is fitted
the same way. The crossover is the chunk size where the GPU (compute plus the copy,
since chunks are read on the host) becomes no slower than the CPU; without a GPU it is
infinite.

The result is cached as JSON per device kind and gpuexec version under
a directory given (the executor's worker task passes Dask's ``gpuexec.calibration-dir``),
else ``$XDG_CACHE_HOME/gpuexec/calibration``, else ``~/.cache/gpuexec/calibration``; ``get_calibration()`` loads it (no GPU initialisation:
the key comes from ``devices.discover()``) or measures and stores it.

    python -m gpuexec.scheduler.calibration            # show the cached table (measure if none)
    python -m gpuexec.scheduler.calibration --force    # measure again
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import os
import platform
import re
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpuexec.scheduler.costs import crossover_events

DEFAULT_SIZES = (1_000, 10_000, 100_000, 1_000_000)
OPS = ("sum", "max", "argmax", "combinations", "filter")
MEAN_MULTIPLICITY = 5.0  # Poisson mean of the list lengths (jets per event)
FORMAT = 1  # version of the JSON layout
#: the seed of a pool that no calibration describes: the same for every pool, so that the
#: policy starts by balancing load and learns the difference from the first chunks
NEUTRAL_SEED = (1e-3, 1e6)


# -------------------------------------------------------------------------------- fit
@dataclass(frozen=True)
class Fit:
    """``seconds = fixed + events x per_event`` for one backend's bundle."""

    fixed: float
    per_event: float

    def seconds(self, events: float) -> float:
        return self.fixed + events * self.per_event

    @property
    def throughput(self) -> float:
        return 1.0 / self.per_event

    def __add__(self, other: "Fit") -> "Fit":
        return Fit(self.fixed + other.fixed, self.per_event + other.per_event)


_MIN_PER_EVENT = 1e-13  # s: keeps the throughput finite when times do not grow with size


def fit_linear(points: Sequence[tuple[float, float]]) -> Fit:
    """Least-squares line through (events, seconds) points with relative residuals
    (weights 1/seconds^2), constrained to fixed >= 0 and per_event > 0."""
    pts = [(float(n), float(s)) for n, s in points if s > 0 and math.isfinite(s)]
    if not pts:
        raise ValueError("no positive timings to fit")
    if len({n for n, _ in pts}) == 1:  # one size: no slope information, all per event
        n = pts[0][0]
        mean = sum(s for _, s in pts) / len(pts)
        return Fit(0.0, max(mean / n, _MIN_PER_EVENT)) if n > 0 else Fit(mean, _MIN_PER_EVENT)
    s00 = s01 = s11 = v0 = v1 = 0.0
    for n, s in pts:
        w = 1.0 / (s * s)
        s00 += w
        s01 += w * n
        s11 += w * n * n
        v0 += w * s
        v1 += w * n * s
    det = s00 * s11 - s01 * s01
    fixed = (v0 * s11 - v1 * s01) / det
    per_event = (s00 * v1 - s01 * v0) / det
    if fixed < 0:  # through the origin
        fixed, per_event = 0.0, v1 / s11
    if per_event <= _MIN_PER_EVENT:  # flat: all fixed cost
        fixed, per_event = v0 / s00, _MIN_PER_EVENT
    return Fit(fixed, per_event)


# ------------------------------------------------------------------------ calibration
@dataclass
class Calibration:
    """One device kind's calibration. ``timings``: every measured point
    (backend, op, events, seconds); ``fits``: "cpu", the GPU backend's name ("cuda" or
    "hip": compute on device-resident columns) and "transfer" (host->device copy of the
    columns); ``gpu``: the device (vendor, name, arch), None without one;
    ``gpu_unavailable``: why no GPU was calibrated."""

    key: str
    gpuexec_version: str
    created: str
    host: str
    cpu: str
    gpu: dict | None
    gpu_backend: str | None
    sizes: list[int]
    repeats: int
    ops: list[str]
    timings: list[dict] = field(default_factory=list)
    fits: dict[str, Fit] = field(default_factory=dict)
    gpu_unavailable: str | None = None
    skipped_ops: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0  # how long measuring took

    @property
    def cpu_fit(self) -> Fit:
        return self.fits["cpu"]

    @property
    def gpu_fit(self) -> Fit | None:
        """GPU compute plus the host->device copy (chunks are read on the host)."""
        if self.gpu_backend is None or self.gpu_backend not in self.fits:
            return None
        return self.fits[self.gpu_backend] + self.fits.get("transfer", Fit(0.0, 0.0))

    @property
    def crossover(self) -> float:
        """Events per chunk from which the GPU is no slower than one CPU slot; ``inf``
        without a GPU (or when the GPU never catches up)."""
        gpu = self.gpu_fit
        if gpu is None:
            return math.inf
        return crossover_events((gpu.fixed, gpu.per_event), (self.cpu_fit.fixed, self.cpu_fit.per_event))

    def seed(self, backend: str) -> tuple[float, float]:
        """(fixed seconds, events/s) per slot of a pool running ``backend``. A GPU
        backend this calibration did not measure gets the CPU seed (no preference)."""
        backend = _backend_name(backend)
        fit = self.cpu_fit
        if backend != "cpu" and self.gpu_fit is not None and backend in (self.gpu_backend, "gpu"):
            fit = self.gpu_fit
        return fit.fixed, fit.throughput

    # ---------------------------------------------------------------- (de)serialise
    def to_dict(self) -> dict:
        out = asdict(self)
        out["fits"] = {k: asdict(v) for k, v in self.fits.items()}
        cross = self.crossover
        out["crossover_events"] = None if math.isinf(cross) else cross
        out["format"] = FORMAT
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Calibration":
        if data.get("format") != FORMAT:
            raise ValueError(f"calibration format {data.get('format')!r}, expected {FORMAT}")
        data = dict(data)
        data.pop("format")
        data.pop("crossover_events", None)
        data["fits"] = {k: Fit(**v) for k, v in data["fits"].items()}
        return cls(**data)

    def table(self) -> str:
        lines = [f"gpuexec kernel-engine calibration  {self.key}",
                 f"  host {self.host}, CPU {self.cpu}, GPU "
                 + (f"{self.gpu['name']} ({self.gpu.get('arch') or '?'}) via {self.gpu_backend}"
                    if self.gpu else f"none ({self.gpu_unavailable})"),
                 f"  bundle per event: {', '.join(self.ops)} on Poisson({MEAN_MULTIPLICITY:g}) "
                 f"float32 lists; best of {self.repeats}; measured {self.created} in "
                 f"{self.seconds:.1f} s",
                 "",
                 f"  {'backend':<9}{'op':<14}{'events':>10}{'seconds':>13}{'ns/event':>11}"]
        for t in self.timings:
            lines.append(f"  {t['backend']:<9}{t['op']:<14}{t['events']:>10}"
                         f"{t['seconds']:>13.6f}{1e9 * t['seconds'] / t['events']:>11.2f}")
        for op, why in self.skipped_ops.items():
            lines.append(f"  (op {op} left out of the bundle: {why})")
        lines.append("")
        for name, fit in self.fits.items():
            lines.append(f"  fit {name:<9} fixed {fit.fixed * 1e6:10.1f} us   "
                         f"per event {fit.per_event * 1e9:9.2f} ns   "
                         f"({fit.throughput / 1e6:,.2f} M events/s)")
        cross = self.crossover
        if math.isinf(cross):
            why = "no GPU" if self.gpu_fit is None else "the GPU never catches up"
            lines.append(f"  crossover: infinite ({why}): every chunk goes to CPU workers")
        else:
            lines.append(f"  crossover: {cross:,.0f} events per chunk (GPU incl. host->device "
                         "copy vs one CPU slot)")
        return "\n".join(lines)


def _backend_name(backend) -> str:
    name = getattr(backend, "name", backend)
    name = str(name).lower()
    return {"numpy": "cpu", "host": "cpu", "rocm": "hip", "amd": "hip", "nvidia": "cuda"}.get(name, name)


def seed_for(calibration: Calibration | None, backend) -> tuple[float, float]:
    """The (fixed seconds, events/s) seed of a pool running ``backend``; the neutral
    seed without a calibration."""
    if calibration is None:
        return NEUTRAL_SEED
    return calibration.seed(backend)


# ----------------------------------------------------------------------- identity
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith(("model name", "cpu model", "hardware")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _gpu_engine_importable() -> bool:
    return importlib.util.find_spec("cupy") is not None


def device_identity() -> tuple[dict | None, str]:
    """(first visible GPU as a dict, CPU model) without initialising any GPU runtime;
    no GPU when the GPU engine (CuPy) cannot be imported here."""
    from gpuexec.scheduler import devices

    gpu = None
    if _gpu_engine_importable():
        found = devices.discover()
        if found:
            d = found[0]
            gpu = {"vendor": d.vendor, "name": d.name, "arch": d.arch}
    return gpu, cpu_model()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower()


def calibration_key(gpu: dict | None = None, cpu: str | None = None,
                    version: str | None = None) -> str:
    """The cache key: GPU (vendor and arch, else name) or "nogpu", CPU model, version."""
    if cpu is None:
        gpu, cpu = device_identity()
    if version is None:
        from gpuexec import __version__ as version
    where = f"{gpu['vendor']}-{gpu.get('arch') or gpu['name']}" if gpu else "nogpu"
    return f"{_slug(where)}__{_slug(cpu)}__gpuexec-{_slug(version)}"


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    if override is not None:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpuexec" / "calibration"


def cache_path(key: str, directory: str | os.PathLike | None = None) -> Path:
    return cache_dir(directory) / f"{key}.json"


def save(calibration: Calibration, directory: str | os.PathLike | None = None) -> Path:
    """Write atomically (a reader never sees half a file); returns the path."""
    path = cache_path(calibration.key, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(calibration.to_dict(), f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def load(key: str | None = None, directory: str | os.PathLike | None = None) -> Calibration | None:
    """The cached calibration for ``key`` (default: this machine's), None when there is
    none or it cannot be read (an unreadable cache is measured again, not trusted)."""
    path = cache_path(key or calibration_key(), directory)
    try:
        with open(path) as f:
            return Calibration.from_dict(json.load(f))
    except (OSError, ValueError, TypeError, KeyError):
        return None


# ------------------------------------------------------------------------ measuring
def _columns(events: int, seed: int):
    """A Poisson(5)-jagged float32 "pt" column of ``events`` lists and a mask on it."""
    import awkward as ak
    import numpy as np

    rng = np.random.default_rng(seed)
    counts = rng.poisson(MEAN_MULTIPLICITY, events)
    content = (15.0 + rng.exponential(30.0, int(counts.sum()))).astype(np.float32)
    pt = ak.unflatten(content, counts)
    mask = ak.unflatten(content > 30.0, counts)
    return pt, mask


def _bundle(gk, pt, mask, backend) -> dict:
    return {
        "sum": lambda: gk.sum(pt, axis=1, backend=backend),
        "max": lambda: gk.max(pt, axis=1, backend=backend),
        "argmax": lambda: gk.argmax(pt, axis=1, keepdims=True, backend=backend),
        "combinations": lambda: gk.combinations(pt, 2, backend=backend),
        "filter": lambda: gk.filter(pt, mask, backend=backend),
    }


def _synchronizer(backend):
    import numpy as np

    xp = getattr(backend, "nplike", np)
    if xp is np or xp is None:
        return lambda: None
    return lambda: xp.cuda.Device().synchronize()


def _best_of(fn, sync, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def _gpu_backend(gk):
    """(backend, name, device dict) of the GPU engine here, or (None, None, reason)."""
    reasons = []
    for name in ("cuda", "hip"):
        try:
            be = gk.get_backend(name)
        except gk.BackendUnavailable as err:
            reasons.append(f"{name}: {err}")
            continue
        except Exception as err:  # a broken driver must not stop the CPU calibration
            reasons.append(f"{name}: {type(err).__name__}: {err}")
            continue
        dev = getattr(be, "device", None)
        info = {"vendor": "nvidia" if name == "cuda" else "amd",
                "name": getattr(dev, "name", name), "arch": getattr(dev, "arch", None)}
        return be, name, info
    return None, None, "; ".join(reasons)


def calibrate(sizes: Sequence[int] = DEFAULT_SIZES, repeats: int = 3, *, gpu: bool = True,
              seed: int = 12345) -> Calibration:
    """Measure the bundle on the CPU backend (one thread) and, if ``gpu`` and one is
    available, on the GPU backend; returns the Calibration (not saved)."""
    import gpuexec.kernels as gk
    from gpuexec import __version__

    sizes = sorted({int(n) for n in sizes})
    if not sizes or sizes[0] < 1:
        raise ValueError(f"sizes must be positive event counts, got {sizes}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    started = time.perf_counter()
    cpu_be = gk.get_backend("cpu")
    gpu_be, gpu_name, gpu_info = _gpu_backend(gk) if gpu else (None, None, "not requested")
    unavailable = None
    if gpu_be is None:
        unavailable, gpu_info = gpu_info, None

    backends = [("cpu", cpu_be)] + ([(gpu_name, gpu_be)] if gpu_be is not None else [])
    data = {n: _columns(n, seed + n) for n in sizes}
    moved = {}
    timings: list[dict] = []
    skipped: dict[str, str] = {}
    previous_threads = gk.get_num_threads()
    gk.set_num_threads(1)  # one CPU slot = one thread
    try:
        if gpu_be is not None:  # the host->device copy of the columns
            sync = _synchronizer(gpu_be)
            for n in sizes:
                pt, mask = data[n]
                moved[n] = (gpu_be.adopt(pt), gpu_be.adopt(mask))
                sync()
                seconds = _best_of(lambda: (gpu_be.adopt(pt), gpu_be.adopt(mask)), sync, repeats)
                timings.append({"backend": "transfer", "op": "host->device", "events": n,
                                "seconds": seconds})
        for name, be in backends:
            sync = _synchronizer(be)
            for n in sizes:
                pt, mask = moved[n] if name != "cpu" else data[n]
                for op, fn in _bundle(gk, pt, mask, be).items():
                    if op in skipped:
                        continue
                    try:
                        fn()  # compile / warm up; not timed
                        sync()
                    except Exception as err:  # an op this engine lacks leaves the bundle
                        skipped[op] = f"{name}: {type(err).__name__}: {err}"
                        continue
                    timings.append({"backend": name, "op": op, "events": n,
                                    "seconds": _best_of(fn, sync, repeats)})
    finally:
        gk.set_num_threads(previous_threads)
    ops = [op for op in OPS if op not in skipped]
    timings = [t for t in timings if t["op"] not in skipped]
    fits = {}
    for name in ["cpu"] + ([gpu_name] if gpu_be is not None else []) + (
            ["transfer"] if gpu_be is not None else []):
        totals = {}
        for t in timings:
            if t["backend"] == name:
                totals[t["events"]] = totals.get(t["events"], 0.0) + t["seconds"]
        if totals:
            fits[name] = fit_linear(sorted(totals.items()))
    if "cpu" not in fits:
        raise RuntimeError(f"the CPU calibration measured nothing (ops left out: {skipped})")
    gpu_for_key, cpu = device_identity()
    return Calibration(
        key=calibration_key(gpu_for_key, cpu, __version__),
        gpuexec_version=__version__,
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        host=socket.gethostname(), cpu=cpu, gpu=gpu_info, gpu_backend=gpu_name,
        sizes=sizes, repeats=repeats, ops=ops, timings=timings, fits=fits,
        gpu_unavailable=unavailable, skipped_ops=skipped,
        seconds=time.perf_counter() - started)


def get_calibration(force: bool = False, directory: str | os.PathLike | None = None,
                    sizes: Sequence[int] = DEFAULT_SIZES, repeats: int = 3,
                    gpu: bool = True) -> Calibration:
    """The cached calibration of this machine, measured (and cached) when there is none
    or ``force``."""
    if not force:
        cached = load(None, directory)
        if cached is not None:
            return cached
    cal = calibrate(sizes, repeats, gpu=gpu)
    save(cal, directory)
    return cal


# ----------------------------------------------------------------------------- CLI
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpuexec.scheduler.calibration",
        description="Show (or measure) the kernel-engine calibration that seeds gpuexec's "
                    "CPU/GPU placement.")
    parser.add_argument("--force", action="store_true", help="measure again even if cached")
    parser.add_argument("--sizes", default=",".join(str(n) for n in DEFAULT_SIZES),
                        help="comma-separated chunk sizes in events (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per point (best kept)")
    parser.add_argument("--cache-dir", default=None,
                        help=f"cache directory (default {cache_dir()})")
    parser.add_argument("--cpu-only", action="store_true", help="do not calibrate a GPU")
    parser.add_argument("--json", action="store_true", help="print the JSON instead of the table")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    cached = None if args.force else load(None, args.cache_dir)
    cal = cached or get_calibration(True, args.cache_dir, sizes, args.repeats, not args.cpu_only)
    path = cache_path(cal.key, args.cache_dir)
    if args.json:
        print(json.dumps(cal.to_dict(), indent=1))
    else:
        print(cal.table())
        print(f"\n  {'loaded from' if cached else 'measured now and written to'} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
