"""A broker's side of the simulator's aggregation of idle traffic.

An idle queue's consumer gets an empty answer every 15 s and sends the same pull straight back: on
a large cluster 5,000 round trips a second that change nothing. On a simulated network without
faults the two sides agree to skip them: the broker holds a CoastingSuspendedPull, which at its
deadline asks the network to renew it in place (`renew`) and then to coast (`coast`). With
NSLAB_AGGREGATE=0 the network declines, and it is answered and sent again as a plain pull is.

CoastingBroker is lab.broker.server.Broker with that side, hooked on the broker's plain steps:
- its hold service is a CoastingPullRequestHoldService, which renews such a pull at its deadline
  instead of answering it (`_timed_out`), keeps it renewed every period with no timer while it
  coasts, and looks again when the pull sent again would arrive at one found ready by an arrival
  within the skipped round trip (`_arrived`);
- a long-polled pull on a simulated connection is held as a CoastingSuspendedPull
  (`long_polled_pull`);
- a simulated connection's end is handed the broker's MemberWatch, which coasting rebalance rounds
  read and watch (`open_channel`; lab/sim/clients.py): it wraps the broker's
  ConsumerIdsChangeListener (`consumer_ids_change_listener`) to learn of member list changes;
- GET_BROKER_RUNTIME_INFO counts the coasting pulls' renewals due by then before it reads
  getMissTps.

The broker's idle close spares registered clients whatever they send or not (their heartbeats keep
them, ClientHousekeepingService's rule): what a simulated run skips of their traffic (pulls renewed
in place, offset rounds, coasting rebalance calls) changes nothing there.

`broker_class` gives the lab the Broker class for its network.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

import trio

from chaos.network import Network, SimNetwork
from lab.broker.consumer_manager import ConsumerGroupEvent
from lab.broker.held_replies import SuspendedPull
from lab.broker.long_polling import HeldRequest, PullRequestHoldService
from lab.broker.pull import FLAG_COMMIT_OFFSET
from lab.broker.server import Broker, ClientChannel
from nameserver.protocol import RemotingCommand

from .remoting import SimNetworkChannelTable

if TYPE_CHECKING:
    from lab.broker.consumer_manager import ConsumerIdsChangeListener


def broker_class(network: Network) -> type[Broker]:
    """The Broker to run on `network`: the coasting one on the simulated network."""
    return CoastingBroker if isinstance(network, SimNetwork) else Broker


class Renewable:
    """A held request the hold service may renew in place at its deadline rather than answer it,
    and from then on coast: what CoastingPullRequestHoldService asks of it. (A mixin: no slots.)"""

    __slots__ = ()

    def renew(self) -> float | None:
        """Called when the request times out with nothing new, instead of answering it: the new
        deadline if it was renewed in place (the consumer would only have sent it again), else
        None, and it is answered."""
        return None

    def coast(self, stop_coasting: Callable[[], None]) -> bool:
        """Just renewed: whether it is renewed every period from now on with no timer at all,
        until `stop_coasting()` or the request's own wake."""
        return False

    def catch_up(self, now: float) -> None:
        """Coasting: make the renewals due by `now`; `deadline` is the next one's."""

    def restore(self) -> None:
        """Coasting no more: the caller's timeout counts again."""

    def back_at(self) -> float:
        """Renewed in place: when the call sent again would have arrived (after the empty answer's
        round trip), its renewals made up to now. Until then (and at that very instant) an arrival
        does not answer it: the call is on the wire. -inf when it is here."""
        return -math.inf


