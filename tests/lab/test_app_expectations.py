"""The app expectations (issue 39) on synthetic app.* record streams: each passes on a good history,
fails with a message naming what, where and when on a broken one, and could not be judged when it
saw nothing. Fast: no sockets, no cluster; each check is built from a scenario's [[expect]] table,
so its keys are validated as a bundled scenario's are."""

import json
import os
import time

import pytest

from chaos.checks import Checker, verdict
from chaos.scenario import ScenarioError
from lab.control import expectations, scenarios
from lab.control.app_expectations import FaultWindows
from lab.run.runner import RunOptions

GROUP = "CG-app"
TOPIC = "AppTopic"


def checks_for(tmp_path, expect: str, *, phases: str = "", duration: str = "2m"):
    path = tmp_path / "app-test.toml"
    path.write_text(f'[scenario]\nteaches = "a test"\nduration = "{duration}"\n{phases}\n{expect}\n')
    prepared = scenarios.prepare(str(path))
    return expectations.build(prepared.scenario, prepared.config, prepared.topology, expectations.ClusterView())


def judge(tmp_path, expect: str, records: list[dict], *, phases: str = "", end: float = 125.0):
    """Feed the records in order, ticking every whole second as the driver does; the results."""
    checker = Checker(checks_for(tmp_path, expect, phases=phases))
    second = 1
    for r in sorted(records, key=lambda r: r["t"]):
        while second <= r["t"]:
            checker.tick(float(second))
            second += 1
        checker.observe(r)
    while second <= end:
        checker.tick(float(second))
        second += 1
    return checker.finish(end)


def rec(t, kind, node="app", **fields):
    return {"t": round(t, 3), "node": node, "kind": kind, **fields}


def history(*, kill_at=40.0, restart_at=80.0, rate=5, start=3.0, stop=120.0, avoid_after=45.0,
            lose=(), duplicate=(), silent=(), keep_sending_to_dead=False, exit_at=None, exit_code=0,
            exit_signal=None, polls=(5.0, 45.0, 85.0, 115.0), stale_routes=False):
    """A good app: 5 sends a second to broker-a-0 and broker-b-0 in turn, each delivered 0.1 s
    later to its consumer group; broker-a-0 is killed at 40 s and restarted at 80 s, and from 45 s
    (its route poll) the app sends only to broker-b-0 until the restart. The timeline ends at 120 s,
    when the lab stops the app and it exits 0. Its route polls (`polls`) from ns-0 list the brokers
    up then (`stale_routes`: every broker, always). Options break it: `lose` (indices of acked sends
    never delivered), `duplicate` (delivered twice), `silent` ((from, to): no acks then), and so on."""
    records = [rec(0.0, "run.start", "lab"), rec(2.0, "app.start", command="python app.py", pid=4242),
               rec(2.5, "app.heartbeat", peer="broker-a-0", client_id="1@app", producer_groups=["PG-app"],
                   consumer_groups=[GROUP])]
    if kill_at is not None:
        records.append(rec(kill_at, "chaos.fault", "lab", source="scenario", verb="kill", nodes=["broker-a-0"]))
    if restart_at is not None:
        records.append(rec(restart_at, "chaos.fault", "lab", source="scenario", verb="restart", nodes=["broker-a-0"]))
    for at in polls:
        down = kill_at is not None and kill_at <= at and (restart_at is None or at < restart_at)
        brokers = ["broker-b-0", "broker-b-1", "broker-a-1"] + ([] if down and not stale_routes else ["broker-a-0"])
        records.append(rec(at, "app.route", peer="ns-0", topic=TOPIC, result=0, brokers=brokers,
                           queues={b: 4 for b in brokers if b.endswith("-0")}))
    offsets = {}
    i, t = 0, start
    while t < stop and (exit_at is None or t < exit_at):
        down = kill_at is not None and kill_at <= t and (restart_at is None or t < restart_at)
        broker = "broker-a-0" if i % 2 == 0 else "broker-b-0"
        if down and (t >= avoid_after and not keep_sending_to_dead):
            broker = "broker-b-0"
        queue = i % 4
        if any(a <= t < b for a, b in silent):
            records.append(rec(t, "app.send", peer=broker, group="PG-app", topic=TOPIC, result=None, ms=3000.0,
                               queue=queue, offset=None, msg_id=None, uniq_key=f"U{i}x"))
        elif down and broker == "broker-a-0":  # refused: the client retries on broker-b-0
            records.append(rec(t, "app.send", peer=broker, group="PG-app", topic=TOPIC, result=None, ms=1.0,
                               queue=queue, offset=None, msg_id=None, uniq_key=f"U{i}r"))
            broker = "broker-b-0"
        if not any(a <= t < b for a, b in silent):
            offset = offsets.get((broker, queue), 0)
            offsets[(broker, queue)] = offset + 1
            records.append(rec(t + 0.002, "app.send", peer=broker, group="PG-app", topic=TOPIC, result=0, ms=2.0,
                               queue=queue, offset=offset, msg_id=f"M{i}", uniq_key=f"U{i}"))
            if i not in lose:
                for n in range(2 if i in duplicate else 1):
                    records.append(rec(t + 0.1 + n, "app.deliver", peer=broker, group=GROUP, topic=TOPIC,
                                       queue=queue, messages=[[offset, f"U{i}"]]))
        i += 1
        t = start + i / rate
    records.append(rec(stop, "run.drain", "lab", seconds=30.0))
    if exit_at is not None:
        records.append(rec(exit_at, "app.exit", code=exit_code, signal=exit_signal, stopped_by_lab=False))
    else:
        records.append(rec(stop + 0.5, "app.exit", code=exit_code, signal=exit_signal, stopped_by_lab=True))
    return records


