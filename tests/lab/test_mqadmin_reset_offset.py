"""mqadmin 4.9.8 resetOffsetByTime and skipAccumulatedMessage against a lab broker and a lab
consumer, over real loopback TCP: INVOKE_BROKER_TO_RESET_OFFSET (222) header topic, group, timestamp
(-1 for skipAccumulatedMessage), isForce; the broker answers the ResetOffsetBody mqadmin prints and
sends it oneway (RESET_CONSUMER_CLIENT_OFFSET, 220) to the group's consumers, which move
(MQClientInstance.resetOffset) and commit the new offsets."""

from __future__ import annotations

import json

import trio

from lab.broker import admin_processor as ap
from lab.clients import consumer as consumer_module
from lab.clients.consumer import Consumer
from lab.clients.instance import MQClientInstance
from nameserver.protocol import ResponseCode

TOPIC = "TopicTest"


def offset_table(body: bytes) -> dict[tuple[str, int], int]:
    return {(b, int(q)): int(o) for b, q, t, o in consumer_module.RESET_ENTRY.findall(body.decode())}


async def test_reset_offset_by_time_moves_the_online_consumer_back(tcp, monkeypatch):
    monkeypatch.setattr(consumer_module, "RESET_OFFSET_PAUSE", 0.5)  # 10 s in 4.9.8
    tcp.config.consumer.rebalanceInterval = 0.5
    tcp.config.consumer.consumeFromWhere = "CONSUME_FROM_FIRST_OFFSET"
    tcp.config.client.persistConsumerOffsetInterval = 0.2
    ns = await tcp.start_nameserver(port=0)
    broker = await tcp.start_broker()
    store = broker.broker.store
    for i in range(8):
        assert (await tcp.send(broker.address, b"m%d" % i, queue_id=i % 4)).code == ResponseCode.SUCCESS
    node = tcp.node("consumer-0")
    consumer = Consumer(node, MQClientInstance(node, [ns], tcp.nursery), [TOPIC])
    await consumer.start()
    group = consumer.consumer_group
    with trio.fail_after(15):
        while consumer.consumed < 8 or any(store.consumer_offsets.get((group, TOPIC, q)) != 2 for q in range(4)):
            await trio.sleep(0.05)

    # resetOffsetByTime -s 0 (force): every queue back to its first message
    reply = await tcp.call(broker.address, ap.INVOKE_BROKER_TO_RESET_OFFSET,
                           {"topic": TOPIC, "group": group, "timestamp": 0, "isForce": "true"})
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert offset_table(reply.body) == {("broker-a", q): 0 for q in range(4)}
    assert list(json.loads(consumer_module.RESET_ENTRY.sub(r'"\3:\2":\4', reply.body.decode()))) == ["offsetTable"]
    with trio.fail_after(15):
        while consumer.consumed < 16:  # every message again
            await trio.sleep(0.05)
    again = [r for r in tcp.kinds("consumer.consume")][8:]
    assert sorted((r["queue"], r["offset"]) for r in again) == sorted((q, o) for q in range(4) for o in range(2))
    with trio.fail_after(10):
        while any(store.consumer_offsets.get((group, TOPIC, q)) != 2 for q in range(4)):
            await trio.sleep(0.05)

    # a time after every message: getOffsetInQueueByTime gives each queue's last message (not its
    # max offset), lower than the group's, so it moves even when not forced
    later = store.consume_queue(TOPIC, 1)[1].store_timestamp
    last = await tcp.call(broker.address, ap.INVOKE_BROKER_TO_RESET_OFFSET,
                          {"topic": TOPIC, "group": group, "timestamp": later + 10**9, "isForce": "false"})
    assert offset_table(last.body) == {("broker-a", q): 1 for q in range(4)}
    with trio.fail_after(15):
        while consumer.consumed < 20:  # each queue's last message again
            await trio.sleep(0.05)
    with trio.fail_after(10):
        while any(store.consumer_offsets.get((group, TOPIC, q)) != 2 for q in range(4)):
            await trio.sleep(0.05)

    # skipAccumulatedMessage: timestamp -1, each queue's max offset
    for i in range(4):
        await tcp.send(broker.address, b"n%d" % i, queue_id=0)
    skip = await tcp.call(broker.address, ap.INVOKE_BROKER_TO_RESET_OFFSET,
                          {"topic": TOPIC, "group": group, "timestamp": -1, "isForce": "true"})
    assert skip.code == ResponseCode.SUCCESS
    assert offset_table(skip.body) == {("broker-a", 0): 6, **{("broker-a", q): 2 for q in (1, 2, 3)}}
    with trio.fail_after(15):
        while consumer.consumed < 24 or store.consumer_offsets.get((group, TOPIC, 0)) != 6:
            await trio.sleep(0.05)
    await consumer.shutdown()


async def test_reset_offset_refusals_are_4_9_8_s(tcp):
    ns = await tcp.start_nameserver(port=0)
    broker = await tcp.start_broker()
    await tcp.send(broker.address, b"x")
    fields = {"topic": TOPIC, "group": "cg", "timestamp": 0, "isForce": "true"}
    none = await tcp.call(broker.address, ap.INVOKE_BROKER_TO_RESET_OFFSET, fields)
    assert (none.code, none.remark) == (ResponseCode.SYSTEM_ERROR, "THe consumer group <cg> not exist")
    for q in range(4):
        broker.broker.store.commit_offset("cg", TOPIC, q, 0)
    offline = await tcp.call(broker.address, ap.INVOKE_BROKER_TO_RESET_OFFSET, fields)
    # 206: mqadmin then commits the offsets itself (ResetOffsetByTimeOldCommand)
    assert (offline.code, offline.remark) == (206, "Consumer not online, so can not reset offset, "
                                                   f"Group: cg Topic: {TOPIC} Timestamp: 0")
    unknown = await tcp.call(broker.address, ap.INVOKE_BROKER_TO_RESET_OFFSET, {**fields, "topic": "Nope"})
    assert (unknown.code, unknown.remark) == (
        ResponseCode.SYSTEM_ERROR, "[reset-offset] reset offset failed, no topic in this broker. topic=Nope")


def test_offset_in_queue_by_time_is_4_9_8_s_nearest_message():
    from lab.broker.store import MessageStore
    from lab.remoting.message import MessageExt

    store = MessageStore()
    assert store.offset_in_queue_by_time(TOPIC, 0, 5) == 0  # no message
    for t in (100, 200, 200, 300, 400):
        msg = MessageExt(topic=TOPIC, queue_id=0, body=b"x", properties={})
        msg.store_host = msg.born_host = "127.0.0.1:10911"
        msg.store_timestamp = msg.born_timestamp = t
        store.put(msg)
    by_time = lambda t: store.offset_in_queue_by_time(TOPIC, 0, t)  # noqa: E731
    assert [by_time(t) for t in (0, 100, 140, 150, 160, 300, 399, 10**6)] == [0, 0, 0, 0, 1, 3, 4, 4]
    assert by_time(200) == 2  # the one the search meets first ((0 + 4) // 2), not the first stored at 200
