"""Event logs into a DataFrame, decoded on the executors.

Spark's binaryFile source hands each log's bytes to an executor, which decodes the msgpack records
(lab.events.read_events: a torn last record is skipped) into flat rows: one column per field the
metrics read, null where a kind has no such field. Only the kinds the metrics use become rows;
each log ends with a synthetic `log.eof` row: `seq` is the log's record count, `t` its last record's.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (ArrayType, BooleanType, DoubleType, IntegerType, LongType, MapType, StringType,
                               StructField, StructType)

from lab.events import read_events

PATTERN = "*.events"  # what a directory given to `nslab report` is searched for (recursively)
EOF = "log.eof"

KINDS = frozenset({
    "run.start", "run.end", "node.start", "node.stop", "broker.start", "chaos.fault",
    "ns.register", "ns.remove", "ns.tables", "client.route",
    "producer.send", "producer.ack", "producer.failed", "consumer.consume",
})

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
    StructField("scenario", _string), StructField("seed", LongType()),
    # Derived, from the few records of one kind:
    StructField("targets", ArrayType(_string)),  # chaos.fault: its nodes, or everyone in its groups
    StructField("digest", _string),  # ns.tables: the routes it would answer, hashed
    StructField("grid", MapType(_string, _string)), StructField("grid_label", _string),  # run.start
    StructField("config", _string),  # run.start's config, as JSON
    StructField("nodes", MapType(_string, _string)),  # run.start's {name: role}
])
_DERIVED = ("targets", "digest", "grid", "grid_label", "config", "nodes")
_COPIED = tuple(f.name for f in SCHEMA.fields[2:] if f.name not in _DERIVED)
_NO_DERIVED = (None,) * len(_DERIVED)


def route_digest(tables: dict) -> str:
    """What GET_ROUTEINFO_BY_TOPIC answers for every topic, as a hash: NameServers with equal digests
    agree. brokerLiveTable is left out on purpose: heartbeats change it, routes do not show it."""
    view = [tables.get("topicQueueTable", {}), tables.get("brokerAddrTable", {})]
    return hashlib.sha1(json.dumps(view, sort_keys=True).encode()).hexdigest()


EMPTY_DIGEST = route_digest({})  # a (re)started NameServer's


def grid_label(grid: dict | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (grid or {}).items())


def _row(run: str, seq: int, r: dict) -> tuple:
    copied = (run, seq, *map(r.get, _COPIED))
    kind = r["kind"]
    if kind == "chaos.fault":
        targets = list(r.get("nodes", [])) + [n for group in r.get("groups", []) for n in group]
        return copied + (targets, *_NO_DERIVED[1:])
    if kind == "ns.tables":
        return copied + (None, route_digest(r), *_NO_DERIVED[2:])
    if kind == "run.start":
        grid = {str(k): str(v) for k, v in (r.get("grid") or {}).items()}
        return copied + (None, None, grid, grid_label(grid), json.dumps(r.get("config") or {}), r.get("nodes") or {})
    return copied + _NO_DERIVED


def decode(run: str, content: bytes) -> Iterator[tuple]:
    seq, t = 0, None
    for seq, record in enumerate(read_events(content), 1):
        t = record.get("t", t)
        if record.get("kind") in KINDS:
            yield _row(run, seq - 1, record)
    yield _row(run, seq, {"kind": EOF, "t": t})


def load(spark: SparkSession, paths: list[str | Path]) -> DataFrame:
    """Every event log under the given directories (*.events, recursively) and every file named
    (whatever its name), each once, as rows."""
    dirs = [str(p) for p in paths if Path(p).is_dir()]
    files = [str(p) for p in paths if not Path(p).is_dir()]
    found = set()  # qualified paths: a log found twice (in a directory and by name) is read once
    if dirs:
        found.update(spark.read.format("binaryFile").option("pathGlobFilter", PATTERN)
                     .option("recursiveFileLookup", "true").load(dirs).inputFiles())
    if files:
        found.update(spark.read.format("binaryFile").load(files).inputFiles())
    if not found:
        return spark.createDataFrame([], SCHEMA)
    logs = spark.read.format("binaryFile").load(sorted(found))
    rows = logs.select("path", "content").rdd.flatMap(lambda f: decode(f.path, f.content))
    return spark.createDataFrame(rows, SCHEMA, verifySchema=False)
