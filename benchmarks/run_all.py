"""Run every benchmark and print its figures (`make bench`).

A benchmark is any benchmarks/bench_*.py runnable as a script; each runs in its own process, in
name order, so none inherits another's memory, CPU affinity or warm caches. To add one, drop a
bench_<name>.py next to this file. Figures are printed with their targets and "met" / "MISSED";
a missed target never fails the run, only a benchmark that crashes does (exit status 1).

Usage: python benchmarks/run_all.py [NAME_SUBSTRING ...]   e.g. `run_all.py register`
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def discover(filters: list[str]) -> list[Path]:
    found = sorted(HERE.glob("bench_*.py"))
    if filters:
        found = [p for p in found if any(f in p.stem for f in filters)]
    return found


def machine() -> str:
    try:
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
    except OSError:
        load = "?"
    return (f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs "
            f"(usable {len(os.sched_getaffinity(0))}), load average {load}")


def main(argv: list[str]) -> int:
    benches = discover(argv)
    if not benches:
        print(f"no benchmark matches {argv}", file=sys.stderr)
        return 2
    print(f"nslab benchmarks: {machine()}")
    print("Figures only: a target is reported as met or MISSED, never asserted.")
    failed = []
    for path in benches:
        print(f"\n=== {path.stem}", flush=True)
        start = time.monotonic()
        rc = subprocess.run([sys.executable, str(path)], cwd=HERE.parent).returncode
        print(f"=== {path.stem}: {'done' if rc == 0 else f'FAILED (exit {rc})'} "
              f"in {time.monotonic() - start:.0f} s", flush=True)
        if rc != 0:
            failed.append(path.stem)
    if failed:
        print(f"\nbenchmarks that did not run to the end: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
