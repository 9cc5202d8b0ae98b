"""An application under test (issue 39) in `nslab report`: its acknowledged and failed sends,
losses, duplicates, exit and recovery after each fault end, per run (run_metrics, no Spark) and
combined over runs (the report's tables, summary and page), from hand-made logs whose figures are
known by construction. A report of runs without an app shows nothing of the app's."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from lab.control.app_expectations import AppRecovers
from lab.events import scan_events
from lab.pipeline import report
from lab.pipeline.run_metrics import analyse, app_baseline
from lab.pipeline.storage import open_store

from conftest import A, B, Log, partition_log

NODES = {"ns-0": "nameserver", "broker-a-0": "broker", "broker-a-1": "broker", "broker-b-0": "broker", "app": "app"}
SLAVE = "127.0.0.1:10921"


class AppLog(Log):
    """A run with one app: its sends on broker-b-0 queue 0 take offsets 0, 1, 2… in order."""

    def __init__(self, seed: int):
        super().__init__("app-handmade", seed, {}, NODES)
        self.broker(0, "broker-a-0", A, "broker-a").broker(0, "broker-b-0", B, "broker-b")
        self.add(0, "broker-a-1", "broker.start", address=SLAVE, broker_name="broker-a", broker_id=1, cluster="c")
        self.offset = 0
        self.app(0.5, "app.start", command="python my_app.py", pid=42, stdout="apps/app.stdout",
                 stderr="apps/app.stderr")
        self.app(0.6, "app.heartbeat", peer="broker-b-0", client_id="42@app", producer_groups=["PG"],
                 consumer_groups=["CG"])

    def app(self, t: float, kind: str, **fields) -> "AppLog":
        return self.add(t, "app", kind, **fields)

    def ack(self, t: float, *, peer: str = "broker-b-0", offset: bool = True) -> tuple:
        """An acknowledged send; its (peer, queue, offset, uniq_key)."""
        key = (peer, 0, self.offset if offset else None, f"U{t}")
        self.app(t, "app.send", peer=peer, group="PG", topic="T", result=0, ms=1.0, queue=0, offset=key[2],
                 msg_id=f"M{t}", uniq_key=key[3])
        self.offset += 1
        return key

    def fail(self, t: float, result: int | None) -> "AppLog":
        return self.app(t, "app.send", peer="broker-a-0", group="PG", topic="T", result=result, ms=None,
                        queue=1, offset=None, msg_id=None, uniq_key=f"F{t}")

    def deliver(self, t: float, keys: list[tuple], group: str = "CG", peer: str | None = None) -> "AppLog":
        for k in keys:
            self.app(t, "app.deliver", peer=peer or k[0], group=group, topic="T", queue=k[1],
                     messages=[[k[2] if k[2] is not None else 999, k[3]]])
        return self


def steady(log: AppLog, begin: int, end: int) -> list[tuple]:
    """Four acknowledged sends in each whole second [begin, end)."""
    return [log.ack(k + f) for k in range(begin, end) for f in (0.1, 0.3, 0.5, 0.7)]


def recovering_log() -> AppLog:
    """4 acks/s over seconds 1-4; broker-a-0 killed at 5 s, restarted at 10 s; meanwhile two failed
    sends (code 1, and no answer). Then acks at 10.5 and 11.2, and 4 within a second ending at 12.6:
    back to its pre-fault rate 2.6 s after the restart. Of the acknowledged: one never delivered
    (lost), one delivered twice (a duplicate), one without an offset delivered by its UNIQ_KEY, one
    acknowledged by broker-a-0 delivered from its slave, one delivered to another group of the app's
    only: none of those lost."""
    log = AppLog(1)
    keys = steady(log, 1, 5)
    log.fault(5.0, "kill", "broker-a-0").fail(6.0, 1).fail(7.0, None)
    log.fault(10.0, "restart", "broker-a-0")
    keys += [log.ack(10.5), log.ack(11.2, offset=False)] + [log.ack(t) for t in (12.0, 12.2, 12.4)]
    by_slave = log.ack(12.6, peer="broker-a-0")
    lost, twice, other_group = keys[3], keys[5], keys[6]
    log.deliver(13.0, [k for k in keys if k not in (lost, other_group)])
    log.deliver(13.5, [twice]).deliver(13.5, [other_group], group="CG2").deliver(13.6, [by_slave], peer="broker-a-1")
    log.app(20.0, "app.exit", code=0, signal=None, stopped_by_lab=True, reason="end")
    return log.add(20.0, "lab", "run.end")


def dying_log() -> AppLog:
    """The same until the kill; the app dies on its own at 8 s (exit 1), so it never gets back to
    its rate after the restart: the fault end is unrecovered. Nothing it was acknowledged is lost."""
    log = AppLog(2)
    keys = steady(log, 1, 5)
    log.fault(5.0, "kill", "broker-a-0").fail(6.0, 1)
    log.deliver(5.5, keys)
    log.app(8.0, "app.exit", code=1, signal=None, stopped_by_lab=False, reason=None)
    log.fault(10.0, "restart", "broker-a-0")
    return log.add(20.0, "lab", "run.end")


def figures(log: Log) -> tuple[dict, dict]:
    records, problem = scan_events(log.bytes())
    return analyse(records, problem)


def test_sends_failures_losses_and_duplicates_per_app():
    run, tables = figures(recovering_log())
    (app,) = tables["apps"]
    assert (app["sends"], app["acked"], app["failed"], app["lost"], app["duplicates"]) == (24, 22, 2, 1, 1)
    assert (app["exit_code"], app["stopped_by_lab"], app["died"]) == (0, True, False)
    assert (run["app_sends"], run["app_acked"], run["app_failed"], run["app_lost"], run["app_duplicates"],
            run["app_died"]) == (24, 22, 2, 1, 1, 0)


def test_recovery_is_from_the_fault_end_to_the_pre_fault_rate_again():
    run, tables = figures(recovering_log())
    (row,) = tables["app_recovery"]
    assert row["fault_end"] == 10.0 and row["ended_by"] == "restart broker-a-0" and row["baseline"] == 4
    assert row["recovery_s"] == pytest.approx(2.6) and row["recovered"] is True
    assert run["app_recovery_s"] == pytest.approx(2.6) and run["app_unrecovered"] == 0


def test_the_report_and_app_recovers_agree():
    """app_recovers with min = the pre-fault rate judges the same log as back 2.6 s after the restart."""
    records, _ = scan_events(recovering_log().bytes())
    check = AppRecovers("back", minimum=4, within=5.0, nameservers=["ns-0"])
    for r in records:
        check.observe(r)
    check.finish(20.0)
    assert check.result.ok is True and "2.6s of t=10s" in check.result.detail
    check = AppRecovers("back", minimum=4, within=2.5, nameservers=["ns-0"])
    for r in records:
        check.observe(r)
    check.finish(20.0)
    assert check.result.ok is False


def test_an_app_that_died_during_a_fault_never_recovered():
    run, tables = figures(dying_log())
    (app,) = tables["apps"]
    assert (app["acked"], app["failed"], app["lost"], app["exit_code"], app["died"]) == (16, 1, 0, 1, True)
    (row,) = tables["app_recovery"]
    assert row["recovery_s"] is None and row["recovered"] is False
    assert run["app_unrecovered"] == 1 and run["app_recovery_s"] is None and run["app_died"] == 1


def test_the_pre_fault_rate_is_the_median_whole_second_before_the_first_fault():
    assert app_baseline([1.1, 1.5, 2.1, 2.2, 2.3, 3.1, 3.2, 3.3, 3.4, 4.5], 4.0) == 3  # seconds 2 and 3
    assert app_baseline([1.5, 1.6], 2.0) is None  # no whole second from the first ack to the fault
    assert app_baseline([], None) is None


def test_a_run_without_an_app_has_no_app_rows_or_figures():
    run, tables = figures(partition_log())
    assert tables["apps"] == [] and tables["app_recovery"] == []
    assert all(run[c] is None for c in run if c.startswith("app_"))


def test_an_app_without_a_consumer_group_loses_nothing_it_could_have_consumed():
    log = AppLog(3)
    log.records = [r for r in log.records if r["kind"] != "app.heartbeat"]
    log.ack(1.0)
    run, tables = figures(log)
    assert tables["apps"][0]["lost"] is None and run["app_lost"] is None


@pytest.fixture(scope="module")
def app_report(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("apps")
    recovering_log().write(root / "recovering.events")
    dying_log().write(root / "dying.events")
    partition_log().write(root / "partition.events")
    out = tmp_path_factory.mktemp("app-report")
    return report.build(spark, [str(root)], open_store(out)), out


def _table(out, name: str) -> list[dict]:
    return pq.read_table(out / "tables" / f"{name}.parquet").to_pylist()


def test_the_report_combines_the_apps_over_runs_per_scenario(app_report):
    summary, out = app_report
    points = {row["scenario"]: row for row in summary["grid_points"]}
    app = points["app-handmade"]
    assert (app["app_runs"], app["app_sends"], app["app_acked"], app["app_failed"], app["app_lost"],
            app["app_duplicates"], app["app_died"], app["app_unrecovered"]) == (2, 41, 38, 3, 1, 1, 1, 1)
    assert app["app_recovery_p50_s"] == pytest.approx(2.6) and app["app_recovery_max_s"] == pytest.approx(2.6)
    other = points["handmade"]
    assert other["app_runs"] == 0 and other["app_acked"] is None and other["app_recovery_max_s"] is None
    runs = {r["run"].rsplit("/", 1)[-1]: r for r in _table(out, "runs")}
    assert runs["dying.events"]["app_died"] == 1 and runs["partition.events"]["app_sends"] is None
    apps = {r["run"].rsplit("/", 1)[-1]: r for r in _table(out, "apps")}
    assert set(apps) == {"recovering.events", "dying.events"} and apps["dying.events"]["died"] is True
    assert len(_table(out, "app_recovery")) == 2
    page = (out / "index.html").read_text()
    assert "The application under test" in page and "died on its own" in page
    assert "t=10s (restart broker-a-0): 2.6 s to 4/s" in page and "never back to 4/s" in page
    headers, _ = report.summary_rows(summary)
    assert "app lost" in headers and "app recov max s" in headers
    assert (out / "grid.png").exists()


def test_a_batch_is_a_send_and_each_of_its_messages_may_be_lost():
    """SEND_BATCH_MESSAGE: one app.send, its messages at offset, offset + 1, … each with its UNIQ_KEY."""
    log = AppLog(4)
    log.app(1.0, "app.send", peer="broker-b-0", group="PG", topic="T", result=0, ms=1.0, queue=2, offset=10,
            msg_id="M", uniq_key=None, uniq_keys=["B0", "B1", "B2"])
    log.app(2.0, "app.deliver", peer="broker-b-0", group="CG", topic="T", queue=2, messages=[[10, "B0"], [12, "B2"]])
    run, tables = figures(log)
    assert (run["app_sends"], run["app_acked"], run["app_lost"]) == (1, 1, 1)
