"""Headless runs of the whole default cluster, as `nslab up --headless` runs them."""

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lab.events import read_events
from lab.run.nstables import TABLES, merge_tables

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
            last_tables[e["node"]] = merge_tables(last_tables.get(e["node"], {}), e)
    topics = events[0]["topics"]
    for node in ("ns-0", "ns-1"):
        tables = last_tables[node]
        assert set(tables["brokerAddrTable"]) == {"broker-a", "broker-b"}
        assert tables["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"}
        assert set(topics) <= set(tables["topicQueueTable"])
        assert tables["clusterAddrTable"] == {"DefaultCluster": ["broker-a", "broker-b"]}


def test_an_ns_tables_record_carries_the_rows_that_changed_and_only_those(sim_runs):
    tables, carried = {}, Counter()
    for e in read_events(sim_runs["a"]):
        if e["kind"] == "node.start" and e["role"] == "nameserver":
            tables.pop(e["node"], None)
        if e["kind"] != "ns.tables":
            continue
        if e["node"] not in tables:
            assert [t for t in TABLES if t in e] == list(TABLES), "a NameServer's first record has all five"
        else:
            held = tables[e["node"]]
            assert not [t for t in TABLES if t in e] and (e.get("set") or e.get("del")), "rows only, never none"
            for table, rows in e.get("set", {}).items():
                for key, row in rows.items():
                    if table == "topicQueueTable":
                        assert all(held[table].get(key, {}).get(b) != q for b, q in row.items()), "a row unchanged"
                    elif table == "clusterAddrTable":
                        assert not set(row) & set(held[table].get(key, [])), "a name it had"
                    else:
                        assert held[table].get(key) != row, "a row unchanged"
            carried[tuple(sorted({*e.get("set", {}), *e.get("del", {})}))] += 1
        tables[e["node"]] = merge_tables(tables.get(e["node"], {}), e)
    # a master's heartbeat with a new dataVersion changes its brokerLiveTable row alone
    assert carried[("brokerLiveTable",)], carried


def test_route_polls_that_change_nothing_are_counted_and_every_fetch_is_accounted_for(sim_runs):
    events = list(read_events(sim_runs["a"]))
    topics = events[0]["topics"]
    clients = [n for n, role in events[0]["nodes"].items() if role in ("producer", "consumer")]
    rounds = [e for e in events if e["kind"] == "client.route_poll"]
    # every client polls every topic every 30 s: 2 minutes make at least 4 rounds each
    assert {c: sum(r["node"] == c for r in rounds) >= 4 for c in clients} == {c: True for c in clients}
    consumers = {n for n, role in events[0]["nodes"].items() if role == "consumer"}
    # a consumer polls its group's %RETRY% topic too (copySubscription): the one group's
    assert all(r["topics"] == len(topics) + (r["node"] in consumers) and 0 <= r["unchanged"] <= r["topics"]
               and r["began"] <= r["t"] for r in rounds)
    fetches = [e for e in events if e["kind"] == "client.route"]
    retry, = {e["topic"] for e in fetches if e["topic"].startswith("%RETRY%")}
    first = {(e["node"], e["topic"]) for e in fetches}
    assert first == {(c, t) for c in clients for t in topics} | {(c, retry) for c in consumers}, \
        "every topic's first fetch has its own record"
    counted = sum(r["unchanged"] for r in rounds)
    assert counted > 3 * len(fetches), "a quiet cluster's polls are mostly counted, not recorded"
    # The NameServers' side of the same fetches: ns.route for a new answer only, ns.routes counts all.
    answered = sum(1 for e in fetches if "code" in e) + counted
    reports = [e for e in events if e["kind"] == "ns.routes"]
    queries = sum(e["queries"] for e in reports)
    assert all(e["unchanged"] + e["not_found"] <= e["queries"] for e in reports)
    # those answered after a NameServer's last scan (10 s) are not reported: at most a round per client
    assert queries <= answered <= queries + len(clients) * len(topics)
    for ns in {e["node"] for e in reports}:  # up to its last report, each query is an ns.route or counted
        last = max(i for i, e in enumerate(events) if e["kind"] == "ns.routes" and e["node"] == ns)
        recorded = sum(1 for e in events[:last] if e["kind"] == "ns.route" and e["node"] == ns)
        mine = [e for e in reports if e["node"] == ns]
        assert recorded == sum(e["queries"] - e["unchanged"] for e in mine)
    assert sum(e["kind"] == "ns.route" for e in events) < queries / 4


def test_clients_start_together_once_the_brokers_are_up(tmp_path):
    """Each client fetches all 100 routes, one after another, before it is up; six of them
    starting one after another would be up six fetch rounds after the brokers, not about one."""
    path = tmp_path / "run.events"
    result = up("--sim", "--seed", "3", "--duration", "5s", "--events", str(path),
                "--set", "cluster.topics=100", "--set", "cluster.consumers=3", "--set", "cluster.producers=3")
    assert result.returncode == 0, result.stderr
    starts = {e["node"]: (e["role"], e["t"]) for e in read_events(path) if e["kind"] == "node.start"}
    brokers_up = max(t for role, t in starts.values() if role == "broker")
    clients_up = sorted(t - brokers_up for role, t in starts.values() if role in ("producer", "consumer"))
    assert len(clients_up) == 6
    assert clients_up[0] >= 100 * 0.002 * 0.9, "a client is up once it has fetched every route"
    assert clients_up[-1] < 2 * clients_up[0], f"clients up {clients_up} s after the brokers"


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


def test_headless_runs_tune_the_collector_for_the_run_and_give_the_process_back(tmp_path, monkeypatch):
    """With CPython's thresholds a large cluster spent a quarter of its time in collections; a
    sweep's worker runs many runs in one process, so each must leave the collector as it found it."""
    import gc

    from lab import cli
    from lab.control import scenarios
    from lab.run import runner

    during = []
    run_cluster = runner.run_cluster

    async def noting(*args, **kwargs):
        during.append((gc.get_threshold(), gc.get_freeze_count() > 0))
        return await run_cluster(*args, **kwargs)

    monkeypatch.setattr(cli, "run_cluster", noting)
    monkeypatch.setattr(scenarios, "run_cluster", noting)
    before = gc.get_threshold(), gc.get_freeze_count()
    assert cli.main(["up", "--headless", "--sim", "--duration", "3s", "--events", str(tmp_path / "up.events")]) == 0
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
    scenarios.run(scenarios.prepare("broker-crash"), runner.RunOptions(sim=True, events_path=tmp_path / "run.events"))
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
    assert during == [((50_000, 20, 20), True)] * 2


def test_a_simulated_run_repeats_in_a_process_whatever_ran_there_before(tmp_path):
    """A sweep's worker and a test session run many runs in one process. Clients share the route
    bodies they decode, and a coasting route poll compares them: when that cache was the module's,
    one that earlier runs left nearly full, emptied mid-run, made a poll go call by call (its
    jitter drawn) where a fresh process's coasted. Now each run has its own (Cluster.decoded)."""
    from lab.config import LabConfig, apply_overrides
    from lab.run import runner

    def run(path, seed=4):
        config = LabConfig()
        apply_overrides(config, ["cluster.topics=200"])
        runner.run(config, runner.RunOptions(sim=True, seed=seed, duration=120.0, events_path=path))
        return path.read_bytes()

    fresh = run(tmp_path / "fresh.events")
    run(tmp_path / "other.events", seed=5)  # other topics' routes, decoded in this process
    assert run(tmp_path / "after.events") == fresh
