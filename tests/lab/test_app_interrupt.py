"""`nslab run` interrupted (SIGINT, SIGTERM to nslab) stops its apps as the timeline's end does:
SIGTERM to the app's group, SIGKILL only after its grace (lab/apps/process.py), recorded as
app.exit with reason `interrupted`. A `kill` fault still SIGKILLs at once (test_app_runner.py)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from lab.events import read_events

from test_app_runner import APP, NSLAB, of, scenario_file


def interrupted_run(tmp_path: Path, app: str, sig: signal.Signals, grace: str) -> tuple[list[dict], float, str]:
    """nslab run with the app, interrupted by `sig` once the app writes output; its records, the
    seconds from the signal to nslab's exit, and the app's stdout."""
    scenario = scenario_file(tmp_path, duration="60s", grace=grace)
    events = tmp_path / "run.events"
    stdout = tmp_path / "run.events.apps" / "tiny.stdout"
    lab = subprocess.Popen([NSLAB, "run", str(scenario), "--events", str(events), "--app", app],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 40
        while not (stdout.exists() and stdout.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert stdout.exists() and stdout.read_text().strip(), "the app never wrote a line"
        sent = time.monotonic()
        lab.send_signal(sig)
        lab.wait(timeout=30)
        took = time.monotonic() - sent
    finally:
        if lab.poll() is None:
            lab.kill()
            lab.wait()
    return list(read_events(events)), took, stdout.read_text()


def test_an_interrupted_run_sends_its_app_sigterm_not_sigkill(tmp_path):
    records, took, _ = interrupted_run(tmp_path, APP, signal.SIGTERM, grace="5s")
    (end,) = of(records, "app.exit", "tiny")
    assert end == {**end, "code": None, "signal": "SIGTERM", "stopped_by_lab": True, "reason": "interrupted"}
    assert took < 5.0  # it exited on the SIGTERM: nslab did not wait out the grace


@pytest.mark.parametrize("sig", [signal.SIGINT])
def test_an_app_that_ignores_sigterm_gets_its_grace_before_sigkill_when_nslab_is_interrupted(tmp_path, sig):
    records, took, output = interrupted_run(tmp_path, f"{APP} --ignore-term", sig, grace="1.5s")
    (end,) = of(records, "app.exit", "tiny")
    assert end == {**end, "code": None, "signal": "SIGKILL", "stopped_by_lab": True, "reason": "interrupted"}
    assert '"term": "ignored"' in output  # it got the SIGTERM first
    assert took >= 1.5
