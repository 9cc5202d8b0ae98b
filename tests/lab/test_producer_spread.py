"""A producer sending to several topics spreads each topic's messages over every writable queue of
every broker, as 4.9.8's does: each TopicPublishInfo has its own sendWhichQueue. With one counter
shared by all topics, 4 topics x 8 queues put each topic's messages on one queue per broker
(mqadmin topicStatus: max offsets 0/0/90/0)."""

from __future__ import annotations

import dataclasses
import json
import random
import re

import trio

from lab.broker import admin
from lab.clients.instance import MQClientInstance
from lab.clients.producer import Producer
from lab.config import LabConfig
from lab.remoting.channels import Node
from nameserver.protocol import ResponseCode
from nameserver.routes import TopicConfig

TOPICS = [f"Spread{i}" for i in range(4)]
QUEUES = 8  # write queues of each topic on each broker
BROKERS = ("broker-a", "broker-b")
ROUNDS = 4  # messages per queue when the producer spreads evenly
MESSAGES = len(TOPICS) * QUEUES * len(BROKERS) * ROUNDS

# One entry of topicStatus' offsetTable as fastjson writes it: a MessageQueue key, then its stats.
ENTRY = re.compile(r'\{"brokerName":"[^"]*","queueId":(\d+),"topic":"[^"]*"\}:(\{[^{}]*\})')


async def start_cluster(h):
    """One NameServer, two masters serving TOPICS with QUEUES queues each: the brokers' addresses."""
    await h.start_nameserver(port=0)
    topics = {t: TopicConfig(t, QUEUES, QUEUES, 6) for t in TOPICS}
    brokers = {}
    for name in BROKERS:
        # Each broker its own topic table: they are its disk.
        running = await h.start_broker(f"{name}-0", broker_name=name, topics=dict(topics))
        brokers[name] = running.address
    return brokers


async def run_producer(h, seed: str = "producer-0") -> Producer:
    """A lab producer sending MESSAGES to TOPICS in turn, as the lab's producers do, one after the other."""
    node = Node("producer-0", h.network, h.events, LabConfig(), random.Random(seed))
    producer = Producer(node, MQClientInstance(node, list(h.nameservers), h.nursery), TOPICS)
    await producer.start()
    for i in range(MESSAGES):
        await producer.send(TOPICS[i % len(TOPICS)], b"m%d" % i)
    assert producer.stats.ok == MESSAGES
    return producer


async def max_offsets(h, broker_addr: str, topic: str) -> dict[int, int]:
    """What mqadmin topicStatus shows for the topic on one broker: queue id -> max offset."""
    reply = await h.call(broker_addr, admin.GET_TOPIC_STATS_INFO, {"topic": topic})
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return {int(q): json.loads(stats)["maxOffset"] for q, stats in ENTRY.findall(reply.body.decode())}


async def spreads_every_topic_over_every_queue(h) -> None:
    brokers = await start_cluster(h)
    await run_producer(h)
    for topic in TOPICS:
        status = {name: await max_offsets(h, addr, topic) for name, addr in brokers.items()}
        counts = [n for per_queue in status.values() for n in per_queue.values()]
        assert len(counts) == len(BROKERS) * QUEUES
        assert sum(counts) == MESSAGES // len(TOPICS)
        # Round robin over the topic's own 16 queues: each gets ROUNDS, give or take the one the
        # last message of a round lands on; a shared counter leaves 14 of them empty.
        assert min(counts) >= ROUNDS - 1 and max(counts) <= ROUNDS + 1, f"{topic}: {status}"


async def test_a_producer_spreads_each_topics_messages_over_every_queue_of_every_broker(sim, autojump_clock):
    await spreads_every_topic_over_every_queue(sim)


async def test_over_real_sockets_a_producer_spreads_each_topics_messages_over_every_queue(tcp):
    await spreads_every_topic_over_every_queue(tcp)


async def test_a_changed_route_gives_its_topic_a_new_counter_and_leaves_the_others_theirs(sim, autojump_clock):
    # 4.9.8's topicRouteData2TopicPublishInfo makes a new TopicPublishInfo, and with it a new
    # sendWhichQueue at a new random start, for each changed route; other topics are untouched.
    await start_cluster(sim)
    node = Node("producer-0", sim.network, sim.events, LabConfig(), random.Random("producer-0"))
    producer = Producer(node, MQClientInstance(node, list(sim.nameservers), sim.nursery), TOPICS)
    await producer.start()
    before = dict(producer.topic_publish_info_table)
    counters = {id(info.send_which_queue) for info in before.values()}
    assert set(before) == set(TOPICS) and len(counters) == len(TOPICS), "a counter per topic"
    route = before[TOPICS[0]].topic_route_data
    changed = dataclasses.replace(route, queue_datas=route.queue_datas[:1])  # one broker's queues left
    producer.on_route_changed(TOPICS[0], changed)
    after = producer.topic_publish_info_table
    assert after[TOPICS[0]].send_which_queue is not before[TOPICS[0]].send_which_queue
    assert after[TOPICS[0]].send_which_queue.index != before[TOPICS[0]].send_which_queue.index
    assert all(after[t] is before[t] for t in TOPICS[1:])
