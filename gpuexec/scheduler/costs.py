"""The cost model of a worker pool: seconds per chunk, learned online (pure Python).

Each pool is modelled by its slots (chunks it runs at once: workers x tasks per worker)
and a cost model ``seconds = fixed + events / throughput`` per slot. The cost models are
seeded from the kernel-engine calibration (``gpuexec.scheduler.calibration``) and refined
from what each pool actually achieves (``CostModel.observe``):

- a per-pool *scale*: the exponentially weighted geometric mean of observed seconds over
  the calibrated prediction. The calibration times a bundle of kernel calls, not the
  user's processor, so absolute times differ by a factor common to both pools; a pool
  without observations of its own uses the scale learned from all pools, so that an
  unmeasured pool is not mistaken for a fast one.
- the *shape* (fixed cost versus per-event cost): an exponentially weighted least-squares
  fit of the observed (events, seconds) points, with the scaled calibration as a weak
  prior (two pseudo-observations), so equal-sized chunks (which carry no shape
  information) keep the calibrated shape and chunks of several sizes (merged GPU tasks,
  the last chunk of a file) correct it.

``crossover_events`` gives the chunk size from which a GPU cost line drops to a CPU one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

CPU = "cpu"
GPU = "gpu"
KINDS = (CPU, GPU)
_TINY = 1e-12  # seconds: guards ratios for an empty chunk with no fixed cost


def ew(mean: float | None, value: float, alpha: float) -> float:
    """Exponentially weighted mean: ``value`` weighs ``alpha``; the first value starts it."""
    return value if mean is None else (1 - alpha) * mean + alpha * value



class CostModel:
    """Seconds one slot of a pool takes for a chunk: ``fixed + events / throughput``.

    Seeded with the calibrated ``fixed`` (s) and ``throughput`` (events/s) and refined by
    ``observe(events, seconds)`` (see the module docstring). ``halflife``: observations
    after which an old one counts half; ``prior_weight``: how many observations the
    calibrated shape is worth; ``ref_events``: the chunk size around which the prior's
    shape is anchored (the pseudo-observations sit at half and twice this size)."""

    def __init__(self, fixed: float, throughput: float, *, halflife: float = 3.0,
                 prior_weight: float = 1.0, ref_events: float = 100_000):
        if not (fixed >= 0 and math.isfinite(fixed)):
            raise ValueError(f"fixed cost must be finite and >= 0 s, got {fixed}")
        if not (throughput > 0):
            raise ValueError(f"throughput must be > 0 events/s, got {throughput}")
        if halflife <= 0 or prior_weight <= 0 or ref_events <= 0:
            raise ValueError("halflife, prior_weight and ref_events must be > 0")
        self.seed_fixed = float(fixed)
        self.seed_throughput = float(throughput)
        self.decay = 0.5 ** (1.0 / halflife)
        self.prior_weight = float(prior_weight)
        self.ref = float(ref_events)
        self.observations = 0
        self._log_scale: float | None = None  # EW mean of log(observed / seed prediction)
        # EW normal equations of the fit in normalised coordinates (see _features)
        self._m = [0.0, 0.0, 0.0]  # [s00, s01, s11]
        self._v = [0.0, 0.0]

    # the calibrated prediction, before any scale
    def seed_seconds(self, events: float) -> float:
        return self.seed_fixed + events / self.seed_throughput

    def _features(self, events: float) -> tuple[float, float]:
        # fit y / seed(n) = A * c0 / seed(n) + B * c0 * (n / ref) / seed(n): both features
        # are O(1) near the reference size, and residuals are relative to the seed shape
        c0 = self.seed_seconds(self.ref)
        base = max(self.seed_seconds(events), _TINY)
        return c0 / base, c0 * (events / self.ref) / base

    def observe(self, events: float, seconds: float) -> float | None:
        """Learn from one task of ``events`` that took ``seconds``; returns its log ratio
        to the seed's prediction (None: nothing learned)."""
        if not (seconds > 0 and math.isfinite(seconds)):
            return None  # a failed or unmeasured task says nothing about speed
        events = max(0.0, float(events))
        ratio = math.log(seconds / max(self.seed_seconds(events), _TINY))
        self._log_scale = ew(self._log_scale, ratio, 1.0 - self.decay)
        f0, f1 = self._features(events)
        target = seconds / max(self.seed_seconds(events), _TINY)
        d = self.decay
        self._m = [d * self._m[0] + f0 * f0, d * self._m[1] + f0 * f1, d * self._m[2] + f1 * f1]
        self._v = [d * self._v[0] + f0 * target, d * self._v[1] + f1 * target]
        self.observations += 1
        return ratio

    @property
    def own_scale(self) -> float | None:
        """Observed over calibrated seconds (EW geometric mean); None before observations."""
        return None if self._log_scale is None else math.exp(self._log_scale)

    def params(self, scale: float | None = None) -> tuple[float, float]:
        """(fixed seconds, seconds per event) of the current fit. ``scale``: the factor
        applied to the calibrated prior when this pool has no observations of its own."""
        s = self.own_scale if self.own_scale is not None else (1.0 if scale is None else scale)
        c0 = self.seed_seconds(self.ref)
        # prior: the scaled seed at half and twice the reference size
        m, v = list(self._m), list(self._v)
        for events in (0.5 * self.ref, 2.0 * self.ref):
            f0, f1 = self._features(events)
            w = self.prior_weight / 2
            m[0] += w * f0 * f0
            m[1] += w * f0 * f1
            m[2] += w * f1 * f1
            v[0] += w * f0 * s
            v[1] += w * f1 * s
        det = m[0] * m[2] - m[1] * m[1]
        if det > 1e-12 * max(m[0] * m[2], 1e-300):
            a = (v[0] * m[2] - v[1] * m[1]) / det
            b = (m[0] * v[1] - m[1] * v[0]) / det
        else:
            a = b = -1.0  # degenerate: fall through to the scaled seed
        fixed, per_event = a * c0, b * c0 / self.ref
        if per_event <= 0 or not math.isfinite(per_event):  # no sensible slope: scaled seed
            return s * self.seed_fixed, s / self.seed_throughput
        if fixed < 0:  # the data want a negative fixed cost: through the origin instead
            per_event = (v[1] / m[2]) * c0 / self.ref
            fixed = 0.0
        return fixed, per_event

    def seconds(self, events: float, scale: float | None = None) -> float:
        fixed, per_event = self.params(scale)
        return fixed + max(0.0, events) * per_event

    def describe(self, scale: float | None = None) -> dict:
        fixed, per_event = self.params(scale)
        return {"fixed_s": fixed, "throughput_events_per_s": 1.0 / per_event,
                "seed_fixed_s": self.seed_fixed, "seed_throughput_events_per_s": self.seed_throughput,
                "scale": self.own_scale, "observations": self.observations}


