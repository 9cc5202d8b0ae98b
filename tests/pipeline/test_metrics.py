"""Every metric on the hand-made logs of conftest.py, read back from the report's Parquet tables
and its summary: the numbers a user of `nslab report` sees."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import msgpack
import pyarrow.parquet as pq
import pytest

from lab.pipeline import report
from lab.pipeline.storage import open_store

from conftest import A, NODES, Log, crash_log, partition_log

POLL10, POLL30 = "client.pollNameServerInterval=10s", "client.pollNameServerInterval=30s"


def build_report(spark, inputs: list, out: Path) -> dict:
    return report.build(spark, [str(i) for i in inputs], open_store(out))


def read_table(out: Path, name: str) -> list[dict]:
    """A report's table (tables/NAME.parquet) as rows, `run` shortened to the log's file name."""
    rows = pq.read_table(out / "tables" / f"{name}.parquet").to_pylist()
    for row in rows:
        if row.get("run"):
            row["run"] = row["run"].rsplit("/", 1)[-1]
    return rows


@pytest.fixture(scope="module")
def built(spark, handmade, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return build_report(spark, handmade, out), out


@pytest.fixture(scope="module")
def table(built):
    """table(name) -> its rows as dicts."""
    return lambda name: read_table(built[1], name)


def by_run(rows: list[dict], run: str) -> list[dict]:
    return [r for r in rows if r["run"] == run]


def test_logs_below_a_directory_and_named_ones_are_read_and_a_torn_tail_is_skipped(table):
    runs = {r["run"]: r for r in table("runs")}
    assert set(runs) == {"crash.events", "outage.log", "partition.events"}  # nested found, notes.txt not
    assert runs["crash.events"]["complete"] and not runs["outage.log"]["complete"]
    # The torn run.end at the end of outage.log is not counted, and the run ends at its last record.
    assert runs["outage.log"]["events"] == 26 and runs["outage.log"]["end_t"] == 13.0
    assert runs["crash.events"]["grid_label"] == POLL10 and runs["crash.events"]["seed"] == 1


def test_fault_windows_run_from_the_fault_to_what_undoes_it(table):
    windows = {(r["run"], r["verb"], r["target"]): (r["start"], r["end"]) for r in table("faults")}
    assert windows == {
        ("crash.events", "kill", "broker-a-0"): (4.0, 9.0),  # until the restart
        ("outage.log", "ns-down", "ns-0"): (2.0, 5.0),  # `all`: every NameServer of the run
        ("outage.log", "ns-down", "ns-1"): (2.0, 5.0),
        ("outage.log", "freeze", "broker-a-0"): (9.0, 13.0),  # never unfrozen: until the log ends
        ("partition.events", "partition", "broker-a-0"): (1.0, 6.0),  # every node of the groups, until heal
        ("partition.events", "partition", "ns-0"): (1.0, 6.0),
    }


def test_detection_latency_is_per_nameserver_that_held_the_broker(table):
    detected = {(r["run"], r["ns"]): (r["detection_s"], r["reason"]) for r in table("detection")}
    assert detected == {
        ("crash.events", "ns-0"): (0.0, "channel_closed"),
        ("crash.events", "ns-1"): (3.0, "expired"),
        ("partition.events", "ns-0"): (2.0, "expired"),
        ("partition.events", "ns-1"): (None, None),  # on the broker's side of the partition: kept it
        ("outage.log", "ns-0"): (None, None),  # the freeze outlived the log
        ("outage.log", "ns-1"): (None, None),
    }


def test_blind_window_is_fault_to_the_producers_last_choice_of_the_broker(table):
    blind = {r["run"]: r for r in table("blind")}
    assert set(blind) == {"crash.events", "outage.log"}  # a partition leaves producers their broker
    crash = blind["crash.events"]
    assert (crash["broker_name"], crash["blind_s"], crash["attempts"], crash["failed_attempts"]) == ("broker-a", 2.5, 2, 2)
    assert not crash["censored"]
    # Still choosing the frozen broker when it stopped sending: a lower bound only.
    assert blind["outage.log"]["blind_s"] == 1.0 and blind["outage.log"]["censored"]


def test_send_availability_per_second_counts_each_message_once_at_its_first_attempt(table):
    seconds = {r["second"]: (r["messages"], r["availability"]) for r in by_run(table("availability"), "crash.events")}
    assert seconds == {1: (1, 1.0), 2: (1, 1.0), 3: (1, 1.0), 5: (1, 1.0), 6: (1, 0.0), 8: (1, 1.0), 10: (1, 1.0)}


def test_retries_failed_lost_and_duplicates_per_run(table):
    crash = by_run(table("runs"), "crash.events")[0]
    assert {k: crash[k] for k in ("messages", "acked", "failed", "lost", "duplicates", "retries", "max_retries")} == \
        {"messages": 7, "acked": 6, "failed": 1, "lost": 1, "duplicates": 1, "retries": 3, "max_retries": 2}
    assert crash["availability"] == pytest.approx(6 / 7) and crash["retries_per_message"] == pytest.approx(3 / 7)
    assert crash["worst_second"] == 0.0


def test_divergence_windows_are_when_live_nameservers_answer_routes_differently(table):
    windows = sorted((r["run"], r["start"], r["end"]) for r in table("divergence"))
    # Equal tables written at the same instant are no window; a stopped NameServer does not disagree.
    assert windows == [("crash.events", 4.0, 7.0), ("crash.events", 11.0, 11.5),
                       ("outage.log", 7.0, 7.5), ("partition.events", 3.0, 6.0)]


def test_recovery_after_every_nameserver_was_down(table):
    # The crash run's shutdown stops both NameServers too, but nothing comes back: no outage.
    assert [(r["run"], r["down_t"], r["up_t"], r["registered_s"], r["recovery_s"]) for r in table("recovery")] == \
        [("outage.log", 2.0, 5.0, 2.0, 3.5)]


def test_a_removal_with_no_fault_on_the_broker_or_the_nameserver_is_false(table):
    false = [(r["run"], r["ns"], r["broker"]) for r in table("removals") if r["false_removal"]]
    assert false == [("crash.events", "ns-1", "broker-b-0")]


def test_grid_points_aggregate_their_sound_runs(built, table):
    summary, out = built
    assert json.loads((out / "summary.json").read_text()) == summary
    grid = {row["grid_label"]: row for row in table("grid")}
    poll10, poll30 = grid[POLL10], grid[POLL30]
    assert dict(poll10["grid"]) == {"client.pollNameServerInterval": "10s"}
    # outage.log is torn: listed in runs with its problem, left out of its point's aggregates.
    assert (poll10["runs"], poll10["excluded_runs"], poll10["complete_runs"], poll10["messages"]) == (1, 1, 1, 7)
    assert (poll10["failed"], poll10["lost"], poll10["duplicates"], poll10["false_removals"]) == (1, 1, 1, 1)
    assert (poll10["detection_p50_s"], poll10["detection_max_s"], poll10["undetected"]) == (1.5, 3.0, 0)
    assert (poll10["blind_p50_s"], poll10["blind_max_s"], poll10["blind_censored"]) == (2.5, 2.5, 0)
    assert poll10["availability"] == pytest.approx(6 / 7)
    assert (poll10["divergence_s"], poll10["longest_divergence_s"], poll10["recovery_s"]) == (3.5, 3.0, None)
    assert (poll30["runs"], poll30["excluded_runs"], poll30["detection_max_s"], poll30["undetected"]) == (1, 0, 2.0, 1)
    assert poll30["messages"] == 0 and poll30["availability"] is None  # no message sent: unknown, not 0
    assert {r["second"]: r["runs"] for r in table("grid_availability") if r["grid_label"] == POLL10} == \
        {1: 1, 2: 1, 3: 1, 5: 1, 6: 1, 8: 1, 10: 1}  # outage.log's seconds 1 and 10 left out


def test_the_html_report_shows_the_grid_points_and_its_plots(built):
    summary, out = built
    page = (out / "index.html").read_text()
    assert POLL10 in page and POLL30 in page and "crash.events" in page
    images = re.findall(r'src="([^"]+\.png)"', page)
    assert len(images) >= 3
    for name in images:
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000


def test_the_printed_summary_is_a_row_per_grid_point(built):
    headers, rows = report.summary_rows(built[0])
    text = report.text_table(headers, rows)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["#", "grid", "point"] and len(lines) == 4
    assert lines[2].startswith(f"#1  handmade: {POLL10}") and "1.5" in lines[2]


# --- logs a report must not trust, grid order, verdicts ----------------------------------------------

POLL = "client.pollNameServerInterval"
CHECK_FAILED = ("a killed broker is removed in time", "ns-1 kept broker-a-0 for 3.0s (> 2.0s)")


def in_point(log, value: str, index: int, seed: int):
    """`log` as a sweep's run of grid point POLL=value, the index-th point the user gave."""
    log.records[0].update(grid={POLL: value}, grid_index=index, seed=seed)
    return log


