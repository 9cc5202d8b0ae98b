"""DefaultRequestProcessor.process_request for every code a 4.9.8 NameServer handles (spec §2.1, §3)."""

import json
import zlib

import msgpack
import pytest

from nameserver import bodies
from nameserver.config import parse_properties
from nameserver.kvconfig import KVConfigManager
from nameserver.protocol import RemotingCommand, RequestCode as RC, ResponseCode, SerializeType, crc32
from nameserver.routes import DataVersion
from lab.sim.nameserver import UnchangedRouteAnswers

A0, A1 = "10.0.0.1:10911", "10.0.1.1:10911"
DV1, DV2 = DataVersion(1_700_000_000_000, 1), DataVersion(1_700_000_000_000, 2)
NO_ROUTE = ("No topic route info in name server for the topic: {}"
            "\nSee http://rocketmq.apache.org/docs/faq/ for further details.")
ROUTE_STANDARD = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.1.1:10911"},'
    b'"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},'
    b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
ROUTE_LEGACY = ROUTE_STANDARD.replace(b'{"0":', b"{0:").replace(b',"1":', b",1:")


def assert_tables_empty(ns):
    rim = ns.routes
    assert (rim.cluster_addr_table, rim.broker_addr_table, rim.broker_live_table, rim.topic_queue_table,
            rim.filter_server_table) == ({}, {}, {}, {}, {})


# --- REGISTER_BROKER (§3.1) ----------------------------------------------------------------------------------

@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_register_broker_makes_the_topic_routable(ns, h, serialize_type):
    reply = ns.register(table=h.topics("TopicTest", queues=8, perm=7), serialize_type=serialize_type)

    assert (reply.code, reply.remark, reply.ext_fields, reply.body) == (ResponseCode.SUCCESS, None, {}, None)
    route = bodies.route_from_wire(ns.json(ns.route()))
    assert [(q.broker_name, q.read_queue_nums, q.perm) for q in route.queue_datas] == [("broker-a", 8, 7)]
    assert [b.broker_addrs for b in route.broker_datas] == [{0: A0}]


def test_register_broker_with_a_compressed_body(ns, h):
    table = {**h.topics("Unit", queues=2, sys_flag=1, order=True), **h.topics("TopicTest", queues=8)}
    reply = ns.register(table=table, filters=["10.1.1.1:9999"], compressed=True, crc=True)

    assert reply.code == ResponseCode.SUCCESS
    assert ns.routes.topic_queue_table["TopicTest"]["broker-a"].read_queue_nums == 8
    # The compressed form drops topicSysFlag.
    assert ns.routes.topic_queue_table["Unit"]["broker-a"].topic_sys_flag == 0
    assert ns.routes.filter_server_table == {A0: ["10.1.1.1:9999"]}
    assert ns.routes.query_broker_topic_config(A0) == DV1


def _body_with_high_crc_bit(h):
    """A register body whose CRC32 has bit 31 set, so the masked and unmasked values differ."""
    for counter in range(1000):
        body = h.register_body(version=DataVersion(1, counter))
        if zlib.crc32(body) & 0x80000000:
            return body
    raise AssertionError("no such body")


