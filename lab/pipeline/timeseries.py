"""The report's over-time tables, as Spark DataFrame code over read.py's event rows and the runs table.

Per grid point and second of the run: throughput and send-latency percentiles. Per grid point, one
run (its lowest seed) in detail: the events its per-node timeline draws. Runs whose log has a
problem (truncated, corrupt) are left out here as they are from every aggregate.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .metrics import GRID_KEY, node_roles, sound_runs
from .read import SECOND

# What a timeline lane is drawn from: a NameServer's hold on the faulted broker (register, remove,
# its own start and stop), which node is which broker, and every send attempt's chosen broker group.
TIMELINE_KINDS = ["node.start", "node.stop", "broker.start", "ns.register", "ns.remove", "producer.send"]


def compute(events: DataFrame, runs: DataFrame) -> dict[str, DataFrame]:
    """The over-time tables by name (docs/pipeline.md). `events` should be kept (metrics.keep)."""
    sound = sound_runs(runs)
    return {"throughput": throughput(events, sound),
            "send_latency_over_time": send_latency_over_time(events, sound),
            "timeline": timeline(events, sound)}


def throughput(events: DataFrame, runs: DataFrame) -> DataFrame:
    """Per grid point and second: acked and failed messages per second, the mean over its runs.

    Every second of every run counts, quiet ones as 0: a run that acked nothing during a fault must
    pull the mean down, not drop out of it."""
    # The decoder counted the ack and failure records of each second (read.count_messages).
    counts = (events.filter(F.col("kind") == SECOND)
              .select("run", F.col("t").cast("int").alias("second"), F.col("ack_records").alias("acked"),
                      F.col("failed_records").alias("failed")))
    last = F.floor(F.coalesce("end_t", F.lit(0.0))).cast("int")
    seconds = runs.select("run", *GRID_KEY, F.explode(F.sequence(F.lit(0), last)).alias("second"))
    return (seconds.join(counts, ["run", "second"], "left").fillna(0, subset=["acked", "failed"])
            .groupBy(*GRID_KEY, "second")
            .agg(F.avg("acked").alias("acked_per_s"), F.avg("failed").alias("failed_per_s"),
                 F.count("*").alias("runs"))
            .orderBy(*GRID_KEY, "second"))


def send_latency_over_time(events: DataFrame, runs: DataFrame) -> DataFrame:
    """Per grid point and second an attempt started in: p50, p99 and max latency over the attempts
    of all its runs. Pooled, not averaged per run: at a few sends per second a run's own p99 is
    just its slowest attempt."""
    sends = (events.filter((F.col("kind") == "producer.send") & F.col("latency").isNotNull())
             .select("run", "latency", F.floor(F.col("t") - F.col("latency")).cast("int").alias("second")))
    return (sends.join(runs.select("run", *GRID_KEY), "run")
            .groupBy(*GRID_KEY, "second")
            .agg(F.count("*").alias("sends"), F.percentile("latency", 0.5).alias("p50_s"),
                 F.percentile("latency", 0.99).alias("p99_s"), F.max("latency").alias("max_s"))
            .orderBy(*GRID_KEY, "second"))


def timeline_runs(runs: DataFrame) -> DataFrame:
    """One run per grid point, the one with the lowest seed: the run a reader can rerun first."""
    first = Window.partitionBy(*GRID_KEY).orderBy(F.col("seed").asc_nulls_last(), "run")
    return runs.withColumn("_n", F.row_number().over(first)).filter("_n = 1").select("run", *GRID_KEY, "seed")


def timeline(events: DataFrame, runs: DataFrame) -> DataFrame:
    """The events a per-node timeline draws, for timeline_runs: each with its node's role."""
    chosen = timeline_runs(runs)
    roles = node_roles(events.filter(F.col("kind").isin("run.start", "node.start"))).join(chosen.select("run"), "run")
    # A node can be declared in run.start and start again later: one role per node is enough.
    roles = roles.groupBy("run", "node").agg(F.min("role").alias("node_role"))
    drawn = events.filter(F.col("kind").isin(*TIMELINE_KINDS)).select(
        "run", "seq", "t", "node", "kind", "broker_addr", "address", "broker_name", "broker_id", "broker", "result",
        "latency")
    return (drawn.join(chosen, "run").join(roles, ["run", "node"], "left")
            .select("run", *GRID_KEY, "seed", "seq", "t", "node", "node_role", "kind", "broker_addr", "address",
                    "broker_name", "broker_id", "broker", "result", "latency")
            .orderBy(*GRID_KEY, "seq"))
