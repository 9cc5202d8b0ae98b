"""A teacher's 80×24 (issue 38): a scenario's verdict and every expectation on the Checks tab, every
NameServer's column and the removal's reason on the Brokers tab, every client listed, dialog
descriptions whole, notifications off the NameServer panels, the brokerLiveTable legend whole."""

from __future__ import annotations

from tui_support import (LESSON_DRAIN, live_app, replay_of, lesson_log, run_app, screen_text, started,
                         wait_until)
from textual.widgets import OptionList, SelectionList

from lab.control import scenarios
from lab.tui.screens.pick import PickScreen

SMALL = (80, 24)


def bottom(app) -> list[str]:
    """The rows under the NameServer panels' bottom border, less the footer."""
    lines = screen_text(app).splitlines()
    last_border = max(i for i, line in enumerate(lines) if line.startswith("╰"))
    return lines[last_border + 1:-1]


async def scroll_through(pilot, keys: list[str]) -> list[str]:
    """The Checks tab's rows after each key (its scroll settled), every one with the verdict in sight."""
    app = pilot.app
    body = app.query_one("#checks-body")
    await wait_until(pilot, lambda: app.focused is body, "the Checks tab takes the keys")
    seen = []
    for key in keys:
        await pilot.press(key)
        await wait_until(pilot, lambda: not app.animator.is_being_animated(body, "scroll_y"), "the scroll settles")
        await pilot.pause(0.05)
        rows = bottom(app)
        assert any(row.lstrip().startswith("now ") and " · verdict " in row for row in rows), rows
        seen += rows
    return seen


def test_at_80x24_a_scenario_to_its_end_shows_the_verdict_and_every_expectation_by_keys():
    play = scenarios.Play(scenarios.prepare("nameserver-pause"))
    app = live_app(play=play)
    names = [e.name for e in play.prepared.scenario.expectations]

    async def body(pilot):
        await started(pilot)
        await pilot.press("space")
        app.source.step(play.prepared.scenario.duration + scenarios.DRAIN + 1)
        await wait_until(pilot, lambda: "scenario finished" in screen_text(app), "the scenario finishes", timeout=120)
        await wait_until(pilot, lambda: "verdict VALID: every expectation held" in screen_text(app),
                         "the verdict shows at 80×24")
        seen = "\n".join(await scroll_through(pilot, ["home", "pagedown", "pagedown", "end", "pageup", "home"]))
        for name in names:  # a name may wrap: its first words
            assert f"✓ {name[:30]}" in seen, f"{name!r} never came on screen"

    run_app(app, body, size=SMALL)


def test_at_80x24_the_checks_tab_of_a_replay_keeps_its_verdict_while_it_scrolls():
    app = replay_of(lesson_log(), at=LESSON_DRAIN + 5)

    async def body(pilot):
        await pilot.press("4")
        await wait_until(pilot, lambda: "verdict INVALID" in screen_text(app), "the verdict shows")
        first = bottom(app)
        seen = await scroll_through(pilot, ["end"])
        assert "Lesson broker-crash" not in "\n".join(first), "the expectations first, the lesson text after"
        assert "1m00s kill broker-b-0" in "\n".join(seen), "End reaches the timeline's last step"

    run_app(app, body, size=SMALL)


def test_at_80x24_the_brokers_tab_shows_every_nameserver_and_why_a_broker_was_removed():
    app = live_app()

    async def body(pilot):
        await started(pilot)
        await pilot.press("k")
        await wait_until(pilot, lambda: isinstance(app.screen, PickScreen), "the kill dialog")
        await pilot.press("enter")  # broker-a-0, the first node
        await wait_until(pilot, lambda: app.source.model.nodes["broker-a-0"].state == "killed", "broker-a-0 dies")
        await pilot.press("1")
        await wait_until(pilot, lambda: "channel_closed" in "\n".join(bottom(app)), "the reason shows")
        rows = bottom(app)
        header = next(row for row in rows if row.startswith("broker "))
        assert "ns-0" in header and "ns-1" in header
        killed = next(row for row in rows if row.startswith("broker-a-0"))
        assert killed.count("removed") == 2, killed
        note = rows[rows.index(killed) + 1]
        assert "ns-0, ns-1: channel_closed" in note, note
        assert all(any(row.startswith(b) for row in rows) for b in ("broker-a-1", "broker-b-0", "broker-b-1"))

    run_app(app, body, size=SMALL)


def test_at_80x24_the_clients_tab_lists_every_client_and_the_rates():
    app = live_app()

    async def body(pilot):
        await started(pilot)
        await pilot.press("2")
        await wait_until(pilot, lambda: "msgs/s" in screen_text(app), "the clients tab")
        text = "\n".join(bottom(app))
        for client in ("producer-0", "producer-1", "consumer-0", "consumer-1"):
            assert client in text, f"{client} is off the tab"
        assert "ok " in text and "failed " in text

    run_app(app, body, size=SMALL)


def test_at_80x24_a_dialog_says_its_whole_description_and_every_choice_fits():
    app = live_app()

    async def body(pilot):
        await started(pilot)
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, PickScreen), "the toxic dialog")
        await pilot.pause(0.2)
        dialog = app.screen.query_one(".dialog").region
        rows = [line[dialog.x + 1:dialog.right - 1] for line in screen_text(app).splitlines()[dialog.y:dialog.bottom]]
        text = " ".join(" ".join(rows).split())
        assert "toxic: a link toxic: toxic NODE[:PEER]" in text and "each with code=NAME|NUMBER" in text, \
            "the description, first words to last"
        assert "enter picks · esc cancels" in text
        assert app.screen.query_one(OptionList).region.bottom < dialog.bottom, "the choices inside the dialog"

    run_app(app, body, size=SMALL)


def test_at_80x24_a_partition_notification_leaves_the_nameserver_panels_in_sight():
    app = live_app()

    async def body(pilot):
        await started(pilot)
        await pilot.press("p")
        await wait_until(pilot, lambda: app.screen.query(SelectionList), "the partition dialog")
        await pilot.press("space", "enter")  # ns-0 on one side, every other node on the other
        await wait_until(pilot, lambda: "partitioned" in screen_text(app), "the notification")
        lines = screen_text(app).splitlines()
        panels_end = max(i for i, line in enumerate(lines) if line.startswith("╰"))
        assert all("partition" not in line for line in lines[:panels_end + 1]), "the notification covers a panel"
        assert all(line.startswith("│") and line.endswith("│") for line in lines[3:panels_end]), \
            "each panel row whole, borders and all"

    run_app(app, body, size=SMALL)


def test_the_heartbeat_legend_is_whole_at_80_columns_and_in_a_1024_px_browser():
    for size in (SMALL, (105, 36)):  # 105 columns: a 1024 px browser window at the default font size
        app = live_app()

        async def body(pilot):
            await started(pilot)
            await wait_until(pilot, lambda: "brokerLiveTable (4)" in screen_text(app), "the panels")
            for line in screen_text(app).splitlines():
                for panel in line.split("││"):
                    if "brokerLiveTable" in panel:
                        assert panel.rstrip(" │").endswith("age of 120 s"), (size, panel)

        run_app(app, body, size=size)
