"""`nslab up --scenario` plays a timeline on screen with its expectations decided as they go;
plain `nslab` and `nslab up` open the TUI; `nslab replay` refuses what it cannot read."""

from __future__ import annotations

from tui_support import live_app, run_app, screen_text, started, wait_until

from lab import cli
from lab.tui import launch
from lab.control import scenarios

SCENARIO = """\
# A tiny scenario for the TUI tests: kill a master, expect every NameServer to drop it.
[scenario]
teaches = "A killed broker's connections close and every NameServer drops it at once."
duration = "20s"

[[timeline]]
at = "5s"
fault = "kill"
node = "broker-a-0"

[[expect]]
type = "broker_removed"
broker = "broker-a-0"
within = "2s"

[[expect]]
type = "duplicates"
max = 0
"""


def test_a_scenario_plays_in_the_tui_and_its_expectations_are_shown_as_decided(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(SCENARIO)
    app = live_app(play=scenarios.Play(scenarios.prepare(str(path))))

    async def body(pilot):
        source = app.source
        await wait_until(pilot, lambda: "0 held, 0 failed, 2 pending" in screen_text(app), "pending checks show")
        await started(pilot)
        await pilot.press("space")
        source.step(20 + scenarios.DRAIN + 1)  # through the timeline and the drain, as fast as it goes
        await wait_until(pilot, lambda: "2 held, 0 failed, 0 pending" in screen_text(app), "every check decided",
                         timeout=30)
        text = screen_text(app)
        assert "✓ broker_removed broker=broker-a-0" in text
        assert "scenario tiny" in text
        assert [r["source"] for r in source.model.events("chaos.fault")] == ["scenario"]

    run_app(app, body)


def test_plain_nslab_and_nslab_up_open_the_tui(monkeypatch):
    opened = []
    monkeypatch.setattr(launch, "run_tui", lambda config, options, play: opened.append((options, play)) or 0)
    assert cli.main([]) == 0
    assert cli.main(["up", "--sim", "--seed", "5", "--scenario", "broker-crash"]) == 0
    (plain, no_play), (sim, play) = opened
    assert not plain.sim and no_play is None
    assert sim.sim and sim.seed == 5 and play.prepared.scenario.name == "broker-crash"
    assert cli.main(["up", "--headless", "--scenario", "broker-crash"]) == 2


def test_replay_refuses_a_missing_or_empty_log(tmp_path, capsys):
    assert cli.main(["replay", str(tmp_path / "nope.events")]) == 2
    (tmp_path / "empty.events").write_bytes(b"")
    assert cli.main(["replay", str(tmp_path / "empty.events")]) == 2
    assert "no event records" in capsys.readouterr().err
