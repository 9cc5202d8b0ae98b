"""The default cluster, simulated, 10 virtual minutes: the whole `nslab up --headless --sim` process.

Prints wall time (process start to exit, imports included), the virtual/real ratio and events/s.
Target: >= 300x real time. Runs three seeds and reports each and the median; then the same with
the simulator's aggregation of idle traffic off (NSLAB_AGGREGATE=0: every role's plain flow), for
the figure without it (no target).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import cpu_stat, figure, median, other_load_note, python_speed_note, title

VIRTUAL_SECONDS = 600
SEEDS = (1, 2, 3)
NSLAB = str(Path(sys.executable).with_name("nslab"))


def one_run(seed: int, events: Path, *, aggregate: bool = True) -> tuple[float, int]:
    start = time.monotonic()
    result = subprocess.run(
        [NSLAB, "up", "--headless", "--sim", "--seed", str(seed), "--duration", f"{VIRTUAL_SECONDS}s",
         "--events", str(events)], capture_output=True, text=True, check=True,
        env={**os.environ, "NSLAB_AGGREGATE": "1" if aggregate else "0"})
    wall = time.monotonic() - start
    count = int(re.search(r"(\d+) events", result.stdout).group(1))
    return wall, count


def main() -> None:
    title(f"Default cluster, simulated, {VIRTUAL_SECONDS // 60} virtual minutes, whole process "
          f"(2 NameServers, 2 masters + 2 slaves, 4 topics x 4 queues, 2 producers at 5 msg/s, 2 consumers)")
    print(f"  command: nslab up --headless --sim --seed N --duration {VIRTUAL_SECONDS}s --events FILE")
    walls, rates = [], []
    busy_before, _ = cpu_stat()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for seed in SEEDS:
            wall, count = one_run(seed, Path(tmp) / f"{seed}.events")
            walls.append(wall)
            rates.append(count / wall)
            print(f"  seed {seed}: {wall:.2f} s wall, {VIRTUAL_SECONDS / wall:,.0f}x real time, "
                  f"{count:,} events, {count / wall:,.0f} events/s", flush=True)
    elapsed = time.monotonic() - started
    busy_after, _ = cpu_stat()
    figure("wall time (median)", median(walls), "s", fmt="{:,.2f}")
    figure("virtual / real (median)", VIRTUAL_SECONDS / median(walls), "x", 300, at_least=True, fmt="{:,.0f}")
    figure("events per wall second (median)", median(rates), "events/s", fmt="{:,.0f}")
    off = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in SEEDS:
            wall, count = one_run(seed, Path(tmp) / f"{seed}.events", aggregate=False)
            off.append(wall)
            print(f"  aggregation off (NSLAB_AGGREGATE=0), seed {seed}: {wall:.2f} s wall, "
                  f"{VIRTUAL_SECONDS / wall:,.0f}x real time, {count:,} events", flush=True)
    figure("virtual / real, aggregation off (median)", VIRTUAL_SECONDS / median(off), "x", fmt="{:,.0f}")
    # The run uses one core; whatever else the machine did shows as load beyond that.
    other_load_note(max(0.0, (busy_after - busy_before) / elapsed - 1.0), "this machine's CPUs")
    python_speed_note()


if __name__ == "__main__":
    main()
