"""The last differences from a 4.9.8 NameServer, each over real loopback TCP: the replies' language,
extFields {} where Java's reply carries a custom header, getNamesrvConfig's keys and values, and the
order a registration's topics go into topicQueueTable (its ConcurrentHashMap's).

Expected orders were printed by OpenJDK 17 running the same insertions (ConcurrentHashMap, HashMap,
HashSet, Properties); they are written out here, so the tests need no Java.
"""

import json
import struct

import pytest
import trio

from nameserver import bodies
from nameserver.config import NamesrvConfig
from nameserver.java_order import concurrent_hashmap_order, string_hash
from nameserver.protocol import RequestCode, ResponseCode
from nameserver.routes import TopicConfig
from nameserver.server import NameServer

HOST = "127.0.0.1"


async def start(nursery, **config) -> int:
    server = NameServer(NamesrvConfig(**config))
    _, port = await nursery.start(server.serve_tcp, HOST, 0)
    return port


def json_frame(code: int, ext: dict | None = None, body: bytes = b"", opaque: int = 1) -> bytes:
    header = {"code": code, "flag": 0, "language": "JAVA", "opaque": opaque, "version": 409}
    if ext is not None:
        header["extFields"] = ext
    data = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack(">ii", 4 + len(data) + len(body), len(data)) + data + body


def rocketmq_frame(code: int, ext: dict, opaque: int = 1) -> bytes:
    fields = b"".join(struct.pack(">h", len(k)) + k.encode() + struct.pack(">i", len(v)) + v.encode()
                      for k, v in ext.items())
    header = struct.pack(">hbhii", code, 0, 409, opaque, 0) + struct.pack(">i", 0) + struct.pack(">i", len(fields)) + fields
    return struct.pack(">ii", 4 + len(header), 1 << 24 | len(header)) + header


async def read_reply(stream) -> tuple[int, bytes, bytes]:
    """(serialize type, header bytes, body bytes) of the next frame."""
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = await stream.receive_some()
        assert chunk, "connection closed"
        data += chunk
    word = struct.unpack(">i", data[4:8])[0]
    header_length = word & 0xFFFFFF
    return word >> 24, data[8:8 + header_length], data[8 + header_length:]


async def exchange(port: int, frame: bytes, stream=None) -> tuple[int, bytes, bytes]:
    """One request, on `stream` or a fresh connection (closed after: a broker registered on it goes)."""
    if stream is not None:
        await stream.send_all(frame)
        return await read_reply(stream)
    async with await trio.open_tcp_stream(HOST, port) as stream:
        await stream.send_all(frame)
        return await read_reply(stream)


def register_frame(topic_names: list[str], counter: int = 1, crc: int | None = None) -> bytes:
    # The topics in the order given (bodies.encode_register_body would write fastjson's order).
    body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": counter, "timestamp": 1_700_000_000_000},
        "topicConfigTable": {t: bodies.topic_config_to_wire(TopicConfig(t, 4, 4, 6)) for t in topic_names}}},
        separators=(",", ":")).encode()
    ext = {"brokerAddr": "127.0.0.1:10911", "brokerId": "0", "brokerName": "broker-a",
           "clusterName": "DefaultCluster", "haServerAddr": "127.0.0.1:10912"}
    if crc is not None:
        ext["bodyCrc32"] = str(crc)
    return json_frame(RequestCode.REGISTER_BROKER, ext, body)


# --- 1. language ---------------------------------------------------------------------------------

