"""A consumer's retry topic, as 4.9.8's: over real loopback TCP.

A clustering push consumer subscribes %RETRY%<group> (DefaultMQPushConsumerImpl.copySubscription);
the broker creates that topic when the group's first heartbeat comes (ClientManageProcessor.heartBeat
-> TopicConfigManager.createTopicInSendMessageBackMethod: 1 read and 1 write queue, perm RW) and
registers it with every NameServer at once (registerBrokerAll(false, true, true)); the consumer
rebalances and pulls it as any other topic, so mqadmin's topicList lists it and consumerProgress
(GET_CONSUME_STATS, 208, routed by the retry topic's route) shows its rows.
"""

from __future__ import annotations

import json
import re

import trio

from lab.broker import admin
from lab.clients.consumer import Consumer
from lab.clients.instance import MQClientInstance
from lab.clients.route_cache import MessageQueue
from lab.remoting.message import decode_messages
from nameserver.protocol import RequestCode, ResponseCode

TOPIC = "TopicTest"  # the harness broker's topic (tests/lab/conftest.py)
MQ_KEY = re.compile(r'\{"brokerName":"([^"]*)","queueId":(\d+),"topic":"([^"]*)"\}:')


def route(tcp, ns, topic):
    return tcp.nameservers[ns].routes.pickup_topic_route_data(topic)


async def wait_for(predicate, seconds: float = 10.0) -> None:
    with trio.fail_after(seconds):
        while not predicate():
            await trio.sleep(0.02)


async def test_a_consumer_s_group_gets_a_retry_topic_it_pulls_and_consumer_progress_lists(tcp):
    tcp.config.consumer.rebalanceInterval = 0.5  # the retry queue comes with the rebalance after its route
    ns = await tcp.start_nameserver(port=0)
    broker = await tcp.start_broker()
    node = tcp.node("consumer-0")
    consumer = Consumer(node, MQClientInstance(node, [ns], tcp.nursery), [TOPIC])
    group = consumer.consumer_group
    retry = f"%RETRY%{group}"
    await consumer.start()

    # The broker made it at the first heartbeat, and registered it with the NameServer at once.
    config = broker.broker.topic_config_manager.select(retry)
    assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (1, 1, 6)
    await wait_for(lambda: route(tcp, ns, retry) is not None)
    queue_data, = route(tcp, ns, retry).queue_datas
    assert (queue_data.broker_name, queue_data.read_queue_nums, queue_data.perm) == ("broker-a", 1, 6)
    [created] = tcp.kinds("broker.topic", topic=retry)
    assert created["reason"] == "retry"
    topic_list = await tcp.call(ns, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert retry in json.loads(topic_list.body)["topicList"]  # mqadmin topicList

    # A new group's first fetch of its retry route fails (the topic comes with its heartbeat), as
    # Java's does; the consumer then rebalances and pulls its one queue like any topic's.
    assert tcp.kinds("client.route", topic=retry)[0]["ok"] is False
    retry_queue = MessageQueue(retry, "broker-a", 0)
    await wait_for(lambda: retry_queue in consumer.process_queue_table)
    assert set(consumer.process_queue_table) == {MessageQueue(TOPIC, "broker-a", q) for q in range(4)} | {retry_queue}
    rebalance, = tcp.kinds("consumer.rebalance", topic=retry)
    assert rebalance["queues"] == [str(retry_queue)]

    # What another client sent back (CONSUMER_SEND_MSG_BACK) comes to it from the retry queue.
    await tcp.send(broker.address, b"failed once", properties="TAGS\u0001tagA\u0002UNIQ_KEY\u0001AC1100000001")
    await wait_for(lambda: tcp.kinds("consumer.consume", topic=TOPIC))
    origin = decode_messages((await tcp.pull(broker.address)).body)[0]
    back = await tcp.call(broker.address, RequestCode.CONSUMER_SEND_MSG_BACK, {
        "offset": origin.commit_log_offset, "group": group, "delayLevel": 0, "originMsgId": "", "originTopic": TOPIC})
    assert back.code == ResponseCode.SUCCESS
    await wait_for(lambda: tcp.kinds("consumer.consume", topic=retry))
    again, = tcp.kinds("consumer.consume", topic=retry)
    assert (again["msg_id"], again["queue"], again["offset"]) == ("AC1100000001", 0, 0)

    # consumerProgress: GET_CONSUME_STATS (208) for the group, no topic: every topic it has offsets on.
    await consumer.persist_consumer_offset()
    await wait_for(lambda: (group, retry, 0) in broker.broker.store.consumer_offsets)
    reply = await tcp.call(broker.address, admin.GET_CONSUME_STATS, {"consumerGroup": group})
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    text = reply.body.decode()
    rows = sorted((t, int(q)) for b, q, t in MQ_KEY.findall(text))
    assert rows == sorted([(TOPIC, q) for q in range(4)] + [(retry, 0)])
    stats = json.loads(MQ_KEY.sub(lambda m: json.dumps(f"{m[3]}:{m[2]}") + ":", text))
    assert stats["offsetTable"][f"{retry}:0"] == {"brokerOffset": 1, "consumerOffset": 1,
                                                  "lastTimestamp": stats["offsetTable"][f"{retry}:0"]["lastTimestamp"]}
    await consumer.shutdown()


async def test_a_retry_queue_without_an_offset_starts_at_0_whatever_consume_from_where_says(tcp):
    """RebalancePushImpl.computePullFromWhere: CONSUME_FROM_LAST_OFFSET takes a queue's max offset
    when the broker has no offset for the group, but a retry queue's 0."""
    tcp.config.consumer.rebalanceInterval = 0.5
    ns = await tcp.start_nameserver(port=0)
    broker = await tcp.start_broker()
    node = tcp.node("consumer-0")
    consumer = Consumer(node, MQClientInstance(node, [ns], tcp.nursery), [TOPIC])
    retry = f"%RETRY%{consumer.consumer_group}"
    assert consumer.config.consumeFromWhere == "CONSUME_FROM_LAST_OFFSET"
    await consumer.start()
    queue = MessageQueue(retry, "broker-a", 0)
    await wait_for(lambda: queue in consumer.process_queue_table)
    assert consumer.process_queue_table[queue].next_offset == 0
    assert await consumer.compute_pull_from_where(queue) == 0
    await consumer.shutdown()
