"""Event logs into a DataFrame of one row per log, each run analysed on the executor that decodes it.

A DataFrame of (path, content) — Spark's binaryFile source, or on a cluster the driver's own files
shipped to the executors — goes through `mapInArrow`: each executor decodes a log's msgpack records
(lab.events.scan_events) and computes that run's metrics in plain Python (run_metrics.analyse): a
run is all within one log, so nothing per run needs a shuffle. The row holds the run's figures as
columns and its rows of every per-run table as an array of structs; metrics.py explodes them and
aggregates over runs. A million records become a few dozen rows, not a million.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (ArrayType, BooleanType, DoubleType, IntegerType, LongType, MapType, StringType,
                               StructField, StructType)

from lab.events import scan_events

from .run_metrics import analyse
from .storage import is_uri

PATTERN = "*.events"  # what a directory given to `nslab report` is searched for (recursively)

_string, _int, _long, _double, _bool = StringType(), IntegerType(), LongType(), DoubleType(), BooleanType()


def _fields(spec: str) -> list[StructField]:
    """`name type, ...` as StructFields (types: string, int, long, double, bool)."""
    types = {"string": _string, "int": _int, "long": _long, "double": _double, "bool": _bool}
    return [StructField(name, types[kind]) for name, kind in (f.split() for f in spec.split(","))]


# Each per-run table's columns after `run` (docs/pipeline.md defines them).
TABLES = {
    "faults": "fault_seq long, target string, verb string, start double, end double, duration_s double",
    "availability": "second int, messages long, acked long, failed long, availability double",
    "detection": "fault_seq long, verb string, broker string, ns string, start double, removed_t double, "
                 "detection_s double, reason string, detected bool",
    "blind": "fault_seq long, verb string, target string, broker_name string, producer string, start double, "
             "end double, last_chosen_t double, blind_s double, attempts long, failed_attempts long, censored bool",
    "removals": "t double, ns string, broker string, address string, reason string, during_fault bool, "
                "false_removal bool",
    "divergence": "start double, end double, views long, duration_s double",
    "recovery": "down_t double, up_t double, outage_s double, registered_s double, recovery_s double",
    # An application under test (issue 39), a row per app; its recovery after each fault end.
    "apps": "app string, sends long, acked long, failed long, lost long, duplicates long, deliveries long, "
            "exit_code int, exit_signal string, stopped_by_lab bool, died bool",
    "app_recovery": "app string, fault_end double, ended_by string, baseline long, recovery_s double, recovered bool",
    # Rows only combined over runs: every second's ack and failure records, send attempts per
    # latency bucket, and what the per-node timeline draws.
    "traffic": "second int, acked long, failed long",
    "latency_buckets": "log10_s double, sends long, failed long",
    "timeline": "seq long, t double, node string, node_role string, kind string, broker_addr string, "
                "address string, broker_name string, broker_id int, broker string, result string, latency double",
}
def rows_of(table: str) -> str:
    """The column of a log's row that holds its rows of `table` (the runs table has an `availability` too)."""
    return f"{table}_rows"


# The run's own columns: what it is, how it was judged, and its figures (the runs table).
RUN_COLUMNS = [
    StructField("run", _string, False),  # the log's path
    *_fields("scenario string, seed long"), StructField("grid", MapType(_string, _string)),
    *_fields("grid_index int, grid_label string, end_t double, complete bool, events long, problem string, "
             "verdict string"),
    StructField("failed_checks", ArrayType(_string)),
    *_fields("messages long, acked long, failed long, lost long, duplicates long, retries long, max_retries long, "
             "worst_second double, detection_p50_s double, detection_p95_s double, detection_max_s double, "
             "undetected long, blind_p50_s double, blind_p95_s double, blind_max_s double, blind_censored long, "
             "divergence_s double, longest_divergence_s double, recovery_s double, false_removals long, "
             "faulted_requests long, availability double, retries_per_message double"),
    # The runs' apps (issue 39), null for a run without one.
    *_fields("app_sends long, app_acked long, app_failed long, app_lost long, app_duplicates long, "
             "app_recovery_s double, app_unrecovered long, app_died long"),
]
SCHEMA = StructType([*RUN_COLUMNS,
                     *(StructField(rows_of(name), ArrayType(StructType(_fields(spec)))) for name, spec in TABLES.items())])
ARROW = to_arrow_schema(SCHEMA)