class CoastingPullRequestHoldService(PullRequestHoldService):
    """PullRequestHoldService whose Renewable requests are renewed in place at their deadline, and
    may coast: renewed every period with no timer, while in `_coasting`, until an arrival answers
    one, its connection closes, or its own wake (`uncoast`) or a link change (`_stop_coasting`)
    puts it back on the timers."""

    def __init__(self, now: Callable[[], float] = trio.current_time, *,
                 on_error: Callable[[Exception], None]) -> None:
        super().__init__(now, on_error=on_error)
        # Renewed every period without a timer (Renewable.coast): an idle queue's pull, held for
        # as long as nothing happens, costs nothing per period. Still held by its key and owner.
        self._coasting: dict[HeldRequest, None] = {}

    @property
    def coasting(self) -> int:
        """How many held requests are renewed every period with no timer now."""
        return len(self._coasting)

    def _timed_out(self, request: HeldRequest, now: float) -> None:
        if not self._renewed(request):
            super()._timed_out(request, now)
        elif not self._coasts(request):
            self._schedule_check(request, now)

    def _renewed(self, request: HeldRequest) -> bool:
        if not isinstance(request, Renewable):
            return False
        try:
            deadline = request.renew()
        except Exception as e:
            self._on_error(e)
            return False
        if deadline is None:
            return False
        request.deadline = deadline
        return True

    def _coasts(self, request: Renewable) -> bool:
        try:
            coasting = request.coast(self._stop_coasting)
        except Exception as e:
            self._on_error(e)
            return False
        if coasting:
            self._coasting[request] = None
        return coasting

    def _arrived(self, request: HeldRequest) -> None:
        if not isinstance(request, Renewable) or not self._on_the_wire(request):
            super()._arrived(request)

    def _on_the_wire(self, request: Renewable) -> bool:
        """Whether a request found ready on an arrival was renewed in place with the call sent
        again still on its way (or arriving at this instant, after what arrives now): it then
        stops coasting and is looked at again when the call would arrive, which would have found
        the data then."""
        now = self._now()
        if self._coasting.pop(request, False) is None:
            self._settle(request, now)
        try:
            back = request.back_at()
        except Exception as e:
            self._on_error(e)
            return False
        if back < now:
            return False
        self._check_at(request, back)
        return True

    def _answer(self, request: HeldRequest) -> None:
        if self._coasting.pop(request, False) is None:
            self._settle(request, self._now())
        super()._answer(request)

    def _forget(self, request: HeldRequest) -> None:
        if self._coasting.pop(request, False) is None:
            self._settle(request, self._now(), restore=False)  # the renewals it had: counted
        super()._forget(request)

    def uncoast(self, request: HeldRequest) -> None:
        """A coasting request renewed one period at a time again (its caller's state changed):
        the renewals due by now are made and its next deadline has a timer."""
        if self._coasting.pop(request, False) is not None:
            return
        now = self._now()
        self._settle(request, now)
        if self.running:
            self._schedule_check(request, now)

    def _settle(self, request: Renewable, now: float, *, restore: bool = True) -> None:
        """A request stops coasting: its renewals due by now made, its caller's timeout back.
        What that raises is the service's error, not the caller's (a consumer's rebalance, a
        chaos action's link change)."""
        try:
            request.catch_up(now)
            if restore:
                request.restore()
        except Exception as e:
            self._on_error(e)

    def _stop_coasting(self) -> None:
        """A link changed somewhere: a renewal might now go otherwise, so none coasts."""
        for request in list(self._coasting):
            self.uncoast(request)

    def catch_up(self) -> None:
        """Make every coasting request's renewals due by now (what they count, counted)."""
        now = self._now()
        for request in self._coasting:
            self._settle(request, now, restore=False)


class CoastingSuspendedPull(SuspendedPull, Renewable):
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

    def __init__(self, broker: CoastingBroker, req: RemotingCommand, channel: ClientChannel, topic: str,
                 queue_id: int, offset: int, timeout: float, check_interval: float):
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


