"""read.py and run_metrics.py: a log becomes one row, its run analysed where it is decoded; logs are
found once, whether Spark reads them or the driver ships them; a damaged log says what is wrong
with it; a hostile value is null, not a failed report."""

from __future__ import annotations

import random

import msgpack
import pytest
from conftest import crash_log, outage_log, partition_log

from lab.events import read_events, scan_events
from lab.pipeline import read, run_metrics


def decoded(content: bytes, run: str = "r") -> dict:
    [row] = read.decode(run, content).to_pylist()
    return row


def test_a_log_is_one_row_with_its_figures_and_its_rows_of_every_table():
    row = decoded(crash_log().bytes())
    assert (row["scenario"], row["seed"], row["complete"], row["problem"]) == ("handmade", 1, True, None)
    assert row["events"] == len(crash_log().records)
    assert set(read.TABLES) == {name.removesuffix("_rows") for name in row if name.endswith("_rows")}
    # broker-a-0 killed at 4 s, restarted at 9 s.
    assert [(w["verb"], w["target"], w["start"], w["end"]) for w in row["faults_rows"]] == \
        [("kill", "broker-a-0", 4.0, 9.0)]
    # The timeline is every send attempt and every NameServer/broker event, each with its node's role.
    sends = [e for e in row["timeline_rows"] if e["kind"] == "producer.send"]
    assert len(sends) == sum(r["kind"] == "producer.send" for r in crash_log().records)
    assert {e["node_role"] for e in sends} == {"producer"}


def test_check_results_and_grid_index_make_the_runs_verdict():
    log = crash_log()
    log.records[0]["grid_index"] = 3
    log.check(12.0, "all_acked_consumed", True, "every message consumed")
    log.check(12.5, "all_acked_consumed", False, "m3 never consumed")  # passed, then violated: the last counts
    log.check(12.6, "no_false_removal", None, "no removal to judge")
    row = decoded(log.bytes())
    assert (row["grid_index"], row["verdict"], row["failed_checks"]) == (3, "invalid", ["all_acked_consumed: m3 never consumed"])
    unjudged = crash_log().check(12.0, "no_false_removal", None, "no removal to judge")
    assert decoded(unjudged.bytes())["verdict"] is None  # could not be judged is not valid
    held = crash_log().check(12.0, "all_acked_consumed", True, "every message consumed")
    assert decoded(held.bytes())["verdict"] == "valid"


def test_a_value_of_an_unexpected_type_is_null_not_a_failed_decode():
    log = crash_log()
    log.add(12.5, "producer-0", "producer.send", msg_id="m9", broker="broker-a", attempt=2 ** 40, result=7,
            latency="slow")
    log.add("late", "ns-0", "ns.remove", broker_addr=["x"], reason=5)
    log.add(13.0, "broker-x-0", "broker.start", address=1, broker_name="broker-x", broker_id=2 ** 40)
    row = decoded(log.bytes())
    send = next(e for e in row["timeline_rows"] if e["t"] == 12.5)
    assert (send["result"], send["latency"], send["broker"]) == (None, None, "broker-a")
    removal = row["removals_rows"][-1]
    assert (removal["t"], removal["address"], removal["reason"], removal["false_removal"]) == (None, None, None, None)
    start = next(e for e in row["timeline_rows"] if e["node"] == "broker-x-0")
    assert (start["address"], start["broker_id"]) == (None, None)


def test_message_records_are_counted_per_second_and_per_log():
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
    seconds, totals = run_metrics.count_messages(records)
    counts = ["messages", "acked", "failed", "ack_records", "failed_records"]
    assert {s["second"]: [s[c] for c in counts] for s in seconds} == \
        {1: [1, 1, 0, 0, 0], 2: [2, 1, 1, 0, 1], 4: [0, 0, 0, 1, 0]}
    row = decoded(b"".join(msgpack.packb(r) for r in records))
    totals = ["messages", "acked", "failed", "lost", "duplicates", "retries", "max_retries"]
    assert [row[c] for c in totals] == [3, 2, 1, 1, 1, 1, 1]
    assert [(s["second"], s["availability"]) for s in row["availability_rows"]] == [(1, 1.0), (2, 0.5)]
    # Throughput counts every second of the run, quiet ones as 0, by the records' own time.
    assert [(s["second"], s["acked"], s["failed"]) for s in row["traffic_rows"]] == \
        [(0, 0, 0), (1, 0, 0), (2, 0, 1), (3, 0, 0), (4, 1, 0), (5, 0, 0)]


def test_percentiles_interpolate_as_sparks_do():
    assert run_metrics.percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert run_metrics.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.95) == pytest.approx(4.8)
    assert run_metrics.percentile([7.0], 0.95) == 7.0
    assert run_metrics.percentile([], 0.5) is None


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
    (b"", "empty: no event records"),
])
def test_scan_events_says_what_is_wrong_with_a_log(content, problem):
    records, found = scan_events(content)
    assert found == problem
    row = decoded(content)
    assert (row["problem"], row["events"]) == (problem, len(records))


def test_read_events_still_skips_what_it_cannot_use():
    # Its other callers (nslab replay, the workshop) want the records, not a verdict on the log.
    assert len(list(read_events(SOUND + SOUND[:7]))) == len(SIZES)


def test_a_log_found_twice_is_read_once_and_paths_agree_with_binary_file(spark, tmp_path):
    crash_log().write(tmp_path / "a.events")
    (tmp_path / "sub").mkdir()
    partition_log().write(tmp_path / "sub" / "b.events")
    (tmp_path / "random.bin").write_bytes(random.Random(1).randbytes(100))
    inputs = [str(tmp_path), str(tmp_path / "a.events"), (tmp_path / "sub").as_uri(), str(tmp_path / "random.bin")]
    logs = read.load(spark, inputs).select("run", "problem").collect()
    assert sorted(r.run for r in logs) == [f"file:{tmp_path}/{n}" for n in ("a.events", "random.bin", "sub/b.events")]
    assert {r.run.rsplit("/", 1)[-1]: r.problem for r in logs}["random.bin"].startswith("not an event log")
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


def test_a_request_fault_counts_its_requests_and_its_window_ends_with_its_time():
    log = crash_log()
    log.add(5.0, "lab", "chaos.fault", source="scenario", verb="toxic", nodes=["broker-b-0", "ns-1"],
            toxic="drop REGISTER_BROKER for 3s", code="REGISTER_BROKER", for_s=3.0)
    for t in (5.5, 7.5):
        log.add(t, "lab", "chaos.request", src="broker-b-0", dst="ns-1", code=103, request="REGISTER_BROKER",
                reply=False, action="drop", opaque=1)
    row = decoded(log.bytes())
    assert row["faulted_requests"] == 2
    assert {(w["target"], w["end"]) for w in row["faults_rows"] if w["verb"] == "toxic"} == \
        {("broker-b-0", 8.0), ("ns-1", 8.0)}


def test_divergence_reads_tables_a_record_leaves_out_as_the_previous_record_left_them():
    # Schema 3: an ns.tables carries only the tables that changed (a heartbeat: brokerLiveTable alone).
    log = partition_log()
    full = row_of(log)["divergence_rows"]
    for r in log.records:
        if r["kind"] == "ns.tables":
            log.records.insert(log.records.index(r) + 1, {"t": r["t"], "node": r["node"], "kind": "ns.tables",
                                                         "brokerLiveTable": {"x": {}}})
            break
    assert row_of(log)["divergence_rows"] == full and full


def row_of(log) -> dict:
    return decoded(log.bytes())