def decode(run: str, content: bytes) -> pa.RecordBatch:
    """One log as one row of SCHEMA: its run analysed (run_metrics.analyse). A damaged log is
    analysed as far as it can be read, and its row says what is wrong with it (`problem`)."""
    records, problem = scan_events(content)
    figures, tables = analyse(records, problem)
    row = {"run": run, **figures}
    arrays = [pa.array([row[c.name]], ARROW.field(c.name).type) for c in RUN_COLUMNS]
    arrays += [_rows_array(tables[name], ARROW.field(rows_of(name)).type) for name in TABLES]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW)


def _rows_array(rows: list[dict], kind: pa.ListType) -> pa.ListArray:
    """A table's rows as one list of structs, built column by column: pyarrow converts a column of
    plain values in C++, where a list of dicts (from_pylist) costs twenty times as much."""
    struct = kind.value_type
    columns = [pa.array([r[f.name] for r in rows], f.type) for f in struct]
    values = pa.StructArray.from_arrays(columns, fields=list(struct))
    return pa.ListArray.from_arrays(pa.array([0, len(rows)], pa.int32()), values, type=kind)


def decode_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function: (path, content) batches in, a row per log out."""
    for batch in batches:
        for path, content in zip(batch.column("path").to_pylist(), batch.column("content").to_pylist()):
            yield decode(path, content)


# --- finding the logs, on the driver ---------------------------------------------------------------

LOGS = "path string, content binary"


def _local_logs(paths: list[str]) -> dict[str, Path]:
    """Plain paths on the driver's disk: every *.events below a directory, a file as it is; keyed by
    the path as binaryFile gives it (file:/abs/path), so a log found twice is one key."""
    found = {}
    for path in map(Path, paths):
        for file in sorted(path.rglob(PATTERN)) if path.is_dir() else [path]:
            if file.is_file() or not path.is_dir():
                found["file:" + os.path.abspath(file)] = file
    return found


def _listed(spark: SparkSession, uris: list[str]) -> set[str]:
    """The files a URI names, or every *.events below it (it is a directory), as qualified paths."""
    jvm = spark.sparkContext._jvm
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    dirs, files = [], []
    for uri in uris:
        path = jvm.org.apache.hadoop.fs.Path(uri)
        (dirs if path.getFileSystem(hadoop).getFileStatus(path).isDirectory() else files).append(uri)
    found = set()
    if dirs:
        found.update(spark.read.format("binaryFile").option("pathGlobFilter", PATTERN)
                     .option("recursiveFileLookup", "true").load(dirs).inputFiles())
    if files:
        found.update(spark.read.format("binaryFile").load(files).inputFiles())
    # file:///x and file:/x are one file; binaryFile's path column says file:/x.
    return {"file:/" + f[len("file:///"):] if f.startswith("file:///") else f for f in found}


def _binary_files(spark: SparkSession, paths: list[str]) -> DataFrame:
    return spark.read.format("binaryFile").load(paths).select("path", "content")


def _shipped(spark: SparkSession, files: dict[str, Path]) -> DataFrame:
    """The driver's own logs, read here and sent to the executors (a worker may not see this disk)."""
    table = pa.table({"path": list(files), "content": [f.read_bytes() for f in files.values()]},
                     schema=pa.schema([("path", pa.string()), ("content", pa.binary())]))
    parts = max(1, min(len(files), spark.sparkContext.defaultParallelism))
    return spark.createDataFrame(table, LOGS).repartition(parts)  # every executor core gets logs


def load(spark: SparkSession, inputs: list[str]) -> DataFrame:
    """Every event log the inputs name, each once, as a row (SCHEMA). An input is a plain path on the driver's
    disk or a URI (file://, hdfs://, s3a://…); a directory means every *.events below it, a file is
    read whatever its name. Locally everything goes through binaryFile; on a cluster the driver ships
    its plain paths' logs itself and executors read only the URIs."""
    inputs = [str(i) for i in inputs]
    uris = [i for i in inputs if is_uri(i)]
    local = _local_logs([i for i in inputs if not is_uri(i)])
    listed = _listed(spark, uris) if uris else set()
    if spark.sparkContext.master.startswith("local"):
        paths = sorted(set(local) | listed)
        logs = _binary_files(spark, paths) if paths else None
    else:
        parts = ([_shipped(spark, local)] if local else []) + \
                ([_binary_files(spark, sorted(listed - set(local)))] if listed - set(local) else [])
        logs = parts[0].unionByName(parts[1]) if len(parts) == 2 else (parts[0] if parts else None)
    if logs is None:
        return spark.createDataFrame([], SCHEMA)
    return logs.mapInArrow(decode_batches, SCHEMA)
