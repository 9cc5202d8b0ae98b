"""Faults on one request code, simulated and over real sockets (the relay cuts frames): the same
fault means the same thing, and every other code on the same link passes untouched."""

from __future__ import annotations

import random

import pytest
import trio

from chaos.faults import FaultError
from chaos.links import Links
from chaos.network import SimNetwork
from chaos.request_faults import RequestFault, RequestFaults
from lab.control.actions import vocabulary
from lab.remoting.wire_codec import REMOTING, FrameCutter, rewrite_keys
from lab.run.networks import sim_network, tcp_network
from nameserver.client import RemotingClient, RemotingTimeoutError
from nameserver.connection import Connection
from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode, SerializeType
from nameserver.protocol.frames import encode

ROUTE, CLUSTER = RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.GET_BROKER_CLUSTER_INFO


@pytest.fixture(params=["sim", "tcp"])
async def net(request, nursery):
    network = sim_network(Links(), seed=7) if request.param == "sim" else tcp_network(nursery, Links(), seed=7)
    network.recorded = []
    network.on_request_fault = network.recorded.append
    return network


def what_it_is(net, stream, *, timers: bool = False) -> dict:
    """What the lab says of a stream it builds a connection on: on the simulated network its ends
    carry commands whole and name their peer (and the client's calls time out by its timers)."""
    if not isinstance(net, SimNetwork):
        return {}
    said = dict(objects=True, remote_addr=stream.remote_addr)
    return {**said, "call_at": stream.call_at} if timers else said


class Server:
    """A remoting server that answers every request SUCCESS, noting the codes it handled."""

    def __init__(self):
        self.handled: list[int] = []
        self.ended: list[str] = []

    async def start(self, net, nursery) -> str:
        listener, address = await net.listen("server", 0)

        async def serve(stream):
            def handle(cmd: RemotingCommand):
                self.handled.append(cmd.code)
                return cmd.response(ResponseCode.SUCCESS, f"handled {cmd.code}")
            self.ended.append(await Connection(stream, **what_it_is(net, stream)).serve(handle))
            await trio.aclose_forcefully(stream)

        nursery.start_soon(trio.serve_listeners, serve, [listener])
        return address


async def client_of(net, nursery, address) -> RemotingClient:
    stream = await net.connect("client", address)
    client = RemotingClient(stream, **what_it_is(net, stream, timers=True))
    nursery.start_soon(client.run)
    return client


async def call(client: RemotingClient, code: int, timeout: float = 1.0) -> RemotingCommand:
    return await client.invoke(RemotingCommand.request(code, {"topic": "T"}), timeout)


async def setup(net, nursery, fault: RequestFault, src="client", dst="server"):
    server = Server()
    address = await server.start(net, nursery)
    client = await client_of(net, nursery, address)
    assert (await call(client, ROUTE)).code == ResponseCode.SUCCESS  # before the fault: untouched
    net.add_request_fault(src, dst, fault)
    return server, client


async def test_a_dropped_request_times_out_while_other_codes_pass(net, nursery):
    server, client = await setup(net, nursery, RequestFault("drop", ROUTE))
    assert (await call(client, CLUSTER)).remark == f"handled {int(CLUSTER)}"
    with pytest.raises(RemotingTimeoutError):
        await call(client, ROUTE, timeout=0.5)
    assert server.handled == [ROUTE, CLUSTER]  # the dropped one never arrived
    assert [(r["src"], r["dst"], r["request"], r["action"], r["reply"]) for r in net.recorded] == \
        [("client", "server", "GET_ROUTEINFO_BY_TOPIC", "drop", False)]


async def test_an_answer_comes_from_the_link_instead_of_the_server(net, nursery):
    server, client = await setup(net, nursery, RequestFault("answer", ROUTE, answer=ResponseCode.SYSTEM_BUSY,
                                                            remark="[TIMEOUT_CLEAN_QUEUE]broker busy"))
    reply = await call(client, ROUTE)
    assert (reply.code, reply.remark) == (ResponseCode.SYSTEM_BUSY, "[TIMEOUT_CLEAN_QUEUE]broker busy")
    assert (await call(client, CLUSTER)).code == ResponseCode.SUCCESS
    assert server.handled == [ROUTE, CLUSTER]


async def test_a_delayed_reply_arrives_late_and_a_dropped_reply_never(net, nursery):
    server, client = await setup(net, nursery, RequestFault("reply", ROUTE, delay=0.6))
    started = trio.current_time()
    assert (await call(client, ROUTE, timeout=2.0)).code == ResponseCode.SUCCESS
    assert trio.current_time() - started >= 0.6
    with pytest.raises(RemotingTimeoutError):  # past the caller's timeout it is as good as lost
        await call(client, ROUTE, timeout=0.3)
    net.heal()
    net.add_request_fault("client", "server", RequestFault("drop-reply", ROUTE))
    with pytest.raises(RemotingTimeoutError):
        await call(client, ROUTE, timeout=0.5)
    assert server.handled.count(ROUTE) == 4  # each one was handled: only the reply was touched
    started = trio.current_time()
    assert (await call(client, CLUSTER)).code == ResponseCode.SUCCESS
    assert trio.current_time() - started < 0.3
    assert [r["reply"] for r in net.recorded] == [True, True, True]


