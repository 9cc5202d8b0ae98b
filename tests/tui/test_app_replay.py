"""A run with an application under test (lab/apps) replays: its app.* records crash nothing, and the
app is a row of the Clients tab (the NameServer it dialled, its route's age, what it consumed)."""

from __future__ import annotations

from tui_support import BROKERS, build_log, run_app, screen_text, wait_until

from lab.tui.app import LabApp
from lab.tui.model import LabModel
from lab.tui.replay import Replay
from lab.tui.widgets.clients import client_rows


def app_log() -> list[dict]:
    log = build_log()
    log[0] = {**log[0], "mode": "sockets", "nodes": {**log[0]["nodes"], "app": "app"}}

    def add(t, kind, **fields):
        log.append({"t": t, "node": "app", "kind": kind, **fields})

    add(1.2, "app.start", command="python my_app.py", pid=4242, stdout="apps/app.stdout", stderr="apps/app.stderr")
    add(1.2, "node.start", role="app", address=None, pid=4242)
    add(1.3, "app.conn", peer="ns-1", state="open")
    add(1.4, "app.request", peer="ns-1", code=105, request="GET_ROUTEINFO_BY_TOPIC", ms=1.5, result=0, oneway=False)
    add(1.4, "app.route", peer="ns-1", topic="TopicOrder", result=0, brokers=list(BROKERS), queues={b: 4 for b in BROKERS})
    add(1.5, "app.conn", peer="broker-a-0", state="open")
    add(1.5, "app.heartbeat", peer="broker-a-0", client_id="4242@app", producer_groups=["PG"], consumer_groups=["CG"])
    for i in range(3):
        add(2.0 + i, "app.send", peer="broker-a-0", group="PG", topic="TopicOrder", result=0 if i < 2 else None,
            ms=2.0 if i < 2 else None, queue=1, offset=i if i < 2 else None, msg_id=f"ID{i}" if i < 2 else None,
            uniq_key=f"U{i}")
    add(4.5, "app.deliver", peer="broker-a-0", group="CG", topic="TopicOrder", queue=1, messages=[[0, "U0"], [1, "U1"]])
    add(4.6, "app.commit", peer="broker-a-0", group="CG", topic="TopicOrder", queue=1, offset=2)
    add(6.0, "app.conn", peer="broker-a-0", state="close")
    add(170.0, "app.exit", code=None, signal="SIGTERM", stopped_by_lab=True, reason="end")
    add(170.0, "node.stop", state="stopped")
    log.sort(key=lambda r: r["t"])
    return log


def test_app_records_make_a_client_row():
    model = LabModel()
    for record in app_log():
        model.feed(record)
    (row,) = [r for r in client_rows(model) if r[0] == "app"]
    assert row[2] == "ns-1" and row[8] == "2"  # the NameServer it dialled; two messages delivered
    assert model.clients["app"].ok == 2 and model.clients["app"].failed == 1
    assert model.nodes["app"].state == "stopped"


def test_a_log_with_an_app_replays_on_every_tab():
    app = LabApp(Replay(app_log()))

    async def body(pilot):
        app.source.jump(10.0)
        await pilot.press("2")
        await wait_until(pilot, lambda: "app" in screen_text(app).split(), "the app's row on the Clients tab")
        for key in ("1", "3", "4", "5"):
            await pilot.press(key)
            await pilot.pause(0.1)
        app.source.jump(app.source.end)
        await pilot.pause(0.2)

    run_app(app, body, size=(120, 40))
