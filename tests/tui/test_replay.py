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


# --- a damaged log: named, and shown as far as it can be read ---------------------------------------

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import msgpack  # noqa: E402
import pytest  # noqa: E402
from tui_support import build_log  # noqa: E402

from lab.tui.app import LabApp  # noqa: E402
from lab.tui.replay import Replay, ReplayError, open_log  # noqa: E402

NSLAB = str(Path(sys.executable).with_name("nslab"))


def _log_bytes() -> tuple[bytes, list[int]]:
    """The test recording with a run.end, and where each record starts."""
    records = build_log() + [{"t": 187.0, "node": "lab", "kind": "run.end"}]
    packed = [msgpack.packb(r) for r in records]
    starts = [sum(len(p) for p in packed[:i]) for i in range(len(packed))]
    return b"".join(packed), starts


def _damaged(tmp_path, how: str) -> tuple[Path, int, int, float]:
    """(the log, the byte where it stops being readable, how many records come before, their last t)."""
    data, starts = _log_bytes()
    records = list(msgpack.Unpacker(__import__("io").BytesIO(data), raw=False))
    middle = len(starts) // 2
    if how == "torn":  # a crash mid-write: the last record half there
        cut = starts[-1] + 3
        data, end, kept = data[:cut], starts[-1], len(starts) - 1
    else:  # a flipped byte in the middle: 0xc1 is never valid msgpack
        data, end, kept = data[:starts[middle]] + b"\xc1" + data[starts[middle] + 1:], starts[middle], middle
    path = tmp_path / f"{how}.events"
    path.write_bytes(data)
    return path, end, kept, records[kept - 1]["t"]


def test_a_torn_last_record_is_shown_up_to_it_and_said(tmp_path):
    path, end, kept, last = _damaged(tmp_path, "torn")
    records, warning = open_log(path)
    assert len(records) == kept
    assert warning == (f"{path}: the last record is torn at byte {end} of {path.stat().st_size} (a run killed "
                       f"mid-write): showing the {kept} records before it, up to t={last:.1f} s")


def test_damage_in_the_middle_is_named_with_its_byte_and_what_is_shown(tmp_path):
    path, end, kept, last = _damaged(tmp_path, "flipped")
    size = path.stat().st_size
    records, warning = open_log(path)
    assert len(records) == kept
    assert warning == (f"{path}: damaged in the middle (corrupt at byte {end} of {size}): showing the {kept} "
                       f"records before it, up to t={last:.1f} s; the {size - end} bytes after it cannot be read")


def test_a_sound_log_opens_without_a_warning_and_a_foreign_file_is_refused(tmp_path):
    path = tmp_path / "sound.events"
    path.write_bytes(_log_bytes()[0])
    assert open_log(path)[1] is None
    (tmp_path / "notes.txt").write_bytes(os.urandom(2000))
    with pytest.raises(ReplayError, match="not an event log"):
        open_log(tmp_path / "notes.txt")


def test_the_screen_says_what_is_wrong_with_a_damaged_log(tmp_path):
    path, end, kept, last = _damaged(tmp_path, "flipped")
    records, warning = open_log(path)
    app = LabApp(Replay(records, warning=warning))

    def notified() -> str:  # the notification's lines, as one
        return " ".join(line.split("▌", 1)[1].strip() for line in screen_text(app).splitlines() if "▌" in line)

    async def body(pilot):
        await wait_until(pilot, lambda: f"corrupt at byte {end} of" in notified(), "the damage is on screen")
        assert f"showing the {kept} records before it, up to t={last:.1f} s" in notified()
        assert f"of {last:.1f}s" in screen_text(app)  # the header: as far as it can be read

    run_app(app, body, size=(200, 45))


@pytest.mark.parametrize("how", ["torn", "flipped"])
def test_nslab_replay_warns_in_one_line_before_the_screen(tmp_path, how):
    """Exporting needs no terminal: the warning comes first, in one line, whatever the replay does next
    (this recording has no run.drain to export a scenario from)."""
    path, end, kept, last = _damaged(tmp_path, how)
    result = subprocess.run([NSLAB, "replay", str(path), "--export-scenario", str(tmp_path / "s.toml")],
                            capture_output=True, text=True, timeout=60)
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"nslab replay: warning: {path}: "), result.stderr
    assert f"byte {end} of {path.stat().st_size}" in lines[0] and f"up to t={last:.1f} s" in lines[0]
