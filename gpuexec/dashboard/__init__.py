"""gpuexec's page on the Dask dashboard: ``/gpuexec`` (bokeh) and ``/gpuexec/json``.

Both are served by the scheduler's own HTTP server (no second server): a scheduler
loads this module with ``--preload gpuexec.dashboard`` (``dask_setup`` below), or a
client registers ``GPUExecPlugin`` on a running scheduler (``gpuexec.scheduler.plugins
.install`` does). The plugin holds the data; workers feed it with
``worker.log_event("gpuexec", ...)`` after each task, the client with
``client.log_event("gpuexec", ...)`` at the end of each call (placement, skips,
fallbacks, re-runs). The page reads the plugin in the scheduler's process; the browser
never talks to a worker. See docs/monitoring.md.
"""

from __future__ import annotations

import json
import os
import time
import warnings
import weakref
from collections import defaultdict, deque

from distributed.diagnostics.plugin import SchedulerPlugin

TOPIC = "gpuexec"
ROUTE = "/gpuexec"
JSON_ROUTE = "/gpuexec/json"
HISTORY_SECONDS = 600.0  # events/s history kept per pool
MAX_DECISIONS = 2000  # placement decisions kept (the latest)
MAX_INCIDENTS = 500  # skips, re-runs, fallbacks, backup copies kept (the latest)


class GPUExecPlugin(SchedulerPlugin):
    """The dashboard's data, in the scheduler: per worker its device, pool, chunks and
    events; events per second per pool; the latest placement decisions and crossover;
    seconds in the kernel engine per family and device; skips, re-runs, fallbacks."""

    name = "gpuexec-dashboard"
    idempotent = True

    def __init__(self):
        self.started = time.time()
        self.workers: dict[str, dict] = {}
        self.finished: deque = deque()  # (time, pool, events)
        self.decisions: deque = deque(maxlen=MAX_DECISIONS)
        self.crossover: float | None = None
        self.kernels: dict[str, float] = defaultdict(float)  # "family[backend] device"
        self.incidents: deque = deque(maxlen=MAX_INCIDENTS)
        self.counts = {"skipped": 0, "reruns": 0, "fallbacks": 0, "backups": 0, "calls": 0,
                       "failed_calls": 0}

    async def start(self, scheduler):
        register_routes(scheduler)

    def _row(self, worker: str) -> dict:
        return self.workers.setdefault(worker, {"worker": worker, "name": worker, "device": "?",
                                                "pool": "?", "chunks": 0, "events": 0,
                                                "seconds": 0.0, "alive": True})

    def log_event(self, topic, msg):
        if topic != TOPIC or not isinstance(msg, dict):
            return
        handler = {"worker": self._on_worker, "chunk": self._on_chunk,
                   "call": self._on_call}.get(msg.get("kind"))
        if handler is not None:
            handler(msg)

    def _on_worker(self, msg):
        row = self._row(msg["worker"])
        row.update(device=msg.get("device", row["device"]), pool=msg.get("pool", row["pool"]),
                   alive=True)

    def _on_chunk(self, msg):
        row = self._row(msg["worker"])
        row["name"] = msg.get("name", row["name"])
        row["device"] = msg.get("device", row["device"])
        row["pool"] = msg.get("pool", row["pool"])
        row["chunks"] += int(msg.get("chunks", 1))
        row["events"] += int(msg.get("events", 0))
        row["seconds"] += float(msg.get("seconds", 0.0))
        now = float(msg.get("time", time.time()))
        self.finished.append((now, row["pool"], int(msg.get("events", 0))))
        while self.finished and self.finished[0][0] < now - HISTORY_SECONDS:
            self.finished.popleft()
        for family, seconds in (msg.get("kernels") or {}).items():
            self.kernels[f"{family} {row['device']}"] += float(seconds)

    def _on_call(self, msg):
        self.counts["calls"] += 1
        self.counts["failed_calls"] += msg.get("error") is not None
        if msg.get("decisions"):
            self.decisions.extend(msg["decisions"])
            self.crossover = msg.get("crossover")
        for what in ("skipped", "reruns", "fallbacks", "backups"):
            for text in msg.get(what, ()):
                self.counts[what] += 1
                self.incidents.append({"what": what, "detail": str(text)})

    def remove_worker(self, scheduler, worker, **kwargs):
        if worker in self.workers:
            self.workers[worker]["alive"] = False

    def throughput(self, bins: int = 60) -> dict:
        """Events/s per pool over the last minutes, in ``bins`` windows ending now."""
        now = time.time()
        if not self.finished:
            return {"t": []}
        start = max(self.finished[0][0], now - HISTORY_SECONDS)
        width = max((now - start) / bins, 1e-3)
        out: dict[str, list] = {"t": [round(start + width * (i + 1) - self.started, 3)
                                      for i in range(bins)]}
        for t, pool, events in self.finished:
            if t >= start:
                rates = out.setdefault(pool, [0.0] * bins)
                rates[min(bins - 1, int((t - start) / width))] += events / width
        return out

    def snapshot(self) -> dict:
        """Everything the page shows, as plain JSON-able data."""
        return {"workers": sorted(self.workers.values(), key=lambda r: r["worker"]),
                "throughput": self.throughput(),
                "placement": {"decisions": list(self.decisions), "crossover": self.crossover},
                "kernel_seconds": dict(self.kernels),
                "counts": dict(self.counts),
                "incidents": list(self.incidents)}


