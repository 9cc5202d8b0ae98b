"""What every lab node shares: its identity on the network and the event log, and a channel table.

ChannelTable is NettyRemotingClient's: one cached connection per address; a connect bounded by
the connect timeout; a call that times out closes its channel (clientCloseSocketIfTimeout, true
since 4.9.2), so the next call reconnects — which is how a client notices a dead peer.
"""

from __future__ import annotations

import functools
import itertools
import logging
import random
from dataclasses import dataclass, field
from typing import Callable

import trio

from chaos.network import Network
from chaos.pause import Pause
from nameserver.client import RemotingClient, RemotingError, ReplyCallback
from nameserver.protocol import RemotingCommand, SerializeType
from nameserver.schedule import Schedule

from lab.config import LabConfig
from lab.remoting.epoch import epoch_base_ms, epoch_ms
from lab.remoting.flow import Step, in_task
from lab.events import EventLog

LAB_SERIALIZE_TYPE = SerializeType.MSGPACK  # the lab's own nodes speak msgpack to each other

log = logging.getLogger("lab.node")


@dataclass
class Node:
    """A lab node's handle on the world: name, network, event log, config, its own RNG, and its
    schedule: periodic work at a fixed rate from a seeded phase (0..1), held while it is frozen."""

    name: str
    network: Network
    events: EventLog
    config: LabConfig
    rng: random.Random = field(default_factory=random.Random)
    phase: float = 0.0

    def __post_init__(self) -> None:
        # emit(kind, **fields): the event log's, with this node's name; a partial spares every
        # record a Python call and a copy of its fields.
        self.emit = functools.partial(self.events.emit, self.name)
        # now(): the run's clock's own method (a node is made inside trio): trio.current_time()
        # costs three calls, and producers and brokers ask for every message.
        self.now: Callable[[], float] = trio.lowlevel.current_clock().current_time
        # now_ms(): the clock as epoch ms, for timestamps on the wire (lab/remoting/epoch.py).
        self.epoch_base_ms = epoch_base_ms(self.network, self.now())
        self.failure: Exception | None = None
        self._failed = trio.Event()
        self.pause = Pause(on_error=self.fail)
        self.schedule = Schedule(self.phase, self.pause.sleep_until)
        # Draws of their own purposes come from seeds of their own (seed_for), so that no draw
        # moves another purpose's on: derived from the generator's first state, which it keeps.
        first = random.Random()
        first.setstate(self.rng.getstate())
        self._seed = first.getrandbits(64)

    def seed_for(self, purpose: str) -> str:
        """A seed for `purpose`'s own draws: the same for the same node seed and purpose."""
        return f"{self._seed}:{purpose}"

    def now_ms(self) -> int:
        """Epoch milliseconds: the wall clock in sockets mode, SIM_EPOCH_MS + virtual time in simulation."""
        return epoch_ms(self.epoch_base_ms, self.now())

    async def sleep(self, seconds: float) -> None:
        """A wait of the node's own (a pause after a failure): longer if the node is frozen meanwhile."""
        await self.pause.sleep_until(self.now() + seconds)

    def fail(self, error: Exception) -> None:
        """The owner of what a node's callbacks raise (a reply callback, a timer's, a held
        request's answer): they run where none of the node's tasks could catch it, so `crash_on_failure`
        raises it in the node's own nursery, and the node stops as crashed with the real cause."""
        log.error("%s: %s", self.name, error, exc_info=error)
        if self.failure is None:
            self.failure = error
        self._failed.set()

    async def crash_on_failure(self) -> None:
        """Run in the node's nursery: returns never; raises the first error handed to `fail`."""
        await self._failed.wait()
        raise self.failure



