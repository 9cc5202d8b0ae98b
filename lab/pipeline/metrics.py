"""The metrics, per run and per grid point, as Spark DataFrame code over read.py's event rows.

docs/pipeline.md defines every metric and column. Order within a run is `seq` (the record's index in
its log), not `t`: a fault and the removal it causes can share a timestamp.
"""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .read import EMPTY_DIGEST, EOF, SECOND

# Faults that open a window on each of their targets, and the verbs that close it (heal closes
# every network fault, whatever its targets). read.py has already made `all` every NameServer.
CLOSERS = {"kill": ["restart"], "stop": ["restart"], "freeze": ["unfreeze", "restart"],
           "partition": ["heal"], "isolate": ["heal"], "toxic": ["heal"],
           "ns-down": ["ns-up"], "wipe-perm": ["add-perm"]}
# Faults that make a master unusable to every producer (a partition cuts only some of them off);
# wipe-perm, on a broker group, blinds too.
BLINDING = ["kill", "stop", "freeze", "isolate"]
CENSOR_MARGIN = 2.0  # s: a producer still choosing the broker this close to the fault's end never stopped
DOWN = "down"  # a stopped NameServer's state in the divergence timeline
WINDOW_KEY = ["run", "fault_seq", "target"]
TRAFFIC = ["producer.send", SECOND]  # the rows of messages; the rest are few
GRID_KEY = ["scenario", "grid_label"]


def _of(events: DataFrame, *kinds: str) -> DataFrame:
    return events.filter(F.col("kind").isin(*kinds))


def _ratio(num: Column, den: Column) -> Column:
    return F.when(den > 0, num / den)


def compute(events: DataFrame) -> dict[str, DataFrame]:
    """Every table of the report, by name (docs/pipeline.md). `events` should be kept (keep)."""
    # Send attempts and counted seconds are most rows; everything but the message tables reads only
    # the rest: few rows, read by a dozen jobs, so in one partition (a task per split costs more than its scan).
    control = keep(events.filter(~F.col("kind").isin(*TRAFFIC)).coalesce(1))
    runs = small(run_info(control))
    nameservers = small(node_roles(control).filter(F.col("role") == "nameserver")
                        .select("run", F.col("node").alias("ns")))
    brokers = small(_of(control, "broker.start").groupBy("run", "node")
                    .agg(F.min("address").alias("address"), F.min("broker_name").alias("broker_name"),
                         F.min("broker_id").alias("broker_id")))
    windows = small(fault_windows(control, runs))
    tables = {
        "faults": windows,
        "availability": small(availability(events)),
        "detection": small(detection(control, windows, brokers, nameservers)),
        "blind": small(blind_windows(events, windows, brokers)),
        "removals": small(removals(control, windows, brokers)),
        "divergence": small(divergence(control, nameservers, runs)),
        "recovery": small(recovery(control, nameservers)),
    }
    points = small(grid_points(runs))
    tables["runs"] = small(per_run(runs, message_counts(control), tables, points))
    sound = sound_runs(tables["runs"])
    tables["grid"] = small(per_grid(tables, sound, points))
    tables["grid_availability"] = small(grid_availability(tables["availability"], sound, points))
    tables["send_latency"] = small(send_latency(events, sound, points))
    return tables


def sound_runs(runs: DataFrame) -> DataFrame:
    """The runs the aggregates count: a whole log (no `problem`) of a run (its run.start read)."""
    return runs.filter(F.col("problem").isNull() & F.col("scenario").isNotNull())


def keep(table: DataFrame, partitions: int | None = None) -> DataFrame:
    """Kept on the executors: the tables build on each other, and without this every later plan
    would carry (and recompute) all the plans before it. Locally, computed now with its lineage cut
    (localCheckpoint), then read in `partitions` tasks when given: computed in many (every core
    busy), read by many small jobs in few (a task per split costs more than its scan). On a
    cluster, where a lost executor must be able to recompute its part, only persisted (lazily,
    spilling to disk) and left as it is: a coalesce there would compute it in fewer tasks."""
    if table.sparkSession.sparkContext.master.startswith("local"):
        kept = table.localCheckpoint()
        return kept.coalesce(partitions) if partitions else kept
    return table.persist(StorageLevel.MEMORY_AND_DISK)