def plugin_of(scheduler) -> GPUExecPlugin | None:
    return scheduler.plugins.get(GPUExecPlugin.name)


def describe_device(backend: str) -> str:
    """The calling worker's device for ``backend``: GPU model and architecture, or CPU."""
    if backend in ("cuda", "hip"):
        try:
            import cupy

            dev = cupy.cuda.Device()
            props = cupy.cuda.runtime.getDeviceProperties(dev.id)
            name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
            arch = props.get("gcnArchName", b"")
            arch = arch.decode() if isinstance(arch, bytes) else arch
            return f"{name} ({arch.split(':')[0] if arch else 'sm_' + dev.compute_capability})"
        except Exception as err:  # noqa: BLE001 - the row says what is known
            return f"{backend} GPU ({type(err).__name__})"
    return f"CPU ({os.cpu_count()} cores)"


# ------------------------------------------------------------------------- the HTTP side
def _json_handler():
    from tornado import web

    class GPUExecJSON(web.RequestHandler):
        def initialize(self, dask_server=None):
            self.server = dask_server

        def get(self):
            plugin = plugin_of(self.server)
            if plugin is None:
                self.set_status(404)
                self.write({"error": "the gpuexec plugin is not registered on this scheduler"})
                return
            self.set_header("Content-Type", "application/json")
            self.write(json.dumps(plugin.snapshot(), default=str))

    return GPUExecJSON


def register_routes(scheduler) -> bool:
    """Add ``/gpuexec/json`` and (with bokeh) ``/gpuexec`` to ``scheduler``'s HTTP
    server, once; returns whether the page is served."""
    if getattr(scheduler, "_gpuexec_routes", None) is not None:
        return scheduler._gpuexec_routes
    app = getattr(scheduler, "http_application", None)
    if app is None:
        scheduler._gpuexec_routes = False
        return False
    app.add_handlers(r".*$", [(JSON_ROUTE, _json_handler(), {"dask_server": scheduler})])
    try:
        from distributed.dashboard.core import BokehApplication
        from tornado.ioloop import IOLoop

        from gpuexec.dashboard.page import gpuexec_doc
    except ImportError:  # no bokeh: the JSON alone
        scheduler._gpuexec_routes = False
        return False
    bokeh_app = BokehApplication({ROUTE: gpuexec_doc}, scheduler, prefix="/")
    app.add_application(bokeh_app)
    bokeh_app.initialize(IOLoop.current())
    scheduler._gpuexec_routes = True
    return True


def dask_setup(scheduler):
    """``--preload gpuexec.dashboard``: the plugin and the page on this scheduler."""
    if plugin_of(scheduler) is None:
        scheduler.add_plugin(GPUExecPlugin())
    register_routes(scheduler)


def enabled() -> bool:
    """Dask config ``gpuexec.dashboard`` (default true): whether executors register the
    plugin and their tasks feed it."""
    from gpuexec import config

    return bool(config.get("dashboard"))


_installed: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # client -> bool


def install(client) -> bool:
    """Register ``GPUExecPlugin`` on ``client``'s scheduler once (a scheduler that
    preloaded it keeps its own); returns whether the page has its data."""
    if client in _installed:
        return _installed[client]
    try:
        client.register_plugin(GPUExecPlugin())
        ok = True
    except Exception as err:  # noqa: BLE001 - e.g. a remote scheduler without gpuexec
        warnings.warn(f"gpuexec could not install its dashboard plugin ({err!r}); the "
                      "/gpuexec page stays empty", RuntimeWarning, stacklevel=3)
        ok = False
    _installed[client] = ok
    return ok