def one(results):
    assert len(results) == 1
    return results[0]


EMPTY = [rec(0.0, "run.start", "lab"), rec(120.0, "run.drain", "lab", seconds=30.0)]


# --- app_acked_consumed -------------------------------------------------------------------------

ACKED = '[[expect]]\ntype = "app_acked_consumed"\n'


def test_acked_consumed_holds_when_every_acknowledged_message_is_delivered(tmp_path):
    r = one(judge(tmp_path, ACKED, history()))
    assert r.ok is True, r.detail
    assert "messages acknowledged to app delivered to CG-app" in r.detail


def test_acked_consumed_names_the_lost_messages(tmp_path):
    r = one(judge(tmp_path, ACKED, history(lose=(10, 11, 300))))
    assert r.ok is False
    assert r.detail.startswith("3 of ") and "never delivered to group CG-app" in r.detail
    assert "AppTopic@broker-a:2#2 acked at t=5.0s (UNIQ_KEY U10)" in r.detail


def test_acked_consumed_counts_a_message_read_from_the_slave(tmp_path):
    records = history(lose=(10,))
    sent = next(r for r in records if r["kind"] == "app.send" and r.get("uniq_key") == "U10")
    records.append(rec(90.0, "app.deliver", peer="broker-a-1", group=GROUP, topic=TOPIC, queue=sent["queue"],
                       messages=[[sent["offset"], None]]))
    assert one(judge(tmp_path, ACKED, records)).ok is True


def test_acked_consumed_counts_each_message_of_a_batch(tmp_path):
    batch = rec(50.0, "app.send", peer="broker-b-0", group="PG-app", topic=TOPIC, result=0, ms=2.0, queue=0,
                offset=1000, msg_id="MB", uniq_key="B0", uniq_keys=["B0", "B1", "B2"])
    delivered = rec(50.1, "app.deliver", peer="broker-b-0", group=GROUP, topic=TOPIC, queue=0,
                    messages=[[1000, "B0"], [1001, "B1"]])
    r = one(judge(tmp_path, ACKED, history() + [batch, delivered]))
    assert r.ok is False and r.detail.startswith("1 of ") and "AppTopic@broker-b:0#1002 acked at t=50.0s (UNIQ_KEY B2)" in r.detail


