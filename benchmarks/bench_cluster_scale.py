"""Clusters of production size, simulated: the whole `nslab up --headless --sim` process.

Three clusters, seed 1, each for 10 virtual minutes (`--minutes N` for a shorter look while working):

    default   2 NameServers, 2 groups x 2, 4 topics, 2 + 2 clients      target >= 300x real time
    topics    the default with cluster.topics=400                        target >= 150x
    large     3 NameServers, 10 groups x 2, 2,000 topics, 10 + 10 clients
              targets >= 20x real time, <= 500 MB peak RSS, <= 10 MB of event log per virtual minute

Every client polls every topic it uses every 30 s, as RocketMQ's do: the large cluster answers
~1,300 route queries per virtual second. Prints, per cluster, wall time, speed (virtual / real),
events per wall second, event-log bytes per virtual minute and the process's peak RSS (ru_maxrss
from wait4); and, with no target, when every node was up (each client fetches every route it
uses before it is up) and the speed from then on.

Each cluster runs twice: with the simulator's aggregation of idle traffic (the default) and
without it (NSLAB_AGGREGATE=0, every role's plain flow, call by call; the same event log, slower).
The large cluster's target without it: >= 5x real time, <= 500 MB peak RSS.
Usage: bench_cluster_scale.py [--minutes N] [--no-off] [NAME ...]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from _common import cpu_stat, figure, other_load_note, python_speed_note, title

NSLAB = str(Path(sys.executable).with_name("nslab"))
SEED = 1
LARGE = ["cluster.nameservers=3", "cluster.brokers=" + ",".join(f"broker-{c}" for c in "abcdefghij"),
         "cluster.topics=2000", "cluster.producers=10", "cluster.consumers=10"]
# name: (what it is, --set values, speed target, RSS target MB, event-log target MB per virtual
# minute, speed target with aggregation off)
CLUSTERS = {
    "default": ("2 NameServers, 2 groups x 2, 4 topics, 2 + 2 clients", [], 300, None, None, None),
    "topics": ("the default with cluster.topics=400", ["cluster.topics=400"], 150, None, None, None),
    "large": ("3 NameServers, 10 groups x 2, 2,000 topics, 10 + 10 clients", LARGE, 20, 500, 10, 5),
}


def command(sets: list[str], seconds: int, events: Path) -> list[str]:
    args = [NSLAB, "up", "--headless", "--sim", "--seed", str(SEED), "--duration", f"{seconds}s",
            "--events", str(events)]
    for value in sets:
        args += ["--set", value]
    return args


class Run(NamedTuple):
    wall: float  # the whole process
    events: int
    rss_kib: int
    virtual: float  # virtual seconds run, the clients' start and the drain included
    start_virtual: float  # when every node was up
    start_wall: float
    run_wall: float  # what nslab says the run took (no interpreter start)


def one_run(sets: list[str], seconds: int, events: Path, *, aggregate: bool = True) -> Run:
    """One whole process. The virtual seconds include the clients' start (each fetches every
    topic's route before it is up) and the drain; the speed is figured on --duration alone."""
    start = time.monotonic()
    env = {**os.environ, "NSLAB_AGGREGATE": "1" if aggregate else "0"}
    process = subprocess.Popen(command(sets, seconds, events), stdout=subprocess.PIPE, text=True, env=env)
    out = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)  # the child's own ru_maxrss, not the largest so far
    wall = time.monotonic() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"nslab exited with {process.returncode}:\n{out}")
    ran = re.search(r"ran ([\d.]+) virtual s in ([\d.]+) wall s, (\d+) events", out)
    up = re.search(r"every node up after ([\d.]+) virtual s \(([\d.]+) wall s\)", out)
    return Run(wall, int(ran.group(3)), usage.ru_maxrss, float(ran.group(1)), float(up.group(1)),
               float(up.group(2)), float(ran.group(2)))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10, help="virtual minutes per run (10)")
    parser.add_argument("--no-off", action="store_true", help="skip the runs with aggregation off")
    parser.add_argument("names", nargs="*", help=f"clusters to run: {', '.join(CLUSTERS)} (all)")
    options = parser.parse_args(argv)
    unknown = [n for n in options.names if n not in CLUSTERS]
    if unknown:
        parser.error(f"no cluster named {', '.join(unknown)}")
    seconds = round(options.minutes * 60)
    busy_before, _ = cpu_stat()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for name in options.names or CLUSTERS:
            what, sets, speed_target, rss_target, log_target, off_target = CLUSTERS[name]
            title(f"{name}: {what}, simulated, {seconds / 60:g} virtual minutes, seed {SEED}, whole process")
            events = Path(tmp) / f"{name}.events"
            print("  command: nslab up --headless --sim --seed 1 --duration "
                  f"{seconds}s --events FILE" + "".join(f" --set {s}" for s in sets), flush=True)
            run = one_run(sets, seconds, events)
            size = events.stat().st_size
            figure("wall time", run.wall, "s", fmt="{:,.2f}")
            figure("virtual time run (start and drain included)", run.virtual, "s", fmt="{:,.1f}")
            figure("virtual / real", seconds / run.wall, "x", speed_target, at_least=True, fmt="{:,.1f}")
            # Not a target: where the time goes, for whoever works on it.
            figure("  of it, every node up after (virtual)", run.start_virtual, "s", fmt="{:,.1f}")
            figure("  ... which took (wall)", run.start_wall, "s", fmt="{:,.2f}")
            figure("  virtual / real once every node is up", (run.virtual - run.start_virtual)
                   / max(run.run_wall - run.start_wall, 1e-9), "x", fmt="{:,.1f}")
            figure("events", run.events, "records", fmt="{:,.0f}")
            figure("events per wall second", run.events / run.wall, "events/s", fmt="{:,.0f}")
            figure("event log per virtual minute", size / 1e6 / (seconds / 60), "MB", log_target, fmt="{:,.2f}")
            figure("peak RSS", run.rss_kib / 1024, "MB", rss_target, fmt="{:,.0f}")
            if options.no_off:
                continue
            print("  the same with aggregation off (NSLAB_AGGREGATE=0):", flush=True)
            plain = Path(tmp) / f"{name}.plain.events"
            off = one_run(sets, seconds, plain, aggregate=False)
            figure("wall time, aggregation off", off.wall, "s", fmt="{:,.2f}")
            figure("virtual / real, aggregation off", seconds / off.wall, "x", off_target, at_least=True, fmt="{:,.1f}")
            figure("peak RSS, aggregation off", off.rss_kib / 1024, "MB", rss_target, fmt="{:,.0f}")
            figure("events, aggregation off", off.events, "records", fmt="{:,.0f}")
    elapsed = time.monotonic() - started
    busy_after, _ = cpu_stat()
    other_load_note(max(0.0, (busy_after - busy_before) / elapsed - 1.0), "this machine's CPUs")
    python_speed_note()


if __name__ == "__main__":
    main(sys.argv[1:])
