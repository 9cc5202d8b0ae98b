"""The mqadmin 4.9.8 commands that used to fail against a lab broker (`request type N not
supported`, or an exception in mqadmin), each over real loopback TCP with the request mqadmin sends
and the reply fields mqadmin reads (tools/.../command and DefaultMQAdminExtImpl, 4.9.8):

- exportMetadata: GET_ALL_TOPIC_CONFIG (21) -> TopicConfigSerializeWrapper, and 201;
- getConsumerConfig / exportMetrics: GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) -> SubscriptionGroupWrapper;
- updateSubGroup: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), body SubscriptionGroupConfig;
- deleteSubGroup: DELETE_SUBSCRIPTIONGROUP (207), header groupName + removeOffset;
- updateBrokerConfig: UPDATE_BROKER_CONFIG (25), body `key=value` lines;
- getBrokerConfig: GET_BROKER_CONFIG (26); exportConfigs: GET_BROKER_CLUSTER_INFO (106) to a NameServer,
  then 26 to each master, of which it copies 16 keys (Properties.setProperty(k, null) threw its
  NullPointerException);
- deleteTopic: DELETE_TOPIC_IN_BROKER (215) to each master, then DELETE_TOPIC_IN_NAMESRV (216);
- consumerStatus: GET_CONSUMER_RUNNING_INFO (307), forwarded to the consumer's connection;
- statsAll: VIEW_BROKER_STATS_DATA (315) TOPIC_PUT_NUMS <topic> and GROUP_GET_NUMS <topic@group>;
- producer: GET_ALL_PRODUCER_INFO (328) -> ProducerTableInfo.
"""

from __future__ import annotations

import json
import math
import re
import shutil

import trio

from lab.broker import admin
from lab.broker.store import MessageStore
from lab.clients.consumer import Consumer
from lab.clients.instance import MQClientInstance
from nameserver import bodies
from nameserver.protocol import RequestCode, ResponseCode

TOPIC = "TopicTest"  # the harness broker's topic (tests/lab/conftest.py)

BUILT_IN_GROUPS = {"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                   "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER"}
SUB_GROUP_DEFAULTS = {"brokerId": 0, "consumeBroadcastEnable": True, "consumeEnable": True,
                      "consumeFromMinEnable": True, "notifyConsumerIdsChangedEnable": True, "retryMaxTimes": 16,
                      "retryQueueNums": 1, "whichBrokerWhenConsumeSlowly": 1}
# ExportConfigsCommand.needBrokerProprties copies these into a Properties: a missing one throws.
EXPORT_CONFIGS_KEYS = ("brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime",
                       "filterServerNums", "flushDiskType", "maxMessageSize", "messageDelayLevel",
                       "msgTraceTopicName", "slaveReadEnable", "traceOn", "traceTopicEnable", "useTLS",
                       "autoCreateTopicEnable", "autoCreateSubscriptionGroup")
MQ_KEY = re.compile(r'\{"brokerName":"([^"]*)","queueId":(\d+),"topic":"([^"]*)"\}:')


async def cluster(tcp):
    ns = await tcp.start_nameserver(port=0)
    return ns, await tcp.start_broker()


def route(tcp, ns, topic):
    return tcp.nameservers[ns].routes.pickup_topic_route_data(topic)


def heartbeat(client_id="10.0.0.9@1", *, consumer="cg", producer="pg") -> bytes:
    """HeartbeatData as the Java client sends it (its consumer subscribes to TOPIC)."""
    consumers = [{"groupName": consumer, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                  "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False, "subscriptionDataSet": [
                      {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
                       "subVersion": 1700000000000, "tagsSet": [], "topic": TOPIC}]}] if consumer else []
    return json.dumps({"clientID": client_id, "consumerDataSet": consumers,
                       "producerDataSet": [{"groupName": producer}]}).encode()


def properties(body: bytes) -> dict[str, str]:
    return dict(line.split("=", 1) for line in body.decode().splitlines())