def test_acked_consumed_cannot_be_judged_without_acks_or_a_consumer(tmp_path):
    r = one(judge(tmp_path, ACKED, EMPTY))
    assert r.ok is None and "no app ran" in r.detail
    producer_only = [x for x in history() if x["kind"] not in ("app.deliver", "app.heartbeat")]
    r = one(judge(tmp_path, ACKED, producer_only))
    assert r.ok is None and "app has no consumer group" in r.detail


# --- app_duplicates -----------------------------------------------------------------------------

DUPS = '[[expect]]\ntype = "app_duplicates"\nmax = 1\n'


def test_duplicates_within_the_bound_hold(tmp_path):
    r = one(judge(tmp_path, DUPS, history(duplicate=(7,))))
    assert r.ok is True, r.detail


def test_duplicates_past_the_bound_fail_naming_the_message_and_time(tmp_path):
    r = one(judge(tmp_path, DUPS, history(duplicate=(7, 20))))
    assert r.ok is False
    assert "group CG-app of app got 2 deliveries beyond a message's first" in r.detail
    assert "for the 2nd time at t=8.1s" in r.detail and "(max 1)" in r.detail


def test_duplicates_count_only_in_their_phase(tmp_path):
    phases = '[[phase]]\nname = "late"\nstart = "1m"\nend = "2m"\n'
    expect = '[[expect]]\ntype = "app_duplicates"\nphase = "late"\n'
    assert one(judge(tmp_path, expect, history(duplicate=(7, 20)), phases=phases)).ok is True
    r = one(judge(tmp_path, expect, history(duplicate=(400,)), phases=phases))
    assert r.ok is False and "between 60s and 120s (max 0)" in r.detail


def test_duplicates_cannot_be_judged_without_deliveries(tmp_path):
    r = one(judge(tmp_path, DUPS, [x for x in history() if x["kind"] != "app.deliver"]))
    assert r.ok is None and "no message was delivered to app" in r.detail


# --- app_send_rate ------------------------------------------------------------------------------

RATE = '[[expect]]\ntype = "app_send_rate"\nmin = 3\nsettle = "10s"\n'


def test_send_rate_holds_outside_the_fault_windows(tmp_path):
    # The stall after the kill (40-45 s) is inside the fault window: not judged.
    r = one(judge(tmp_path, RATE, history(silent=((41, 44),))))
    assert r.ok is True, r.detail
    assert "outside the fault windows 40s-80s (+10s settle)" in r.detail


def test_send_rate_fails_on_a_stall_outside_the_faults(tmp_path):
    r = one(judge(tmp_path, RATE, history(silent=((100, 104),))))
    assert r.ok is False
    assert r.detail.startswith("app had 0 sends acknowledged in the second from t=100s (min 3/s); 4 of ")


def test_send_rate_in_a_phase_judges_through_the_fault(tmp_path):
    phases = '[[phase]]\nname = "down"\nstart = "40s"\nend = "80s"\n'
    expect = '[[expect]]\ntype = "app_send_rate"\nphase = "down"\nmin = 3\n'
    assert one(judge(tmp_path, expect, history(), phases=phases)).ok is True
    r = one(judge(tmp_path, expect, history(silent=((50, 52),)), phases=phases))
    assert r.ok is False and "t=50s" in r.detail and "between 40s and 80s" in r.detail
    assert "then on: kill broker-a-0 (since t=40s)" in r.detail


def test_send_rate_counts_the_seconds_after_the_app_died(tmp_path):
    r = one(judge(tmp_path, RATE, history(kill_at=None, restart_at=None, exit_at=60.0, exit_code=1)))
    assert r.ok is False and "0 sends acknowledged in the second from t=60s" in r.detail


def test_send_rate_cannot_be_judged_without_sends_and_fails_without_acks(tmp_path):
    assert "app sent nothing" in one(judge(tmp_path, RATE, EMPTY + [rec(1, "app.start", command="x", pid=1)])).detail
    never = [x for x in history() if not (x["kind"] == "app.send" and x["result"] == 0)]
    r = one(judge(tmp_path, RATE, never))
    assert r.ok is False and "none of app's" in r.detail


