"""Bodies on the wire <-> route objects: REGISTER_BROKER in every form, routes in both JSON dialects."""

import json
import struct
import zlib

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nameserver import bodies
from nameserver.bodies import BodyError, RegisterBrokerBody, encode_register_body
from nameserver.protocol import SerializeType, fastjson
from nameserver.routes import BrokerData, DataVersion, QueueData, TopicConfig, TopicRouteData

JSON, MSGPACK = SerializeType.JSON, SerializeType.MSGPACK
DV = DataVersion(1_700_000_000_000, 12)
TABLE = {
    "TopicTest": TopicConfig("TopicTest", 4, 4, 6, "SINGLE_TAG", 0, False),
    "TBW102": TopicConfig("TBW102", 8, 8, 7, "MULTI_TAG", 3, True),
}
SPEC_BODY = {  # spec §3.1, as a 4.9.8 broker sends it
    "filterServerList": ["10.1.1.1:9999"],
    "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 12, "timestamp": 1700000000000},
        "topicConfigTable": {
            "TopicTest": {"order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG",
                          "topicName": "TopicTest", "topicSysFlag": 0, "writeQueueNums": 4},
            "TBW102": {"order": True, "perm": 7, "readQueueNums": 8, "topicFilterType": "MULTI_TAG",
                       "topicName": "TBW102", "topicSysFlag": 3, "writeQueueNums": 8}}}}


def decoded(body, serialize_type=JSON, **kw):
    parsed = RegisterBrokerBody.decode(body, serialize_type, **kw)
    return parsed.data_version, parsed.filter_server_list, dict(parsed.topic_config_table)


def compressed_body(data_version: bytes, topic_strings: list[str], filters: bytes, tail: bytes = b"") -> bytes:
    def chunk(b: bytes) -> bytes:
        return struct.pack(">i", len(b)) + b
    raw = chunk(data_version) + struct.pack(">i", len(topic_strings))
    raw += b"".join(chunk(s.encode()) for s in topic_strings) + chunk(filters) + tail
    return zlib.compress(raw, 9)


# --- REGISTER_BROKER: JSON --------------------------------------------------------------------------------

@pytest.mark.parametrize("style", ["compact", "spaces", "pretty"])
def test_a_json_register_body_decodes_in_any_whitespace_style(style):
    text = {"compact": json.dumps(SPEC_BODY, separators=(",", ":")), "spaces": json.dumps(SPEC_BODY),
            "pretty": json.dumps(SPEC_BODY, indent=4)}[style]
    assert decoded(text.encode()) == (DV, ["10.1.1.1:9999"], TABLE)


def test_the_encoded_json_body_is_fastjsons():
    body = encode_register_body({"TopicTest": TABLE["TopicTest"]}, DV, [], JSON)
    assert body == (
        b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":12,'
        b'"timestamp":1700000000000},"topicConfigTable":{"TopicTest":{"order":false,"perm":6,'
        b'"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,'
        b'"writeQueueNums":4}}}}')


def test_the_topic_table_is_not_parsed_until_read(monkeypatch):
    loads = []
    real_load = bodies.load
    monkeypatch.setattr(bodies, "load", lambda *a: loads.append(a) or real_load(*a))
    body = json.dumps(SPEC_BODY).encode()

    parsed = RegisterBrokerBody.decode(body, JSON)
    assert (parsed.data_version, parsed.filter_server_list, loads) == (DV, ["10.1.1.1:9999"], [])

    assert dict(parsed.topic_config_table) == TABLE
    assert list(parsed.topic_config_table) == ["TopicTest", "TBW102"]
    assert len(loads) == 1  # parsed once, then kept


@pytest.mark.parametrize("cut", ["truncated", "bad value"])
def test_a_corrupt_topic_table_still_yields_the_data_version_and_fails_when_read(cut):
    body = json.dumps(SPEC_BODY, separators=(",", ":")).encode()
    body = body[:-40] if cut == "truncated" else body.replace(b'"readQueueNums":8', b'"readQueueNums":"x"')

    parsed = RegisterBrokerBody.decode(body, JSON)

    assert parsed.data_version == DV and parsed.filter_server_list == ["10.1.1.1:9999"]
    with pytest.raises(BodyError):
        dict(parsed.topic_config_table)
    with pytest.raises(BodyError):
        len(parsed.topic_config_table)


