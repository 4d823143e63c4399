"""``gpuexec calibrate``: show, or measure, the kernel-engine calibration of this
machine's GPU kind that seeds the CPU/GPU placement (``gpuexec.scheduler.calibration``)."""

from __future__ import annotations


def main(args) -> int:
    from gpuexec.scheduler import calibration

    argv = ["--repeats", str(args.repeats)]
    argv += ["--sizes", args.sizes] if args.sizes else []
    argv += ["--cache-dir", args.cache_dir] if args.cache_dir else []
    argv += [flag for flag, on in (("--force", args.force), ("--cpu-only", args.cpu_only),
                                   ("--json", args.json)) if on]
    return int(calibration.main(argv) or 0)


def add(subs) -> None:
    p = subs.add_parser("calibrate", help="show or measure this machine's CPU/GPU calibration")
    p.add_argument("--force", action="store_true", help="measure again even if cached")
    p.add_argument("--sizes", default=None, help="comma-separated chunk sizes in events")
    p.add_argument("--repeats", type=int, default=3, help="timed calls per point (best kept)")
    p.add_argument("--cache-dir", default=None, help="cache directory")
    p.add_argument("--cpu-only", action="store_true", help="do not calibrate a GPU")
    p.add_argument("--json", action="store_true", help="print the JSON instead of the table")
    p.set_defaults(func=main)