def test_a_bad_rate_is_reported_with_file_line_and_key(tmp_path):
    with pytest.raises(ScenarioError, match=r"app-test.toml:7: \[\[expect\]\] #1 min: must be a number"):
        checks_for(tmp_path, '[[expect]]\ntype = "app_send_rate"\nmin = "lots"\n')
    with pytest.raises(ScenarioError, match=r"#1 type: app_send_rate needs min"):
        checks_for(tmp_path, '[[expect]]\ntype = "app_send_rate"\n')
    with pytest.raises(ScenarioError, match=r"#1 app: 'broker-a-0' is a node of the lab, not an app"):
        checks_for(tmp_path, '[[expect]]\ntype = "app_keeps_running"\napp = "broker-a-0"\n')
    with pytest.raises(ScenarioError, match=r"#1 settle: bad duration"):
        checks_for(tmp_path, '[[expect]]\ntype = "app_send_rate"\nmin = 1\nsettle = "soon"\n')
    with pytest.raises(ScenarioError, match=r"#1 colour: unknown parameter for app_recovers"):
        checks_for(tmp_path, '[[expect]]\ntype = "app_recovers"\nwithin = "5s"\ncolour = "red"\n')


# --- app_recovers -------------------------------------------------------------------------------

RECOVERS = '[[expect]]\ntype = "app_recovers"\nmin = 3\nwithin = "10s"\n'


def test_recovers_after_the_restart(tmp_path):
    r = one(judge(tmp_path, RECOVERS, history()))
    assert r.ok is True, r.detail
    assert "app was back to 3 acks/s within" in r.detail and "of t=80s" in r.detail


def test_recovers_fails_when_the_app_stays_down_after_the_fault(tmp_path):
    r = one(judge(tmp_path, RECOVERS, history(silent=((75, 120),))))
    assert r.ok is False
    assert "by 10s after restart broker-a-0 ended the faults at t=80s (no ack after it)" in r.detail
    assert r.decided_at == pytest.approx(92.0)  # decided as the bound passes, not at the end


def test_recovers_cannot_be_judged_without_a_fault_end(tmp_path):
    r = one(judge(tmp_path, RECOVERS, history(restart_at=None)))
    assert r.ok is None and "no fault ended before the timeline did" in r.detail
    assert one(judge(tmp_path, RECOVERS, EMPTY)).ok is None


# --- app_avoids_killed_broker -------------------------------------------------------------------

AVOIDS = '[[expect]]\ntype = "app_avoids_killed_broker"\nwithin = "35s"\n'


def test_avoids_the_killed_broker_after_its_poll(tmp_path):
    r = one(judge(tmp_path, AVOIDS, history()))
    assert r.ok is True, r.detail
    assert r.detail == ("app's routes dropped broker-a-0 5.0s after its kill at t=40s (a route from ns-0 at "
                        "t=45.0s) and sent nothing to it until its restart at t=80s (200 sends elsewhere) (within 35s)")


def test_sending_to_a_dead_broker_after_the_route_dropped_it_fails(tmp_path):
    r = one(judge(tmp_path, AVOIDS, history(keep_sending_to_dead=True)))
    assert r.ok is False
    assert r.detail == "app sent to broker-a-0 at t=45.4s, after its route dropped it at t=45.0s"


def test_a_route_that_keeps_the_dead_broker_past_the_claimed_poll_fails(tmp_path):
    # The sends to a dead broker never reach the relays: what the app learnt is what shows.
    r = one(judge(tmp_path, AVOIDS, history(stale_routes=True)))
    assert r.ok is False
    assert r.detail == ("app still routed to broker-a-0 35s after it was killed at t=40s: its last route of "
                        "AppTopic, from ns-0 at t=45.0s, still listed it")
    assert 75.0 < r.decided_at <= 76.0  # decided as the bound passes
    r = one(judge(tmp_path, AVOIDS, history(polls=(5.0,))))
    assert r.ok is False and "it fetched no route of AppTopic since" in r.detail


