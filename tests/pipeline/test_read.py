"""read.py: the Arrow decoding gives the rows the pickled-row decoding gave, logs are found once,
whether Spark reads them or the driver ships them, and a damaged log says what is wrong with it."""

from __future__ import annotations

import json
import random

import msgpack
import pytest
from conftest import crash_log, outage_log, partition_log

from lab.events import read_events, scan_events
from lab.pipeline import read

# The columns read.py had before Arrow decoding, and their meaning then: a reference to compare with.
# (The message records other than producer.send are counted by the decoder now, not rows.)
OLD_KINDS = read.KINDS - {"check.result"}
COUNTS = {"messages", "acked", "failed", "ack_records", "failed_records", "lost", "duplicates", "retries",
          "max_retries"}
OLD_COPIED = ["t", "node", "kind", "msg_id", "broker", "attempt", "result", "latency", "broker_addr", "reason",
              "broker_name", "broker_id", "verb", "role", "address", "ok", "source", "scenario", "seed"]


def reference_rows(run: str, content: bytes) -> list[dict]:
    """The rows the old read.decode made (read_events, then a tuple per record), as dicts."""
    rows, seq, t = [], 0, None
    for seq, r in enumerate(read_events(content), 1):
        t = r.get("t", t)
        if r.get("kind") not in OLD_KINDS:
            continue
        row = {"run": run, "seq": seq - 1, **{k: r.get(k) for k in OLD_COPIED}}
        if r["kind"] == "chaos.fault":
            row["targets"] = list(r.get("nodes", [])) + [n for g in r.get("groups", []) for n in g]
        if r["kind"] == "ns.tables":
            row["digest"] = read.route_digest(r)
        if r["kind"] == "run.start":
            row["grid"] = {str(k): str(v) for k, v in (r.get("grid") or {}).items()}
            row["grid_label"], row["config"] = read.grid_label(row["grid"]), json.dumps(r.get("config") or {})
            row["nodes"] = r.get("nodes")
        rows.append(row)
    rows.append({"run": run, "seq": seq, "kind": read.EOF, "t": t})
    return rows


@pytest.mark.parametrize("make", [crash_log, outage_log, partition_log])
def test_arrow_decoding_gives_the_rows_the_old_decoding_gave(make):
    content = make().bytes()
    new = [r for r in read.decode("file:/x.events", content).to_pylist() if r["kind"] not in ("check.result", read.SECOND)]
    old = reference_rows("file:/x.events", content)
    assert len(new) == len(old)
    for got, want in zip(new, old):
        got = {k: dict(v) if k in ("grid", "nodes") and v is not None else v for k, v in got.items()}
        if want["kind"] == "chaos.fault" and want["targets"] == ["all"]:
            want["targets"] = ["ns-0", "ns-1"]  # the one change: `all` is every NameServer of the run
        assert {k: got[k] for k in want} == want
        assert all(got[k] is None for k in set(read.SCHEMA.names) - set(want) - {"problem"} - COUNTS)


def test_check_results_and_grid_index_become_columns():
    log = crash_log()
    log.records[0]["grid_index"] = 3
    log.check(12.0, "all_acked_consumed", False, "m3 never consumed")
    rows = read.decode("r", log.bytes()).to_pylist()
    assert rows[0]["grid_index"] == 3
    check = next(r for r in rows if r["kind"] == "check.result")
    assert (check["check_name"], check["check_status"], check["ok"], check["check_detail"]) == \
        ("all_acked_consumed", "failed", False, "m3 never consumed")


def test_a_value_of_an_unexpected_type_is_null_not_a_failed_decode():
    log = crash_log()
    log.add(12.5, "producer-0", "producer.send", msg_id="m9", broker="broker-a", attempt=2 ** 40, result=7)
    row = next(r for r in read.decode("r", log.bytes()).to_pylist() if r["msg_id"] == "m9")
    assert (row["attempt"], row["result"], row["broker"]) == (None, None, "broker-a")


