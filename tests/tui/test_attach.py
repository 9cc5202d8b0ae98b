"""`nslab attach`: the TUI on a lab that another process runs — a real `nslab up --headless --sim`
here — fed by its event stream, driven through its control socket."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time

import pytest
from lab_process import LabProcess, wait_for
from textual.widgets import OptionList
from tui_support import run_app, screen_text, wait_until

from chaos.faults import FaultError
from lab import cli
from lab.control import live
from lab.events import read_events
from lab.tui.app import LabApp
from lab.tui.attach import AttachedLab
from lab.tui.screens.pick import PickScreen


@pytest.fixture
def lab(tmp_path):
    process = LabProcess("--events", str(tmp_path / "lab.events"))
    yield process
    process.close()


def attached(lab: LabProcess, control: bool = True) -> LabApp:
    return LabApp(AttachedLab(lab.info, control=control))


async def caught_up(pilot) -> None:
    model = pilot.app.source.model
    await wait_until(pilot, lambda: model.nodes and all(v.state == "up" for v in model.nodes.values())
                     and all(ns.tables["brokerLiveTable"] for ns in model.nameservers.values()),
                     "the attached view has every node up and the NameServers' tables", timeout=60)


def test_an_attached_view_catches_up_follows_the_run_and_shows_its_end(lab, tmp_path):
    wait_for(lambda: lab.status().get("broker-a-0") == "up", "the lab runs")
    time.sleep(2.0)  # a run under way: the view must catch up with what came before it
    app = attached(lab)

    async def body(pilot):
        source = pilot.app.source
        model = source.model
        await caught_up(pilot)
        assert model.run["seed"] == 2 and model.story, "the run so far: run.start, the story's first lines"
        text = screen_text(pilot.app)
        assert f"sim lab {lab.pid}" in text and "running" in text
        assert "pause" not in text and "speed" not in text.split("\n")[-1], "the lab's time is its own"
        now = model.now
        await wait_until(pilot, lambda: model.now > now + 2, "new records follow", timeout=30)
        await asyncio.to_thread(lab.interrupt)
        await wait_until(pilot, lambda: source.gone is not None, "the stream ends", timeout=60)
        assert source.gone == "the lab ended" and model.ended
        await wait_until(pilot, lambda: "the lab ended" in screen_text(pilot.app), "the screen says so")
        text = screen_text(pilot.app)
        assert "ended" in text.split("\n")[0] and "brokerLiveTable" in text, "the screen stays, to be read"
        assert not pilot.app.check_action("chaos", ("kill",)), "no chaos on a lab that is gone"
        recorded = list(read_events(tmp_path / "lab.events"))
        assert source.received == len(recorded) and model.version == len(recorded), \
            "the view got every record the lab wrote, none twice"

    run_app(app, body)


def test_a_chaos_key_in_an_attached_view_acts_on_the_lab(lab):
    app = attached(lab)

    async def body(pilot):
        model = pilot.app.source.model
        await caught_up(pilot)
        await pilot.press("k")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, PickScreen), "the kill dialog")
        options = pilot.app.screen.query_one(OptionList)
        assert options.get_option_at_index(0).id == "broker-a-0"
        await pilot.press("enter")
        await wait_until(pilot, lambda: model.nodes["broker-a-0"].state == "killed", "the view shows the kill")
        assert (await asyncio.to_thread(lab.status))["broker-a-0"] == "killed", "the lab itself killed it"
        assert [r["source"] for r in model.events("chaos.fault")] == ["control"]
        await wait_until(pilot, lambda: "broker-a-0 killed" in screen_text(pilot.app), "the lab's answer shows")

    run_app(app, body)


def test_a_read_only_view_cannot_drive_the_lab(lab):
    app = attached(lab, control=False)

    async def body(pilot):
        source = pilot.app.source
        await caught_up(pilot)
        text = screen_text(pilot.app)
        assert "view only" in text
        footer = text.split("\n")[-1]
        assert "kill" not in footer and "heal" not in footer and "quit" in footer
        await pilot.press("k", "h", "n")
        await pilot.pause(0.5)
        assert not isinstance(pilot.app.screen, PickScreen)
        assert not any(title.startswith("kill ") for title, _, _ in pilot.app.commands())
        with pytest.raises(FaultError, match="only watches"):
            await source.apply(["kill", "broker-a-0"])
        assert (await asyncio.to_thread(lab.status))["broker-a-0"] == "up"
        assert not source.model.events("chaos.fault")

    run_app(app, body)


def test_a_viewer_that_stops_reading_does_not_stall_the_lab_and_a_dead_lab_is_shown(lab):
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.connect(lab.info["events"])  # and never reads
    app = attached(lab)

    async def body(pilot):
        source = pilot.app.source
        model = source.model
        await caught_up(pilot)
        now = model.now
        await wait_until(pilot, lambda: model.now > now + 4, "the lab runs on, the other view follows", timeout=30)
        reply = await asyncio.to_thread(live.send, ["status"], lab.info)
        assert reply["ok"] and reply["viewers"]["attached"] == 2
        os.kill(lab.pid, 9)  # the lab dies: no run.end
        await asyncio.to_thread(lab.process.wait)  # reaped, as its shell would
        await wait_until(pilot, lambda: source.gone is not None, "the stream ends", timeout=30)
        assert "is gone" in source.gone and not model.ended
        await wait_until(pilot, lambda: "lab gone" in screen_text(pilot.app).split("\n")[0], "the header says so")

    try:
        run_app(app, body)
    finally:
        stuck.close()


def test_attach_finds_the_one_lab_and_lists_several(tmp_path, monkeypatch, capsys):
    assert cli.main(["attach"]) == 2
    assert "no running lab found" in capsys.readouterr().err
    directory = live.runtime_dir()
    for pid in (os.getpid(), os.getppid()):
        (directory / f"{pid}.json").write_text(json.dumps({"pid": pid, "mode": "sim", "namesrv_addr": "x:1",
                                                           "socket": "-", "events": "-"}))
    assert cli.main(["attach"]) == 2
    err = capsys.readouterr().err
    assert "several labs are running" in err and str(os.getpid()) in err and str(os.getppid()) in err
    opened = []
    monkeypatch.setattr(cli.launch, "run_attach", lambda info, control: opened.append((info["pid"], control)) or 0)
    assert cli.main(["attach", "--lab", str(os.getppid()), "--read-only"]) == 0
    assert opened == [(os.getppid(), False)]
