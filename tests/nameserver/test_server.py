"""The NameServer over real loopback sockets: housekeeping, expiry, pipelining, bad frames."""

import struct

import pytest
import trio

from nameserver import bodies
from nameserver.client import RemotingError, connect
from nameserver.config import NamesrvConfig
from nameserver.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode, SerializeType, encode
from nameserver.routes import DataVersion, TopicConfig
from nameserver.server import NameServer

HOST = "127.0.0.1"


def register_request(broker_name="broker-a", broker_id=0, port=10911, topics=("TopicTest",),
                     version=DataVersion(1, 1), oneway=False):
    table = {t: TopicConfig(t, 4, 4, 6) for t in topics}
    body = bodies.encode_register_body(table, version, [], SerializeType.JSON)
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, {
        "brokerName": broker_name, "brokerAddr": f"127.0.0.1:{port}", "clusterName": "DefaultCluster",
        "haServerAddr": f"127.0.0.1:{port + 1}", "brokerId": broker_id,
    }, body, oneway=oneway)


def route_request(topic="TopicTest"):
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


class Lab:
    """A NameServer on a free loopback port, with every table change it reports."""

    def __init__(self, nursery, **config):
        self.events: list[tuple[str, dict]] = []
        self.changed = trio.Event()
        self.server = NameServer(NamesrvConfig(**config), listener=self._on_event)
        self.nursery = nursery

    def _on_event(self, kind, fields):
        self.events.append((kind, fields))
        self.changed.set()
        self.changed = trio.Event()

    async def start(self):
        self.host, self.port = await self.nursery.start(self.server.serve_tcp, HOST, 0)
        return self

    async def wait_for(self, kind, **match):
        """Wait until the server has reported an event of this kind with these fields."""
        while True:
            for k, fields in self.events:
                if k == kind and all(fields.get(key) == value for key, value in match.items()):
                    return fields
            await self.changed.wait()

    async def route_code(self, topic="TopicTest"):
        async with connect(self.host, self.port) as client:
            return (await client.invoke(route_request(topic), 3)).code


@pytest.fixture
async def lab(nursery):
    return await Lab(nursery).start()


async def test_a_broker_whose_connection_drops_is_removed_at_once(lab):
    async with connect(lab.host, lab.port) as broker:
        assert (await broker.invoke(register_request(), 3)).code == ResponseCode.SUCCESS
        assert await lab.route_code() == ResponseCode.SUCCESS
    removed = await lab.wait_for("ns.remove", broker_addr="127.0.0.1:10911")
    assert removed["reason"] == "channel_closed"
    assert removed["removed_topics"] == ["TopicTest"]
    assert await lab.route_code() == ResponseCode.TOPIC_NOT_EXIST


async def test_a_silent_broker_expires_after_120s_and_its_connection_is_closed(nursery, mock_clock):
    # Idle close off, so the expiry scan is the path under test (a frozen broker: socket open, silent).
    lab = await Lab(nursery, serverChannelMaxIdleTimeSeconds=0).start()
    async with connect(lab.host, lab.port) as broker:
        await broker.invoke(register_request(), 3)
        mock_clock.jump(100)
        await trio.testing.wait_all_tasks_blocked()
        assert await lab.route_code() == ResponseCode.SUCCESS, "still alive at 100 s"
        mock_clock.jump(31)  # 131 s: past 120 s expiry and at least one 10 s scan
        removed = await lab.wait_for("ns.remove", broker_addr="127.0.0.1:10911")
        assert removed["reason"] == "expired"
        assert await lab.route_code() == ResponseCode.TOPIC_NOT_EXIST
        with pytest.raises(RemotingError, match="closed"):
            await broker.invoke(route_request(), 3)


