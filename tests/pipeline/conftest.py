"""One SparkSession for the whole pipeline suite (Spark's start dominates its time), and three
hand-made event logs whose metrics are known by construction (docs/pipeline.md defines them)."""

from __future__ import annotations

import msgpack
import pytest

from lab.pipeline import spark as spark_setup

A, B = "127.0.0.1:10911", "127.0.0.1:11011"
POLL10 = {"client.pollNameServerInterval": "10s"}
POLL30 = {"client.pollNameServerInterval": "30s"}


@pytest.fixture(scope="session")
def spark():
    session = spark_setup.build("local[2]", {"spark.sql.shuffle.partitions": "2",
                                             "spark.default.parallelism": "2"})
    yield session
    session.stop()


class Log:
    """Records in order, written as msgpack the way lab.events.EventLog writes them."""

    def __init__(self, scenario: str, seed: int, grid: dict, nodes: dict, grid_index: int | None = None):
        self.records: list[dict] = []
        self.add(0.0, "lab", "run.start", schema=1, seed=seed, scenario=scenario, grid=grid, nodes=nodes,
                 config={"producer": {"rate": 5.0}}, **({} if grid_index is None else {"grid_index": grid_index}))
        for name, role in nodes.items():
            if role == "nameserver":
                self.add(0.0, name, "node.start", role="nameserver", address=None)

    def add(self, t: float, node: str, kind: str, **fields) -> "Log":
        self.records.append({"t": t, "node": node, "kind": kind, **fields})
        return self

    def broker(self, t: float, node: str, address: str, name: str) -> "Log":
        return self.add(t, node, "broker.start", address=address, broker_name=name, broker_id=0, cluster="c")

    def tables(self, t: float, ns: str, *broker_names: str) -> "Log":
        return self.add(t, ns, "ns.tables",
                        topicQueueTable={"T": {b: [4, 4, 6, 0] for b in broker_names}} if broker_names else {},
                        brokerAddrTable={b: {"cluster": "c", "brokerAddrs": {"0": f"{b}:1"}} for b in broker_names},
                        clusterAddrTable={}, brokerLiveTable={}, filterServerTable={})

    def register(self, t: float, ns: str, addr: str, *listed: str) -> "Log":
        self.add(t, ns, "ns.register", broker_addr=addr, first=True)
        return self.tables(t, ns, *listed)

    def remove(self, t: float, ns: str, addr: str, reason: str, *listed: str) -> "Log":
        self.add(t, ns, "ns.remove", broker_addr=addr, reason=reason)
        return self.tables(t, ns, *listed)

    def send(self, t: float, msg: str, broker: str, attempt: int = 1, result: str = "ok", latency: float = 0.0):
        return self.add(t + latency, "producer-0", "producer.send", msg_id=msg, broker=broker, attempt=attempt,
                        result=result, latency=latency)

    def message(self, t: float, msg: str, broker: str, consumed: int = 1, attempt: int = 1) -> "Log":
        """A message sent, acked and consumed `consumed` times."""
        self.send(t, msg, broker, attempt).add(t, "producer-0", "producer.ack", msg_id=msg, broker=broker)
        for _ in range(consumed):
            self.add(t + 0.1, "consumer-0", "consumer.consume", msg_id=msg, broker=broker)
        return self

    def fault(self, t: float, verb: str, *nodes: str, groups=None) -> "Log":
        fields = {"nodes": list(nodes)} if nodes else {}
        return self.add(t, "lab", "chaos.fault", source="scenario", verb=verb,
                        **fields, **({"groups": groups, "one_way": False} if groups else {}))

    def check(self, t: float, name: str, ok: bool | None, detail: str) -> "Log":
        """An expectation decided, as lab/control/scenarios.py records it."""
        status = {True: "ok", False: "failed", None: "unjudged"}[ok]
        return self.add(t, "lab", "check.result", name=name, ok=ok, status=status, detail=detail)

    def bytes(self) -> bytes:
        return b"".join(msgpack.packb(r) for r in self.records)

    def write(self, path, *, torn: bool = False) -> None:
        data = self.bytes()
        if torn:  # a run killed mid-write: half a record at the end
            data += msgpack.packb({"t": 99.0, "node": "lab", "kind": "run.end"})[:5]
        path.write_bytes(data)


NODES = {"ns-0": "nameserver", "ns-1": "nameserver", "broker-a-0": "broker", "broker-b-0": "broker",
         "producer-0": "producer", "consumer-0": "consumer"}


