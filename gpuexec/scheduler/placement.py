"""Where each chunk runs: the size- and load-aware placement policy (pure Python, no Dask).

A chunk goes to a GPU pool when its size is at or above the GPU crossover (events per
chunk where the GPU pool's predicted time drops to the CPU pool's) *and* the GPU pool's
predicted finish time is earlier than the CPU pool's; otherwise to the CPU pool. When
chunks are assigned as others complete (``assign(..., backlog_events=...)``, windowed
submission), a pool with a slot idle now takes the chunk if it finishes it before the
predicted end of all remaining work, so that the fastest pool's short queue does not
leave the other pool idle. Below the crossover that holds for a GPU pool too: slower per
chunk than a CPU slot, an idle GPU slot that finishes the chunk before the run's end
shortens the run (ADL Q8 on the H200 host: a GPU chunk took 0.5 s, a CPU chunk 0.2 s, and
the one GPU worker of the default pools sat idle on its cores).

Each pool is modelled by its slots (chunks it runs at once: workers x tasks per worker),
a cost model ``seconds = fixed + events / throughput`` per slot, and a queue (per slot,
the predicted time it becomes free). The cost models are seeded from the kernel-engine
calibration (``gpuexec.scheduler.calibration``) and refined online from what each pool
actually achieves (``observe``):

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

Every decision is recorded (``decisions()`` returns plain dicts for JSON and the run
report) with the predicted and, once observed, the actual seconds.

``merge_for_gpu`` merges adjacent chunks of one file into larger GPU tasks (coffea's
``Runner`` cuts equal chunks): place the chunks first, merge those placed on a GPU pool,
``mark_merged`` each merged group and ``observe`` it with the ids of its parts. A pool
whose tasks hold ``merge`` chunks charges each chunk a ``1/merge`` share of the fixed
cost (crossover and finish times alike), and queues the chunks of one task on one slot
until the task is full or the executor submits the batch (``end_batch``).
``simulate`` replays a placement on modelled pools to compare its makespan with all-CPU
and all-GPU placement.

Once every chunk is placed, ``backups`` offers second copies of tasks in flight to another
pool's idle slots where the copy is predicted to finish clearly earlier (stragglers, or a
slow pool's last chunks bound before any time was measured): the executor reports when
tasks start (``started``), the first copy to complete counts (``settle``), and a cancelled
copy that ran to its end anyway still teaches its pool's model (``lost``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

CPU = "cpu"
GPU = "gpu"
KINDS = (CPU, GPU)
_TINY = 1e-12  # seconds: guards ratios for an empty chunk with no fixed cost
#: seconds between two looks for stragglers to copy while tasks run and none completes
BACKUP_TICK = 0.1


# ----------------------------------------------------------------------------- chunks
@dataclass(frozen=True)
class Chunk:
    """One unit of work: entries ``[start, stop)`` of ``tree`` in ``file``."""

    id: int
    file: str = ""
    start: int = 0
    stop: int = 0
    tree: str | None = None
    dataset: str | None = None

    def __post_init__(self):
        if self.stop < self.start:
            raise ValueError(f"chunk {self.id}: entrystop {self.stop} < entrystart {self.start}")

    @property
    def events(self) -> int:
        return self.stop - self.start

    @classmethod
    def of(cls, item, id: int) -> "Chunk":
        """The chunk of a coffea ``WorkItem`` (or anything with filename, entrystart,
        entrystop; a plain int is a chunk of that many events)."""
        if isinstance(item, Chunk):
            return replace(item, id=id)
        if isinstance(item, int):
            return cls(id, "", 0, item)
        return cls(id, str(getattr(item, "filename", "")), int(item.entrystart),
                   int(item.entrystop), getattr(item, "treename", None),
                   getattr(item, "dataset", None))


def _ew(mean: float | None, value: float, alpha: float) -> float:
    """Exponentially weighted mean: ``value`` weighs ``alpha``; the first value starts it."""
    return value if mean is None else (1 - alpha) * mean + alpha * value


# ------------------------------------------------------------------------- cost model
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
        self._log_scale = _ew(self._log_scale, ratio, 1.0 - self.decay)
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


# --------------------------------------------------------------------------- records
@dataclass
class Decision:
    """Where one chunk went and why; ``actual_seconds`` is filled in by ``observe``."""

    chunk: int
    file: str
    dataset: str | None
    tree: str | None
    entrystart: int
    entrystop: int
    events: int
    pool: str
    reason: str
    predicted_seconds: float
    predicted_start: float
    predicted_finish: float
    crossover: float | None  # events; None = infinite (no GPU pool can win)
    slot: int = 0
    task: int | None = None  # merged GPU task this chunk belongs to
    actual_seconds: float | None = None  # of the copy whose output was taken
    started_at: float | None = None  # when its task started on a worker (``started``)
    finished_at: float | None = None
    retried_from: str | None = None  # pool of a failed first attempt
    backup_pool: str | None = None  # pool of a second copy (``Placement.backups``)
    backup_predicted_seconds: float | None = None  # of the copy's task
    taken_from: str | None = None  # pool whose output counted (with a backup: who won)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Backup:
    """A second copy of a task in flight, on another pool's idle slots: ``chunks`` (the
    task's chunk ids) predicted to finish at ``original_finish`` where they are, at
    ``copy_finish`` on ``pool``. The first copy to complete counts (``settle``)."""

    chunks: tuple[int, ...]
    from_pool: str
    pool: str
    original_finish: float
    copy_finish: float


@dataclass
class _Copy:
    pool: str
    slot: int
    predicted_seconds: float
    actual_seconds: float | None = None
    started_at: float | None = None


@dataclass
class _Slot:
    """One slot's queue: its chunks not yet observed, in order (the first is running
    since ``anchor``: the slot's last completion, or when it got work while idle)."""

    anchor: float = 0.0
    outstanding: dict = field(default_factory=dict)  # chunk id -> predicted seconds

    def free_at(self, now: float) -> float:
        if not self.outstanding:
            return max(now, self.anchor)
        queued = iter(self.outstanding.values())
        running = next(queued)
        # a running chunk past its predicted end is still running: it ends at the earliest now
        return max(now, self.anchor + running) + sum(queued)

    def idle(self, now: float) -> bool:
        return not self.outstanding and self.anchor <= now

    def held(self, now: float) -> bool:
        """Busy with no chunk of this run's queue: a cancelled task that runs on."""
        return not self.outstanding and self.anchor > now

    def add(self, chunk_id: int, seconds: float, now: float) -> None:
        if not self.outstanding:
            self.anchor = max(self.anchor, now)
        self.outstanding[chunk_id] = seconds

    def drop(self, chunk_ids, busy_until: float | None = None) -> None:
        """Take ``chunk_ids`` off the queue without their completion (a cancelled
        copy); ``busy_until``: they were running, and a running task cannot be stopped:
        the slot is busy until then (or until ``Placement.lost`` says it ended)."""
        for cid in chunk_ids:
            self.outstanding.pop(cid, None)
        if busy_until is not None:
            self.anchor = max(self.anchor, busy_until)