async def test_a_delayed_request_and_a_duplicated_one(net, nursery):
    server, client = await setup(net, nursery, RequestFault("delay", ROUTE, delay=0.5))
    started = trio.current_time()
    assert (await call(client, ROUTE)).code == ResponseCode.SUCCESS
    assert trio.current_time() - started >= 0.5
    net.heal()
    net.add_request_fault("client", "server", RequestFault("duplicate", CLUSTER))
    assert (await call(client, CLUSTER)).code == ResponseCode.SUCCESS
    assert (await call(client, ROUTE)).code == ResponseCode.SUCCESS  # the extra reply went unclaimed
    assert server.handled == [ROUTE, ROUTE, CLUSTER, CLUSTER, ROUTE]


async def test_a_fault_limited_by_count_spends_itself(net, nursery):
    server, client = await setup(net, nursery, RequestFault("drop", ROUTE, count=1))
    with pytest.raises(RemotingTimeoutError):
        await call(client, ROUTE, timeout=0.5)
    client = await client_of(net, nursery, net.address_of["server"])  # a timeout may close the channel
    assert (await call(client, ROUTE)).code == ResponseCode.SUCCESS


async def test_a_fault_on_a_node_acts_on_its_requests_from_any_peer(net, nursery):
    server, client = await setup(net, nursery, RequestFault("drop", ROUTE), src="*", dst="server")
    with pytest.raises(RemotingTimeoutError):
        await call(client, ROUTE, timeout=0.5)


async def test_a_closed_client_ends_the_servers_connection_through_the_link(net, nursery):
    server, client = await setup(net, nursery, RequestFault("drop", ROUTE))
    await client.aclose()
    with trio.fail_after(5):
        while not server.ended:
            await trio.sleep(0.01)
    assert server.ended == ["closed by peer"]


# --- the pure parts ---------------------------------------------------------------------------------

def frames(n: int) -> list[bytes]:
    serialize = [SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK]
    return [encode(RemotingCommand.request(100 + i, {"k": "v" * i}, b"body" * i, opaque=i,
                                           serialize_type=serialize[i % 3])) for i in range(n)]


@pytest.mark.parametrize("seed", range(20))
def test_frames_are_cut_whole_at_any_split_and_pass_untouched_otherwise(seed):
    rng = random.Random(seed)
    stream = b"".join(frames(12))
    cuts = sorted(rng.sample(range(1, len(stream)), 15))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
    switch = rng.randrange(len(chunks))  # faults appear part way through
    cutter, passed, cut = FrameCutter(), b"", []
    for i, chunk in enumerate(chunks):
        for piece in cutter.feed(chunk, cut=i >= switch):
            if isinstance(piece, bytes):
                passed += piece
            else:
                cut.append(piece)
                passed += piece.data
    assert passed == stream and not cutter.raw
    # Cutting starts at the first frame that began after the switch, and every one after is whole.
    assert [f.code for f in cut] == list(range(112 - len(cut), 112))
    assert [f.opaque for f in cut] == [f.code - 100 for f in cut]


def test_a_stream_that_is_not_frames_passes_as_it_comes():
    cutter = FrameCutter()
    assert cutter.feed(b"held", cut=False) == [b"held"]  # short: passed, its length still unknown
    assert cutter.feed(b"\xff\xff\xff\xffmore", cut=True) == [b"\xff\xff\xff\xffmore"]
    assert cutter.raw and cutter.feed(b"anything", cut=True) == [b"anything"]


def test_judging_picks_the_code_and_the_most_specific_link():
    faults, rng = RequestFaults(), random.Random(1)
    faults.add("*", "ns-0", RequestFault("reply", ROUTE, delay=5.0), now=0.0)
    faults.add("c", "ns-0", RequestFault("drop", ROUTE, duration=60.0), now=0.0)
    assert faults.judge("c", "ns-0", CLUSTER, 0, 1.0, rng, REMOTING)[0].action == "deliver"
    assert faults.judge("c", "ns-0", ROUTE, 0, 1.0, rng, REMOTING)[0].action == "drop"
    verdict, reply = faults.judge("other", "ns-0", ROUTE, 0, 1.0, rng, REMOTING)
    assert (verdict.action, reply.kind) == ("deliver", "reply")
    verdict, reply = faults.judge("c", "ns-0", ROUTE, 0, 61.0, rng, REMOTING)  # the drop's minute is up
    assert (verdict.action, reply.kind) == ("deliver", "reply")
    oneway = faults.judge("c", "ns-1", ROUTE, 2, 1.0, rng, REMOTING)
    assert oneway == (faults.judge("c", "ns-1", ROUTE, 0, 1.0, rng, REMOTING)[0], None)


