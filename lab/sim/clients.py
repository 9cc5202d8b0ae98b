"""A client's side of the simulator's aggregation of idle traffic: rounds of calls that change
nothing, simulated in aggregate — a client's route poll, a consumer's rebalance.

Every client polls every topic it uses every 30 s, one GET_ROUTEINFO_BY_TOPIC after another, and
every consumer asks a broker of each topic for its group's members every 20 s, one
GET_CONSUMER_LIST_BY_GROUP after another, each call sent as the one before is answered: on a
large cluster (20 clients, 2,000 topics) 2,300 round trips a second that nearly always change
nothing but counters. On a simulated network without faults, when every call left in the round
would change nothing — the NameServer's answer to each topic is the route the client holds, from
where it got it last (CoastingRoutePoll); each broker's member list gives the topic the queues the
consumer pulls already (CoastingRebalance) — those calls are simulated in aggregate: their times
computed as the network would plan them (a request one link latency out, its answer one back, the
next sent as it lands), one timer for the end, and the counting done when someone looks.

Anything that could make a call go otherwise ends the coast at once (`interrupt`): a link change,
a close or reset of a connection it uses, the answers changing (the NameServer's route generation,
a broker's member list), the client's side changing, the round given up. The calls answered by
then are counted, the one under way goes back on the wire as it was (its request, or its answer,
due when it was due), and the round's flow goes on call by call, its next call being that one
(SimMQClientAPI: the call a coast put back is offered while it hands the round back). With no link jitter, a run with coasting
and one without hold the same records at the same times (tests/lab/test_quiet_queues.py); with
jitter, coasting calls take the base latency, as renewed pulls do (_SimEnd.renew_peer_call).

The client roles know none of this. SimMQClientInstance and SimConsumer are lab.clients'
MQClientInstance and Consumer with the aggregation hooked on their plain, overridable steps: a
round's loop over its topics (`_poll_routes`, `do_rebalance`, which coast a stretch from the
round's start and hand the rest to the role's loop), where a route or a queue changes (`_fetched`,
`clean_offline_broker`, `_queues_changed`, `shutdown`), and the API and channel table they build
(SimMQClientAPI; lab/sim/remoting.py: SimChannelTable). A coast waits in a round's Flow as a Step
with no task version (lab/remoting/flow.py), so it is tried only where a Flow runs the round. `client_instance_class` and `consumer_class` give the lab the classes for its network, as
lab/sim/nameserver.py's `name_server` does.
"""

from __future__ import annotations

import functools
import math
from bisect import bisect_right
from typing import TYPE_CHECKING, Callable

import trio

from chaos.network import Network, SimNetwork
from lab.clients import api as client_api
from lab.clients.consumer import Consumer, RemoteBrokerOffsetStore
from lab.clients.api import MQClientAPI
from lab.clients.instance import MQClientInstance
from lab.clients.route_cache import MessageQueue, RoutePoll
from lab.remoting.flow import Step, in_flow
from nameserver.protocol import RemotingCommand, ResponseCode
from nameserver.routes import MASTER_ID

from .remoting import SimChannelTable

if TYPE_CHECKING:
    from lab.remoting.channels import Node


def put_back(stream, query: RemotingCommand, answer_body: bytes, sent: float, arrival: float, reply: float,
             now: float) -> None:
    """The call under way when a coast ends, back on the wire as it was: its request on its way,
    or the answer its peer gave (before whatever ended the coast), each due when it was due."""
    if arrival > now:
        stream.send_planned(query, sent, arrival)
    elif stream.peer is not None:
        stream.peer.send_planned(query.response(ResponseCode.SUCCESS, body=answer_body), arrival, reply)


def timeline(calls: int, delay: float, now: float) -> tuple[list[float], list[float], list[float]]:
    """When each of `calls` calls, each sent as the answer before it lands, is sent, reaches its
    peer and is answered: the float arithmetic of _SimEnd._plan_head, step by step."""
    sends, arrivals, replies = [], [], []
    sent = now
    for _ in range(calls):
        arrival = sent + delay
        reply = arrival + delay
        sends.append(sent)
        arrivals.append(arrival)
        replies.append(reply)
        sent = reply
    return sends, arrivals, replies