def small(table: DataFrame) -> DataFrame:
    """Kept (keep), and broadcast to the joins that read it: a table of a row per run, fault, node
    or second. Spark's estimate of a kept table's size compounds those of every join that made
    it, so it would shuffle both sides of every join instead (a dozen stages for a few rows)."""
    return F.broadcast(keep(table))


# --- what each run is ------------------------------------------------------------------------------

def run_info(events: DataFrame) -> DataFrame:
    """A row per log. A log without run.start (random bytes, another file) has no scenario and no
    grid point: it is listed with its problem, and counted in no grid point."""
    starts = _of(events, "run.start").select("run", "scenario", "seed", "grid", "grid_index", "grid_label",
                                             F.lit(True).alias("started"), "config")
    kind = F.col("kind")
    ends = _of(events, "run.end", EOF).groupBy("run").agg(
        F.max(F.when(kind == EOF, F.col("t"))).alias("end_t"),
        F.max(kind == "run.end").alias("complete"),
        F.max(F.when(kind == EOF, F.col("seq"))).alias("events"),
        F.max(F.when(kind == EOF, F.col("problem"))).alias("problem"))
    return (ends.join(starts, "run", "left").join(verdicts(events), "run", "left")
            .select("run", "scenario", "seed", "grid", "grid_index",
                    F.when(F.col("started"), F.coalesce("grid_label", F.lit(""))).alias("grid_label"), "config",
                    "end_t", F.coalesce("complete", F.lit(False)).alias("complete"), "events", "problem",
                    F.when(F.col("failed") > 0, "invalid").when(F.col("problem").isNull() & (F.col("unjudged") == 0),
                                                               "valid").alias("verdict"),
                    F.coalesce("failed_checks", F.array().cast("array<string>")).alias("failed_checks")))


def verdicts(events: DataFrame) -> DataFrame:
    """Per run with a check.result: its expectations' final results as the lab judges them
    (chaos.checks.verdict): one failed is invalid; all held is valid; an unjudged one (or, in run_info,
    a damaged log) leaves the run without a verdict. A check passed then violated is reported
    twice: its last result counts."""
    last = (_of(events, "check.result").groupBy("run", "check_name")
            .agg(F.max_by("check_status", "seq").alias("status"), F.max_by("check_detail", "seq").alias("detail"),
                 F.max("seq").alias("seq")))
    failed = F.col("status") == "failed"
    texts = F.array_sort(F.collect_list(F.when(failed, F.struct("seq", F.concat_ws(": ", "check_name", "detail")
                                                                 .alias("text")))))
    return last.groupBy("run").agg(
        F.count(F.when(failed, 1)).alias("failed"), F.count(F.when(F.col("status") != "ok", 1)).alias("unjudged"),
        F.transform(texts, lambda t: t["text"]).alias("failed_checks"))


def node_roles(events: DataFrame) -> DataFrame:
    """Every node with its role: run.start's nodes, and clients started mid-run."""
    declared = _of(events, "run.start").select("run", F.explode("nodes").alias("node", "role"))
    started = _of(events, "node.start").select("run", "node", "role")
    return declared.unionByName(started).distinct()


# --- messages and availability ---------------------------------------------------------------------

def message_counts(events: DataFrame) -> DataFrame:
    """Per run: its messages, acked, failed, lost, duplicates, retries and most retries of one
    message, as the decoder counted them (read.count_messages) on the log's log.eof row."""
    return _of(events, EOF).select("run", "messages", "acked", "failed", "lost", "duplicates", "retries",
                                   "max_retries")


def availability(events: DataFrame) -> DataFrame:
    """Per run and second: of the messages whose first attempt started in it, how many were acked
    (the decoder counted them per second: read.count_messages)."""
    messages = F.coalesce("messages", F.lit(0)).alias("messages")  # never null: the schema a count has
    return (_of(events, SECOND).filter(F.col("messages") > 0)
            .select("run", F.col("t").cast("int").alias("second"), messages, "acked", "failed",
                    (F.col("acked") / F.col("messages")).alias("availability")))


