"""What a broker holds in its PullRequestHoldService: pulls that found nothing (long or short
polling) and a slave's HA transfer, each answered from a timer or an arrival, never from a task.

A held pull is one object with slots, not a handful of closures: a large cluster holds one per
queue, 80,000, and the closures were ~1.9 KB of them each.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Hashable

from nameserver.protocol import RemotingCommand

from .long_polling import HeldRequest
from .pull import FLAG_COMMIT_OFFSET

if TYPE_CHECKING:
    from lab.remoting.channels import ClientChannel

    from .server import Broker


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
            self.owner.send_soon(response)


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
    then pulled again without suspending.

    An idle queue's consumer gets an empty answer every 15 s and sends the same pull straight back:
    on a large cluster 5,000 round trips a second that change nothing. On a simulated network
    without faults the two sides agree to skip them (`renew`, long polling only): the pull stays
    held, as the next one would have been, with what its arrival would have done (the piggy-backed
    offset commit, the pull counted). A message that comes within the skipped round trip's two
    link latencies answers it when the pull sent again would have arrived (`back_at`), as then.

    Once renewed, a pull coasts (`coast`): it is renewed every period with no timer at all until
    something could make a renewal go otherwise — data, a link change, the consumer's queue or
    route changing, the connection closing — and each renewal's pull count is made when someone
    looks (`catch_up`). With 80,000 idle queues, the renewals themselves were a third of a large
    cluster's cost."""

    __slots__ = ("topic", "queue_id", "offset", "timeout", "commit", "round_trip", "renewed_at", "restore_call")

    def __init__(self, broker: Broker, req: RemotingCommand, channel: ClientChannel, topic: str, queue_id: int,
                 offset: int, timeout: float, check_interval: float, *, renewable: bool):
        super().__init__(broker, req, channel, (topic, queue_id), check_interval)
        self.topic, self.queue_id, self.offset, self.timeout = topic, queue_id, offset, timeout
        # What the pull sent again would commit: (group, offset), () for nothing; parsed at the
        # first renewal. False: never renewed (short polling).
        self.commit: tuple | bool | None = None if renewable else False
        self.round_trip = self.renewed_at = 0.0  # of the last renewal
        self.restore_call = None  # coasting: the consumer's side of it (coast)

    def has_new(self) -> bool:
        return self.broker.store.max_offset(self.topic, self.queue_id) > self.offset

    def reply(self) -> RemotingCommand:
        return self.broker.pull_message(self.req, self.owner, allow_suspend=False)

    def renew(self) -> float | None:
        if self.commit is False:
            return None
        renew_peer_call = getattr(self.owner.connection.stream, "renew_peer_call", None)
        round_trip = renew_peer_call(self.req.opaque) if renew_peer_call is not None else None
        if round_trip is None:
            return None
        broker = self.broker
        if self.commit is None:
            req = self.req
            self.commit = ((req.require("consumerGroup"), req.require_int("commitOffset"))
                           if req.int_field("sysFlag", 0) & FLAG_COMMIT_OFFSET and not broker.is_slave else ())
        if self.commit:
            broker.store.commit_offset(self.commit[0], self.topic, self.queue_id, self.commit[1])
        self.round_trip = round_trip
        return self._renewal_at(broker.node.now())

    def _renewal_at(self, at: float) -> float:
        """A renewal at `at` (now, or a coasting one's due time): the pull counted, as the pull
        sent again would have been; the next deadline, a round trip and a suspend time on."""
        self.broker.stats.on_pull(at, False)
        self.renewed_at = at
        return at + self.round_trip + self.timeout

    def coast(self, stop_coasting: Callable[[], None]) -> bool:
        """Renewed every period from now on with no work, while nothing changes (see
        _SimEnd.coast_peer_call): the pull count of each renewal is made when someone looks
        (catch_up); the commit is the one just made, the same value every time — unless another
        member of the group, owning the queue for a moment too, commits one meanwhile, which a
        renewal one period at a time would overwrite again. Not on a slave, whose held pulls are
        re-checked every 5 s (its replicated records are not announced)."""
        if self.check_interval != math.inf:
            return False
        coast_peer_call = getattr(self.owner.connection.stream, "coast_peer_call", None)
        if coast_peer_call is None:
            return False
        self.restore_call = coast_peer_call(self.req.opaque, self, stop_coasting)
        return self.restore_call is not None

    def wake(self) -> None:
        """The consumer's state changed: renewed one period at a time again."""
        self.broker.hold_service.uncoast(self)

    def catch_up(self, now: float) -> None:
        """Each renewal due by now, as _renewal_at makes it (the same arithmetic, so the same
        floats), counted at once: a large cluster's drain catches up 80,000 pulls of 40 renewals."""
        at = deadline = self.deadline
        if deadline > now:
            return
        round_trip, timeout = self.round_trip, self.timeout
        renewals = []
        while deadline <= now:
            at = deadline
            renewals.append(at)
            deadline = at + round_trip + timeout
        self.broker.stats.on_pulls_missed(renewals)
        self.renewed_at, self.deadline = at, deadline

    def back_at(self) -> float:
        return self.renewed_at + self.round_trip if self.round_trip else -math.inf

    def restore(self) -> None:
        restore, self.restore_call = self.restore_call, None
        if restore is not None:  # as the last renewal would have left the consumer's timeout
            restore(self.req.opaque, self.renewed_at + self.round_trip / 2)