class CoastingRoutePoll:
    """The route poll's remaining fetches over the chosen NameServer's channel, which the coast
    has to itself (anything else sent on it ends the coast first, so TCP's order holds)."""

    __slots__ = ("instance", "topics", "poll", "resume", "client", "stream", "coaster", "answers", "sends",
                 "arrivals", "replies", "counted", "done")

    def __init__(self, instance: SimMQClientInstance, topics: list[str], poll: RoutePoll, client, stream) -> None:
        self.instance, self.topics, self.poll = instance, topics, poll
        self.resume: Callable | None = None  # the round's flow, waiting for how many fetches were answered
        self.client, self.stream = client, stream  # the RemotingClient, and its simulated end
        self.coaster = None  # the NameServer's side (lab.sim.nameserver.RouteQueryCoaster)
        self.answers: list[bytes] = []
        self.sends = self.arrivals = self.replies = []  # the calls' times: timeline()
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
        if answers is None or answers != held:  # (a list compares its items by identity first)
            self.stream.end_coasting(-math.inf, -math.inf)
            return False
        self.coaster, self.answers = coaster, answers
        self.sends, self.arrivals, self.replies = timeline(len(self.topics), self.stream.base_delay(),
                                                          trio.current_time())
        coaster.start(self)
        self.stream.call_at(self.replies[-1], self.finish)
        return True

    def step(self) -> Step:
        """What the round's flow waits for while the fetches coast: how many were answered."""
        return Step(self._wait, None)

    def _wait(self, resume: Callable) -> None:
        self.resume = resume

    def _held_bodies(self, serialize_type: int) -> list[bytes] | None:
        """The route bodies whose fetch would change nothing here, one per topic: the route cache
        holds the very route decoded from it, it came over this channel last time, and no member
        waits for it. None when a topic has none."""
        instance, topics = self.instance, self.topics
        source = (instance.api.namesrv.chosen, self.client)
        cached, fetched_from = instance.route_cache.topic_route_table.get, instance.last_fetch_source
        held = instance.api.decoded.last_routes(topics, serialize_type)
        for topic, decoded in zip(topics, held):
            if decoded is None or cached(topic) is not decoded[1] or fetched_from(topic) != source:
                return None
        for member in instance.producers + instance.consumers:
            if any(map(member.needs_route, topics)):
                return None
        return [decoded[0] for decoded in held]

    def count_arrivals(self, now: float) -> None:
        """The NameServer's count of the queries that reached it by `now`."""
        arrived = bisect_right(self.arrivals, now, lo=self.counted)
        if arrived > self.counted:
            self.coaster.count(arrived - self.counted, self.arrivals[arrived - 1])
            self.counted = arrived

    def _end(self, answered: int) -> None:
        """Counts for the first `answered` fetches, done; the batch lets go of the connection."""
        self.done = True
        self.stream.end_coasting(self.replies[answered - 1] if answered else -math.inf,
                                 self.arrivals[self.counted - 1] if self.counted else -math.inf)
        self.coaster.stop(self)
        self.poll.topics += answered
        self.poll.unchanged += answered

    def finish(self) -> None:
        """The last answer is in: the round goes on from there (it ends)."""
        if self.done:
            return
        self.count_arrivals(self.arrivals[-1])
        self._end(len(self.topics))
        self.resume(len(self.topics))

    def interrupt(self) -> None:
        """Something could make the next fetches go otherwise: the fetch under way goes back on
        the wire (now, in TCP's order on the channel), and the round goes on from it, fetch by
        fetch — on the client's timeline, at this instant. This may run on the NameServer's stack
        or a chaos action's (the wire cannot wait): what it raises is the client's to report."""
        if self.done:
            return
        try:
            self._put_back()
        except Exception as error:
            self.instance.node.fail(error)

    def _put_back(self) -> None:
        now = trio.current_time()
        answered = bisect_right(self.replies, now)
        self.count_arrivals(now)
        self._end(answered)
        under_way = None
        if answered < len(self.topics):
            topic, sent = self.topics[answered], self.sends[answered]
            query = client_api.route_query(topic)
            under_way = self.instance.api.put_back(("route", topic), self.instance.api.namesrv.chosen, self.client,
                                                     query, sent)
            put_back(self.stream, query, self.answers[answered], sent, self.arrivals[answered],
                     self.replies[answered], now)
        self.stream.call_at(now, functools.partial(self.instance.hand_back, self.resume, answered, under_way))


