"""Running a small stdlib-only script as another local user (uid 65534), for the tests that show the
lab refuses other users. The suite's own interpreter may be out of that user's reach (a checkout
under a 0700 folder such as `mktemp -d` or a private home), so an interpreter it can run is found
first, or the test skips saying which folder keeps it out."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

OTHER = 65534  # nobody


def _candidates() -> list[str]:
    found = [sys.executable, getattr(sys, "_base_executable", ""), shutil.which("python3") or "",
             "/usr/bin/python3", "/usr/local/bin/python3"]
    return list(dict.fromkeys(c for c in found if c))


def _blocking_folder(path: str) -> Path | None:
    """The first folder along `path` that the other user may not pass through (no x for others)."""
    for reached in (Path(os.path.abspath(path)), Path(os.path.realpath(path))):
        for folder in reversed(reached.parents):
            if not os.stat(folder).st_mode & 0o001:
                return folder
    return None


@functools.cache
def python_for_other_user() -> str:
    """An interpreter uid 65534 can run (with -I: no site folder of ours is read)."""
    if os.geteuid() != 0:
        pytest.skip("acting as another user (uid 65534) needs root: run the suite as root")
    tried = []
    for candidate in _candidates():
        try:
            probe = subprocess.run([candidate, "-I", "-c", "pass"], user=OTHER, group=OTHER,
                                   capture_output=True, timeout=30)
        except OSError as e:
            tried.append(f"{candidate} ({e.strerror})")
            continue
        if probe.returncode == 0:
            return candidate
        tried.append(f"{candidate} (exit {probe.returncode})")
    blocked = _blocking_folder(sys.executable)
    where = f"; {blocked} is closed to other users" if blocked else ""
    pytest.skip(f"uid {OTHER} can run none of these interpreters: {', '.join(tried)}{where}")


def run_as_other_user(code: str, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([python_for_other_user(), "-I", "-c", code, *args], user=OTHER, group=OTHER,
                          capture_output=True, text=True, **kwargs)


def start_as_other_user(code: str, *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([python_for_other_user(), "-I", "-c", code, *args], user=OTHER, group=OTHER,
                            text=True, **kwargs)
