"""Bodies byte for byte as 4.9.8 writes them (issue 19): text, null KV values and HashMap order.

Every non-route body is RemotingSerializable.encode, i.e. plain JSON.toJSONString: text as UTF-8,
unescaped; bean fields sorted; maps in their HashMap iteration order; null map values dropped.
Only GET_ROUTEINFO_BY_TOPIC for a 4.9.4+ requester uses BrowserCompatible (\\uXXXX, upper-case
hex, as fastjson's IOUtils.DIGITS) with MapSortField (spec §3.3).

Bucket numbers in comments are (h ^ h >>> 16) & (capacity - 1) of String.hashCode (see
test_java_order.py): with 16 buckets "主题" is 7, "TopicTest" 9, "broker-a" 11, "集群" 12,
"键" 14, "C1" 14, "C2" 15; with 32 buckets C1 is 14 and C2 15.
"""

from __future__ import annotations

import pytest

from nameserver.java_order import hashmap_order
from nameserver.kvconfig import KVConfigManager
from nameserver.protocol import RemotingCommand, RequestCode as RC, ResponseCode, SerializeType
from nameserver.protocol.headers import decode_header, encode_header
from nameserver.routes import DataVersion

A0 = "10.0.0.1:10911"


def body(reply) -> bytes:
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return reply.body


# --- 1. non-ASCII text goes out as UTF-8 in every non-route body --------------------------------------

def test_topic_list_writes_utf8(ns, h):
    ns.register(table=h.topics("TopicTest", "主题"))
    assert body(ns.call(RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)) == '{"topicList":["主题","TopicTest"]}'.encode()


def test_topics_by_cluster_writes_utf8(ns, h):
    ns.register(cluster="集群", table=h.topics("主题"))
    assert body(ns.call(RC.GET_TOPICS_BY_CLUSTER, {"cluster": "集群"})) == '{"topicList":["主题"]}'.encode()


def test_system_topic_list_writes_utf8(ns):
    ns.register(cluster="集群")
    # Fresh HashSet: broker-a (11) before 集群 (12).
    assert body(ns.call(RC.GET_SYSTEM_TOPIC_LIST_FROM_NS)) == (
        '{"brokerAddr":"10.0.0.1:10911","topicList":["broker-a","集群"]}'.encode())


def test_kv_list_writes_utf8(ns):
    ns.call(RC.PUT_KV_CONFIG, {"namespace": "ns1", "key": "键", "value": "值/\x01"})
    # Plain fastjson: '/' as is, a C0 control as \\u00XX.
    assert body(ns.call(RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns1"})) == (
        '{"table":{"键":"值/\\u0001"}}'.encode())


def test_register_reply_kv_table_writes_utf8(ns, h):
    ns.call(RC.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "主题", "value": "broker-a:4"})
    assert body(ns.register(table=h.topics("主题"))) == '{"table":{"主题":"broker-a:4"}}'.encode()


def test_cluster_info_writes_utf8(ns):
    ns.register(cluster="集群")
    assert body(ns.call(RC.GET_BROKER_CLUSTER_INFO)) == (
        '{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
        '"cluster":"集群"}},"clusterAddrTable":{"集群":["broker-a"]}}').encode()


def test_route_escapes_only_for_a_standard_json_requester(ns, h):
    ns.register(cluster="集群/x", table=h.topics("TopicTest"))
    tail = ('"brokerName":"broker-a","cluster":"{}"}}],"filterServerTable":{{}},"queueDatas":[{{"brokerName":'
            '"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}}]}}')
    # BrowserCompatible: \\uXXXX with upper-case hex, and '/' as '\\/'.
    assert body(ns.route(version=401)) == (
        '{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},' + tail.format("\\u96C6\\u7FA4\\/x")).encode()
    # A pre-4.9.4 requester gets plain fastjson: UTF-8, unquoted integer keys.
    assert body(ns.route(version=317)) == (
        '{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911"},' + tail.format("集群/x")).encode()


# --- 2. PUT_KV_CONFIG without a value stores null -------------------------------------------------------

