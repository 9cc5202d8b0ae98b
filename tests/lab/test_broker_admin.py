"""The admin codes mqadmin and the Dashboard ask a broker (lab/broker/admin.py), over real loopback
sockets: reply codes, body fields as 4.9.8's fastjson writes them, and figures that follow the
broker's own state.

Facts from RocketMQ 4.9.8 (AdminBrokerProcessor, StoreStatsService, the body classes) the
tests hold the lab to:
- bodies are fastjson: bean fields alphabetical, MessageQueue map keys written as JSON objects
  (`{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{...}}`), doubles as Java prints them;
- 17 validates the name (TopicValidator), creates or changes the topic and registers it at once
  with a new DataVersion, answering SUCCESS after the registration;
- 26 answers the config as `key=value` lines and extFields.version = the config's DataVersion JSON;
- 28 answers a KVTable whose putTps / getTransferedTps are "tps10 tps60 tps600";
- 202 reports per write queue minOffset / maxOffset / lastUpdateTimestamp (0 for an empty queue);
- 203 answers 206 CONSUMER_NOT_ONLINE "the consumer group[g] not online" for an unknown group;
- 204 answers 1 "the producer group[g] not exist" for an unknown group;
- 208's OffsetWrapper: brokerOffset = max offset, consumerOffset = committed (0 if none),
  lastTimestamp = store time of message consumerOffset-1 (0 if none);
- 300 answers GroupList of online subscribers and groups with offsets on the topic;
- 317 answers ConsumeStatsList {brokerAddr, consumeStatsList: [{group: [ConsumeStats]}], totalDiff}.
"""

import json
import re
import time

import pytest
import trio

from lab.broker import admin
from lab.remoting.java_maps import hash_order, message_queue_hash
from nameserver.java_order import string_hash
from nameserver.protocol.fastjson import Bean, JMap, encode, java_double
from nameserver.protocol import RequestCode, ResponseCode, SerializeType
from nameserver.routes import TopicConfig

TOPIC = "TopicTest"
MQ_ENTRY = re.compile(r'\{"brokerName":"([^"]*)","queueId":(\d+),"topic":"([^"]*)"\}:(\{[^{}]*\})')


def mq_table(body: bytes) -> dict[tuple[str, int], dict]:
    """A MessageQueue-keyed offsetTable, read the way fastjson wrote it: (topic, queueId) -> value."""
    return {(topic, int(q)): json.loads(value) for _b, q, topic, value in MQ_ENTRY.findall(body.decode())}


def heartbeat(client_id="10.0.0.9@1", *, consumer="cg", producer="pg", topic=TOPIC):
    data = {"clientID": client_id, "consumerDataSet": [], "producerDataSet": [{"groupName": producer}]}
    if consumer:
        data["consumerDataSet"] = [{
            "groupName": consumer, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
            "subscriptionDataSet": [
                {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
                 "subVersion": 1700000000000, "tagsSet": [], "topic": topic},
                {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
                 "subVersion": 1700000000001, "tagsSet": [], "topic": f"%RETRY%{consumer}"}]}]
    return json.dumps(data).encode()


async def cluster(tcp):
    ns = await tcp.start_nameserver(port=0)
    broker = await tcp.start_broker()
    return ns, broker


def route(tcp, ns, topic):
    return tcp.nameservers[ns].routes.pickup_topic_route_data(topic)


# --- 17 UPDATE_AND_CREATE_TOPIC -------------------------------------------------------------------

CREATE = {"topic": "NewTopic", "defaultTopic": "TBW102", "readQueueNums": 3, "writeQueueNums": 3, "perm": 6,
          "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"}


