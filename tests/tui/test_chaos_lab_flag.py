"""`nslab chaos` with several labs running takes `--lab PID` before the verb or after it (issue 38):
a teacher types `nslab chaos status --lab 4242` as often as `nslab chaos --lab 4242 status`."""

from __future__ import annotations

import subprocess

from lab_process import NSLAB, LabProcess, wait_for


def chaos(*words: str) -> subprocess.CompletedProcess:
    return subprocess.run([NSLAB, "chaos", *words], capture_output=True, text=True, timeout=60)


def test_with_two_labs_running_lab_after_the_verb_picks_the_one_that_acts():
    first = LabProcess(seed=2)
    try:
        second = LabProcess(seed=3)
        try:
            assert "several labs are running" in chaos("status").stderr
            status = chaos("status", "--lab", str(first.pid))
            assert status.returncode == 0, status.stderr
            assert "broker-a-0" in status.stdout
            killed = chaos("kill", "broker-a-0", f"--lab={second.pid}")
            assert killed.returncode == 0, killed.stderr
            wait_for(lambda: second.status()["broker-a-0"] == "killed", "the second lab's broker dies")
            assert first.status()["broker-a-0"] == "up", "the other lab is left alone"
            assert chaos("--lab", str(first.pid), "status", "--lab", str(first.pid)).returncode == 0
            twice = chaos("--lab", str(first.pid), "status", "--lab", str(second.pid))
            assert twice.returncode == 2 and f"--lab given twice: {first.pid} and {second.pid}" in twice.stderr
        finally:
            second.close()
    finally:
        first.close()
