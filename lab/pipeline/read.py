"""Event logs into a DataFrame, decoded on the executors with Arrow.

A DataFrame of (path, content) — Spark's binaryFile source, or on a cluster the driver's own files
shipped to the executors — goes through `mapInArrow`: each executor decodes the msgpack records
(lab.events.scan_events) into a pyarrow RecordBatch of flat rows: one column per field the metrics
read, null where a kind has no such field. Only the kinds the metrics use become rows.

The message records (producer.ack, producer.failed, consumer.consume: half of a log) are not rows:
a message is all within one log, so the decoder counts them here, in one pass, rather than Spark
shuffling them into a group per message. They become a `traffic.second` row per second of the run
(its messages, acked and failed by first attempt; its ack and failure records by their own time)
and the counts of the log's messages, on its `log.eof` row. producer.send stays a row per attempt:
blind windows, send latency and the timeline need each attempt.

Each log ends with a synthetic `log.eof` row: `seq` is the log's record count, `t` its last
record's, `problem` why the log cannot be trusted whole (null: it can), and its message counts.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (ArrayType, BooleanType, DoubleType, IntegerType, LongType, MapType, StringType,
                               StructField, StructType)

from lab.events import scan_events

from .storage import is_uri

PATTERN = "*.events"  # what a directory given to `nslab report` is searched for (recursively)
EOF = "log.eof"
SECOND = "traffic.second"  # a second of a run's traffic, counted by the decoder

# The kinds that become rows, and the ones counted into `traffic.second` and `log.eof` rows.
KINDS = frozenset({
    "run.start", "run.end", "node.start", "node.stop", "broker.start", "chaos.fault",
    "ns.register", "ns.remove", "ns.tables", "client.route", "check.result", "producer.send",
})
COUNTED = frozenset({"producer.send", "producer.ack", "producer.failed", "consumer.consume"})

_COUNTS = ("messages", "acked", "failed", "ack_records", "failed_records", "lost", "duplicates", "retries",
           "max_retries")
_string, _int, _double, _bool = StringType(), IntegerType(), DoubleType(), BooleanType()
SCHEMA = StructType([
    StructField("run", _string, False),  # the log's path
    StructField("seq", LongType(), False),  # the record's index in its log: the order of events at one t
    # Fields copied as they are from the records that have them:
    StructField("t", _double), StructField("node", _string), StructField("kind", _string),
    StructField("msg_id", _string), StructField("broker", _string), StructField("attempt", _int),
    StructField("result", _string), StructField("latency", _double),
    StructField("broker_addr", _string), StructField("reason", _string),
    StructField("broker_name", _string), StructField("broker_id", _int),
    StructField("verb", _string), StructField("role", _string), StructField("address", _string),
    StructField("ok", _bool), StructField("source", _string),
    StructField("scenario", _string), StructField("seed", LongType()), StructField("grid_index", _int),
    # Derived, from the few records of one kind:
    StructField("targets", ArrayType(_string)),  # chaos.fault: its nodes (`all`: every NameServer), or its groups'
    StructField("digest", _string),  # ns.tables: the routes it would answer, hashed
    StructField("grid", MapType(_string, _string)), StructField("grid_label", _string),  # run.start
    StructField("config", _string),  # run.start's config, as JSON
    StructField("nodes", MapType(_string, _string)),  # run.start's {name: role}
    # check.result's name, status and detail (`status` and `detail` mean other things in other kinds)
    StructField("check_name", _string), StructField("check_status", _string), StructField("check_detail", _string),
    StructField("problem", _string),  # log.eof: why the log cannot be trusted whole, null when it can
    # Counted messages (docs/pipeline.md's Messages). traffic.second (`t` the second): the messages
    # whose first attempt started in it, acked, failed, and the ack and failure records at it.
    # log.eof: the log's messages, acked, failed, lost, duplicates, retries, max_retries.
    *[StructField(name, LongType()) for name in _COUNTS],
])
_DERIVED = ("targets", "digest", "grid", "grid_label", "config", "nodes",
            "check_name", "check_status", "check_detail", "problem", *_COUNTS)
_COPIED = tuple(f.name for f in SCHEMA.fields[2:] if f.name not in _DERIVED)
ARROW = to_arrow_schema(SCHEMA)
# The copied fields as one Arrow struct: pyarrow converts a list of records to it in C++, picking
# the fields by name and ignoring the rest — no Python loop over a million records and twenty fields.
_COPIED_TYPE = pa.struct([ARROW.field(name) for name in _COPIED])
_SPECIAL = ["chaos.fault", "ns.tables", "run.start", "check.result"]  # the kinds with derived columns


def route_digest(tables: dict) -> str:
    """What GET_ROUTEINFO_BY_TOPIC answers for every topic, as a hash: NameServers with equal digests
    agree. brokerLiveTable is left out on purpose: heartbeats change it, routes do not show it."""
    view = [tables.get("topicQueueTable", {}), tables.get("brokerAddrTable", {})]
    return hashlib.sha1(json.dumps(view, sort_keys=True).encode()).hexdigest()


EMPTY_DIGEST = route_digest({})  # a (re)started NameServer's


def grid_label(grid: dict | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (grid or {}).items())


# --- decoding, on the executors --------------------------------------------------------------------

def _derived(r: dict, nameservers: list[str]) -> dict:
    kind = r["kind"]
    if kind == "chaos.fault":
        nodes = list(r.get("nodes") or [])
        if r.get("verb") in ("ns-down", "ns-up") and nodes == ["all"]:
            nodes = nameservers  # what lab/control/faults.py does with `all`
        return {"targets": [str(n) for n in nodes] + [str(n) for group in r.get("groups") or [] for n in group]}
    if kind == "ns.tables":
        return {"digest": route_digest(r)}
    if kind == "run.start":
        grid = {str(k): str(v) for k, v in (r.get("grid") or {}).items()}
        return {"grid": grid, "grid_label": grid_label(grid), "config": json.dumps(r.get("config") or {}, default=str),
                "nodes": {str(k): str(v) for k, v in (r.get("nodes") or {}).items()}}
    return {"check_name": r.get("name"), "check_status": r.get("status"), "check_detail": r.get("detail")}


def _copied(rows: list[dict]) -> list[pa.Array]:
    try:
        struct = pa.array(rows, _COPIED_TYPE)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        # A value of an unexpected type somewhere: column by column, that value null.
        return [_coerced([r.get(f.name) for r in rows], f.type) for f in _COPIED_TYPE]
    return [struct.field(i) for i in range(struct.type.num_fields)]


def _coerced(values: list, kind: pa.DataType) -> pa.Array:
    try:
        return pa.array(values, kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([v if _fits(v, kind) else None for v in values], kind)


def _fits(value, kind: pa.DataType) -> bool:
    try:
        pa.scalar(value, kind)
        return True
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return False


def _number(value) -> float | None:
    """A field as Spark reads it into a double column: a number, else null."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


