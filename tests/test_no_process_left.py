"""The suite's guard (tests/conftest.py): a test that leaves a process running fails, naming it, and
the process is ended; a test that ends its processes passes. Run in a pytest of its own."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

LEAKS = """
import subprocess

def test_leaks():
    subprocess.Popen(["sleep", "{mark}"])

def test_waits():
    subprocess.run(["sleep", "0.1"], check=True)
"""


def test_a_test_that_leaves_a_process_running_fails_and_the_process_ends(tmp_path):
    mark = f"600.{uuid.uuid4().int % 10**9}"  # a sleep nobody else runs
    (tmp_path / "test_leak.py").write_text(LEAKS.format(mark=mark))
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-c", "/dev/null",
                          "--rootdir", str(tmp_path), str(tmp_path / "test_leak.py")],
                         capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parent)})
    assert run.returncode == 1, run.stdout + run.stderr
    assert "the test left processes running (killed now): " in run.stdout and f"sleep {mark}" in run.stdout
    assert "ERROR at teardown of test_leaks" in run.stdout and "2 passed, 1 error" in run.stdout
    running = [p for p in Path("/proc").glob("[0-9]*/cmdline") if mark.encode() in _read(p)]
    assert not running, "the guard ended the process it found"


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""
