"""A synchronous producer (DefaultMQProducerImpl.sendDefaultImpl, 4.9.8), sending at a set rate.

A send picks a queue round robin on the topic's own counter (TopicPublishInfo.sendWhichQueue); a
failed attempt is retried on another broker while the sendMsgTimeout budget lasts
(retryTimesWhenSendFailed more times, only for retryable failures, and never after a timeout, which
spends the budget). The route comes from the producer's publish info, refreshed by the instance;
only a producer that never had one asks the NameServer on the send path.

Events: `producer.send` per attempt, `producer.ack` per stored message, `producer.failed` per
message given up.
"""

from __future__ import annotations

import functools
import itertools
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass

import trio

from chaos.clock import Timers, timer_source
from lab.remoting.epoch import epoch_ms
from lab.remoting.handover import Handover
from lab.remoting.message import encode_properties
from lab.remoting.channels import Node
from nameserver.client import RemotingError
from nameserver.routes import TopicRouteData

from .api import SendResult
from .errors import MQBrokerError, MQClientError, NoRouteInfoError, error_name
from .instance import MQClientInstance
from .route_cache import POSITIVE_MASK, MessageQueue, TopicPublishInfo
from .selection import MQFaultStrategy, is_retryable, remaining_budget


@dataclass
class SendStats:
    """What the TUI shows per producer."""

    ok: int = 0  # messages stored
    failed: int = 0  # messages given up
    retried: int = 0  # attempts after a message's first


class MessageClientIDSetter:
    """UNIQ_KEY: 32 upper-case hex digits — a fixed per-producer prefix (Java: IP, pid, class
    loader hash; here from the node's RNG, so a simulated run repeats), the milliseconds since the
    producer started and a counter."""

    def __init__(self, node: Node):
        self.prefix = node.rng.randbytes(10)
        self.start = node.now()
        self.counter = itertools.count()

    def create_uniq_id(self, now: float) -> str:
        elapsed_ms = int((now - self.start) * 1000) & 0xFFFFFFFF
        return (self.prefix + struct.pack(">IH", elapsed_ms, next(self.counter) & 0xFFFF)).hex().upper()


