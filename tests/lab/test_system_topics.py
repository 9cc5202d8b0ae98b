"""A lab broker's system topics, as 4.9.8's TopicConfigManager constructor creates them: in its table
from the start, registered with every NameServer, decided by the broker config's keys
(autoCreateTopicEnable, clusterTopicEnable, brokerTopicEnable, traceTopicEnable, msgTraceTopicName).

mqadmin reads them through topicList (206 to a NameServer), topicRoute (105), exportMetadata (21
less 305's list) and sendMsgStatus, which sends to the topic named after the broker (its route
goes to that broker alone).
"""

from __future__ import annotations

import json

import pytest
import trio

from lab.broker import admin
from lab.broker.store import MessageStore
from lab.broker.topic_config import system_topics
from nameserver.protocol import RequestCode, ResponseCode, fastjson
from nameserver.routes import TopicConfig

from test_mqadmin_commands import TOPIC, route

DEFAULTS = dict(auto_create_topic_enable=True, default_topic_queue_nums=8, cluster_topic_enable=True,
                broker_topic_enable=True, trace_topic_enable=False, msg_trace_topic_name="RMQ_SYS_TRACE_TOPIC")

# 4.9.8's table for broker-a of DefaultCluster with BrokerConfig's defaults: (read, write, perm), in
# the constructor's order. 16 queues is TopicConfig's default; 7 = inherit + read + write.
DEFAULT_TABLE = {
    "SELF_TEST_TOPIC": (1, 1, 6),
    "TBW102": (8, 8, 7),
    "BenchmarkTest": (1024, 1024, 6),
    "DefaultCluster": (16, 16, 7),
    "broker-a": (1, 1, 7),
    "OFFSET_MOVED_EVENT": (1, 1, 6),
    "SCHEDULE_TOPIC_XXXX": (18, 18, 6),
    "DefaultCluster_REPLY_TOPIC": (1, 1, 6),
}


def shape(table: dict[str, TopicConfig]) -> dict[str, tuple[int, int, int]]:
    return {name: (tc.read_queue_nums, tc.write_queue_nums, tc.perm) for name, tc in table.items()}


def test_the_default_config_gives_4_9_8_s_system_topics():
    assert shape(system_topics("DefaultCluster", "broker-a", **DEFAULTS)) == DEFAULT_TABLE
    assert list(system_topics("DefaultCluster", "broker-a", **DEFAULTS)) == list(DEFAULT_TABLE)


def test_the_broker_config_s_keys_decide_which_and_how():
    table = shape(system_topics("c1", "b1", **{
        **DEFAULTS, "auto_create_topic_enable": False, "cluster_topic_enable": False,
        "broker_topic_enable": False, "trace_topic_enable": True, "msg_trace_topic_name": "MyTrace",
        "default_topic_queue_nums": 4}))
    assert "TBW102" not in table
    assert (table["c1"], table["b1"]) == ((16, 16, 1), (1, 1, 1)), "inherit-only without the enable keys"
    assert table["MyTrace"] == (1, 1, 6)
    assert table["c1_REPLY_TOPIC"] == (1, 1, 6)
    assert shape(system_topics("c1", "b1", **{**DEFAULTS, "default_topic_queue_nums": 4}))["TBW102"] == (4, 4, 7)


