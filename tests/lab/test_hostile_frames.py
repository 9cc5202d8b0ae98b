"""Well-formed frames with odd values, over real TCP, against a NameServer and a broker.

Hypothesis builds whole frames — JSON and ROCKETMQ headers — with any request code, RocketMQ's field
names with values that are lone surrogates, non-BMP text, huge or negative numbers, wrong JSON types or
missing, and bodies that are noise or plausible JSON. After each hostile connection has had its say
(and died, by RST, half the time), another connection must get exactly the answer it would have got,
and the server must still be serving. The hostile connection gets an answer or a close, never a hang.
"""

from __future__ import annotations

import json
import socket
import struct

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.run.networks import tcp_network
from lab.broker.server import Broker
from lab.config import LabConfig
from lab.events import EventLog
from lab.remoting.message import decode_messages
from lab.remoting.channels import Node
from lab.broker.store import MessageStore
from nameserver import bodies
from nameserver.client import connect
from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode, SerializeType
from nameserver.protocol.codes import LANGUAGES
from nameserver.routes import DataVersion, TopicConfig
from nameserver.server import NameServer

CODES = [int(c) for c in RequestCode] + [0, -1, 1, 999, 0x4D48, 32767, -32768]

PULL = ["consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
        "suspendTimeoutMillis", "subVersion"]
SEND = ["producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp",
        "flag", "properties"]
SEND_V2 = list("abcdefghijklmn")
BROKER = ["brokerName", "brokerAddr", "clusterName", "haServerAddr", "brokerId"]
OFFSET = ["consumerGroup", "topic", "queueId", "commitOffset", "timestamp"]
CODE_FIELDS = {  # what each request reads, so a frame reaches the code behind the header checks
    RequestCode.PULL_MESSAGE: PULL, RequestCode.SEND_MESSAGE: SEND, RequestCode.SEND_MESSAGE_V2: SEND_V2,
    RequestCode.SEND_BATCH_MESSAGE: SEND_V2, RequestCode.QUERY_CONSUMER_OFFSET: OFFSET,
    RequestCode.UPDATE_CONSUMER_OFFSET: OFFSET, RequestCode.GET_MAX_OFFSET: OFFSET, RequestCode.GET_MIN_OFFSET: OFFSET,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: OFFSET, RequestCode.GET_EARLIEST_MSG_STORETIME: OFFSET,
    RequestCode.UNREGISTER_CLIENT: ["clientID", "producerGroup", "consumerGroup"],
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: ["consumerGroup"],
    RequestCode.CONSUMER_SEND_MSG_BACK: ["offset", "group", "delayLevel", "originMsgId", "originTopic"],
    RequestCode.PUT_KV_CONFIG: ["namespace", "key", "value"], RequestCode.GET_KV_CONFIG: ["namespace", "key"],
    RequestCode.DELETE_KV_CONFIG: ["namespace", "key"], RequestCode.GET_KVLIST_BY_NAMESPACE: ["namespace"],
    RequestCode.REGISTER_BROKER: BROKER + ["compressed", "bodyCrc32"], RequestCode.UNREGISTER_BROKER: BROKER,
    RequestCode.QUERY_DATA_VERSION: BROKER, RequestCode.GET_ROUTEINFO_BY_TOPIC: ["topic"],
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: ["brokerName"], RequestCode.ADD_WRITE_PERM_OF_BROKER: ["brokerName"],
    RequestCode.DELETE_TOPIC_IN_NAMESRV: ["topic", "clusterName"], RequestCode.GET_TOPICS_BY_CLUSTER: ["cluster"],
}
FIELDS = sorted({f for names in CODE_FIELDS.values() for f in names} | {"batch", "bname", "unitMode"})

# Text a hostile client can put in a JSON string: lone surrogates (as \uXXXX escapes), non-BMP and
# control characters, often, and anything else now and then.
NASTY = ["\ud800", "\udfff", "T\udbff\udbff", "\U0001f600", "\x00", "", " ", "TopicTest", "%RETRY%cg", "a" * 300]
any_text = st.one_of(st.sampled_from(NASTY), st.sampled_from(NASTY), st.text(st.characters(), max_size=12))
utf8_text = st.one_of(st.sampled_from([t for t in NASTY if not any(0xD800 <= ord(c) < 0xE000 for c in t)]),
                      st.text(st.characters(blacklist_categories=("Cs",)), max_size=12))  # what ROCKETMQ can carry