def test_a_topic_named_data_version_before_the_real_one_is_not_taken_for_it():
    """Key order is the sender's: a topic called "dataVersion" may come first."""
    topic = json.dumps({"order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG",
                        "topicName": "dataVersion", "topicSysFlag": 0, "writeQueueNums": 4})
    body = ('{"topicConfigSerializeWrapper":{"topicConfigTable":{"dataVersion":' + topic + '},'
            '"dataVersion":{"counter":3,"timestamp":7}},"filterServerList":["f:1"]}').encode()

    data_version, filters, table = decoded(body)

    assert (data_version, filters) == (DataVersion(7, 3), ["f:1"])
    assert table == {"dataVersion": TopicConfig("dataVersion", 4, 4, 6)}


def test_5x_fields_are_ignored():
    body = json.loads(json.dumps(SPEC_BODY))
    wrapper = body["topicConfigSerializeWrapper"]
    wrapper["dataVersion"]["stateVersion"] = 0
    wrapper["mappingDataVersion"] = {"counter": 0, "timestamp": 1}
    wrapper["topicQueueMappingInfoMap"] = {}
    wrapper["topicConfigTable"]["TopicTest"]["attributes"] = {"+message.type": "NORMAL"}

    assert decoded(json.dumps(body).encode()) == (DV, ["10.1.1.1:9999"], TABLE)


@pytest.mark.parametrize("body, filters", [
    ({"topicConfigSerializeWrapper": {"dataVersion": {"counter": 1, "timestamp": 2}}}, []),
    ({"filterServerList": None, "topicConfigSerializeWrapper": {"dataVersion": {"counter": 1, "timestamp": 2}}},
     []),
    ({"filterServerList": [], "topicConfigSerializeWrapper": {"dataVersion": {"counter": 1, "timestamp": 2},
                                                              "topicConfigTable": None}}, []),
])
def test_absent_parts_of_a_json_body_default_to_empty(body, filters):
    assert decoded(json.dumps(body).encode()) == (DataVersion(2, 1), filters, {})


def test_a_topic_config_without_optional_fields_gets_java_defaults():
    body = {"topicConfigSerializeWrapper": {"dataVersion": {"counter": 1, "timestamp": 2},
                                            "topicConfigTable": {"T": {}}}}
    assert decoded(json.dumps(body).encode())[2] == {"T": TopicConfig("T", 16, 16, 6, "SINGLE_TAG", 0, False)}


@pytest.mark.parametrize("body", [
    b"", b"garbage", b'{"topicConfigSerializeWrapper":', b"[]", b'"text"',
    b'{"filterServerList":{"a":1},"topicConfigSerializeWrapper":{}}',
    b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":"x","timestamp":1}}}',
])
def test_undecodable_json_bodies_raise_body_error_or_decode_empty(body):
    if not body:
        assert decoded(body) == (DataVersion(), [], {})
        return
    with pytest.raises(BodyError):
        decoded(body)


# --- REGISTER_BROKER: legacy, empty, msgpack ----------------------------------------------------------------

@pytest.mark.parametrize("legacy, filters", [(False, []), (True, None)])
@pytest.mark.parametrize("body", [None, b""])
def test_an_empty_body_is_an_empty_table_at_data_version_zero(body, legacy, filters):
    assert decoded(body, legacy=legacy) == (DataVersion(0, 0), filters, {})


@pytest.mark.parametrize("serialize_type", [JSON, MSGPACK])
def test_a_legacy_body_is_a_bare_wrapper_without_a_filter_list(serialize_type):
    wrapper = SPEC_BODY["topicConfigSerializeWrapper"]
    body = msgpack.packb(wrapper) if serialize_type == MSGPACK else json.dumps(wrapper).encode()
    assert decoded(body, serialize_type, legacy=True) == (DV, None, TABLE)


def test_a_msgpack_body_decodes():
    body = msgpack.packb(SPEC_BODY)
    assert decoded(body, MSGPACK) == (DV, ["10.1.1.1:9999"], TABLE)


@pytest.mark.parametrize("body", [b"\xc1", msgpack.packb([1, 2]), msgpack.packb({"filterServerList": "x"})])
def test_undecodable_msgpack_bodies_raise_body_error(body):
    with pytest.raises(BodyError):
        decoded(body, MSGPACK)


