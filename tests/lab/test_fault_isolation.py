"""One connection's death never breaks another's requests, over real loopback sockets.

Each test dials the broker or NameServer directly, as a real RocketMQ client does, and leaves the
way real clients do when they crash: an RST (SO_LINGER 0), with a request still held.
"""

from __future__ import annotations

import json
import struct

import msgpack
import pytest
import trio

from lab.broker.ha import HA_TRANSFER
from lab.broker.pull import FLAG_SUSPEND
from lab.broker.store import MessageStore
from nameserver.client import connect
from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode
from nameserver.server import NameServer

from raw_client import Raw

TOPIC = "TopicTest"


def suspended_pull(queue_id: int = 0, offset: int = 0, suspend_ms: int = 15000, opaque: int = 7) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "cg", "topic": TOPIC, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": 32,
        "sysFlag": FLAG_SUSPEND, "commitOffset": 0, "suspendTimeoutMillis": suspend_ms, "subVersion": 0},
        opaque=opaque)


def heartbeat(client_id: str, group: str = "cg") -> RemotingCommand:
    consumer = {"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                "subscriptionDataSet": [{"topic": TOPIC, "subString": "*"}]}
    return RemotingCommand.request(RequestCode.HEART_BEAT,
                                   body=json.dumps({"clientID": client_id, "consumerDataSet": [consumer]}).encode())


async def until(predicate, timeout: float = 5.0) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.01)


async def start_broker(tcp, name="broker-a-0", **kwargs):
    if not tcp.nameservers:
        await tcp.start_nameserver(port=0)
    return await tcp.start_broker(name, **kwargs)


# --- held requests of a connection that is gone ---------------------------------------------------

async def test_a_consumer_that_leaves_with_a_held_pull_does_not_fail_the_next_send(tcp):
    broker = await start_broker(tcp)
    consumer = await Raw.dial(broker.address)
    await consumer.send(suspended_pull())
    await until(lambda: broker.broker.hold_service.held == 1)
    await consumer.reset()
    await until(lambda: broker.broker.hold_service.held == 0)  # dropped with its connection

    for i in range(5):  # a producer on its own connection: every send stored and answered SUCCESS
        assert (await tcp.send(broker.address, f"m{i}".encode())).code == ResponseCode.SUCCESS
    assert broker.broker.store.max_offset(TOPIC, 0) == 5


async def test_a_held_pull_whose_connection_died_times_out_quietly(tcp):
    broker = await start_broker(tcp)
    consumer = await Raw.dial(broker.address)
    await consumer.send(suspended_pull(suspend_ms=200))
    await until(lambda: broker.broker.hold_service.held == 1)
    await consumer.reset()
    await trio.sleep(0.6)  # past its suspend time, with no traffic at all
    assert (await tcp.send(broker.address)).code == ResponseCode.SUCCESS


async def test_a_pull_held_past_its_connection_is_answered_to_nobody_and_others_still_served(tcp):
    """The reply to a held pull races the close: whichever comes first, no one else is hurt."""
    broker = await start_broker(tcp)
    held = [await Raw.dial(broker.address) for _ in range(4)]
    for i, consumer in enumerate(held):
        await consumer.send(suspended_pull(queue_id=i % 4))
    await until(lambda: broker.broker.hold_service.held == 4)
    for consumer in held:
        await consumer.reset()
    results = [(await tcp.send(broker.address, queue_id=q)).code for q in range(4)]
    assert results == [ResponseCode.SUCCESS] * 4
    await until(lambda: broker.broker.hold_service.held == 0)


async def test_a_slave_that_dies_with_a_held_transfer_does_not_fail_sends_to_its_master(tcp):
    broker = await start_broker(tcp)
    slave = await Raw.dial(broker.address)
    state = {"offset": broker.broker.store.max_physical_offset, "syncOffsets": False,
             "dataVersion": list(broker.broker.topic_config_manager.data_version)}
    await slave.send(RemotingCommand.request(HA_TRANSFER, body=msgpack.packb(state)))
    await until(lambda: broker.broker.hold_service.held == 1)
    await slave.reset()
    for queue_id in range(4):  # a held HA transfer waits on every queue of the master
        assert (await tcp.send(broker.address, queue_id=queue_id)).code == ResponseCode.SUCCESS


