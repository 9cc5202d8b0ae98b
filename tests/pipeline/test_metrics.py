"""Every metric on the hand-made logs of conftest.py, read back from the report's Parquet tables
and its summary: the numbers a user of `nslab report` sees."""

from __future__ import annotations

import json

import pytest

from lab.pipeline import report

POLL10, POLL30 = "client.pollNameServerInterval=10s", "client.pollNameServerInterval=30s"


@pytest.fixture(scope="module")
def built(spark, handmade, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return report.build(spark, handmade, out), out


@pytest.fixture(scope="module")
def table(spark, built):
    """table(name) -> its rows as dicts, `run` shortened to the log's file name."""
    _, out = built

    def read(name: str) -> list[dict]:
        rows = [r.asDict() for r in spark.read.parquet(str(out / "tables" / name)).collect()]
        for row in rows:
            if "run" in row:
                row["run"] = row["run"].rsplit("/", 1)[-1]
        return rows
    return read


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
        ("outage.log", "ns-down", "all"): (2.0, 5.0),
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


def test_grid_points_aggregate_their_runs(built):
    summary, out = built
    assert json.loads((out / "summary.json").read_text()) == summary
    grid = {row["grid_label"]: row for row in summary["grid_points"]}
    poll10, poll30 = grid[POLL10], grid[POLL30]
    assert poll10["grid"] == {"client.pollNameServerInterval": "10s"}
    assert (poll10["runs"], poll10["complete_runs"], poll10["messages"]) == (2, 1, 9)
    assert (poll10["failed"], poll10["lost"], poll10["duplicates"], poll10["false_removals"]) == (2, 1, 1, 1)
    assert (poll10["detection_p50_s"], poll10["detection_max_s"], poll10["undetected"]) == (1.5, 3.0, 2)
    assert (poll10["blind_p50_s"], poll10["blind_max_s"], poll10["blind_censored"]) == (1.75, 2.5, 1)
    assert poll10["availability"] == pytest.approx((6 / 7 + 1 / 2) / 2)
    assert (poll10["divergence_s"], poll10["longest_divergence_s"], poll10["recovery_s"]) == (2.0, 3.0, 3.5)
    assert (poll30["runs"], poll30["detection_max_s"], poll30["undetected"], poll30["messages"]) == (1, 2.0, 1, 0)
    assert poll30["availability"] is None  # no message sent: unknown, not 0


def test_the_html_report_shows_the_grid_points_and_its_plots(built):
    summary, out = built
    page = (out / "index.html").read_text()
    assert POLL10 in page and POLL30 in page and "crash.events" in page
    for name in ("availability.png", "latency.png", "send_latency.png", "grid.png"):
        assert f'src="{name}"' in page
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000


def test_the_printed_summary_is_a_row_per_grid_point(built):
    headers, rows = report.summary_rows(built[0])
    text = report.text_table(headers, rows)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["#", "grid", "point"] and len(lines) == 4
    assert lines[2].startswith(f"#1  handmade: {POLL10}") and "1.5" in lines[2]
