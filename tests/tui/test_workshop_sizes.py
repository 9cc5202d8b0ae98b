"""A workshop's screens: at 80×24 every control is reachable (core keys in the footer, `? all
keys` for the rest), the NameServer panels get the height and the header keeps NAMESRV_ADDR whole;
at 200 columns the footer hides nothing; help's footer tells what its keys do."""

from __future__ import annotations

from tui_support import EXPIRED_AT, NAMESERVERS, live_app, replay_app, run_app, screen_text, started, wait_until

from lab.tui.header import header_lines
from lab.tui.keys import CATALOG, footer_keys, width_of

LIVE = {i for k in CATALOG for i in k.ids if not i.startswith(("help.", "dialog.", "time.jump"))}


def test_the_footer_keeps_the_core_keys_when_narrow_and_all_of_them_at_200_columns():
    keys, gap = footer_keys(LIVE, 80)
    shown = [k.key for k in keys]
    assert shown[0] == "?" and "q" in shown and {"space", "k", "r", "h"} <= set(shown)
    assert width_of(keys, gap) <= 80
    everything, _ = footer_keys(LIVE, 200)
    assert len(everything) == len([k for k in CATALOG if LIVE.intersection(k.ids)])


def test_the_header_wraps_rather_than_cut_namesrv_addr():
    addr = ";".join(NAMESERVERS.values())
    status = [(" nslab ", ""), ("172.0s of 187.0s  speed 4  paused │ replay of sim", "")]
    lines = header_lines(status, addr, "7", 80)
    assert len(lines) == 2 and "".join(t for t, _ in lines[1]).strip() == f"NAMESRV_ADDR={addr} │ seed 7"
    assert all(sum(len(t) for t, _ in line) <= 80 for line in lines)
    assert len(header_lines(status, addr, "7", 200)) == 1


def test_at_80x24_the_panels_get_the_height_and_nothing_is_cut():
    app = replay_app(at=EXPIRED_AT + 12)

    async def body(pilot):
        await pilot.pause(0.3)
        text = screen_text(app)
        assert f"NAMESRV_ADDR={';'.join(NAMESERVERS.values())}" in text
        assert "topicQueueTable (2)" in text and "TopicOrder" in text
        legend = next(line for line in text.splitlines() if "brokerLiveTable" in line)
        assert "heartbeat age of 120 s" in legend
        footer = text.splitlines()[-1]
        assert "? all keys" in footer and "q quit" in footer

    run_app(app, body, size=(80, 24))


def test_every_key_of_a_live_lab_is_in_the_footer_at_200_columns_and_the_core_at_80():
    def footer_of(app):
        return screen_text(app).splitlines()[-1]

    wide = live_app()

    async def at_200(pilot):
        await started(pilot)
        await wait_until(pilot, lambda: "g topics" in footer_of(wide), "the footer is drawn")
        footer = footer_of(wide)
        for key in CATALOG:
            if LIVE.intersection(key.ids):
                assert f"{key.key} {key.label}" in footer

    run_app(wide, at_200, size=(200, 55))
    narrow = live_app()

    async def at_80(pilot):
        await started(pilot)
        await wait_until(pilot, lambda: "k kill" in footer_of(narrow), "the footer is drawn")
        footer = footer_of(narrow)
        assert footer.lstrip().startswith("? all keys") and "q quit" in footer and "h heal" in footer

    run_app(narrow, at_80, size=(80, 24))


def test_help_says_its_own_keys_and_not_quit():
    app = replay_app(at=10)

    async def body(pilot):
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: "never pushed" in screen_text(app), "help opens")
        footer = screen_text(app).splitlines()[-1]
        assert "esc/q close" in footer and "quit" not in footer
        await pilot.press("q")
        await wait_until(pilot, lambda: app.screen is app.screen_stack[0], "q closes help")
        assert app.is_running

    run_app(app, body, size=(80, 24))


def test_after_tab_out_of_the_filter_the_number_keys_switch_tabs_again():
    app = replay_app(at=10)

    async def body(pilot):
        await pilot.press("slash", *"ns", "tab")
        assert app.bottom.active == "events"
        await pilot.press("1")
        await wait_until(pilot, lambda: app.bottom.active == "brokers", "1 shows the brokers")
        await pilot.press("4")
        await wait_until(pilot, lambda: app.bottom.active == "checks", "4 shows the checks")

    run_app(app, body, size=(80, 24))