async def test_a_broker_that_keeps_registering_never_expires(nursery, mock_clock):
    lab = await Lab(nursery, serverChannelMaxIdleTimeSeconds=0).start()
    async with connect(lab.host, lab.port) as broker:
        for _ in range(10):  # 300 s of 30 s heartbeats
            await broker.invoke(register_request(), 3)
            mock_clock.jump(30)
            await trio.testing.wait_all_tasks_blocked()
        assert await lab.route_code() == ResponseCode.SUCCESS
    assert not [f for k, f in lab.events if k == "ns.remove" and f["reason"] == "expired"]


async def test_an_idle_connection_is_closed_and_its_broker_removed(nursery, mock_clock):
    lab = await Lab(nursery, serverChannelMaxIdleTimeSeconds=5).start()
    async with connect(lab.host, lab.port) as broker:
        await broker.invoke(register_request(), 3)
        mock_clock.jump(6)
        removed = await lab.wait_for("ns.remove", broker_addr="127.0.0.1:10911")
        assert removed["reason"] == "channel_closed" and "idle" in removed["detail"]


async def raw_connection(lab):
    return await trio.open_tcp_stream(lab.host, lab.port)


async def read_replies(stream, count):
    decoder, replies = FrameDecoder(), []
    while len(replies) < count:
        data = await stream.receive_some(65536)
        assert data, "server closed the connection"
        replies += decoder.feed(data)
    return replies


async def test_pipelined_requests_are_answered_in_order_and_matched_by_opaque(lab):
    stream = await raw_connection(lab)
    requests = [register_request()] + [route_request(t) for t in ("TopicTest", "Nope") * 20]
    for i, request in enumerate(requests):
        request.opaque = 1000 + i * 7
    await stream.send_all(b"".join(encode(r) for r in requests))  # all in one write
    replies = await read_replies(stream, len(requests))
    assert [r.opaque for r in replies] == [r.opaque for r in requests]
    assert all(r.is_response for r in replies)
    assert [r.code for r in replies[1:3]] == [ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST]
    await stream.aclose()


async def test_a_oneway_request_is_applied_without_a_reply(lab):
    stream = await raw_connection(lab)
    oneway, query = register_request(oneway=True), route_request()
    oneway.opaque, query.opaque = 1, 2
    await stream.send_all(encode(oneway) + encode(query))
    (reply,) = await read_replies(stream, 1)
    assert (reply.opaque, reply.code) == (2, ResponseCode.SUCCESS)
    await stream.aclose()


async def test_a_rocketmq_header_request_is_answered_in_kind(lab):
    stream = await raw_connection(lab)
    request = route_request("Nope")
    request.serialize_type, request.opaque = SerializeType.ROCKETMQ, 42
    frame = encode(request)
    assert frame[4] == 1  # the serialize-type byte on the wire
    await stream.send_all(frame)
    data = await stream.receive_some(65536)
    assert data[4] == 1, "the reply uses the request's serialize type"
    (reply,) = FrameDecoder().feed(data)
    assert (reply.opaque, reply.code) == (42, ResponseCode.TOPIC_NOT_EXIST)
    assert reply.remark.startswith("No topic route info in name server for the topic: Nope")
    await stream.aclose()


async def test_unknown_request_codes_get_request_code_not_supported(lab):
    async with connect(lab.host, lab.port) as client:
        reply = await client.invoke(RemotingCommand.request(904), 3)
    assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert reply.remark == " request type 904 not supported"


@pytest.mark.parametrize("garbage, reason", [
    (struct.pack(">i", 17 * 1024 * 1024), "exceeds"),  # oversized: rejected on its length alone
    (struct.pack(">ii", 10, 50) + b"x" * 6, "bad header length"),
    (struct.pack(">ii", 6, 2) + b"{x", "undecodable JSON"),
    (struct.pack(">ii", 6, (7 << 24) | 2) + b"{}", "unknown serialize type"),
])
async def test_a_malformed_frame_closes_only_that_connection_and_removes_its_broker(lab, garbage, reason):
    async with connect(lab.host, lab.port) as bystander:
        bad = await raw_connection(lab)
        await bad.send_all(encode(register_request()))
        await read_replies(bad, 1)
        await bad.send_all(garbage)
        assert await bad.receive_some(65536) == b"", "the server closed the bad connection"
        removed = await lab.wait_for("ns.remove", broker_addr="127.0.0.1:10911")
        assert reason in removed["detail"]
        reply = await bystander.invoke(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), 3)
        assert reply.code == ResponseCode.SUCCESS, "other connections are unaffected"