# --- faults ----------------------------------------------------------------------------------------

def fault_windows(events: DataFrame, runs: DataFrame) -> DataFrame:
    """One row per fault and target: from the fault to the verb that undoes it, or the run's end."""
    faults = _of(events, "chaos.fault")
    opens = faults.filter(F.col("verb").isin(*CLOSERS)).select(
        "run", F.col("seq").alias("fault_seq"), "verb", F.explode("targets").alias("target"),
        F.col("t").alias("start"))
    closes = faults.select(F.col("run").alias("c_run"), F.col("seq").alias("c_seq"), F.col("t").alias("c_t"),
                           F.col("verb").alias("c_verb"), F.explode_outer("targets").alias("c_target"))
    pairs = events.sparkSession.createDataFrame(
        [(verb, closer) for verb, closers in CLOSERS.items() for closer in closers], "verb string, closer string")
    candidates = opens.join(pairs, "verb")
    closed = (candidates.join(closes, (F.col("run") == F.col("c_run")) & (F.col("closer") == F.col("c_verb"))
                              & (F.col("c_seq") > F.col("fault_seq"))
                              & (F.col("c_target").isNull() | (F.col("c_target") == F.col("target"))), "left")
              .groupBy(*WINDOW_KEY, "verb", "start").agg(F.min("c_t").alias("closed_t")))
    return (closed.join(runs.select("run", "end_t"), "run")
            .select(*WINDOW_KEY, "verb", "start", F.coalesce("closed_t", "end_t").alias("end"))
            .withColumn("duration_s", F.col("end") - F.col("start")))


def detection(events: DataFrame, windows: DataFrame, brokers: DataFrame, nameservers: DataFrame) -> DataFrame:
    """Per fault on a broker node and NameServer that held the broker when it struck: when that
    NameServer removed it (null: it kept the broker until the fault ended)."""
    struck = windows.join(brokers.select("run", F.col("node").alias("target"), "address"), ["run", "target"])
    held = (struck.join(nameservers, "run").join(_holdings(events, nameservers), ["run", "ns"])
            .filter((F.col("s_seq") < F.col("fault_seq"))
                    & (F.col("s_addr").isNull() | (F.col("s_addr") == F.col("address"))))
            .groupBy(*WINDOW_KEY, "ns").agg(F.max_by("holds", "s_seq").alias("holds"))
            .filter("holds").drop("holds").join(struck, WINDOW_KEY))
    removed = _of(events, "ns.remove").select("run", F.col("node").alias("ns"), F.col("broker_addr").alias("address"),
                                             F.col("seq").alias("r_seq"), F.col("t").alias("removed_t"), "reason")
    first = (held.join(removed, ["run", "ns", "address"])
             .filter((F.col("r_seq") > F.col("fault_seq")) & (F.col("removed_t") <= F.col("end")))
             .groupBy(*WINDOW_KEY, "ns").agg(F.min("removed_t").alias("removed_t"),
                                             F.min_by("reason", "r_seq").alias("reason")))
    return (held.join(first, [*WINDOW_KEY, "ns"], "left")
            .select("run", "fault_seq", "verb", F.col("target").alias("broker"), "ns", "start", "removed_t",
                    (F.col("removed_t") - F.col("start")).alias("detection_s"), "reason",
                    F.col("removed_t").isNotNull().alias("detected")))


def _holdings(events: DataFrame, nameservers: DataFrame) -> DataFrame:
    """What each NameServer holds, as changes: a broker address registered or removed, or (when the
    NameServer starts or stops, s_addr null) nothing at all."""
    return (_of(events, "ns.register", "ns.remove", "node.start", "node.stop")
            .join(nameservers.withColumnRenamed("ns", "node"), ["run", "node"])
            .select("run", F.col("node").alias("ns"), F.col("seq").alias("s_seq"),
                    F.col("broker_addr").alias("s_addr"), (F.col("kind") == "ns.register").alias("holds")))


