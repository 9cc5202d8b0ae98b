"""What a broker holds in its PullRequestHoldService: pulls that found nothing (long or short
polling) and a slave's HA transfer, each answered from a timer or an arrival, never from a task.

A held pull is one object with slots, not a handful of closures: a large cluster holds one per
queue, 80,000, and the closures were ~1.9 KB of them each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Hashable

from nameserver.protocol import RemotingCommand

from .long_polling import HeldRequest

if TYPE_CHECKING:
    from .server import Broker, ClientChannel


class HeldReply(HeldRequest):
    """A request answered by `reply()` once ready or timed out, on the connection it came on. A
    reply that raises is answered as the broker answers a processor that raised; a reply to a
    connection closed meanwhile goes nowhere."""

    __slots__ = ("broker", "req")

    def __init__(self, broker: Broker, req: RemotingCommand, channel: ClientChannel, key: Hashable,
                 check_interval: float):
        super().__init__(channel, key, check_interval)
        self.broker = broker
        self.req = req

    def reply(self) -> RemotingCommand:
        raise NotImplementedError

    def answer(self) -> None:
        try:
            response = self.reply()
        except Exception as e:
            response = self.broker.error_reply(self.req, self.owner, e)
        if not self.req.is_oneway:
            self.owner.connection.send_soon(response)  # dropped if the connection is gone


class ReplyWhenReady(HeldReply):
    """Answered by `reply()` once `ready()`: a slave's HA transfer."""

    __slots__ = ("_ready", "_reply")

    def __init__(self, broker: Broker, req: RemotingCommand, channel: ClientChannel, key: Hashable,
                 check_interval: float, ready: Callable[[], bool], reply: Callable[[], RemotingCommand]):
        super().__init__(broker, req, channel, key, check_interval)
        self._ready, self._reply = ready, reply

    def has_new(self) -> bool:
        return self._ready()

    def reply(self) -> RemotingCommand:
        return self._reply()


class SuspendedPull(HeldReply):
    """A pull that found nothing at `offset`, held until a message comes or its suspend time is up,
    then pulled again without suspending (PullRequestHoldService's PullRequest)."""

    __slots__ = ("topic", "queue_id", "offset", "timeout")

    def __init__(self, broker: Broker, req: RemotingCommand, channel: ClientChannel, topic: str, queue_id: int,
                 offset: int, timeout: float, check_interval: float):
        super().__init__(broker, req, channel, (topic, queue_id), check_interval)
        self.topic, self.queue_id, self.offset, self.timeout = topic, queue_id, offset, timeout

    def has_new(self) -> bool:
        return self.broker.store.max_offset(self.topic, self.queue_id) > self.offset

    def reply(self) -> RemotingCommand:
        return self.broker.pull_message(self.req, self.owner, allow_suspend=False)