async def test_update_topic_creates_it_and_registers_it_at_once_with_a_new_data_version(tcp):
    ns, broker = await cluster(tcp)
    before = broker.broker.topic_config_manager.data_version
    reply = await tcp.call(broker.address, RequestCode.UPDATE_AND_CREATE_TOPIC, CREATE)
    assert (reply.code, reply.body) == (ResponseCode.SUCCESS, None)
    # Answered after the registration: the route is there when the reply is.
    queue, = route(tcp, ns, "NewTopic").queue_datas
    assert (queue.broker_name, queue.read_queue_nums, queue.write_queue_nums, queue.perm) == ("broker-a", 3, 3, 6)
    assert broker.broker.topic_config_manager.data_version.counter == before.counter + 1
    assert [e["trigger"] for e in tcp.kinds("broker.register")][-1] == "update_topic"
    assert tcp.kinds("broker.topic", topic="NewTopic")[0]["reason"] == "create"

    changed = await tcp.call(broker.address, RequestCode.UPDATE_AND_CREATE_TOPIC,
                             {**CREATE, "readQueueNums": 2, "writeQueueNums": 2, "perm": 4})
    assert changed.code == ResponseCode.SUCCESS
    queue, = route(tcp, ns, "NewTopic").queue_datas
    assert (queue.write_queue_nums, queue.perm) == (2, 4)
    assert broker.broker.topic_config_manager.select("NewTopic") == TopicConfig("NewTopic", 2, 2, 4)
    assert tcp.kinds("broker.topic", topic="NewTopic")[-1]["reason"] == "update"


