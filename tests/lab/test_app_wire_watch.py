"""The app's links read frame by frame (lab/apps/wire_watch.py), without a network: the records a
Java client's requests make (SEND_MESSAGE_V2's short keys, a batch, oneway offset commits, a pull
that commits), and route replies' broker addresses rewritten to the app's relays."""

from __future__ import annotations

import msgpack

from lab.apps.wire_watch import ConnWatch
from lab.events import EventLog
from lab.remoting.message import MessageExt, encode_batch, encode_message, encode_properties
from lab.remoting.wire_codec import REMOTING
from nameserver.protocol import FrameDecoder, RemotingCommand, RequestCode, SerializeType, encode
from nameserver.protocol.fastjson import loads

BROKER, RELAY = "127.0.0.1:10911", "127.0.0.1:40001"


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


def watch(peer="broker-a-0", role="broker"):
    clock = Clock()
    events = EventLog(clock)
    records: list[dict] = []
    events.subscribers.append(records.append)
    conn = ConnWatch("app", peer, role, events, addresses=lambda: {BROKER: RELAY},
                     node_of=lambda a: {RELAY: "broker-a-0", BROKER: "broker-a-0"}.get(a, a))
    return conn, clock, records


def frame(cmd: RemotingCommand):
    (piece,) = REMOTING.cutter().feed(encode(cmd), cut=True)
    return piece


def exchange(conn, clock, request: RemotingCommand, reply: RemotingCommand | None, after: float = 0.01):
    conn.sent("app", conn.peer, frame(request))
    clock.t += after
    if reply is not None:
        conn.arrived(conn.peer, "app", conn.sent(conn.peer, "app", frame(reply)))


def kinds(records, kind):
    return [{k: v for k, v in r.items() if k not in ("t", "node", "kind")} for r in records if r["kind"] == kind]


def test_a_send_v2_its_batch_and_an_unanswered_one():
    conn, clock, records = watch()
    props = encode_properties({"UNIQ_KEY": "K1", "WAIT": "true"})
    v2 = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T", "e": 2, "i": props}, b"x", opaque=7)
    exchange(conn, clock, v2, v2.response(0, ext_fields={"msgId": "ID1", "queueId": 2, "queueOffset": 41}))
    batch_body = encode_batch([(0, b"a", {"UNIQ_KEY": "B1"}), (0, b"b", {"UNIQ_KEY": "B2"})])
    batch = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {"a": "PG", "b": "T", "e": 1, "i": ""},
                                    batch_body, opaque=8)
    exchange(conn, clock, batch, batch.response(0, ext_fields={"msgId": "ID2,ID3", "queueId": 1, "queueOffset": 5}))
    lost = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T", "e": 0, "i": props}, b"y", opaque=9)
    exchange(conn, clock, lost, None)
    conn.closed()
    sends = kinds(records, "app.send")
    assert sends[0] == {"peer": "broker-a-0", "group": "PG", "topic": "T", "result": 0, "ms": 10.0, "queue": 2,
                        "offset": 41, "msg_id": "ID1", "uniq_key": "K1"}
    assert sends[1]["uniq_keys"] == ["B1", "B2"] and sends[1]["offset"] == 5 and sends[1]["uniq_key"] is None
    assert sends[2] == {**sends[2], "result": None, "ms": None, "offset": None, "uniq_key": "K1"}
    requests = kinds(records, "app.request")
    assert [r["request"] for r in requests] == ["SEND_MESSAGE_V2", "SEND_BATCH_MESSAGE", "SEND_MESSAGE_V2"]
    assert kinds(records, "app.conn") == [{"peer": "broker-a-0", "state": "open"}, {"peer": "broker-a-0", "state": "close"}]


def test_pulls_deliver_and_commit_and_oneway_commits():
    conn, clock, records = watch()
    pull = RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "CG", "topic": "%RETRY%CG", "queueId": 3, "queueOffset": 10, "sysFlag": 3,
        "commitOffset": 10}, opaque=11)
    body = b"".join(encode_message(MessageExt("%RETRY%CG", b"m", 3, properties=p, queue_offset=o))
                    for o, p in ((10, {"UNIQ_KEY": "U10"}), (11, {})))
    exchange(conn, clock, pull, pull.response(0, ext_fields={"nextBeginOffset": 12}, body=body))
    commit = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": "CG", "topic": "T", "queueId": 0, "commitOffset": 99}, oneway=True, opaque=12)
    exchange(conn, clock, commit, None)
    assert kinds(records, "app.deliver") == [{"peer": "broker-a-0", "group": "CG", "topic": "%RETRY%CG", "queue": 3,
                                              "messages": [[10, "U10"], [11, None]]}]
    assert kinds(records, "app.commit") == [
        {"peer": "broker-a-0", "group": "CG", "topic": "%RETRY%CG", "queue": 3, "offset": 10},
        {"peer": "broker-a-0", "group": "CG", "topic": "T", "queue": 0, "offset": 99}]
    oneway = kinds(records, "app.request")[-1]
    assert oneway == {"peer": "broker-a-0", "code": 15, "request": "UPDATE_CONSUMER_OFFSET", "ms": None, "result": None,
                      "oneway": True}


def test_route_replies_reach_the_app_with_its_relays_in_json_and_msgpack():
    for serialize_type in (SerializeType.JSON, SerializeType.MSGPACK):
        conn, clock, records = watch("ns-0", "nameserver")
        route = {"brokerDatas": [{"brokerName": "broker-a", "cluster": "C", "brokerAddrs": {"0": BROKER}}],
                 "queueDatas": [{"brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}]}
        body = msgpack.packb(route) if serialize_type == SerializeType.MSGPACK else \
            b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"C"}],' \
            b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"writeQueueNums":4}]}'
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, opaque=5,
                                          serialize_type=serialize_type)
        conn.sent("app", "ns-0", frame(request))
        reply = conn.sent("ns-0", "app", frame(request.response(0, body=body)))
        conn.arrived("ns-0", "app", reply)
        (cmd,) = FrameDecoder().feed(reply.data)
        got = msgpack.unpackb(cmd.body, strict_map_key=False) if serialize_type == SerializeType.MSGPACK \
            else loads(cmd.body)
        assert list(got["brokerDatas"][0]["brokerAddrs"].values()) == [RELAY]
        assert kinds(records, "app.route") == [{"peer": "ns-0", "topic": "T", "result": 0, "brokers": ["broker-a-0"],
                                                "queues": {"broker-a-0": 4}}]
