"""`nslab sweep` and `nslab report`: lab/cli.py adds them with add_commands(sub).

Spark, the scenarios and matplotlib are imported when a command runs, not when `nslab` starts.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

MASTER_HELP = "Spark master URL (default: $MASTER, else spark.master from spark-defaults.conf, else local[*])"


def add_commands(sub) -> None:
    sweep = sub.add_parser(
        "sweep", help="run a scenario over a grid of config values × seeds, on Spark",
        description=(
            "Run SCENARIO (a bundled name or a .toml file) simulated, once per grid point and seed (seeds 1..N), "
            "each run a Spark task. Every --set KEY=V1,V2,... is an axis of the grid; the grid is every "
            "combination. Each run's event log lands in DIR with its grid point in run.start; DIR/sweep.json "
            "lists every run and its outcome. A run that fails is recorded as failed and the sweep goes on. "
            "Exit 0, or 1 when every run failed, 2 on a usage error."),
        epilog=("Values are split on commas, so a value that contains commas cannot be swept: list-valued keys "
                "(producer.latencyMax, producer.notAvailableDuration, cluster.brokers, cluster.topicNames) "
                "are out of scope for the grid; set them in the scenario's TOML instead.\n"
                "example: nslab sweep broker-crash --seeds 20 --set client.pollNameServerInterval=10s,30s "
                "--set producer.sendLatencyFaultEnable=true,false --out sweeps/poll"))
    sweep.add_argument("scenario", metavar="SCENARIO")
    sweep.add_argument("--seeds", type=_positive, required=True, metavar="N", help="runs per grid point: seeds 1..N")
    sweep.add_argument("--set", action="append", default=[], metavar="KEY=V1,V2",
                       help="a grid axis: a config key and its values, e.g. client.pollNameServerInterval=10s,30s "
                            "(repeatable; one value is a plain override)")
    sweep.add_argument("--out", type=Path, required=True, metavar="DIR", help="where the event logs go")
    sweep.add_argument("--master", metavar="URL", help=MASTER_HELP)
    sweep.set_defaults(run=run_sweep)

    report = sub.add_parser(
        "report", help="chaos analytics over event logs, on Spark: Parquet tables, plots, HTML",
        description=(
            "Read event logs (DIR: every *.events below it; or log files) on Spark's executors and compute, "
            "per run and per grid point: detection latency, client blind window, send availability per "
            "second, retries, failed, lost and duplicated messages, NameServer divergence and recovery "
            "after every NameServer was down (docs/pipeline.md). Writes Parquet tables, PNG plots and "
            "index.html into REPORT_DIR and prints a summary table."))
    report.add_argument("inputs", nargs="+", type=Path, metavar="DIR")
    report.add_argument("--out", type=Path, metavar="REPORT_DIR", help="default: DIR/report, for the first DIR")
    report.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    report.add_argument("--master", metavar="URL", help=MASTER_HELP)
    report.set_defaults(run=run_report)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _fail(command: str, error: Exception | str) -> int:
    print(f"nslab {command}: {error}", file=sys.stderr)
    return 2


def missing_analytics(modules: tuple[str, ...]) -> str | None:
    """Why a command that needs `modules` cannot run here (the analytics extra is missing); None if it can."""
    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    if not absent:
        return None
    return (f"needs {' and '.join(absent)}, which the analytics extra installs: "
            f"pip install 'nslab[analytics]' (make does; Spark also needs Java 17)")


def run_sweep(args: argparse.Namespace) -> int:
    missing = missing_analytics(("pyspark",))
    if missing:
        return _fail("sweep", missing)
    from chaos.scenario import ScenarioError

    from ..config import ConfigError
    from . import sweep
    from .spark import SparkSetupError, session

    try:
        specs = sweep.plan(args.scenario, args.seeds, args.set, args.out)
    except (ScenarioError, ConfigError) as e:
        return _fail("sweep", e)
    print(f"sweep {args.scenario}: {len(specs) // args.seeds} grid points x {args.seeds} seeds = {len(specs)} runs "
          f"into {args.out}", file=sys.stderr, flush=True)
    try:
        with session(args.master) as spark:  # Spark first: a machine without Java gets no --out folder
            args.out.mkdir(parents=True, exist_ok=True)
            results = sweep.run_all(spark, specs, sweep.ProgressBar("sweep"))
    except SparkSetupError as e:
        return _fail("sweep", e)
    manifest = sweep.write_manifest(args.out, args.scenario, args.seeds, results)
    counts = Counter(r["status"] for r in results)
    print(f"{len(results)} runs: {counts['valid']} valid, {counts['invalid']} invalid, {counts['failed']} failed "
          f"({manifest})")
    for r in results:
        if r["status"] == "failed":
            print(f"  failed: seed {r['seed']} {r['grid']}: {r['error']}")
    return 1 if counts["failed"] == len(results) else 0


def run_report(args: argparse.Namespace) -> int:
    missing = missing_analytics(("pyspark", "matplotlib"))
    if missing:
        return _fail("report", missing)
    from . import report
    from .spark import SparkSetupError, session

    missing = [p for p in args.inputs if not p.exists()]
    if missing:
        return _fail("report", f"no such file or directory: {missing[0]}")
    first = args.inputs[0]
    out = args.out or (first if first.is_dir() else first.parent) / "report"
    try:
        with session(args.master) as spark:
            summary = report.build(spark, args.inputs, out)
    except (SparkSetupError, report.ReportError) as e:
        return _fail("report", e)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(report.text_table(*report.summary_rows(summary)))
        print(f"\n{summary['runs']} runs, {summary['events']:,} events; report: {out / 'index.html'}")
    return 0