@pytest.mark.parametrize("topic, remark", [
    ("", "The specified topic is blank."),
    ("bad topic!", "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
    ("t" * 128, "The specified topic is longer than topic max length."),
    ("TBW102", "The topic[TBW102] is conflict with system topic."),
    ("SCHEDULE_TOPIC_XXXX", "The topic[SCHEDULE_TOPIC_XXXX] is conflict with system topic."),
    ("rmq_sys_anything", "The topic[rmq_sys_anything] is conflict with system topic."),
    ("DefaultCluster", "The topic[DefaultCluster] is conflict with system topic."),
    ("broker-a", "The topic[broker-a] is conflict with system topic."),
])
async def test_update_topic_refuses_names_4_9_8_refuses(tcp, topic, remark):
    ns, broker = await cluster(tcp)
    reply = await tcp.call(broker.address, RequestCode.UPDATE_AND_CREATE_TOPIC, {**CREATE, "topic": topic})
    assert (reply.code, reply.remark) == (ResponseCode.SYSTEM_ERROR, remark)


async def test_update_topic_without_queue_numbers_is_a_system_error(tcp):
    ns, broker = await cluster(tcp)
    header = {k: v for k, v in CREATE.items() if k != "writeQueueNums"}
    assert (await tcp.call(broker.address, RequestCode.UPDATE_AND_CREATE_TOPIC, header)).code == ResponseCode.SYSTEM_ERROR
    assert route(tcp, ns, "NewTopic") is None


# --- 26 GET_BROKER_CONFIG -----------------------------------------------------------------------------

async def test_broker_config_is_properties_text_with_the_config_data_version(tcp):
    ns, broker = await cluster(tcp)
    reply = await tcp.call(broker.address, admin.GET_BROKER_CONFIG)
    assert reply.code == ResponseCode.SUCCESS
    version = json.loads(reply.ext_fields["version"])
    assert list(version) == ["counter", "timestamp"] and version["counter"] == 0
    assert abs(version["timestamp"] - time.time() * 1000) < 60_000
    lines = reply.body.decode().splitlines()
    props = dict(line.split("=", 1) for line in lines)
    host, port = broker.address.rsplit(":", 1)
    assert {k: props[k] for k in ("brokerClusterName", "brokerName", "brokerId", "brokerIP1", "listenPort",
                                  "namesrvAddr", "brokerPermission", "registerNameServerPeriod",
                                  "autoCreateTopicEnable", "brokerRole")} == {
        "brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "0", "brokerIP1": host,
        "listenPort": port, "namesrvAddr": ns, "brokerPermission": "6", "registerNameServerPeriod": "30000",
        "autoCreateTopicEnable": "true", "brokerRole": "ASYNC_MASTER"}
    assert reply.body.decode().endswith("\n")

    await broker.broker.set_permission(4)  # a config change: the config's DataVersion moves on
    again = await tcp.call(broker.address, admin.GET_BROKER_CONFIG)
    assert json.loads(again.ext_fields["version"])["counter"] == 1
    assert "brokerPermission=4" in again.body.decode().splitlines()


# --- 28 GET_BROKER_RUNTIME_INFO -----------------------------------------------------------------------

async def test_runtime_info_counts_puts_and_gets_and_rates_them(tcp):
    ns, broker = await cluster(tcp)
    for i in range(4):
        assert (await tcp.send(broker.address, b"m%d" % i)).code == ResponseCode.SUCCESS
    assert (await tcp.pull(broker.address)).code == ResponseCode.SUCCESS  # 4 messages handed out
    reply = await tcp.call(broker.address, admin.GET_BROKER_RUNTIME_INFO)
    assert reply.code == ResponseCode.SUCCESS
    table = json.loads(reply.body)["table"]
    assert all(isinstance(v, str) for v in table.values())
    assert (table["brokerVersionDesc"], table["brokerVersion"]) == ("V4_9_8", "409")
    assert (table["msgPutTotalTodayNow"], table["msgGetTotalTodayNow"]) == ("4", "4")
    assert table["putMessageTimesTotal"] == "4"
    assert table["commitLogMaxOffset"] == str(broker.broker.store.max_physical_offset)
    assert abs(int(table["bootTimestamp"]) - time.time() * 1000) < 60_000
    assert re.fullmatch(r"\[ 0 days, 0 hours, 0 minutes, \d+ seconds \]", table["runtime"])
    for key in ("putTps", "getTransferedTps", "getFoundTps", "getMissTps", "getTotalTps"):
        figures = table[key].split(" ")
        assert len(figures) == 3 and all(re.fullmatch(r"\d+\.\d+(E-?\d+)?", f) for f in figures), (key, table[key])
    # A young broker divides by its uptime (at least 1 s): 4 puts within a second make 4.0 or less.
    assert 0 < float(table["putTps"].split()[0]) <= 4.0
    assert float(table["getTransferedTps"].split()[0]) > 0
    assert table["putMessageDistributeTime"].startswith("[<=0ms]:4 [0~10ms]:0 ")
    assert int(table["earliestMessageTimeStamp"]) >= int(table["bootTimestamp"])
    # the keys come in Java's HashMap(64) order, as 4.9.8 writes the KVTable
    assert list(table) == hash_order(list(table), initial_capacity=64)


# --- 202 GET_TOPIC_STATS_INFO -------------------------------------------------------------------------

async def test_topic_stats_hold_each_write_queue_min_max_and_last_store_time(tcp):
    ns, broker = await cluster(tcp)
    for queue_id in (0, 0, 0, 2):
        await tcp.send(broker.address, queue_id=queue_id)
    reply = await tcp.call(broker.address, admin.GET_TOPIC_STATS_INFO, {"topic": TOPIC})
    assert reply.code == ResponseCode.SUCCESS
    assert reply.body.startswith(b'{"offsetTable":{{"brokerName":"broker-a","queueId":')
    table = mq_table(reply.body)
    assert sorted(table) == [(TOPIC, q) for q in range(4)]
    assert {q: (v["minOffset"], v["maxOffset"]) for (_t, q), v in table.items()} == {
        0: (0, 3), 1: (0, 0), 2: (0, 1), 3: (0, 0)}
    assert all(list(v) == ["lastUpdateTimestamp", "maxOffset", "minOffset"] for v in table.values())
    assert table[(TOPIC, 1)]["lastUpdateTimestamp"] == 0
    assert abs(table[(TOPIC, 0)]["lastUpdateTimestamp"] - time.time() * 1000) < 60_000

    missing = await tcp.call(broker.address, admin.GET_TOPIC_STATS_INFO, {"topic": "Nope"})
    assert (missing.code, missing.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist")


# --- 203 / 204 connections ----------------------------------------------------------------------------

async def test_consumer_connection_lists_the_heartbeat_s_client_and_subscriptions(tcp):
    ns, broker = await cluster(tcp)
    absent = await tcp.call(broker.address, admin.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "cg"})
    assert (absent.code, absent.remark) == (admin.CONSUMER_NOT_ONLINE, "the consumer group[cg] not online")

    assert (await tcp.call(broker.address, RequestCode.HEART_BEAT, body=heartbeat())).code == ResponseCode.SUCCESS
    reply = await tcp.call(broker.address, admin.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "cg"})
    assert reply.code == ResponseCode.SUCCESS
    body = json.loads(reply.body)
    assert list(body) == ["connectionSet", "consumeFromWhere", "consumeType", "messageModel", "subscriptionTable"]
    connection, = body["connectionSet"]
    assert list(connection) == ["clientAddr", "clientId", "language", "version"]
    assert (connection["clientId"], connection["language"], connection["version"]) == ("10.0.0.9@1", "PYTHON", 409)
    assert connection["clientAddr"].startswith("127.0.0.1:")
    assert (body["consumeFromWhere"], body["consumeType"], body["messageModel"]) == (
        "CONSUME_FROM_FIRST_OFFSET", "CONSUME_PASSIVELY", "CLUSTERING")
    assert sorted(body["subscriptionTable"]) == ["%RETRY%cg", TOPIC]
    assert body["subscriptionTable"][TOPIC] == {
        "classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
        "subVersion": 1700000000000, "tagsSet": [], "topic": TOPIC}


