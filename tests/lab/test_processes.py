"""`nslab up --headless --processes`: NameServers and brokers as child processes, driven with
`nslab chaos` from another process: PIDs in status, kill = SIGKILL, freeze = SIGSTOP/SIGCONT,
restart = a new process, an unexpected death reported, nothing left behind."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.events import read_events

NSLAB = str(Path(sys.executable).with_name("nslab"))


def chaos(env, *words):
    return subprocess.run([NSLAB, "chaos", *words], capture_output=True, text=True, env=env, timeout=60)


def rows(env):
    result = chaos(env, "status")
    assert result.returncode == 0, result.stderr
    table = {}
    for line in result.stdout.splitlines()[1:]:
        name, role, state, *rest = line.split()
        pid = next((int(w[4:]) for w in rest if w.startswith("pid=")), None)
        table[name] = (role, state, pid)
    return table


def process_state(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return None


def wait_until(check, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    pytest.fail(f"never: {check.__doc__ or check}")


def test_nodes_run_as_processes_under_live_control(tmp_path):
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
    events = tmp_path / "lab.events"
    proc = subprocess.Popen([NSLAB, "up", "--headless", "--processes", "--duration", "5m", "--events", str(events)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_until(lambda: chaos(env, "status").returncode == 0)
        table = rows(env)
        children = {n: pid for n, (role, _, pid) in table.items() if role in ("nameserver", "broker")}
        assert len(children) == 6 and all(children.values()), table
        assert all(os.getpgid(pid) != os.getpgid(proc.pid) for pid in children.values())  # own groups

        pid = children["broker-b-0"]
        assert "SIGSTOP" in chaos(env, "freeze", "broker-b-0").stdout
        wait_until(lambda: process_state(pid) == "T")
        assert rows(env)["broker-b-0"][1] == "frozen"
        chaos(env, "unfreeze", "broker-b-0")
        wait_until(lambda: process_state(pid) in ("S", "R"))

        pid = children["broker-a-0"]
        assert chaos(env, "kill", "broker-a-0").stdout.strip() == "broker-a-0 killed"
        assert process_state(pid) is None  # reaped: no zombie either
        assert rows(env)["broker-a-0"][:2] == ("broker", "killed")
        chaos(env, "restart", "broker-a-0")
        role, state, new_pid = rows(env)["broker-a-0"]
        assert state == "up" and new_pid not in (None, pid)

        os.kill(children["ns-1"], signal.SIGKILL)  # a death nobody asked for
        wait_until(lambda: rows(env)["ns-1"][1] == "crashed")
        children["broker-a-0"] = new_pid
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        proc.wait(timeout=60)
    assert all(process_state(pid) is None for pid in children.values()), "nothing left behind"
    stops = {e["node"]: e for e in read_events(events) if e["kind"] == "node.stop"}
    assert stops["ns-1"]["state"] == "crashed" and "SIGKILL" in stops["ns-1"]["error"]
