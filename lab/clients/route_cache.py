"""What a client keeps of the routes it fetched, and what it derives from them (MQClientInstance's
topicRouteTable and brokerAddrTable, topicRouteData2TopicPublishInfo / ...SubscribeInfo). Pure.

The cache holds the last good route per topic: only a successful fetch replaces it. A NameServer
that answers TOPIC_NOT_EXIST, fails or does not answer leaves it alone, which is what keeps a
running client working while every NameServer is down.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from typing import NamedTuple

from nameserver.protocol.codes import PERM_READ, PERM_WRITE
from nameserver.routes import MASTER_ID, TopicRouteData


class MessageQueue(NamedTuple):
    """Ordered as Java's compareTo: topic, broker name, queue id."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.broker_name}:{self.queue_id}"


class FindBrokerResult(NamedTuple):
    broker_addr: str
    slave: bool


# Every MessageQueue a route made, each once: every producer and consumer lists every queue of every
# topic it uses (320,000 of them in a cluster of 20 clients, 2,000 topics and 10 brokers), and the
# same 16,000 queues each time. Immutable, so shared.
# Bounded: a sweep's worker runs many runs, each with its seed's topic names.
_queues: dict[MessageQueue, MessageQueue] = {}
QUEUES_MAX = 500_000


def _queue(topic: str, broker_name: str, queue_id: int) -> MessageQueue:
    mq = MessageQueue(topic, broker_name, queue_id)
    shared = _queues.get(mq)
    if shared is None:
        if len(_queues) >= QUEUES_MAX:
            _queues.clear()
        shared = _queues[mq] = mq
    return shared


def publish_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """orderTopicConf 'broker:n;broker:n' when set; otherwise the write queues of every writable
    QueueData (sorted by broker name) whose broker has a master — a slave alone takes no sends."""
    if route.order_topic_conf:
        queues = []
        for item in route.order_topic_conf.split(";"):
            broker_name, _, nums = item.partition(":")
            queues += [_queue(topic, broker_name, i) for i in range(int(nums))]
        return queues
    masters = {bd.broker_name for bd in route.broker_datas if MASTER_ID in bd.broker_addrs}
    return [
        _queue(topic, qd.broker_name, i)
        for qd in sorted(route.queue_datas)
        if qd.perm & PERM_WRITE and qd.broker_name in masters
        for i in range(qd.write_queue_nums)
    ]


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """The read queues of every readable QueueData, master or not (a slave can serve pulls)."""
    return sorted(
        _queue(topic, qd.broker_name, i)
        for qd in route.queue_datas if qd.perm & PERM_READ
        for i in range(qd.read_queue_nums)
    )


POSITIVE_MASK = 0x7FFFFFFF


class KeyedDraws:
    """random.Random's `choice` as a function of a key: the same key makes the same choices, one
    after another. A pick drawn this way is a question without side effects — asked twice, it
    answers the same — where a shared generator's draw would move every later draw on."""

    __slots__ = ("key", "drawn")

    def __init__(self, key: str):
        self.key, self.drawn = key, 0

    def choice(self, items):
        self.drawn += 1
        return items[zlib.crc32(f"{self.key}:{self.drawn}".encode()) % len(items)]


class ThreadLocalIndex:
    """A round robin's counter (client.common.ThreadLocalIndex): a random start, then one step
    per pick. Java draws the start from the index's own Random; here from the RNG given, so a
    simulated run repeats."""

    def __init__(self, rng: random.Random):
        self.index = rng.randrange(POSITIVE_MASK + 1)

    def increment_and_get(self) -> int:
        self.index = (self.index + 1) & POSITIVE_MASK
        return self.index


class TopicPublishInfo:
    """A producer's view of one topic. The queue list is its own copy: the latency fault strategy
    may rewrite an entry, and the rewrite lasts until the route changes (as in 4.9.8).

    sendWhichQueue is the topic's own: one counter shared by every topic would step once per
    send of any topic, so a producer sending to N topics in turn would put each topic's messages
    on every N-th queue only. 4.9.8 makes a new TopicPublishInfo for every changed route
    (topicRouteData2TopicPublishInfo), with a new index and a new random start; so does the lab
    (Producer.on_route_changed)."""

    def __init__(self, topic: str, route: TopicRouteData, rng: random.Random | None = None):
        """rng: where the index's start comes from (the producer's, seeded from its node's RNG);
        without one (pure tests) an RNG seeded from the topic, never an unseeded one."""
        self.topic = topic
        self.topic_route_data = route
        self.message_queue_list = publish_queues(topic, route)
        self.send_which_queue = ThreadLocalIndex(rng if rng is not None else random.Random(topic))

    def ok(self) -> bool:
        return bool(self.message_queue_list)

    def get_queue_id_by_broker(self, broker_name: str) -> int:
        """The broker's write queue count for this topic, -1 when it has none."""
        for qd in self.topic_route_data.queue_datas:
            if qd.broker_name == broker_name:
                return qd.write_queue_nums
        return -1


