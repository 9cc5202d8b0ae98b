"""A route poll round that changes nothing, simulated in aggregate.

Every client polls every topic it uses every 30 s, one GET_ROUTEINFO_BY_TOPIC after another, each
sent from the reply of the one before: 20 clients of 2,000 topics make 1,333 round trips a second
that nearly always change nothing but counters. On a simulated network without faults, when the
NameServer's answer to each topic left in the round is the route the client holds, from where it
got it last, those fetches are simulated in aggregate (CoastingRoutePoll): their times computed as
the network would plan them (a request one link latency out, its answer one back, the next sent as
it lands), one timer for the end, and the counting done when someone looks: the NameServer's
(`ns.routes`, the channel's last read) at its scans and idle checks, the client's at the end.

Anything that could make a fetch go otherwise ends the batch at once (`interrupt`): a link change,
a close or reset of the connection, anything else sent on it, a change of the NameServer's route
generation, the round given up. The fetches answered by then are counted, the one under way goes
back on the wire as it was (its request, or its answer, due when it was due) and the round goes on
fetch by fetch. With no link jitter, a run with coasting and one without hold the same records at
the same times (tests/lab/test_quiet_queues.py); with jitter, coasting fetches take the base
latency, as renewed pulls do (_SimEnd.renew_peer_call).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import TYPE_CHECKING, Callable

import trio

from lab.remoting.handover import CallbackRound
from nameserver.protocol import ResponseCode

from . import api as client_api
from .route_cache import RoutePoll

if TYPE_CHECKING:
    from .instance import MQClientInstance


class CoastingRoutePoll:
    __slots__ = ("instance", "topics", "poll", "round_", "on_result", "resume", "client", "stream", "coaster",
                 "answers", "sends", "arrivals", "replies", "counted", "done")

    def __init__(self, instance: MQClientInstance, topics: list[str], poll: RoutePoll, round_: CallbackRound,
                 on_result: Callable, resume: Callable[[], None], client, stream) -> None:
        self.instance, self.topics, self.poll, self.round_ = instance, topics, poll, round_
        self.on_result, self.resume = on_result, resume  # the round's reply callback, and its next step
        self.client, self.stream = client, stream  # the RemotingClient, and its simulated end
        self.coaster = None  # the NameServer's side (nameserver.server.RouteQueryCoaster)
        self.answers: list[bytes] = []
        self.sends: list[float] = []
        self.arrivals: list[float] = []  # at the NameServer
        self.replies: list[float] = []  # back at the client
        self.counted = 0  # arrivals the NameServer has counted
        self.done = False

    def start(self) -> bool:
        """Coast the topics (those left in the round) when every fetch would change nothing."""
        sample = client_api.route_query(self.topics[0])
        held = self._held_bodies(sample.serialize_type)
        if held is None:
            return False
        coaster = self.stream.coast_queries(self)
        if coaster is None:
            return False
        answers = coaster.answers(sample, self.topics)
        if answers is None or any(not (body is mine or body == mine) for body, mine in zip(answers, held)):
            self.stream.end_coasting(-math.inf, -math.inf)
            return False
        self.coaster, self.answers = coaster, answers
        delay = self.stream.base_delay()
        sent = trio.current_time()
        for _ in self.topics:  # the float arithmetic of _SimEnd._plan_head, step by step
            arrival = sent + delay
            reply = arrival + delay
            self.sends.append(sent)
            self.arrivals.append(arrival)
            self.replies.append(reply)
            sent = reply
        coaster.start(self)
        self.round_.on_give_up = self.interrupt
        self.stream.call_at(self.replies[-1], self.finish)
        return True

    def _held_bodies(self, serialize_type: int) -> list[bytes] | None:
        """The route bodies whose fetch would change nothing here, one per topic: the route cache
        holds the very route decoded from it, it came over this channel last time, and no member
        waits for it. None when a topic has none."""
        instance = self.instance
        source = (instance.api.namesrv.chosen, self.client)
        cached, fetched_from = instance.route_cache.topic_route_table, instance._fetched_from
        members = instance.producers + instance.consumers
        bodies = []
        for topic in self.topics:
            held = client_api.last_decoded_route(topic, serialize_type)
            if held is None or cached.get(topic) is not held[1] or fetched_from.get(topic) != source:
                return None
            if any(member.needs_route(topic) for member in members):
                return None
            bodies.append(held[0])
        return bodies

    def count_arrivals(self, now: float) -> None:
        """The NameServer's count of the queries that reached it by `now`."""
        arrived = bisect_right(self.arrivals, now, lo=self.counted)
        if arrived > self.counted:
            self.coaster.count(arrived - self.counted, self.arrivals[arrived - 1])
            self.counted = arrived

    def _end(self, answered: int) -> None:
        """Counts for the first `answered` fetches, done; the batch lets go of the connection."""
        self.done = True
        self.round_.on_give_up = None
        self.stream.end_coasting(self.replies[answered - 1] if answered else -math.inf,
                                 self.arrivals[self.counted - 1] if self.counted else -math.inf)
        self.coaster.stop(self)
        self.poll.topics += answered
        self.poll.unchanged += answered
        self.round_.at += answered

    def finish(self) -> None:
        """The last answer is in: the round goes on from there (it ends)."""
        if self.done:
            return
        self.count_arrivals(self.arrivals[-1])
        self._end(len(self.topics))
        self.resume()

    def interrupt(self) -> None:
        """Something could make the next fetches go otherwise: the fetch under way goes back on
        the wire, and the round goes on from its reply, fetch by fetch."""
        if self.done:
            return
        now = trio.current_time()
        answered = bisect_right(self.replies, now)
        self.count_arrivals(now)
        self._end(answered)
        if answered == len(self.topics):
            if not self.round_.given_up:
                self.resume()
            return
        topic, sent = self.topics[answered], self.sends[answered]
        self.instance._fetching(topic, self.poll)
        query = self.instance.api.adopt_route_query(self.client, topic, self.instance.config.mqClientApiTimeout,
                                                    self.on_result, sent)
        if self.counted <= answered:  # the request is on its way
            self.stream.send_planned(query, sent, self.arrivals[answered])
        elif self.stream.peer is not None:  # the NameServer answered it (and counted it): the answer is
            self.stream.peer.send_planned(query.response(ResponseCode.SUCCESS, body=self.answers[answered]),
                                          self.arrivals[answered], self.replies[answered])


def coast_route_poll(instance: MQClientInstance, topics: list[str], poll: RoutePoll, round_: CallbackRound,
                     on_result: Callable, resume: Callable[[], None]) -> bool:
    """Coast the round's topics from round_.at on, when it may (see the module's doc)."""
    api = instance.api
    if instance.config.routeParser != "fastjson" or not api.namesrv.is_sticky(instance.channels.is_connected):
        return False
    client = instance.channels.open_channel(api.namesrv.chosen)
    stream = getattr(client, "connection", None) and client.connection.stream
    if not hasattr(stream, "coast_queries") or round_.at >= len(topics):
        return False
    return CoastingRoutePoll(instance, topics[round_.at:], poll, round_, on_result, resume, client, stream).start()