def coast_route_poll(instance: SimMQClientInstance, topics: list[str], poll: RoutePoll) -> CoastingRoutePoll | None:
    """The round's topics coasting, when they may (see the module's doc)."""
    api = instance.api
    if instance.config.routeParser != "fastjson" or not api.namesrv.is_sticky(instance.channels.is_connected):
        return None
    client = instance.channels.open_channel(api.namesrv.chosen)  # (sticky: open) on the simulated network
    coast = CoastingRoutePoll(instance, topics, poll, client, client.connection.stream)
    return coast if coast.start() else None


class CoastingRebalance:
    """A consumer's rebalance round's remaining member-list calls, each to a broker of its topic
    picked at random, over connections that carry its pulls too (which do not end the coast: the
    calls read a broker's member list and change nothing there). The picks are the consumer's
    question `consumer_list_broker`, which draws by the round and the topic and moves no
    generator on: asked here, it names the brokers the real calls would go to.

    What ends the coast elsewhere — a member list changing on a broker, a link change, a connection
    closing — is told to `wake`, which runs nothing of the client's there: it schedules the end
    (`interrupt`) on the network's clock at that instant, run and error-reported as the client's.
    The client's own changes (its queues, its round given up) end it at once."""

    __slots__ = ("consumer", "topics", "resume", "calls", "broker_of", "sends", "arrivals", "replies", "done",
                 "waking")

    def __init__(self, consumer: SimConsumer, topics: list[str]) -> None:
        self.consumer, self.topics = consumer, topics
        self.resume: Callable | None = None  # the round's flow, waiting for (calls answered, the call under way)
        # per call: (mq_set, broker address, its RemotingClient, its simulated end, the answer's body)
        self.calls: list[tuple] = []
        self.broker_of: dict[str, tuple] = {}  # address -> (what the broker lets it read, the end)
        self.sends = self.arrivals = self.replies = []
        self.done = False
        self.waking = False  # an end scheduled by `wake`

    def start(self) -> bool:
        consumer = self.consumer
        group = consumer.consumer_group
        serialize_type = client_api.consumer_list_query(group).serialize_type
        brokers: dict[str | None, tuple | None] = {}  # address -> what _watch found there
        for topic in self.topics:
            mq_set = consumer.topic_subscribe_info_table.get(topic)
            addr = consumer.consumer_list_broker(topic)
            if addr not in brokers:
                brokers[addr] = self._watch(addr, group, serialize_type)
            broker = brokers[addr]
            if broker is None:
                break
            client, stream, body, members = broker
            if mq_set and not consumer.keeps_queues(topic, mq_set, members):
                break
            self.calls.append((mq_set, addr, client, stream, body))
        if not self.calls:
            self._let_go()
            return False
        self.sends, self.arrivals, self.replies = timeline(len(self.calls), self.calls[0][3].base_delay(),
                                                           trio.current_time())
        self.consumer.coast = self
        self.calls[0][3].call_at(self.replies[-1], self.finish)
        return True

    def step(self) -> Step:
        """What the round's flow waits for while the calls coast: how many were answered."""
        return Step(self._wait, None)

    def _wait(self, resume: Callable) -> None:
        self.resume = resume

    def _watch(self, addr: str | None, group: str, serialize_type: int) -> tuple | None:
        """(its RemotingClient, its simulated end, the member list's body, the members) for the
        broker at `addr`, watched from now on; None when calls to it cannot coast."""
        client = self.consumer.instance.channels.open_channel(addr) if addr is not None else None
        if client is None:
            return None
        stream = client.connection.stream  # the simulated network's end (SimChannelTable's clients)
        broker = stream.watch_peer(self.wake)
        if broker is None:
            return None
        self.broker_of[addr] = (broker, stream)
        broker.watch(group, self.wake)  # (lab/sim/broker.py: MemberWatch)
        body = broker.consumer_list_body(group, serialize_type)
        if body is None:
            return None
        return client, stream, body, self.consumer.instance.api.decoded.consumer_ids(body, serialize_type)

    def _let_go(self) -> None:
        self.done = True
        group = self.consumer.consumer_group
        for broker, stream in self.broker_of.values():
            broker.unwatch(group, self.wake)
            stream.unwatch(self.wake)
        self.consumer.coast = None

    def finish(self) -> None:
        if self.done:
            return
        self._let_go()
        self.resume(len(self.calls))

    def wake(self) -> None:
        """Something elsewhere could make the next calls go otherwise: the end, at this instant,
        on the client's timeline."""
        if not self.done and not self.waking:
            self.waking = True
            self.calls[0][3].call_at(trio.current_time(), self._woken)

    def _woken(self) -> None:
        try:
            self.interrupt()
        except Exception as error:  # the client's to report, as its own callbacks' errors are
            self.consumer.node.fail(error)

    def interrupt(self) -> None:
        if self.done:
            return
        now = trio.current_time()
        answered = bisect_right(self.replies, now)
        self._let_go()
        if answered == len(self.calls):
            self.resume(answered)
            return
        mq_set, addr, client, stream, body = self.calls[answered]
        sent, arrival = self.sends[answered], self.arrivals[answered]
        query = client_api.consumer_list_query(self.consumer.consumer_group)
        under_way = self.consumer.instance.api.put_back(("consumers", query.ext_fields["consumerGroup"]), addr,
                                                        client, query, sent)
        put_back(stream, query, body, sent, arrival, self.replies[answered], now)
        self.consumer.instance.hand_back(self.resume, answered, under_way)