def with_checks(log, *checks: tuple):
    """`log` with check.result records (name, ok, detail) just before its run.end."""
    end = log.records.pop()
    for name, ok, detail in checks:
        log.check(end["t"], name, ok, detail)
    log.records.append(end)
    return log


def all_nameservers_down_log():
    """ns-down all: each NameServer closes its brokers' channels as it dies (channel_closed), as
    the bundled all-nameservers-down does — no false removal."""
    log = Log("handmade", 1, {}, {k: v for k, v in NODES.items() if k != "broker-b-0"})
    log.broker(0, "broker-a-0", A, "broker-a")
    log.register(0.5, "ns-0", A, "broker-a").register(0.5, "ns-1", A, "broker-a")
    log.message(1.0, "m1", "broker-a")
    log.fault(2.0, "ns-down", "all")
    for ns in ("ns-0", "ns-1"):
        log.remove(2.0, ns, A, "channel_closed").add(2.0, ns, "node.stop", state="killed")
    log.fault(5.0, "ns-up", "all").add(5.0, "ns-0", "node.start", role="nameserver")
    log.add(5.0, "ns-1", "node.start", role="nameserver")
    log.register(6.0, "ns-0", A, "broker-a").register(6.0, "ns-1", A, "broker-a")
    return log.add(8.0, "lab", "run.end")