async def test_producer_connection_lists_clients_of_the_group_until_they_unregister(tcp):
    ns, broker = await cluster(tcp)
    absent = await tcp.call(broker.address, admin.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "pg"})
    assert (absent.code, absent.remark) == (ResponseCode.SYSTEM_ERROR, "the producer group[pg] not exist")

    await tcp.call(broker.address, RequestCode.HEART_BEAT, body=heartbeat("10.0.0.9@2", consumer=None))
    reply = await tcp.call(broker.address, admin.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "pg"})
    assert reply.code == ResponseCode.SUCCESS
    connection, = json.loads(reply.body)["connectionSet"]
    assert (connection["clientId"], connection["language"], connection["version"]) == ("10.0.0.9@2", "PYTHON", 409)

    await tcp.call(broker.address, RequestCode.UNREGISTER_CLIENT, {"clientID": "10.0.0.9@2", "producerGroup": "pg"})
    gone = await tcp.call(broker.address, admin.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "pg"})
    assert gone.code == ResponseCode.SYSTEM_ERROR


# --- 208 / 300 / 317 consume stats ----------------------------------------------------------------------

async def commit(tcp, broker, offset, queue_id=0, group="cg"):
    reply = await tcp.call(broker.address, RequestCode.UPDATE_CONSUMER_OFFSET,
                           {"consumerGroup": group, "topic": TOPIC, "queueId": queue_id, "commitOffset": offset})
    assert reply.code == ResponseCode.SUCCESS