def count_messages(records: list[dict]) -> tuple[list[dict], dict]:
    """A log's messages, counted as docs/pipeline.md defines them (a msg_id with a producer.send or a
    producer.failed; its time the start of its first attempt): the `traffic.second` rows and the
    log's totals. Null fields count as Spark would count them (a record without `t` has no second)."""
    per_msg: dict = {}  # msg_id -> [first attempt's start, first failure's t, attempts, acks, consumed]
    ack_records, failed_records = Counter(), Counter()
    for r in records:
        kind = r.get("kind")
        if kind not in COUNTED:
            continue
        m = per_msg.setdefault(_text(r.get("msg_id")), [None, None, 0, 0, 0])
        t = _number(r.get("t"))
        if kind == "producer.send":
            m[2] += 1
            if t is not None:
                start = t - (_number(r.get("latency")) or 0.0)
                m[0] = start if m[0] is None else min(m[0], start)
        elif kind == "producer.ack":
            m[3] += 1
            if t is not None:
                ack_records[math.floor(t)] += 1
        elif kind == "producer.failed":
            if t is not None:
                m[1] = t if m[1] is None else min(m[1], t)
                failed_records[math.floor(t)] += 1
        else:
            m[4] += 1
    seconds: dict[int, list[int]] = {}  # second -> [messages, acked, failed]
    totals = dict.fromkeys(("messages", "acked", "failed", "lost", "duplicates", "retries"), 0)
    totals["max_retries"] = None
    for send_t, failed_t, attempts, acks, consumed in per_msg.values():
        if send_t is None and failed_t is None:
            continue  # only consumed (its send not in the log): not a message this run sent
        retries = max(attempts - 1, 0)
        acked, failed = acks > 0, failed_t is not None
        counts = seconds.setdefault(math.floor(send_t if send_t is not None else failed_t), [0, 0, 0])
        counts[0] += 1
        counts[1] += acked
        counts[2] += failed
        totals["messages"] += 1
        totals["acked"] += acked
        totals["failed"] += failed
        totals["lost"] += acked and consumed == 0
        totals["duplicates"] += consumed > 1
        totals["retries"] += retries
        totals["max_retries"] = max(totals["max_retries"] or 0, retries)
    rows = []
    for second in sorted(seconds.keys() | ack_records.keys() | failed_records.keys()):
        messages, acked, failed = seconds.get(second, (0, 0, 0))
        rows.append({"t": float(second), "messages": messages, "acked": acked, "failed": failed,
                     "ack_records": ack_records[second], "failed_records": failed_records[second]})
    return rows, totals


def decode(run: str, content: bytes) -> pa.RecordBatch:
    """One log's rows, as one RecordBatch of ARROW's schema."""
    records, problem = scan_events(content)
    seqs = [i for i, r in enumerate(records) if r.get("kind") in KINDS]
    rows = [records[i] for i in seqs]
    seconds, totals = count_messages(records)
    n = len(rows)
    rows += [{"kind": SECOND, "t": s["t"]} for s in seconds]
    last_t = next((r["t"] for r in reversed(records) if "t" in r), None)
    rows.append({"kind": EOF, "t": last_t})
    seqs += [len(records)] * (len(seconds) + 1)  # after every record
    copied = _copied(rows)
    derived = {name: [None] * len(rows) for name in _DERIVED}
    for i, second in enumerate(seconds, n):
        for name in ("messages", "acked", "failed", "ack_records", "failed_records"):
            derived[name][i] = second[name]
    for name, value in totals.items():
        derived[name][-1] = value
    derived["problem"][-1] = problem
    start = records[0] if records and records[0].get("kind") == "run.start" else {}
    nameservers = sorted(str(n) for n, role in (start.get("nodes") or {}).items() if role == "nameserver")
    kinds = copied[_COPIED.index("kind")]
    for i in pc.indices_nonzero(pc.is_in(kinds, pa.array(_SPECIAL))).to_pylist():
        for name, value in _derived(rows[i], nameservers).items():
            derived[name][i] = value
    arrays = [pa.array([run] * len(rows), pa.string()), pa.array(seqs, pa.int64()), *copied,
              *(pa.array(derived[name], ARROW.field(name).type) for name in _DERIVED)]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW)


def decode_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function: (path, content) batches in, a batch of rows per log out."""
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
    """Every event log the inputs name, each once, as rows. An input is a plain path on the driver's
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