DAMAGED = {}  # log name -> its problem, filled as the logs are written


@pytest.fixture(scope="module")
def trusted(spark, tmp_path_factory):
    """A sweep's logs given as 5s, 10s, 30s (alphabetically 10s, 30s, 5s), with damaged logs in 5s
    and files that are no event log at all; its report's tables."""
    root = tmp_path_factory.mktemp("trusted")
    with_checks(in_point(crash_log(), "5s", 0, 1), ("all_acked_consumed", True, "all 6 consumed"),
                (CHECK_FAILED[0], True, "so far so good"), (CHECK_FAILED[0], False, CHECK_FAILED[1])
                ).write(root / "p5-s1.events")
    with_checks(in_point(crash_log(), "5s", 0, 2), ("all_acked_consumed", True, "ok")).write(root / "p5-s2.events")
    with_checks(in_point(all_nameservers_down_log(), "10s", 1, 1),
                ("a new client gets no route", None, "no new client started")).write(root / "p10-s1.events")
    in_point(partition_log(), "30s", 2, 1).write(root / "p30-s1.events")

    sound = in_point(crash_log(), "5s", 0, 3)
    data = sound.bytes()
    whole = [len(msgpack.packb(r)) for r in sound.records]
    middle = sum(whole[:10])  # the byte where record 10 begins
    damaged = {
        "p5-torn.events": (data + msgpack.packb({"t": 99.0, "kind": "run.end"})[:5],
                           f"truncated: the last record is cut off at byte {len(data)}"),
        "p5-corrupt.events": (data[:middle] + b"\xc1" + data[middle:], f"corrupt at byte {middle}"),
        "p5-not-a-map.events": (data[:middle] + msgpack.packb(7) + data[middle:], "record 10 is not a map"),
        "p5-incomplete.events": (data[:-len(msgpack.packb(sound.records[-1]))],
                                 "incomplete: no run.end (the run was cut short)"),
        "random.events": (random.Random(17).randbytes(4000), "not an event log: it does not begin with run.start"),
        "other.events": (msgpack.packb({"hello": "world"}), "not an event log: it does not begin with run.start"),
    }
    for name, (content, problem) in damaged.items():
        (root / name).write_bytes(content)
        DAMAGED[name] = problem
    out = tmp_path_factory.mktemp("trusted-report")
    build_report(spark, [root], out)
    return lambda name: read_table(out, name)