def straggler_end(started: float, seconds: float, now: float) -> float:
    """When a task started at ``started`` and predicted ``seconds`` ends. One past its
    predicted end is a straggler: it is guessed to need as long again as it has overrun,
    and at least half its prediction."""
    end = started + seconds
    if end < now:
        end = now + max(0.5 * seconds, now - end)
    return end


def _ids(chunk_ids) -> list[int]:
    """One chunk id or several, as a list."""
    return [chunk_ids] if isinstance(chunk_ids, int) else list(chunk_ids)


# --------------------------------------------------------------------------- policy
class Placement:
    """The placement policy over ``pools`` (``Pool`` objects, at least one).

    ``assign(chunk)`` picks a pool and records the decision; ``observe(chunk_ids,
    seconds)`` feeds back an actual time (a list of ids for a merged task).
    ``crossover``: a fixed crossover in events (overrides the models'); ``probe``: give
    each pool its first ``probe`` chunks regardless of the models, so that every pool is
    measured early (useful when the calibration does not describe a pool, e.g. a GPU pool
    running on the CPU backend); ``explore``: once actual times are being observed, send
    the next eligible chunk to a pool that has none measured and none queued (an
    unmeasured pool is predicted with the scale measured on the others, which hides a
    pool that alone is slow or fast); ``unmeasured_depth``: a pool with no observation
    of its own holds at most this many queued tasks per slot while another pool has
    room (None: no limit): the seeds come from kernel timings, not the user's processor,
    and can be off by 100x for one pool more than another (seen on the H200: merged GPU
    tasks worth 26 chunks queued before the GPU's first result set the makespan);
    ``depth``: with ``assign(..., may_wait=True)`` a pool holds at most ``depth`` x its
    slots (x ``merge`` chunks per task) assigned and not yet observed, and a chunk whose
    chosen pool is at that depth waits (``assign`` returns None) instead of queueing
    (None: no limit). A chunk is bound to a pool late, when that pool is about to run it:
    a prediction made while every slot is busy cannot commit the rest of the run to one
    queue (seen on the H200, ADL Q8: 60 chunks queued on 4 CPU slots while 24 GPU slots
    sat idle for the last second of the run);
    ``backup_margin``: once no chunk waits, ``backups`` offers a second copy of a task
    in flight to another pool's idle slots when the copy is predicted to finish earlier by
    more than this fraction of its own time (None: never; see ``backups``);
    ``clock``: seconds since the run started (default: a monotonic clock started now),
    used when ``now`` is not passed."""

    def __init__(self, pools: Iterable[Pool], *, crossover: float | None = None,
                 probe: int = 0, explore: bool = True, unmeasured_depth: int | None = None,
                 depth: float | None = None, backup_margin: float | None = None,
                 clock: Callable[[], float] | None = None):
        self.pools = {p.name: p for p in pools}
        if not self.pools:
            raise ValueError("placement needs at least one pool")
        self.fixed_crossover = crossover
        self.probe = int(probe)
        self.explore = bool(explore)
        if unmeasured_depth is not None and unmeasured_depth < 1:
            raise ValueError(f"unmeasured_depth must be >= 1 or None, got {unmeasured_depth}")
        self.unmeasured_depth = unmeasured_depth
        if depth is not None and not depth > 0:
            raise ValueError(f"depth must be > 0 or None, got {depth}")
        self.depth = depth
        if backup_margin is not None and not backup_margin >= 0:
            raise ValueError(f"backup_margin must be >= 0 or None, got {backup_margin}")
        self.backup_margin = backup_margin
        if clock is None:
            start = time.monotonic()
            clock = lambda: time.monotonic() - start  # noqa: E731
        self.clock = clock
        self._slots = {name: [_Slot() for _ in range(p.slots)] for name, p in self.pools.items()}
        self._records: dict[int, Decision] = {}
        self._copies: dict[int, _Copy] = {}  # chunk id -> its backup copy
        self._assigned = {name: 0 for name in self.pools}
        self._log_scale: float | None = None  # EW over all pools' observations
        self._next_task = 0
        # merging pools: (slot, chunks) of the task being filled in this batch
        self._open: dict[str, tuple[int, int]] = {}

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_pools(cls, worker_pools: Iterable, calibration=None, *, gpu_merge: int = 1,
                   **kwargs) -> "Placement":
        """A policy for ``gpuexec.scheduler.cluster.WorkerPool``-like pools (name,
        workers, threads, resources, task_resources, backend), seeded from a
        ``Calibration`` (``calibration.seed(backend)`` gives fixed seconds and events/s
        per slot; None: the same neutral seed for every pool, ``calibration.NEUTRAL_SEED``,
        so that load decides until times are observed). ``gpu_merge``: chunks the
        executor merges into one GPU task."""
        from gpuexec.scheduler import calibration as cal

        pools = []
        for wp in worker_pools:
            if getattr(wp, "workers", 0) < 1:
                continue
            kind = pool_kind(wp)
            backend = getattr(wp, "backend", CPU)
            fixed, throughput = cal.seed_for(calibration, backend)
            pools.append(Pool(wp.name, kind, pool_slots(wp), CostModel(fixed, throughput),
                              merge=gpu_merge if kind == GPU else 1))
        return cls(pools, **kwargs)

    # -------------------------------------------------------------------- models
    @property
    def global_scale(self) -> float | None:
        return None if self._log_scale is None else math.exp(self._log_scale)

    def predict(self, pool: str, events: float) -> float:
        """Predicted seconds of a chunk of ``events`` on one slot of ``pool`` (its share
        of a merged task's fixed cost on a merging pool)."""
        fixed, per_event = self._params(pool)
        return fixed + max(0.0, events) * per_event

    def _params(self, pool: str) -> tuple[float, float]:
        """(fixed seconds per chunk, seconds per event): a merging pool's chunks share
        their task's fixed cost. Measured on the H200 (ADL Q8, 6 GPU workers): tasks of
        4 chunks of 50k events took 0.45 s + 1.3 us/event; charged the whole 0.45 s per
        chunk, the GPU pool looked slower than the CPU workers and got 1.2M of 5M events
        while it ran all 5M faster alone."""
        p = self.pools[pool]
        fixed, per_event = p.model.params(self.global_scale)
        return fixed / p.merge, per_event

    def crossover(self, gpu_pool: str | None = None) -> float:
        """Events per chunk from which ``gpu_pool`` (default: the first GPU pool) is
        predicted no slower than the fastest CPU pool; ``inf`` without a GPU pool, 0
        without a CPU pool."""
        if self.fixed_crossover is not None:
            return float(self.fixed_crossover)
        gpus = [n for n, p in self.pools.items() if p.kind == GPU]
        cpus = [n for n, p in self.pools.items() if p.kind == CPU]
        if gpu_pool is None:
            if not gpus:
                return math.inf
            gpu_pool = gpus[0]
        if not cpus:
            return 0.0
        g = self._params(gpu_pool)
        return min(crossover_events(g, self._params(c)) for c in cpus)

    # ------------------------------------------------------------------ decisions
    def _held_back(self, pool: str, now: float) -> bool:
        """Whether a chunk for ``pool`` had better wait: its earliest slot is held by a
        cancelled task that runs on (bound now, the chunk would queue behind it on that
        worker however long it runs) while another pool has work whose completion will
        place the chunk anew."""
        slot, _start = self._best_slot(pool, now)
        return (self._slots[pool][slot].held(now)
                and any(s.outstanding for name, slots in self._slots.items() if name != pool
                        for s in slots))

    def _queued(self, pool: str) -> int:
        """Chunks assigned to ``pool`` and not yet observed."""
        return sum(len(s.outstanding) for s in self._slots[pool])

    def capacity(self, pool: str) -> float:
        """Chunks ``pool`` may hold assigned and not yet observed (``depth``; inf: no
        limit): at least one task per slot."""
        if self.depth is None:
            return math.inf
        p = self.pools[pool]
        return max(p.slots, math.ceil(self.depth * p.slots)) * p.merge

    def _tasks_per_slot(self, pool: str, now: float) -> float:
        """Tasks assigned to ``pool`` and not yet observed, per slot (a merging pool's
        task holds ``merge`` chunks); a slot kept busy by a cancelled task that runs on
        counts one task."""
        slots = self._slots[pool]
        merge = self.pools[pool].merge
        held = sum(1 for s in slots if s.held(now))
        return self._queued(pool) / (len(slots) * merge) + held / len(slots)

    def _now(self, now: float | None) -> float:
        return self.clock() if now is None else float(now)

    def _best_slot(self, pool: str, now: float) -> tuple[int, float]:
        slots = self._slots[pool]
        open_ = self._open.get(pool)
        if open_ is not None:  # the chunks of one merged task queue on one slot
            return open_[0], slots[open_[0]].free_at(now)
        index = min(range(len(slots)), key=lambda i: slots[i].free_at(now))
        return index, slots[index].free_at(now)

    def end_batch(self) -> None:
        """The executor submitted the chunks assigned so far: the next chunk for a
        merging pool starts a new task (and may take another slot)."""
        self._open.clear()

    def _finish(self, pool: str, events: int, now: float) -> tuple[float, float, float, int]:
        """(finish, start, seconds, slot) if the chunk went to ``pool`` now."""
        slot, start = self._best_slot(pool, now)
        seconds = self.predict(pool, events)
        return start + seconds, start, seconds, slot

    def _fluid_end(self, work_events: float, pools: list[str], now: float,
                   chunk_events: float) -> float:
        """When ``pools`` would finish ``work_events`` more events if the work were
        spread perfectly over their slots from the time each slot becomes free."""
        slots = []
        for name in pools:
            fixed, per_event = self._params(name)
            rate = 1.0 / (per_event + fixed / max(chunk_events, 1.0))  # events/s per slot
            slots += [(s.free_at(now), rate) for s in self._slots[name]]
        slots.sort()
        t, rate, left = slots[0][0], 0.0, float(work_events)
        for free, r in slots:
            if rate > 0 and rate * (free - t) >= left:
                break
            left -= rate * (free - t)
            t, rate = free, rate + r
        return t + left / rate

    def choose(self, chunk: Chunk, now: float | None = None,
               backlog_events: int = 0) -> tuple[str, str]:
        """(pool, reason) for ``chunk`` without recording it; see ``assign``."""
        now = self._now(now)
        names = list(self.pools)
        if len(names) == 1:
            return names[0], "only pool"
        if self.probe > 0:
            for name in names:
                if self._assigned[name] < self.probe:
                    return name, "probe"
        events = chunk.events
        cpus = [n for n in names if self.pools[n].kind == CPU]
        gpus = [n for n in names if self.pools[n].kind == GPU]
        eligible = [g for g in gpus if events >= self.crossover(g)]
        helpers: list[str] = []  # pools slower for this chunk that may still take it when idle
        if not cpus:
            candidates, why = gpus, "no CPU pool"
        elif not gpus:
            candidates, why = cpus, "no GPU pool"
        elif not eligible:
            candidates, why = cpus, "below crossover"
            helpers = gpus
        else:
            candidates, why = cpus + eligible, None
        if self.explore and self._log_scale is not None:
            # measurements are coming in: a pool never measured and with nothing queued
            # gets this chunk, since its prediction is only the other pools' scale
            for name in candidates:
                slots = self._slots[name]
                # (a slot kept busy by a cancelled copy is not idle: the chunk would wait)
                if (self.pools[name].model.observations == 0
                        and not any(s.outstanding for s in slots)
                        and any(s.idle(now) for s in slots)):
                    return name, "probe: not measured yet"
        if self.unmeasured_depth is not None and len(candidates) > 1:
            # depth in tasks per slot: a merging pool's task holds ``merge`` chunks (in
            # chunks, 12 single-slot GPU workers with merges of 4 started with 3 busy)
            room = [n for n in candidates if self.pools[n].model.observations > 0
                    or self._tasks_per_slot(n, now) < self.unmeasured_depth]
            if not room:  # nothing measured and every pool full: fill by slots
                # (not to a pool whose every slot a cancelled task holds: seeds cannot
                # say how long that is against the other pools' queues)
                open_ = [n for n in candidates
                         if not all(s.held(now) for s in self._slots[n])] or candidates
                best = min(open_, key=lambda n: self._tasks_per_slot(n, now))
                return best, (why or "above crossover") + ", no pool measured yet: fewest queued per slot"
            if len(room) < len(candidates):
                candidates = room
                if len(room) == 1:
                    return room[0], (why or "above crossover") + ", the other pools unmeasured and full"
        pools = candidates + helpers
        plan = {n: self._finish(n, events, now) for n in pools}  # (finish, start, s, slot)
        if backlog_events > 0 and len(pools) > 1:
            # more chunks will follow: a slot idle now takes this one if it finishes it
            # before the whole run is predicted to end (else windowed submission would
            # keep feeding the fastest pool and leave the others idle). Below the crossover
            # that includes the GPU pools: slower per chunk than a CPU slot, but an idle one
            # that finishes the chunk before the run's end shortens the run instead of
            # holding its cores idle
            end = self._fluid_end(backlog_events + events, pools, now, events)
            idle = [n for n in pools if plan[n][1] <= now and plan[n][0] <= end]
            if idle:
                best = min(idle, key=lambda n: plan[n][0])
                return best, (why or "above crossover") + ", idle slot finishing before the predicted end"
        best = min(candidates, key=lambda n: plan[n][0])
        if helpers and self._slots[best][plan[best][3]].held(now):
            # its earliest slot is held by a cancelled task that runs on: a slower pool
            # that finishes the chunk earlier takes it (the last chunks have no backlog)
            helper = min(helpers, key=lambda n: plan[n][0])
            if plan[helper][0] < plan[best][0]:
                return helper, (why or "above crossover") + ", the faster pool's slots held"
        if why is not None:
            return best, why
        if self.pools[best].kind == GPU:
            return best, "above crossover, earlier finish"
        return best, "above crossover, CPU pool finishes earlier"

    def assign(self, chunk, now: float | None = None, backlog_events: int = 0, *,
               may_wait: bool = False) -> str | None:
        """The pool for ``chunk`` (a ``Chunk``; a WorkItem-like is numbered by the
        order of assignment); the decision is recorded and the pool's queue updated.
        ``backlog_events``: events of the chunks still to be assigned after this one,
        when chunks are assigned as others complete (0 when all are assigned at once).
        ``may_wait``: the caller can hold the chunk back until a task completes; then a
        chunk whose pool is at its ``capacity`` is not assigned and None is returned."""
        if not isinstance(chunk, Chunk):
            chunk = Chunk.of(chunk, len(self._records))
        if chunk.id in self._records:
            raise ValueError(f"chunk {chunk.id} was already assigned "
                             f"(to {self._records[chunk.id].pool})")
        now = self._now(now)
        pool, reason = self.choose(chunk, now, backlog_events)
        if may_wait and (self._queued(pool) >= self.capacity(pool)
                         or self._held_back(pool, now)):
            return None
        self._enqueue(chunk, pool, reason, now)
        return pool

    def _enqueue(self, chunk: Chunk, pool: str, reason: str, now: float,
                 retried_from: str | None = None) -> Decision:
        finish, start, seconds, slot = self._finish(pool, chunk.events, now)
        cross = self.crossover()
        record = Decision(chunk.id, chunk.file, chunk.dataset, chunk.tree, chunk.start,
                          chunk.stop, chunk.events, pool, reason, seconds, start, finish,
                          None if math.isinf(cross) else cross, slot,
                          retried_from=retried_from)
        self._slots[pool][slot].add(chunk.id, seconds, now)
        self._records[chunk.id] = record
        self._assigned[pool] += 1
        merge = self.pools[pool].merge
        if merge > 1:
            count = self._open[pool][1] + 1 if pool in self._open else 1
            if count < merge:
                self._open[pool] = (slot, count)
            else:
                self._open.pop(pool, None)
        return record

    def place(self, chunks: Sequence, now: float | None = None) -> list[str]:
        """The pool of each chunk (``Chunk`` or WorkItem-like, numbered by position when
        not a ``Chunk``), assigned in order."""
        now = self._now(now)
        out = []
        for i, item in enumerate(chunks):
            out.append(self.assign(item if isinstance(item, Chunk) else Chunk.of(item, i), now))
        return out

    def retry(self, chunk_id: int, pool: str, now: float | None = None,
              reason: str = "retry after failure") -> None:
        """Record that ``chunk_id`` is re-run on ``pool`` (e.g. on a CPU worker after
        it failed on a GPU); its first attempt is dropped from the queue model."""
        old = self._records.pop(chunk_id)
        self._slots[old.pool][old.slot].outstanding.pop(chunk_id, None)
        copy = self._copies.pop(chunk_id, None)
        if copy is not None:  # the retry replaces both copies
            self._slots[copy.pool][copy.slot].outstanding.pop(chunk_id, None)
        chunk = Chunk(chunk_id, old.file, old.entrystart, old.entrystop, old.tree, old.dataset)
        self._enqueue(chunk, pool, reason, self._now(now), retried_from=old.pool).task = old.task

    def mark_merged(self, chunk_ids: Sequence[int]) -> int:
        """Record that ``chunk_ids`` run as one task (see ``merge_for_gpu``); returns the
        task number written into their decisions."""
        task = self._next_task
        self._next_task += 1
        for cid in chunk_ids:
            self._records[cid].task = task
        return task

    # ---------------------------------------------------------------- feedback
    def observe(self, chunk_ids, seconds: float, now: float | None = None,
                pool: str | None = None) -> None:
        """A task of ``chunk_ids`` (one id, or the ids of a merged task) took
        ``seconds``; refines its pool's cost model and queue. ``pool``: where it ran, when
        that may be a backup copy's pool (default: where the chunks were assigned)."""
        ids = _ids(chunk_ids)
        records = [self._records[i] for i in ids]
        now = self._now(now)
        events = sum(r.events for r in records)
        shares = [seconds * (r.events / events if events else 1 / len(records)) for r in records]
        copy_pool = self._copy_pool(ids, records, pool)
        if copy_pool is not None:  # a backup copy's time
            for r, share in zip(records, shares):
                self._copies[r.chunk].actual_seconds = share
                self._copy_leaves(r.chunk, now)
            pool = copy_pool
        else:
            pool = records[0].pool
            for r, share in zip(records, shares):
                r.actual_seconds = share
                self._leave_queue(r, now)
        self._learn(pool, events, seconds)

    def release(self, chunk_ids, now: float | None = None, pool: str | None = None) -> None:
        """Chunks whose task completed without a time of theirs (e.g. skipped): they
        leave their pool's queue (``pool``: as in ``observe``), nothing is learned."""
        now = self._now(now)
        ids = _ids(chunk_ids)
        if not ids:
            return
        if self._copy_pool(ids, [self._records[i] for i in ids], pool) is not None:
            for cid in ids:
                self._copy_leaves(cid, now)
            return
        for cid in ids:
            record = self._records[cid]
            if cid in self._slots[record.pool][record.slot].outstanding:
                self._leave_queue(record, now)

    def _copy_leaves(self, cid: int, now: float) -> None:
        """The backup copy of chunk ``cid`` completed at ``now``: off its slot's queue."""
        copy = self._copies[cid]
        slot = self._slots[copy.pool][copy.slot]
        if slot.outstanding.pop(cid, None) is not None:
            slot.anchor = max(slot.anchor, now)

    def _copy_pool(self, ids, records, pool: str | None) -> str | None:
        """``pool`` when it names the backup copies of ``ids``, None when it names (or
        defaults to) their assigned pool; ValueError for anything else."""
        assigned = {r.pool for r in records}
        if len(assigned) != 1:
            raise ValueError(f"chunks {ids} were assigned to different pools {sorted(assigned)}")
        if pool is None or pool in assigned:
            return None
        if any(self._copies.get(i) is None or self._copies[i].pool != pool for i in ids):
            raise ValueError(f"chunks {ids} were assigned to {assigned.pop()} and have no "
                             f"backup copy on {pool}")
        return pool

    def _reported(self, chunk_ids, pool: str | None):
        """(ids, records, copy pool) for a worker's report on ``chunk_ids``, or None when
        they have none or have been placed anew since (a retry replaces their copies)."""
        ids = _ids(chunk_ids)
        if not ids or any(i not in self._records for i in ids):
            return None
        records = [self._records[i] for i in ids]
        try:
            return ids, records, self._copy_pool(ids, records, pool)
        except ValueError:
            return None

    def started(self, chunk_ids, now: float | None = None, pool: str | None = None) -> None:
        """The task of ``chunk_ids`` started on a worker of ``pool`` (as in
        ``observe``) at ``now``: ``backups`` predicts its end from then. A report on
        chunks placed anew since is ignored."""
        now = self._now(now)
        reported = self._reported(chunk_ids, pool)
        if reported is None:
            return
        ids, _records, copy_pool = reported
        if copy_pool is not None:
            for cid in ids:
                self._copies[cid].started_at = now
            return
        for cid in ids:
            self._records[cid].started_at = now

    def settle(self, chunk_ids, pool: str, now: float | None = None) -> None:
        """The output of ``chunk_ids`` was taken from ``pool``: the other copy of each is
        cancelled. A cancelled original takes its whole task (the chunks merged with it)
        off its slot; its other chunks count on their own backup copies. A cancelled
        copy that had started keeps its slot busy until its predicted end, or until
        ``lost`` reports it ended."""
        now = self._now(now)
        ids = _ids(chunk_ids)
        for cid in ids:
            record = self._records[cid]
            record.taken_from = pool
            copy = self._copies.get(cid)
            if pool == record.pool:
                if copy is not None:
                    busy = None
                    if copy.started_at is not None:
                        busy = straggler_end(copy.started_at, copy.predicted_seconds, now)
                    self._slots[copy.pool][copy.slot].drop([cid], busy)
                continue
            if copy is None or copy.pool != pool:
                raise ValueError(f"chunk {cid} has no copy on {pool}")
            record.actual_seconds = copy.actual_seconds
            record.finished_at = now
            task = self._task_chunks(record)
            busy = None
            if record.started_at is not None:
                busy = straggler_end(record.started_at, self._task_seconds(task), now)
                if self.pools[record.pool].model.observations == 0:
                    # a pool never measured learns at least this: the task it lost had run
                    # this long (a bound from below; ``lost`` brings the true time)
                    self._learn(record.pool, sum(self._records[i].events for i in task),
                                now - record.started_at)
            self._slots[record.pool][record.slot].drop(task, busy)

    def lost(self, chunk_ids, seconds: float, now: float | None = None,
             pool: str | None = None) -> None:
        """A cancelled copy of ``chunk_ids`` (``pool`` as in ``observe``) ended anyway,
        after ``seconds``, its output dropped: its pool learns from the time, and its
        slot is free from ``now``. A report on chunks placed anew since is ignored."""
        now = self._now(now)
        reported = self._reported(chunk_ids, pool)
        if reported is None:
            return
        ids, records, copy_pool = reported
        if copy_pool is None:
            name, slot = records[0].pool, self._slots[records[0].pool][records[0].slot]
        else:
            name = copy_pool
            slot = self._slots[name][self._copies[ids[0]].slot]
        if not slot.outstanding:
            slot.anchor = min(slot.anchor, now)
        self._learn(name, sum(r.events for r in records), seconds)

    def _learn(self, pool: str, events: float, seconds: float) -> None:
        ratio = self.pools[pool].model.observe(events, seconds)
        if ratio is not None:
            self._log_scale = _ew(self._log_scale, ratio, 1.0 - self.pools[pool].model.decay)

    def task_seconds(self, chunk_ids, pool: str) -> float | None:
        """Predicted seconds of the task of ``chunk_ids`` on ``pool``: their copy there,
        or their original (None if they were not placed there). A cancelled task that
        started runs on until ``straggler_end`` of its start and these seconds."""
        reported = self._reported(chunk_ids, pool)
        if reported is None:
            return None
        ids, _records, copy_pool = reported
        if copy_pool is not None:
            return self._copies[ids[0]].predicted_seconds
        return self._task_seconds(ids)

    def occupied(self, pool: str, until: float, slot: int | None = None) -> int:
        """A slot of ``pool`` is busy until ``until`` with work from outside this run (a
        copy that an earlier run on the same workers cancelled while it ran): chunks are
        predicted to start there only then. Returns the slot; pass it again to move
        ``until`` (later as the task runs on, ``now`` once it has ended)."""
        slots = self._slots[pool]
        if slot is None:
            now = self._now(None)
            slot = min(range(len(slots)), key=lambda i: slots[i].free_at(now))
            until = max(slots[slot].anchor, until)
        slots[slot].anchor = until
        return slot

    def _task_chunks(self, record: Decision) -> list[int]:
        """The chunks that run in one task with ``record``'s (itself alone if not merged)."""
        if record.task is None:
            return [record.chunk]
        return [cid for cid in self._slots[record.pool][record.slot].outstanding
                if self._records[cid].task == record.task] or [record.chunk]

    def _task_seconds(self, ids) -> float:
        """Predicted seconds of the task of ``ids`` (chunks of one pool) where they were
        assigned, by the model as it is now (a merged task's chunks share its fixed cost;
        the model's fit is computed once per task, not per chunk)."""
        fixed, per_event = self._params(self._records[ids[0]].pool)
        return sum(fixed + max(0.0, self._records[i].events) * per_event for i in ids)

    def backups(self, now: float | None = None) -> list[Backup]:
        """Second copies worth starting now (none without ``backup_margin``): a task in
        flight predicted to end later than a copy on another pool's idle slots by more
        than ``backup_margin`` x the copy's time. A task that started (``started``) ends
        at its start plus its predicted time (a straggler: see ``straggler_end``); one
        not started yet at the earliest its predicted time from now. Meant for the end of
        a run, when no chunk waits and idle slots cost nothing; the first copy to
        complete counts (``observe(..., pool=)`` then ``settle``). The copy's pool must
        have measured times; the original's too, unless the task runs past its predicted
        end. A merged task needs idle slots for all its chunks on a pool that does not
        merge; each task is copied at most once; the largest predicted gains go first.
        The copies are recorded and occupy their slots."""
        if self.backup_margin is None or len(self.pools) < 2:
            return []
        now = self._now(now)
        idle = {n: [i for i, s in enumerate(slots) if s.idle(now)]
                for n, slots in self._slots.items()}
        if not any(idle.values()):
            return []
        measured = {n for n, p in self.pools.items() if p.model.observations > 0}
        tasks: dict = {}  # (pool, task key) -> chunk ids of an original task in flight
        for name, slots in self._slots.items():
            for slot in slots:
                for cid in slot.outstanding:
                    record = self._records[cid]
                    if record.pool != name or cid in self._copies:
                        continue
                    # a chunk retried alone keeps its old merged task's number: the slot
                    # tells the tasks apart
                    key = (("task", record.task, record.slot) if record.task is not None
                           else ("chunk", cid))
                    tasks.setdefault((name, key), []).append(cid)
        candidates = []
        for (name, _key), ids in tasks.items():
            ids = tuple(sorted(ids))
            seconds = self._task_seconds(ids)
            started = min((self._records[i].started_at for i in ids
                           if self._records[i].started_at is not None), default=None)
            if started is None:
                late, original = False, now + seconds
            else:
                late = started + seconds < now
                original = straggler_end(started, seconds, now)
            # a pool never measured is predicted by the others' scale: only a task running
            # past that prediction says that it is slow
            if name not in measured and not late:
                continue
            for target in measured - {name}:
                if not idle[target]:
                    continue
                copy = self._copy_seconds(target, ids)
                if original - now > (1.0 + self.backup_margin) * copy:
                    candidates.append((original - now - copy, ids, name, target, original, copy))
        out = []
        taken: set[int] = set()
        for _gain, ids, name, target, original, seconds in sorted(candidates, reverse=True):
            need = 1 if self.pools[target].merge > 1 else len(ids)
            if taken.intersection(ids) or len(idle[target]) < need:
                continue
            slots, idle[target] = idle[target][:need], idle[target][need:]
            taken.update(ids)
            for k, cid in enumerate(ids):
                slot = slots[min(k, need - 1)]
                share = seconds / len(ids) if need == 1 else seconds
                self._copies[cid] = _Copy(target, slot, share)
                self._slots[target][slot].add(cid, share, now)
                record = self._records[cid]
                record.backup_pool, record.backup_predicted_seconds = target, seconds
            out.append(Backup(ids, name, target, original, now + seconds))
        return out

    def _copy_seconds(self, pool: str, ids) -> float:
        """Predicted seconds of copies of the chunks ``ids`` on ``pool``: one task of them
        all on a merging pool (its whole fixed cost), else one task per chunk side by side."""
        fixed, per_event = self.pools[pool].model.params(self.global_scale)
        events = [self._records[i].events for i in ids]
        if self.pools[pool].merge > 1:
            return fixed + sum(events) * per_event
        return fixed + max(events) * per_event

    def _leave_queue(self, record: Decision, now: float) -> None:
        """``record``'s chunk finished at ``now``: off its slot's queue, which runs its
        next chunk from then."""
        record.finished_at = now
        slot = self._slots[record.pool][record.slot]
        slot.outstanding.pop(record.chunk, None)
        slot.anchor = max(slot.anchor, now)

    # ------------------------------------------------------------------ records
    def decisions(self) -> list[dict]:
        """Every decision as a plain dict, in chunk order."""
        return [self._records[k].as_dict() for k in sorted(self._records)]

    def summary(self) -> dict:
        """Per pool: chunks, events, predicted and actual seconds, the current model; and
        the current crossover (None when infinite)."""
        pools = {}
        for name, p in self.pools.items():
            recs = [r for r in self._records.values() if r.pool == name]
            done = [r.actual_seconds for r in recs if r.actual_seconds is not None]
            pools[name] = {
                "kind": p.kind, "slots": p.slots, "chunks": len(recs),
                "events": sum(r.events for r in recs),
                "predicted_seconds": sum(r.predicted_seconds for r in recs),
                "actual_seconds": sum(done) if done else None,
                "model": p.model.describe(self.global_scale),
                # chunks copied to this pool, and those whose copy here counted
                "backups": sum(1 for r in self._records.values() if r.backup_pool == name),
                "backups_taken": sum(1 for r in self._records.values()
                                     if r.backup_pool == name and r.taken_from == name),
            }
        cross = self.crossover()
        return {"pools": pools, "crossover": None if math.isinf(cross) else cross}