class PutBackCall:
    """A call a coast put back under way, on the client's books: its reply goes to whoever takes
    the call (the round's flow, asking the same again), and may come first."""

    __slots__ = ("key", "addr", "callback", "reply")

    def __init__(self, key: tuple, addr: str) -> None:
        self.key, self.addr = key, addr
        self.callback: Callable | None = None
        self.reply: tuple | None = None

    def __call__(self, reply) -> None:
        if self.callback is not None:
            self.callback(reply)
        else:
            self.reply = (reply,)

    def step(self, read: Callable) -> Step:
        """Its reply, read by `read(reply, resume)` (api.route_reply, say), for a flow."""
        def take(resume: Callable) -> None:
            self.callback = read(resume)
            if self.reply is not None:
                self.callback(self.reply[0])
        return Step(take, None)


class SimMQClientAPI(MQClientAPI):
    """MQClientAPI whose next route fetch or member-list call, while a coast hands its round
    back, is the call the coast put back under way (offer), rather than a new one."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._offered: dict[tuple, PutBackCall] = {}

    def put_back(self, key: tuple, addr: str, client, query: RemotingCommand, sent_at: float) -> PutBackCall:
        """`query`, sent at `sent_at` over `client` (the open channel to `addr`) by a coast that
        puts it on the wire itself: on the client's books now (its timeout counted from then)."""
        call = PutBackCall(key, addr)
        self.channels.adopt_async(addr, client, query, self.node.config.client.mqClientApiTimeout, call, sent_at)
        return call

    def offer(self, call: PutBackCall) -> None:
        self._offered[call.key] = call

    def withdraw(self, call: PutBackCall) -> None:
        self._offered.pop(call.key, None)

    def get_topic_route_info_from_name_server(self, topic: str, timeout: float) -> Step:
        call = self._offered.pop(("route", topic), None) if self._offered else None
        if call is None:
            return super().get_topic_route_info_from_name_server(topic, timeout)
        return call.step(functools.partial(client_api.route_reply, self.decoded, topic))

    def get_consumer_id_list_by_group(self, addr: str, consumer_group: str, timeout: float) -> Step:
        call = self._offered.pop(("consumers", consumer_group), None) if self._offered else None
        if call is None:
            return super().get_consumer_id_list_by_group(addr, consumer_group, timeout)
        return call.step(functools.partial(client_api.consumer_ids_reply, self.decoded, call.addr))