async def test_a_killed_slave_broker_does_not_fail_sends_to_its_master(tcp):
    master = await start_broker(tcp)
    slave = await tcp.start_broker("broker-a-1", broker_id=1, store=MessageStore(), topics={})
    await until(lambda: master.broker.hold_service.held == 1)  # the slave is up to date and held
    slave.kill()
    await trio.sleep(0.1)
    for queue_id in range(4):
        assert (await tcp.send(master.address, queue_id=queue_id)).code == ResponseCode.SUCCESS


async def test_two_consumers_of_one_group_leaving_together_leave_the_broker_serving(tcp):
    broker = await start_broker(tcp)
    consumers = [await Raw.dial(broker.address) for _ in range(2)]
    for i, consumer in enumerate(consumers):
        await consumer.send(heartbeat(f"127.0.0.1@c{i}"))
        assert (await consumer.frame()).code == ResponseCode.SUCCESS
    # Each heartbeat after the first notifies the group: drain those notifications.
    await until(lambda: len(broker.broker.consumer_manager.get_all_channel("cg")) == 2)
    for consumer in consumers:
        await consumer.reset()
    await until(lambda: broker.broker.consumer_manager.get_all_channel("cg") == [])
    assert (await tcp.send(broker.address)).code == ResponseCode.SUCCESS
    assert [e["change"] for e in tcp.kinds("broker.consumers")][-2:] == ["closed", "closed"]


# --- hostile frames -----------------------------------------------------------------------------

LONE_SURROGATE_ROUTE_QUERY = (b'{"code":105,"extFields":{"topic":"\\ud800"},"flag":0,"language":"JAVA",'
                              b'"opaque":9,"serializeTypeCurrentRPC":"JSON","version":401}')


def json_frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


async def test_a_topic_that_is_a_lone_surrogate_is_answered_and_the_nameserver_serves_on():
    """A legal JSON escape, "\\ud800": Java's reply says topic[?], as String.getBytes(UTF-8) writes it."""
    server = NameServer()
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve_tcp, "127.0.0.1", 0)
        hostile = await Raw.dial(f"{host}:{port}")
        await hostile.stream.send_all(json_frame(LONE_SURROGATE_ROUTE_QUERY))
        reply = await hostile.frame()
        assert reply.code == ResponseCode.TOPIC_NOT_EXIST and reply.opaque == 9
        assert reply.remark.startswith("No topic route info in name server for the topic: ?\n")
        async with connect(host, port) as other:
            reply = await other.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3)
            assert reply.code == ResponseCode.SUCCESS
        nursery.cancel_scope.cancel()


async def test_a_broker_answers_a_lone_surrogate_topic_and_serves_on(tcp):
    broker = await start_broker(tcp)
    hostile = await Raw.dial(broker.address)
    header = (b'{"code":11,"extFields":{"consumerGroup":"cg","topic":"\\udfff","queueId":"0","queueOffset":"0",'
              b'"maxMsgNums":"1","sysFlag":"0","commitOffset":"0","subVersion":"0"},"flag":0,'
              b'"language":"JAVA","opaque":3,"version":401}')
    await hostile.stream.send_all(json_frame(header))
    reply = await hostile.frame()
    assert reply.code == ResponseCode.TOPIC_NOT_EXIST and "topic[?]" in reply.remark
    assert (await tcp.send(broker.address)).code == ResponseCode.SUCCESS


