"""MQClientInstance: what every producer and consumer of one client shares — the channels, the
NameServer choice, the route cache, heartbeats to brokers and the periodic tasks (4.9.8):

    fetch NameServer addresses   10 s, then every 2 min (only when they come from the address server)
    route poll, every used topic 10 ms, then every pollNameServerInterval (30 s)
    clean offline brokers + heartbeat   1 s, then every heartbeatBrokerInterval (30 s)
    persist consumer offsets     10 s, then every persistConsumerOffsetInterval (5 s)
    rebalance                    every rebalanceInterval (20 s), at once on NOTIFY_CONSUMER_IDS_CHANGED

Every route fetch emits `client.route`, but for the periodic poll's fetches that change nothing
(unremarkable_fetch), which each round's `client.route_poll` counts. The cached route survives any
failed fetch (route_cache.py), so a running client keeps working while every NameServer is down.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import trio

from lab.remoting.channels import LAB_SERIALIZE_TYPE, ChannelTable, Node
from lab.remoting import flow
from nameserver import bodies
from nameserver.client import RemotingError
from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode
from nameserver.protocol.fastjson import encode
from nameserver.routes import MASTER_ID, TopicRouteData

from .api import MQClientAPI
from .decoded import DecodedBodies
from .errors import ClientFailure, MQBrokerError, NoRouteInfoError, error_name
from .namesrv import NamesrvSelector, addrs_from_address_server, namesrv_source, parse_http_reply
from .route_cache import FindBrokerResult, KeyedDraws, MessageQueue, RouteCache, RoutePoll, unremarkable_fetch

if TYPE_CHECKING:
    from .consumer import Consumer
    from .producer import Producer

RESET_CONSUMER_CLIENT_OFFSET = 220  # RequestCode
CONSUME_MESSAGE_DIRECTLY = 309  # RequestCode

log = logging.getLogger("lab.clients")

CLIENT_IP = "127.0.0.1"
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
FETCH_NAMESRV_ADDR_DELAY, FETCH_NAMESRV_ADDR_PERIOD = 10.0, 120.0
POLL_NAMESERVER_DELAY = 0.01
HEARTBEAT_DELAY = 1.0
PERSIST_OFFSET_DELAY = 10.0
MAX_HTTP_REPLY = 1 << 20  # bytes of the address server's reply read at most


class MQClientInstance:
    channel_table = ChannelTable  # NettyRemotingClient's channel table, built in __init__
    api_class = MQClientAPI  # MQClientAPIImpl, built in __init__

    def __init__(self, node: Node, namesrv_addrs: str | list[str] | None, nursery: trio.Nursery, *,
                 properties: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None,
                 decoded: DecodedBodies | None = None):
        """namesrv_addrs ('a:9876;b:9876', a list or None), `properties` (Java's system properties) and
        `env` (default: the process environment): where the NameServers come from (namesrv.py).
        `decoded`: the run's shared decoded bodies (lab/clients/decoded.py), its own by default."""
        self.node = node
        self.config = node.config.client
        self.client_id = f"{CLIENT_IP}@{node.name}"
        self.nursery = nursery
        self.source = namesrv_source(namesrv_addrs, properties=properties,
                                     env=os.environ if env is None else env)
        self.channels = self.channel_table(node, nursery, connect_timeout=self.config.connectTimeoutMillis,
                                     on_request=self._process_request)
        namesrv = NamesrvSelector(node.rng)
        namesrv.update_addr_list(self.source.addrs)
        self.api = self.api_class(node, self.channels, namesrv, decoded)
        self.route_cache = RouteCache()
        # Members: each says whether it lacks a topic's route and takes every changed route.
        self.producers: list[Producer] = []
        self.consumers: list[Consumer] = []
        self.topics_in_use: dict[str, None] = {}  # an ordered set
        # topic -> (NameServer, channel) of its last good fetch: a fetch over another channel (the
        # NameServer restarted, the client reconnected) has its own record.
        self._fetched_from: dict[str, tuple] = {}
        self._heartbeat: tuple[tuple, bytes] | None = None  # (the members, their HEART_BEAT body)
        self._rebalance_wakeup = trio.Event()
        self._broker_picks = node.seed_for("consumer_list_broker")  # see consumer_list_broker
        self._services: trio.CancelScope | None = None

    # --- life cycle -------------------------------------------------------------------------------

    async def start(self, topics: list[str]) -> None:
        """Fetch the routes of `topics` and start the periodic tasks (once per instance).

        As in 4.9.8, a client starts whether or not a NameServer answers: one that gets no route
        keeps asking every route poll, and its sends fail meanwhile with "No route info of this
        topic"."""
        if self._services is None and self.source.ws_addr:
            await self.fetch_name_server_addr()
        await flow.run(self._fetch_routes(topics))
        if self._services is None:
            self._services = trio.CancelScope()
            self.nursery.start_soon(self._run_services)

    async def _run_services(self) -> None:
        c = self.config
        with self._services:
            async with trio.open_nursery() as nursery:
                if self.source.ws_addr:
                    nursery.start_soon(self.node.schedule.every, FETCH_NAMESRV_ADDR_DELAY, FETCH_NAMESRV_ADDR_PERIOD,
                                       self.fetch_name_server_addr)
                nursery.start_soon(self.node.schedule.every, POLL_NAMESERVER_DELAY, c.pollNameServerInterval,
                                   lambda: flow.run(self.update_topic_route_info_from_name_server_all()))
                nursery.start_soon(self.node.schedule.every, HEARTBEAT_DELAY, c.heartbeatBrokerInterval,
                                   self.send_heartbeat_to_all_broker)
                nursery.start_soon(self.node.schedule.every, PERSIST_OFFSET_DELAY, c.persistConsumerOffsetInterval,
                                   self.persist_all_consumer_offset)
                nursery.start_soon(self._rebalance_service)

    def shutdown(self) -> None:
        """Stop the periodic tasks and close every channel, once no producer or consumer is left."""
        if self.producers or self.consumers:
            return
        if self._services is not None:
            self._services.cancel()
        self.channels.close_all()

    # --- NameServer addresses and routes ------------------------------------------------------------

    async def fetch_name_server_addr(self) -> None:
        """TopAddressing.fetchNSAddr: GET the address server's URL through the lab's network (so a
        simulated run can serve it too); a list that differs replaces the NameServers. No answer,
        or one that is no list, changes nothing."""
        url = urlsplit(self.source.ws_addr)
        path = url.path + (f"?{url.query}" if url.query else "")
        raw = b""
        with trio.move_on_after(self.config.mqClientApiTimeout) as waited:
            try:
                stream = await self.node.network.connect(self.node.name, url.netloc if url.port else f"{url.netloc}:80")
                async with stream:
                    await stream.send_all(f"GET {path or '/'} HTTP/1.0\r\nHost: {url.netloc}\r\n"
                                          "Connection: close\r\n\r\n".encode())
                    while len(raw) < MAX_HTTP_REPLY and (chunk := await stream.receive_some(65536)):
                        raw += chunk
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                return
        addrs = None if waited.cancelled_caught else addrs_from_address_server(*parse_http_reply(raw))
        if addrs and self.api.namesrv.update_addr_list(addrs):
            self.node.emit("client.ns_list", addrs=addrs, url=self.source.ws_addr)

    async def _refresh(self, topic: str, poll: RoutePoll | None = None) -> tuple[TopicRouteData | None, Exception | None]:
        """Ask the chosen NameServer for the route; (the route now in use, the failure if any).
        `poll`: the periodic round this fetch belongs to (RoutePoll)."""
        self.topics_in_use[topic] = None
        if poll is not None:
            poll.topics += 1
        try:
            fetched = await self.api.get_topic_route_info_from_name_server(topic, self.config.mqClientApiTimeout)
        except ClientFailure as failure:
            self._fetched_from.pop(topic, None)
            cached = self.route_cache.topic_route_table.get(topic)
            outcome = ({"code": failure.code} if isinstance(failure, MQBrokerError) else {"error": str(failure)})
            self.node.emit("client.route", topic=topic, source="cache" if cached else None,
                           ns=self.api.namesrv.chosen, ok=False, **outcome)
            return cached, failure
        return self._fetched(topic, poll, fetched), None

    def _fetched(self, topic: str, poll: RoutePoll | None, fetched: TopicRouteData) -> TopicRouteData:
        """A good fetch taken in: the cache, the members, the record (see _refresh)."""
        changed = self.route_cache.update(topic, fetched)
        members = self.producers + self.consumers
        if changed or any(m.needs_route(topic) for m in members):
            for member in members:
                member.on_route_changed(topic, fetched)
        ns, previous = self.api.namesrv.chosen, self._fetched_from.get(topic)
        source = self._fetched_from[topic] = (ns, self.channels.open_channel(ns))
        if poll is not None and unremarkable_fetch(previous, source, changed):
            poll.unchanged += 1
        else:
            self.node.emit("client.route", topic=topic, source="nameserver", ns=ns, ok=True, code=0,
                           changed=changed)
        return fetched

    async def update_topic_route_info_from_name_server(self, topic: str) -> TopicRouteData:
        """The fresh route, else the cached one; NoRouteInfoError when there is neither."""
        route, failure = await self._refresh(topic)
        if route is None:
            reason = (f"{error_name(failure)} from NameServer {self.api.namesrv.chosen}"
                      if isinstance(failure, MQBrokerError) else str(failure))
            raise NoRouteInfoError(topic, reason) from failure
        return route

    async def _fetch_routes(self, topics: list[str]) -> None:
        """Each topic's route, one after another; a failure ends nothing (the client starts anyway)."""
        for topic in topics:
            await self._refresh(topic)

    async def update_topic_route_info_from_name_server_all(self) -> None:
        """One round of the route poll (updateTopicRouteInfoFromNameServer): every topic in use, one
        fetch after another. The poll runs it as a Flow (lab/remoting/flow.py): 2,000 topics' fetches
        wake no task."""
        poll = RoutePoll(round(self.node.events.now(), 6))  # run time, as the records' t
        await self._poll_routes(list(self.topics_in_use), poll)
        self.node.emit("client.route_poll", began=poll.began, topics=poll.topics, unchanged=poll.unchanged,
                       ns=self.api.namesrv.chosen)

    async def _poll_routes(self, topics: list[str], poll: RoutePoll) -> None:
        for topic in topics:
            _, failure = await self._refresh(topic, poll)
            if isinstance(failure, RemotingError):
                return  # as 4.9.8's: a remoting error ends the round (the next NameServer at the next)

    def last_fetch_source(self, topic: str) -> tuple | None:
        """(NameServer, channel) of the topic's last good fetch; None after a failed one."""
        return self._fetched_from.get(topic)

    async def find_broker_address_in_subscribe(self, mq: MessageQueue, broker_id: int,
                                               only_this_broker: bool) -> FindBrokerResult | None:
        """From the cache; failing that, refresh the route and accept any of the broker's addresses."""
        found = self.route_cache.find_broker_address_in_subscribe(mq.broker_name, broker_id, only_this_broker)
        if found is None:
            try:
                await self.update_topic_route_info_from_name_server(mq.topic)
            except NoRouteInfoError:
                return None
            found = self.route_cache.find_broker_address_in_subscribe(mq.broker_name, broker_id, False)
        return found

    # --- brokers ------------------------------------------------------------------------------------

    def _broker_addrs(self, masters_only: bool) -> list[str]:
        return [addr for addrs in self.route_cache.broker_addr_table.values()
                for broker_id, addr in sorted(addrs.items())
                if broker_id == MASTER_ID or not masters_only]

    async def send_heartbeat_to_all_broker(self) -> None:
        """Every broker the cache knows — only masters when there is no consumer."""
        self.clean_offline_broker()
        body = self._heartbeat_body()
        for addr in self._broker_addrs(masters_only=not self.consumers):
            try:
                await self.api.send_heartbeat(addr, body, self.config.mqClientApiTimeout)
            except ClientFailure as e:
                log.info("%s: heartbeat to %s failed: %s", self.client_id, addr, e)

    def clean_offline_broker(self) -> None:
        """cleanOfflineBroker: broker addresses no cached route names any more are forgotten."""
        self.route_cache.clean_offline_broker()

    def _heartbeat_body(self) -> bytes:
        """HeartbeatData, encoded again only when the members change, and every broker gets the same
        bytes: what each says of itself (group, subscriptions and their versions) is fixed when it is
        made, and a consumer of 2,000 topics made every heartbeat re-encode 2,000 subscriptions."""
        members = (tuple(self.consumers), tuple(self.producers))
        if self._heartbeat is None or self._heartbeat[0] != members:
            body = bodies.dump({
                "clientID": self.client_id,
                "consumerDataSet": [c.consumer_data() for c in self.consumers],
                "producerDataSet": [{"groupName": p.producer_group} for p in self.producers]
                + [{"groupName": CLIENT_INNER_PRODUCER_GROUP}],
            }, LAB_SERIALIZE_TYPE)
            self._heartbeat = (members, body)
        return self._heartbeat[1]

    async def unregister_client(self, producer_group: str | None, consumer_group: str | None) -> None:
        for addr in self._broker_addrs(masters_only=False):
            try:
                await self.api.unregister_client(addr, self.client_id, producer_group, consumer_group,
                                                 self.config.mqClientApiTimeout)
            except ClientFailure as e:
                log.info("%s: unregister at %s failed: %s", self.client_id, addr, e)

    def consumer_list_broker(self, topic: str, key: object) -> str | None:
        """Which broker of the topic a findConsumerIdList asks: one at random (see RouteCache),
        drawn by `key` (the asker's round, say), so the same key picks the same broker while the
        route stays as it is: a pick moves no generator on."""
        return self.route_cache.find_broker_addr_by_topic(topic, KeyedDraws(f"{self._broker_picks}:{key}:{topic}"))

    async def find_consumer_id_list(self, topic: str, group: str, key: object) -> tuple[str, ...] | None:
        """findConsumerIdList: the group's members as one broker of the topic sees them (the one
        consumer_list_broker picks by `key`); None when none answers. A flow's step or a task's."""
        addr = self.consumer_list_broker(topic, key)
        if addr is None:
            try:
                await flow.in_task(self.nursery, self.update_topic_route_info_from_name_server, topic)
            except NoRouteInfoError:
                return None
            addr = self.consumer_list_broker(topic, key)
            if addr is None:
                return None
        try:
            return await self.api.get_consumer_id_list_by_group(addr, group, self.config.mqClientApiTimeout)
        except ClientFailure as e:
            log.info("%s: consumer list of %s from %s failed: %s", self.client_id, group, addr, e)
            return None

    # --- consumers ------------------------------------------------------------------------------------

    def _process_request(self, command: RemotingCommand) -> RemotingCommand | None:
        """Requests brokers send to the client (ClientRemotingProcessor); any other code is ignored."""
        if command.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            self.rebalance_immediately()
            return None
        group = command.field("group" if command.code == RESET_CONSUMER_CLIENT_OFFSET else "consumerGroup")
        consumer = next((c for c in self.consumers if c.consumer_group == group), None)
        if command.code == RESET_CONSUMER_CLIENT_OFFSET:  # ClientRemotingProcessor.resetOffset
            if consumer is not None and command.field("topic"):
                self.nursery.start_soon(consumer.reset_offset, command.field("topic"), command.body)
        elif command.code in (RequestCode.GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY):
            if consumer is None:
                return command.response(ResponseCode.SYSTEM_ERROR,
                                        f"The Consumer Group <{group}> not exist in this consumer")
            if command.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
                return command.response(ResponseCode.SUCCESS, body=encode(consumer.running_info()))
            # ClientRemotingProcessor.consumeMessageDirectly: a lab consumer's listener
            # (ConsumeMessageConcurrentlyService's) takes every message, at once.
            return command.response(ResponseCode.SUCCESS, body=encode(
                {"autoCommit": True, "consumeResult": "CR_SUCCESS", "order": False, "spentTimeMills": 0}))
        return None

    def rebalance_immediately(self) -> None:
        self._rebalance_wakeup.set()

    async def _rebalance_service(self) -> None:
        while True:
            with trio.move_on_after(self.node.config.consumer.rebalanceInterval):
                await self._rebalance_wakeup.wait()
            await self.node.pause.running()
            self._rebalance_wakeup = trio.Event()
            for consumer in self.consumers:
                await flow.run(consumer.do_rebalance())

    async def persist_all_consumer_offset(self) -> None:
        for consumer in self.consumers:
            await consumer.persist_consumer_offset()
