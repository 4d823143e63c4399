"""``gpuexec deploy slurm --site frontier|lumi|nvidia --nodes N --account A --time T``:
print (or ``-o`` write) the Slurm job script for a site (``gpuexec.deploy.render``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from gpuexec.cli.arguments import positive
from gpuexec.deploy import render


def processor_arg(spec: str) -> str:
    """A file processor's path made absolute (the job runs elsewhere); others unchanged."""
    target, sep, attr = spec.partition(":")
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"--processor: no file {path}")
        return str(path) + sep + attr
    return spec


def main(args) -> int:
    profile = render.load_profile(args.site, args.profile)
    analysis: tuple[str, ...] = ()
    if args.processor or args.query:
        if not args.fileset:
            raise ValueError("--processor/--query need --fileset (or give both after the "
                             "script name at sbatch time)")
        processor = processor_arg(args.processor) if args.processor else f"adl:{args.query}"
        fileset = Path(args.fileset).resolve()
        if not fileset.is_file():
            raise FileNotFoundError(f"--fileset: no file {fileset}")
        analysis = (processor, str(fileset))
    job = render.Job(nodes=args.nodes, account=args.account, time=args.time,
                     partition=args.partition, qos=args.qos, gpus_per_node=args.gpus_per_node,
                     cores_per_gpu=args.cores_per_gpu, gpu_threads=args.gpu_threads,
                     analysis=analysis,
                     listen_host=args.listen_host, fake_gpu=args.fake_gpu)
    text = render.render(profile, job)
    if args.output:
        Path(args.output).write_text(text)
        os.chmod(args.output, 0o700)
        print(f"gpuexec deploy: wrote {args.output}; submit it with sbatch", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def add(subs) -> None:
    p = subs.add_parser("deploy", help="job scripts for batch systems")
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    s = kinds.add_parser("slurm", help="a Slurm job script for a site")
    s.add_argument("--site", choices=render.SITES, default=None,
                   help="site profile shipped with gpuexec")
    s.add_argument("--profile", default=None,
                   help="YAML file of profile keys over the site's (or a whole profile)")
    s.add_argument("--nodes", type=positive, required=True)
    s.add_argument("--account", required=True)
    s.add_argument("--time", required=True, help="wall time, e.g. 00:30:00")
    s.add_argument("--partition", default=None, help="default: the site's")
    s.add_argument("--qos", default=None)
    s.add_argument("--gpus-per-node", type=positive, default=None,
                   help="Slurm tasks (GPUs) per node; default: the site's")
    s.add_argument("--cores-per-gpu", type=positive, default=None,
                   help="cores per task; default: the site's")
    s.add_argument("--gpu-threads", type=positive, default=None,
                   help="cores of each GPU worker (the rest run CPU workers); default: the site's")
    which = s.add_mutually_exclusive_group()
    which.add_argument("--processor", help="FILE.py[:attr] or module:attr")
    which.add_argument("--query", type=int, choices=range(1, 9), metavar="{1..8}",
                       help="ADL benchmark query shipped with gpuexec")
    s.add_argument("--fileset", default=None, help="fileset JSON")
    s.add_argument("--listen-host", default=None,
                   help="address scheduler and workers listen on (e.g. 127.0.0.1 for a "
                        "one-node job); default: the site's network interface")
    s.add_argument("--fake-gpu", default=None, metavar="VENDOR[:ARCH]",
                   help="fake-GPU mode for nodes without GPUs (docs/deploy.md#fake-gpus)")
    s.add_argument("-o", "--output", default=None, help="write the script here")
    s.set_defaults(func=main)
