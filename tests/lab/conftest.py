"""A small simulated cluster for broker tests: NameServers and brokers on one SimNetwork, a client
channel table to talk to them, and every event the nodes emit."""

from __future__ import annotations

import random

import pytest
import trio
from trio.testing import MockClock

from chaos.network import SimNetwork
from lab.broker.server import Broker
from lab.config import LabConfig
from lab.events import EventLog
from lab.remoting.channels import ChannelTable, Node
from lab.run.cluster import roles_for
from lab.run.networks import sim_network, tcp_network
from lab.broker.store import MessageStore
from nameserver.protocol import RemotingCommand, RequestCode
from nameserver.routes import TopicConfig
from nameserver.server import NameServer

TOPIC = "TopicTest"


class RunningBroker:
    """A broker whose run() can be killed (cancelled) from the outside."""

    def __init__(self, broker: Broker, scope: trio.CancelScope):
        self.broker = broker
        self.scope = scope

    @property
    def address(self) -> str:
        return self.broker.address

    def kill(self) -> None:
        self.scope.cancel()


class Harness:
    def __init__(self, nursery: trio.Nursery, network, config: LabConfig | None = None):
        self.nursery = nursery
        self.network = network
        self.config = config or LabConfig()
        self.events = EventLog(trio.current_time)
        self.records: list[dict] = []
        self.events.subscribers.append(self.records.append)
        self.roles = roles_for(network)  # what the lab runs on this network (lab/run/cluster.py)
        self.nameservers: dict[str, NameServer] = {}
        self.client = self.channel_table("client")

    def node(self, name: str) -> Node:
        return Node(name, self.network, self.events, self.config, random.Random(0))

    def channel_table(self, name: str, on_request=None) -> ChannelTable:
        return self.roles.channel_table(self.node(name), self.nursery, on_request=on_request)

    def kinds(self, kind: str, **match) -> list[dict]:
        return [r for r in self.records if r["kind"] == kind and all(r.get(k) == v for k, v in match.items())]

    async def start_nameserver(self, name: str = "ns-0", port: int | None = None) -> str:
        """`port` None: 9876 on the simulated network, any free one over real sockets (tests run
        side by side on workers)."""
        server = self.roles.name_server()
        if port is None:
            port = 9876 if isinstance(self.network, SimNetwork) else 0
        listener, address = await self.network.listen(name, port)
        await self.nursery.start(server.serve, [listener])
        self.nameservers[address] = server
        return address

    async def start_broker(self, name: str = "broker-a-0", *, broker_name: str = "broker-a", broker_id: int = 0,
                           store: MessageStore | None = None, topics: dict | None = None,
                           **kwargs) -> RunningBroker:
        broker = self.roles.broker(
            self.node(name), broker_name=broker_name, broker_id=broker_id, cluster_name="DefaultCluster",
            namesrv_addrs=list(self.nameservers), store=store if store is not None else MessageStore(),
            topics=topics if topics is not None else {TOPIC: TopicConfig(TOPIC, 4, 4, 6)}, **kwargs)
        scope = trio.CancelScope()

        async def run(task_status=trio.TASK_STATUS_IGNORED):
            with scope:
                await broker.run(task_status=task_status)

        await self.nursery.start(run)
        return RunningBroker(broker, scope)

    async def call(self, address: str, code: int, fields: dict | None = None, body: bytes | None = None,
                   *, timeout: float = 30.0, **kwargs) -> RemotingCommand:
        """A JSON request, as Java and C++ clients send them."""
        return await self.client.invoke(address, RemotingCommand.request(code, fields, body, **kwargs), timeout)

    async def send(self, address: str, body: bytes = b"hello", *, topic: str = TOPIC, queue_id: int = 0,
                   properties: str = "TAGS\u0001tagA", **fields) -> RemotingCommand:
        """SEND_MESSAGE_V2 with its short keys, as the Java client sends it."""
        header = {"a": "pg", "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0, "g": 1000,
                  "h": 0, "i": properties, **fields}
        return await self.call(address, RequestCode.SEND_MESSAGE_V2, header, body)

    async def pull(self, address: str, *, offset: int = 0, queue_id: int = 0, topic: str = TOPIC,
                   sys_flag: int = 0, **fields) -> RemotingCommand:
        header = {"consumerGroup": "cg", "topic": topic, "queueId": queue_id, "queueOffset": offset,
                  "maxMsgNums": 32, "sysFlag": sys_flag, "commitOffset": 0, "suspendTimeoutMillis": 15000,
                  "subVersion": 0, **fields}
        return await self.call(address, RequestCode.PULL_MESSAGE, header)


@pytest.fixture
async def sim(nursery):
    """A simulated lab on a virtual clock that jumps to the next deadline whenever all is idle.
    pytest-trio only uses a clock the test function itself takes: such tests take `autojump_clock`."""
    if not isinstance(trio.lowlevel.current_clock(), MockClock):
        pytest.fail("a test using `sim` must take `autojump_clock` too, or it runs on the real clock")
    return Harness(nursery, sim_network(seed=1))


@pytest.fixture
async def tcp(nursery):
    """The same over real loopback sockets, on the real clock."""
    return Harness(nursery, tcp_network(nursery))
