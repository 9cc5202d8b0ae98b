"""The whole bundled scenario library in simulated time, one process: the time of each scenario and
the total. Target: the library in <= 60 s wall."""

from __future__ import annotations

import time

from _common import cpu_stat, figure, other_load_note, title

from lab.control import scenarios
from lab.run.runner import RunOptions


def main() -> None:
    paths = scenarios.bundled()
    title(f"Scenario library: {len(paths)} scenarios, simulated, one process (nslab run NAME for each)")
    busy_before, _ = cpu_stat()
    started = time.monotonic()
    virtual = 0.0
    for path in paths:
        verdict = scenarios.run(scenarios.prepare(str(path)), RunOptions(sim=True))
        virtual += verdict.virtual_seconds
        label = {True: "valid", False: "INVALID", None: "UNKNOWN"}[verdict.valid]
        print(f"  {path.stem:<32} {verdict.wall_seconds:6.2f} s wall  {verdict.virtual_seconds:5.0f} virtual s  "
              f"{verdict.virtual_seconds / verdict.wall_seconds:5.0f}x  {verdict.event_count:>6,} events  {label}",
              flush=True)
    total = time.monotonic() - started
    busy_after, _ = cpu_stat()
    figure("the whole library, wall", total, "s", 60.0, fmt="{:,.1f}")
    figure("virtual time simulated", virtual, "s", fmt="{:,.0f}")
    other_load_note(max(0.0, (busy_after - busy_before) / total - 1.0), "this machine's CPUs")


if __name__ == "__main__":
    main()
