"""A remoting client's side of the simulator's aggregation of idle traffic.

On a simulated connection the broker holding a long-polled pull may offer, at the pull's deadline,
to keep holding it rather than answer it empty and get the same pull back (the network's
`renew_peer_call`), and from then on to renew it every period with no work at all until something
changes (`coast_peer_call`). The client takes the offer when the caller says it would send the same
call again (`renew`, given with the call); the call then keeps its opaque and counts its timeout
from when it would have been sent again. A coasting route poll or rebalance round (lab/sim/
clients.py) puts calls it simulated back on the client's books (`adopt_async`).

SimNetworkChannelTable is lab.remoting.channels.ChannelTable on the simulated network (a broker's,
to its NameServers and master; the lab's admin's): the RemotingClient it builds on each of the
network's ends is told what the end is, as the table chose it — it carries commands whole, its peer
is the address dialled, and the network's timers time its calls out.

SimChannelTable is that table for a client (lab/sim/clients.py): it builds a CoastingRemotingClient,
hands it the caller's `renew`, vouches for delivery where the network does, and wakes coasting calls
when the client's state changed.
"""

from __future__ import annotations

import heapq
import math
from typing import Callable

import trio

from lab.remoting.channels import ChannelReply, ChannelTable
from nameserver.client import RemotingClient, RemotingError, ReplyCallback
from nameserver.protocol import RemotingCommand


class SimNetworkChannelTable(ChannelTable):
    """A channel table on the simulated network, whose every stream is one of the network's ends
    (chaos/network.py's _SimEnd)."""

    def _remoting_client(self, stream: trio.abc.Stream) -> RemotingClient:
        return RemotingClient(stream, **self._client_args(stream))

    def _client_args(self, stream: trio.abc.Stream) -> dict:
        return dict(opaques=self._opaques, on_request=self.on_request, on_callback_error=self.node.fail,
                    objects=True, remote_addr=stream.remote_addr, call_at=stream.call_at)


class SimChannelTable(SimNetworkChannelTable):
    """A client's channel table on the simulated network: its channels take the network's offers."""

    def _remoting_client(self, stream: trio.abc.Stream) -> RemotingClient:
        return CoastingRemotingClient(stream, **self._client_args(stream))

    def _send_async(self, client: RemotingClient, request: RemotingCommand, timeout: float, reply: ReplyCallback,
                    renew: Callable[[], bool] | None) -> None:
        client.invoke_async(request, timeout, reply, renew=renew)

    def delivers_everything(self, channel: RemotingClient) -> bool:
        """Whether `channel` is a simulated connection on which whatever is sent arrives unless
        the connection ends (_SimEnd.delivers_everything)."""
        return channel.stream.delivers_everything()

    def adopt_async(self, address: str, client: RemotingClient, request: RemotingCommand, timeout: float,
                    callback: ReplyCallback, sent_at: float) -> None:
        """invoke_async's bookkeeping for a call a coasting batch sent at `sent_at` over `client`
        (CoastingRemotingClient.adopt_async)."""
        client.adopt_async(request, timeout, ChannelReply(self, address, client, callback), sent_at)

    def wake_coasting(self) -> None:
        """Whether a held pull would be sent again may have changed (a queue taken away, a route
        changed): every coasting call, on every channel, is renewed one period at a time again."""
        for client in self._clients.values():
            if type(client) is CoastingRemotingClient:
                client.wake_coasting()


class CoastingRemotingClient(RemotingClient):
    """RemotingClient on a simulated connection, taking its peer's offers to renew or coast calls."""

    def __init__(self, stream: trio.abc.Stream, **kwargs):
        super().__init__(stream, **kwargs)
        stream.call_renewer = self._renew
        stream.call_coaster = self._coast
        # opaque -> whether the caller, given the empty answer a long poll ends with, would send
        # the same call again; dropped with the call (lazily, as _deadlines are)
        self._renewals: dict[int, Callable[[], bool]] = {}
        self._coasting: dict[int, object] = {}  # opaque -> its holder's call, which has wake()
        self._restore_call = self._restore  # one bound method for every coasting call

    def invoke_async(self, request: RemotingCommand, timeout: float, callback: ReplyCallback, *,
                     renew: Callable[[], bool] | None = None) -> None:
        """RemotingClient.invoke_async; `renew`, for a long-polled call: whether the caller, given
        the empty answer a long poll ends with, would send the same call again at once (_renew)."""
        super().invoke_async(request, timeout, callback)
        if renew is not None:
            renewals = self._renewals
            if len(renewals) > 2 * len(self._pending) + 64:  # mostly answered calls: start again
                pending = self._pending
                self._renewals = renewals = {o: r for o, r in renewals.items() if o in pending}
            renewals[request.opaque] = renew

    def adopt_async(self, request: RemotingCommand, timeout: float, callback: ReplyCallback, sent_at: float) -> None:
        """invoke_async's bookkeeping alone, for a call sent at `sent_at` by a coasting batch
        (_SimEnd.coast_queries), which puts it back on the wire itself: numbered, its timeout
        counted from then. On a closed connection the callback gets the error at once."""
        if self.closed_reason is not None:
            callback(RemotingError(f"connection closed: {self.closed_reason}"))
            return
        self._register(request, timeout, callback, sent_at)

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            self._coasting.clear()
            self._renewals.clear()

    def _renew(self, opaque: int, resent_in: float) -> bool:
        """The simulated peer's offer (_SimEnd.renew_peer_call): rather than answer the call
        `opaque` with an empty long-poll answer and get the same call back, keep holding it. Taken
        when the call's `renew` says the caller would call again; the call then counts its timeout
        from when it would have been sent again, `resent_in` from now, under the same opaque."""
        future = self._pending.get(opaque)
        renew = self._renewals.get(opaque)
        if future is None or renew is None or not renew():
            return False
        future.deadline = self._now() + resent_in + future.timeout
        return True

    def _coast(self, opaque: int, held) -> Callable[[int, float], None] | None:
        """The simulated peer's offer (_SimEnd.coast_peer_call), just after it renewed the call
        `opaque`: renew it every period from now on without asking. The call then has no timeout
        until the peer gives it back (`_restore`), which `wake_coasting` asks for (`held.wake()`)."""
        future = self._pending.get(opaque)
        if future is None or opaque not in self._renewals:
            return None
        future.deadline = math.inf
        self._coasting[opaque] = held
        return self._restore_call

    def _restore(self, opaque: int, resent_at: float) -> None:
        """The call coasts no more: its timeout counts from `resent_at`, when the last renewed
        call would have been sent."""
        self._coasting.pop(opaque, None)
        future = self._pending.get(opaque)
        if future is None or future.deadline != math.inf:
            return
        future.deadline = resent_at + future.timeout
        heapq.heappush(self._deadlines, (future.deadline, opaque))
        if future.deadline < self._expiry_deadline:
            self._arm(future.deadline)

    def wake_coasting(self) -> None:
        """Whether a call would be sent again may have changed (the caller's state did): every
        coasting call goes back to being renewed one period at a time, each asked again."""
        coasting, self._coasting = self._coasting, {}
        for held in coasting.values():
            held.wake()
