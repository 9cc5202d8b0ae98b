"""The report's over-time tables, as Spark DataFrame code over read.py's rows (one per log) and the
runs table.

Per grid point and second of the run: throughput and send-latency percentiles. Per grid point, one
run (its lowest seed) in detail: the events its per-node timeline draws. Runs whose log has a
problem (truncated, corrupt) are left out here as they are from every aggregate.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .metrics import GRID_KEY, per_run_table, sound_runs


def compute(logs: DataFrame, runs: DataFrame) -> dict[str, DataFrame]:
    """The over-time tables by name (docs/pipeline.md). `logs` should be kept (metrics.keep)."""
    sound = sound_runs(logs)
    return {"throughput": throughput(sound),
            "send_latency_over_time": send_latency_over_time(sound),
            "timeline": timeline(logs, sound_runs(runs))}


def throughput(sound: DataFrame) -> DataFrame:
    """Per grid point and second: acked and failed messages per second, the mean over its runs.

    Every second of every run counts, quiet ones as 0 (run_metrics.traffic): a run that acked
    nothing during a fault must pull the mean down, not drop out of it."""
    return (per_run_table(sound, "traffic", *GRID_KEY).groupBy(*GRID_KEY, "second")
            .agg(F.avg("acked").alias("acked_per_s"), F.avg("failed").alias("failed_per_s"),
                 F.count("*").alias("runs"))
            .orderBy(*GRID_KEY, "second"))


def send_latency_over_time(sound: DataFrame) -> DataFrame:
    """Per grid point and second an attempt started in: p50, p99 and max latency over the attempts
    of all its runs. Pooled, not averaged per run: at a few sends per second a run's own p99 is
    just its slowest attempt."""
    sends = (per_run_table(sound, "timeline", *GRID_KEY)
             .filter((F.col("kind") == "producer.send") & F.col("latency").isNotNull())
             .select(*GRID_KEY, "latency", F.floor(F.col("t") - F.col("latency")).cast("int").alias("second")))
    return (sends.groupBy(*GRID_KEY, "second")
            .agg(F.count("*").alias("sends"), F.percentile("latency", 0.5).alias("p50_s"),
                 F.percentile("latency", 0.99).alias("p99_s"), F.max("latency").alias("max_s"))
            .orderBy(*GRID_KEY, "second"))


def timeline_runs(runs: DataFrame) -> DataFrame:
    """One run per grid point, the one with the lowest seed: the run a reader can rerun first."""
    first = Window.partitionBy(*GRID_KEY).orderBy(F.col("seed").asc_nulls_last(), "run")
    return runs.withColumn("_n", F.row_number().over(first)).filter("_n = 1").select("run", *GRID_KEY, "seed")


def timeline(logs: DataFrame, sound: DataFrame) -> DataFrame:
    """The events a per-node timeline draws, for timeline_runs: each with its node's role."""
    chosen = F.broadcast(timeline_runs(sound).select("run"))
    return (per_run_table(logs.join(chosen, "run"), "timeline", *GRID_KEY, "seed")
            .orderBy(*GRID_KEY, "seq"))