def blind_windows(events: DataFrame, windows: DataFrame, brokers: DataFrame) -> DataFrame:
    """Per blinding fault on a master (or wipe-perm on a group) and producer: how long after the
    fault the producer last chose that broker group for a send attempt."""
    masters = brokers.filter(F.col("broker_id") == 0).select("run", F.col("node").alias("target"), "broker_name")
    struck = (windows.filter(F.col("verb").isin(*BLINDING)).join(masters, ["run", "target"])
              .unionByName(windows.filter(F.col("verb") == "wipe-perm").withColumn("broker_name", F.col("target"))))
    sends = _of(events, "producer.send").select(
        "run", F.col("node").alias("producer"), F.col("broker").alias("broker_name"), "result",
        (F.col("t") - F.coalesce("latency", F.lit(0.0))).alias("chosen_t"))
    producers = sends.groupBy("run", "producer").agg(F.max("chosen_t").alias("producer_last_t"))
    candidates = struck.join(producers, "run")
    hits = (candidates.join(sends, ["run", "producer", "broker_name"])
            .filter(F.col("chosen_t").between(F.col("start"), F.col("end")))
            .groupBy(*WINDOW_KEY, "producer")
            .agg(F.max("chosen_t").alias("last_chosen_t"), F.count("*").alias("attempts"),
                 F.sum((F.col("result") != "ok").cast("int")).alias("failed_attempts")))
    # Still choosing it when the fault (or the producer) ended: the window is only a lower bound.
    censored = F.col("last_chosen_t") >= F.least("end", "producer_last_t") - CENSOR_MARGIN
    return (candidates.join(hits, [*WINDOW_KEY, "producer"], "left")
            .select("run", "fault_seq", "verb", "target", "broker_name", "producer", "start", "end", "last_chosen_t",
                    F.coalesce(F.col("last_chosen_t") - F.col("start"), F.lit(0.0)).alias("blind_s"),
                    F.coalesce("attempts", F.lit(0)).alias("attempts"),
                    F.coalesce("failed_attempts", F.lit(0)).alias("failed_attempts"),
                    F.coalesce(censored, F.lit(False)).alias("censored")))


def removals(events: DataFrame, windows: DataFrame, brokers: DataFrame) -> DataFrame:
    """Every removal; a false one took a broker away, not by unregistering, while no fault was on
    that broker or on the NameServer that removed it."""
    removed = (_of(events, "ns.remove")
               .select("run", "seq", "t", F.col("node").alias("ns"), F.col("broker_addr").alias("address"), "reason")
               .join(brokers.select("run", F.col("node").alias("broker"), "address"), ["run", "address"], "left"))
    faulted = (removed.join(windows.select("run", "target", "start", "end"), "run")
               .filter(F.col("t").between(F.col("start"), F.col("end"))
                       & F.col("target").isin(F.col("broker"), F.col("ns")))
               .select("run", "seq").distinct().withColumn("during_fault", F.lit(True)))
    during = F.coalesce("during_fault", F.lit(False))
    return (removed.join(faulted, ["run", "seq"], "left")
            .select("run", "t", "ns", "broker", "address", "reason", during.alias("during_fault"),
                    ((F.col("reason") != "unregistered") & ~during).alias("false_removal")))


