"""Broker stores outlive a broker's kill, not the run: the temporary run folder goes when the run
ends — at its end, on Ctrl-C, on SIGTERM, with nodes as processes — unless the user named it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

NSLAB = str(Path(sys.executable).with_name("nslab"))


def up(tmp_path, *args) -> subprocess.Popen:
    """`nslab up --headless` in sockets mode, its temporary files in tmp_path/tmp."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "XDG_RUNTIME_DIR": str(tmp_path)}
    return subprocess.Popen([NSLAB, "up", "--headless", "--seed", "3", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def run_folders(tmp_path) -> list[Path]:
    return sorted((tmp_path / "tmp").glob("nslab-*-*"))  # nslab-SEED-xxxx


def wait_for_stores(tmp_path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(folder.glob("*.store") for folder in run_folders(tmp_path)):
            return
        time.sleep(0.1)
    pytest.fail("no broker store was written")


def test_a_run_that_ends_leaves_no_run_folder(tmp_path):
    proc = up(tmp_path, "--duration", "3s")
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    assert run_folders(tmp_path) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("processes", [False, True])
def test_a_stopped_run_leaves_no_run_folder(tmp_path, sig, processes):
    proc = up(tmp_path, *(["--processes"] if processes else []))
    wait_for_stores(tmp_path)
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    assert run_folders(tmp_path) == []


def test_a_named_run_dir_is_printed_and_kept(tmp_path):
    kept = tmp_path / "stores"
    proc = up(tmp_path, "--duration", "3s", "--run-dir", str(kept))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.splitlines()[2] == f"run_dir={kept} (kept)"
    assert sorted(p.name for p in kept.glob("*.store")) == [
        "broker-a-0.store", "broker-a-1.store", "broker-b-0.store", "broker-b-1.store"]
    assert run_folders(tmp_path) == []