fields = st.sampled_from(FIELDS)
numbers = st.one_of(st.integers(-2**70, 2**70), st.sampled_from([0, -1, 2**31, -2**31 - 1, 2**63, 10**30]))
number_text = numbers.map(str)
json_values = st.one_of(any_text, any_text, number_text, numbers, st.booleans(), st.none(), st.floats(allow_nan=False),
                        st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                              max_size=2))


def json_bodies() -> st.SearchStrategy[bytes]:
    """Bodies as RocketMQ structures with odd values, or noise."""
    topic_config = st.fixed_dictionaries({}, optional={
        "topicName": any_text, "readQueueNums": numbers, "writeQueueNums": numbers, "perm": numbers,
        "order": st.booleans(), "topicSysFlag": numbers})
    register = st.fixed_dictionaries({"topicConfigSerializeWrapper": st.fixed_dictionaries({
        "dataVersion": st.fixed_dictionaries({}, optional={"counter": numbers, "timestamp": numbers}),
        "topicConfigTable": st.dictionaries(any_text, topic_config, max_size=3)})},
        optional={"filterServerList": st.lists(any_text, max_size=2)})
    heartbeat = st.fixed_dictionaries({}, optional={
        "clientID": st.one_of(any_text, numbers), "consumerDataSet": st.lists(st.fixed_dictionaries({}, optional={
            "groupName": any_text, "consumeType": json_values, "messageModel": json_values,
            "subscriptionDataSet": st.lists(st.fixed_dictionaries({}, optional={"topic": json_values}), max_size=2),
        }), max_size=2)})
    structured = st.one_of(register, heartbeat, st.dictionaries(fields, json_values, max_size=4))
    return st.one_of(st.binary(max_size=64), structured.map(lambda o: json.dumps(o).encode()))


# Mostly the codes whose fields are known, so frames get past the header checks into the processors.
codes = st.one_of(st.sampled_from(sorted(CODE_FIELDS)), st.sampled_from(sorted(CODE_FIELDS)),
                  st.sampled_from(CODES), numbers)


def request_fields(draw, code: int, values, text) -> dict:
    """The fields `code` reads (each most of the time, mostly strings as Java sends), and some it does not."""
    names = [name for name in CODE_FIELDS.get(code, []) if draw(st.integers(0, 9))]
    ext = {name: draw(st.one_of(text, number_text, values)) for name in names}
    ext.update(draw(st.dictionaries(fields, values, max_size=3)))
    return ext


@st.composite
def json_frames(draw, code=codes) -> bytes:
    header = {"code": draw(code), "opaque": draw(numbers),
              "flag": draw(st.sampled_from([0, 1, 2, 3, 2**31])), "language": draw(st.sampled_from(["JAVA", "CPP", "x"])),
              "version": draw(st.sampled_from([0, 37, 401, 409, -5]))}
    ext = request_fields(draw, header["code"], json_values, any_text)
    if draw(st.integers(0, 5)):
        header["extFields"] = ext
    if draw(st.booleans()):
        header["remark"] = draw(any_text)
    if draw(st.integers(0, 9)) == 0:  # a field missing
        del header[draw(st.sampled_from(sorted(header)))]
    if draw(st.integers(0, 9)) == 0:  # a field of the wrong type
        header[draw(st.sampled_from(["code", "opaque", "flag", "extFields", "remark"]))] = draw(json_values)
    raw = json.dumps(header).encode()  # ensure_ascii: lone surrogates travel as legal \uXXXX escapes
    body = draw(st.one_of(st.just(b""), json_bodies()))
    return struct.pack(">ii", 4 + len(raw) + len(body), len(raw)) + raw + body


@st.composite
def rocketmq_frames(draw, code=codes) -> bytes:
    def text(value: str) -> bytes:
        return value.encode()

    code = draw(code.filter(lambda c: -32768 <= c <= 32767))
    ext = b""
    for key, value in request_fields(draw, code, st.one_of(utf8_text, number_text), utf8_text).items():
        k, v = text(key), text(value)
        ext += struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v
    remark = text(draw(utf8_text))
    raw = struct.pack(">hbhii", code,
                      draw(st.integers(0, len(LANGUAGES) + 2)), draw(st.sampled_from([0, 401, 409])),
                      draw(st.integers(-2**31, 2**31 - 1)), draw(st.sampled_from([0, 1, 2, 3])))
    raw += struct.pack(">i", len(remark)) + remark + struct.pack(">i", len(ext)) + ext
    body = draw(st.one_of(st.just(b""), json_bodies()))
    return struct.pack(">ii", 4 + len(raw) + len(body), (1 << 24) | len(raw)) + raw + body