def test_damaged_logs_are_listed_with_their_problem(trusted):
    runs = {r["run"]: r for r in trusted("runs")}
    assert {name: runs[name]["problem"] for name in DAMAGED} == DAMAGED
    assert all(runs[name]["problem"] is None for name in ("p5-s1.events", "p5-s2.events", "p10-s1.events"))
    # No run.start: no scenario, no grid point — never grid point "?".
    assert runs["random.events"]["scenario"] is None and runs["random.events"]["grid_label"] is None


def test_damaged_logs_are_left_out_of_every_grid_aggregate(trusted):
    grid = {r["grid_label"]: r for r in trusted("grid")}
    assert set(grid) == {f"{POLL}=5s", f"{POLL}=10s", f"{POLL}=30s"}  # random.events and other.events: no point
    five = grid[f"{POLL}=5s"]
    assert (five["runs"], five["excluded_runs"], five["complete_runs"]) == (2, 4, 2)
    assert (five["messages"], five["failed"], five["lost"], five["false_removals"]) == (14, 2, 2, 2)
    assert (five["detection_max_s"], five["blind_max_s"], five["undetected"]) == (3.0, 2.5, 0)
    availability = [r for r in trusted("grid_availability") if r["grid_label"] == f"{POLL}=5s"]
    assert availability and all(r["runs"] == 2 for r in availability)


def test_grid_points_are_in_the_order_the_sweep_gave_them(trusted):
    order = [f"{POLL}=5s", f"{POLL}=10s", f"{POLL}=30s"]
    assert [r["grid_label"] for r in trusted("grid")] == order
    assert [r["grid_index"] for r in trusted("grid")] == [0, 1, 2]
    runs = [r["grid_label"] for r in trusted("runs") if r["grid_label"] is not None]
    assert runs == sorted(runs, key=order.index)
    seconds = [r["grid_label"] for r in trusted("grid_availability")]
    assert list(dict.fromkeys(seconds)) == order[:2]  # the 30s run sent nothing: no seconds


def test_ns_down_all_opens_a_window_on_every_nameserver_so_its_removals_are_not_false(trusted):
    removals = [r for r in trusted("removals") if r["run"] == "p10-s1.events" and r["reason"] == "channel_closed"]
    assert len(removals) == 2 and all(r["during_fault"] and not r["false_removal"] for r in removals)
    assert next(r for r in trusted("runs") if r["run"] == "p10-s1.events")["false_removals"] == 0


def test_verdicts_and_failed_expectations_per_run(trusted):
    runs = {r["run"]: r for r in trusted("runs")}
    # Passed, then violated: its last result counts.
    assert (runs["p5-s1.events"]["verdict"], runs["p5-s1.events"]["failed_checks"]) == \
        ("invalid", [": ".join(CHECK_FAILED)])
    assert (runs["p5-s2.events"]["verdict"], runs["p5-s2.events"]["failed_checks"]) == ("valid", [])
    assert runs["p10-s1.events"]["verdict"] is None  # an unjudged expectation: no verdict, as the lab says
    assert runs["p30-s1.events"]["verdict"] is None  # no expectation decided
    assert runs["p5-torn.events"]["verdict"] is None  # a damaged log is not a valid run


def test_runs_without_an_app_show_nothing_of_the_apps(built, table):
    """No app.* record in any log: no app table, column, summary header, plot panel or page section."""
    summary, out = built
    assert not (out / "tables" / "apps.parquet").exists() and not (out / "tables" / "app_recovery.parquet").exists()
    for name in ("runs", "grid"):
        assert not [c for c in pq.read_table(out / "tables" / f"{name}.parquet").column_names if c.startswith("app_")]
    assert not [k for row in summary["grid_points"] for k in row if k.startswith("app_")]
    assert not [h for h in report.summary_rows(summary)[0] if h.startswith("app")]
    page = (out / "index.html").read_text()
    assert "application under test" not in page and "app's" not in page and "app dups" not in page