# --- REGISTER_BROKER: compressed -----------------------------------------------------------------------------

def test_a_compressed_body_as_a_java_broker_writes_it():
    body = compressed_body(b'{"counter":12,"timestamp":1700000000000}',
                           ["TopicTest 4 4 6 SINGLE_TAG", "TBW102 8 8 7 MULTI_TAG"], b'["10.1.1.1:9999"]')
    assert decoded(body, compressed=True) == (DV, ["10.1.1.1:9999"], {
        "TopicTest": TopicConfig("TopicTest", 4, 4, 6, "SINGLE_TAG"),
        "TBW102": TopicConfig("TBW102", 8, 8, 7, "MULTI_TAG"),
    })


def test_a_5x_compressed_body_with_attributes_and_queue_mappings_is_accepted():
    mapping = b'{"bname":"broker-a","epoch":0,"scope":"__global__","totalQueues":4}'
    tail = struct.pack(">i", 1) + struct.pack(">i", len(mapping)) + mapping
    body = compressed_body(b'{"counter":12,"stateVersion":0,"timestamp":1700000000000}',
                           ['TopicTest 4 4 6 SINGLE_TAG {"+message.type":"NORMAL"}'], b"[]", tail)
    assert decoded(body, compressed=True) == (DV, [], {"TopicTest": TopicConfig("TopicTest", 4, 4, 6)})


def test_the_compressed_encoding_drops_sys_flag_and_order():
    body = encode_register_body(TABLE, DV, ["f:1"], JSON, compressed=True)
    raw = zlib.decompress(body)
    assert b"TBW102 8 8 7 MULTI_TAG" in raw
    assert decoded(body, compressed=True) == (DV, ["f:1"], {
        name: tc._replace(topic_sys_flag=0, order=False) for name, tc in TABLE.items()})


@pytest.mark.parametrize("body", [
    b"not zlib at all",
    zlib.compress(b""),
    zlib.compress(b"\x00\x00\x00\x05{}"),  # length past the end
    zlib.compress(b"\xff\xff\xff\xff"),  # negative length
    compressed_body(b"{}", ["TopicTest 4 4"], b"[]"),  # too few fields
    compressed_body(b"{}", ["TopicTest x 4 6 SINGLE_TAG"], b"[]"),
    compressed_body(b"{}", [], b'{"not":"a list"}'),
    compressed_body(b"not json", [], b"[]"),
    zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">i", 3)),  # promised topics missing
])
def test_undecodable_compressed_bodies_raise_body_error(body):
    with pytest.raises(BodyError):
        decoded(body, compressed=True)


def test_register_broker_body_encodes_itself():
    parsed = RegisterBrokerBody.decode(json.dumps(SPEC_BODY).encode(), JSON)
    for serialize_type, compressed in [(JSON, False), (MSGPACK, False), (JSON, True)]:
        again = decoded(parsed.encode(serialize_type, compressed=compressed), serialize_type, compressed=compressed)
        assert again[:2] == (DV, ["10.1.1.1:9999"])
        assert set(again[2]) == set(TABLE)


# --- routes -------------------------------------------------------------------------------------------------

ROUTE = TopicRouteData(
    queue_datas=[QueueData("broker-a", 4, 4, 6, 0), QueueData("broker-b", 8, 8, 4, 1)],
    broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.1.1:10911"}),
                  BrokerData("DefaultCluster", "broker-b", {0: "10.0.0.2:10911"})],
    filter_server_table={"10.0.0.1:10911": ["10.1.1.1:9999"]},
    order_topic_conf="broker-a:4;broker-b:8",
)


@pytest.mark.parametrize("serialize_type, standard", [(JSON, True), (JSON, False), (MSGPACK, True)])
def test_a_route_survives_the_wire(serialize_type, standard):
    body = bodies.dump(bodies.route_to_wire(ROUTE), serialize_type, standard=standard)
    assert bodies.route_from_wire(bodies.load(body, serialize_type)) == ROUTE


def test_a_route_without_order_conf_omits_the_key():
    route = TopicRouteData(ROUTE.queue_datas[:1], ROUTE.broker_datas[:1], {})
    assert b"orderTopicConf" not in bodies.dump(bodies.route_to_wire(route), JSON)


