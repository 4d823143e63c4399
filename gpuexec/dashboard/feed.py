"""What workers and clients send to ``GPUExecPlugin`` (topic ``gpuexec``): one event per
finished task from its worker, one per call from the client. Each is one message on a
stream Dask keeps open anyway (docs/monitoring.md#what-the-plugin-costs)."""

from __future__ import annotations

import logging
import threading
import time

from gpuexec.dashboard import TOPIC, describe_device

_lock = threading.Lock()
_sent_seconds: dict[str, float] = {}  # kernel seconds of this process already sent
_devices: dict[str, str] = {}  # backend -> this process's device description


def kernel_seconds_since_last() -> dict[str, float]:
    """This process's seconds in the kernel engine per family and backend, since the
    last call (summed over every event, the process's totals)."""
    import gpuexec.kernels as gk

    now = gk.stats()["seconds"]
    with _lock:
        delta = {k: v - _sent_seconds.get(k, 0.0) for k, v in now.items()
                 if v - _sent_seconds.get(k, 0.0) > 0}
        _sent_seconds.update(now)
    return delta


def device(backend: str) -> str:
    if backend not in _devices:
        _devices[backend] = describe_device(backend)
    return _devices[backend]


def send_task(pool: str, backend: str, runs: list) -> None:
    """From the worker running a task: its chunks, events and seconds (``runs`` as the
    task's output holds them), nothing outside a worker."""
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:
        return
    try:
        worker.log_event(TOPIC, {
            "kind": "chunk", "worker": worker.address, "name": str(worker.name), "pool": pool,
            "device": device(backend), "chunks": sum(len(r.indices) for r in runs),
            "events": sum(int(r.units) for r in runs), "seconds": sum(r.seconds for r in runs),
            "kernels": kernel_seconds_since_last(), "time": time.time()})
    except Exception as err:  # noqa: BLE001 - the page is a view: it must not fail a chunk
        logging.getLogger("gpuexec").warning("gpuexec: dashboard event not sent: %r", err)


def send_call(client, call) -> None:
    """From the client at a call's end: its placement and incidents (``call``: a
    ``CallReport``)."""
    placement = call.placement or {}
    keep = ("chunk", "events", "pool", "predicted_seconds", "actual_seconds", "reason")
    msg = {"kind": "call", "stage": call.stage, "error": call.error,
           "decisions": [{k: d.get(k) for k in keep} for d in placement.get("decisions", ())],
           "crossover": placement.get("summary", {}).get("crossover"),
           "skipped": [s.describe() for s in call.skipped],
           "reruns": [f"{r.label} ({r.what} on {r.worker})" for r in call.reruns],
           "fallbacks": [f"{f.label}: {f.from_pool} -> {f.to_pool} ({f.reason})"
                         for f in call.fallbacks],
           "backups": [f"{b.label}: {b.from_pool} -> {b.to_pool}, counted from "
                       f"{b.taken_from or 'neither'}" for b in call.backups]}
    try:
        client.log_event(TOPIC, msg)
    except Exception:  # noqa: BLE001 - the page is a view: a closed client must not fail the call
        pass
