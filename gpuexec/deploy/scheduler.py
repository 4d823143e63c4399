"""``python -m gpuexec.deploy.scheduler --run-dir DIR``: the Dask scheduler of one job.

- makes the job's TLS credentials in ``DIR/tls`` (``gpuexec.security``; 0700, files 0600);
  the scheduler accepts ``tls://`` peers holding them and no others;
- listens on a free port (``--port 0``) of ``--host`` (default: the node's name, which
  workers on other nodes reach; ``--interface`` picks a network such as ``hsn0``);
- serves the dashboard on a free port of the node's loopback only;
- writes ``DIR/scheduler.json`` (0600): distributed's scheduler file (``address``) plus
  ``dashboard_port``, ``node`` and the ``tunnel`` line to open from a laptop:
  ``ssh -J <login> -L P:127.0.0.1:P <node>``, P being the dashboard's port.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
from pathlib import Path

from gpuexec import security
from gpuexec.deploy.workers import SCHEDULER_FILE, TLS_DIR


def tunnel(login: str, node: str, port: int) -> str:
    """The ssh line that forwards the dashboard's loopback port through the login node."""
    return f"ssh -J {login} -L {port}:127.0.0.1:{port} {node}"


def scheduler_info(address: str, dashboard_port: int, login: str, node: str) -> dict:
    return {"type": "Scheduler", "address": address, "dashboard_port": dashboard_port,
            "node": node, "dashboard": f"http://127.0.0.1:{dashboard_port}/status",
            "tunnel": tunnel(login, node, dashboard_port)}


async def serve(run_dir: Path, host: str | None, interface: str | None, login: str) -> None:
    from distributed import Scheduler

    run_dir = security.private_dir(run_dir)
    sec = security.make_credentials(run_dir / TLS_DIR)
    node = socket.gethostname().split(".")[0]
    kw = {"interface": interface} if interface else {"host": host or socket.gethostname()}
    # preload: the /gpuexec page on the dashboard (docs/monitoring.md)
    async with Scheduler(protocol="tls", port=0, security=sec, dashboard_address="127.0.0.1:0",
                         preload=["gpuexec.dashboard"], **kw) as scheduler:
        port = scheduler.http_server.port
        info = scheduler_info(scheduler.address, port, login, node)
        security.write_private(run_dir / SCHEDULER_FILE, json.dumps(info, indent=1))
        print(f"gpuexec: Dask scheduler at {scheduler.address} on {node}; scheduler file "
              f"{run_dir / SCHEDULER_FILE}", flush=True)
        print(f"gpuexec: dashboard on {node}'s loopback port {port}; from your machine: "
              f"{info['tunnel']}, then open http://localhost:{port}/status", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        finished = asyncio.ensure_future(scheduler.finished())
        await asyncio.wait([finished, asyncio.ensure_future(stop.wait())],
                           return_when=asyncio.FIRST_COMPLETED)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuexec.deploy.scheduler",
                                     description="The Dask scheduler of one job, with TLS.")
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--host", default=None, help="address to listen on (default: the "
                        "node's name)")
    parser.add_argument("--interface", default=None, help="network interface, e.g. hsn0")
    parser.add_argument("--login", default=os.environ.get("GPUEXEC_LOGIN", "<login node>"),
                        help="login node named in the printed tunnel line")
    args = parser.parse_args(argv)
    os.environ["DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION"] = "True"
    asyncio.run(serve(args.run_dir, args.host, args.interface, args.login))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
