"""`nslab sweep` and `nslab report`: lab/cli.py adds them with add_commands(sub).

Spark, the scenarios and matplotlib are imported when a command runs, not when `nslab` starts.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections import Counter
from pathlib import Path

MASTER_HELP = "Spark master URL (default: $MASTER, else spark.master from spark-defaults.conf, else local[*])"
PYTHON_HELP = ("the executors' Python on a cluster (default: $PYSPARK_PYTHON, else spark.pyspark.python, "
               "else this interpreter's path); it needs nslab's dependencies, nslab's code is shipped")


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
    sweep.add_argument("--out", required=True, metavar="DIR",
                       help="where the event logs and sweep.json go: a folder on this machine, or a URI "
                            "Spark's Hadoop client can write (file://, hdfs://, s3a://)")
    again = sweep.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="DIR holds this sweep, cut short: run only what is not recorded there as judged")
    again.add_argument("--force", action="store_true", help="DIR holds an old sweep: delete its logs and report first")
    sweep.add_argument("--master", metavar="URL", help=MASTER_HELP)
    sweep.add_argument("--python", metavar="PATH", help=PYTHON_HELP)
    sweep.set_defaults(run=run_sweep)

    report = sub.add_parser(
        "report", help="chaos analytics over event logs, on Spark: Parquet tables, plots, HTML",
        description=(
            "Read event logs (DIR: every *.events below it; or log files) on Spark's executors and compute, "
            "per run and per grid point: detection latency, client blind window, send availability per "
            "second, retries, failed, lost and duplicated messages, NameServer divergence and recovery "
            "after every NameServer was down; for runs with an application under test (nslab run --app), its "
            "acknowledged and failed sends, losses, duplicates, exit and recovery after each fault end "
            "(docs/pipeline.md). Writes Parquet tables, PNG plots and "
            "index.html into REPORT_DIR and prints a summary table."))
    report.add_argument("inputs", nargs="+", metavar="DIR",
                        help="a folder or log file on this machine, or a URI (file://, hdfs://, s3a://) "
                             "the executors read")
    report.add_argument("--out", metavar="REPORT_DIR", help="default: DIR/report, for the first DIR")
    report.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    report.add_argument("--master", metavar="URL", help=MASTER_HELP)
    report.add_argument("--python", metavar="PATH", help=PYTHON_HELP)
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
    from . import storage, sweep
    from .spark import SparkSetupError, session

    # A local --out is checked before Spark's slow start; a URI needs Spark, and --force deletes
    # nothing until Spark is up.
    early = not storage.is_uri(args.out) and not args.force
    try:
        specs = sweep.plan(args.scenario, args.seeds, args.set)
        if early:
            store = storage.open_store(args.out)
            kept = sweep.prepare_out(store, specs, args.seeds, resume=args.resume, force=False)
    except (ScenarioError, ConfigError, sweep.SweepError, storage.StoreError) as e:
        return _fail("sweep", e)
    try:
        with session(args.master, args.python) as spark:
            if not early:
                store = storage.open_store(args.out, spark)
                kept = sweep.prepare_out(store, specs, args.seeds, resume=args.resume, force=args.force)
            done = {record["log"] for record in kept}
            todo = [spec for spec in specs if spec.log not in done]
            print(f"sweep {specs[0].scenario}: {len(specs) // args.seeds} grid points x {args.seeds} seeds = "
                  f"{len(specs)} runs into {store.uri}" + (f" ({len(kept)} already done)" if kept else ""),
                  file=sys.stderr, flush=True)
            manifest = sweep.Manifest(store, specs, args.seeds)
            for record in kept:
                manifest.add(record)
            results = kept + sweep.run_all(spark, todo, store, manifest, sweep.ProgressBar("sweep"))
    except (SparkSetupError, sweep.SweepError, storage.StoreError) as e:
        return _fail("sweep", e)
    counts = Counter(r["status"] for r in results)
    print(f"{len(results)} runs: {counts['valid']} valid, {counts['invalid']} invalid, {counts['failed']} failed "
          f"({store.child(sweep.MANIFEST)})")
    for r in sorted(results, key=lambda r: (r["grid_index"], r["seed"])):
        if r["status"] == "failed":
            print(f"  failed: {r['log']} (seed {r['seed']} {r['grid']}): {r['error']}")
        elif r["status"] == "invalid":
            print(f"  invalid: {r['log']} (seed {r['seed']} {r['grid']}): {'; '.join(r['failed_expectations'])}")
    return 1 if counts["failed"] == len(results) else 0


def run_report(args: argparse.Namespace) -> int:
    missing = missing_analytics(("pyspark", "matplotlib", "pyarrow"))
    if missing:
        return _fail("report", missing)
    from . import report, storage
    from .spark import SparkSetupError, session

    absent = [p for p in args.inputs if not storage.is_uri(p) and not Path(p).exists()]
    if absent:
        return _fail("report", f"no such file or directory: {absent[0]}")
    first = args.inputs[0]
    if args.out:
        out = args.out
    elif storage.is_uri(first):
        out = first.rstrip("/") + "/report"
    else:
        out = str((Path(first) if Path(first).is_dir() else Path(first).parent) / "report")
    started = time.monotonic()

    def progress(message: str) -> None:
        print(f"report: {message} ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)

    try:
        with session(args.master, args.python) as spark:
            store = storage.open_store(out, spark)
            summary = report.build(spark, list(args.inputs), store, progress)
    except (SparkSetupError, report.ReportError, storage.StoreError) as e:
        return _fail("report", e)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(report.text_table(*report.summary_rows(summary)))
        print(f"\n{summary['runs']} runs, {summary['events']:,} events; report: {store.child('index.html')}")
    return 0