# --------------------------------------------------------------------------- merging
@dataclass(frozen=True)
class Merge:
    """Items ``parts`` (indices into the input) merged into one task."""

    parts: tuple[int, ...]
    filename: str
    treename: str | None
    entrystart: int
    entrystop: int

    @property
    def events(self) -> int:
        return self.entrystop - self.entrystart

    def describe(self) -> str:
        return (f"merged {len(self.parts)} chunks of {self.filename} (tree {self.treename!r}) "
                f"into one GPU task, entries [{self.entrystart}, {self.entrystop})")

    def as_dict(self) -> dict:
        return {"parts": list(self.parts), "filename": self.filename, "treename": self.treename,
                "entrystart": self.entrystart, "entrystop": self.entrystop, "events": self.events}


@dataclass
class MergeResult:
    """``items``: the tasks (merged or not); ``parts[i]``: indices of the input items in
    task i; ``merges``: the tasks that merged more than one item."""

    items: list
    parts: list[tuple[int, ...]]
    merges: list[Merge]

    def describe(self) -> list[str]:
        return [m.describe() for m in self.merges]


def _file_key(item) -> tuple:
    """(dataset, file, tree, uuid): items merge only when all four agree."""
    if isinstance(item, Chunk):
        return (item.dataset, item.file, item.tree, None)
    return (getattr(item, "dataset", None), str(getattr(item, "filename", "")),
            getattr(item, "treename", None), getattr(item, "fileuuid", None))


