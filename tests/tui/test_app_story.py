"""An application under test (lab/apps) in the story and on the Clients tab: its start (the command),
its first failed send after each fault, its recovery to its pre-fault rate once the faults end (as
`nslab report` and app_recovers count it), and its exit — one that dies on its own during a fault is
the headline. Its Clients row shows its sends, acknowledged and failed, and what it consumed."""

from __future__ import annotations

from tui_support import build_log

from lab.tui.model import LabModel
from lab.tui.story import important
from lab.tui.widgets.clients import COLUMNS, client_rows


def app_log(*, dies: bool = False) -> list[dict]:
    """The lab's log with an app: 4 acks/s from 1 s, broker-a-0 killed at 5 s and restarted at 10 s,
    two failed sends meanwhile; back to 4 acks within a second at 12.6 s. Or it dies at 8 s."""
    log = build_log()
    log = [r for r in log if r["kind"] != "chaos.fault" and r["t"] <= 20.0]
    log[0] = {**log[0], "mode": "sockets", "nodes": {**log[0]["nodes"], "app": "app"}}

    def add(t, kind, node="app", **fields):
        log.append({"t": t, "node": node, "kind": kind, **fields})

    def send(t, result=0):
        add(t, "app.send", peer="broker-b-0" if result == 0 else "broker-a-0", group="PG", topic="TopicOrder",
            result=result, ms=1.0, queue=0, offset=int(t * 10) if result == 0 else None, msg_id=None,
            uniq_key=f"U{t}")

    add(0.5, "app.start", command="python my_app.py --fast", pid=4242, stdout="apps/app.stdout",
        stderr="apps/app.stderr")
    add(0.5, "node.start", role="app", address=None, pid=4242)
    for k in range(1, 5):
        for f in (0.1, 0.3, 0.5, 0.7):
            send(k + f)
    add(5.0, "chaos.fault", node="lab", source="scenario", verb="kill", nodes=["broker-a-0"])
    send(6.0, result=1)
    send(7.0, result=None)
    if dies:
        add(8.0, "app.exit", code=1, signal=None, stopped_by_lab=False, reason=None)
    add(10.0, "chaos.fault", node="lab", source="scenario", verb="restart", nodes=["broker-a-0"])
    if not dies:
        for t in (10.5, 11.2, 12.0, 12.2, 12.4, 12.6, 13.0):
            send(t)
        add(12.0, "app.deliver", peer="broker-b-0", group="CG", topic="TopicOrder", queue=0,
            messages=[[11, "U1.1"], [13, "U1.3"], [15, "U1.5"]])
        add(20.0, "app.exit", code=0, signal=None, stopped_by_lab=True, reason="end")
    log.sort(key=lambda r: r["t"])
    return log


def story(log: list[dict]) -> list[tuple[float, str, str]]:
    model = LabModel()
    for record in log:
        model.feed(record)
    return [(line.t, line.tag, line.text) for line in model.story]


def app_lines(log: list[dict]) -> list[tuple[float, str, str]]:
    return [line for line in story(log) if line[2].startswith("app")]


def test_the_story_tells_the_apps_start_first_failure_recovery_and_exit():
    lines = app_lines(app_log())
    assert lines[0] == (0.5, "join", "app started: python my_app.py --fast (pid 4242)")
    assert lines[1] == (6.0, "cache", "app: its first failed send since kill broker-a-0: to broker-a-0 "
                                      "(TopicOrder), code 1")
    assert lines[2][:2] == (12.6, "route")
    assert lines[2][2] == ("app is back to its pre-fault rate (4 acks/s), 2.6 s after restart broker-a-0 "
                           "ended the faults")
    assert lines[3] == (20.0, "drain", "app stopped by the lab at the timeline's end: exit code 0")
    assert len(lines) == 4  # one failed send told per fault, one recovery per fault end


def test_an_app_that_dies_on_its_own_during_a_fault_is_the_headline():
    lines = app_lines(app_log(dies=True))
    died = [line for line in lines if "DIED" in line[2]]
    assert died == [(8.0, "crash", "app DIED on its own (exit code 1) during kill broker-a-0 (since t=5s)")]
    assert not [line for line in lines if "back to" in line[2]]


def test_an_app_stopped_by_the_lab_not_cleanly_says_so():
    log = app_log()
    exit_record = next(r for r in log if r["kind"] == "app.exit")
    exit_record.update(code=None, signal="SIGKILL")
    assert app_lines(log)[-1] == (20.0, "failed", "app stopped by the lab at the timeline's end, not cleanly: "
                                                  "killed by SIGKILL")


def test_the_apps_start_and_exit_are_kept_whatever_floods_the_log():
    assert important({"kind": "app.start"}) and important({"kind": "app.exit"})
    assert not important({"kind": "app.send"})


def test_the_apps_client_row_shows_its_sends_and_what_it_consumed():
    model = LabModel()
    for record in app_log():
        model.feed(record)
    (row,) = [r for r in client_rows(model) if r[0] == "app"]
    cells = dict(zip(COLUMNS, row))
    assert cells["msgs ok/failed"] == "23/2"  # 16 before the kill, 7 after; code 1 and no answer
    assert cells["consumed"] == "3"
    assert cells["retries"] == "" and cells["lag"] == ""  # neither is seen on the wire
