"""Snapshots of the main screens, from a small recorded run (replay: nothing moves unless asked).
Update them after an intended change with `pytest tests/tui --snapshot-update`, then look at the
SVGs in tests/tui/__snapshots__/."""

from __future__ import annotations

from tui_support import EXPIRED_AT, LESSON_DRAIN, flood_log, lesson_log, replay_app, replay_of

from lab.tui.chaos_menu import HELP, SECOND
from lab.tui.screens.partition import PartitionScreen
from lab.tui.screens.pick import PickScreen

AT = EXPIRED_AT + 12  # ns-2 has expired broker-a-0 twelve seconds ago: the tables differ


def test_main_screen_at_80x24_brokers(snap_compare):
    assert snap_compare(replay_app(AT), terminal_size=(80, 24))


def test_wide_screen_nameservers_side_by_side_clients(snap_compare):
    assert snap_compare(replay_app(AT), press=["2"], terminal_size=(160, 40))


def test_event_log_filtered(snap_compare):
    assert snap_compare(replay_app(AT), press=["3", "slash", *"ns-2"], terminal_size=(100, 30))


def test_checks(snap_compare):
    assert snap_compare(replay_app(AT), press=["4"], terminal_size=(100, 30))


def test_help(snap_compare):
    assert snap_compare(replay_app(AT), press=["question_mark"], terminal_size=(80, 24))


def test_partition_dialog(snap_compare):
    app = replay_app(AT)

    async def open_dialog(pilot):
        app.push_screen(PartitionScreen([(n, f"{n}  {v.role}") for n, v in app.source.model.nodes.items()]))
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=open_dialog)


# The views of issue 18, at a workshop's 80×24 and a wide 200×55.

def test_lesson_at_80x24(snap_compare):
    assert snap_compare(replay_of(lesson_log(), at=100.0), press=["4"], terminal_size=(80, 24))


def test_lesson_at_200x55(snap_compare):
    assert snap_compare(replay_of(lesson_log(), at=100.0), press=["4"], terminal_size=(200, 55))


def test_lesson_ended_at_200x55(snap_compare):
    assert snap_compare(replay_of(lesson_log(), at=LESSON_DRAIN + 5), press=["4"], terminal_size=(200, 55))


def test_clients_health_all_failing_at_80x24(snap_compare):
    assert snap_compare(replay_of(flood_log(faults=1, failures=2000), at=125.0), press=["2"], terminal_size=(80, 24))


def test_clients_health_at_200x55(snap_compare):
    assert snap_compare(replay_of(flood_log(faults=1, failures=2000), at=125.0), press=["2"],
                        terminal_size=(200, 55))


def test_story_and_collapsed_log_at_80x24(snap_compare):
    assert snap_compare(replay_of(flood_log(), at=200.0), press=["3"], terminal_size=(80, 24))


def test_story_and_collapsed_log_at_200x55(snap_compare):
    assert snap_compare(replay_of(flood_log(), at=200.0), press=["3"], terminal_size=(200, 55))


def test_brokers_membership_at_200x55(snap_compare):
    assert snap_compare(replay_app(AT), terminal_size=(200, 55))


# A teacher's 80×24 (issue 38): the verdict pinned above the expectations; the longest dialog
# description whole above its choices.

def test_lesson_ended_at_80x24(snap_compare):
    assert snap_compare(replay_of(lesson_log(), at=LESSON_DRAIN + 5), press=["4"], terminal_size=(80, 24))


def test_toxic_dialog_at_80x24(snap_compare):
    app = replay_app(AT)

    async def open_dialog(pilot):
        presets = SECOND["toxic"][1]
        app.push_screen(PickScreen(f"toxic: {HELP['toxic']}", [(label, label) for label in presets]))
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=open_dialog)