def test_a_null_value_is_no_config_item(ns):
    assert ns.call(RC.PUT_KV_CONFIG, {"namespace": "ns1", "key": "k"}).code == ResponseCode.SUCCESS
    got = ns.call(RC.GET_KV_CONFIG, {"namespace": "ns1", "key": "k"})
    assert (got.code, got.remark, got.ext_fields) == (
        ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: ns1 Key: k", {})
    # The namespace exists, the key is left out of its table (fastjson drops null values).
    assert body(ns.call(RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns1"})) == b'{"table":{}}'
    ns.call(RC.PUT_KV_CONFIG, {"namespace": "ns1", "key": "k2", "value": "v2"})
    assert body(ns.call(RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns1"})) == b'{"table":{"k2":"v2"}}'


def test_an_empty_value_is_a_value(ns):
    ns.call(RC.PUT_KV_CONFIG, {"namespace": "ns1", "key": "k", "value": ""})
    got = ns.call(RC.GET_KV_CONFIG, {"namespace": "ns1", "key": "k"})
    assert (got.code, got.ext_fields) == (ResponseCode.SUCCESS, {"value": ""})


def test_an_empty_rocketmq_header_value_decodes_as_null(ns):
    # Spec §1.3: in the ROCKETMQ header a zero-length value decodes as null.
    put = RemotingCommand.request(RC.PUT_KV_CONFIG, {"namespace": "ns1", "key": "k", "value": ""},
                                  serialize_type=SerializeType.ROCKETMQ)
    ns.send(decode_header(SerializeType.ROCKETMQ, encode_header(put)))
    assert ns.call(RC.GET_KV_CONFIG, {"namespace": "ns1", "key": "k"}).code == ResponseCode.QUERY_NOT_FOUND


def test_register_reply_leaves_a_null_order_config_out(ns):
    ns.call(RC.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"})
    # The namespace exists, so the reply has a body: an empty table.
    assert body(ns.register()) == b'{"table":{}}'


def test_the_kv_file_drops_null_values_as_java_writes_it(h, tmp_path):
    path = tmp_path / "kvConfig.json"
    ns = h.Ns(kvConfigPath=str(path))
    ns.call(RC.PUT_KV_CONFIG, {"namespace": "ns1", "key": "k"})
    ns.call(RC.PUT_KV_CONFIG, {"namespace": "ns1", "key": "键", "value": "值"})
    # KVConfigSerializeWrapper.toJson(): compact, UTF-8, no null value.
    assert path.read_bytes() == '{"configTable":{"ns1":{"键":"值"}}}'.encode()

    restarted = h.Ns(kvConfigPath=str(path))
    assert restarted.call(RC.GET_KV_CONFIG, {"namespace": "ns1", "key": "k"}).code == ResponseCode.QUERY_NOT_FOUND
    assert body(restarted.call(RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns1"})) == '{"table":{"键":"值"}}'.encode()


def test_kv_tables_come_out_in_hash_order(tmp_path):
    kv = KVConfigManager(str(tmp_path / "kv.json"))
    for ns in ("C2", "C1"):
        for key in ("C2", "C1", "键"):
            kv.put_kv_config(ns, key, "v")
    # 16 buckets: C1 14, C2 15, 键 14 (after C1, inserted later): C1, 键, C2.
    assert list(kv.get_kv_list_by_namespace("C1")) == ["C1", "键", "C2"]
    assert (tmp_path / "kv.json").read_bytes() == (
        '{"configTable":{"C1":{"C1":"v","键":"v","C2":"v"},"C2":{"C1":"v","键":"v","C2":"v"}}}').encode()


# --- 3. HashMap order where it reaches the wire -------------------------------------------------------

def test_last_address_of_a_name_in_two_clusters_leaves_the_first_cluster_in_hash_order(ns, h):
    """broker-a's master registers in C2, then a slave under the same name in C1. When the last
    address closes, 4.9.8's onChannelDestroy removes the name from the first cluster holding it in
    clusterAddrTable's order (32 buckets: C1 14, C2 15), not the first registered."""
    slave = "10.0.1.1:10911"
    ns.register("broker-a", 0, cluster="C2", table=h.topics("X"))
    ns.register("broker-a", 1, cluster="C1")
    ns.proc.on_channel_destroy(ns.channel(slave), slave)
    ns.proc.on_channel_destroy(ns.channel(A0), A0)

    assert body(ns.call(RC.GET_BROKER_CLUSTER_INFO)) == b'{"brokerAddrTable":{},"clusterAddrTable":{"C2":["broker-a"]}}'

    # The master comes back in C1: C2 still names broker-a, so its topics count for C2 too.
    ns.register("broker-a", 0, cluster="C1", table=h.topics("X"), now=1)
    assert body(ns.call(RC.GET_TOPICS_BY_CLUSTER, {"cluster": "C2"})) == b'{"topicList":["X"]}'
    assert body(ns.call(RC.GET_BROKER_CLUSTER_INFO)) == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"C1"}},"clusterAddrTable":{"C1":["broker-a"],"C2":["broker-a"]}}')


def test_cluster_info_is_in_hash_order(ns):
    for name in ("broker-c", "broker-a", "broker-b"):
        ns.register(name, 0, cluster="C2" if name == "broker-c" else "C1")
    # brokerAddrTable (128 buckets): broker-b 88, broker-c 89, broker-a 91; clusterAddrTable: C1,
    # C2; C1's HashSet (16): broker-b 8, broker-a 11.
    info = body(ns.call(RC.GET_BROKER_CLUSTER_INFO))
    assert info == (
        b'{"brokerAddrTable":{'
        b'"broker-b":{"brokerAddrs":{0:"10.0.0.2:10911"},"brokerName":"broker-b","cluster":"C1"},'
        b'"broker-c":{"brokerAddrs":{0:"10.0.0.3:10911"},"brokerName":"broker-c","cluster":"C2"},'
        b'"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"C1"}},'
        b'"clusterAddrTable":{"C1":["broker-b","broker-a"],"C2":["broker-c"]}}')


def test_topic_list_follows_the_topic_table_within_a_bucket(ns, h):
    """"主题" and "T/1" share bucket 7 of the reply's fresh 16-bucket HashSet, so they come out in
    the order they are added: topicQueueTable's order (1024 buckets: T/1 311, 主题 439), not the
    order they registered in."""
    ns.register(table=h.topics("主题"), version=DataVersion(1, 1))
    ns.register(table=h.topics("T/1"), version=DataVersion(1, 2))
    assert body(ns.call(RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)) == '{"topicList":["T/1","主题"]}'.encode()


def test_a_cluster_set_keeps_the_capacity_it_grew_to(ns, h):
    """A HashSet never shrinks: after holding 13 names (32 buckets), C1's last two come out in
    32-bucket order: broker-l (14) before broker-a (27), where 16 buckets would give broker-a (11)
    first. The same holds for the brokerAddrTable the names leave."""
    names = [f"broker-{c}" for c in "abcdefghijklm"]
    for name in names:
        ns.register(name, 0, cluster="C1")
    for name in names[1:-2] + names[-1:]:
        ns.proc.on_channel_destroy(ns.channel(h.addr(name, 0)), h.addr(name, 0))
    assert ns.routes.java_cluster_names("C1") == ["broker-l", "broker-a"]
    assert hashmap_order(["broker-a", "broker-l"]) == ["broker-a", "broker-l"]
    assert body(ns.call(RC.GET_BROKER_CLUSTER_INFO)).endswith(b'"clusterAddrTable":{"C1":["broker-l","broker-a"]}}')


@pytest.mark.parametrize("code", [RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, RC.GET_UNIT_TOPIC_LIST])
def test_msgpack_bodies_carry_the_same_lists(ns, h, code):
    ns.register(table={**h.topics("TopicTest", sys_flag=1), **h.topics("主题", sys_flag=1)})
    reply = ns.call(code, serialize_type=SerializeType.MSGPACK)
    assert ns.json(reply) == {"topicList": ["主题", "TopicTest"]}
