"""A recorded run in the same views: play, pause, step, jump; the divergence highlight; the layout
at 80×24; the event log's filter; help. Chaos keys do nothing to a recording."""

from __future__ import annotations

from tui_support import EXPIRED_AT, replay_app, run_app, screen_text, wait_until
from textual.widgets import Tabs

from lab.tui.widgets.event_log import CHAOS_MARK
from lab.tui.widgets.nameserver_panel import DIVERGED, NameServerPanel


def test_play_pause_step_and_jump_move_through_the_recording():
    app = replay_app()

    async def body(pilot):
        source = app.source
        assert source.paused and source.position == 0.0
        await pilot.press("space")
        await wait_until(pilot, lambda: source.position > 1.0, "playing moves time")
        await pilot.press("space")
        stopped = source.position
        await pilot.pause(0.4)
        assert source.position == stopped
        await pilot.press("full_stop")
        assert source.position == stopped + 1.0
        await pilot.press("j", *"150", "enter")
        await wait_until(pilot, lambda: source.position == 150.0, "the jump lands")
        assert "150.0s of 187.0s" in screen_text(app)
        await pilot.press("j", *"30", "enter")
        await wait_until(pilot, lambda: source.position == 30.0, "a jump back rebuilds the past")
        assert source.model.diverged == {} and source.model.nodes["broker-a-0"].cut_from == set()
        await pilot.press("j", *"end", "enter")
        await wait_until(pilot, lambda: source.position == source.end, "end jumps to the last record")

    run_app(app, body)


def test_rows_that_differ_between_nameservers_are_highlighted_with_how_long():
    app = replay_app(at=EXPIRED_AT + 12)

    async def body(pilot):
        await pilot.pause(0.3)
        text = screen_text(app)
        assert "≠12s" in text  # on the NameServers that still hold broker-a
        assert "broker-a  — not here" in text  # on ns-2, which expired it
        panel = app.query_one("#panel-ns-0", NameServerPanel)
        rows = {key: i for i, (_, key) in enumerate(panel.rows)}
        diverged = panel.render_line(rows["broker-a"] - int(panel.scroll_offset.y))
        agreed = panel.render_line(rows["broker-b"] - int(panel.scroll_offset.y))
        assert any(seg.style and seg.style.bgcolor == DIVERGED.bgcolor for seg in diverged)
        assert not any(seg.style and seg.style.bgcolor == DIVERGED.bgcolor for seg in agreed)
        assert "3 rows differ" not in text and "rows differ" in text

    run_app(app, body, size=(160, 45))


def test_at_80x24_three_nameservers_become_tabs():
    app = replay_app(at=EXPIRED_AT + 12)

    async def body(pilot):
        await pilot.pause(0.3)
        shown = lambda: [p.nameserver for p in app.query(NameServerPanel) if p.display]  # noqa: E731
        assert shown() == ["ns-0"]
        tab_bar = next(line for line in screen_text(app).splitlines() if line.startswith(" ns-0"))
        assert "ns-1" in tab_bar and "ns-2" in tab_bar, "the tab bar names every NameServer"
        app.query_one(Tabs).focus()
        await pilot.press("right", "right")
        await wait_until(pilot, lambda: shown() == ["ns-2"], "the tab shows ns-2")

    run_app(app, body, size=(80, 24))


def test_the_event_log_filters_and_marks_chaos():
    app = replay_app(at=EXPIRED_AT + 12)

    async def body(pilot):
        await pilot.press("slash", *"partition")
        await wait_until(pilot, lambda: CHAOS_MARK in screen_text(app), "the chaos action is marked")
        lines = [line for line in screen_text(app).splitlines() if "chaos.fault" in line]
        assert len(lines) == 1 and "verb=partition" in lines[0]
        assert "producer.send" not in screen_text(app)

    run_app(app, body)


def test_help_explains_the_tables_and_timers_and_chaos_keys_are_off_in_replay():
    app = replay_app(at=10)

    async def body(pilot):
        assert "Kill" not in screen_text(app).splitlines()[-1]
        await pilot.press("k")
        assert app.screen is app.screen_stack[0], "no dialog: a recording cannot be broken"
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: "never pushed" in screen_text(app), "help opens")
        seen = screen_text(app)
        for _ in range(3):
            await pilot.press("pagedown")
            seen += screen_text(app)
        for words in ("brokerLiveTable", "120 s expiry", "10 s scan", "30 s registration", "30 s route poll",
                      "filterServerTable", "divergence monitor"):
            assert words in seen
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.screen_stack[0], "help closes")

    run_app(app, body, size=(100, 50))