def test_avoids_cannot_be_judged_without_a_kill_or_time_after_it(tmp_path):
    r = one(judge(tmp_path, AVOIDS, history(kill_at=None, restart_at=None)))
    assert r.ok is None and "no broker was killed" in r.detail
    r = one(judge(tmp_path, AVOIDS, history(restart_at=44.0)))
    assert r.ok is None and "broker-a-0 killed at t=40s: it was back or the timeline over before t=75s" in r.detail
    r = one(judge(tmp_path, AVOIDS, history(exit_at=50.0, exit_code=1, polls=(5.0,))))
    assert r.ok is None and "app was not running at t=75s (it exited at t=50.0s)" in r.detail


# --- app_keeps_running --------------------------------------------------------------------------

RUNNING = '[[expect]]\ntype = "app_keeps_running"\n'


def test_keeps_running_through_the_faults_and_stops_cleanly(tmp_path):
    r = one(judge(tmp_path, RUNNING, history()))
    assert r.ok is True and "app ran from t=2.0s to the lab's stop, exit code 0" in r.detail
    assert one(judge(tmp_path, RUNNING, history(exit_code=None, exit_signal="SIGTERM"))).ok is True


def test_an_app_that_exits_mid_run_fails_naming_the_fault_on(tmp_path):
    r = one(judge(tmp_path, RUNNING, history(exit_at=50.0, exit_code=1)))
    assert r.ok is False
    assert r.detail == ("app exited at t=50.0s (exit code 1) before the lab stopped it, "
                        "during kill broker-a-0 (since t=40s)")
    assert r.decided_at == 50.0


def test_an_app_that_ignores_sigterm_or_fails_its_shutdown_fails(tmp_path):
    r = one(judge(tmp_path, RUNNING, history(exit_code=None, exit_signal="SIGKILL")))
    assert r.ok is False and "killed by SIGKILL (still running after the grace period)" in r.detail
    r = one(judge(tmp_path, RUNNING, history(exit_code=3)))
    assert r.ok is False and "did not stop cleanly when the lab stopped it at t=120.5s: exit code 3" in r.detail


def test_keeps_running_cannot_be_judged_when_no_app_started(tmp_path):
    r = one(judge(tmp_path, RUNNING, EMPTY))
    assert r.ok is None and r.detail == "could not be judged: no app ran (no app.* record)"
    r = one(judge(tmp_path, '[[expect]]\ntype = "app_keeps_running"\napp = "billing"\n', history()))
    assert r.ok is None and "no app ran named billing" in r.detail


# --- app_history --------------------------------------------------------------------------------

def history_file(tmp_path, lines):
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_history_that_matches_the_wire_holds(tmp_path):
    path = history_file(tmp_path, [{"op": "send", "topic": TOPIC, "uniq_key": "U3", "ok": True},
                                   {"op": "send", "topic": TOPIC, "ok": False},
                                   {"op": "receive", "topic": TOPIC, "uniq_key": "U3", "ok": True},
                                   {"op": "receive", "topic": TOPIC, "queue": 1, "offset": 0, "ok": True}])
    r = one(judge(tmp_path, f'[[expect]]\ntype = "app_history"\nfile = "{path}"\n', history()))
    assert r.ok is True, r.detail
    assert "4 operations in" in r.detail and "1 send failed" in r.detail


def test_history_that_claims_what_the_wire_never_saw_fails_with_its_line(tmp_path):
    path = history_file(tmp_path, [{"op": "send", "topic": TOPIC, "uniq_key": "U3", "ok": True},
                                   {"op": "send", "topic": TOPIC, "uniq_key": "NEVER", "ok": True},
                                   {"op": "send", "topic": TOPIC, "uniq_key": "U4", "ok": False},
                                   {"op": "receive", "topic": TOPIC, "uniq_key": "GHOST", "ok": True}])
    r = one(judge(tmp_path, f'[[expect]]\ntype = "app_history"\nfile = "{path}"\n', history()))
    assert r.ok is False
    assert r.detail.startswith("3 of 4 operations in the history disagree with the wire: ")
    assert f"{path}:2: the app says send UNIQ_KEY NEVER succeeded; no broker acknowledged it" in r.detail
    assert f"{path}:3: the app says send UNIQ_KEY U4 failed; a broker acknowledged it" in r.detail
    assert f"{path}:4: the app says it received UNIQ_KEY GHOST; no broker delivered it" in r.detail


