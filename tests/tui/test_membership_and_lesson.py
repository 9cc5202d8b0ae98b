"""The Brokers tab says whether each NameServer holds each broker now; the Checks tab is a lesson
with its timeline, phase, expectations and verdict, and the header stops saying running when the
scenario's duration has passed."""

from __future__ import annotations

from tui_support import (BROKERS, EXPIRED_AT, LESSON_DRAIN, LESSON_KILL, build_log, lesson_log, replay_app,
                         replay_of, run_app, screen_text, wait_until)

from lab.tui.lesson import Lesson, bundled_scenario, from_records, phase_at, ruler, verdict
from lab.tui.membership import LINGER, PERM_STYLE, membership, perm_cell
from lab.tui.model import LabModel


def model_at(t: float, log=None) -> LabModel:
    model = LabModel()
    for record in log or build_log():
        if record["t"] <= t:
            model.feed(record)
    model.now = t
    return model


def test_each_nameserver_holds_removed_or_lacks_each_broker():
    model = model_at(EXPIRED_AT + 12)
    assert membership(model, "ns-0", "broker-a-0") == ("held", "green")
    text, style = membership(model, "ns-2", "broker-a-0")
    assert text.startswith("removed 12 s ago (expired)") and style == "bold red"
    assert text.endswith("· ✗ RemotingTimeoutException"), "the full reason, not 12 characters of it"
    model.now = EXPIRED_AT + LINGER + 1
    assert membership(model, "ns-2", "broker-a-0")[0].startswith("not here")
    model.feed({"t": model.now, "node": "ns-1", "kind": "node.stop", "state": "killed"})
    assert membership(model, "ns-1", "broker-b-0")[0] == "ns killed"


def test_a_group_without_a_live_master_is_write_less_and_r_minus_stands_out():
    model = model_at(100.0)
    broker = model.brokers["broker-a-0"]
    assert perm_cell(model, broker) == ("rw", PERM_STYLE["rw"])
    broker.perm = 4
    assert perm_cell(model, broker)[0] == "r-" and perm_cell(model, broker)[1] != PERM_STYLE["rw"]
    model.feed({"t": 101.0, "node": "broker-a-0", "kind": "node.stop", "state": "killed"})
    assert perm_cell(model, broker) == ("-- write-less (no master)", "bold red")


def test_the_brokers_tab_shows_membership_not_last_registration():
    app = replay_app(at=EXPIRED_AT + 12)

    async def body(pilot):
        await wait_until(pilot, lambda: "removed 12 s ago (expired)" in screen_text(app), "the removal shows")
        text = screen_text(app)
        assert "held" in text and "✓ " not in text

    run_app(app, body, size=(160, 45))


def test_a_lesson_from_a_recording_has_the_scenarios_words_timeline_and_phases():
    lesson = from_records(lesson_log(), bundled_scenario("broker-crash"))
    assert lesson.teaches.startswith("When a broker process dies")
    assert lesson.steps == [(LESSON_KILL, "kill broker-b-0")], "the timeline as it was played"
    assert lesson.duration == LESSON_DRAIN
    assert phase_at(lesson, 10.0) == "before the faults" and phase_at(lesson, 100.0) == "crashed"
    assert phase_at(lesson, LESSON_DRAIN) == "ended"
    line = ruler(lesson, 85.0, 35)
    assert len(line) == 35 and line.index("┃") == 12 and line.index("▲") == 17


def test_a_verdict_like_jepsens():
    assert verdict(["ok", "ok"], True)[1] == "ok"
    assert verdict(["ok", "failed", "pending"], False)[1] == "failed"
    assert verdict(["ok", "pending"], False)[1] == "pending"
    assert verdict(["ok", "unjudged"], True)[1] == "unknown"
    assert ruler(Lesson("live"), 10.0, 20) == "", "no duration, no timeline"


def test_the_checks_tab_shows_the_lesson_from_the_start_of_a_replay_and_ended_at_its_duration():
    app = replay_of(lesson_log())

    async def body(pilot):
        await pilot.press("4")
        await wait_until(pilot, lambda: "Lesson broker-crash" in screen_text(app), "the lesson shows at 0 s")
        text = screen_text(app)
        assert "No scenario is playing" not in text
        assert "When a broker process dies" in text and "▲" in text and "phase: before the faults" in text
        assert "… broker_removed broker=broker-a-0" in text, "expectations pending until decided"
        assert "paused" in text.splitlines()[0]
        await pilot.press("j", *"100", "enter")
        await wait_until(pilot, lambda: "phase: crashed" in screen_text(app), "the phase under way")
        assert "✓ broker_removed broker=broker-a-0" in screen_text(app)
        await pilot.press("j", *"175", "enter")
        await wait_until(pilot, lambda: "ended" in screen_text(app).splitlines()[0], "the header says ended")
        assert "verdict" in screen_text(app)

    run_app(app, body, size=(120, 45))


def test_a_vanished_row_leaves_a_dimmed_trace_for_a_while():
    model = model_at(EXPIRED_AT + 1)
    addr = BROKERS["broker-a-0"]
    assert ("brokerLiveTable", addr) in model.traces("ns-2")
    model.now = EXPIRED_AT + 60
    assert model.traces("ns-2") == {}


def test_the_divergence_mark_never_covers_the_data_it_flags():
    from lab.tui.widgets.nameserver_panel import marked
    pieces = [("  broker-a   ", None), ("0=127.0.0.1:10911", None)]
    out, tail = marked(pieces, 34, " ≠12s ")
    assert "".join(t for t, _ in out) == "≠ broker-a   0=127.0.0.1:10911"
    assert tail is None, "no room: the age goes, the data stays"
    out, tail = marked(pieces, 60, " ≠12s ")
    assert tail[0] == " ≠12s "
