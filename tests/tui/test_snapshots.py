"""Snapshots of the main screens, from a small recorded run (replay: nothing moves unless asked).
Update them after an intended change with `pytest tests/tui --snapshot-update`, then look at the
SVGs in tests/tui/__snapshots__/."""

from __future__ import annotations

from tui_support import EXPIRED_AT, replay_app

from lab.tui.screens.partition import PartitionScreen

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
