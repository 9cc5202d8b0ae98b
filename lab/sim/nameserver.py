"""A NameServer's side of the simulator's aggregation of idle traffic.

Every client polls its topics' routes every 30 s; on a large cluster nearly every answer is the one
it got last time. On a simulated network without faults a client's route poll round may coast
(lab/sim/clients.py: CoastingRoutePoll, through the network's `coast_queries`): the round is
simulated in aggregate, and the NameServer only counts the queries that reached it, as
DefaultRequestProcessor counts those it answers, and stamps them on their channel as reads. With
NSLAB_AGGREGATE=0 the network declines, and every query is sent and answered.

CoastingNameServer is nameserver.server.NameServer with that side: it hands each simulated
connection a RouteQueryCoaster, sends coasting polls back on the wire when the routes change (after
a request, a scan batch, a channel gone), and counts what they had arrive before the scan or the
idle check looks. `name_server` gives the lab the NameServer class for its network.
"""

from __future__ import annotations

import trio

from chaos.network import Network, SimNetwork
from nameserver.connection import Connection, close_idle_channels
from nameserver.processor import DefaultRequestProcessor
from nameserver.protocol import FRAME_MAX_LENGTH, RemotingCommand
from nameserver.protocol.codes import V4_9_4
from nameserver.server import Channel, NameServer


def name_server(network: Network) -> type[NameServer]:
    """The NameServer to run on `network`: the coasting one on the simulated network."""
    return CoastingNameServer if isinstance(network, SimNetwork) else NameServer


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

    def __init__(self, server: CoastingNameServer, channel: Channel):
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


class CoastingNameServer(NameServer):
    """A NameServer on the simulated network, whose clients' route polls may coast."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Coasting route polls on simulated connections -> the route generation they began at
        self._coasting: dict[object, tuple] = {}
        self.unchanged_route_answers = UnchangedRouteAnswers(self.processor)

    def connection(self, stream: trio.abc.Stream) -> Connection:
        """Every stream here is the simulated network's end: it carries commands whole and names
        its peer (the node that dialled)."""
        return Connection(stream, FRAME_MAX_LENGTH, objects=True, remote_addr=stream.remote_addr)

    def open_channel(self, connection: Connection) -> Channel:
        channel = super().open_channel(connection)
        connection.stream.query_coaster = RouteQueryCoaster(self, channel)  # route polls over it may coast
        return channel

    def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        reply = super().process_request(channel, request)
        if self._coasting:
            self._check_coasting()
        return reply

    def channel_destroyed(self, channel: Channel, reason: str) -> None:
        super().channel_destroyed(channel, reason)
        self._check_coasting()

    async def _scan(self) -> None:
        self._count_coasting(trio.current_time())
        await super()._scan()

    def scan_not_active_broker(self, now: float) -> list:
        channels = super().scan_not_active_broker(now)
        self._check_coasting()
        return channels

    async def run_idle_close(self) -> None:
        """The idle close, counting what coasting route polls had arrive each time it wakes to
        look (their queries are reads). (It looks first at the start, when nothing coasts yet.)"""
        sleep_until = self.schedule.sleep_until

        async def wake_and_count(when: float) -> None:
            await sleep_until(when)
            self._count_coasting(trio.current_time())

        await close_idle_channels(self.channels, lambda: self.config.serverChannelMaxIdleTimeSeconds, wake_and_count)

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
