"""Garbage thrown at a running NameServer never disturbs a well-behaved client on another connection."""

import struct

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nameserver import bodies
from nameserver.client import connect
from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode, SerializeType, encode
from nameserver.routes import DataVersion, TopicConfig
from nameserver.server import NameServer

VALID = encode(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, opaque=5))

chunks = st.one_of(
    st.binary(max_size=64),  # noise
    st.just(VALID),  # a valid frame now and then: the stream must stay byte-exact to survive
    st.integers(0, len(VALID) - 1).map(lambda n: VALID[:n]),  # truncated frame
    st.integers(-2**31, 2**31 - 1).map(lambda n: struct.pack(">i", n)),  # any length, oversized too
    st.tuples(st.integers(4, 200), st.integers(0, 2**32 - 1), st.binary(max_size=200)).map(
        lambda t: struct.pack(">iI", *t[:2]) + t[2]),  # plausible prefix, bad header
)
attack = st.lists(  # one list per hostile connection: (chunk, write it byte by byte?)
    st.lists(st.tuples(chunks, st.booleans()), min_size=1, max_size=8), min_size=1, max_size=4)


async def hostile(host, port, writes):
    try:
        stream = await trio.open_tcp_stream(host, port)
        for chunk, bytewise in writes:
            for piece in ([chunk[i:i + 1] for i in range(len(chunk))] if bytewise else [chunk]):
                await stream.send_all(piece)
        await stream.aclose()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass  # the server closed us first: that is the expected answer to garbage


async def well_behaved(host, port, rounds, failures):
    table = {"TopicTest": TopicConfig("TopicTest", 4, 4, 6)}
    body = bodies.encode_register_body(table, DataVersion(1, 1), [], SerializeType.JSON)
    register = RemotingCommand.request(RequestCode.REGISTER_BROKER, {
        "brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "DefaultCluster",
        "haServerAddr": "127.0.0.1:10912", "brokerId": 0}, body)
    async with connect(host, port) as client:
        await client.invoke(register, 5)
        for _ in range(rounds):
            reply = await client.invoke(
                RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}), 5)
            route = bodies.route_from_wire(bodies.load(reply.body, SerializeType.JSON))
            if reply.code != ResponseCode.SUCCESS or route.broker_datas[0].broker_addrs != {0: "127.0.0.1:10911"}:
                failures.append(reply)
            await trio.sleep(0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attacks=attack)
async def test_garbage_on_other_connections_never_disturbs_a_good_client(attacks):
    server, failures = NameServer(), []
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve_tcp, "127.0.0.1", 0)
        async with trio.open_nursery() as clients:
            clients.start_soon(well_behaved, host, port, 30, failures)
            for writes in attacks:
                clients.start_soon(hostile, host, port, writes)
        # The server is still whole: it accepts a new connection and answers it.
        async with connect(host, port) as late:
            reply = await late.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5)
            assert reply.code == ResponseCode.SUCCESS
        nursery.cancel_scope.cancel()
    assert failures == []
