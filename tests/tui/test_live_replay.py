"""A simulated TUI run is a pure function of its seed and its actions: paused, stepped or sped up,
it exports as a scenario that `nslab run` repeats record for record."""

import asyncio
import subprocess
import sys
from pathlib import Path

import msgpack

from lab.config import LabConfig
from lab.events import read_events
from lab.run.runner import RunOptions
from lab.tui.guest import LiveLab

NSLAB = str(Path(sys.executable).with_name("nslab"))


def live_run(path: Path, speed: float, *, pause: bool) -> None:
    async def main():
        lab = LiveLab(LabConfig(), RunOptions(sim=True, seed=5, speed=speed, events_path=path))
        await lab.start()

        async def until(t):
            while lab.clock.current_time() < t:
                await asyncio.sleep(0.01)

        await until(20)
        assert await lab.apply(["kill", "broker-a-0"]) == "broker-a-0 killed"
        if pause:
            lab.toggle_pause()
            await asyncio.sleep(0.3)
            lab.step()
            lab.toggle_pause()
            lab.faster()
        await until(50)
        await lab.apply(["toxic", "broker-b-0:ns-0", "latency", "latency=200ms"])
        await until(70)
        await lab.apply(["restart", "broker-a-0"])
        await until(80)
        await lab.stop()

    asyncio.run(main())


def records(path: Path) -> list[bytes]:
    """Every record after run.start (which says how the run was made: speed, scenario), a chaos
    action's `source` aside (tui live, scenario replayed)."""
    out = []
    for r in list(read_events(path))[1:]:
        if r["kind"] == "chaos.fault":
            r.pop("source")
        out.append(msgpack.packb(r))
    return out


def test_a_paused_and_sped_up_sim_tui_run_replays_to_the_byte_as_a_scenario(tmp_path):
    live_run(tmp_path / "a.events", 40, pause=True)
    live_run(tmp_path / "b.events", 15, pause=False)
    assert records(tmp_path / "a.events") == records(tmp_path / "b.events"), "pauses and speed change nothing"

    scenario = tmp_path / "recorded.toml"
    export = subprocess.run([NSLAB, "replay", str(tmp_path / "a.events"), "--export-scenario", str(scenario)],
                            capture_output=True, text=True)
    assert export.returncode == 0, export.stderr
    text = scenario.read_text()
    assert text.count("[[timeline]]") == 3 and 'at = "21.0s"' in text and "seed = 5" in text
    run = subprocess.run([NSLAB, "run", str(scenario), "--events", str(tmp_path / "run.events")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert records(tmp_path / "run.events") == records(tmp_path / "a.events")


def test_an_event_log_that_cannot_make_a_scenario_says_why(tmp_path):
    path = tmp_path / "torn.events"
    path.write_bytes(msgpack.packb({"t": 0.0, "node": "lab", "kind": "run.start", "seed": 1, "mode": "sim"}))
    result = subprocess.run([NSLAB, "replay", str(path), "--export-scenario", str(tmp_path / "x.toml")],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "no run.drain record" in result.stderr
