"""The trio edge of the NameServer: listeners, one task per connection, the expiry scan.

Everything RocketMQ decides lives in DefaultRequestProcessor; this module only moves bytes, keeps
time (trio's clock, so MockClock drives it in tests and simulations) and closes connections.
"""

from __future__ import annotations

import logging

import trio

from .config import NamesrvConfig
from .processor import DefaultRequestProcessor, Listener
from .schedule import Schedule
from .connection import Connection, close_idle_channels
from .protocol import FRAME_MAX_LENGTH, RemotingCommand
from .tcp import AcceptFailures, RawSocketListener, accept_forever

log = logging.getLogger("nameserver.server")

FIRST_SCAN_DELAY = 5.0  # RocketMQ schedules the first scan 5 s after start
# Expired brokers removed between two checkpoints of a scan: thousands of silent brokers (a
# registration flood) expire in batches, and other connections are answered between them.
SCAN_BATCH = 256


class Channel:
    """One accepted connection: the identity brokerLiveTable keeps, and a handle to close it."""

    __slots__ = ("remote_addr", "close_reason", "last_activity", "_scope")

    def __init__(self, remote_addr: str, now: float):
        self.remote_addr = remote_addr
        self.close_reason: str | None = None
        self.last_activity = now  # trio time of the last read; run_idle_close watches it
        self._scope = trio.CancelScope()

    def close(self, reason: str) -> None:
        self.close_reason = self.close_reason or reason
        self._scope.cancel()

    def __repr__(self) -> str:
        return f"<Channel {self.remote_addr}>"


class NameServer:
    def __init__(self, config: NamesrvConfig | None = None, *, listener: Listener | None = None,
                 schedule: Schedule | None = None):
        self.config = config or NamesrvConfig()
        self.schedule = schedule or Schedule()
        self.processor = DefaultRequestProcessor(self.config, listener=listener)
        # Insertion order (a dict, not a set): the idle close walks it, and a simulated run must
        # not depend on where objects happen to sit in memory.
        self.channels: dict[Channel, None] = {}

    @property
    def routes(self):
        return self.processor.routes

    async def serve_tcp(self, host: str = "127.0.0.1", port: int | None = None, *,
                        task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Listen on host:port (port 0 picks a free one); task_status.started gets the bound
        (host, port)."""
        port = self.config.listenPort if port is None else port
        listeners = await trio.open_tcp_listeners(port, host=host, backlog=1024)
        bound = listeners[0].socket.getsockname()[:2]
        self.config.listenPort = bound[1]  # what getNamesrvConfig says (port 0 picks one)
        log.info("The Name Server boot success. listening on %s:%s", *bound)
        # Accepted sockets are served by RawSocketStream (tcp.py) rather than trio's SocketStream:
        # the same stream behaviour, one reschedule per request instead of two.
        raw = [RawSocketListener(listener) for listener in listeners]
        await self.serve(raw, task_status=task_status, started=bound)

    async def serve(self, listeners: list[trio.abc.Listener], *,
                    task_status=trio.TASK_STATUS_IGNORED, started=None) -> None:
        """Serve any trio listeners (TCP, or the lab's simulated network) until cancelled; they
        are closed on the way out. At the descriptor limit it keeps accepting (tcp.accept_forever)."""
        failures = AcceptFailures()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.run_scan)
            nursery.start_soon(self.run_idle_close)
            for listener in listeners:
                nursery.start_soon(self._accept, listener, nursery, failures)
            task_status.started(started)

    async def _accept(self, listener: trio.abc.Listener, nursery: trio.Nursery, failures: AcceptFailures) -> None:
        async with listener:
            await accept_forever(listener, lambda stream: nursery.start_soon(self.handle_stream, stream),
                                 log, "NameServer", failures)

    async def run_scan(self) -> None:
        """scanNotActiveBroker at a fixed rate: first after 5 s, then every interval."""
        await self.schedule.every(FIRST_SCAN_DELAY, self.config.scanNotActiveBrokerInterval, self._scan)

    async def _scan(self) -> None:
        now = trio.current_time()
        while len(self.scan_not_active_broker(now)) >= SCAN_BATCH:
            await trio.lowlevel.checkpoint()

    def scan_not_active_broker(self, now: float) -> list:
        """One batch of the scan: the channels of up to SCAN_BATCH expired brokers, closed."""
        channels = self.processor.scan_not_active_broker(now, SCAN_BATCH)
        for channel in channels:
            if isinstance(channel, Channel):
                channel.close("broker channel expired")
        return channels

    async def run_idle_close(self) -> None:
        """Close connections idle for serverChannelMaxIdleTimeSeconds: no request read for that
        long (a reply is written only right after a read)."""
        await close_idle_channels(self.channels, lambda: self.config.serverChannelMaxIdleTimeSeconds,
                                  self.schedule.sleep_until)

    async def handle_stream(self, stream: trio.abc.Stream) -> None:
        connection = self.connection(stream)
        channel = self.open_channel(connection)

        def handle(request):
            return self.process_request(channel, request)

        reason = "closed"
        try:
            with channel._scope as scope:
                reason = await connection.serve(handle)
            if scope.cancelled_caught:
                reason = channel.close_reason
        finally:
            self.channels.pop(channel, None)
            self.channel_destroyed(channel, reason)
            await connection.aclose()

    def connection(self, stream: trio.abc.Stream) -> Connection:
        """The connection an accepted stream is served on (a NameServer built for streams that
        carry objects says so here: lab/sim/nameserver.py)."""
        return Connection(stream, FRAME_MAX_LENGTH)

    def open_channel(self, connection: Connection) -> Channel:
        """An accepted connection's channel (NettyConnectManageHandler's channelActive)."""
        channel = Channel(connection.remote_addr, trio.current_time())
        self.channels[channel] = None
        return channel

    def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """processRequestCommand: a request read on `channel`, stamped as its last activity, and
        the reply to write (None: none)."""
        now = channel.last_activity = trio.current_time()
        return self.processor.process_request(request, channel, now)

    def channel_destroyed(self, channel: Channel, reason: str) -> None:
        """A connection gone (closed, reset, idle, expired): BrokerHousekeepingService.onChannelDestroy."""
        self.processor.on_channel_destroy(channel, channel.remote_addr, reason)
