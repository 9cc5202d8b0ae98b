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
from .connection import Connection, remote_address
from .protocol import FRAME_MAX_LENGTH, RemotingCommand
from .tcp import RawSocketListener

log = logging.getLogger("nameserver.server")

FIRST_SCAN_DELAY = 5.0  # RocketMQ schedules the first scan 5 s after start
IDLE_CHECK_INTERVAL = 1.0  # how often the idle-close task looks whether it was turned on


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


class RouteQueryCoaster:
    """A simulated connection's NameServer side of a coasting route poll (_SimEnd.coast_queries):
    the answers it would give, and the queries the batch answered in its stead, counted as
    _count_route_query counts them and stamped on the channel as reads."""

    __slots__ = ("server", "channel")

    def __init__(self, server: NameServer, channel: Channel):
        self.server, self.channel = server, channel

    def answers(self, sample: RemotingCommand, topics: list[str]) -> list[bytes] | None:
        return self.server.processor.unchanged_route_answers(sample, topics)

    def start(self, batch) -> None:
        """From now until `stop`, the batch is told (`interrupt`) when the answers may change, and
        asked to count what arrived (`count_arrivals`) before anyone looks."""
        self.server._coasting[batch] = self.server.processor.route_generation()

    def stop(self, batch) -> None:
        self.server._coasting.pop(batch, None)

    def count(self, queries: int, last_arrival: float) -> None:
        self.server.processor.count_unchanged_route_queries(queries)
        if last_arrival > self.channel.last_activity:
            self.channel.last_activity = last_arrival


class NameServer:
    def __init__(self, config: NamesrvConfig | None = None, *, listener: Listener | None = None,
                 schedule: Schedule | None = None):
        self.config = config or NamesrvConfig()
        self.schedule = schedule or Schedule()
        self.processor = DefaultRequestProcessor(self.config, listener=listener)
        # Insertion order (a dict, not a set): the idle close walks it, and a simulated run must
        # not depend on where objects happen to sit in memory.
        self.channels: dict[Channel, None] = {}
        # Coasting route polls on simulated connections -> the route generation they began at
        self._coasting: dict[object, tuple] = {}

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
        log.info("The Name Server boot success. listening on %s:%s", *bound)
        # Accepted sockets are served by RawSocketStream (tcp.py) rather than trio's SocketStream:
        # the same stream behaviour, one reschedule per request instead of two.
        raw = [RawSocketListener(listener) for listener in listeners]
        await self.serve(raw, task_status=task_status, started=bound)

    async def serve(self, listeners: list[trio.abc.Listener], *,
                    task_status=trio.TASK_STATUS_IGNORED, started=None) -> None:
        """Serve any trio listeners (TCP, or the lab's simulated network) until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.run_scan)
            nursery.start_soon(self.run_idle_close)
            await nursery.start(trio.serve_listeners, self.handle_stream, listeners)
            task_status.started(started)

    async def run_scan(self) -> None:
        """scanNotActiveBroker at a fixed rate: first after 5 s, then every interval."""
        await self.schedule.every(FIRST_SCAN_DELAY, self.config.scanNotActiveBrokerInterval, self._scan)

    async def _scan(self) -> None:
        now = trio.current_time()
        self._count_coasting(now)
        for channel in self.processor.scan_not_active_broker(now):
            if isinstance(channel, Channel):
                channel.close("broker channel expired")
        self._check_coasting()

    def _count_coasting(self, now: float) -> None:
        """What coasting route polls had arrive by `now`, counted before anyone reads the counts."""
        for batch in list(self._coasting):
            batch.count_arrivals(now)

    def _check_coasting(self) -> None:
        """Route answers may differ from now on: coasting polls begun before go back on the wire."""
        if self._coasting:
            generation = self.processor.route_generation()
            for batch, began in list(self._coasting.items()):
                if began != generation:
                    batch.interrupt()

    async def run_idle_close(self) -> None:
        """Close connections idle for serverChannelMaxIdleTimeSeconds: no request read for that
        long (a reply is written only right after a read), as Netty's IdleStateHandler does for
        RocketMQ.

        One task for all connections, because re-arming a per-connection cancel-scope deadline on
        every read went through trio's deadline heap each time, ~8% of the server's CPU in the
        route-query benchmark; handle_stream now only stamps channel.last_activity. This task
        sleeps until the earliest expiry: reads only move expiries later, and a connection opened
        meanwhile expires a whole idle time from its opening, after the longest sleep taken here.
        """
        while True:
            idle = self.config.serverChannelMaxIdleTimeSeconds
            now = trio.current_time()
            wake = now + (idle if idle > 0 else IDLE_CHECK_INTERVAL)
            self._count_coasting(now)  # their reads stamp last_activity
            if idle > 0:
                for channel in list(self.channels):
                    expiry = channel.last_activity + idle
                    if expiry <= now:
                        channel.close(f"idle for {idle:g} s")
                    elif expiry < wake:
                        wake = expiry
            await self.schedule.sleep_until(wake)

    async def handle_stream(self, stream: trio.abc.Stream) -> None:
        channel = Channel(remote_address(stream), trio.current_time())
        self.channels[channel] = None
        connection = Connection(stream, FRAME_MAX_LENGTH)

        if hasattr(stream, "query_coaster"):  # simulated: route polls over it may coast
            stream.query_coaster = RouteQueryCoaster(self, channel)

        def handle(request):
            now = channel.last_activity = trio.current_time()
            reply = self.processor.process_request(request, channel, now)
            if self._coasting:
                self._check_coasting()
            return reply

        reason = "closed"
        try:
            with channel._scope as scope:
                reason = await connection.serve(handle)
            if scope.cancelled_caught:
                reason = channel.close_reason
        finally:
            self.channels.pop(channel, None)
            self.processor.on_channel_destroy(channel, channel.remote_addr, reason)
            self._check_coasting()
            await connection.aclose()