def test_route_from_wire_accepts_unquoted_keys_and_the_old_topic_syn_flag_spelling():
    body = (b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.1.1:10911"},"brokerName":"broker-a",'
            b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
            b'"perm":6,"readQueueNums":4,"topicSynFlag":1,"writeQueueNums":4},{"brokerName":"broker-b",'
            b'"perm":6,"readQueueNums":2,"writeQueueNums":2}]}')

    route = bodies.route_from_wire(fastjson.loads(body))

    assert route.broker_datas == [BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.1.1:10911"})]
    assert route.queue_datas == [QueueData("broker-a", 4, 4, 6, 1), QueueData("broker-b", 2, 2, 6, 0)]
    assert route.filter_server_table == {} and route.order_topic_conf is None


@pytest.mark.parametrize("obj", [
    [], {"queueDatas": [{"brokerName": "a"}]}, {"brokerDatas": [{"brokerAddrs": {"master": "x"}}]},
    {"brokerDatas": ["x"]}, {"queueDatas": [{"brokerName": "a", "perm": "rw", "readQueueNums": 1,
                                              "writeQueueNums": 1}]},
])
def test_a_malformed_route_raises_body_error(obj):
    with pytest.raises(BodyError):
        bodies.route_from_wire(obj)


def test_cluster_info_survives_the_legacy_wire():
    brokers = {"broker-a": ROUTE.broker_datas[0]}
    body = bodies.dump(bodies.cluster_info_to_wire(brokers, {"DefaultCluster": {"broker-a": None}}), JSON,
                       standard=False)
    assert b'{0:"10.0.0.1:10911",1:"10.0.1.1:10911"}' in body
    assert bodies.cluster_info_from_wire(fastjson.loads(body)) == (brokers, {"DefaultCluster": ["broker-a"]})


# --- round trip, generated ------------------------------------------------------------------------------------

_topic_names = st.one_of(
    st.sampled_from(["dataVersion", "filterServerList", "topicConfigTable", "TBW102", "%RETRY%group"]),
    st.from_regex(r"[%|a-zA-Z0-9_-]{1,40}", fullmatch=True),
)
_topic_config = st.builds(
    lambda read, write, perm, filter_type, sys_flag, order: (read, write, perm, filter_type, sys_flag, order),
    st.integers(0, 1024), st.integers(0, 1024), st.integers(0, 15), st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
    st.integers(0, 3), st.booleans())
_tables = st.dictionaries(_topic_names, _topic_config, max_size=12).map(
    lambda d: {name: TopicConfig(name, *fields) for name, fields in d.items()})
_versions = st.builds(DataVersion, st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1))
_filters = st.lists(st.one_of(st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){3}:[0-9]{1,5}", fullmatch=True),
                              st.text(max_size=20)), max_size=3)


@settings(max_examples=100, deadline=None)
@given(table=_tables, version=_versions, filters=_filters,
       form=st.sampled_from(["json", "msgpack", "compressed"]))
def test_register_bodies_round_trip(table, version, filters, form):
    serialize_type = MSGPACK if form == "msgpack" else JSON
    compressed = form == "compressed"

    body = encode_register_body(table, version, filters, serialize_type, compressed=compressed)
    parsed = RegisterBrokerBody.decode(body, serialize_type, compressed=compressed)

    expected = {n: tc._replace(topic_sys_flag=0, order=False) for n, tc in table.items()} if compressed else table
    assert parsed.data_version == version
    assert parsed.filter_server_list == filters
    assert dict(parsed.topic_config_table) == expected


@settings(max_examples=100, deadline=None)
@given(table=_tables, version=_versions, indent=st.sampled_from([None, 1, 4]))
def test_json_register_bodies_from_other_encoders_decode(table, version, indent):
    """Python's json with any indentation, keys in the order written (not fastjson's sorted order)."""
    obj = {"topicConfigSerializeWrapper": {
        "topicConfigTable": {n: bodies.topic_config_to_wire(tc) for n, tc in table.items()},
        "dataVersion": bodies.data_version_to_wire(version)}, "filterServerList": ["a:1"]}
    parsed = RegisterBrokerBody.decode(json.dumps(obj, indent=indent).encode(), JSON)
    assert (parsed.data_version, parsed.filter_server_list, dict(parsed.topic_config_table)) == (
        version, ["a:1"], table)