class MemberWatch:
    """The simulator's ear on a broker's consumer groups: the broker's ConsumerIdsChangeListener
    wrapped, so that whoever relies on a group's member list staying as it is (a coasting rebalance
    round) is told once, at its next change; and what such a round over a simulated connection may
    read of the broker (_SimEnd.watch_peer hands it over as the end's `query_coaster`): a group's
    GET_CONSUMER_LIST_BY_GROUP body and that watch, nothing else.

    A member list changes with a CHANGE (a member joined or left, with its group's
    notifyConsumerIdsChangedEnable on, or its channel closed or expired), or without one where the
    group's notifications are off: a heartbeat (REGISTER) or the group's end (UNREGISTER) that
    leaves another list than the watch began with, or an UNREGISTER_CLIENT (`look`)."""

    __slots__ = ("broker", "listener", "watchers", "members")

    def __init__(self, broker: Broker, listener: ConsumerIdsChangeListener):
        self.broker, self.listener = broker, listener
        self.watchers: dict[str, dict[Callable[[], None], None]] = {}  # group -> told at its next change
        self.members: dict[str, list[str]] = {}  # group -> its member list when the watch began

    def consumer_list_body(self, group: str, serialize_type: int) -> bytes | None:
        return self.broker.consumer_list_body(group, serialize_type)

    def watch(self, group: str, watcher: Callable[[], None]) -> None:
        watchers = self.watchers.get(group)
        if watchers is None:
            watchers = self.watchers[group] = {}
            self.members[group] = self.broker.consumer_manager.get_all_client_id(group)
        watchers[watcher] = None

    def unwatch(self, group: str, watcher: Callable[[], None]) -> None:
        watchers = self.watchers.get(group)
        if watchers is not None:
            watchers.pop(watcher, None)
            if not watchers:
                del self.watchers[group], self.members[group]

    def handle(self, event: ConsumerGroupEvent, group: str, *args) -> None:
        """The watchers first, then the broker's listener: the change is told where it happens,
        before the broker notifies anyone."""
        if group in self.watchers:
            if event is ConsumerGroupEvent.CHANGE:
                self._members_changed(group)
            else:
                self.look(group)
        self.listener.handle(event, group, *args)

    def look(self, group: str) -> None:
        """Whether `group`'s member list is another than its watch began with."""
        members = self.members.get(group)
        if members is not None and self.broker.consumer_manager.get_all_client_id(group) != members:
            self._members_changed(group)

    def _members_changed(self, group: str) -> None:
        self.members.pop(group, None)
        for watcher in list(self.watchers.pop(group, ())):
            watcher()


class CoastingBroker(Broker):
    """A broker on the simulated network, whose consumers' idle long polls may be renewed in place
    and coast, and whose member lists coasting rebalance rounds may read and watch."""

    hold_service_class = CoastingPullRequestHoldService
    channel_table_class = SimNetworkChannelTable

    def consumer_ids_change_listener(self) -> ConsumerIdsChangeListener:
        self.member_watch = MemberWatch(self, super().consumer_ids_change_listener())
        return self.member_watch

    def open_channel(self, stream: trio.abc.Stream) -> ClientChannel:
        """Every stream here is the simulated network's end: it carries commands whole and names
        its peer (the node that dialled), and rebalance rounds over it may coast."""
        channel = ClientChannel(stream, self.node.now(), objects=True, remote_addr=stream.remote_addr)
        stream.query_coaster = self.member_watch
        return channel

    def _unregister_client(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        reply = super()._unregister_client(req, channel)
        group = req.field("consumerGroup")
        if group:  # a member that left where the group's notifications are off tells no one
            self.member_watch.look(group)
        return reply

    def long_polled_pull(self, req: RemotingCommand, channel: ClientChannel, topic: str, queue_id: int,
                         offset: int, timeout: float, check_interval: float) -> SuspendedPull:
        return CoastingSuspendedPull(self, req, channel, topic, queue_id, offset, timeout, check_interval)

    def _get_broker_runtime_info(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        self.hold_service.catch_up()  # coasting pulls' renewals: counted in getMissTps
        return super()._get_broker_runtime_info(req, channel)