def divergence(events: DataFrame, nameservers: DataFrame, runs: DataFrame) -> DataFrame:
    """Windows during which the live NameServers would answer route queries differently."""
    changes = (_of(events, "ns.tables", "node.start", "node.stop")
               .join(nameservers.withColumnRenamed("ns", "node"), ["run", "node"])
               .select("run", F.col("node").alias("ns"), "seq", "t",
                       F.when(F.col("kind") == "ns.tables", F.col("digest"))
                       .when(F.col("kind") == "node.start", F.lit(EMPTY_DIGEST)).otherwise(F.lit(DOWN)).alias("view"),
                       F.lit(0).alias("probe")))
    # At every change, probe every NameServer's view as of then: the last change at or before it.
    probes = (changes.select("run", "seq", "t").join(nameservers, "run")
              .select("run", "ns", "seq", "t", F.lit(None).cast("string").alias("view"), F.lit(1).alias("probe")))
    as_of = Window.partitionBy("run", "ns").orderBy("seq", "probe").rowsBetween(Window.unboundedPreceding, 0)
    views = (changes.unionByName(probes).withColumn("view", F.last("view", ignorenulls=True).over(as_of))
             .filter("probe = 1").groupBy("run", "seq", "t")
             .agg(F.count_distinct(F.when(F.col("view") != DOWN, F.col("view"))).alias("views")))
    order = Window.partitionBy("run").orderBy("seq")
    diverged = F.col("views") > 1
    steps = (views.join(runs.select("run", "end_t"), "run")
             .withColumn("until", F.coalesce(F.lead("t").over(order), F.col("end_t")))
             .withColumn("episode", F.sum((diverged != F.coalesce(F.lag(diverged).over(order), F.lit(False)))
                                          .cast("int")).over(order)))
    return (steps.filter(diverged).groupBy("run", "episode")
            .agg(F.min("t").alias("start"), F.max("until").alias("end"), F.max("views").alias("views"))
            .withColumn("duration_s", F.col("end") - F.col("start")).filter("duration_s > 0").drop("episode"))


def recovery(events: DataFrame, nameservers: DataFrame) -> DataFrame:
    """Every time all NameServers were down and one came back: how long until a broker registered
    again and until a client got a route from a NameServer."""
    order = Window.partitionBy("run").orderBy("seq")
    live = (_of(events, "node.start", "node.stop").join(nameservers.withColumnRenamed("ns", "node"), ["run", "node"])
            .withColumn("live", F.sum(F.when(F.col("kind") == "node.start", 1).otherwise(-1)).over(order))
            .withColumn("before", F.lag("live").over(order)))
    edges = live.filter(((F.col("live") == 0) & (F.col("before") > 0)) | ((F.col("live") > 0) & (F.col("before") == 0)))
    outages = (edges.withColumn("up_t", F.lead("t").over(order)).withColumn("up_seq", F.lead("seq").over(order))
               .filter((F.col("live") == 0) & F.col("up_t").isNotNull())
               .select("run", F.col("t").alias("down_t"), "up_t", "up_seq"))

    def first_after(condition: Column, name: str) -> DataFrame:
        hits = events.filter(condition).select("run", F.col("seq").alias("h_seq"), F.col("t").alias("h_t"))
        return (outages.join(hits, "run").filter(F.col("h_seq") > F.col("up_seq"))
                .groupBy("run", "up_seq").agg(F.min("h_t").alias(name)))

    registered = first_after(F.col("kind") == "ns.register", "registered_t")
    routed = first_after((F.col("kind") == "client.route") & F.col("ok") & (F.col("source") == "nameserver"),
                         "routed_t")
    return (outages.join(registered, ["run", "up_seq"], "left").join(routed, ["run", "up_seq"], "left")
            .select("run", "down_t", "up_t", (F.col("up_t") - F.col("down_t")).alias("outage_s"),
                    (F.col("registered_t") - F.col("up_t")).alias("registered_s"),
                    (F.col("routed_t") - F.col("up_t")).alias("recovery_s")))


# --- summaries -------------------------------------------------------------------------------------
# Per run, every run; per grid point, only the `sound` runs (no problem with their log): a torn or
# corrupt log would count a run cut short as a whole one.

def _spread(column: str, name: str) -> list[Column]:
    return [F.median(column).alias(f"{name}_p50_s"), F.percentile(column, 0.95).alias(f"{name}_p95_s"),
            F.max(column).alias(f"{name}_max_s")]


def _latencies(tables: dict[str, DataFrame], keys: list[str], with_keys: DataFrame | None = None) -> list[DataFrame]:
    """Detection and blind windows summarised by `keys` (joined to runs' columns when given)."""
    detection, blind = tables["detection"], tables["blind"]
    if with_keys is not None:
        detection, blind = detection.join(with_keys, "run"), blind.join(with_keys, "run")
    return [detection.groupBy(*keys).agg(*_spread("detection_s", "detection"),
                                         F.sum((~F.col("detected")).cast("int")).alias("undetected")),
            blind.groupBy(*keys).agg(*_spread("blind_s", "blind"),
                                     F.sum(F.col("censored").cast("int")).alias("blind_censored"))]


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