def crossover_events(gpu: tuple[float, float], cpu: tuple[float, float]) -> float:
    """Smallest chunk size (events) from which the GPU cost ``(fixed, per_event)`` is at
    most the CPU cost; ``math.inf`` when the GPU never catches up."""
    (fg, cg), (fc, cc) = gpu, cpu
    if cg < cc:
        return max(0.0, (fg - fc) / (cc - cg))
    if cg == cc and fg <= fc:
        return 0.0
    return math.inf


# ---------------------------------------------------------------------------- pools
@dataclass
class Pool:
    """A worker pool as the policy sees it: ``slots`` chunks at once, each costing
    ``model.seconds(events)``."""

    name: str
    kind: str  # "cpu" or "gpu"
    slots: int
    model: CostModel
    merge: int = 1  # chunks per task (merged GPU tasks share one fixed cost)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"pool {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.slots < 1:
            raise ValueError(f"pool {self.name!r}: slots must be >= 1, got {self.slots}")
        if self.merge < 1:
            raise ValueError(f"pool {self.name!r}: merge must be >= 1, got {self.merge}")


def pool_kind(pool) -> str:
    """"gpu" for a ``WorkerPool``-like object whose tasks request a GPU (or named "gpu"),
    else "cpu" (a GPU pool run on the CPU backend is still a GPU pool)."""
    requests = dict(getattr(pool, "task_resources", ()) or ())
    declares = dict(getattr(pool, "resources", ()) or ())
    if "GPU" in requests or "GPU" in declares or getattr(pool, "name", "") == GPU:
        return GPU
    return CPU


def pool_slots(pool) -> int:
    """Chunks a ``WorkerPool``-like pool runs at once: workers x how many of its tasks'
    resource requests each worker's resources hold (at least one per worker)."""
    requests = dict(getattr(pool, "task_resources", ()) or ())
    declares = dict(getattr(pool, "resources", ()) or ())
    per_worker = getattr(pool, "threads", 1)
    for name, need in requests.items():
        if need > 0 and name in declares:
            per_worker = min(per_worker, int(declares[name] // need))
    return max(1, int(pool.workers) * max(1, per_worker))