def client_instance_class(network: Network) -> type[MQClientInstance]:
    """The MQClientInstance to run on `network`: the one whose rounds may coast on the simulated network."""
    return SimMQClientInstance if isinstance(network, SimNetwork) else MQClientInstance


def consumer_class(network: Network) -> type[Consumer]:
    """The Consumer to run on `network`: the one whose rebalance rounds may coast on the simulated network."""
    return SimConsumer if isinstance(network, SimNetwork) else Consumer


class SimMQClientInstance(MQClientInstance):
    """MQClientInstance on the simulated network: its route poll rounds may coast
    (CoastingRoutePoll), and its held pulls coast (lab/sim/remoting.py) until a route changes."""

    channel_table = SimChannelTable
    api_class = SimMQClientAPI

    async def _poll_routes(self, topics: list[str], poll: RoutePoll) -> None:
        """MQClientInstance's, its fetches coasting from the round's start while each would change
        nothing (CoastingRoutePoll); from the first that could, fetch by fetch."""
        coast = coast_route_poll(self, topics, poll) if topics and in_flow() else None
        coasted = 0
        if coast is not None:
            try:
                coasted = await coast.step()
            except GeneratorExit:  # the round given up: the fetch under way still goes
                coast.interrupt()
                raise
        await super()._poll_routes(topics[coasted:], poll)

    def hand_back(self, resume: Callable, answered: int, under_way: PutBackCall | None) -> None:
        """A coast's round goes on from its `answered` calls; `under_way`, the call it put back,
        is the round's next call (SimMQClientAPI.offer). Run as the client's: its errors crash it."""
        try:
            if under_way is not None:
                self.api.offer(under_way)
            resume(answered)
        except Exception as error:
            self.node.fail(error)
        finally:
            if under_way is not None:
                self.api.withdraw(under_way)

    def _fetched(self, topic: str, poll: RoutePoll | None, outcome):
        changes = self.route_cache.changes
        result = super()._fetched(topic, poll, outcome)
        if self.route_cache.changes != changes:
            self.channels.wake_coasting()  # a held pull's broker may have moved
        return result

    def clean_offline_broker(self) -> None:
        changes = self.route_cache.changes
        super().clean_offline_broker()
        if self.route_cache.changes != changes:
            self.channels.wake_coasting()

    async def persist_all_consumer_offset(self) -> None:
        """MQClientInstance's, every persistConsumerOffsetInterval: a SimConsumer sends only the
        offsets it cannot vouch are at their brokers already (SimConsumer.persist_changed_offsets)."""
        for consumer in self.consumers:
            if isinstance(consumer, SimConsumer):
                await consumer.persist_changed_offsets()
            else:
                await consumer.persist_consumer_offset()


class ChangedOffsets(RemoteBrokerOffsetStore):
    """A consumer's offsets, and which changed since they were last sent, in the order they did."""

    def __init__(self):
        super().__init__()
        self.changed: dict[MessageQueue, None] = {}

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        old = self.offset_table.get(mq)
        super().update_offset(mq, offset, increase_only)
        if self.offset_table.get(mq) != old:
            self.changed[mq] = None

    def remove_offset(self, mq: MessageQueue) -> None:
        super().remove_offset(mq)
        self.changed.pop(mq, None)


