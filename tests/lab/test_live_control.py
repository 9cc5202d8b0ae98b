"""`nslab chaos` against a running `nslab up --headless`, from another process, as a person would."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.events import read_events

NSLAB = str(Path(sys.executable).with_name("nslab"))


@pytest.fixture
def env(tmp_path):
    # A private runtime directory: this test's lab is the only one `nslab chaos` can find.
    return {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}


def chaos(env, *words):
    return subprocess.run([NSLAB, "chaos", *words], capture_output=True, text=True, env=env, timeout=60)


def wait_for_lab(env, proc):
    for _ in range(200):
        result = chaos(env, "status")
        if result.returncode == 0:
            return result
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.1)
    pytest.fail("the lab never answered")


def test_chaos_commands_act_on_the_running_lab(env, tmp_path):
    assert "no running lab found" in chaos(env, "status").stderr
    events = tmp_path / "live.events"
    proc = subprocess.Popen([NSLAB, "up", "--headless", "--speed", "5", "--duration", "5m", "--events", str(events)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        status = wait_for_lab(env, proc)
        assert status.stdout.startswith("NAMESRV_ADDR=127.0.0.1:")
        rows = {line.split()[0]: line.split()[1:] for line in status.stdout.splitlines()[1:]}
        assert set(rows) == {"ns-0", "ns-1", "broker-a-0", "broker-a-1", "broker-b-0", "broker-b-1",
                             "producer-0", "producer-1", "consumer-0", "consumer-1"}
        assert all(state == "up" for _, state, *_ in rows.values())

        assert chaos(env, "kill", "broker-a-0").stdout.strip() == "broker-a-0 killed"
        assert "partitioned" in chaos(env, "partition", "ns-0,broker-b-0", "/", "ns-1").stdout
        status = chaos(env, "status").stdout
        assert "broker-a-0   broker     killed" in status
        assert "cut_off_from=ns-1" in status

        unknown = chaos(env, "kill", "broker-z-9")
        assert unknown.returncode == 2 and "no nameserver or broker or producer or consumer named 'broker-z-9'" in unknown.stderr
        assert "unknown fault 'juggle'" in chaos(env, "juggle").stderr
        assert chaos(env, "--lab", "1", "status").returncode == 2  # no lab with that pid
        assert "heal" in chaos(env, "heal").stdout
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    faults = [e for e in read_events(events) if e["kind"] == "chaos.fault"]
    assert [(f["verb"], f["source"]) for f in faults] == [("kill", "control"), ("partition", "control"),
                                                          ("heal", "control")]
    assert not list(Path(env["XDG_RUNTIME_DIR"], "nslab").iterdir()), "the lab cleans up its socket"
