"""`nslab up --headless --processes`: NameServers and brokers as child processes, driven with
`nslab chaos` from another process: PIDs in status, kill = SIGKILL, freeze = SIGSTOP/SIGCONT,
restart = a new process, an unexpected death reported, nothing left behind."""

import os
import struct
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
        # A request fault on a child's link: the relay in this process cuts its frames.
        dropped = chaos(env, "toxic", "broker-a-0:ns-0", "drop", "code=REGISTER_BROKER", "count=1").stdout
        assert "drop REGISTER_BROKER ×1" in dropped, dropped
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
    acted = [(e["src"], e["dst"], e["request"], e["action"]) for e in read_events(events) if e["kind"] == "chaos.request"]
    assert acted == [("broker-a-0", "ns-0", "REGISTER_BROKER", "drop")], "the restarted broker's first registration"


def test_process_nodes_survive_what_clients_inflict(tmp_path):
    """The fault-isolation sequences against NameServers and brokers running as processes: a held
    pull left by RST, a churn of dying consumers while a producer sends, a frame that is a lone
    surrogate, a killed slave. Every send succeeds and no node crashes."""
    import trio

    from lab.control.churn import churn
    from nameserver.client import connect
    from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode

    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
    events = tmp_path / "lab.events"
    proc = subprocess.Popen([NSLAB, "up", "--headless", "--processes", "--duration", "5m", "--events", str(events),
                             "--set", "cluster.topicNames=ChurnTopic"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        namesrv = proc.stdout.readline().strip().partition("=")[2].split(";")
        wait_until(lambda: chaos(env, "status").returncode == 0)
        addresses = {line.split()[0]: line.split()[3] for line in chaos(env, "status").stdout.splitlines()[1:]}
        master = addresses["broker-a-0"]
        host, _, port = master.rpartition(":")

        def send_request(i, queue_id):
            return RemotingCommand.request(RequestCode.SEND_MESSAGE, {
                "producerGroup": "pg", "topic": "ChurnTopic", "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
                "queueId": queue_id, "sysFlag": 0, "bornTimestamp": 1, "flag": 0}, b"m%d" % i)

        async def inflict():
            codes = []
            async with connect(host, int(port)) as producer:
                async def produce(stop):
                    i = 0
                    while not stop.is_set() or i < 50:  # all through the churn, and 50 on a slow machine
                        codes.append((await producer.invoke(send_request(i, i % 4), 5)).code)
                        i += 1
                        await trio.sleep(0.01)

                stop = trio.Event()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(produce, stop)
                    stats = await churn(master, clients=60, concurrency=15, seed=3, topics=["ChurnTopic"], queues=4,
                                        ha_share=0.2)
                    stop.set()
                assert stats.clients == 60 and not stats.errors, stats.errors[:3]
                ns_host, _, ns_port = namesrv[0].rpartition(":")
                hostile = await trio.open_tcp_stream(ns_host, int(ns_port))
                header = b'{"code":105,"extFields":{"topic":"\\ud800"},"flag":0,"language":"JAVA","opaque":9,"version":401}'
                await hostile.send_all(struct.pack(">ii", 4 + len(header), len(header)) + header)
                assert b'"code":17' in await hostile.receive_some(65536)
                async with connect(ns_host, int(ns_port)) as other:
                    route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "ChurnTopic"})
                    assert (await other.invoke(route, 5)).code == ResponseCode.SUCCESS
                await trio.to_thread.run_sync(lambda: chaos(env, "kill", "broker-a-1"))
                for i in range(8):
                    codes.append((await producer.invoke(send_request(i, i % 4), 5)).code)
                for group in range(3):  # every churn client left its group
                    listed = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                     {"consumerGroup": f"churn-{group}"})
                    assert (await producer.invoke(listed, 5)).code == ResponseCode.SYSTEM_ERROR
            assert len(codes) > 50 and set(codes) == {ResponseCode.SUCCESS}

        trio.run(inflict)
        assert "crashed" not in chaos(env, "status").stdout
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    stops = [e for e in read_events(events) if e["kind"] == "node.stop" and e["state"] == "crashed"]
    assert stops == []