class SimConsumer(Consumer):
    """Consumer on the simulated network: its rebalance rounds may coast (CoastingRebalance), and
    its held pulls coast until its queues change or it stops."""

    def __init__(self, node: Node, instance: MQClientInstance, topics: list[str]):
        super().__init__(node, instance, topics)
        self.coast: CoastingRebalance | None = None  # the rebalance round's calls coasting, if they are
        self._coast_refused = False  # the last try found nothing to coast: wait for a topic kept as it is
        self.offset_store = ChangedOffsets()
        # What the last complete persistAll went by, when it could vouch for every offset it sent:
        # (the route cache's change count, {broker address: the channel it went on}).
        self._persisted_by: tuple[int, dict[str, object]] | None = None

    async def do_rebalance(self) -> None:
        """Consumer.do_rebalance, its member-list calls coasting from the round's start while each
        would change nothing (CoastingRebalance); from the first that could (its call put back on
        the wire, when the coast ended with it under way) the round goes on topic by topic."""
        self.rebalances += 1
        coasted = 0
        instance = self.instance
        if not self._coast_refused and isinstance(instance, SimMQClientInstance) and in_flow():  # (no try while
            coast = CoastingRebalance(self, self.topics)                          # every topic moves queues)
            if coast.start():
                try:
                    coasted = await coast.step()
                except GeneratorExit:  # the round given up: its call under way still goes
                    coast.interrupt()
                    raise
            else:
                self._coast_refused = True
        await self._rebalance_topics(self.topics[coasted:])

    def keeps_queues(self, topic, mq_set, cid_all) -> bool:
        kept = super().keeps_queues(topic, mq_set, cid_all)
        if kept:
            self._coast_refused = False
        return kept

    def _queues_changed(self) -> None:
        """A coasting rebalance call may not be what it would be now, nor a held pull."""
        if self.coast is not None:
            self.coast.interrupt()
        super()._queues_changed()
        if isinstance(self.instance.channels, SimChannelTable):
            self.instance.channels.wake_coasting()  # a held pull of a queue taken away is not sent again

    async def shutdown(self) -> None:
        if isinstance(self.instance.channels, SimChannelTable):
            self.instance.channels.wake_coasting()  # no held pull of ours is sent again
        await super().shutdown()

    async def persist_changed_offsets(self) -> None:
        """persistAll, every persistConsumerOffsetInterval. RocketMQ resends every offset, changed
        or not: on a large cluster 16,000 oneway requests a second that change nothing. When the
        last complete round reached every queue's master (found in the route cache: one missing
        makes each of its queues fetch the route every round) over a connection still open, on a
        network that delivers all it carries (no request fault ever set), and no route changed
        since, an unchanged offset is already at its broker: only the changed ones go.
        Any doubt, and the whole table goes, as RocketMQ sends it. One difference stays: an offset
        another consumer overwrote at the broker meanwhile (two members briefly owning a queue) is
        not written back until this one's changes or the next complete round."""
        store = self.offset_store
        complete = self._persisted_by is None or not self._still_vouched(*self._persisted_by)
        queues = list(store.offset_table if complete else store.changed)
        store.changed.clear()
        channels: dict[str, object] = {}
        vouched = complete
        for mq in queues:
            if mq not in self.process_queue_table:
                store.remove_offset(mq)
                continue
            if complete and self.instance.route_cache.find_broker_address_in_subscribe(
                    mq.broker_name, MASTER_ID, True) is None:
                vouched = False  # its persist fetches the route first, every round, as RocketMQ's does
            addr = await self.persist(mq)
            if addr is None:
                vouched = False
                store.changed[mq] = None  # tried again next round
            elif complete and addr not in channels:
                channels[addr] = self.instance.channels.open_channel(addr)
        if complete:
            self._persisted_by = (self.instance.route_cache.changes, channels) if vouched else None

    def _still_vouched(self, route_changes: int, channels: dict[str, object]) -> bool:
        table = self.instance.channels
        return isinstance(table, SimChannelTable) and route_changes == self.instance.route_cache.changes and all(
            channel is not None and table.open_channel(addr) is channel and table.delivers_everything(channel)
            for addr, channel in channels.items())
