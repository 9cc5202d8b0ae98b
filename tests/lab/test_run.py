"""Headless runs of the whole default cluster, as `nslab up --headless` runs them."""

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lab.events import read_events

NSLAB = str(Path(sys.executable).with_name("nslab"))


def up(*args, timeout=120):
    return subprocess.run([NSLAB, "up", "--headless", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def sim_runs(tmp_path_factory):
    """Three simulated two-minute runs in separate processes: seed 1 twice, seed 2 once."""
    d = tmp_path_factory.mktemp("runs")
    paths = {}
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        paths[name] = d / f"{name}.events"
        result = up("--sim", "--seed", str(seed), "--duration", "2m", "--events", str(paths[name]))
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"seed={seed} mode=sim")
    return paths


def test_the_same_seed_gives_a_byte_identical_event_log(sim_runs):
    assert sim_runs["a"].read_bytes() == sim_runs["b"].read_bytes()


def test_different_seeds_give_different_runs(sim_runs):
    assert sim_runs["a"].read_bytes() != sim_runs["c"].read_bytes()


def test_the_event_log_tells_the_whole_story(sim_runs):
    events = list(read_events(sim_runs["a"]))
    start = events[0]
    assert start["kind"] == "run.start" and start["seed"] == 1
    assert start["config"]["client"]["pollNameServerInterval"] == 30.0
    kinds = Counter(e["kind"] for e in events)
    for kind in ("ns.register", "ns.tables", "ns.route", "broker.register", "client.route",
                 "producer.send", "producer.ack", "consumer.consume", "ns.remove", "run.end"):
        assert kinds[kind], f"no {kind} event"
    assert all({"t", "node", "kind"} <= e.keys() for e in events)
    assert [e["t"] for e in events] == sorted(e["t"] for e in events), "time never runs backwards"
    # 2 producers x 5 msg/s x 120 s, every one acknowledged and consumed exactly once
    acked = {e["msg_id"] for e in events if e["kind"] == "producer.ack"}
    consumed = Counter(e["msg_id"] for e in events if e["kind"] == "consumer.consume")
    assert len(acked) >= 1150
    assert acked <= set(consumed), "every acknowledged message is consumed"
    # graceful shutdown: every broker unregistered from every NameServer
    unregistered = {(e["node"], e["broker_addr"]) for e in events
                    if e["kind"] == "ns.remove" and e["reason"] == "unregistered"}
    assert len(unregistered) == 2 * 4


def test_every_nameserver_holds_the_whole_cluster(sim_runs):
    events = list(read_events(sim_runs["a"]))
    last_tables = {}
    for e in events:
        if e["kind"] == "ns.tables" and e["t"] < 100:
            last_tables[e["node"]] = e
    topics = events[0]["topics"]
    for node in ("ns-0", "ns-1"):
        tables = last_tables[node]
        assert set(tables["brokerAddrTable"]) == {"broker-a", "broker-b"}
        assert tables["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"}
        assert set(topics) <= set(tables["topicQueueTable"])
        assert tables["clusterAddrTable"] == {"DefaultCluster": ["broker-a", "broker-b"]}


def test_socket_mode_prints_namesrv_addr_first_and_runs_real_sockets(tmp_path):
    events = tmp_path / "socket.events"
    result = up("--duration", "3s", "--seed", "5", "--events", str(events))
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("NAMESRV_ADDR=127.0.0.1:") and first.count(";") == 1
    kinds = Counter(e["kind"] for e in read_events(events))
    assert kinds["producer.ack"] > 0 and kinds["consumer.consume"] > 0


def test_a_bad_config_is_a_clear_error(tmp_path):
    config = tmp_path / "lab.toml"
    config.write_text('[cluster]\nnameservers = 2\n\n[client]\npollNameServerInteval = "10s"\n')
    result = up("--sim", "--config", str(config))
    assert result.returncode == 2
    assert f"{config}:5: [client] pollNameServerInteval" in result.stderr
    assert "unknown key" in result.stderr
    result = up("--sim", "--set", "producer.sendMsgTimeout=soon")
    assert result.returncode == 2 and "--set producer.sendMsgTimeout=soon" in result.stderr