async def subscription_groups(tcp, address: str) -> dict:
    reply = await tcp.call(address, admin.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    wrapper = json.loads(reply.body)
    assert set(wrapper) == {"dataVersion", "subscriptionGroupTable"}
    return wrapper


def sub_group_body(group: str, **changes) -> bytes:
    """What updateSubGroup sends: every field of SubscriptionGroupConfig, fastjson-written."""
    return json.dumps({**SUB_GROUP_DEFAULTS, "groupName": group, **changes}, sort_keys=True).encode()


# --- exportMetadata: 21 -----------------------------------------------------------------------------

async def test_export_metadata_gets_the_topic_table_with_its_data_version(tcp):
    ns, broker = await cluster(tcp)
    reply = await tcp.call(broker.address, admin.GET_ALL_TOPIC_CONFIG)
    assert reply.code == ResponseCode.SUCCESS
    wrapper = json.loads(reply.body)
    assert list(wrapper) == ["dataVersion", "topicConfigTable"]
    assert wrapper["topicConfigTable"][TOPIC] == {
        "order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG", "topicName": TOPIC,
        "topicSysFlag": 0, "writeQueueNums": 4}
    assert "TBW102" in wrapper["topicConfigTable"]
    counter = wrapper["dataVersion"]["counter"]
    await tcp.call(broker.address, RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": "Fresh", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "topicFilterType": "SINGLE_TAG"})
    again = json.loads((await tcp.call(broker.address, admin.GET_ALL_TOPIC_CONFIG)).body)
    assert again["topicConfigTable"]["Fresh"]["writeQueueNums"] == 2
    assert again["dataVersion"]["counter"] == counter + 1


# --- getConsumerConfig / exportMetrics: 201; updateSubGroup: 200; deleteSubGroup: 207 ---------------------

async def test_a_consumer_s_heartbeat_creates_its_subscription_group_with_4_9_8_s_defaults(tcp):
    ns, broker = await cluster(tcp)
    before = await subscription_groups(tcp, broker.address)
    assert set(before["subscriptionGroupTable"]) == BUILT_IN_GROUPS
    assert await tcp.call(broker.address, RequestCode.HEART_BEAT, body=heartbeat(consumer="cg"))
    after = await subscription_groups(tcp, broker.address)
    assert after["subscriptionGroupTable"]["cg"] == {**SUB_GROUP_DEFAULTS, "groupName": "cg"}
    assert after["dataVersion"]["counter"] == before["dataVersion"]["counter"] + 1


async def test_update_sub_group_consume_enable_false_makes_pulls_get_no_permission(tcp):
    ns, broker = await cluster(tcp)
    await tcp.send(broker.address, b"one")
    assert (await tcp.pull(broker.address)).code == ResponseCode.SUCCESS  # the pull creates the group too
    reply = await tcp.call(broker.address, admin.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                           body=sub_group_body("cg", consumeEnable=False, retryMaxTimes=3))
    assert (reply.code, reply.remark) == (ResponseCode.SUCCESS, None)
    table = (await subscription_groups(tcp, broker.address))["subscriptionGroupTable"]
    assert (table["cg"]["consumeEnable"], table["cg"]["retryMaxTimes"]) == (False, 3)
    refused = await tcp.pull(broker.address)
    assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION, "subscription group no permission, cg")
    assert (await tcp.pull(broker.address, consumerGroup="other")).code == ResponseCode.SUCCESS

    await tcp.call(broker.address, admin.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=sub_group_body("cg"))
    assert (await tcp.pull(broker.address)).code == ResponseCode.SUCCESS


async def test_update_sub_group_with_a_bad_body_names_what_is_wrong(tcp):
    ns, broker = await cluster(tcp)
    reply = await tcp.call(broker.address, admin.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                           body=sub_group_body("cg", retryQueueNums="many"))
    assert reply.code == ResponseCode.SYSTEM_ERROR
    assert "retryQueueNums" in reply.remark
    assert "cg" not in (await subscription_groups(tcp, broker.address))["subscriptionGroupTable"]


async def test_delete_sub_group_removes_it_until_a_consumer_of_it_comes_back(tcp):
    ns, broker = await cluster(tcp)
    await tcp.call(broker.address, admin.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                   body=sub_group_body("cg", consumeEnable=False))
    refused = await tcp.call(broker.address, admin.DELETE_SUBSCRIPTIONGROUP, {"groupName": "cg", "removeOffset": "true"})
    assert refused.code == ResponseCode.SYSTEM_ERROR and "removeOffset" in refused.remark
    reply = await tcp.call(broker.address, admin.DELETE_SUBSCRIPTIONGROUP, {"groupName": "cg", "removeOffset": "false"})
    assert (reply.code, reply.remark) == (ResponseCode.SUCCESS, None)
    assert "cg" not in (await subscription_groups(tcp, broker.address))["subscriptionGroupTable"]
    # autoCreateSubscriptionGroup: the next pull creates it again, with the defaults
    assert (await tcp.pull(broker.address)).code == ResponseCode.PULL_NOT_FOUND
    assert (await subscription_groups(tcp, broker.address))["subscriptionGroupTable"]["cg"]["consumeEnable"] is True


# --- updateBrokerConfig: 25; getBrokerConfig / exportConfigs: 26 ------------------------------------------

async def test_get_broker_config_lists_4_9_8_s_keys_with_the_broker_s_real_values(tcp, tmp_path):
    ns = await tcp.start_nameserver(port=0)
    broker = await tcp.start_broker(store=MessageStore(tmp_path / "commitlog"))
    reply = await tcp.call(broker.address, admin.GET_BROKER_CONFIG)
    props = properties(reply.body)
    assert len(props) >= 177
    assert all(props.get(key) for key in EXPORT_CONFIGS_KEYS), [k for k in EXPORT_CONFIGS_KEYS if k not in props]
    host, port = broker.address.rsplit(":", 1)
    assert {k: props[k] for k in ("listenPort", "brokerName", "brokerId", "namesrvAddr", "brokerRole",
                                  "flushDiskType", "storePathCommitLog", "autoCreateSubscriptionGroup",
                                  "messageDelayLevel", "maxMessageSize", "fileReservedTime")} == {
        "listenPort": port, "brokerName": "broker-a", "brokerId": "0", "namesrvAddr": ns,
        "brokerRole": "ASYNC_MASTER", "flushDiskType": "ASYNC_FLUSH", "storePathCommitLog": str(tmp_path / "commitlog"),
        "autoCreateSubscriptionGroup": "true", "messageDelayLevel": "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
        "maxMessageSize": "4194304", "fileReservedTime": "72"}


async def test_update_broker_config_changes_what_the_broker_does_and_what_get_broker_config_says(tcp):
    ns, broker = await cluster(tcp)
    reply = await tcp.call(broker.address, admin.UPDATE_BROKER_CONFIG,
                           body=b"brokerPermission=4\nfileReservedTime=48\n")
    assert (reply.code, reply.remark) == (ResponseCode.SUCCESS, None)
    # answered after the registration: the NameServer's route already carries the read-only broker
    assert route(tcp, ns, TOPIC).queue_datas[0].perm == 4
    assert (await tcp.send(broker.address)).code == ResponseCode.NO_PERMISSION
    config = await tcp.call(broker.address, admin.GET_BROKER_CONFIG)
    props = properties(config.body)
    assert (props["brokerPermission"], props["fileReservedTime"]) == ("4", "48")
    assert json.loads(config.ext_fields["version"])["counter"] == 1

    # autoCreateTopicEnable=false: a send to an unknown topic is no longer created from TBW102
    await tcp.call(broker.address, admin.UPDATE_BROKER_CONFIG, body=b"brokerPermission=6\nautoCreateTopicEnable=false\n")
    missing = await tcp.send(broker.address, topic="NeverCreated")
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    assert properties((await tcp.call(broker.address, admin.GET_BROKER_CONFIG)).body)["autoCreateTopicEnable"] == "false"


async def test_update_broker_config_refuses_black_listed_unknown_and_badly_typed_keys(tcp):
    ns, broker = await cluster(tcp)
    black = await tcp.call(broker.address, admin.UPDATE_BROKER_CONFIG, body=b"rocketmqHome=/tmp\n")
    assert (black.code, black.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    unknown = await tcp.call(broker.address, admin.UPDATE_BROKER_CONFIG, body=b"brokerPermision=4\n")
    assert unknown.code == ResponseCode.SYSTEM_ERROR and "brokerPermision" in unknown.remark
    bad = await tcp.call(broker.address, admin.UPDATE_BROKER_CONFIG, body=b"fileReservedTime=two days\n")
    assert bad.code == ResponseCode.SYSTEM_ERROR and "fileReservedTime" in bad.remark
    perm = await tcp.call(broker.address, admin.UPDATE_BROKER_CONFIG, body=b"brokerPermission=64\n")
    assert perm.code == ResponseCode.SYSTEM_ERROR and "brokerPermission=64" in perm.remark
    props = properties((await tcp.call(broker.address, admin.GET_BROKER_CONFIG)).body)
    assert (props["fileReservedTime"], props["brokerPermission"]) == ("72", "6")


async def test_auto_create_subscription_group_false_makes_an_unknown_group_s_pull_fail(tcp):
    ns, broker = await cluster(tcp)
    await tcp.call(broker.address, admin.UPDATE_BROKER_CONFIG, body=b"autoCreateSubscriptionGroup=false\n")
    reply = await tcp.pull(broker.address, consumerGroup="stranger")
    assert reply.code == admin.SUBSCRIPTION_GROUP_NOT_EXIST
    assert reply.remark.startswith("subscription group [stranger] does not exist, ")


# --- deleteTopic: 215 then 216 -------------------------------------------------------------------------

async def test_delete_topic_leaves_the_broker_and_every_name_server_and_stays_gone(tcp):
    ns = await tcp.start_nameserver(port=0)
    ns2 = await tcp.start_nameserver("ns-1", port=0)
    broker = await tcp.start_broker()
    assert route(tcp, ns, TOPIC) is not None and route(tcp, ns2, TOPIC) is not None
    reply = await tcp.call(broker.address, admin.DELETE_TOPIC_IN_BROKER, {"topic": TOPIC})
    assert (reply.code, reply.remark) == (ResponseCode.SUCCESS, None)
    config = json.loads((await tcp.call(broker.address, admin.GET_ALL_TOPIC_CONFIG)).body)
    assert TOPIC not in config["topicConfigTable"]
    for address in (ns, ns2):  # mqadmin then asks every NameServer
        assert (await tcp.call(address, RequestCode.DELETE_TOPIC_IN_NAMESRV,
                               {"topic": TOPIC, "clusterName": "DefaultCluster"})).code == ResponseCode.SUCCESS
    await broker.broker.register_broker_all("period")  # the next registration does not bring it back
    assert route(tcp, ns, TOPIC) is None and route(tcp, ns2, TOPIC) is None
    refused = await tcp.call(broker.address, admin.DELETE_TOPIC_IN_BROKER, {"topic": "TBW102"})
    assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR, "The topic[TBW102] is conflict with system topic.")


# --- consumerStatus: 307 -------------------------------------------------------------------------------

async def test_consumer_status_gets_the_lab_consumer_s_running_info_through_the_broker(tcp):
    tcp.config.consumer.rebalanceInterval = 0.5  # its retry queue comes with the rebalance after its route
    ns, broker = await cluster(tcp)
    node = tcp.node("consumer-0")
    consumer = Consumer(node, MQClientInstance(node, [ns], tcp.nursery), [TOPIC])
    await consumer.start()
    group = consumer.consumer_group
    with trio.fail_after(10):
        while len(consumer.process_queue_table) < 5:  # 4 of TOPIC, 1 of %RETRY%<group>
            await trio.sleep(0.05)
    connection = json.loads((await tcp.call(broker.address, admin.GET_CONSUMER_CONNECTION_LIST,
                                            {"consumerGroup": group})).body)
    client_id = connection["connectionSet"][0]["clientId"]
    assert set(connection["subscriptionTable"]) == {TOPIC, f"%RETRY%{group}"}  # copySubscription's retry topic

    reply = await tcp.call(broker.address, RequestCode.GET_CONSUMER_RUNNING_INFO,
                           {"consumerGroup": group, "clientId": client_id, "jstackEnable": "false"})
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    text = reply.body.decode()
    assert [(b, int(q), t) for b, q, t in MQ_KEY.findall(text)] == \
        [("broker-a", 0, f"%RETRY%{group}")] + [("broker-a", q, TOPIC) for q in range(4)]  # MessageQueue order
    info = json.loads(MQ_KEY.sub(lambda m: json.dumps(f"{m[3]}:{m[1]}:{m[2]}") + ":", text))
    assert set(info) == {"mqTable", "properties", "statusTable", "subscriptionSet"}
    props = info["properties"]
    assert props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY" and props["PROP_CONSUMEORDERLY"] == "false"
    assert int(props["PROP_CONSUMER_START_TIMESTAMP"]) > 1_600_000_000_000
    assert props["PROP_NAMESERVER_ADDR"] == f"{ns};" and props["PROP_CLIENT_VERSION"] == "V4_9_8"
    assert [s["topic"] for s in info["subscriptionSet"]] == sorted([TOPIC, f"%RETRY%{group}"])
    assert list(info["statusTable"]) == sorted([TOPIC, f"%RETRY%{group}"])
    assert all("commitOffset" in pq for pq in info["mqTable"].values())

    absent = await tcp.call(broker.address, RequestCode.GET_CONSUMER_RUNNING_INFO,
                            {"consumerGroup": group, "clientId": "10.9.9.9@nobody", "jstackEnable": "false"})
    assert (absent.code, absent.remark) == (ResponseCode.SYSTEM_ERROR,
                                            f"The Consumer <{group}> <10.9.9.9@nobody> not online")
    await consumer.shutdown()


# --- statsAll: 315 -------------------------------------------------------------------------------------

async def test_stats_all_gets_each_topic_s_puts_and_each_group_s_gets(tcp):
    ns, broker = await cluster(tcp)
    missing = await tcp.call(broker.address, admin.VIEW_BROKER_STATS_DATA,
                             {"statsName": "TOPIC_PUT_NUMS", "statsKey": TOPIC})
    assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR, f"The stats <TOPIC_PUT_NUMS> <{TOPIC}> not exist")
    for i in range(5):
        await tcp.send(broker.address, b"m%d" % i, queue_id=i % 4)
    reply = await tcp.call(broker.address, admin.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS", "statsKey": TOPIC})
    assert reply.code == ResponseCode.SUCCESS
    data = json.loads(reply.body)
    assert list(data) == ["statsDay", "statsHour", "statsMinute"]
    assert [data[w]["sum"] for w in ("statsMinute", "statsHour", "statsDay")] == [5, 5, 5]
    assert data["statsMinute"]["tps"] > 0  # statsAll's #InTPS: no longer 0.00 while producers send
    assert data["statsMinute"]["avgpt"] == 1.0

    await tcp.pull(broker.address)  # queue 0 holds m0 and m4
    gets = json.loads((await tcp.call(broker.address, admin.VIEW_BROKER_STATS_DATA,
                                      {"statsName": "GROUP_GET_NUMS", "statsKey": f"{TOPIC}@cg"})).body)
    assert gets["statsMinute"]["sum"] == 2 and gets["statsMinute"]["tps"] > 0
    # the Dashboard's broker figures, keyed by the cluster name
    puts = json.loads((await tcp.call(broker.address, admin.VIEW_BROKER_STATS_DATA,
                                      {"statsName": "BROKER_PUT_NUMS", "statsKey": "DefaultCluster"})).body)
    assert puts["statsMinute"]["sum"] == 5 and puts["statsDay"]["sum"] == 5


# --- producer: 328 -------------------------------------------------------------------------------------

async def test_producer_lists_every_producer_group_s_clients(tcp):
    ns, broker = await cluster(tcp)
    await tcp.call(broker.address, RequestCode.HEART_BEAT, body=heartbeat("10.0.0.9@7", consumer=None, producer="pg"))
    reply = await tcp.call(broker.address, admin.GET_ALL_PRODUCER_INFO)
    assert reply.code == ResponseCode.SUCCESS
    data = json.loads(reply.body)["data"]
    producer, = data["pg"]
    assert set(producer) == {"clientId", "language", "lastUpdateTimestamp", "remoteIP", "version"}
    assert producer["clientId"] == "10.0.0.9@7" and producer["version"] == 409
    assert re.fullmatch(r"/127\.0\.0\.1:\d+", producer["remoteIP"])
    assert producer["lastUpdateTimestamp"] > 1_600_000_000_000


# --- brokerStatus / clusterList: 28 ------------------------------------------------------------------------

async def test_broker_status_has_4_9_8_s_latency_keys_and_its_disk_ratio(tcp, tmp_path):
    ns = await tcp.start_nameserver(port=0)
    broker = await tcp.start_broker(store=MessageStore(tmp_path / "commitlog"))
    table = json.loads((await tcp.call(broker.address, admin.GET_BROKER_RUNTIME_INFO)).body)["table"]
    assert (table["putLatency99"], table["putLatency999"], table["putMessageFailedTimes"]) == ("0.00", "0.00", "0")
    usage = shutil.disk_usage(tmp_path)
    # UtilAll.getDiskPartitionSpaceUsedPercent: used / (used + usable), rounded up to a percent
    expected = math.ceil(usage.used * 100 / (usage.used + usage.free)) / 100
    assert abs(float(table["commitLogDiskRatio"]) - expected) <= 0.01


async def test_export_metadata_and_metrics_get_the_system_topic_list_to_leave_out(tcp):
    """DefaultMQAdminExtImpl.getUserTopicConfig: 21, then GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305),
    whose topics it removes from the table."""
    ns, broker = await cluster(tcp)
    reply = await tcp.call(broker.address, admin.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
    assert reply.code == ResponseCode.SUCCESS
    topics = json.loads(reply.body)["topicList"]
    assert set(topics) == {"TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
                           "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
                           "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "DefaultCluster", "broker-a",
                           "DefaultCluster_REPLY_TOPIC"}


# --- exportConfigs: 106 to a NameServer, then 26 to each master -------------------------------------------

def java_properties(text: str) -> dict[str, str]:
    """java.util.Properties.load, as MixAll.string2Properties reads GET_BROKER_CONFIG's body:
    comments (# !), a key ends at the first unescaped '=', ':' or blank, backslash escapes,
    continuation lines."""
    props, lines, i = {}, text.splitlines(), 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while line.endswith("\\") and (len(line) - len(line.rstrip("\\"))) % 2 and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        key, at = [], 0
        while at < len(line) and line[at] not in "=: \t\f":
            if line[at] == "\\" and at + 1 < len(line):
                at += 1
            key.append(line[at])
            at += 1
        rest = line[at:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        value = re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(m[1], m[1]), rest)
        props["".join(key)] = value
    return props


async def test_export_configs_reads_each_master_s_16_keys_and_counts_the_cluster(tcp, tmp_path):
    """ExportConfigsCommand (4.9.8): GET_BROKER_CLUSTER_INFO (106) from the NameServer, the brokers
    of cluster -c split into masters (id 0) and slaves (CommandUtil.fetchMasterAndSlaveDistinguish),
    GET_BROKER_CONFIG (26) of each master, its body read by Properties.load, and 16 of its keys put
    into a Properties (a missing one threw the NullPointerException); configs.json gets those per
    brokerName and clusterScale (namesrvSize, masterBrokerSize, slaveBrokerSize)."""
    ns = await tcp.start_nameserver(port=0)
    master = await tcp.start_broker(store=MessageStore(tmp_path / "a0"))
    slave = await tcp.start_broker("broker-a-1", broker_id=1, store=MessageStore(tmp_path / "a1"),
                                   master_addr=master.address)
    other = await tcp.start_broker("broker-b-0", broker_name="broker-b", store=MessageStore(tmp_path / "b0"))
    await tcp.call(other.address, admin.UPDATE_BROKER_CONFIG, body=b"fileReservedTime=48\n")

    reply = await tcp.call(ns, RequestCode.GET_BROKER_CLUSTER_INFO)
    assert reply.code == ResponseCode.SUCCESS
    info = bodies.load(reply.body, 0)
    masters: dict[str, list[str]] = {}
    for name in info["clusterAddrTable"]["DefaultCluster"]:
        addrs = {int(k): v for k, v in info["brokerAddrTable"][name]["brokerAddrs"].items()}
        masters[addrs[0]] = [a for i, a in addrs.items() if i != 0]
    assert masters == {master.address: [slave.address], other.address: []}

    broker_configs = {}
    for addr in masters:
        config = await tcp.call(addr, admin.GET_BROKER_CONFIG)
        assert config.code == ResponseCode.SUCCESS, config.remark
        props = java_properties(config.body.decode("iso-8859-1"))
        assert [k for k in EXPORT_CONFIGS_KEYS if props.get(k) is None] == []  # setProperty(k, null): NPE
        broker_configs[props["brokerName"]] = {k: props[k] for k in EXPORT_CONFIGS_KEYS}
    result = {"brokerConfigs": broker_configs, "clusterScale": {
        "namesrvSize": 1, "masterBrokerSize": len(masters), "slaveBrokerSize": sum(map(len, masters.values()))}}
    assert result["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 2, "slaveBrokerSize": 1}
    a, b = broker_configs["broker-a"], broker_configs["broker-b"]
    assert (a["brokerClusterName"], a["brokerId"], a["brokerRole"], a["fileReservedTime"]) == \
        ("DefaultCluster", "0", "ASYNC_MASTER", "72")
    assert (b["brokerName"], b["fileReservedTime"], b["flushDiskType"]) == ("broker-b", "48", "ASYNC_FLUSH")
    assert a["messageDelayLevel"] == "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    assert {a[k] for k in ("slaveReadEnable", "traceOn", "traceTopicEnable", "useTLS", "autoCreateTopicEnable",
                           "autoCreateSubscriptionGroup")} <= {"true", "false"}
    # a slave answers 26 too (exportConfigs does not ask it): its role is SLAVE
    slave_props = java_properties((await tcp.call(slave.address, admin.GET_BROKER_CONFIG)).body.decode("iso-8859-1"))
    assert (slave_props["brokerRole"], slave_props["brokerId"]) == ("SLAVE", "1")


# --- cloneGroupOffset: 105, 208, 105, then 15 per queue ----------------------------------------------------

async def test_clone_group_offset_copies_every_queue_s_offset_the_consume_stats_list(tcp):
    """CloneGroupOffsetCommand (4.9.8): examineConsumeStats(srcGroup) — the route of
    %RETRY%<srcGroup> (105), GET_CONSUME_STATS (208) to each of its brokers — then the topic's
    route (105) and UPDATE_CONSUMER_OFFSET (15) of destGroup for every queue of the stats, the
    retry queue too, to the broker of its name."""
    tcp.config.consumer.rebalanceInterval = 0.5
    ns, broker = await cluster(tcp)
    node = tcp.node("consumer-0")
    consumer = Consumer(node, MQClientInstance(node, [ns], tcp.nursery), [TOPIC])
    await consumer.start()
    src = consumer.consumer_group
    with trio.fail_after(10):
        while len(consumer.process_queue_table) < 5:
            await trio.sleep(0.05)
    for i in range(6):
        await tcp.send(broker.address, b"m%d" % i, queue_id=i % 3)
    with trio.fail_after(10):
        while len(tcp.kinds("consumer.consume")) < 6:
            await trio.sleep(0.05)
    await consumer.persist_consumer_offset()
    await consumer.shutdown()

    retry_route = route(tcp, ns, f"%RETRY%{src}")
    assert [b.broker_name for b in retry_route.broker_datas] == ["broker-a"]
    stats = await tcp.call(broker.address, admin.GET_CONSUME_STATS, {"consumerGroup": src})
    assert stats.code == ResponseCode.SUCCESS
    text = stats.body.decode()
    table = json.loads(MQ_KEY.sub(lambda m: json.dumps(f"{m[1]}|{m[3]}|{m[2]}") + ":", text))["offsetTable"]
    # TopicTest's 4 queues; the retry queue once its first pull came back (held 15 s while empty)
    assert {(k.split("|")[1], k.split("|")[2]) for k in table} >= {(TOPIC, str(q)) for q in range(4)}
    addr = {b.broker_name: b.broker_addrs[0] for b in route(tcp, ns, TOPIC).broker_datas}
    for key, wrapper in table.items():
        broker_name, topic, queue_id = key.split("|")
        if wrapper["consumerOffset"] >= 0:
            reply = await tcp.call(addr[broker_name], RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": "cloned", "topic": topic, "queueId": queue_id, "commitOffset": wrapper["consumerOffset"]})
            assert reply.code == ResponseCode.SUCCESS
    offsets = broker.broker.store.consumer_offsets
    cloned = {(t, q): o for (g, t, q), o in offsets.items() if g == "cloned"}
    assert cloned == {(k.split("|")[1], int(k.split("|")[2])): w["consumerOffset"] for k, w in table.items()}
    # what the source committed, and 0 for a queue it had none on (getConsumeStats says 0 there too)
    assert cloned == {**{(t, q): o for (g, t, q), o in offsets.items() if g == src}, (TOPIC, 3): 0}
    assert [cloned[(TOPIC, q)] for q in range(4)] == [2, 2, 2, 0]