@pytest.mark.parametrize("crc_kind, accepted", [
    ("none", True), ("masked", True), ("unmasked", False), ("off by one", False),
])
def test_register_broker_checks_the_masked_body_crc32(ns, h, crc_kind, accepted):
    body = _body_with_high_crc_bit(h)
    crc = {"none": 0, "masked": crc32(body), "unmasked": zlib.crc32(body),
           "off by one": crc32(body) ^ 1}[crc_kind]

    reply = ns.send(h.register_request(body=body, crc=crc))

    if accepted:
        assert reply.code == ResponseCode.SUCCESS and "TopicTest" in ns.routes.topic_queue_table
    else:
        assert (reply.code, reply.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
        assert_tables_empty(ns)


def test_a_crc32_without_a_body_does_not_match(ns, h):
    """UtilAll.crc32(null) is 0, which differs from any non-zero crc."""
    reply = ns.send(h.register_request(body=None, crc=12345))
    assert (reply.code, reply.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    assert_tables_empty(ns)


@pytest.mark.parametrize("request_version", [0, 36])
def test_a_broker_older_than_v3_0_11_sends_a_bare_topic_config_wrapper(ns, h, request_version):
    ns.register(filters=["10.1.1.1:9999"], now=0)  # a filter list the legacy path must not touch
    wrapper = {"dataVersion": {"counter": 9, "timestamp": 5},
               "topicConfigTable": {"Legacy": bodies.topic_config_to_wire(h.topics("Legacy", queues=3)["Legacy"])}}

    reply = ns.send(h.register_request(body=json.dumps(wrapper).encode(), request_version=request_version))

    assert reply.code == ResponseCode.SUCCESS
    assert ns.routes.topic_queue_table["Legacy"]["broker-a"].read_queue_nums == 3
    assert ns.routes.query_broker_topic_config(A0) == DataVersion(5, 9)
    assert ns.routes.filter_server_table == {A0: ["10.1.1.1:9999"]}


def test_register_broker_without_a_body_registers_an_empty_table_at_data_version_zero(ns):
    ns.register(filters=["10.1.1.1:9999"], now=0)
    reply = ns.register(body=None, now=1)

    assert reply.code == ResponseCode.SUCCESS
    assert ns.routes.query_broker_topic_config(A0) == DataVersion(0, 0)
    assert "TopicTest" in ns.routes.topic_queue_table  # merged, never deleted
    assert ns.routes.filter_server_table == {}  # an absent body means an empty filter list


def test_a_oneway_register_is_applied_without_a_reply(ns):
    assert ns.register(oneway=True) is None
    assert ns.route().code == ResponseCode.SUCCESS


def test_the_register_reply_carries_the_master_address_only_for_a_slave(ns):
    master = ns.register("broker-a", 0)
    slave = ns.register("broker-a", 1)
    assert master.ext_fields == {}
    assert slave.ext_fields == {"haServerAddr": "10.0.0.1:10912", "masterAddr": A0}


def test_the_register_reply_body_is_the_order_topic_config_kv_table(ns):
    assert ns.register().body is None
    ns.call(RC.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicTest", "value": "broker-a:4"})
    ns.call(RC.PUT_KV_CONFIG, {"namespace": "other", "key": "k", "value": "v"})

    assert ns.register(now=1).body == b'{"table":{"TopicTest":"broker-a:4"}}'


# --- UNREGISTER_BROKER (§3.2) --------------------------------------------------------------------------------

def test_unregister_broker_removes_it_and_always_succeeds(ns):
    ns.register("broker-a", 0)
    fields = {"brokerName": "broker-a", "brokerAddr": A0, "clusterName": "DefaultCluster", "brokerId": 0}

    reply = ns.call(RC.UNREGISTER_BROKER, fields)
    assert (reply.code, reply.ext_fields, reply.body) == (ResponseCode.SUCCESS, None, None)
    assert ns.route().code == ResponseCode.TOPIC_NOT_EXIST

    assert ns.call(RC.UNREGISTER_BROKER, fields).code == ResponseCode.SUCCESS  # nothing matched


# --- GET_ROUTEINFO_BY_TOPIC (§3.3) ---------------------------------------------------------------------------

@pytest.mark.parametrize("registered", [False, True])
def test_an_unknown_topic_is_topic_not_exist_with_the_faq_remark(ns, registered):
    if registered:
        ns.register()
    reply = ns.route("Nope")
    assert (reply.code, reply.remark, reply.body) == (ResponseCode.TOPIC_NOT_EXIST, NO_ROUTE.format("Nope"), None)


@pytest.mark.parametrize("version, accept_standard, expected", [
    (409, None, ROUTE_STANDARD),
    (401, None, ROUTE_STANDARD),
    (409, "false", ROUTE_STANDARD),
    (400, None, ROUTE_LEGACY),
    (317, None, ROUTE_LEGACY),
    (317, "false", ROUTE_LEGACY),
    (317, "true", ROUTE_STANDARD),
    (317, "TRUE", ROUTE_STANDARD),
])
def test_route_key_quoting_follows_version_and_accept_standard_json_only(ns, version, accept_standard, expected):
    ns.register("broker-a", 0)
    ns.register("broker-a", 1)
    fields = {"topic": "TopicTest", "acceptStandardJsonOnly": accept_standard}

    reply = ns.call(RC.GET_ROUTEINFO_BY_TOPIC, fields, version=version)

    assert reply.code == ResponseCode.SUCCESS and reply.remark is None
    assert reply.body == expected


def test_both_route_forms_cached_side_by_side(ns):
    ns.register("broker-a", 0)
    ns.register("broker-a", 1)
    for _ in range(2):
        assert ns.route(version=317).body == ROUTE_LEGACY
        assert ns.route(version=409).body == ROUTE_STANDARD


def test_a_msgpack_route_request_gets_a_msgpack_body(ns):
    ns.register("broker-a", 0)
    reply = ns.route(serialize_type=SerializeType.MSGPACK)

    assert reply.serialize_type == SerializeType.MSGPACK
    route = msgpack.unpackb(reply.body, strict_map_key=False)
    assert route["brokerDatas"][0]["brokerAddrs"] == {0: A0}
    assert "orderTopicConf" not in route


@pytest.mark.parametrize("enabled, kv_set, present", [
    (False, False, False), (False, True, False), (True, False, False), (True, True, True),
])
def test_order_topic_conf_needs_order_message_enable_and_a_kv_entry(h, enabled, kv_set, present):
    ns = h.Ns(orderMessageEnable=enabled)
    ns.register()
    if kv_set:
        ns.call(RC.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicTest", "value": "broker-a:4"})

    route = ns.json(ns.route())

    assert route.get("orderTopicConf") == ("broker-a:4" if present else None)


def test_the_cached_route_follows_kv_changes(h):
    ns = h.Ns(orderMessageEnable=True)
    ns.register()
    assert "orderTopicConf" not in ns.json(ns.route())
    ns.call(RC.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicTest", "value": "broker-a:4"})
    assert ns.json(ns.route())["orderTopicConf"] == "broker-a:4"
    ns.call(RC.DELETE_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicTest"})
    assert "orderTopicConf" not in ns.json(ns.route())


def test_the_cached_route_follows_order_message_enable_switched_at_runtime(ns):
    ns.register()
    ns.call(RC.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicTest", "value": "broker-a:4"})
    assert "orderTopicConf" not in ns.json(ns.route())

    ns.call(RC.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true")

    assert ns.json(ns.route())["orderTopicConf"] == "broker-a:4"


def test_the_cached_route_is_invalidated_by_a_route_changing_registration(ns, h):
    ns.register("broker-a", 0, version=DV1, now=0)
    first = ns.route().body
    assert ns.route().body == first  # served again

    ns.register("broker-a", 0, version=DV1, now=30)  # unchanged: same body
    assert ns.route().body == first

    ns.register("broker-a", 0, table=h.topics("TopicTest", queues=16), version=DV2, now=60)
    assert ns.json(ns.route())["queueDatas"][0]["readQueueNums"] == 16

    ns.register("broker-a", 1, now=60)
    assert ns.json(ns.route())["brokerDatas"][0]["brokerAddrs"] == {"0": A0, "1": A1}


@pytest.mark.parametrize("code, perm", [(RC.WIPE_WRITE_PERM_OF_BROKER, 4), (RC.ADD_WRITE_PERM_OF_BROKER, 6)])
def test_the_cached_route_is_invalidated_by_a_perm_change(ns, h, code, perm):
    ns.register(table=h.topics("TopicTest", perm=7 if perm == 6 else 6))
    ns.route()
    ns.call(code, {"brokerName": "broker-a"})
    assert ns.json(ns.route())["queueDatas"][0]["perm"] == perm


def test_the_cached_route_is_invalidated_by_removal(ns):
    ns.register()
    assert ns.route().code == ResponseCode.SUCCESS
    ns.proc.on_channel_destroy(ns.channel(A0), "10.0.0.1:50000")
    assert ns.route().code == ResponseCode.TOPIC_NOT_EXIST


# --- GET_BROKER_CLUSTER_INFO (§3.4) --------------------------------------------------------------------------

@pytest.mark.parametrize("version, fields", [(409, None), (317, None), (409, {"acceptStandardJsonOnly": "true"})])
def test_cluster_info_is_always_the_legacy_unquoted_form(ns, version, fields):
    ns.register(broker_addr="10.0.0.5:10911")

    reply = ns.call(RC.GET_BROKER_CLUSTER_INFO, fields, version=version)

    assert reply.code == ResponseCode.SUCCESS
    assert reply.body == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.5:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}')


def test_cluster_info_lists_every_broker_and_cluster(ns):
    ns.register("broker-a", 0)
    ns.register("broker-a", 1)
    ns.register("broker-b", 0, cluster="Other")

    brokers, clusters = bodies.cluster_info_from_wire(ns.json(ns.call(RC.GET_BROKER_CLUSTER_INFO)))

    assert {n: b.broker_addrs for n, b in brokers.items()} == {
        "broker-a": {0: A0, 1: A1}, "broker-b": {0: "10.0.0.2:10911"}}
    assert clusters == {"DefaultCluster": ["broker-a"], "Other": ["broker-b"]}


def test_cluster_info_of_an_empty_name_server(ns):
    assert ns.call(RC.GET_BROKER_CLUSTER_INFO).body == b'{"brokerAddrTable":{},"clusterAddrTable":{}}'


# --- WIPE / ADD_WRITE_PERM (§3.5) ----------------------------------------------------------------------------

@pytest.mark.parametrize("code, header, perms", [
    (RC.WIPE_WRITE_PERM_OF_BROKER, "wipeTopicCount", [4, 5]),
    (RC.ADD_WRITE_PERM_OF_BROKER, "addTopicCount", [6, 6]),
])
def test_write_perm_codes_report_the_topic_count(ns, h, code, header, perms):
    ns.register("broker-a", table={**h.topics("T6", perm=6), **h.topics("T7", perm=7)})
    ns.register("broker-b", table=h.topics("T6"))

    reply = ns.call(code, {"brokerName": "broker-a"})
    assert (reply.code, reply.ext_fields) == (ResponseCode.SUCCESS, {header: "2"})
    assert [ns.routes.topic_queue_table[t]["broker-a"].perm for t in ("T6", "T7")] == perms

    assert ns.call(code, {"brokerName": "broker-x"}).ext_fields == {header: "0"}


# --- topic lists (§3.6, §3.10) ------------------------------------------------------------------------------

def _topic_list(ns, code, fields=None):
    reply = ns.call(code, fields)
    assert reply.code == ResponseCode.SUCCESS
    return reply.body


def test_get_all_topic_list(ns, h):
    assert _topic_list(ns, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) == b'{"topicList":[]}'
    ns.register("broker-a", table=h.topics("TopicTest", "TBW102"))
    # A TopicList's set is a fresh HashSet (16 buckets): String.hashCode spread (h ^ h >>> 16) & 15
    # puts "TopicTest" (hashCode -1902610879) in bucket 9 and "TBW102" (-1826525782) in 11.
    assert _topic_list(ns, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) == b'{"topicList":["TopicTest","TBW102"]}'


@pytest.mark.parametrize("cluster, expected", [
    ("C1", b'{"topicList":["A","Shared"]}'),
    ("C2", b'{"topicList":["B","Shared"]}'),  # HashSet buckets: "B" 2, "Shared" 12
    ("Unknown", b'{"topicList":[]}'),
])
def test_get_topics_by_cluster(ns, h, cluster, expected):
    ns.register("broker-a", cluster="C1", table=h.topics("A", "Shared"))
    ns.register("broker-b", cluster="C2", table=h.topics("Shared", "B"))
    assert _topic_list(ns, RC.GET_TOPICS_BY_CLUSTER, {"cluster": cluster}) == expected


def test_get_system_topic_list(ns):
    assert _topic_list(ns, RC.GET_SYSTEM_TOPIC_LIST_FROM_NS) == b'{"topicList":[]}'
    ns.register("broker-a", 0)
    ns.register("broker-b", 0, cluster="Other")
    # Added in clusterAddrTable's order (32 buckets: DefaultCluster 15, Other 31), each cluster's
    # names after it; the fresh HashSet then orders them by bucket (of 16): broker-b 8, broker-a
    # 11, DefaultCluster 15, Other 15 (added after DefaultCluster). brokerAddr: the first address of
    # the first BrokerData in brokerAddrTable's order (128 buckets: broker-b 88, broker-a 91).
    assert _topic_list(ns, RC.GET_SYSTEM_TOPIC_LIST_FROM_NS) == (
        b'{"brokerAddr":"10.0.0.2:10911","topicList":["broker-b","broker-a","DefaultCluster","Other"]}')


@pytest.mark.parametrize("code, expected", [
    # HashSet buckets (of 16): UnitSub 8, Unit 12, Both 14.
    (RC.GET_UNIT_TOPIC_LIST, b'{"topicList":["Unit","Both"]}'),
    (RC.GET_HAS_UNIT_SUB_TOPIC_LIST, b'{"topicList":["UnitSub","Both"]}'),
    (RC.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST, b'{"topicList":["UnitSub"]}'),
])
def test_unit_topic_lists(ns, h, code, expected):
    ns.register(table={**h.topics("Plain"), **h.topics("Unit", sys_flag=1),
                       **h.topics("UnitSub", sys_flag=2), **h.topics("Both", sys_flag=3)})
    assert _topic_list(ns, code) == expected


# --- DELETE_TOPIC_IN_NAMESRV (§3.7) ----------------------------------------------------------------------------

@pytest.mark.parametrize("cluster, left", [
    (None, {}), ("", {}), ("C1", {"T": ["broker-b"]}), ("Unknown", {"T": ["broker-a", "broker-b"]}),
])
def test_delete_topic_in_namesrv(ns, h, cluster, left):
    ns.register("broker-a", cluster="C1", table=h.topics("T"))
    ns.register("broker-b", cluster="C2", table=h.topics("T"))

    reply = ns.call(RC.DELETE_TOPIC_IN_NAMESRV, {"topic": "T", "clusterName": cluster})

    assert reply.code == ResponseCode.SUCCESS
    assert {t: list(q) for t, q in ns.routes.topic_queue_table.items()} == left
    assert (ns.route("T").code == ResponseCode.SUCCESS) is bool(left)


# --- KV config (§3.8) ---------------------------------------------------------------------------------------

def test_kv_put_get_list_delete(ns):
    put = ns.call(RC.PUT_KV_CONFIG, {"namespace": "ns1", "key": "k1", "value": "v1"})
    ns.call(RC.PUT_KV_CONFIG, {"namespace": "ns1", "key": "k2", "value": "v2"})
    assert put.code == ResponseCode.SUCCESS

    got = ns.call(RC.GET_KV_CONFIG, {"namespace": "ns1", "key": "k1"})
    assert (got.code, got.ext_fields) == (ResponseCode.SUCCESS, {"value": "v1"})
    listed = ns.call(RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns1"})
    assert (listed.code, listed.body) == (ResponseCode.SUCCESS, b'{"table":{"k1":"v1","k2":"v2"}}')

    assert ns.call(RC.DELETE_KV_CONFIG, {"namespace": "ns1", "key": "k1"}).code == ResponseCode.SUCCESS
    missing = ns.call(RC.GET_KV_CONFIG, {"namespace": "ns1", "key": "k1"})
    assert (missing.code, missing.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: ns1 Key: k1")
    assert ns.call(RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns1"}).body == b'{"table":{"k2":"v2"}}'
    assert ns.call(RC.DELETE_KV_CONFIG, {"namespace": "nsX", "key": "k"}).code == ResponseCode.SUCCESS


def test_kv_put_overwrites(ns):
    for value in ("a", "b"):
        ns.call(RC.PUT_KV_CONFIG, {"namespace": "ns1", "key": "k", "value": value})
    assert ns.call(RC.GET_KV_CONFIG, {"namespace": "ns1", "key": "k"}).ext_fields == {"value": "b"}


def test_kv_list_of_an_unknown_namespace_is_query_not_found(ns):
    reply = ns.call(RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "nope"})
    assert (reply.code, reply.remark, reply.body) == (
        ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: nope", None)


@pytest.mark.parametrize("missing", ["namespace", "key"])
def test_kv_put_without_namespace_or_key_is_an_error(ns, missing):
    fields = {"namespace": "ns1", "key": "k", "value": "v"}
    del fields[missing]
    reply = ns.call(RC.PUT_KV_CONFIG, fields)
    assert (reply.code, reply.remark) == (ResponseCode.SYSTEM_ERROR, "namespace or key is null")
    assert ns.proc.kv.config_table == {}


def test_kv_config_persists_and_reloads(h, tmp_path):
    path = tmp_path / "namesrv" / "kvConfig.json"
    ns = h.Ns(kvConfigPath=str(path))
    ns.call(RC.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:4"})
    ns.call(RC.PUT_KV_CONFIG, {"namespace": "ns1", "key": "gone", "value": "x"})
    ns.call(RC.DELETE_KV_CONFIG, {"namespace": "ns1", "key": "gone"})

    assert json.loads(path.read_text()) == {"configTable": {"ORDER_TOPIC_CONFIG": {"T": "broker-a:4"}, "ns1": {}}}
    assert KVConfigManager(str(path)).get_kv_config("ORDER_TOPIC_CONFIG", "T") == "broker-a:4"

    restarted = h.Ns(kvConfigPath=str(path))
    reply = restarted.call(RC.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"})
    assert reply.ext_fields == {"value": "broker-a:4"}
    assert restarted.register().body == b'{"table":{"T":"broker-a:4"}}'


# --- UPDATE_NAMESRV_CONFIG / GET_NAMESRV_CONFIG (§3.11) ------------------------------------------------------

def _config(ns) -> dict:
    reply = ns.call(RC.GET_NAMESRV_CONFIG)
    assert reply.code == ResponseCode.SUCCESS
    return parse_properties(reply.body.decode())


def test_get_namesrv_config_returns_properties(ns):
    config = _config(ns)
    assert config["listenPort"] == "9876"
    assert config["orderMessageEnable"] == "false"
    assert config["scanNotActiveBrokerInterval"] == "10000"


def test_update_namesrv_config_applies_properties(ns):
    reply = ns.call(RC.UPDATE_NAMESRV_CONFIG, body=b"# comment\norderMessageEnable=true\n"
                                                   b"scanNotActiveBrokerInterval=5000\nproductEnvName: lab\n"
                                                   b"noSuchKey=1\n")
    assert reply.code == ResponseCode.SUCCESS
    assert ns.proc.config.orderMessageEnable is True
    assert ns.proc.config.scanNotActiveBrokerInterval == 5.0
    assert ns.proc.config.productEnvName == "lab"
    config = _config(ns)
    assert (config["orderMessageEnable"], config["scanNotActiveBrokerInterval"]) == ("true", "5000")


def test_updating_the_broker_expiry_changes_when_brokers_expire(ns):
    ns.register(now=0)
    ns.call(RC.UPDATE_NAMESRV_CONFIG, body=b"brokerChannelExpiredTime=30000")
    assert ns.proc.scan_not_active_broker(now=30) == []
    assert ns.proc.scan_not_active_broker(now=31) == [ns.channel(A0)]


@pytest.mark.parametrize("key", ["configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome", "listenPort"])
def test_black_listed_config_keys_are_refused(h, key):
    ns = h.Ns(configBlackList="configBlackList;configStorePath;kvConfigPath;listenPort")
    reply = ns.call(RC.UPDATE_NAMESRV_CONFIG, body=f"orderMessageEnable=true\n{key}=1\n".encode())
    assert (reply.code, reply.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    assert ns.proc.config.orderMessageEnable is False


def test_an_unparsable_config_value_is_an_error_and_applies_nothing(ns):
    reply = ns.call(RC.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\nlistenPort=abc\n")
    assert reply.code == ResponseCode.SYSTEM_ERROR
    assert ns.proc.config.orderMessageEnable is False and ns.proc.config.listenPort == 9876


def test_update_namesrv_config_without_a_body_changes_nothing(ns):
    before = _config(ns)
    assert ns.call(RC.UPDATE_NAMESRV_CONFIG).code == ResponseCode.SUCCESS
    assert _config(ns) == before


# --- QUERY_DATA_VERSION (§3.9) -------------------------------------------------------------------------------

def _query_data_version(ns, version: DataVersion, now: float, broker_addr: str = A0):
    fields = {"brokerName": "broker-a", "brokerAddr": broker_addr, "clusterName": "DefaultCluster", "brokerId": 0}
    body = json.dumps(bodies.data_version_to_wire(version)).encode()
    return ns.call(RC.QUERY_DATA_VERSION, fields, body, now=now)


@pytest.mark.parametrize("asked, changed, expired_at_150", [(DV1, "false", False), (DV2, "true", True)])
def test_query_data_version(ns, asked, changed, expired_at_150):
    ns.register(version=DV1, now=0)

    reply = _query_data_version(ns, asked, now=100)

    assert (reply.code, reply.ext_fields) == (ResponseCode.SUCCESS, {"changed": changed})
    assert reply.body == b'{"counter":1,"timestamp":1700000000000}'
    # Only an unchanged answer refreshes the broker (a keep-alive).
    assert bool(ns.proc.scan_not_active_broker(now=150)) is expired_at_150


def test_query_data_version_of_an_unknown_broker(ns):
    reply = _query_data_version(ns, DV1, now=0)
    assert (reply.code, reply.ext_fields, reply.body) == (ResponseCode.SUCCESS, {"changed": "true"}, None)
    assert ns.routes.broker_live_table == {}


# --- dispatch: unknown codes, bad requests, response framing (§1.4, §3.0) ----------------------------------------

@pytest.mark.parametrize("oneway", [False, True])
def test_an_unknown_code_is_request_code_not_supported(ns, oneway):
    reply = ns.call(999, {"x": "y"}, oneway=oneway, opaque=42)
    assert (reply.code, reply.remark, reply.opaque, reply.flag) == (
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 999 not supported", 42, 1)


def test_a_response_sent_to_the_name_server_is_dropped(ns):
    response = RemotingCommand(code=0, flag=1, opaque=5)
    assert ns.send(response) is None


REGISTER_FIELDS = ["brokerName", "brokerAddr", "clusterName", "haServerAddr", "brokerId"]
BROKER_FIELDS = {"brokerName": "broker-a", "brokerAddr": A0, "clusterName": "DefaultCluster", "brokerId": "0"}
REQUIRED = [
    *[(RC.REGISTER_BROKER, None, f) for f in REGISTER_FIELDS],
    *[(RC.UNREGISTER_BROKER, BROKER_FIELDS, f) for f in BROKER_FIELDS],
    *[(RC.QUERY_DATA_VERSION, BROKER_FIELDS, f) for f in BROKER_FIELDS],
    (RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, "topic"),
    (RC.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}, "brokerName"),
    (RC.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}, "brokerName"),
    (RC.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"}, "topic"),
    (RC.GET_TOPICS_BY_CLUSTER, {"cluster": "C"}, "cluster"),
    (RC.GET_KV_CONFIG, {"namespace": "n", "key": "k"}, "namespace"),
    (RC.GET_KV_CONFIG, {"namespace": "n", "key": "k"}, "key"),
    (RC.DELETE_KV_CONFIG, {"namespace": "n", "key": "k"}, "key"),
    (RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "n"}, "namespace"),
]


@pytest.mark.parametrize("code, fields, missing", REQUIRED, ids=[f"{c.name}-{m}" for c, _, m in REQUIRED])
def test_a_missing_required_header_field_is_a_system_error_naming_it(ns, h, code, fields, missing):
    ns.register("broker-a", 0)
    before = ns.routes.generation
    if fields is None:
        request = h.register_request("broker-b", drop=missing)
    else:
        request = RemotingCommand.request(code, {k: v for k, v in fields.items() if k != missing})

    reply = ns.send(request)

    assert reply.code == ResponseCode.SYSTEM_ERROR
    assert missing in reply.remark
    assert ns.routes.generation == before and "broker-b" not in ns.routes.broker_addr_table


def test_a_request_without_ext_fields_is_a_system_error(ns):
    reply = ns.send(RemotingCommand.request(RC.GET_ROUTEINFO_BY_TOPIC))
    assert reply.code == ResponseCode.SYSTEM_ERROR and "topic" in reply.remark


def test_a_non_numeric_broker_id_is_a_system_error_naming_it(ns, h):
    request = h.register_request()
    request.ext_fields["brokerId"] = "master"
    reply = ns.send(request)
    assert reply.code == ResponseCode.SYSTEM_ERROR and "brokerId" in reply.remark
    assert_tables_empty(ns)


def test_a_oneway_request_with_an_error_gets_no_reply(ns, h):
    assert ns.send(h.register_request(drop="brokerName", oneway=True)) is None
    assert_tables_empty(ns)


CORRUPT_TABLE = (b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,'
                 b'"timestamp":1},"topicConfigTable":{"T":{"perm":6,"readQueueNums":"x!"')
GARBAGE_BODIES = {
    "not json": (b"\x00\x01 definitely not json", SerializeType.JSON, False),
    "truncated json": (b'{"filterServerList":[', SerializeType.JSON, False),
    "json array": (b"[1,2,3]", SerializeType.JSON, False),
    "wrapper not an object": (b'{"topicConfigSerializeWrapper":[1]}', SerializeType.JSON, False),
    "bad queue nums": (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"readQueueNums":"x"}}}}',
                       SerializeType.JSON, False),
    "valid data version, corrupt table": (CORRUPT_TABLE, SerializeType.JSON, False),
    "garbage msgpack": (b"\xc1\xc1\xc1", SerializeType.MSGPACK, False),
    "msgpack string": (msgpack.packb("hello"), SerializeType.MSGPACK, False),
    "compressed garbage": (b"not zlib", SerializeType.JSON, True),
    "compressed truncated": (zlib.compress(b"\x00\x00\x00\x10{}"), SerializeType.JSON, True),
    "compressed bad topic": (zlib.compress(b"\x00\x00\x00\x02{}\x00\x00\x00\x01\x00\x00\x00\x03a b"
                                           b"\x00\x00\x00\x02[]"), SerializeType.JSON, True),
}


@pytest.mark.parametrize("body, serialize_type, compressed", GARBAGE_BODIES.values(), ids=GARBAGE_BODIES.keys())
def test_a_garbage_register_body_is_a_system_error_and_leaves_the_tables_untouched(ns, h, body, serialize_type,
                                                                                 compressed):
    reply = ns.send(h.register_request(body=body, serialize_type=serialize_type, compressed=compressed))

    assert reply.code == ResponseCode.SYSTEM_ERROR and reply.remark
    assert_tables_empty(ns)
    assert ns.kinds("ns.register") == []


@pytest.mark.parametrize("serialize_type", list(SerializeType))
@pytest.mark.parametrize("code, fields", [
    (RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}),
    (RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"}),
    (RC.GET_BROKER_CLUSTER_INFO, None),
    (RC.GET_KV_CONFIG, {"namespace": "n", "key": "k"}),
    (RC.GET_KV_CONFIG, {"key": "k"}),
])
def test_a_response_echoes_opaque_sets_the_response_flag_and_uses_the_request_serialize_type(
        ns, serialize_type, code, fields):
    ns.register()
    reply = ns.call(code, fields, serialize_type=serialize_type, opaque=-7)
    assert (reply.opaque, reply.flag, reply.serialize_type) == (-7, 1, serialize_type)


# --- the listener ------------------------------------------------------------------------------------------

def test_the_listener_hears_registrations(ns):
    ns.register("broker-a", 0, version=DV1, now=0)
    ns.register("broker-a", 0, version=DV1, now=30)
    ns.register("broker-a", 1, version=DV2, now=30)

    assert ns.kinds("ns.register") == [
        {"broker_addr": A0, "broker_name": "broker-a", "broker_id": 0, "cluster": "DefaultCluster",
         "data_version": [DV1.timestamp, 1], "first": True, "topics_applied": True},
        {"broker_addr": A0, "broker_name": "broker-a", "broker_id": 0, "cluster": "DefaultCluster",
         "data_version": [DV1.timestamp, 1], "first": False, "topics_applied": False},
        {"broker_addr": A1, "broker_name": "broker-a", "broker_id": 1, "cluster": "DefaultCluster",
         "data_version": [DV2.timestamp, 2], "first": True, "topics_applied": False},
    ]


def _removal(reason, broker_addr=A0, broker_id=0, **extra):
    return {"broker_addr": broker_addr, "reason": reason, "broker_name": "broker-a", "broker_id": broker_id,
            "cluster": "DefaultCluster", **extra}


REMOVALS = {
    "unregistered": (lambda ns: ns.call(RC.UNREGISTER_BROKER, {**BROKER_FIELDS, "brokerId": 0}),
                     _removal("unregistered")),
    "expired": (lambda ns: ns.proc.scan_not_active_broker(now=121), _removal("expired")),
    "channel_closed": (lambda ns: ns.proc.on_channel_destroy(ns.channel(A0), "10.0.0.1:50000", "EOF"),
                       _removal("channel_closed", detail="EOF")),
}


@pytest.mark.parametrize("remove, expected", REMOVALS.values(), ids=REMOVALS.keys())
def test_the_listener_hears_removals_with_their_reason(ns, h, remove, expected):
    ns.register("broker-a", 0, table=h.topics("OnlyA"), now=0)

    remove(ns)

    assert ns.kinds("ns.remove") == [
        {**expected, "broker_name_removed": True, "removed_topics": ["OnlyA"]}]


def test_the_listener_hears_a_slave_removal_that_keeps_the_broker_name(ns):
    ns.register("broker-a", 0, now=0)
    ns.register("broker-a", 1, now=0)
    ns.proc.on_channel_destroy(ns.channel(A1), "10.0.1.1:50000")
    assert ns.kinds("ns.remove") == [
        _removal("channel_closed", A1, 1, detail="", broker_name_removed=False, removed_topics=[])]


def test_closing_an_unrelated_channel_reports_nothing(ns, h):
    ns.register()
    assert ns.proc.on_channel_destroy(h.Channel("client"), "10.0.0.9:40000") is None
    assert ns.kinds("ns.remove") == []


def test_unchanged_route_answers_are_found_again_only_while_the_routes_stay_as_they_were(ns, h):
    # A coasting route poll asks this at every round; its answers must follow the routes.
    unchanged_route_answers = UnchangedRouteAnswers(ns.proc)
    ns.register("broker-a", 0, table=h.topics("T1", "T2"), version=DV1, now=0)
    sample = RemotingCommand.request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "T1"})
    assert unchanged_route_answers(sample, ["T1", "T2"]) is None, "never answered yet"
    bodies_before = [ns.route(topic).body for topic in ("T1", "T2")]
    assert unchanged_route_answers(sample, ["T1", "T2"]) == bodies_before
    assert unchanged_route_answers(sample, ["T2"]) == bodies_before[1:]  # a round coasting from midway
    ns.register("broker-a", 1, table=h.topics("T1", "T2"), version=DV1, now=1)  # a slave: both routes change
    assert unchanged_route_answers(sample, ["T1", "T2"]) is None
    bodies_after = [ns.route(topic).body for topic in ("T1", "T2")]
    assert bodies_after != bodies_before
    assert unchanged_route_answers(sample, ["T1", "T2"]) == bodies_after


def test_the_listener_hears_a_route_answer_only_when_it_differs_from_the_last_and_counts_them_all(ns):
    ns.route("TopicTest")  # 17: nothing registered yet
    ns.route("TopicTest")
    ns.register("broker-a", 0, version=DV1, now=0)
    ns.route("TopicTest")
    ns.route("TopicTest")
    ns.route("TopicTest")
    ns.register("broker-a", 0, version=DV1, now=30)  # a heartbeat: the route stays as it was
    ns.route("TopicTest")
    assert ns.kinds("ns.route") == [{"topic": "TopicTest", "found": False}, {"topic": "TopicTest", "found": True}]
    assert ns.kinds("ns.routes") == [], "reported with the scan"

    ns.proc.scan_not_active_broker(now=31)
    assert ns.kinds("ns.routes") == [{"queries": 6, "not_found": 2, "unchanged": 4}]
    ns.proc.scan_not_active_broker(now=41)
    assert len(ns.kinds("ns.routes")) == 1, "no queries, no report"

    ns.register("broker-a", 1, version=DV2, now=42)  # a slave joins: every route of broker-a changes
    ns.route("TopicTest")
    assert ns.kinds("ns.route")[-1] == {"topic": "TopicTest", "found": True} and len(ns.kinds("ns.route")) == 3
