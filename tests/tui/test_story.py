"""The story of a run stays: chaos actions, removals by node name, first registrations, clients on
cached routes and back, crashes and checks, one line each, never pushed out; the event log
collapses repeats and its filter searches every record kept."""

from __future__ import annotations

from tui_support import BROKERS, EXPIRED_AT, build_log, flood_log, replay_of, run_app, screen_text, wait_until

from lab.tui import log_rows
from lab.tui.model import LOG_SIZE, LabModel
from lab.tui.widgets.event_log import CHAOS_MARK, EventLines


def fed(records) -> LabModel:
    model = LabModel()
    for record in records:
        model.feed(record)
    return model


def test_a_flood_of_failed_sends_pushes_no_chaos_action_or_removal_out():
    model = fed(flood_log())
    assert len(model.log) == LOG_SIZE, "the window is full of failures"
    assert len(model.events("chaos.fault")) == 13, "the filter finds every action, not those in the window"
    assert [r["kind"] for r in model.events("broker-b-0") if r["kind"] == "ns.remove"] == ["ns.remove"], \
        "a removal recorded by address is found by the broker's node name"
    unfiltered = [r["kind"] for r in model.events()]
    assert unfiltered.count("chaos.fault") == 13 and "ns.remove" in unfiltered
    chaos = [line for line in model.story if line.tag == "chaos"]
    assert len(chaos) == 13 and chaos[1].text.startswith("freeze broker-b-0")
    assert "ns-0 removed broker-b-0 (channel_closed: connection reset by peer)" in [line.text for line in model.story]


def test_the_story_has_one_line_per_turn():
    model = fed(build_log())
    texts = [line.text for line in model.story]
    assert "ns-2 removed broker-a-0 (expired)" in texts
    assert "ns-0 registered broker-b-0 (first time)" in texts
    assert any(t.startswith("partition ns-2 / broker-a-0") for t in texts)
    assert any(t.startswith("check FAILED: nameservers_agree") for t in texts)
    assert not any("routes from" in t for t in texts), "a client's first route is no news"
    route = {"node": "producer-0", "kind": "client.route", "topic": "TopicOrder", "ns": "127.0.0.1:9876"}
    model.feed({**route, "t": 200.0, "source": "cache", "ok": False, "error": "RemotingConnectException"})
    model.feed({**route, "t": 201.0, "source": "cache", "ok": False, "error": "RemotingConnectException"})
    model.feed({**route, "t": 230.0, "source": "nameserver", "ok": True, "code": 0})
    assert [line.text for line in model.story[-2:]] == [
        "producer-0 runs on its cached route (ns-0 failed: RemotingConnectException)",
        "producer-0 routes from ns-0 again"]
    # Why a route failed is what tells a refused connection from a body the client cannot parse.
    model.feed({**route, "t": 260.0, "source": "cache", "ok": False,
                "error": "bad reply to request 105 from the NameServer: not standard JSON (strict parser): ..."})
    assert model.story[-1].text.endswith("(ns-0 failed: bad reply to request 105 from the NameServer: "
                                         "not standard JSON (strict parser): ...)")


def test_consecutive_repeats_collapse_and_important_rows_survive_trimming():
    failed = [{"t": i, "node": f"producer-{i % 2}", "kind": "producer.failed", "error": "X"} for i in range(120)]
    fault = {"t": 0, "node": "lab", "kind": "chaos.fault", "verb": "kill", "nodes": ["broker-a-0"]}
    rows = log_rows.build([fault, *failed, {**failed[0], "error": "Y"}])
    assert [(r.record["kind"], r.count) for r in rows] == [("chaos.fault", 1), ("producer.failed", 120),
                                                           ("producer.failed", 1)]
    assert log_rows.node_text(rows[1]) == "2 nodes"
    many = log_rows.build([fault] + [{"t": i, "node": "n", "kind": f"k{i % 2}"} for i in range(50)])
    trimmed = log_rows.trim(many, 10)
    assert trimmed[0].record is fault and len(trimmed) == 11


def test_the_events_tab_shows_the_story_and_collapsed_repeats():
    app = replay_of(flood_log(), at=200.0)

    async def body(pilot):
        await pilot.press("3")
        await wait_until(pilot, lambda: "×" in screen_text(app), "a collapsed row shows")
        text = screen_text(app)
        assert "producer.failed" in text and "ns-0 removed broker-b-0" in text
        assert "freeze broker-b-0" in text, "the story lane keeps the chaos actions in view"
        await pilot.press("slash", *"chaos.fault")
        lines = app.query_one(EventLines)
        await wait_until(pilot, lambda: len(lines.rows) == 13, "the filter finds all 13 actions")
        assert CHAOS_MARK in screen_text(app) and "⚡" not in screen_text(app)

    run_app(app, body, size=(120, 40))


def test_filtering_a_broker_by_name_finds_its_removal_in_the_tui():
    app = replay_of(build_log(), at=EXPIRED_AT + 1)

    async def body(pilot):
        await pilot.press("slash", *"broker-a-0")
        await wait_until(pilot, lambda: "ns.remove" in screen_text(app), "the removal is found")
        line = next(line for line in screen_text(app).splitlines() if "ns.remove" in line)
        assert BROKERS["broker-a-0"] in line and "broker=broker-a-0" in line

    run_app(app, body, size=(200, 40))
