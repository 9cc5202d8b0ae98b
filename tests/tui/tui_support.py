"""Helpers for the TUI tests (a module name of its own: tests/nameserver has a conftest too).
Textual's run_test is asyncio and pytest-trio claims only `async def` tests, so every test here is
a plain function running its coroutine with asyncio.run."""

from __future__ import annotations

import asyncio

from lab.config import LabConfig
from lab.run.runner import RunOptions
from lab.tui.app import LabApp
from lab.tui.guest import LiveLab
from lab.tui.replay import Replay

NAMESERVERS = {"ns-0": "127.0.0.1:9876", "ns-1": "127.0.0.1:9877", "ns-2": "127.0.0.1:9878"}
BROKERS = {"broker-a-0": "127.0.0.1:10911", "broker-b-0": "127.0.0.1:11011"}
TOPICS = ["TopicOrder", "TopicPay"]
PARTITION_AT, EXPIRED_AT = 40.0, 160.0


def run_app(app: LabApp, body, size=(100, 30)) -> None:
    """Run `body(pilot)` in the app; a live lab is always stopped before the loop closes."""
    async def main():
        async with app.run_test(size=size, notifications=True) as pilot:
            try:
                await body(pilot)
            finally:
                await app.source.stop()

    asyncio.run(main())


async def wait_until(pilot, predicate, what: str, timeout: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await pilot.pause(0.05)


async def started(pilot) -> None:
    model = pilot.app.source.model
    await wait_until(pilot, lambda: model.nodes and all(v.state == "up" for v in model.nodes.values()),
                     "every node is up")


def live_app(play=None, **options) -> LabApp:
    """The default cluster, simulated, at the UI's speed; producers send once a second, which keeps
    the process idle enough for Pilot's key presses to settle quickly."""
    config = play.prepared.config if play else LabConfig()
    config.producer.rate = 1.0
    return LabApp(LiveLab(config, RunOptions(**{"sim": True, "seed": 1, "speed": 4.0, **options}), play))


def tables(brokers: list[str]) -> dict:
    """A NameServer's five tables holding `brokers` (master node names)."""
    names = [b.rsplit("-", 1)[0] for b in brokers]
    return {
        "topicQueueTable": {t: {n: [4, 4, 6, 0] for n in names} for t in TOPICS},
        "brokerAddrTable": {n: {"cluster": "DefaultCluster", "brokerAddrs": {"0": BROKERS[b]}}
                            for n, b in zip(names, brokers)},
        "clusterAddrTable": {"DefaultCluster": names} if names else {},
        "brokerLiveTable": {BROKERS[b]: {"dataVersion": [1, 0], "haServerAddr": None} for b in brokers},
        "filterServerTable": {},
    }


def build_log() -> list[dict]:
    """A small run, by hand: three NameServers, two masters, a producer and a consumer. At 40 s a
    partition cuts ns-2 off from broker-a-0; at 160 s ns-2 expires it, and from then on ns-2's
    tables differ from the others'."""
    log: list[dict] = []

    def emit(t, node, kind, **fields):
        log.append({"t": t, "node": node, "kind": kind, **fields})

    roles = {**{n: "nameserver" for n in NAMESERVERS}, **{b: "broker" for b in BROKERS},
             "producer-0": "producer", "consumer-0": "consumer"}
    emit(0.0, "lab", "run.start", schema=1, seed=7, version="0.1.0", mode="sim", speed=None, scenario=None,
         config={"nameserver": {"brokerChannelExpiredTime": 120.0}, "broker": {"brokerPermission": 6}},
         topics=TOPICS, nodes=roles)
    for name, addr in {**NAMESERVERS, **BROKERS}.items():
        if name in BROKERS:
            emit(0.0, name, "broker.start", address=addr, broker_name=name[:-2], broker_id=0,
                 cluster="DefaultCluster", messages=0)
        emit(0.0, name, "node.start", role=roles[name], address=addr)
    for client in ("producer-0", "consumer-0"):
        emit(0.5, client, "client.ns_switch", **{"from": None, "to": NAMESERVERS["ns-0"]}, reason="start", skipped=[])
        emit(0.5, client, "node.start", role=roles[client], address=None)
    emit(0.6, "consumer-0", "consumer.rebalance", topic="TopicOrder", queues=["broker-a:0", "broker-b:0"], consumers=1)
    for t in range(0, 181, 30):
        for broker, addr in BROKERS.items():
            for ns, ns_addr in NAMESERVERS.items():
                cut = broker == "broker-a-0" and ns == "ns-2" and t >= PARTITION_AT
                if not cut:
                    emit(t + 1.0, ns, "ns.register", broker_addr=addr, broker_name=broker[:-2], broker_id=0,
                         cluster="DefaultCluster", data_version=[1, 0], first=t == 0, topics_applied=t == 0)
                emit(t + 1.0, broker, "broker.register", ns=ns_addr, ok=not cut, latency=0.001, trigger="period",
                     **({"error": "RemotingTimeoutException"} if cut else {"code": 0}))
        if t == 0:
            for ns in NAMESERVERS:
                emit(1.0, ns, "ns.tables", **tables(list(BROKERS)))
        for client in ("producer-0", "consumer-0"):
            emit(t + 2.0, client, "client.route", topic="TopicOrder", source="nameserver",
                 ns=NAMESERVERS["ns-0"], ok=True, code=0, changed=t == 0)
        for i in range(5):  # a send per broker each second or so
            broker = "broker-a" if i % 2 == 0 else "broker-b"
            emit(t + 3.0 + i, "producer-0", "producer.send", msg_id=f"M{t}-{i}", topic="TopicOrder", broker=broker,
                 queue=0, attempt=1, result="ok", latency=0.002)
            emit(t + 3.0 + i, "producer-0", "producer.ack", msg_id=f"M{t}-{i}", topic="TopicOrder", broker=broker,
                 queue=0, queue_offset=t // 30 * 3 + i // 2, status="SEND_OK")
            if i < 3:
                emit(t + 3.5 + i, "consumer-0", "consumer.consume", msg_id=f"M{t}-{i}", topic="TopicOrder",
                     broker=broker, queue=0, offset=t // 30 * 3 + i // 2, broker_addr=BROKERS[broker + "-0"])
        if t == 30:
            emit(PARTITION_AT, "lab", "chaos.fault", source="tui", verb="partition",
                 groups=[["ns-2"], ["broker-a-0"]], one_way=False)
            emit(PARTITION_AT + 1, "producer-0", "producer.send", msg_id="MX", topic="TopicOrder", broker="broker-a",
                 queue=0, attempt=1, result="RemotingTimeoutException", latency=3.0)
            emit(PARTITION_AT + 1, "producer-0", "producer.send", msg_id="MX", topic="TopicOrder", broker="broker-b",
                 queue=0, attempt=2, result="ok", latency=0.002)
    emit(EXPIRED_AT, "ns-2", "ns.remove", broker_addr=BROKERS["broker-a-0"], reason="expired", broker_name="broker-a",
         broker_id=0, cluster="DefaultCluster", broker_name_removed=True, removed_topics=[])
    emit(EXPIRED_AT, "ns-2", "ns.tables", **tables(["broker-b-0"]))
    emit(EXPIRED_AT + 5, "lab", "check.result", name="nameservers_agree within=40s", ok=False,
         detail="ns-2 holds another route for TopicOrder")
    log.sort(key=lambda r: r["t"])  # stable: same-time records keep their order
    return log


def replay_app(at: float | None = None) -> LabApp:
    source = Replay(build_log())
    if at is not None:
        source.jump(at)
    return LabApp(source)


def screen_text(app: LabApp) -> str:
    """What the terminal shows now, as plain text."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


LESSON_KILL, LESSON_DRAIN = 60.0, 170.0


def lesson_log() -> list[dict]:
    """build_log's run as the bundled broker-crash scenario played it: its kill from the timeline,
    the timeline's end (run.drain) before the recording's, a check decided on the way."""
    log = build_log()
    log[0] = {**log[0], "scenario": "broker-crash"}
    log += [{"t": LESSON_KILL, "node": "lab", "kind": "chaos.fault", "source": "scenario", "verb": "kill",
             "nodes": ["broker-b-0"]},
            {"t": LESSON_KILL + 0.5, "node": "lab", "kind": "check.result", "name": "broker_removed broker=broker-a-0 within=1s",
             "ok": True, "status": "ok", "detail": "every NameServer dropped it"},
            {"t": LESSON_DRAIN, "node": "lab", "kind": "run.drain", "seconds": 30.0}]
    log.sort(key=lambda r: r["t"])
    return log


def flood_log(faults: int = 12, failures: int = 12_000) -> list[dict]:
    """build_log's run where, after `faults` more chaos actions (13 in all with its partition) and
    broker-b-0's removal, every send fails: far more records than the event log's window holds."""
    log = [r for r in build_log() if r["t"] <= 100]
    for i in range(faults):
        log.append({"t": 100.0 + i, "node": "lab", "kind": "chaos.fault", "source": "tui", "verb": "freeze",
                    "nodes": ["broker-b-0"]})
    log.append({"t": 114.0, "node": "ns-0", "kind": "ns.remove", "broker_addr": BROKERS["broker-b-0"],
                "reason": "channel_closed", "detail": "connection reset by peer", "broker_name": "broker-b",
                "broker_id": 0, "cluster": "DefaultCluster", "broker_name_removed": True, "removed_topics": []})
    for i in range(failures):
        t = 115.0 + i / 100
        log.append({"t": t, "node": f"producer-{i % 2}", "kind": "producer.failed", "msg_id": f"F{i}",
                    "topic": "TopicOrder", "attempts": 3, "error": "RemotingConnectException"})
    return log


def replay_of(records: list[dict], at: float | None = None) -> LabApp:
    source = Replay(records)
    if at is not None:
        source.jump(at)
    return LabApp(source)