def _with_range(item, start: int, stop: int):
    if isinstance(item, Chunk):
        return replace(item, start=start, stop=stop)
    return replace(item, entrystart=start, entrystop=stop)


def merge_for_gpu(items: Sequence, target_events: int) -> MergeResult:
    """Merge runs of adjacent items of one file (same dataset, filename, treename and
    fileuuid; one's entrystop equal to the next's entrystart) into tasks of at most
    ``target_events`` entries (an item already larger stays alone). Items are
    dataclasses such as coffea's ``WorkItem`` (merged ones are ``dataclasses.replace``
    copies of the first part, with the merged range) or ``Chunk``. Tasks keep the order
    of their first part; every input item lands in exactly one task."""
    if target_events < 1:
        raise ValueError(f"target_events must be >= 1, got {target_events}")

    def rng(item):
        if isinstance(item, Chunk):
            return item.start, item.stop
        return int(item.entrystart), int(item.entrystop)

    by_file: dict[tuple, list[int]] = {}
    for i, item in enumerate(items):
        by_file.setdefault(_file_key(item), []).append(i)
    groups: list[tuple[int, ...]] = []
    for indices in by_file.values():
        indices = sorted(indices, key=lambda i: rng(items[i]))
        run: list[int] = []
        run_events = 0
        for i in indices:
            start, stop = rng(items[i])
            contiguous = bool(run) and rng(items[run[-1]])[1] == start
            if contiguous and run_events + (stop - start) <= target_events:
                run.append(i)
                run_events += stop - start
                continue
            if run:
                groups.append(tuple(run))
            run, run_events = [i], stop - start
        if run:
            groups.append(tuple(run))
    groups.sort(key=lambda g: min(g))
    out_items, merges = [], []
    for group in groups:
        first = items[group[0]]
        if len(group) == 1:
            out_items.append(first)
            continue
        start, stop = rng(first)[0], rng(items[group[-1]])[1]
        out_items.append(_with_range(first, start, stop))
        _, filename, treename, _ = _file_key(first)
        merges.append(Merge(group, filename, treename, start, stop))
    return MergeResult(out_items, groups, merges)