def test_history_cannot_be_judged_without_a_file_of_this_run(tmp_path):
    expect = f'[[expect]]\ntype = "app_history"\nfile = "{tmp_path / "none.jsonl"}"\n'
    r = one(judge(tmp_path, expect, history()))
    assert r.ok is None and "no history file" in r.detail
    old = history_file(tmp_path, [{"op": "send", "topic": TOPIC, "uniq_key": "U3", "ok": True}])
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    r = one(judge(tmp_path, f'[[expect]]\ntype = "app_history"\nfile = "{old}"\n', history()))
    assert r.ok is None and "was not written during this run" in r.detail


def started_in(folder, records):
    """The records with the app's app.start naming its folder (`dir`), as lab/apps/process.py writes it."""
    return [dict(r, dir=str(folder), stdout=str(folder / "app.stdout")) if r["kind"] == "app.start" else r
            for r in records]


def test_a_relative_history_is_read_from_the_apps_folder(tmp_path):
    folder = tmp_path / "run.events.apps"
    folder.mkdir()
    history_file(folder, [{"op": "send", "topic": TOPIC, "uniq_key": "U3", "ok": True}])
    history_file(tmp_path, [{"op": "send", "topic": TOPIC, "uniq_key": "NEVER", "ok": True}])  # not the app's
    r = one(judge(tmp_path, '[[expect]]\ntype = "app_history"\nfile = "history.jsonl"\n', started_in(folder, history())))
    assert r.ok is True and f"1 operations in {folder / 'history.jsonl'} agree" in r.detail, r.detail
    r = one(judge(tmp_path, ACKED + 'history = "history.jsonl"\n', started_in(folder, history())))
    assert r.ok is False and f"never processed by group CG-app (by its history {folder / 'history.jsonl'})" in r.detail


def test_a_missing_relative_history_names_the_path_it_looked_at(tmp_path):
    folder = tmp_path / "run.events.apps"
    r = one(judge(tmp_path, '[[expect]]\ntype = "app_history"\nfile = "history.jsonl"\n', started_in(folder, history())))
    assert r.ok is None and f"no history file {folder / 'history.jsonl'} (history.jsonl in the app's folder" in r.detail


def test_a_stale_history_in_the_apps_folder_is_not_this_runs(tmp_path):
    """A --run-dir (or --events) used again: the earlier run's history.jsonl is still in the app's
    folder, and this run's app wrote none."""
    folder = tmp_path / "run" / "apps"
    folder.mkdir(parents=True)
    old = history_file(folder, [{"op": "send", "topic": TOPIC, "uniq_key": "NEVER", "ok": True}])
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    r = one(judge(tmp_path, '[[expect]]\ntype = "app_history"\nfile = "history.jsonl"\n', started_in(folder, history())))
    assert r.ok is None and f"{old} was not written during this run" in r.detail
    r = one(judge(tmp_path, ACKED + 'history = "history.jsonl"\n', started_in(folder, history())))
    assert r.ok is True and "delivered to CG-app" in r.detail, r.detail  # judged on the wire


# --- every app expectation ----------------------------------------------------------------------

EVERY = [ACKED, DUPS, RATE, RECOVERS, AVOIDS, RUNNING, '[[expect]]\ntype = "app_history"\nfile = "h.jsonl"\n']


@pytest.mark.parametrize("expect", EVERY, ids=lambda e: e.split('"')[1])
def test_every_app_expectation_is_unjudged_when_it_saw_nothing(tmp_path, expect):
    r = one(judge(tmp_path, expect, EMPTY))
    assert r.ok is None and r.detail.startswith("could not be judged: "), r.detail