def any_frame(code=codes) -> st.SearchStrategy[bytes]:
    return st.one_of(json_frames(code), rocketmq_frames(code))


# A connection that sends a frame of every code the servers know, in any order, then whatever else:
# every processor sees odd values in every example. And connections of a few frames of any kind.
every_code = st.permutations(sorted(CODE_FIELDS)).flatmap(
    lambda order: st.tuples(*[any_frame(st.just(code)) for code in order]).map(list))
some_frames = st.lists(any_frame(), min_size=1, max_size=6)
hostile_connections = st.lists(st.tuples(st.one_of(every_code, some_frames), st.booleans()), min_size=1, max_size=3)


async def hostile(address: tuple[str, int], frames: list[bytes], rst: bool) -> None:
    """Send the frames, read until every frame is answered or the server closes us, then leave."""
    stream = await trio.open_tcp_stream(*address)
    try:
        with trio.move_on_after(0.05):  # oneway and held requests get no answer: stop listening
            await stream.send_all(b"".join(frames))
            while await stream.receive_some(65536):
                pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # closed by the server: an answer to a frame it could not take
    finally:
        if rst:
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await stream.aclose()


TOPIC = "TopicTest"


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --- the NameServer ---------------------------------------------------------------------------------

CHECK = {"brokerName": "broker-check", "brokerAddr": "127.0.0.1:10999", "clusterName": "CheckCluster",
         "haServerAddr": "127.0.0.1:11000", "brokerId": 0}


@FUZZ
@given(attackers=hostile_connections)
async def test_no_frame_changes_what_another_connection_of_the_nameserver_is_told(attackers):
    server = NameServer()
    async with trio.open_nursery() as nursery:
        address = await nursery.start(server.serve_tcp, "127.0.0.1", 0)
        async with connect(*address) as good:
            body = bodies.encode_register_body({"CheckTopic": TopicConfig("CheckTopic", 4, 4, 6)},
                                               DataVersion(1, 1), [], SerializeType.JSON)
            assert (await good.invoke(RemotingCommand.request(RequestCode.REGISTER_BROKER, CHECK, body), 5)).code == 0
            query = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "CheckTopic"})
            expected = (await good.invoke(query, 5)).body
            for frames, rst in attackers:
                await hostile(address, frames, rst)
                reply = await good.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                  {"topic": "CheckTopic"}), 5)
                assert (reply.code, reply.body) == (ResponseCode.SUCCESS, expected)
        async with connect(*address) as late:  # and it accepts and answers a new connection
            assert (await late.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5)).code == 0
        nursery.cancel_scope.cancel()


# --- a broker -----------------------------------------------------------------------------------------

@FUZZ
@given(attackers=hostile_connections)
async def test_no_frame_changes_what_another_connection_of_a_broker_is_told(attackers):
    async with trio.open_nursery() as nursery:
        network = tcp_network(nursery)
        events = EventLog(trio.current_time)
        node = Node("broker-a-0", network, events, LabConfig())
        ns_listener, ns_address = await network.listen("ns-0")
        await nursery.start(NameServer().serve, [ns_listener])
        broker = Broker(node, broker_name="broker-a", broker_id=0, cluster_name="DefaultCluster",
                        namesrv_addrs=[ns_address], store=MessageStore(), topics={TOPIC: TopicConfig(TOPIC, 4, 4, 6)})
        address = await nursery.start(broker.run)
        host, _, port = address.rpartition(":")
        async with connect(host, int(port)) as good:
            for i, (frames, rst) in enumerate(attackers):
                await hostile((host, int(port)), frames, rst)
                sent = await good.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE, {
                    "producerGroup": "pg", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
                    "queueId": 3, "sysFlag": 0, "bornTimestamp": 1, "flag": 0}, f"check {i}".encode()), 5)
                assert sent.code == ResponseCode.SUCCESS, sent.remark
                pulled = await good.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE, {
                    "consumerGroup": "cg", "topic": TOPIC, "queueId": 3, "queueOffset": sent.ext_fields["queueOffset"],
                    "maxMsgNums": 1, "sysFlag": 0, "commitOffset": 0, "subVersion": 0}), 5)
                assert pulled.code == ResponseCode.SUCCESS
                assert [m.body for m in decode_messages(pulled.body)] == [f"check {i}".encode()]
        with trio.fail_after(2):  # what the hostile connections held went with them
            while broker.hold_service.held:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()  # had the broker crashed, run() would have raised by now
