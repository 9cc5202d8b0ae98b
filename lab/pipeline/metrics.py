"""The report's tables as Spark DataFrames over read.py's rows, one per log.

Each run's own rows were computed where its log was decoded (run_metrics.py): here they are
exploded into the per-run tables, and combined over runs per grid point. docs/pipeline.md defines
every metric and column.
"""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from .read import RUN_COLUMNS, rows_of

GRID_KEY = ["scenario", "grid_label"]
PER_RUN = ["faults", "availability", "detection", "blind", "removals", "divergence", "recovery", "apps",
           "app_recovery"]
# The grid table's app columns (issue 39): null at a point none of whose runs had an app.
APP_COLUMNS = ["app_runs", "app_sends", "app_acked", "app_failed", "app_lost", "app_duplicates", "app_died",
               "app_recovery_p50_s", "app_recovery_max_s", "app_unrecovered"]


def run_table(logs: DataFrame) -> DataFrame:
    """The runs' own columns, a row per log, kept: every aggregate reads it."""
    return small(logs.select(*[c.name for c in RUN_COLUMNS]))


def compute(logs: DataFrame, runs: DataFrame) -> dict[str, DataFrame]:
    """Every table of the report but the ones over time, by name. `logs` should be kept (keep),
    `runs` its run_table."""
    tables = {name: per_run_table(logs, name) for name in PER_RUN}
    points = small(grid_points(runs))
    sound = sound_runs(logs)
    tables["runs"] = _in_grid_order(runs, points, "seed", "run")
    tables["grid"] = per_grid(runs, sound, points)
    tables["grid_availability"] = _in_grid_order(grid_availability(sound), points, "second")
    tables["send_latency"] = _in_grid_order(send_latency(sound), points, "log10_s")
    return tables


def per_run_table(logs: DataFrame, name: str, *keys: str) -> DataFrame:
    """A per-run table: each log's rows of it, with its `run` (and `keys`, columns of the run)."""
    return logs.select("run", *keys, F.explode(rows_of(name)).alias("row")).select("run", *keys, "row.*")


def sound_runs(logs: DataFrame) -> DataFrame:
    """The runs the aggregates count: a whole log (no `problem`) of a run (its run.start read)."""
    return logs.filter(F.col("problem").isNull() & F.col("scenario").isNotNull())


def keep(table: DataFrame, partitions: int | None = None) -> DataFrame:
    """Kept on the executors: every table is read from it, and without this every one would decode
    the logs again. Locally, computed now with its lineage cut (localCheckpoint), then read in
    `partitions` tasks when given (a task per split costs more than its scan). On a cluster, where
    a lost executor must be able to recompute its part, only persisted (lazily, spilling to disk)
    and left as it is: a coalesce there would compute it in fewer tasks."""
    if table.sparkSession.sparkContext.master.startswith("local"):
        kept = table.localCheckpoint()
        return kept.coalesce(partitions) if partitions else kept
    return table.persist(StorageLevel.MEMORY_AND_DISK)


def small(table: DataFrame) -> DataFrame:
    """Kept (keep), and broadcast to the joins that read it: a table of a row per run or grid
    point. Spark cannot estimate a kept table's size, so it would shuffle both sides of every join."""
    return F.broadcast(keep(table))


# --- per grid point --------------------------------------------------------------------------------
# Only the `sound` runs count: a torn or corrupt log would count a run cut short as a whole one.

def _ratio(num: Column, den: Column) -> Column:
    return F.when(den > 0, num / den)


def _spread(column: str, name: str) -> list[Column]:
    return [F.median(column).alias(f"{name}_p50_s"), F.percentile(column, 0.95).alias(f"{name}_p95_s"),
            F.max(column).alias(f"{name}_max_s")]


def grid_points(runs: DataFrame) -> DataFrame:
    """Every grid point a run.start names: its place in the sweep (the lowest grid_index of its runs)
    and how many of its runs are left out of its aggregates for a problem with their log."""
    return (runs.filter(F.col("scenario").isNotNull()).groupBy(*GRID_KEY)
            .agg(F.first("grid", ignorenulls=True).alias("grid"), F.min("grid_index").alias("grid_index"),
                 F.count(F.when(F.col("problem").isNotNull(), 1)).alias("excluded_runs")))


