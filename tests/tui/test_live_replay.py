"""A simulated TUI run is a pure function of its seed and its actions: paused, stepped or sped up,
it exports as a scenario that `nslab run` repeats record for record."""

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import msgpack

from lab.config import LabConfig
from lab.events import read_events
from lab.run.runner import RunOptions
from lab.tui.guest import LiveLab

NSLAB = str(Path(sys.executable).with_name("nslab"))


def live_run(path: Path, speed: float, *, run_between: bool) -> None:
    """Actions at chosen moments: the clock is paused there (a person's timing is not the point)."""
    async def main():
        lab = LiveLab(LabConfig(), RunOptions(sim=True, seed=5, speed=speed, events_path=path))
        await lab.start()
        lab.toggle_pause()

        async def until(t):
            """Step, paused, to t exactly (whole seconds of the run, then what is left) and wait
            until the run is there. Where a pause or an earlier step left the clock depends on
            real time (and the run may still be on its way there): an action injected then would
            land on one whole second or the next as it happened, and two runs would differ."""
            while lab.clock.horizon < t - 1e-9:
                lab.step(min(1.0, t - lab.clock.horizon))
                await at_rest()

        async def at_rest():
            deadline = time.monotonic() + 60
            while lab.clock.current_time() < lab.clock.horizon - 1e-9:
                assert time.monotonic() < deadline, "the paused run never reached its step's end"
                await asyncio.sleep(0.005)

        await until(20.5)
        assert await _applied(lab, ["kill", "broker-a-0"]) == "broker-a-0 killed"
        if run_between:  # run unpaused, sped up, then pause again: the same moments must follow
            lab.toggle_pause()
            lab.faster()
            # Paused again well before the next action (50.5 s): a starved machine may overshoot.
            while lab.clock.current_time() < 30:
                await asyncio.sleep(0.002)
            lab.toggle_pause()
            assert lab.clock.horizon < 50.5, f"paused at {lab.clock.horizon:.1f} s, past the next action: " \
                                             "the machine starved this test for a third of a second"
        await until(50.5)
        await _applied(lab, ["toxic", "broker-b-0:ns-0", "latency", "latency=200ms"])
        await until(70.5)
        await _applied(lab, ["restart", "broker-a-0"])
        await until(80.5)
        lab.toggle_pause()
        await lab.stop()

    asyncio.run(main())


async def _applied(lab, words):
    """apply() waits for the Play's next second, which a paused clock reaches by a step."""
    task = asyncio.ensure_future(lab.apply(words))
    await asyncio.sleep(0.01)
    lab.step(1.0)
    return await task


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
    live_run(tmp_path / "a.events", 40, run_between=True)
    live_run(tmp_path / "b.events", 15, run_between=False)
    assert records(tmp_path / "a.events") == records(tmp_path / "b.events"), "pauses and speed change nothing"

    scenario = tmp_path / "recorded.toml"
    export = subprocess.run([NSLAB, "replay", str(tmp_path / "a.events"), "--export-scenario", str(scenario)],
                            capture_output=True, text=True)
    assert export.returncode == 0, export.stderr
    text = scenario.read_text()
    assert text.count("[[timeline]]") == 3 and 'fault = "restart"' in text and "seed = 5" in text
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
