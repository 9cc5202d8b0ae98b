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

import itertools
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass

import trio

from chaos.clock import Timers, timer_source
from lab.remoting.epoch import epoch_ms
from lab.remoting import flow
from lab.remoting.message import encode_properties
from lab.remoting.channels import Node
from nameserver.routes import TopicRouteData

from .api import SendResult
from .errors import ClientFailure, MQBrokerError, MQClientError, NoRouteInfoError, error_name
from .instance import MQClientInstance
from .route_cache import POSITIVE_MASK, MessageQueue, TopicPublishInfo
from .selection import MQFaultStrategy, is_retryable, remaining_budget


@dataclass
class SendStats:
    """A producer's counts of messages and attempts."""

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
        Each send is a Flow that a timer starts the moment the one before is done and its interval
        has passed, so no task wakes for a message. A send that blocks (a 3 s timeout) delays the
        ones after it; they do not bunch up after."""
        await self.start()
        task_status.started()
        interval, call_at, count = 1.0 / self.config.rate, timer_source(), itertools.count()
        next_send = self.node.now() + self.node.phase * interval
        sending: flow.Flow | None = None

        def send_next() -> None:
            nonlocal sending
            if self.node.pause.defer(send_next):
                return  # frozen: the send that came due goes out on resume
            i = next(count)
            try:  # a timer runs it, where no task of the producer's could catch what it raises
                sending = flow.Flow(self.send_default_impl(self.topics[i % len(self.topics)], self.payload(i)), sent)
                sending.start()
            except Exception as e:
                self.node.fail(e)

        def sent(_: object, error: BaseException | None) -> None:
            nonlocal next_send, timer
            if error is not None and not isinstance(error, ClientFailure):  # a failed send is recorded already
                self.node.fail(error)
                return
            next_send = max(next_send + interval, self.node.now())
            timer = call_at(next_send, send_next)

        timer = call_at(next_send, send_next)
        try:
            await trio.sleep_forever()
        finally:
            if sending is not None:
                sending.give_up()
            Timers.cancel(timer)

    async def shutdown(self) -> None:
        self.instance.producers.remove(self)
        await self.instance.unregister_client(self.producer_group, None)
        self.instance.shutdown()

    # --- routes -------------------------------------------------------------------------------------

    def needs_route(self, topic: str) -> bool:
        info = self.topic_publish_info_table.get(topic)
        return topic in self._topic_set and (info is None or not info.ok())

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
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
        """send(msg), synchronous: the SendResult, or MQClientError / MQBrokerError."""
        return await flow.run(self.send_default_impl(topic, body))

    async def send_default_impl(self, topic: str, body: bytes) -> SendResult:
        """sendDefaultImpl (see the module's doc), a Flow's (each reply resumes it) or a task's."""
        now = self.node.now
        begin_first = now()
        msg_id = self.id_setter.create_uniq_id(begin_first)
        properties = encode_properties({"UNIQ_KEY": msg_id, "WAIT": "true"})
        try:
            info = await self.try_to_find_topic_publish_info(topic)
        except MQClientError as e:
            self._failed(msg_id, topic, 0, str(e))
            raise
        mq, brokers_sent, exception = None, [], None
        for times in range(self.config.retryTimesWhenSendFailed + 1):
            mq = self.mq_fault_strategy.select_one_message_queue(info, info.send_which_queue,
                                                                 mq.broker_name if mq else None, now())
            begin = now()
            left = remaining_budget(begin_first, begin, self.config.sendMsgTimeout)
            if left <= 0:
                self._failed(msg_id, topic, times, "sendDefaultImpl call timeout")
                raise MQClientError("sendDefaultImpl call timeout") from exception
            brokers_sent.append(mq.broker_name)
            if times:
                self.stats.retried += 1
            try:
                addr = self.instance.route_cache.find_broker_address_in_publish(mq.broker_name)
                if addr is None:
                    raise MQClientError(f"The broker[{mq.broker_name}] not exist")
                result = await self.instance.api.send_message(addr, mq, self.producer_group, body, properties,
                                                              epoch_ms(self.node.epoch_base_ms, begin), msg_id, left)
            except ClientFailure as error:
                end = now()
                # A broker's answer is a latency; anything else isolates the broker (600 s ban).
                self.mq_fault_strategy.update_fault_item(mq.broker_name, (end - begin) * 1000,
                                                         not isinstance(error, MQBrokerError), end)
                self._attempt(msg_id, mq, times, error_name(error), end - begin)
                exception = error
                if is_retryable(error):
                    continue
                break
            end = now()
            self.mq_fault_strategy.update_fault_item(mq.broker_name, (end - begin) * 1000, False, end)
            self._attempt(msg_id, mq, times, "ok", end - begin)
            self.node.emit("producer.ack", msg_id=msg_id, topic=topic, broker=mq.broker_name,
                           queue=result.message_queue.queue_id, queue_offset=result.queue_offset,
                           status=result.send_status)
            self.stats.ok += 1
            return result
        error = (f"Send [{len(brokers_sent)}] times, still failed, cost [{(now() - begin_first) * 1000:.0f}]ms, "
                 f"Topic: {topic}, BrokersSent: {brokers_sent}: {exception}")
        self._failed(msg_id, topic, len(brokers_sent), error)
        raise MQClientError(error) from exception

    def _attempt(self, msg_id: str, mq: MessageQueue, times: int, result: str | int, latency: float) -> None:
        self.node.emit("producer.send", msg_id=msg_id, topic=mq.topic, broker=mq.broker_name,
                       queue=mq.queue_id, attempt=times + 1, result=result, latency=round(latency, 6))

    def _failed(self, msg_id: str, topic: str, attempts: int, error: str) -> None:
        self.node.emit("producer.failed", msg_id=msg_id, topic=topic, attempts=attempts, error=error)
        self.stats.failed += 1
