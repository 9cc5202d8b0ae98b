"""The Spark pipeline at scale. Targets: a sweep of 200 runs of a 10-minute scenario <= 5 min;
`nslab report` over 1,000,000 events <= 20 s.

The sweep runs a sample (2 grid points x 8 seeds) and extrapolates to 200 runs from its throughput,
labelled as such; NSLAB_BENCH_FULL=1 runs all 200. The report reads the sample's real event logs,
copied until they hold a million events, in a process of its own: Spark's start is in the figure,
as a user sees it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import cpu_stat, figure, title

from lab.pipeline import spark as spark_setup, storage, sweep

FULL = os.environ.get("NSLAB_BENCH_FULL") == "1"
TARGET_RUNS, SWEEP_TARGET_S = 200, 300.0
REPORT_EVENTS, REPORT_TARGET_S = 1_000_000, 20.0
GRID = ["client.pollNameServerInterval=10s,30s"]

TEN_MINUTES = """
[scenario]
teaches = "Ten minutes with a broker crash and a broker hang: the pipeline benchmark's runs."
duration = "10m"

[[timeline]]
at = "2m"
fault = "kill"
node = "broker-a-0"

[[timeline]]
at = "4m"
fault = "restart"
node = "broker-a-0"

[[timeline]]
at = "6m"
fault = "freeze"
node = "broker-b-0"

[[timeline]]
at = "9m"
fault = "unfreeze"
node = "broker-b-0"
"""

# `nslab report` as lab/cli.py runs it, without depending on lab/cli.py's wiring.
REPORT = ("import argparse, sys; from lab.pipeline.cli import add_commands; p = argparse.ArgumentParser(); "
          "add_commands(p.add_subparsers()); a = p.parse_args(sys.argv[1:]); sys.exit(a.run(a))")


def busy_cores(before: tuple[float, float], seconds: float) -> float:
    return (cpu_stat()[0] - before[0]) / seconds


def bench_sweep(root: Path) -> list[dict]:
    seeds = TARGET_RUNS // 2 if FULL else 8
    scenario = root / "ten-minutes.toml"
    scenario.write_text(TEN_MINUTES)
    specs = sweep.plan(str(scenario), seeds, GRID)
    store = storage.open_store(root / "sweep")
    title(f"nslab sweep: {len(specs)} runs of a 10-minute scenario (2 grid points x {seeds} seeds), local Spark")
    started, cpu = time.monotonic(), cpu_stat()
    with spark_setup.session() as spark:
        ready = time.monotonic()
        results = sweep.run_all(spark, specs, store, sweep.Manifest(store, specs, seeds))
        runs_s = time.monotonic() - ready
    total = time.monotonic() - started
    events = sum(r["event_count"] for r in results)
    failed = sum(r["status"] == "failed" for r in results)
    figure("Spark session start", ready - started, "s")
    figure(f"{len(specs)} runs, wall", runs_s, "s")
    figure("mean wall of one run (in its task)", sum(r["wall_seconds"] for r in results) / len(results), "s")
    figure("runs per minute", len(specs) / runs_s * 60, "runs/min")
    figure("events written per second", events / runs_s, "events/s", fmt="{:,.0f}")
    figure("failed runs", failed, "", fmt="{:,.0f}")
    if FULL:
        figure(f"sweep of {TARGET_RUNS} runs, wall (measured)", total, "s", SWEEP_TARGET_S)
    else:
        estimate = (ready - started) + runs_s * TARGET_RUNS / len(specs)
        figure(f"sweep of {TARGET_RUNS} runs (EXTRAPOLATED)", estimate, "s", SWEEP_TARGET_S)
        print(f"  EXTRAPOLATED from the {len(specs)}-run sample: session start + {TARGET_RUNS}/{len(specs)} of "
              f"its run time (NSLAB_BENCH_FULL=1 measures all {TARGET_RUNS}).")
    figure("machine CPUs busy on average", busy_cores(cpu, total), f"of {os.cpu_count()} cores", fmt="{:.2f}")
    return results


def bench_report(root: Path, results: list[dict]) -> None:
    logs = root / "million"
    logs.mkdir()
    events = copies = files = 0
    used: set[str] = set()
    while events < REPORT_EVENTS:  # the runs in order until a million events, copied if too few
        copies += 1
        for r in results:
            if events >= REPORT_EVENTS:
                break
            shutil.copy(root / "sweep" / r["log"], logs / f"copy{copies}-{r['log']}")
            events, files = events + r["event_count"], files + 1
            used.add(r["log"])
    title(f"nslab report: {events:,} events in {files} logs ({len(used)} real runs, each at most {copies} times), "
          "a process of its own")
    started, cpu = time.monotonic(), cpu_stat()
    subprocess.run([sys.executable, "-c", REPORT, "report", str(logs), "--out", str(root / "report"), "--json"],
                   check=True, stdout=subprocess.DEVNULL, cwd=root)
    wall = time.monotonic() - started
    figure(f"report over {events:,} events, wall", wall, "s", REPORT_TARGET_S)
    figure("events per second", events / wall, "events/s", fmt="{:,.0f}")
    figure("machine CPUs busy on average", busy_cores(cpu, wall), f"of {os.cpu_count()} cores", fmt="{:.2f}")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="nslab-bench-pipeline-") as tmp:
        root = Path(tmp)
        bench_report(root, bench_sweep(root))


if __name__ == "__main__":
    main()