async def test_every_name_server_routes_the_system_topics_from_the_first_registration(tcp):
    ns = await tcp.start_nameserver(port=0)
    broker = await tcp.start_broker()
    table = broker.broker.topic_config_manager.topic_config_table
    assert {name: shape(table)[name] for name in DEFAULT_TABLE} == DEFAULT_TABLE
    assert tcp.kinds("broker.register")[0]["trigger"] != "update_topic"
    for name, (read, write, perm) in DEFAULT_TABLE.items():
        queue, = route(tcp, ns, name).queue_datas
        assert (queue.broker_name, queue.read_queue_nums, queue.write_queue_nums, queue.perm) == \
            ("broker-a", read, write, perm), name
    # topicList: GET_ALL_TOPIC_LIST_FROM_NAMESERVER's TopicList
    reply = await tcp.call(ns, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert set(json.loads(reply.body)["topicList"]) == {TOPIC, *DEFAULT_TABLE}


async def test_export_metadata_s_user_topics_are_the_table_less_the_system_topic_list(tcp):
    """DefaultMQAdminExtImpl.getUserTopicConfig: 21's table without 305's topics (and, with -s,
    without %RETRY% / %DLQ% ones): only the topic the broker was given is left."""
    await tcp.start_nameserver(port=0)
    broker = await tcp.start_broker()
    table = json.loads((await tcp.call(broker.address, admin.GET_ALL_TOPIC_CONFIG)).body)["topicConfigTable"]
    system = json.loads((await tcp.call(broker.address, admin.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)).body)["topicList"]
    assert set(table) - set(system) == {TOPIC}


async def test_send_msg_status_s_messages_go_to_the_broker_named_in_its_topic(tcp):
    """sendMsgStatus -b broker-b, and clusterRT for each broker name of GET_BROKER_CLUSTER_INFO's
    clusterAddrTable: a producer sends to the topic named after the broker; its route has that
    broker's one queue only, and that broker stores the message under that topic."""
    ns = await tcp.start_nameserver(port=0)
    first = await tcp.start_broker()
    other = await tcp.start_broker("broker-b-0", broker_name="broker-b")
    info = fastjson.loads((await tcp.call(ns, RequestCode.GET_BROKER_CLUSTER_INFO)).body)  # legacy int keys
    assert sorted(info["clusterAddrTable"]["DefaultCluster"]) == ["broker-a", "broker-b"]
    for name, running in (("broker-a", first), ("broker-b", other)):
        queue, = route(tcp, ns, name).queue_datas
        bd, = route(tcp, ns, name).broker_datas
        assert (queue.broker_name, queue.write_queue_nums, bd.broker_addrs[0]) == (name, 1, running.address)
    topic_route = route(tcp, ns, "broker-b")
    assert [(q.broker_name, q.write_queue_nums) for q in topic_route.queue_datas] == [("broker-b", 1)]
    assert [bd.broker_name for bd in topic_route.broker_datas] == ["broker-b"]
    reply = await tcp.send(other.address, b"x" * 128, topic="broker-b", queue_id=0)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert (reply.ext_fields["queueId"], reply.ext_fields["queueOffset"]) == ("0", "0")
    assert other.broker.store.max_offset("broker-b", 0) == 1


async def test_a_topic_the_table_already_holds_keeps_its_config(tcp):
    """topics.json is loaded after the constructor's topics: what it holds wins."""
    await tcp.start_nameserver(port=0)
    held = TopicConfig("SCHEDULE_TOPIC_XXXX", 2, 2, 4)
    broker = await tcp.start_broker(topics={TOPIC: TopicConfig(TOPIC, 4, 4, 6), held.topic_name: held})
    assert broker.broker.topic_config_manager.select("SCHEDULE_TOPIC_XXXX") == held
    assert broker.broker.topic_config_manager.select("OFFSET_MOVED_EVENT") == TopicConfig("OFFSET_MOVED_EVENT", 1, 1, 6)


async def test_the_keys_update_broker_config_kept_decide_at_the_next_start(tcp, tmp_path):
    """updateBrokerConfig writes the broker's properties file; the keys are read as the broker
    starts (TopicConfigManager's constructor), so a restart on a new topic table takes them."""
    ns = await tcp.start_nameserver(port=0)
    path = tmp_path / "broker-a-0.store"
    store = MessageStore(path)
    broker = await tcp.start_broker(store=store)
    reply = await tcp.call(broker.address, admin.UPDATE_BROKER_CONFIG, body=(
        b"clusterTopicEnable=false\nbrokerTopicEnable=false\ntraceTopicEnable=true\n"))
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert route(tcp, ns, "RMQ_SYS_TRACE_TOPIC") is None, "read at start only"
    port = int(broker.address.rpartition(":")[2])
    broker.kill()
    store.close()
    await trio.sleep(0.2)
    restarted = await tcp.start_broker(store=MessageStore(path), port=port)
    perms = {name: route(tcp, ns, name).queue_datas[0].perm for name in ("DefaultCluster", "broker-a")}
    assert perms == {"DefaultCluster": 1, "broker-a": 1}
    queue, = route(tcp, ns, "RMQ_SYS_TRACE_TOPIC").queue_datas
    assert (queue.write_queue_nums, queue.perm) == (1, 6)
    assert restarted.broker.topic_config_manager.select("RMQ_SYS_TRACE_TOPIC") is not None


@pytest.mark.parametrize("code", [RequestCode.UPDATE_AND_CREATE_TOPIC, admin.DELETE_TOPIC_IN_BROKER])
async def test_the_cluster_s_reply_topic_cannot_be_changed_or_deleted(tcp, code):
    ns = await tcp.start_nameserver(port=0)
    broker = await tcp.start_broker()
    reply = await tcp.call(broker.address, code, {
        "topic": "DefaultCluster_REPLY_TOPIC", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
        "topicFilterType": "SINGLE_TAG"})
    assert (reply.code, reply.remark) == (ResponseCode.SYSTEM_ERROR,
                                          "The topic[DefaultCluster_REPLY_TOPIC] is conflict with system topic.")
    assert route(tcp, ns, "DefaultCluster_REPLY_TOPIC").queue_datas[0].write_queue_nums == 1
