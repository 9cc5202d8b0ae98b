"""Churn over real sockets: consumers that heartbeat in groups, hold long-polls (and would-be slaves
that hold HA transfers) and die abruptly in random order while a producer sends. No send fails because
of another connection, and nothing held outlives its connection."""

from __future__ import annotations

import trio

from lab.run.networks import tcp_network
from lab.broker.server import Broker
from lab.control.churn import churn
from lab.config import LabConfig
from lab.events import EventLog
from lab.remoting.channels import Node
from lab.broker.store import MessageStore
from nameserver.client import connect
from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode
from nameserver.routes import TopicConfig
from nameserver.server import NameServer

TOPIC = "TopicTest"


async def produce(address: str, stop: trio.Event, results: list[int]) -> None:
    """SEND_MESSAGE every few milliseconds to every queue in turn, until `stop`."""
    host, _, port = address.rpartition(":")
    async with connect(host, int(port)) as producer:
        i = 0
        while not stop.is_set():
            reply = await producer.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE, {
                "producerGroup": "pg", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
                "queueId": i % 4, "sysFlag": 0, "bornTimestamp": 1, "flag": 0}, b"m%d" % i), 5)
            results.append(reply.code)
            i += 1
            await trio.sleep(0.005)


async def test_churning_clients_never_fail_a_producer_and_leave_nothing_held():
    async with trio.open_nursery() as nursery:
        network = tcp_network(nursery)
        events = EventLog(trio.current_time)
        records = []
        events.subscribers.append(records.append)
        ns_listener, ns_address = await network.listen("ns-0")
        await nursery.start(NameServer().serve, [ns_listener])
        brokers = {}
        for name, broker_id in (("broker-a-0", 0), ("broker-a-1", 1)):
            brokers[name] = Broker(Node(name, network, events, LabConfig()), broker_name="broker-a",
                                   broker_id=broker_id, cluster_name="DefaultCluster", namesrv_addrs=[ns_address],
                                   store=MessageStore(), topics={TOPIC: TopicConfig(TOPIC, 4, 4, 6)})
            await nursery.start(brokers[name].run)
        master = brokers["broker-a-0"]
        with trio.fail_after(5):
            while master.hold_service.held != 1:  # the slave, up to date, is held
                await trio.sleep(0.01)
        baseline = len(master.client_channels)  # the slave's connection

        stop, results = trio.Event(), []
        nursery.start_soon(produce, master.address, stop, results)
        stats = await churn(master.address, clients=120, concurrency=20, seed=7, topics=[TOPIC], queues=4,
                            ha_share=0.2)
        stop.set()
        await trio.sleep(0.1)

        assert stats.clients == 120 and stats.resets > 50 and stats.closes > 10 and stats.transfers > 10
        assert stats.pulls_held > 120 and not stats.errors, stats.errors[:5]
        assert len(results) > 50 and set(results) == {ResponseCode.SUCCESS}
        with trio.fail_after(5):  # nothing held for a churn client, no churn client still a member
            while len(master.client_channels) != baseline or master.hold_service.held != 1:
                await trio.sleep(0.01)
        assert master.consumer_manager.consumer_table == {}
        changes = [r for r in records if r["kind"] == "broker.consumers"]
        assert {r["change"] for r in changes} == {"register", "closed"}
        assert not [r for r in records if r["kind"] in ("node.stop", "broker.connection_error")]
        # The slave kept up through it all.
        assert brokers["broker-a-1"].store.max_physical_offset == master.store.max_physical_offset
        nursery.cancel_scope.cancel()