def per_run(runs: DataFrame, counts: DataFrame, tables: dict[str, DataFrame], points: DataFrame) -> DataFrame:
    parts = [counts,
             tables["availability"].groupBy("run").agg(F.min("availability").alias("worst_second")),
             *_latencies(tables, ["run"]),
             tables["divergence"].groupBy("run").agg(F.sum("duration_s").alias("divergence_s"),
                                                     F.max("duration_s").alias("longest_divergence_s")),
             tables["recovery"].groupBy("run").agg(F.max("recovery_s").alias("recovery_s")),
             tables["removals"].groupBy("run").agg(F.sum(F.col("false_removal").cast("int")).alias("false_removals"))]
    out = runs.drop("config")
    for part in parts:
        out = out.join(part, "run", "left")
    zero = ["messages", "acked", "failed", "lost", "duplicates", "retries", "divergence_s", "false_removals"]
    out = (out.fillna(0, subset=zero)
           .withColumn("availability", _ratio(F.col("acked"), F.col("messages")))
           .withColumn("retries_per_message", _ratio(F.col("retries"), F.col("messages"))))
    return _in_grid_order(out, points, "seed", "run")


def per_grid(tables: dict[str, DataFrame], sound: DataFrame, points: DataFrame) -> DataFrame:
    """Per grid point, over its sound runs; a point whose every run was left out still has a row."""
    base = sound.groupBy(*GRID_KEY).agg(
        F.count("*").alias("runs"), F.sum(F.col("complete").cast("int")).alias("complete_runs"),
        F.sum("events").alias("events"), F.sum("messages").alias("messages"),
        F.avg("availability").alias("availability"), F.min("worst_second").alias("worst_second"),
        _ratio(F.sum("retries"), F.sum("messages")).alias("retries_per_message"),
        *[F.sum(c).alias(c) for c in ("failed", "lost", "duplicates", "false_removals")],
        F.avg("divergence_s").alias("divergence_s"), F.max("longest_divergence_s").alias("longest_divergence_s"),
        F.avg("recovery_s").alias("recovery_s"))
    for part in _latencies(tables, GRID_KEY, sound.select("run", *GRID_KEY)):
        base = base.join(part, GRID_KEY, "left")
    grid = (points.join(base, GRID_KEY, "left").fillna(0, subset=["runs", "complete_runs"])
            .select(*GRID_KEY, "grid", "grid_index", "runs", "excluded_runs", *base.columns[3:]))
    return grid.orderBy(F.asc_nulls_last("grid_index"), *GRID_KEY)


def grid_availability(availability: DataFrame, sound: DataFrame, points: DataFrame) -> DataFrame:
    """Per grid point and second: the runs' mean and worst availability."""
    per_point = (availability.join(sound.select("run", *GRID_KEY), "run")
                 .groupBy(*GRID_KEY, "second")
                 .agg(F.avg("availability").alias("mean"), F.min("availability").alias("min"),
                      F.count("*").alias("runs"), F.sum("messages").alias("messages")))
    return _in_grid_order(per_point, points, "second")


def send_latency(events: DataFrame, sound: DataFrame, points: DataFrame) -> DataFrame:
    """Send attempts per grid point in tenth-of-a-decade latency buckets (log10 of seconds)."""
    bucket = F.floor(F.log10("latency") * 10) / 10
    sends = _of(events, "producer.send").filter(F.col("latency") > 0).select("run", "latency", "result")
    per_point = (sends.join(sound.select("run", *GRID_KEY), "run")
                 .groupBy(*GRID_KEY, bucket.alias("log10_s"))
                 .agg(F.count("*").alias("sends"), F.sum((F.col("result") != "ok").cast("int")).alias("failed")))
    return _in_grid_order(per_point, points, "log10_s")
