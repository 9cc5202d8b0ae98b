"""Which queue a producer sends to, when it tries again, and which brokers it avoids
(TopicPublishInfo.selectOneMessageQueue, DefaultMQProducerImpl.sendDefaultImpl's retry rules,
MQFaultStrategy, LatencyFaultToleranceImpl — RocketMQ 4.9.8). Pure: `now` is in seconds,
latencies and durations in milliseconds as RocketMQ configures them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from nameserver.client import RemotingError
from nameserver.protocol import ResponseCode

from .errors import MQBrokerError, MQClientError
from .route_cache import MessageQueue, ThreadLocalIndex, TopicPublishInfo

ISOLATION_LATENCY = 30_000  # ms: a failed attempt counts as this slow, which bans for 600 s

# Broker codes after which sendDefaultImpl tries again; any other code ends the send at once.
RETRY_RESPONSE_CODES = frozenset({
    ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR,
    ResponseCode.NO_PERMISSION, 204,  # NO_BUYER_ID
    205,  # NOT_IN_CURRENT_UNIT
})


def select_one_message_queue(queues: list[MessageQueue], index: ThreadLocalIndex,
                             last_broker_name: str | None = None) -> MessageQueue:
    """Round robin; a retry skips queues on the broker that just failed, unless no other exists."""
    if last_broker_name is not None:
        for _ in range(len(queues)):
            mq = queues[index.increment_and_get() % len(queues)]
            if mq.broker_name != last_broker_name:
                return mq
    return queues[index.increment_and_get() % len(queues)]


# --- retry policy ---------------------------------------------------------------------------------

def is_retryable(error: Exception) -> bool:
    """Remoting failures and client failures retry; a broker's answer only with a retry code."""
    if isinstance(error, MQBrokerError):
        return error.code in RETRY_RESPONSE_CODES
    return isinstance(error, (RemotingError, MQClientError))


def remaining_budget(begin_first: float, now: float, timeout: float) -> float:
    """What is left of sendMsgTimeout for the next attempt, in whole milliseconds as Java counts
    them; <= 0 means stop (sendDefaultImpl call timeout).

    Java stops when `timeout < costTime`; an attempt that timed out there always overshoots its
    deadline by a few ms. On a virtual clock it ends on the deadline itself, give or take a float's
    last bit, so a spent budget (0 ms) stops too — either way there is no retry after a timeout.
    """
    return (round(timeout * 1000) - round((now - begin_first) * 1000)) / 1000


# --- latency fault tolerance ------------------------------------------------------------------------

@dataclass
class FaultItem:
    name: str
    current_latency: float  # ms
    start_timestamp: float  # s: the broker is avoided until then

    def is_available(self, now: float) -> bool:
        return now >= self.start_timestamp


class LatencyFaultTolerance:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.fault_item_table: dict[str, FaultItem] = {}
        self.which_item_worst = ThreadLocalIndex(rng)

    def update_fault_item(self, name: str, current_latency: float, not_available_duration: float,
                          now: float) -> None:
        self.fault_item_table[name] = FaultItem(name, current_latency, now + not_available_duration / 1000)

    def is_available(self, name: str, now: float) -> bool:
        item = self.fault_item_table.get(name)
        return item is None or item.is_available(now)

    def remove(self, name: str) -> None:
        self.fault_item_table.pop(name, None)

    def pick_one_at_least(self, now: float) -> str | None:
        """A 'least bad' broker: shuffled, then sorted (available first, lower latency, earlier
        end of ban), then one of the better half in turn."""
        items = list(self.fault_item_table.values())
        if not items:
            return None
        self.rng.shuffle(items)
        items.sort(key=lambda i: (not i.is_available(now), i.current_latency, i.start_timestamp))
        half = len(items) // 2
        if half <= 0:
            return items[0].name
        return items[self.which_item_worst.increment_and_get() % half].name


def compute_not_available_duration(latency_max: list[int], not_available_duration: list[int],
                                   current_latency: float) -> int:
    """The ban (ms) for the largest latencyMax step the latency reached. A plain function so the
    workshop (exercise 8) can swap in a learner's version."""
    for step, duration in zip(reversed(latency_max), reversed(not_available_duration)):
        if current_latency >= step:
            return duration
    return 0


class MQFaultStrategy:
    def __init__(self, *, send_latency_fault_enable: bool, latency_max: list[int],
                 not_available_duration: list[int], rng: random.Random):
        self.send_latency_fault_enable = send_latency_fault_enable
        self.latency_max = latency_max
        self.not_available_duration = not_available_duration
        self.latency_fault_tolerance = LatencyFaultTolerance(rng)

    def compute_not_available_duration(self, current_latency: float) -> int:
        return compute_not_available_duration(self.latency_max, self.not_available_duration, current_latency)

    def update_fault_item(self, broker_name: str, current_latency: float, isolation: bool, now: float) -> None:
        """After every attempt; isolation (the attempt raised) counts as 30 s of latency."""
        if self.send_latency_fault_enable:
            duration = self.compute_not_available_duration(ISOLATION_LATENCY if isolation else current_latency)
            self.latency_fault_tolerance.update_fault_item(broker_name, current_latency, duration, now)

    def select_one_message_queue(self, tp_info: TopicPublishInfo, index: ThreadLocalIndex,
                                 last_broker_name: str | None, now: float) -> MessageQueue:
        """index: the topic's own counter, tp_info.send_which_queue, as 4.9.8 reads it there
        (a parameter, so tests can step one of their own)."""
        queues = tp_info.message_queue_list
        if not self.send_latency_fault_enable:
            return select_one_message_queue(queues, index, last_broker_name)
        lft = self.latency_fault_tolerance
        # The first queue on an available broker; lastBrokerName is not avoided here (issue #2358).
        start = index.increment_and_get()
        for i in range(len(queues)):
            mq = queues[(start + i) % len(queues)]
            if lft.is_available(mq.broker_name, now):
                return mq
        not_best_broker = lft.pick_one_at_least(now)
        write_queue_nums = tp_info.get_queue_id_by_broker(not_best_broker)
        if write_queue_nums > 0:
            # 4.9.8 rewrites the picked MessageQueue inside the publish list, so the rewrite
            # outlives this send until the route changes (issue #7779).
            pos = index.increment_and_get() % len(queues)
            mq = queues[pos]._replace(broker_name=not_best_broker,
                                      queue_id=index.increment_and_get() % write_queue_nums)
            queues[pos] = mq
            return mq
        lft.remove(not_best_broker)
        return select_one_message_queue(queues, index)