def _sorted(route: TopicRouteData) -> tuple:
    return (sorted(route.queue_datas),
            sorted((bd.broker_name, bd.cluster, sorted(bd.broker_addrs.items())) for bd in route.broker_datas),
            route.order_topic_conf, route.filter_server_table)


def unremarkable_fetch(previous: tuple | None, source: tuple, changed: bool) -> bool:
    """A good fetch that tells nothing new: the route is the cached one and it came from where the
    topic's previous fetch came from, which was good too. A source is (NameServer address, the
    channel to it): the first fetch after a NameServer restarted, or over a new connection, is news
    even when the route is the same. `previous` is None after a failure or before any fetch."""
    return not changed and previous == source


@dataclass
class RoutePoll:
    """One round of the periodic route poll (updateTopicRouteInfoFromNameServer): when it began,
    the topics it fetched, and how many of those fetches were unremarkable. The event log counts
    those instead of recording each: a client of 2,000 topics makes 2,000 of them every 30 s."""

    began: float
    topics: int = 0
    unchanged: int = 0


class RouteCache:
    def __init__(self):
        self.topic_route_table: dict[str, TopicRouteData] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}  # broker name -> {broker id -> address}
        self.changes = 0  # bumped whenever a route or a broker address changes
        self._cleaned_at = -1  # `changes` when clean_offline_broker last found nothing to drop

    def update(self, topic: str, route: TopicRouteData) -> bool:
        """A successful fetch: cache it; True when it differs from the cached one."""
        old = self.topic_route_table.get(topic)
        if old is route or (old is not None and _sorted(old) == _sorted(route)):
            return False
        self.topic_route_table[topic] = route
        self.changes += 1
        for bd in route.broker_datas:
            self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)
        return True

    def clean_offline_broker(self) -> None:
        """Drop broker addresses that no cached route mentions any more. With nothing changed
        since a clean that dropped nothing, there is nothing to drop (a client of 2,000 topics
        looked at 40,000 addresses every heartbeat)."""
        if self._cleaned_at == self.changes:
            return
        live = {addr for route in self.topic_route_table.values()
                for bd in route.broker_datas for addr in bd.broker_addrs.values()}
        for broker_name in list(self.broker_addr_table):
            addrs = {i: a for i, a in self.broker_addr_table[broker_name].items() if a in live}
            if addrs != self.broker_addr_table[broker_name]:
                self.changes += 1
            if addrs:
                self.broker_addr_table[broker_name] = addrs
            else:
                del self.broker_addr_table[broker_name]
        self._cleaned_at = self.changes

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        """Sends go to the master only."""
        return self.broker_addr_table.get(broker_name, {}).get(MASTER_ID)

    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int,
                                         only_this_broker: bool) -> FindBrokerResult | None:
        """The asked-for id; for a slave id, the next slave; unless only_this_broker, any address
        (lowest id first) — which is how a consumer falls back to a slave when the master is gone."""
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        for candidate in (broker_id, broker_id + 1) if broker_id != MASTER_ID else (broker_id,):
            if candidate in addrs:
                return FindBrokerResult(addrs[candidate], candidate != MASTER_ID)
        if only_this_broker:
            return None
        first = min(addrs)
        return FindBrokerResult(addrs[first], first != MASTER_ID)

    def find_broker_addr_by_topic(self, topic: str, rng: random.Random | KeyedDraws) -> str | None:
        """A random broker of the topic's route, its master if it has one (GET_CONSUMER_LIST_BY_GROUP)."""
        route = self.topic_route_table.get(topic)
        if route is None or not route.broker_datas:
            return None
        addrs = rng.choice(route.broker_datas).broker_addrs
        if MASTER_ID in addrs:
            return addrs[MASTER_ID]
        return addrs[rng.choice(sorted(addrs))] if addrs else None