async def test_consume_stats_follow_sends_and_commits(tcp):
    ns, broker = await cluster(tcp)
    for _ in range(3):
        await tcp.send(broker.address)
    await commit(tcp, broker, 1)
    reply = await tcp.call(broker.address, admin.GET_CONSUME_STATS, {"consumerGroup": "cg", "topic": TOPIC})
    assert reply.code == ResponseCode.SUCCESS
    assert reply.body.startswith(b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a",')
    table = mq_table(reply.body)
    assert sorted(table) == [(TOPIC, q) for q in range(4)]  # the read queues
    first = table[(TOPIC, 0)]
    assert list(first) == ["brokerOffset", "consumerOffset", "lastTimestamp"]
    assert (first["brokerOffset"], first["consumerOffset"]) == (3, 1)
    # lastTimestamp: the store time of the last message consumed (offset 0)
    assert first["lastTimestamp"] == broker.broker.store.store_time(TOPIC, 0, 0)
    assert table[(TOPIC, 1)] == {"brokerOffset": 0, "consumerOffset": 0, "lastTimestamp": 0}

    await tcp.send(broker.address)
    await commit(tcp, broker, 3)
    table = mq_table((await tcp.call(broker.address, admin.GET_CONSUME_STATS, {"consumerGroup": "cg"})).body)
    assert (table[(TOPIC, 0)]["brokerOffset"], table[(TOPIC, 0)]["consumerOffset"]) == (4, 3)
    assert table[(TOPIC, 0)]["lastTimestamp"] == broker.broker.store.store_time(TOPIC, 0, 2)

    # a pull of the group's makes a consume TPS
    assert (await tcp.pull(broker.address)).code == ResponseCode.SUCCESS  # consumerGroup "cg"
    tps = json.loads(re.match(rb'\{"consumeTps":([^,]+),', (await tcp.call(
        broker.address, admin.GET_CONSUME_STATS, {"consumerGroup": "cg", "topic": TOPIC})).body).group(1))
    assert tps > 0


async def test_query_topic_consume_by_who_names_subscribers_and_groups_with_offsets(tcp):
    ns, broker = await cluster(tcp)
    empty = await tcp.call(broker.address, admin.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC})
    assert (empty.code, empty.body) == (ResponseCode.SUCCESS, b'{"groupList":[]}')
    await tcp.call(broker.address, RequestCode.HEART_BEAT, body=heartbeat(consumer="online"))
    await commit(tcp, broker, 0, group="offsets-only")
    reply = await tcp.call(broker.address, admin.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC})
    groups = json.loads(reply.body)["groupList"]
    assert sorted(groups) == ["offsets-only", "online"]
    assert groups == hash_order(["online", "offsets-only"])  # a HashSet<String>


async def test_broker_consume_stats_list_every_group_and_the_total_diff(tcp):
    ns, broker = await cluster(tcp)
    for queue_id in (0, 0, 1):
        await tcp.send(broker.address, queue_id=queue_id)
    await commit(tcp, broker, 1, group="g1")
    await commit(tcp, broker, 0, queue_id=1, group="g2")
    await commit(tcp, broker, 0, group="gone")  # committed offsets alone make no subscription group
    for group in ("g1", "g2"):  # a heartbeat does, as a pull does
        await tcp.call(broker.address, RequestCode.HEART_BEAT, body=heartbeat(f"10.0.0.9@{group}", consumer=group))
    reply = await tcp.call(broker.address, admin.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
    assert reply.code == ResponseCode.SUCCESS
    text = reply.body.decode()
    assert text.startswith(f'{{"brokerAddr":"{broker.address}","consumeStatsList":[{{"')
    # 4.9.8 walks the subscription group table (a ConcurrentHashMap(1024)): the built-in groups too
    groups = re.findall(r'\{"([^"]+)":\[', text)
    assert groups == hash_order(groups, initial_capacity=2048) and "gone" not in groups
    assert {"g1", "g2", "TOOLS_CONSUMER", "CID_ONSAPI_OWNER"} <= set(groups)
    assert '{"TOOLS_CONSUMER":[]}' in text
    assert '{"g1":[{"consumeTps":0.0,' in text
    # g1: queue 0 lags 2-1, queue 1 lags 1-0; g2: queue 0 lags 2, queue 1 lags 1 - 0 (write queues: 4 each)
    assert text.endswith('],"totalDiff":5}')
    assert '{"g2":[{"consumeTps":0.0,"offsetTable":{' in text


async def test_admin_replies_come_in_the_request_s_header_type(tcp):
    ns, broker = await cluster(tcp)
    for code, fields in ((admin.GET_BROKER_RUNTIME_INFO, None), (admin.GET_TOPIC_STATS_INFO, {"topic": TOPIC}),
                         (admin.GET_BROKER_CONFIG, None), (admin.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC})):
        json_reply = await tcp.call(broker.address, code, fields)
        binary_reply = await tcp.call(broker.address, code, fields, serialize_type=SerializeType.ROCKETMQ)
        assert (json_reply.code, binary_reply.code) == (ResponseCode.SUCCESS, ResponseCode.SUCCESS)
        assert binary_reply.serialize_type == SerializeType.ROCKETMQ
        assert json_reply.serialize_type == SerializeType.JSON
        if code != admin.GET_BROKER_RUNTIME_INFO:  # runtime figures move between the two calls
            assert binary_reply.body == json_reply.body