def _in_grid_order(table: DataFrame, points: DataFrame, *then: str) -> DataFrame:
    """Grid points in the order the sweep was given them (its grid_index), not alphabetical (10s,
    30s, 5s); points no sweep numbered last."""
    order = points.select(*GRID_KEY, F.col("grid_index").alias("point_index"))
    return (table.join(order, GRID_KEY, "left")
            .orderBy(F.asc_nulls_last("point_index"), "scenario", "grid_label", *then).drop("point_index"))


def per_grid(runs: DataFrame, sound: DataFrame, points: DataFrame) -> DataFrame:
    """Per grid point, over its sound runs; a point whose every run was left out still has a row.
    Detection and blind windows are pooled over the point's runs, not averaged per run."""
    base = sound_runs(runs).groupBy(*GRID_KEY).agg(
        F.count("*").alias("runs"), F.sum(F.col("complete").cast("int")).alias("complete_runs"),
        F.sum("events").alias("events"), F.sum("messages").alias("messages"),
        F.avg("availability").alias("availability"), F.min("worst_second").alias("worst_second"),
        _ratio(F.sum("retries"), F.sum("messages")).alias("retries_per_message"),
        *[F.sum(c).alias(c) for c in ("failed", "lost", "duplicates", "false_removals", "faulted_requests")],
        F.avg("divergence_s").alias("divergence_s"), F.max("longest_divergence_s").alias("longest_divergence_s"),
        F.avg("recovery_s").alias("recovery_s"),
        F.count("app_sends").alias("app_runs"),
        *[F.sum(c).alias(c) for c in ("app_sends", "app_acked", "app_failed", "app_lost", "app_duplicates",
                                       "app_died")])
    detection = per_run_table(sound, "detection", *GRID_KEY).groupBy(*GRID_KEY).agg(
        *_spread("detection_s", "detection"), F.sum((~F.col("detected")).cast("int")).alias("undetected"))
    blind = per_run_table(sound, "blind", *GRID_KEY).groupBy(*GRID_KEY).agg(
        *_spread("blind_s", "blind"), F.sum(F.col("censored").cast("int")).alias("blind_censored"))
    # Recovery after each fault end, pooled over the point's runs and apps; a fault end the app never
    # recovered from has no time and counts as unrecovered.
    app_recovery = per_run_table(sound, "app_recovery", *GRID_KEY).groupBy(*GRID_KEY).agg(
        F.median("recovery_s").alias("app_recovery_p50_s"), F.max("recovery_s").alias("app_recovery_max_s"),
        F.sum((F.col("recovered") == F.lit(False)).cast("int")).alias("app_unrecovered"))
    for part in (detection, blind, app_recovery):
        base = base.join(part, GRID_KEY, "left")
    grid = (points.join(base, GRID_KEY, "left").fillna(0, subset=["runs", "complete_runs"])
            .select(*GRID_KEY, "grid", "grid_index", "runs", "excluded_runs", *base.columns[3:]))
    return grid.orderBy(F.asc_nulls_last("grid_index"), *GRID_KEY)


def grid_availability(sound: DataFrame) -> DataFrame:
    """Per grid point and second: the runs' mean and worst availability."""
    return (per_run_table(sound, "availability", *GRID_KEY).groupBy(*GRID_KEY, "second")
            .agg(F.avg("availability").alias("mean"), F.min("availability").alias("min"),
                 F.count("*").alias("runs"), F.sum("messages").alias("messages")))


def send_latency(sound: DataFrame) -> DataFrame:
    """Send attempts per grid point in tenth-of-a-decade latency buckets (log10 of seconds)."""
    return (per_run_table(sound, "latency_buckets", *GRID_KEY).groupBy(*GRID_KEY, "log10_s")
            .agg(F.sum("sends").alias("sends"), F.sum("failed").alias("failed")))