class ChannelTable:
    def __init__(self, node: Node, nursery: trio.Nursery, *, connect_timeout: float = 3.0,
                 on_request=None):
        self.node = node
        self.nursery = nursery
        self.connect_timeout = connect_timeout
        self.on_request = on_request
        self._clients: dict[str, RemotingClient] = {}
        self._connecting: dict[str, trio.Event] = {}
        self._opaques = itertools.count()

    def _open(self, address: str) -> RemotingClient | None:
        """The open channel to `address`, if there is one."""
        client = self._clients.get(address)
        return client if client is not None and client.closed_reason is None else None

    def is_connected(self, address: str) -> bool:
        return self._open(address) is not None

    def open_channel(self, address: str) -> RemotingClient | None:
        """The open channel to `address`, if there is one: a new object after every reconnect."""
        return self._open(address)

    def _remoting_client(self, stream: trio.abc.Stream) -> RemotingClient:
        """The NettyRemotingClient side of a new connection."""
        return RemotingClient(stream, opaques=self._opaques, on_request=self.on_request,
                              on_callback_error=self.node.fail)

    def _send_async(self, client: RemotingClient, request: RemotingCommand, timeout: float, reply: ReplyCallback,
                    renew: Callable[[], bool] | None) -> None:
        """invokeAsync on `client`; `renew` is invoke_async's, which a plain client has no use for."""
        client.invoke_async(request, timeout, reply)

    async def _get(self, address: str) -> RemotingClient:
        while True:
            client = self._open(address)
            if client is not None:
                return client
            pending = self._connecting.get(address)
            if pending is None:
                break
            await pending.wait()  # someone else is connecting; use their channel
            if not self.is_connected(address):
                raise RemotingError(f"connect to {address} failed")
        done = self._connecting[address] = trio.Event()
        try:
            with trio.move_on_after(self.connect_timeout) as scope:
                try:
                    stream = await self.node.network.connect(self.node.name, address)
                except OSError as e:
                    raise RemotingError(f"connect to {address} failed: {e.strerror or e}") from None
            await self.node.pause.running()
            if scope.cancelled_caught:
                raise RemotingError(f"connect to {address} timed out after {self.connect_timeout:g} s")
            client = self._remoting_client(stream)
            self._clients[address] = client
            self.nursery.start_soon(client.run)
            return client
        finally:
            del self._connecting[address]
            done.set()

    async def connect(self, address: str) -> None:
        """Open the channel to `address` unless it is open; RemotingError when that fails."""
        await self._get(address)

    async def invoke(self, address: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """Call `address`, connecting first if needed; the connect counts against `timeout`."""
        client = self._open(address)  # without _get's await when open, as nearly every call is
        if client is None:
            deadline = trio.current_time() + timeout
            client = await self._get(address)
            timeout = max(0.0, deadline - trio.current_time())
        try:
            return await client.invoke(request, timeout)
        except RemotingError:  # a timeout too: clientCloseSocketIfTimeout
            self.close(address)
            raise
        finally:  # a timeout that fired while the node was frozen is seen when it resumes
            await self.node.pause.running()

    def invoke_async(self, address: str, request: RemotingCommand, timeout: float, callback: ReplyCallback, *,
                     renew: Callable[[], bool] | None = None) -> None:
        """invokeAsync on the open channel to `address` (open it first: `connect`); RemotingError at
        once when there is none. A call that fails closes the channel, as `invoke` does. `renew`,
        for a long-polled call: whether the caller, given the empty answer a long poll ends with,
        would send the same call again at once (a question without side effects)."""
        client = self._open(address)
        if client is None:
            raise RemotingError(f"no open channel to {address}")
        self._send_async(client, request, timeout, ChannelReply(self, address, client, callback), renew)

    def call(self, address: str, request: RemotingCommand, timeout: float) -> Step:
        """invokeSync as a Step (lab/remoting/flow.py): in a flow, invoke_async on the open channel
        (its reply resumes the flow) or, with none, `invoke` in a task (it connects first); in a
        task, `invoke`. The reply, or the RemotingError the call ended with."""
        def start(resume) -> None:
            if self.is_connected(address):
                self.invoke_async(address, request, timeout, resume)
            else:
                in_task(self.nursery, self.invoke, address, request, timeout).start(resume)
        return Step(start, lambda: self.invoke(address, request, timeout))

    async def invoke_oneway(self, address: str, request: RemotingCommand) -> None:
        client = self._open(address) or await self._get(address)
        try:
            await client.invoke_oneway(request)
        except RemotingError:
            self.close(address)
            raise

    def close(self, address: str) -> None:
        client = self._clients.pop(address, None)
        if client is not None:
            self.nursery.start_soon(client.aclose)

    def close_all(self) -> None:
        for address in list(self._clients):
            self.close(address)


def request(code: int, ext_fields: dict | None = None, body: bytes | None = None, **kwargs) -> RemotingCommand:
    """A request in the lab's own serialize type."""
    return RemotingCommand.request(code, ext_fields, body, serialize_type=LAB_SERIALIZE_TYPE, **kwargs)


class ChannelReply:
    """An asynchronous call's reply on its way to `callback`: a frozen node runs it when it
    resumes, and a call that failed closes the channel, as `invoke` does. An object with slots, not
    a closure: one waits per pending call (80,000 pulls on a large cluster)."""

    __slots__ = ("table", "address", "client", "callback")

    def __init__(self, table: ChannelTable, address: str, client: RemotingClient, callback: ReplyCallback):
        self.table, self.address, self.client, self.callback = table, address, client, callback

    def __call__(self, reply: RemotingCommand | RemotingError) -> None:
        table = self.table
        if table.node.pause.defer(lambda: self(reply)):
            return  # a frozen node runs it when it resumes
        if isinstance(reply, RemotingError) and table._clients.get(self.address) is self.client:
            table.close(self.address)
        self.callback(reply)