async def test_replies_say_java_in_a_json_header(nursery):
    port = await start(nursery)
    _, header, _ = await exchange(port, json_frame(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"}))
    assert json.loads(header)["language"] == "JAVA"
    _, header, _ = await exchange(port, json_frame(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
    assert header == b'{"code":0,"flag":1,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":409}'


async def test_replies_say_java_in_a_rocketmq_header(nursery):
    port = await start(nursery)
    stype, header, _ = await exchange(port, rocketmq_frame(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"}))
    code, language = struct.unpack_from(">hb", header)
    assert (stype, code, language) == (1, ResponseCode.TOPIC_NOT_EXIST, 0)  # LanguageCode.JAVA


# --- 2. extFields {} -----------------------------------------------------------------------------

async def test_get_kv_config_not_found_carries_empty_ext_fields(nursery):
    port = await start(nursery)
    _, header, _ = await exchange(port, json_frame(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}))
    assert header == (b'{"code":22,"extFields":{},"flag":1,"language":"JAVA","opaque":1,'
                      b'"remark":"No config item, Namespace: ns Key: k","serializeTypeCurrentRPC":"JSON",'
                      b'"version":409}')


async def test_a_crc_mismatch_carries_empty_ext_fields(nursery):
    port = await start(nursery)
    _, header, _ = await exchange(port, register_frame(["T"], crc=12345))
    assert header == (b'{"code":1,"extFields":{},"flag":1,"language":"JAVA","opaque":1,'
                      b'"remark":"crc32 not match","serializeTypeCurrentRPC":"JSON","version":409}')


async def test_replies_built_without_a_header_class_carry_no_ext_fields(nursery):
    port = await start(nursery)
    for frame in (json_frame(RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"}),
                  json_frame(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "none"}),
                  json_frame(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"})):
        _, header, _ = await exchange(port, frame)
        assert "extFields" not in json.loads(header)


# --- 3. getNamesrvConfig ---------------------------------------------------------------------------

# OpenJDK 17: NamesrvConfig's and NettyServerConfig's fields, each object's Properties merged into
# Configuration's, then iterated (the lab's two keys go in last, as a config file's would).
JAVA_CONFIG_ORDER = (
    "serverSocketBacklog writeBufferHighWaterMark serverWorkerThreads serverSelectorThreads "
    "serverChannelMaxIdleTimeSeconds configBlackList writeBufferLowWaterMark serverSocketRcvBufSize "
    "serverAsyncSemaphoreValue kvConfigPath configStorePath clusterTest orderMessageEnable "
    "serverSocketSndBufSize serverOnewaySemaphoreValue serverCallbackExecutorThreads listenPort "
    "rocketmqHome productEnvName useEpollNativeSelector serverPooledByteBufAllocatorEnable").split()


async def test_get_namesrv_config_lists_4_9_8_keys_with_real_values(nursery, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ROCKETMQ_HOME", "/opt/rocketmq-4.9.8")
    port = await start(nursery)
    _, header, body = await exchange(port, json_frame(RequestCode.GET_NAMESRV_CONFIG))
    assert json.loads(header)["code"] == ResponseCode.SUCCESS
    lines = body.decode().split("\n")
    assert lines[-1] == ""
    pairs = [line.split("=", 1) for line in lines[:-1]]
    keys = [k for k, _ in pairs]
    lab_keys = ["scanNotActiveBrokerInterval", "brokerChannelExpiredTime"]
    assert [k for k in keys if k not in lab_keys] == JAVA_CONFIG_ORDER
    config = dict(pairs)
    assert config["listenPort"] == str(port) != "9876"
    assert config["rocketmqHome"] == "/opt/rocketmq-4.9.8"
    assert config["kvConfigPath"] == f"{tmp_path}/namesrv/kvConfig.json"
    assert config["configStorePath"] == f"{tmp_path}/namesrv/namesrv.properties"
    assert {k: config[k] for k in ("serverWorkerThreads", "serverSelectorThreads", "serverSocketBacklog",
                                   "serverChannelMaxIdleTimeSeconds", "serverPooledByteBufAllocatorEnable",
                                   "useEpollNativeSelector", "serverOnewaySemaphoreValue")} == {
        "serverWorkerThreads": "8", "serverSelectorThreads": "3", "serverSocketBacklog": "1024",
        "serverChannelMaxIdleTimeSeconds": "120", "serverPooledByteBufAllocatorEnable": "true",
        "useEpollNativeSelector": "false", "serverOnewaySemaphoreValue": "256"}


async def test_get_namesrv_config_shows_a_configured_kv_path_and_no_home_without_rocketmq_home(
        nursery, monkeypatch, tmp_path):
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)
    port = await start(nursery, kvConfigPath=str(tmp_path / "kv.json"))
    _, _, body = await exchange(port, json_frame(RequestCode.GET_NAMESRV_CONFIG))
    config = dict(line.split("=", 1) for line in body.decode().splitlines())
    assert config["kvConfigPath"] == str(tmp_path / "kv.json")
    assert "rocketmqHome" not in config  # a null field is left out of the Properties, as Java's


# --- 5. a registration's topics in ConcurrentHashMap order ----------------------------------------

# Topic0, Topic2111 and Topic2232 share a topicQueueTable bucket; Other12 follows them in the
# ConcurrentHashMap's 16-bucket chain, so the growth at the 12th put moves the three before it,
# reversed.
BODY_ORDER = ["Topic0", "Topic2111", "Topic2232", "Other12", "Filler0", "Filler1", "Filler2", "Filler4",
              "Filler5", "Filler6", "Filler7", "Filler8", "Filler9"]
JAVA_CHM_ORDER = ["Filler5", "Filler4", "Filler7", "Filler6", "Filler1", "Filler0", "Topic2232", "Topic2111",
                  "Topic0", "Filler2", "Filler9", "Filler8", "Other12"]
# new HashSet().addAll(topicQueueTable.keySet()) after inserting JAVA_CHM_ORDER into HashMap(1024)
JAVA_TOPIC_LIST = JAVA_CHM_ORDER


def test_concurrent_hashmap_order_is_javas():
    assert concurrent_hashmap_order(BODY_ORDER) == JAVA_CHM_ORDER
    # 10,000 names through four growths: the hash of Java's keys joined with "," (printed by Java).
    names = [f"TopicTest-{i:05d}" for i in range(1, 10_001)]
    order = concurrent_hashmap_order(names)
    assert order[:4] == ["TopicTest-00493", "TopicTest-00494", "TopicTest-00491", "TopicTest-00492"]
    assert string_hash(",".join(order) + ",") == 0xB2893D1F


def test_concurrent_hashmap_order_of_java_properties():
    from nameserver.config import NAMESRV_KEYS, NETTY_SERVER_KEYS
    merged = concurrent_hashmap_order(NAMESRV_KEYS) + concurrent_hashmap_order(NETTY_SERVER_KEYS)
    assert concurrent_hashmap_order(merged) == JAVA_CONFIG_ORDER


async def test_a_registrations_topics_are_listed_in_javas_order(nursery):
    port = await start(nursery)
    async with await trio.open_tcp_stream(HOST, port) as broker:
        _, header, _ = await exchange(port, register_frame(BODY_ORDER), broker)
        assert json.loads(header)["code"] == ResponseCode.SUCCESS
        _, _, body = await exchange(port, json_frame(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
    assert json.loads(body)["topicList"] == JAVA_TOPIC_LIST


# --- 4. a changed registration applies what differs from the table --------------------------------

async def test_a_changed_registration_restores_a_wiped_perm(nursery):
    """Only rows that differ are applied, compared with the table, not with the last body: a
    re-registration after wipeWritePerm puts the broker's perm back, as 4.9.8 does."""
    port = await start(nursery)
    async with await trio.open_tcp_stream(HOST, port) as broker:
        await exchange(port, register_frame(["A", "B"], counter=1), broker)
        _, header, _ = await exchange(port, json_frame(RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                                                       {"brokerName": "broker-a"}))
        assert json.loads(header)["extFields"] == {"wipeTopicCount": "2"}
        _, _, body = await exchange(port, json_frame(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "A"}))
        assert json.loads(body)["queueDatas"][0]["perm"] == 4
        await exchange(port, register_frame(["A", "B"], counter=2), broker)
        _, _, body = await exchange(port, json_frame(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "A"}))
        assert json.loads(body)["queueDatas"][0]["perm"] == 6


@pytest.mark.parametrize("entry", [
    b'{"perm":"6","readQueueNums":4,"topicName":"T","writeQueueNums":4}',  # a quoted number
    b'{"perm":6,"readQueueNums":4.0,"topicName":"T","writeQueueNums":4}',  # a float
    b'{"perm":6,"readQueueNums":4,"topicName":"T","topicSysFlag":null,"writeQueueNums":4}',
])
def test_entries_the_fast_decoder_refuses_are_applied_as_before(h, entry):
    ns = h.Ns()
    body = (b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,'
            b'"timestamp":1},"topicConfigTable":{"T":' + entry + b'}}}')
    reply = ns.call(RequestCode.REGISTER_BROKER, {
        "brokerAddr": "127.0.0.1:10911", "brokerId": 0, "brokerName": "broker-a",
        "clusterName": "DefaultCluster", "haServerAddr": "127.0.0.1:10912"}, body=body)
    assert reply.code == ResponseCode.SUCCESS
    queue = ns.proc.routes.topic_queue_table["T"]["broker-a"]
    assert (queue.read_queue_nums, queue.write_queue_nums, queue.perm, queue.topic_sys_flag) == (4, 4, 6, 0)