@pytest.mark.parametrize("topic", ["\\ud800", "T\\udbff\\udbff"])
async def test_a_lab_nameserver_records_a_lone_surrogate_topic_without_losing_its_event_log(topic, tmp_path):
    """The lab's NameServer writes every table change to the event log: a hostile topic name, a
    JSON escape no UTF-8 can hold, must neither end the server nor tear the log."""
    from lab.events import EventLog, read_events

    events = EventLog(trio.current_time, tmp_path / "events.msgpack")
    events.emit("lab", "before")
    server = NameServer(listener=lambda kind, fields: events.emit("ns-0", kind, **fields))
    table = ('{"%s":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"%s",'
             '"topicSysFlag":0,"writeQueueNums":4}}' % (topic, topic))
    body = ('{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":1},'
            '"topicConfigTable":%s}}' % table).encode()
    register = (b'{"code":103,"extFields":{"brokerName":"b","brokerAddr":"127.0.0.1:1","clusterName":"C",'
                b'"haServerAddr":"127.0.0.1:2","brokerId":"0"},"flag":0,"language":"JAVA","opaque":1,"version":401}')
    query = b'{"code":105,"extFields":{"topic":"%s"},"flag":0,"language":"JAVA","opaque":2,"version":401}' % (
        topic.encode())
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve_tcp, "127.0.0.1", 0)
        client = await Raw.dial(f"{host}:{port}")
        await client.stream.send_all(json_frame(register, body) + json_frame(query))
        registered, route = await client.frame(), await client.frame()
        assert registered.code == route.code == ResponseCode.SUCCESS
        assert b'"queueDatas"' in route.body
        nursery.cancel_scope.cancel()
    events.emit("lab", "after")
    events.close()
    records = list(read_events(tmp_path / "events.msgpack"))
    assert [r["kind"] for r in records] == ["before", "ns.register", "ns.route", "ns.remove", "after"]
    assert records[2]["topic"] == topic  # written as the escape text it arrived as


# --- a handler's own bug --------------------------------------------------------------------------

async def test_a_request_handler_that_raises_costs_its_connection_not_the_broker(tcp, monkeypatch):
    from lab.broker.server import Broker

    original = Broker._process

    def buggy(self, channel, req):
        if req.code == 999:
            raise RuntimeError("planted bug")
        return original(self, channel, req)

    monkeypatch.setattr(Broker, "_process", buggy)
    broker = await start_broker(tcp)
    victim = await Raw.dial(broker.address)
    await victim.send(RemotingCommand.request(999, opaque=1))
    assert await victim.stream.receive_some(100) == b""  # closed
    assert (await tcp.send(broker.address)).code == ResponseCode.SUCCESS
    (error,) = tcp.kinds("broker.connection_error")
    assert error["error"] == "internal error: RuntimeError: planted bug"


async def test_a_request_handler_that_raises_costs_its_connection_not_the_nameserver(monkeypatch):
    from nameserver.processor import DefaultRequestProcessor

    original = DefaultRequestProcessor.process_request

    def buggy(self, request, channel, now):
        if request.code == 999:
            raise RuntimeError("planted bug")
        return original(self, request, channel, now)

    monkeypatch.setattr(DefaultRequestProcessor, "process_request", buggy)
    server = NameServer()
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve_tcp, "127.0.0.1", 0)
        victim = await Raw.dial(f"{host}:{port}")
        await victim.send(RemotingCommand.request(999, opaque=1))
        assert await victim.stream.receive_some(100) == b""
        async with connect(host, port) as other:
            reply = await other.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3)
            assert reply.code == ResponseCode.SUCCESS
        nursery.cancel_scope.cancel()


async def test_an_asynchronous_request_that_cannot_be_encoded_fails_at_its_caller():
    """Not as a SYSTEM_ERROR "reply" sent to the peer in its place: the caller hears of it at once."""
    from nameserver.client import RemotingError, open_remoting_client

    server = NameServer()
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve_tcp, "127.0.0.1", 0)
        async with open_remoting_client(await trio.open_tcp_stream(host, port)) as client:
            bad = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
            bad.code = 1 << 40  # no ROCKETMQ header can hold it
            bad.serialize_type = 1
            with pytest.raises(RemotingError, match="cannot be encoded"):
                client.invoke_async(bad, 3, lambda reply: None)
            reply = await client.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3)
            assert reply.code == ResponseCode.SUCCESS  # the connection is whole
        nursery.cancel_scope.cancel()