class Producer:
    def __init__(self, node: Node, instance: MQClientInstance, topics: list[str], *,
                 payload: Callable[[int], bytes] | None = None):
        """payload(i): the body of the i-th message of run(); by default messageSize random bytes."""
        self.node = node
        self.instance = instance
        self.config = node.config.producer
        self.producer_group = self.config.producerGroup
        self.topics = topics
        self._topic_set = frozenset(topics)
        self.payload = payload or (lambda i: node.rng.randbytes(self.config.messageSize))
        self.topic_publish_info_table: dict[str, TopicPublishInfo] = {}
        # Where each TopicPublishInfo's queue counter draws its random start (Java: each its own
        # Random): a stream of the producer's own, seeded from the node's RNG, so a route change,
        # which makes a new counter, moves no other seeded choice (bodies, message ids).
        self.publish_rng = random.Random(node.rng.randrange(POSITIVE_MASK + 1))
        self.mq_fault_strategy = MQFaultStrategy(
            send_latency_fault_enable=self.config.sendLatencyFaultEnable,
            latency_max=self.config.latencyMax, not_available_duration=self.config.notAvailableDuration,
            rng=node.rng)
        self.id_setter = MessageClientIDSetter(node)
        self.stats = SendStats()

    # --- life cycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        self.instance.producers.append(self)
        await self.instance.start(self.topics)
        await self.instance.send_heartbeat_to_all_broker()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Start, then send to the topics in turn at `rate` messages per second until cancelled.
        A send that blocks (a 3 s timeout) delays the ones after it; they do not bunch up after.
        The sends follow one another in timer and reply callbacks; this task does what must wait."""
        await self.start()
        task_status.started()
        handover = Handover()
        loop = _RateLoop(self, handover)
        try:
            loop.timer = loop.call_at(loop.next_send, loop.send_next)
            await _drive(handover)
        finally:
            loop.stop()

    async def shutdown(self) -> None:
        self.instance.producers.remove(self)
        await self.instance.unregister_client(self.producer_group, None)
        self.instance.shutdown()

    # --- routes -------------------------------------------------------------------------------------

    def needs_route(self, topic: str) -> bool:
        info = self.topic_publish_info_table.get(topic)
        return topic in self._topic_set and (info is None or not info.ok())

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        # A new publish info, with a new queue counter at a new random start, as 4.9.8's
        # topicRouteData2TopicPublishInfo makes for every changed route.
        self.topic_publish_info_table[topic] = TopicPublishInfo(topic, route, self.publish_rng)

    async def try_to_find_topic_publish_info(self, topic: str) -> TopicPublishInfo:
        """The publish info in hand; without a usable one, ask the NameServer (or the cache)."""
        info = self.topic_publish_info_table.get(topic)
        if info is None or not info.ok():
            route = await self.instance.update_topic_route_info_from_name_server(topic)
            # The fetch handed this route to on_route_changed: use the info it made, as 4.9.8
            # reads its table again. A route from the cache (the NameServer failed) made none.
            info = self.topic_publish_info_table.get(topic)
            if info is None or info.topic_route_data is not route:
                info = self.topic_publish_info_table[topic] = TopicPublishInfo(topic, route, self.publish_rng)
        if not info.ok():
            raise NoRouteInfoError(topic, "no writable queue on a broker with a master")
        return info

    # --- send ---------------------------------------------------------------------------------------

    async def send(self, topic: str, body: bytes) -> SendResult:
        """sendDefaultImpl, synchronous: the SendResult, or MQClientError / MQBrokerError."""
        handover = Handover()
        sending = _Sending(self, topic, body, handover, lambda outcome: handover.give(("done", outcome)))
        try:
            sending.start()
            outcome = await _drive(handover)
        finally:
            sending.abandoned = True
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _attempt(self, msg_id: str, mq: MessageQueue, times: int, result: str | int, latency: float) -> None:
        self.node.emit("producer.send", msg_id=msg_id, topic=mq.topic, broker=mq.broker_name,
                       queue=mq.queue_id, attempt=times + 1, result=result, latency=round(latency, 6))

    def _failed(self, msg_id: str, topic: str, attempts: int, error: str) -> None:
        self.node.emit("producer.failed", msg_id=msg_id, topic=topic, attempts=attempts, error=error)
        self.stats.failed += 1


async def _drive(handover: Handover) -> object:
    """Do the waits a send hands over (a route asked of the NameServer, a connect) until it hands
    over its outcome."""
    while True:
        kind, value = await handover.take()
        if kind == "done":
            return value
        await value()


class _Sending:
    """One message through sendDefaultImpl: an attempt, and after a retryable failure the next, on
    another broker, while the sendMsgTimeout budget lasts. Each attempt goes out from the callback
    of the one before (or the caller); what must wait is handed over to the task driving the send:
    ("wait", an async function that goes on with the send), or ("done", the outcome) through
    `on_done`."""

    def __init__(self, producer: Producer, topic: str, body: bytes, handover: Handover,
                 on_done: Callable[[SendResult | Exception], None]):
        self.producer, self.topic, self.body = producer, topic, body
        self.handover, self.on_done = handover, on_done
        self.begin_first = producer.node.now()
        self.msg_id = producer.id_setter.create_uniq_id(self.begin_first)
        self.properties = encode_properties({"UNIQ_KEY": self.msg_id, "WAIT": "true"})
        self.info: TopicPublishInfo | None = None
        self.times = 0  # attempts made before this one
        self.mq: MessageQueue | None = None
        self.begin = 0.0  # when this attempt started
        self.brokers_sent: list[str] = []
        self.exception: Exception | None = None  # the last attempt's
        self.abandoned = False  # its task is gone: a reply still on its way is dropped

    def start(self) -> None:
        info = self.producer.topic_publish_info_table.get(self.topic)
        if info is None or not info.ok():
            self.handover.give(("wait", self._find_route))
        else:
            self.info = info
            self._attempt()

    async def _find_route(self) -> None:
        try:
            self.info = await self.producer.try_to_find_topic_publish_info(self.topic)
        except MQClientError as e:
            self.producer._failed(self.msg_id, self.topic, 0, str(e))
            self.on_done(e)
            return
        self._attempt()

    def _attempt(self) -> None:
        p = self.producer
        if self.times > p.config.retryTimesWhenSendFailed:
            self._give_up()
            return
        now = p.node.now
        self.mq = mq = p.mq_fault_strategy.select_one_message_queue(
            self.info, self.info.send_which_queue, self.mq.broker_name if self.mq else None, now())
        self.begin = now()
        left = remaining_budget(self.begin_first, self.begin, p.config.sendMsgTimeout)
        if left <= 0:
            p._failed(self.msg_id, self.topic, self.times, "sendDefaultImpl call timeout")
            self._fail(MQClientError("sendDefaultImpl call timeout"))
            return
        self.brokers_sent.append(mq.broker_name)
        if self.times:
            p.stats.retried += 1
        addr = p.instance.route_cache.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            self._attempt_failed(MQClientError(f"The broker[{mq.broker_name}] not exist"))
        elif p.instance.channels.is_connected(addr):
            self._send(addr, left)
        else:
            self.handover.give(("wait", functools.partial(self._connect_and_send, addr, left)))

    async def _connect_and_send(self, addr: str, timeout: float) -> None:
        try:  # the connect counts against the attempt
            addr, left = await self.producer.instance.api.connect_within(addr, timeout)
        except RemotingError as e:
            self._attempt_failed(e)
            return
        self._send(addr, left)

    def _send(self, addr: str, timeout: float) -> None:
        p = self.producer
        try:
            p.instance.api.send_message_async(addr, self.mq, p.producer_group, self.body, self.properties,
                                              epoch_ms(p.node.epoch_base_ms, self.begin), self.msg_id, timeout, self._on_reply)
        except RemotingError as e:
            self._attempt_failed(e)

    def _on_reply(self, result: SendResult | Exception) -> None:
        if self.abandoned:
            return
        if isinstance(result, Exception):
            self._attempt_failed(result)
            return
        p, mq = self.producer, self.mq
        end = p.node.now()
        p.mq_fault_strategy.update_fault_item(mq.broker_name, (end - self.begin) * 1000, False, end)
        p._attempt(self.msg_id, mq, self.times, "ok", end - self.begin)
        p.node.emit("producer.ack", msg_id=self.msg_id, topic=self.topic, broker=mq.broker_name,
                    queue=result.message_queue.queue_id, queue_offset=result.queue_offset,
                    status=result.send_status)
        p.stats.ok += 1
        self.on_done(result)

    def _attempt_failed(self, error: Exception) -> None:
        p, mq = self.producer, self.mq
        end = p.node.now()
        # A broker's answer is a latency; anything else isolates the broker (600 s ban).
        p.mq_fault_strategy.update_fault_item(mq.broker_name, (end - self.begin) * 1000,
                                              not isinstance(error, MQBrokerError), end)
        p._attempt(self.msg_id, mq, self.times, error_name(error), end - self.begin)
        self.exception = error
        if is_retryable(error):
            self.times += 1
            self._attempt()
        else:
            self._give_up()

    def _give_up(self) -> None:
        p = self.producer
        error = (f"Send [{len(self.brokers_sent)}] times, still failed, cost "
                 f"[{(p.node.now() - self.begin_first) * 1000:.0f}]ms, Topic: {self.topic}, "
                 f"BrokersSent: {self.brokers_sent}: {self.exception}")
        p._failed(self.msg_id, self.topic, len(self.brokers_sent), error)
        self._fail(MQClientError(error))

    def _fail(self, error: Exception) -> None:
        error.__cause__ = self.exception
        self.on_done(error)


class _RateLoop:
    """run()'s sends: each the moment the one before is done and its interval has passed, by a
    timer — no task wakes for a message."""

    def __init__(self, producer: Producer, handover: Handover):
        self.producer, self.handover = producer, handover
        self.interval = 1.0 / producer.config.rate
        self.call_at = timer_source()
        self.next_send = producer.node.now() + producer.node.phase * self.interval
        self.count = itertools.count()
        self.sending: _Sending | None = None
        self.timer: list | None = None

    def send_next(self) -> None:
        p = self.producer
        if p.node.pause.defer(self.send_next):
            return  # frozen: the send that came due goes out on resume
        i = next(self.count)
        try:  # a timer runs it, where no task of the producer's could catch what it raises
            self.sending = _Sending(p, p.topics[i % len(p.topics)], p.payload(i), self.handover, self._sent)
            self.sending.start()
        except Exception as e:
            p.node.fail(e)

    def _sent(self, outcome: SendResult | Exception) -> None:
        # A failed send is already counted and in the event log.
        self.next_send = max(self.next_send + self.interval, self.producer.node.now())
        self.timer = self.call_at(self.next_send, self.send_next)

    def stop(self) -> None:
        if self.sending is not None:
            self.sending.abandoned = True
        if self.timer is not None:
            Timers.cancel(self.timer)