# ------------------------------------------------------------------------ simulation
@dataclass
class SimResult:
    """A simulated run: ``makespan`` (s), per pool chunks/events/busy seconds, and the
    pool of each chunk."""

    policy: str
    makespan: float
    pools: dict
    assignments: list[str]

    def as_dict(self) -> dict:
        return {"policy": self.policy, "makespan": self.makespan, "pools": self.pools,
                "assignments": self.assignments}


def simulate(chunks: Sequence, policy, truth: Sequence[Pool], *,
             window: int | None = None, warmup: int | None = None,
             tick: float = BACKUP_TICK) -> SimResult:
    """Replay ``chunks`` (``Chunk``s or event counts) on the pools ``truth`` (their
    ``model.seconds`` is the true duration of a task, ``slots`` their parallelism,
    ``merge`` the chunks one task takes, as the executor merges GPU tasks) and return the
    makespan. Each pool runs its chunks in assignment order on its free slots.

    ``policy``: a ``Placement`` over pools of the same names, or ``"all-cpu"`` /
    ``"all-gpu"`` (every chunk on the pools of that kind, each to the slot free first).
    A Placement is driven in one of three ways, as an executor could submit:

    - default: every chunk assigned at time 0 (all submitted at once);
    - ``window=k``: at most k chunks queued or running; the next is assigned when one
      completes, after its actual time was observed (online refinement);
    - ``warmup=k``: as ``window=k`` until every pool given a chunk has reported one,
      then all the others at once with the refined models.

    In every mode a policy with a ``depth`` holds a chunk back while its pool is full
    and offers it again when a task completes (late binding, as the executor does).
    A policy with a ``backup_margin`` is asked for ``backups`` once every chunk is
    assigned, at each completion and every ``tick`` seconds between them, as the
    executor's loop does; the first copy of a chunk to complete counts, a copy that
    loses keeps its slot until it ends, and the makespan is the last counted output."""
    import heapq
    from collections import deque

    if window is not None and warmup is not None:
        raise ValueError("window and warmup are alternatives")
    pools = {p.name: p for p in truth}
    chunks = [c if isinstance(c, Chunk) else Chunk.of(c, i) for i, c in enumerate(chunks)]
    if isinstance(policy, str):
        if policy not in ("all-cpu", "all-gpu"):
            raise ValueError(f"policy must be a Placement, 'all-cpu' or 'all-gpu', not {policy!r}")
        kind = policy.split("-")[1]
        chosen = [p for p in truth if p.kind == kind]
        if not chosen:
            raise ValueError(f"{policy}: no {kind.upper()} pool among {list(pools)}")
        # list scheduling over all slots of those pools, in chunk order (a slot of a
        # merging pool takes its next ``merge`` chunks as one task)
        free = [(0.0, p.name, s) for p in chosen for s in range(p.slots)]
        heapq.heapify(free)
        stats = {p.name: {"chunks": 0, "events": 0, "busy_seconds": 0.0} for p in chosen}
        assignments, makespan, k = [], 0.0, 0
        while k < len(chunks):
            t, name, s = heapq.heappop(free)
            task = chunks[k:k + pools[name].merge]
            k += len(task)
            events = sum(c.events for c in task)
            dt = pools[name].model.seconds(events)
            heapq.heappush(free, (t + dt, name, s))
            makespan = max(makespan, t + dt)
            stats[name]["chunks"] += len(task)
            stats[name]["events"] += events
            stats[name]["busy_seconds"] += dt
            assignments += [name] * len(task)
        return SimResult(policy, makespan, stats, assignments)

    missing = set(policy.pools) - set(pools)
    if missing:
        raise ValueError(f"the policy's pools {sorted(missing)} have no true model in truth")
    queues = {n: deque() for n in policy.pools}
    free = {n: pools[n].slots for n in policy.pools}
    stats = {n: {"chunks": 0, "events": 0, "busy_seconds": 0.0} for n in policy.pools}
    assignments: dict[int, str] = {}
    running: list = []  # (finish, seq, chunks of the task, pool, seconds)
    seq = 0
    pending = deque(chunks)
    in_flight = 0
    limit = window if window is not None else warmup  # None: no limit
    warming = warmup is not None
    reported: set[str] = set()

    def release(now: float) -> None:
        nonlocal in_flight
        while pending and (limit is None or in_flight < limit):
            c = pending.popleft()
            backlog = 0 if limit is None else sum(p.events for p in pending)
            # a policy with a ``depth`` may hold the chunk back: it is offered again when
            # the next task completes
            name = policy.assign(c, now=now, backlog_events=backlog, may_wait=True)
            if name is None:
                pending.appendleft(c)
                break
            assignments[c.id] = name
            queues[name].append(c)
            in_flight += 1
        policy.end_batch()

    copies = {n: deque() for n in policy.pools}  # backup copies waiting, as whole tasks
    taken: set[int] = set()
    cancelled: set[int] = set()  # seq of running tasks that lost to another copy

    def dispatch(now: float) -> None:
        nonlocal seq
        for name, q in queues.items():
            while (q or copies[name]) and free[name] > 0:
                if copies[name]:
                    task, copy = copies[name].popleft(), True
                else:
                    task = [q.popleft() for _ in range(min(len(q), pools[name].merge))]
                    copy = False
                    if len(task) > 1:
                        policy.mark_merged([c.id for c in task])
                events = sum(c.events for c in task)
                dt = pools[name].model.seconds(events)
                free[name] -= 1
                heapq.heappush(running, (now + dt, seq, task, name, dt, copy))
                seq += 1
                policy.started([c.id for c in task], now=now, pool=name)
                stats[name]["busy_seconds"] += dt  # a copy that loses is busy too
        if not pending:
            added = False
            for b in policy.backups(now=now):
                parts = [c for c in chunks if c.id in b.chunks]
                if pools[b.pool].merge > 1:
                    copies[b.pool].append(parts)
                else:
                    copies[b.pool].extend([c] for c in parts)
                added = True
            if added:
                dispatch(now)

    def take(ids: list[int], seq_won: int, now: float) -> None:
        """Chunks ``ids`` counted: their other copies are dropped (a running one keeps
        its slot); chunks of a dropped task that nothing else covers run again."""
        nonlocal in_flight
        taken.update(ids)
        in_flight -= len(ids)
        orphans = []
        for name in queues:
            for c in [c for c in queues[name] if c.id in ids]:
                queues[name].remove(c)
            for task in [t for t in copies[name] if any(c.id in ids for c in t)]:
                copies[name].remove(task)
                orphans += [c for c in task if c.id not in ids]
        for _f, s_, task, _n, _dt, _copy in running:
            if s_ != seq_won and s_ not in cancelled and any(c.id in ids for c in task):
                cancelled.add(s_)
                orphans += [c for c in task if c.id not in ids]
        covered = {c.id for name in queues for c in queues[name]}
        covered |= {c.id for name in copies for t in copies[name] for c in t}
        covered |= {c.id for _f, s_, t, _n, _dt, _c in running if s_ not in cancelled
                    for c in t}
        for c in orphans:
            if c.id not in taken and c.id not in covered:
                policy.retry(c.id, assignments[c.id], now=now, reason="its task lost to a copy")
                queues[assignments[c.id]].appendleft(c)
                covered.add(c.id)

    release(0.0)
    dispatch(0.0)
    makespan = 0.0
    checked = 0.0
    while running:
        if not pending and policy.backup_margin is not None and running[0][0] > checked + tick:
            checked += tick  # nothing completes before the next look at the stragglers
            dispatch(checked)
            continue
        t, s_, task, name, dt, copy = heapq.heappop(running)
        checked = t
        free[name] += 1
        ids = [c.id for c in task]
        if s_ in cancelled or taken.intersection(ids):
            policy.lost(ids, dt, now=t, pool=name)  # a copy that lost: its slot comes back
            dispatch(t)
            continue
        makespan = t
        policy.observe(ids, dt, now=t, pool=name)
        policy.settle(ids, name, now=t)
        if copy:
            for i in ids:
                assignments[i] = name
        stats[name]["chunks"] += len(task)  # chunks and events whose output counted
        stats[name]["events"] += sum(c.events for c in task)
        take(ids, s_, t)
        reported.add(name)
        if warming and reported >= set(assignments.values()):
            warming, limit = False, None  # every pool used so far measured: the rest at once
        release(t)
        dispatch(t)
    if window is not None:
        label = f"placement (window {window})"
    elif warmup is not None:
        label = f"placement (warm-up {warmup})"
    else:
        label = "placement"
    return SimResult(label, makespan, stats, [assignments[c.id] for c in chunks])
