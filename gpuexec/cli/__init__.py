"""The ``gpuexec`` command (also ``python -m gpuexec``). Each subcommand is a module of
this package with ``add(subparsers)``, which registers its parser and sets ``func`` to a
function of the parsed arguments returning the exit status."""

from __future__ import annotations

import argparse
import sys

from gpuexec import __version__
from gpuexec.cli import calibrate, deploy, info, report, run

SUBCOMMANDS = (info, run, calibrate, deploy, report)


class CLIError(Exception):
    """A user error: printed as ``gpuexec: <message>``, exit status 2."""


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="gpuexec", description="gpuexec: run coffea analyses "
                                  "on GPU and CPU workers (docs/deploy.md)")
    top.add_argument("--version", action="version", version=f"gpuexec {__version__}")
    subs = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in SUBCOMMANDS:
        module.add(subs)
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (CLIError, FileNotFoundError, PermissionError, ValueError) as err:
        print(f"gpuexec {args.command}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