@pytest.mark.parametrize("expect", EVERY, ids=lambda e: e.split('"')[1])
def test_an_app_expectation_judges_only_the_app_it_names(tmp_path, expect):
    others = [dict(r, node="billing") if r["kind"].startswith("app.") else r for r in history()]
    r = one(judge(tmp_path, expect.replace("\n", '\napp = "app"\n', 1), others))
    assert r.ok is None, r.detail


def test_the_whole_good_history_is_valid(tmp_path):
    path = history_file(tmp_path, [{"op": "send", "topic": TOPIC, "uniq_key": "U3", "ok": True}])
    expect = "\n".join(EVERY[:-1]) + \
        f'\n[[expect]]\ntype = "app_history"\nfile = "{path}"\n'
    results = judge(tmp_path, expect, history())
    assert verdict(results) is True, [r.detail for r in results if not r.ok]


def test_fault_windows_follow_each_fault_to_its_end():
    windows = FaultWindows(["ns-0", "ns-1"])
    for r in [rec(10, "chaos.fault", "lab", verb="ns-down", nodes=["all"]),
              rec(20, "chaos.fault", "lab", verb="ns-up", nodes=["ns-0"]),
              rec(30, "chaos.fault", "lab", verb="ns-up", nodes=["all"]),
              rec(40, "chaos.fault", "lab", verb="toxic", nodes=["ns-0"], toxic="reply", for_s=15.0),
              rec(45, "chaos.fault", "lab", verb="partition", groups=[["app"], ["ns-0"]], one_way=False),
              rec(50, "chaos.fault", "lab", verb="heal"),
              rec(60, "chaos.fault", "lab", verb="toxic", nodes=["ns-1"], toxic="dialect", for_s=10.0),
              rec(65, "chaos.fault", "lab", verb="restart", nodes=["broker-b-0"]),
              rec(100, "chaos.fault", "lab", verb="kill", nodes=["broker-a-0"])]:
        windows.observe(r)
    windows.advance(200)
    assert windows.union == [[10, 30], [40, 50], [60, 70], [100, None]]
    assert windows.ends() == [30, 50, 70]
    assert windows.faulty(74, 75, settle=5) and not windows.faulty(75, 76, settle=5)
    assert windows.faulty(65, 66) and windows.faulty(30, 31, settle=0.5) and not windows.faulty(30, 31)
    assert windows.at(15) == ["ns-down all (since t=10s)"]
    assert windows.ended_by(70) == "toxic ns-1 dialect running out"
    assert windows.ended_by(30) == "ns-up all" and windows.ended_by(50) == "heal"


# --- the bundled app scenarios ------------------------------------------------------------------

@pytest.mark.parametrize("path", scenarios.app_scenarios(), ids=lambda p: p.stem)
def test_every_bundled_app_scenario_is_ready_for_an_app(path):
    text = path.read_text()
    assert text.startswith("# ") and len(text.splitlines()[0]) > 40, path.name
    prepared = scenarios.prepare(str(path), apps=["python app.py"])
    assert prepared.scenario.teaches and prepared.scenario.duration <= 150  # minutes of CI, not more
    assert [a.name for a in prepared.apps] == ["app"] and prepared.apps[0].command == "python app.py"
    types = {e.type for e in prepared.scenario.expectations}
    assert {"app_keeps_running", "app_acked_consumed"} <= types
    assert all(t.startswith("app_") for t in types), types  # the lab runs no clients of its own
    assert scenarios.app_problem(scenarios.prepare(str(path)), RunOptions(sim=False)) is not None  # needs --app


def test_the_simulated_library_leaves_the_app_scenarios_out():
    assert len(scenarios.app_scenarios()) == 8
    assert not any(p.stem.startswith("app-") for p in scenarios.bundled())
    assert scenarios.find("app-broker-crash") == scenarios.BUNDLED / "app-broker-crash.toml"