async def test_a_slave_registration_learns_its_master_over_the_wire(lab):
    async with connect(lab.host, lab.port) as master, connect(lab.host, lab.port) as slave:
        await master.invoke(register_request(broker_id=0, port=10911), 3)
        reply = await slave.invoke(register_request(broker_id=1, port=10921), 3)
        assert reply.ext_fields == {"masterAddr": "127.0.0.1:10911", "haServerAddr": "127.0.0.1:10912"}
        route = bodies.route_from_wire(bodies.load((await slave.invoke(route_request(), 3)).body, SerializeType.JSON))
        assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}


async def test_opaques_wrap_to_a_java_int_as_rocketmq_does(lab):
    import itertools
    from nameserver.client import open_remoting_client
    stream = await trio.open_tcp_stream(lab.host, lab.port)
    async with open_remoting_client(stream, opaques=itertools.count(2**31 - 1)) as client:
        for expected in (2**31 - 1, -2**31):
            request = route_request()
            request.serialize_type = SerializeType.ROCKETMQ  # int32 opaque on the wire
            reply = await client.invoke(request, 3)
            assert request.opaque == reply.opaque == expected


async def test_idle_connections_close_in_the_order_they_were_opened(nursery, mock_clock, monkeypatch):
    """The idle close walks the connections in the order they came, not in an order memory addresses
    give (a set's): a simulated run must not depend on where objects sit."""
    from nameserver.server import Channel

    closed = []
    close = Channel.close
    monkeypatch.setattr(Channel, "close", lambda self, reason: (closed.append(self.remote_addr), close(self, reason)))
    lab = await Lab(nursery, serverChannelMaxIdleTimeSeconds=5).start()
    opened = []
    async with trio.open_nursery() as clients:
        for i in range(24):
            if i % 3 == 2:  # a short-lived connection between: its memory goes back to be reused
                async with connect(lab.host, lab.port) as passing:
                    await passing.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3)
                await trio.testing.wait_all_tasks_blocked()
            opened.append(await clients.start(_registered_broker, lab, 20000 + 10 * i))
        mock_clock.jump(6)
        for port in range(20000, 20000 + 10 * 24, 10):
            await lab.wait_for("ns.remove", broker_addr=f"127.0.0.1:{port}")
        clients.cancel_scope.cancel()
    assert closed == opened


async def _registered_broker(lab, port, task_status=trio.TASK_STATUS_IGNORED):
    async with connect(lab.host, lab.port) as broker:
        await broker.invoke(register_request(broker_name=f"broker-{port}", port=port), 3)
        host, local_port = broker.stream.socket.getsockname()[:2]
        task_status.started(f"{host}:{local_port}")  # the NameServer's remote_addr for this connection
        await trio.sleep_forever()


async def test_a_frame_fed_a_byte_a_second_does_not_keep_a_connection_past_the_idle_time(nursery, mock_clock):
    """Idle means no whole request read (nameserver/connection.py): bytes of a frame that never
    completes keep nothing open, however steadily they come."""
    mock_clock.rate = 10
    lab = await Lab(nursery, serverChannelMaxIdleTimeSeconds=5).start()
    opened = trio.current_time()  # before the connect: the server may accept before it returns
    stream = await raw_connection(lab)
    with trio.fail_after(30):
        for byte in struct.pack(">i", 4096) + bytes(200):  # a 4 KiB frame, never whole
            try:
                await stream.send_all(bytes([byte]))
            except trio.BrokenResourceError:
                break
            with trio.move_on_after(1):
                if await stream.receive_some(65536) == b"":
                    break
    assert 5 <= trio.current_time() - opened <= 15  # the idle time, and a loaded machine's lag
