"""A broker's side of the simulator's aggregation of idle traffic.

An idle queue's consumer gets an empty answer every 15 s and sends the same pull straight back: on
a large cluster 5,000 round trips a second that change nothing. On a simulated network without
faults the two sides agree to skip them: the broker holds a CoastingSuspendedPull, which at its
deadline asks the network to renew it in place (`renew`) and then to coast (`coast`). With
NSLAB_AGGREGATE=0 the network declines, and it is answered and sent again as a plain pull is.

`suspended_pull` gives the broker the held pull for a connection; `serve_queries` lets coasting
rebalance rounds over a simulated connection read the broker's member lists
(lab/clients/coasting.py).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

import trio

from lab.broker.held_replies import SuspendedPull
from lab.broker.pull import FLAG_COMMIT_OFFSET
from nameserver.protocol import RemotingCommand

if TYPE_CHECKING:
    from lab.broker.server import Broker
    from lab.remoting.channels import ClientChannel


def suspended_pull(broker: Broker, req: RemotingCommand, channel: ClientChannel, topic: str, queue_id: int,
                   offset: int, timeout: float, check_interval: float) -> SuspendedPull:
    """A long-polled pull to hold: one whose renewals may be aggregated on a simulated connection."""
    if hasattr(channel.connection.stream, "renew_peer_call"):
        return CoastingSuspendedPull(broker, req, channel, topic, queue_id, offset, timeout, check_interval)
    return SuspendedPull(broker, req, channel, topic, queue_id, offset, timeout, check_interval)


def serve_queries(stream: trio.abc.Stream, broker: Broker) -> None:
    """On a simulated connection, rebalance rounds may coast on `broker`'s member lists
    (_SimEnd.watch_peer)."""
    if hasattr(stream, "query_coaster"):
        stream.query_coaster = broker


class CoastingSuspendedPull(SuspendedPull):
    """A held pull the simulated network may renew in place at its deadline, with what the pull
    sent again would have done on arrival (the piggy-backed offset commit, the pull counted). A
    message that comes within the skipped round trip's two link latencies answers it when the pull
    sent again would have arrived (`back_at`), as then.

    Once renewed, a pull coasts (`coast`): it is renewed every period with no timer at all until
    something could make a renewal go otherwise — data, a link change, the consumer's queue or
    route changing, the connection closing — and each renewal's pull count is made when someone
    looks (`catch_up`). With 80,000 idle queues, the renewals themselves were a third of a large
    cluster's cost."""

    __slots__ = ("commit", "round_trip", "renewed_at", "restore_call")

    def __init__(self, broker: Broker, req: RemotingCommand, channel: ClientChannel, topic: str, queue_id: int,
                 offset: int, timeout: float, check_interval: float):
        super().__init__(broker, req, channel, topic, queue_id, offset, timeout, check_interval)
        # What the pull sent again would commit: (group, offset), () for nothing; parsed at the
        # first renewal.
        self.commit: tuple | None = None
        self.round_trip = self.renewed_at = 0.0  # of the last renewal
        self.restore_call = None  # coasting: the consumer's side of it (coast)

    def renew(self) -> float | None:
        round_trip = self.owner.connection.stream.renew_peer_call(self.req.opaque)
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
        self.restore_call = self.owner.connection.stream.coast_peer_call(self.req.opaque, self, stop_coasting)
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