# --- fastjson's text, pure ------------------------------------------------------------------------------

def test_java_hash_codes():
    # String.hashCode and MessageQueue.hashCode as Java computes them (int32 overflow included)
    assert string_hash("hello") == 99162322  # unsigned 32-bit, as nameserver/java_order hashes
    assert string_hash("Aa") == string_hash("BB") == 2112
    assert message_queue_hash("T", "b", 0) == (31 * (31 * (31 + string_hash("b")) + 0) + string_hash("T")) & 0xFFFFFFFF


def test_orders_and_numbers_match_what_a_jvm_printed():
    """Expected values printed by OpenJDK 17 (HashMap/HashSet iteration, String.hashCode,
    String.valueOf(double)); the JDK's HashMap has not changed its order since Java 8."""
    assert (string_hash("TopicTest"), string_hash("broker-a"), string_hash("ü€")) == (
        -1902610879 & 0xFFFFFFFF, 372697965, 16176)
    assert hash_order(["online", "offsets-only", "cg", "%RETRY%cg", "TopicTest", "g1", "g2"]) == [
        "%RETRY%cg", "offsets-only", "cg", "online", "TopicTest", "g1", "g2"]
    queues = [(t, i) for t in ("TopicTest", "%RETRY%cg", "LabTopic-7") for i in range(8)]  # 24 puts: a 64 table
    java = ("TopicTest/7,TopicTest/6,TopicTest/3,TopicTest/2,TopicTest/5,TopicTest/4,%RETRY%cg/7,%RETRY%cg/6,"
            "%RETRY%cg/5,TopicTest/1,%RETRY%cg/4,TopicTest/0,%RETRY%cg/3,%RETRY%cg/2,%RETRY%cg/1,LabTopic-7/0,"
            "%RETRY%cg/0,LabTopic-7/7,LabTopic-7/5,LabTopic-7/6,LabTopic-7/3,LabTopic-7/4,LabTopic-7/1,LabTopic-7/2")
    assert ",".join(f"{t}/{q}" for t, q in hash_order(
        queues, lambda k: message_queue_hash(k[0], "broker-a", k[1]))) == java
    assert " ".join(java_double(d) for d in (4 / 7, 0.001, 1234567.891, 9.99e-4, 2 / 3 * 1000)) == (
        "0.5714285714285714 0.001 1234567.891 9.99E-4 666.6666666666666")


def test_hash_order_is_bucket_then_insertion_order():
    # "Aa" and "BB" share a bucket: insertion order decides between them; "a" (97) lands after both
    # (2112 ^ 0) & 15 = 0, 97 & 15 = 1
    assert hash_order(["a", "BB", "Aa"]) == ["BB", "Aa", "a"]
    assert hash_order(["c", "b", "a"]) == ["a", "b", "c"]


def test_fastjson_text():
    mq = Bean(topic="T", queueId=1, brokerName="b")
    value = Bean(offsetTable=JMap([(mq, Bean(b=1, a=None))]), consumeTps=0.0, name="ü\"\n")
    assert encode(value).decode() == '{"consumeTps":0.0,"name":"ü\\"\\n","offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"b":1}}}'
    assert [java_double(x) for x in (0.0, 12.5, 1 / 3, 1e-4, 1.5e7, 100.0)] == [
        "0.0", "12.5", "0.3333333333333333", "1.0E-4", "1.5E7", "100.0"]
