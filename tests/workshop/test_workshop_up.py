"""`nslab workshop up N` opens the lab on exercise N's scenario, with the chosen function swapped in
while it runs; an unknown N is a clear message and exit 2. The app lab.tui.launch.run_tui builds runs
under Textual's Pilot here instead of taking over the terminal, on the simulated network."""

from __future__ import annotations

import asyncio
import gc
import sys

import pytest

import nameserver.routes
from lab import cli
from lab.tui import launch
from lab.tui.app import LabApp
from lab.tui.guest import LiveLab
from lab.workshop.course import COURSE, get


def run_under_pilot(seen: dict):
    """Stands in for LabApp.run, which would take over the terminal: the app lab.tui.launch.run_tui built
    runs under Pilot until every node of the exercise's cluster is up, then stops gracefully."""
    def run(app: LabApp) -> None:
        model = app.source.model

        async def main():
            async with app.run_test(size=(120, 36)) as pilot:
                try:
                    deadline = asyncio.get_running_loop().time() + 20
                    while not (model.nodes and all(v.state == "up" for v in model.nodes.values())):
                        assert asyncio.get_running_loop().time() < deadline, "the cluster never came up"
                        await pilot.pause(0.05)
                    seen.update(source=app.source, run=model.run, nodes=dict(model.nodes),
                                checks=list(model.expectations), function=nameserver.routes.expired_brokers)
                finally:
                    await app.source.stop()

        asyncio.run(main())

    return run


def test_workshop_up_runs_the_exercises_scenario_with_the_solution_swapped_in(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # the lab's `nslab chaos` socket
    seen: dict = {}
    monkeypatch.setattr(LabApp, "run", run_under_pilot(seen))
    exercise = get(5)  # expiry-scan: its own scenario file and config, and a function to swap
    lab_own = nameserver.routes.expired_brokers
    process = gc.get_threshold(), sys.getswitchinterval()

    assert cli.main(["workshop", "up", "5", "--sim", "--solution"]) == 0

    assert seen["run"]["scenario"] == exercise.scenario_path.stem
    assert seen["run"]["config"]["nameserver"]["serverChannelMaxIdleTimeSeconds"] == 600.0  # the scenario's
    assert {v.role for v in seen["nodes"].values()} >= {"nameserver", "broker", "producer", "consumer"}
    assert "the scan drops the frozen broker" in seen["checks"]
    assert isinstance(seen["source"], LiveLab) and seen["source"].mode == "sim" and seen["source"].speed == 4.0
    # the learner's function runs in a process of its own: the lab calls its stand-in
    assert seen["function"] is not lab_own and seen["function"].__module__ == "lab.workshop.remote"
    assert nameserver.routes.expired_brokers is lab_own, "the swap ends with the lab"
    assert (gc.get_threshold(), sys.getswitchinterval()) == process, "the TUI gave the process back"


@pytest.mark.parametrize("number", [0, len(COURSE) + 1])
def test_workshop_up_refuses_an_unknown_exercise(monkeypatch, capsys, number):
    monkeypatch.setattr(launch, "run_tui", lambda *a: pytest.fail("no lab for an unknown exercise"))
    assert cli.main(["workshop", "up", str(number), "--sim"]) == 2
    err = capsys.readouterr().err
    assert f"no exercise {number}: there are 1 to {len(COURSE)}" in err and "nslab workshop list" in err
