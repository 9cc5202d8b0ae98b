"""A registration flood against a running lab, over real loopback TCP (issue 34, case 7): a thousand
REGISTER_BROKER with distinct broker names on one connection to ns-0 of `nslab up --headless`. Each
`ns.tables` record is bounded by its change (one registration: that broker's rows), the lab's own
brokers stay registered with both NameServers, and the flood's brokers expire in the lab's scan."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgpack
import trio

from lab.events import read_events
from lab.run.nstables import TABLES, merge_tables
from nameserver import bodies
from nameserver.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode, SerializeType, encode
from nameserver.routes import DataVersion, TopicConfig

NSLAB = str(Path(sys.executable).with_name("nslab"))
FLOOD = 1000
ROW_BYTES = 200  # what one row of an ns.tables record takes, at most, with the names used here


def register(i: int) -> RemotingCommand:
    topic = f"FloodTopic{i}"  # its own topic: the lab's clients never route to a flood broker
    body = bodies.encode_register_body({topic: TopicConfig(topic, 4, 4, 6)}, DataVersion(1, 1), [], SerializeType.JSON)
    addr = f"10.9.{i // 250}.{i % 250}:10911"
    command = RemotingCommand.request(RequestCode.REGISTER_BROKER, {
        "brokerName": f"flood-{i}", "brokerAddr": addr, "clusterName": "DefaultCluster", "haServerAddr": addr,
        "brokerId": 0}, body)
    command.opaque = i + 1
    return command


async def flood(host: str, port: int) -> None:
    """Every registration pipelined on one connection, each answered; then the connection is left
    open and silent, as a broker that froze."""
    stream = await trio.open_tcp_stream(host, port)
    decoder, replies = FrameDecoder(), []
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream.send_all, b"".join(encode(register(i)) for i in range(FLOOD)))
            while len(replies) < FLOOD:
                data = await stream.receive_some(1 << 16)
                assert data, "ns-0 closed the flood's connection"
                replies += decoder.feed(data)
    assert {r.code for r in replies} == {ResponseCode.SUCCESS}


def rows(record: dict) -> int:
    """How many rows an ns.tables record carries: those it sets and deletes, and every row of a
    table it carries whole (as records did before schema 4)."""
    count = 0
    for part, tables in [("set", record.get("set", {})), ("del", record.get("del", {})),
                         ("whole", {t: record[t] for t in TABLES if t in record})]:
        for table, changes in tables.items():
            if table in ("topicQueueTable", "clusterAddrTable"):
                count += sum(len(inner) for inner in changes.values())
            else:
                count += len(changes)
    return count


def flood_names(record: dict) -> set[str]:
    """The flood's broker names an ns.tables record carries in brokerAddrTable."""
    names = {*record.get("set", {}).get("brokerAddrTable", {}), *record.get("brokerAddrTable", {})}
    return {n for n in names if n.startswith("flood-")}


def test_a_registration_flood_writes_records_of_its_rows_and_the_labs_brokers_stay(tmp_path):
    events = tmp_path / "flood.events"
    # Speed 6: 140 lab seconds take about 23 s, past the flood brokers' 120 s expiry and a scan.
    lab = subprocess.Popen([NSLAB, "up", "--headless", "--speed", "6", "--duration", "140s", "--events", str(events)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = lab.stdout.readline()
        assert first.startswith("NAMESRV_ADDR="), first + lab.stderr.read()
        host, port = first.strip().partition("=")[2].split(";")[0].rsplit(":", 1)
        trio.run(flood, host, int(port))
        out, err = lab.communicate(timeout=180)
        assert lab.returncode == 0, err
    finally:
        if lab.poll() is None:
            lab.kill()
            lab.wait()

    records = list(read_events(events))
    addresses = {r["address"] for r in records if r["kind"] == "broker.start"}
    shutdown = min(r["t"] for r in records if r["kind"] == "node.stop")  # the run's end: every node stops
    tables: dict[str, dict] = {}
    flood_records = 0
    for r in records:
        if r["kind"] == "node.start" and r["role"] == "nameserver":
            tables.pop(r["node"], None)
        if r["kind"] != "ns.tables":
            continue
        if r["node"] in tables:  # every record but a NameServer's first: rows, bounded by the change
            size = len(msgpack.packb(r))
            assert size <= ROW_BYTES * rows(r) + 100, f"{size} bytes for {rows(r)} rows at t={r['t']}"
            names = flood_names(r)
            if names:  # one registration, one broker's rows
                flood_records += 1
                assert len(names) == 1 and rows(r) == 4, f"a record of {rows(r)} rows, {len(names)} flood brokers"
        tables[r["node"]] = merge_tables(tables.get(r["node"], {}), r)
        if r["t"] < shutdown:
            for ns, held in tables.items():
                view = held["brokerLiveTable"]
                if r["t"] > 40:  # every lab broker registered with each NameServer by then, and stays
                    assert addresses <= view.keys(), f"{ns} lost {addresses - view.keys()} at t={r['t']}"

    assert flood_records == FLOOD
    assert events.stat().st_size < 5 << 20, f"an event log of {events.stat().st_size / 2**20:.1f} MB"
    removed = [r for r in records if r["kind"] == "ns.remove" and r["broker_addr"] in addresses and r["t"] < shutdown]
    assert not removed, removed
    expired = {r["broker_addr"] for r in records if r["kind"] == "ns.remove" and r["node"] == "ns-0"
               and r["broker_addr"].startswith("10.9.")}
    assert len(expired) == FLOOD, "every flood broker expired (or went with its closed connection)"