def test_the_vocabulary_reads_request_faults_from_words_and_tables():
    vocab = vocabulary()
    fault = vocab.parse_words(["toxic", "broker-a-0:ns-1", "drop", "code=REGISTER_BROKER", "count=3", "for=3m"])
    assert (fault.nodes, fault.toxic) == (("broker-a-0", "ns-1"),
                                          RequestFault("drop", RequestCode.REGISTER_BROKER, count=3, duration=180.0))
    assert fault.to_record()["code"] == "REGISTER_BROKER"
    table = vocab.parse_table({"fault": "toxic", "node": "ns-0", "kind": "reply", "code": "105", "delay": "5s"})
    assert table.toxic == RequestFault("reply", ROUTE, delay=5.0)
    assert vocab.parse_table({"fault": "toxic", "node": "ns-0", **table.toxic.to_table()}).toxic == table.toxic
    for words, error in [(["drop"], "needs code="), (["drop", "code=NOPE"], "unknown request code 'NOPE'"),
                         (["reply", "code=105"], "needs delay="),
                         (["answer", "code=105", "answer=BUSY"], "unknown response code 'BUSY'")]:
        with pytest.raises(FaultError, match=error):
            vocab.parse_words(["toxic", "ns-0", *words])
    assert REMOTING.request_code("SEND_MESSAGE_V2") == 310


async def test_a_slow_request_holds_the_route_table_and_route_reads_wait_behind_it(net, nursery):
    register = RequestCode.REGISTER_BROKER
    server, client = await setup(net, nursery, RequestFault("slow", register, delay=0.6), dst="server")
    reader = await client_of(net, nursery, net.address_of["server"])
    started = trio.current_time()
    async with trio.open_nursery() as calls:
        calls.start_soon(call, client, register, 2.0)
        await trio.sleep(0.1)
        assert (await call(reader, ROUTE, 2.0)).code == ResponseCode.SUCCESS  # it waited for the table
        waited = trio.current_time() - started
        assert (await call(reader, RequestCode.QUERY_DATA_VERSION)).code == ResponseCode.SUCCESS
    assert waited >= 0.6 and trio.current_time() - started < waited + 0.3  # not a route-table code: no wait
    assert [(r["request"], r["action"]) for r in net.recorded] == [("REGISTER_BROKER", "slow"),
                                                                 ("GET_ROUTEINFO_BY_TOPIC", "wait")]


LEGACY = b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a"}]}'


async def test_a_dialect_fault_rewrites_the_brokeraddrs_keys_of_json_route_replies(net, nursery):
    listener, address = await net.listen("server", 0)

    async def serve(stream):
        await Connection(stream, **what_it_is(net, stream)).serve(lambda cmd: cmd.response(ResponseCode.SUCCESS, body=LEGACY))

    nursery.start_soon(trio.serve_listeners, serve, [listener])
    client = await client_of(net, nursery, address)
    assert (await call(client, ROUTE)).body == LEGACY
    net.add_request_fault("*", "server", RequestFault("dialect", ROUTE, keys="quoted"))
    assert (await call(client, ROUTE)).body == LEGACY.replace(b"{0:", b'{"0":').replace(b",1:", b',"1":')
    assert (await call(client, CLUSTER)).body == LEGACY  # another code: untouched
    packed = RemotingCommand.request(ROUTE, {"topic": "T"}, serialize_type=SerializeType.MSGPACK)
    assert (await client.invoke(packed, 1.0)).body == LEGACY  # a msgpack exchange has no dialect
    assert [r["action"] for r in net.recorded] == ["dialect", "dialect"]


def test_rewriting_keys_touches_only_brokeraddrs_and_round_trips():
    quoted = rewrite_keys(LEGACY + b'{"other":{0:1}}', "quoted")
    assert quoted.endswith(b'{"other":{0:1}}') and b'"brokerAddrs":{"0":"127.0.0.1:10911","1":' in quoted
    assert rewrite_keys(quoted, "unquoted") == LEGACY + b'{"other":{0:1}}'
    with pytest.raises(ValueError, match="keys must be quoted or unquoted"):
        RequestFault("dialect", ROUTE, keys="both")


def test_a_spent_fault_goes_so_the_link_is_fast_again():
    faults, rng = RequestFaults(), random.Random(1)
    faults.add("c", "s", RequestFault("drop", ROUTE, count=1), now=0.0)
    faults.add("c", "t", RequestFault("drop", ROUTE, duration=5.0), now=0.0)
    assert faults.judge("c", "s", ROUTE, 0, 1.0, rng, REMOTING)[0].action == "drop"
    assert faults.judge("c", "s", ROUTE, 0, 1.0, rng, REMOTING)[0].action == "deliver"
    assert faults.judge("c", "t", ROUTE, 0, 6.0, rng, REMOTING)[0].action == "deliver"
    assert not faults  # nothing left: the networks skip judging
