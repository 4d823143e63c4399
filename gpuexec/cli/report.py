"""``gpuexec report FILE``: a report saved by ``RunReport.save`` shown in the terminal.

Prints the run's summary (what ``print(executor.report)`` prints), then per pool the
chunks, events, events/s and the read/transfer/compute split.
"""

from __future__ import annotations

from pathlib import Path

from gpuexec.scheduler.report import RunReport


def pool_table(report: RunReport) -> list[str]:
    proc = report.processing
    if proc is None or not proc.runs:
        return []
    lines = [f"{'pool':<10} {'chunks':>7} {'events':>12} {'events/s':>12} "
             f"{'read s':>8} {'transfer s':>10} {'compute s':>10}"]
    chunks = proc.pools
    for pool, t in sorted(proc.timing().items()):
        busy = t["read"] + t["transfer"] + t["compute"]
        rate = f"{t['events'] / busy:,.0f}" if busy > 0 else "-"
        lines.append(f"{pool:<10} {chunks.get(pool, 0):>7} {t['events']:>12,} {rate:>12} "
                     f"{t['read']:>8.2f} {t['transfer']:>10.2f} {t['compute']:>10.2f}")
    return lines


def main(args) -> int:
    path = Path(args.file)
    json_path = path.with_suffix(".json") if path.suffix == ".html" else path
    if not json_path.exists():
        raise FileNotFoundError(f"{json_path} does not exist")
    report = RunReport.load(json_path)
    print(report)
    for line in pool_table(report):
        print(line)
    if report.error is not None:
        print(f"the run failed: {report.error}")
    return 0


def add(subs) -> None:
    p = subs.add_parser("report", help="show a saved run report (RunReport.save)",
                        description=__doc__.split("\n\n")[0])
    p.add_argument("file", metavar="FILE", help="the report's .json (or .html) file")
    p.set_defaults(func=main)
