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
from .connection import Connection, close_idle_channels, remote_address
from .protocol import FRAME_MAX_LENGTH, RemotingCommand
from .protocol.codes import V4_9_4
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


class UnchangedRouteAnswers:
    """What GET_ROUTEINFO_BY_TOPIC would answer a coasting route poll for its topics, when each is
    a route found and the same as the topic's answer before (to anyone): queries the processor
    would only count. Every client polls the same topics every 30 s: while neither the routes nor
    the answers given change, neither does this (kept for the NameServer, read from the
    processor's route generation and answers version)."""

    __slots__ = ("processor", "_memo")

    def __init__(self, processor: DefaultRequestProcessor):
        self.processor = processor
        # the last found: (route generation, answers version, serialize type, standard, topics, answers)
        self._memo: tuple | None = None

    def __call__(self, sample: RemotingCommand, topics: list[str]) -> list[bytes] | None:
        """The bodies for `topics` asked as `sample` asks; None when one is not unchanged."""
        processor = self.processor
        standard = sample.version >= V4_9_4 or sample.bool_field("acceptStandardJsonOnly")
        serialize_type = sample.serialize_type
        version = (processor.route_generation(), processor.answers_version, serialize_type, standard)
        memo = self._memo
        # (a suffix: a round that coasts from midway)
        if memo is not None and memo[:4] == version and len(topics) <= len(memo[4]):
            skipped = len(memo[4]) - len(topics)
            if memo[4][skipped:] == topics:
                return memo[5][skipped:]
        answers = []
        for topic in topics:
            key = (topic, serialize_type, standard)
            body = processor.route_body(key)
            last = processor.last_route_answer(key)
            if body is None or not (last is body or last == body):
                return None
            answers.append(body)
        self._memo = (*version, list(topics), answers)
        return answers


class RouteQueryCoaster:
    """A simulated connection's NameServer side of a coasting route poll (_SimEnd.coast_queries):
    the answers it would give, and the queries the batch answered in its stead, counted as
    _count_route_query counts them and stamped on the channel as reads."""

    __slots__ = ("server", "channel")

    def __init__(self, server: NameServer, channel: Channel):
        self.server, self.channel = server, channel

    def answers(self, sample: RemotingCommand, topics: list[str]) -> list[bytes] | None:
        return self.server.unchanged_route_answers(sample, topics)

    def start(self, batch) -> None:
        """From now until `stop`, the batch is told (`interrupt`) when the answers may change, and
        asked to count what arrived (`count_arrivals`) before anyone looks."""
        self.server._coasting[batch] = self.server.processor.route_generation()

    def stop(self, batch) -> None:
        self.server._coasting.pop(batch, None)

    def count(self, queries: int, last_arrival: float) -> None:
        self.server.processor.count_repeated_route_queries(queries)
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
        self.unchanged_route_answers = UnchangedRouteAnswers(self.processor)

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
        self._count_coasting(now)
        while True:
            channels = self.processor.scan_not_active_broker(now, SCAN_BATCH)
            for channel in channels:
                if isinstance(channel, Channel):
                    channel.close("broker channel expired")
            self._check_coasting()
            if len(channels) < SCAN_BATCH:
                break
            await trio.lowlevel.checkpoint()

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
        long (a reply is written only right after a read). Coasting route polls' reads count."""
        await close_idle_channels(self.channels, lambda: self.config.serverChannelMaxIdleTimeSeconds,
                                  self.schedule.sleep_until, before_look=self._count_coasting)

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