def test_message_records_are_counted_per_second_and_per_log_not_rows():
    send = {"node": "producer-0", "kind": "producer.send"}
    records = [{"t": 0.0, "kind": "run.start"},
               {**send, "t": 1.5, "msg_id": "m1", "latency": 0.5, "result": "timeout"},  # first attempt: 1.0
               {**send, "t": 4.2, "msg_id": "m1", "latency": 0.1, "result": "ok"},
               {"t": 4.2, "kind": "producer.ack", "msg_id": "m1"},
               {"t": 4.3, "kind": "consumer.consume", "msg_id": "m1"},
               {"t": 4.4, "kind": "consumer.consume", "msg_id": "m1"},  # a duplicate
               {"t": 2.7, "kind": "producer.failed", "msg_id": "m2"},  # never sent: its time is its failure's
               {"t": 3.0, "kind": "consumer.consume", "msg_id": "m3"},  # not sent in this log: no message
               {**send, "t": 2.1, "msg_id": "m4", "latency": 0.05, "result": "ok"},
               {"kind": "producer.ack", "msg_id": "m4"},  # acked (no t: in no second), never consumed: lost
               {"t": 5.0, "kind": "run.end"}]
    rows = read.decode("r", b"".join(msgpack.packb(r) for r in records)).to_pylist()
    assert [r["kind"] for r in rows] == ["run.start", "producer.send", "producer.send", "producer.send", "run.end",
                                         read.SECOND, read.SECOND, read.SECOND, read.EOF]
    counts = ["messages", "acked", "failed", "ack_records", "failed_records"]
    assert {r["t"]: [r[c] for c in counts] for r in rows if r["kind"] == read.SECOND} == \
        {1.0: [1, 1, 0, 0, 0], 2.0: [2, 1, 1, 0, 1], 4.0: [0, 0, 0, 1, 0]}
    totals = ["messages", "acked", "failed", "lost", "duplicates", "retries", "max_retries"]
    assert [rows[-1][c] for c in totals] == [3, 2, 1, 1, 1, 1, 1]


SOUND = crash_log().bytes()
SIZES = [len(msgpack.packb(r)) for r in crash_log().records]


@pytest.mark.parametrize("content, problem", [
    (SOUND, None),
    (SOUND + SOUND[:7], f"truncated: the last record is cut off at byte {len(SOUND)}"),
    (SOUND[:sum(SIZES[:5])] + b"\xc1" + SOUND[sum(SIZES[:5]):], f"corrupt at byte {sum(SIZES[:5])}"),
    (SOUND[:sum(SIZES[:5])] + msgpack.packb([1, 2]) + SOUND[sum(SIZES[:5]):], "record 5 is not a map"),
    (SOUND[:-SIZES[-1]], "incomplete: no run.end (the run was cut short)"),
    (random.Random(5).randbytes(3000), "not an event log: it does not begin with run.start"),
    (SOUND[SIZES[0]:], "not an event log: it does not begin with run.start"),
    (b"", "empty: not a single record"),
])
def test_scan_events_says_what_is_wrong_with_a_log(content, problem):
    records, found = scan_events(content)
    assert found == problem
    eof = read.decode("r", content).to_pylist()[-1]
    assert (eof["kind"], eof["problem"], eof["seq"]) == (read.EOF, problem, len(records))


def test_read_events_still_skips_what_it_cannot_use():
    # Its other callers (nslab replay, the workshop) want the records, not a verdict on the log.
    assert len(list(read_events(SOUND + SOUND[:7]))) == len(SIZES)


def test_a_log_found_twice_is_read_once_and_paths_agree_with_binary_file(spark, tmp_path):
    crash_log().write(tmp_path / "a.events")
    (tmp_path / "sub").mkdir()
    partition_log().write(tmp_path / "sub" / "b.events")
    (tmp_path / "random.bin").write_bytes(random.Random(1).randbytes(100))
    inputs = [str(tmp_path), str(tmp_path / "a.events"), (tmp_path / "sub").as_uri(), str(tmp_path / "random.bin")]
    eof = read.load(spark, inputs).filter(f"kind = '{read.EOF}'").select("run", "problem").collect()
    assert sorted(r.run for r in eof) == [f"file:{tmp_path}/{n}" for n in ("a.events", "random.bin", "sub/b.events")]
    assert {r.run.rsplit("/", 1)[-1]: r.problem for r in eof}["random.bin"].startswith("not an event log")
    # What a cluster's driver ships has the paths binaryFile gives.
    local = read._local_logs([str(tmp_path)])
    shipped = sorted(r.path for r in read._shipped(spark, local).collect())
    listed = (spark.read.format("binaryFile").option("pathGlobFilter", read.PATTERN)
              .option("recursiveFileLookup", "true").load(str(tmp_path)).select("path").collect())
    assert shipped == sorted(r.path for r in listed)


def test_shipped_logs_decode_as_binary_file_ones_do(spark, tmp_path):
    crash_log().write(tmp_path / "a.events")
    outage_log().write(tmp_path / "b.events", torn=True)
    local = read._local_logs([str(tmp_path)])
    shipped = read._shipped(spark, local).mapInArrow(read.decode_batches, read.SCHEMA)
    assert sorted(shipped.collect()) == sorted(read.load(spark, [str(tmp_path)]).collect())
