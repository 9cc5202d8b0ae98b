"""A registration flood on a standalone NameServer, over real loopback sockets (issue 34, case 7):
thousands of distinct brokers registered on one connection, then left silent. Their expiry must
not stop the NameServer answering everyone else."""

import time

import trio

from nameserver import bodies
from nameserver.client import connect
from nameserver.config import NamesrvConfig
from nameserver.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode, SerializeType, encode
from nameserver.routes import DataVersion, TopicConfig
from nameserver.server import NameServer

HOST = "127.0.0.1"
FLOOD = 8000


def register(broker_name: str, addr: str, topic: str) -> RemotingCommand:
    body = bodies.encode_register_body({topic: TopicConfig(topic, 4, 4, 6)}, DataVersion(1, 1), [], SerializeType.JSON)
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, {
        "brokerName": broker_name, "brokerAddr": addr, "clusterName": "DefaultCluster",
        "haServerAddr": addr, "brokerId": 0}, body)


async def flood(port: int, count: int) -> trio.SocketStream:
    """`count` registrations with distinct broker names, pipelined on one connection, all answered.
    The connection stays open (and silent): its brokers can only expire."""
    stream = await trio.open_tcp_stream(HOST, port)
    requests = [register(f"flood-{i}", f"10.9.{i // 250}.{i % 250}:10911", f"FloodTopic{i}") for i in range(count)]
    for i, request in enumerate(requests):
        request.opaque = i + 1
    decoder, replies = FrameDecoder(), []
    async with trio.open_nursery() as nursery:  # replies read while sending: neither side blocks
        nursery.start_soon(stream.send_all, b"".join(encode(r) for r in requests))
        while len(replies) < count:
            data = await stream.receive_some(1 << 16)
            assert data, "the NameServer closed the flood's connection"
            replies += decoder.feed(data)
    assert {r.code for r in replies} == {ResponseCode.SUCCESS}
    return stream


async def test_other_connections_are_answered_within_a_second_while_thousands_of_brokers_expire(nursery, mock_clock):
    removed = []
    server = NameServer(NamesrvConfig(serverChannelMaxIdleTimeSeconds=0),
                        listener=lambda kind, fields: kind == "ns.remove" and removed.append(fields))
    _, port = await nursery.start(server.serve_tcp, HOST, 0)
    flooder = await flood(port, FLOOD)
    mock_clock.jump(100)
    async with connect(HOST, port) as broker, connect(HOST, port) as client:
        # A real broker keeps registering; its route must stay answerable.
        assert (await broker.invoke(register("broker-a", "127.0.0.1:10911", "TopicTest"), 3)).code == ResponseCode.SUCCESS
        await trio.testing.wait_all_tasks_blocked()

        mock_clock.jump(31)  # 131 s: the flood's brokers are past the 120 s expiry; the scan is due
        started = time.perf_counter()
        reply = await client.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}), 3)
        waited = time.perf_counter() - started
        await trio.testing.wait_all_tasks_blocked()

        assert reply.code == ResponseCode.SUCCESS
        # The scan closes the flood's connection: its close may remove one of them first, as in 4.9.8.
        assert len(removed) == FLOOD and {r["reason"] for r in removed} <= {"expired", "channel_closed"}
        assert list(server.routes.broker_addr_table) == ["broker-a"]
        assert waited < 1.0, f"a route query waited {waited:.2f} s while {FLOOD} brokers expired"
    await flooder.aclose()