def test_process_nodes_keep_the_labs_speed(tmp_path):
    """`--processes --speed 4` with no faults behaves as the same lab in one process: brokers in
    their own processes register every 30 lab s, masters close no more consumer connections (none
    on a quiet machine) and the consumers rebalance as often. (On their own clock the children ran
    4x slower than the clients: held pulls outlived the clients' timeouts, connections closed, the
    group rebalanced again and again and consumed messages twice.)"""

    def up(name, *flags):
        env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / name)}
        (tmp_path / name).mkdir(mode=0o700)
        return subprocess.Popen([NSLAB, "up", "--headless", *flags, "--speed", "4", "--duration", "60s", "--seed", "7",
                                 "--events", str(tmp_path / f"{name}.events")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)

    runs = {"processes": up("processes", "--processes"), "in_process": up("in_process")}  # side by side: half the wait
    try:
        for name, proc in runs.items():
            _, stderr = proc.communicate(timeout=60)
            assert proc.returncode == 0, (name, stderr)
    finally:
        for proc in runs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    processes, in_process = (list(read_events(tmp_path / f"{name}.events")) for name in runs)
    for events in (processes, in_process):
        assert [e for e in events if e["kind"] == "node.stop" and e["state"] == "crashed"] == []

    def rebalances(events):
        return sum(e["kind"] == "consumer.rebalance" for e in events)

    def closes(events):
        return sum(e["kind"] == "broker.consumers" and e["change"] == "closed" for e in events)

    registered = {}
    for e in processes:
        if e["kind"] == "broker.register" and e["trigger"] == "period":
            registered.setdefault((e["node"], e["ns"]), []).append(e["t"])
    gaps = [b - a for times in registered.values() for a, b in zip(times, times[1:])]
    # brokerRegisterPeriod in lab seconds (a loaded machine's second of lag is 4 of them); on their
    # own clock, 120
    assert gaps and all(20 < gap < 40 for gap in gaps), registered
    # The same lab in one process can close one too when the machine is loaded: only more would be wrong.
    assert closes(processes) <= closes(in_process), (closes(processes), closes(in_process))
    assert rebalances(processes) <= rebalances(in_process) + 2, (rebalances(processes), rebalances(in_process))


def test_a_node_process_reads_the_labs_clock_through_a_freeze():
    """A child started 20 lab s into a speed-8 run reads the parent's time, not its own; a sleep
    that falls due while it is SIGSTOPped ends as soon as it is resumed, on the lab's time."""
    import json

    import trio
    from trio.testing import MockClock

    from lab.run.timeline import timeline

    script = ("import json, sys, trio\n"
              "from lab.run.timeline import LabClock\n"
              "async def main():\n"
              "    print(trio.current_time(), flush=True)\n"
              "    await trio.sleep(4)\n"  # half a real second
              "    print(trio.current_time(), flush=True)\n"
              "trio.run(main, clock=LabClock(json.loads(sys.argv[1])))\n")

    async def main():
        await trio.sleep(20)
        child = subprocess.Popen([sys.executable, "-c", script, json.dumps(timeline())], stdout=subprocess.PIPE,
                                 text=True)
        try:
            started = float(child.stdout.readline())
            assert -0.01 < trio.current_time() - started < 2, (started, trio.current_time())
            os.kill(child.pid, signal.SIGSTOP)
            time.sleep(1.5)  # 12 lab s: its sleep falls due meanwhile
            os.kill(child.pid, signal.SIGCONT)
            woke = float(child.stdout.readline())
            assert -0.01 < trio.current_time() - woke < 2, (woke, trio.current_time())  # at SIGCONT
        finally:
            child.kill()
            child.wait()

    trio.run(main, clock=MockClock(rate=8))