def crash_log() -> Log:
    """A killed broker: ns-0 drops it at once, ns-1 after 3 s; the producer keeps choosing it for
    2.5 s; one duplicate, one lost, one failed message; a false removal of broker-b."""
    log = Log("handmade", 1, POLL10, NODES)
    log.broker(0, "broker-a-0", A, "broker-a").broker(0, "broker-b-0", B, "broker-b")
    for ns in ("ns-0", "ns-1"):
        log.add(0.1, ns, "ns.register", broker_addr=A).register(0.1, ns, B, "broker-a", "broker-b")
    log.message(1.0, "m1", "broker-a").message(2.0, "m2", "broker-b", consumed=2).message(3.0, "m3", "broker-a", 0)
    log.fault(4.0, "kill", "broker-a-0").add(4.0, "broker-a-0", "node.stop", state="killed")
    log.remove(4.0, "ns-0", A, "channel_closed", "broker-b")
    log.send(5.0, "m4", "broker-a", result="RemotingConnectException").message(5.0, "m4", "broker-b", attempt=2)
    log.send(6.5, "m5", "broker-a", result="RemotingConnectException")
    log.send(6.6, "m5", "broker-b", 2, "RemotingTimeoutException").send(6.7, "m5", "broker-b", 3, "NO_PERMISSION")
    log.add(6.7, "producer-0", "producer.failed", msg_id="m5", attempts=3, error="x")
    log.remove(7.0, "ns-1", A, "expired", "broker-b")
    log.message(8.0, "m6", "broker-b")
    log.fault(9.0, "restart", "broker-a-0").broker(9.0, "broker-a-0", A, "broker-a")
    log.register(9.5, "ns-0", A, "broker-a", "broker-b").register(9.5, "ns-1", A, "broker-a", "broker-b")
    log.message(10.0, "m7", "broker-a")
    log.remove(11.0, "ns-1", B, "expired", "broker-a").register(11.5, "ns-1", B, "broker-a", "broker-b")
    log.add(12.0, "ns-0", "node.stop", state="stopped").add(12.0, "ns-1", "node.stop", state="stopped")
    return log.add(12.0, "lab", "run.end")  # the shutdown stops every NameServer: no outage


def outage_log() -> Log:
    """Every NameServer down 2 s → 5 s: a broker registers 2 s and a route comes 3.5 s after; then
    a freeze nobody undoes, so the log (torn) ends with the broker still listed."""
    log = Log("handmade", 2, POLL10, {k: v for k, v in NODES.items() if k != "broker-b-0"})
    log.broker(0, "broker-a-0", A, "broker-a")
    log.register(0.5, "ns-0", A, "broker-a").register(0.5, "ns-1", A, "broker-a")
    log.message(1.0, "m1", "broker-a")
    log.fault(2.0, "ns-down", "all")
    log.add(2.0, "ns-0", "node.stop", state="killed").add(2.0, "ns-1", "node.stop", state="killed")
    log.fault(5.0, "ns-up", "all").add(5.0, "ns-0", "node.start", role="nameserver")
    log.add(5.0, "ns-1", "node.start", role="nameserver")
    log.add(6.0, "producer-0", "client.route", source="cache", ok=False, code=17)
    log.register(7.0, "ns-0", A, "broker-a").register(7.5, "ns-1", A, "broker-a")
    log.add(8.5, "producer-0", "client.route", source="nameserver", ok=True, code=0)
    log.fault(9.0, "freeze", "broker-a-0")
    log.send(10.0, "m2", "broker-a", result="RemotingTimeoutException", latency=3.0)
    return log.add(13.0, "producer-0", "producer.failed", msg_id="m2", attempts=1, error="timeout")


def partition_log() -> Log:
    """broker-a-0 cut off from ns-0 only: ns-0 expires it after 2 s, ns-1 keeps it."""
    log = Log("handmade", 1, POLL30, {k: v for k, v in NODES.items() if k not in ("broker-b-0", "consumer-0")})
    log.broker(0, "broker-a-0", A, "broker-a")
    log.register(0.5, "ns-0", A, "broker-a").register(0.5, "ns-1", A, "broker-a")
    log.fault(1.0, "partition", groups=[["broker-a-0"], ["ns-0"]])
    log.remove(3.0, "ns-0", A, "expired")
    log.fault(6.0, "heal").register(6.0, "ns-0", A, "broker-a")
    return log.add(7.0, "lab", "run.end")


@pytest.fixture(scope="session")
def handmade(tmp_path_factory) -> list:
    """What to give `nslab report`: a directory with two logs (one in a subdirectory) and a stray
    file that is not a log; the third log (torn) named on its own, with a name no search finds; and
    one of the directory's logs named again (read once all the same)."""
    root = tmp_path_factory.mktemp("handmade")
    crash_log().write(root / "crash.events")
    (root / "nested").mkdir()
    partition_log().write(root / "nested" / "partition.events")
    (root / "notes.txt").write_text("not an event log")
    outage_log().write(root / "outage.log", torn=True)
    return [root, root / "outage.log", root / "crash.events"]
