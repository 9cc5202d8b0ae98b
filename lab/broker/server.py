"""A RocketMQ broker for the lab: master or slave, on the wire protocol real clients speak.

It registers with every NameServer (at start, then every registerNameServerPeriod, and whenever its
topics change), stores messages in a MessageStore, answers producers and consumers (send, pull with
long polling, offsets, heartbeats, consumer lists, locks, send-back) and operators (the admin codes
mqadmin and the Dashboard use: lab/broker/admin_processor.py), and a slave replicates its master
(lab/broker/ha.py). The decisions live in plain modules — pull.py, consumer_manager.py,
producer_manager.py, topic_config.py, admin.py, stats.py — and this one is their trio edge.
Timestamps on the wire (store times, DataVersions) are the node's epoch milliseconds
(lab/remoting/epoch.py).

Kill: cancel run(); every connection is closed on the way out, so peers see the close at once.
Graceful stop: shutdown() — stop serving, UNREGISTER_BROKER to each NameServer, then stop.

Events: broker.start {address, broker_name, broker_id, cluster, messages}; broker.stop {graceful};
broker.register / broker.unregister (outer_api.py); broker.replicate (ha.py);
broker.topic {topic, queues, perm, reason}; broker.consumers {group, clients, change};
broker.permission {perm}.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
from typing import Callable

import trio

from nameserver import bodies
from nameserver.connection import Connection, close_idle_channels
from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode, SerializeType, fastjson
from nameserver.protocol.codes import FAQ_URL_NO_ROUTE, PERM_READ, PERM_WRITE
from nameserver.routes import DataVersion, TopicConfig
from nameserver.tcp import AcceptFailures, accept_forever

from . import admin
from .admin_processor import AdminProcessor
from .outer_api import BrokerIdentity, BrokerOuterAPI
from .consumer_manager import ConsumerGroupEvent, ConsumerIdsChangeListener, ConsumerManager, parse_heartbeat_body
from .ha import COMMIT_LOG, HA_TRANSFER, HAClient, HAService
from .held_replies import ReplyWhenReady, SuspendedPull
from .long_polling import LONG_POLLING_CHECK_INTERVAL, PullRequestHoldService
from lab.remoting.epoch import epoch_ms
from lab.remoting.message import MessageExt, decode_batch, decode_properties, offset_msg_id
from .pull import FLAG_COMMIT_OFFSET, FLAG_SUSPEND, consumer_offset_reply, decide_pull
from lab.remoting.channels import ChannelTable, Node
from .producer_manager import ProducerManager
from .stats import BrokerStats
from .store import MessageStore, PutMessageResult
from .topic_config import PERM_RW, TopicConfigManager, retry_topic

log = logging.getLogger("lab.broker.server")

FIRST_REGISTER_DELAY = 10.0  # the periodic registration starts 10 s after the first one
CLIENT_HOUSEKEEPING_INTERVAL = 10.0  # ClientHousekeepingService scans every 10 s
REGION_ID = "DefaultRegion"

# SendMessageRequestHeaderV2's short keys (SEND_MESSAGE_V2, SEND_BATCH_MESSAGE) -> V1 names
SEND_V2_KEYS = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
    "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes",
    "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "bname",
}
SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)


class ClientChannel:
    """One accepted connection: replies, held pulls and broker-initiated requests go out on it."""

    def __init__(self, stream: trio.abc.Stream, now: float, *, objects: bool = False, remote_addr: str | None = None):
        """`objects`, `remote_addr`: what the stream is, as Connection takes them (by default a
        byte stream, its peer asked of its socket)."""
        self.connection = Connection(stream, objects=objects, remote_addr=remote_addr)
        self.remote_addr = self.connection.remote_addr
        self.scope = trio.CancelScope()  # cancelled to close the connection
        self.serialize_type = SerializeType.JSON  # of its last heartbeat, for NOTIFY_CONSUMER_IDS_CHANGED
        self.last_activity = now  # trio time of the last request read: the idle close watches it

    def close(self, reason: str | None = None) -> None:
        if reason is not None and not self.scope.cancel_called:
            log.info("closing connection from %s: %s", self.remote_addr, reason)
        self.scope.cancel()

    def __repr__(self) -> str:
        return f"<ClientChannel {self.remote_addr}>"


class DefaultConsumerIdsChangeListener:
    """4.9.8's: a group's CHANGE is told to each of its channels (Broker.consumer_ids_changed).
    UNREGISTER and REGISTER feed 4.9.8's ConsumerFilterManager (the SQL92 filters' data), which the
    lab does not keep."""

    __slots__ = ("broker",)

    def __init__(self, broker: Broker):
        self.broker = broker

    def handle(self, event: ConsumerGroupEvent, group: str, *args) -> None:
        if event is ConsumerGroupEvent.CHANGE:
            channels, change = args
            self.broker.consumer_ids_changed(group, channels, change)


class Broker:
    hold_service_class = PullRequestHoldService  # a subclass may hold its requests otherwise
    channel_table_class = ChannelTable  # to the NameServers and the master: one for its network

    def __init__(self, node: Node, *, broker_name: str, broker_id: int, cluster_name: str,
                 namesrv_addrs: list[str], store: MessageStore, topics: dict[str, TopicConfig],
                 port: int = 0, master_addr: str | None = None):
        """Build inside trio (the DataVersion takes trio's clock). `store` and `topics` are the
        broker's disk: hand the same objects to a restarted broker. A slave (broker_id > 0) learns
        its master's address from its registrations unless `master_addr` is given."""
        self.node = node
        self.config = node.config.broker
        self.broker_name, self.broker_id, self.cluster_name = broker_name, broker_id, cluster_name
        self.namesrv_addrs = list(namesrv_addrs)
        self.store = store
        self.port = port
        self.master_addr = master_addr
        self.address: str | None = None
        self.broker_permission = self.config.brokerPermission
        self.topic_config_manager = TopicConfigManager(
            topics, auto_create_topic_enable=self.config.autoCreateTopicEnable,
            default_topic_queue_nums=self.config.defaultTopicQueueNums, now_ms=node.now_ms())
        self.consumer_manager = ConsumerManager(self.consumer_ids_change_listener())
        self._closing_all = False  # the whole broker stops: its channels' closes tell no one
        self.producer_manager = ProducerManager()
        # What the admin codes report (lab/broker/admin.py): counters since this broker's boot, and
        # the broker config's own DataVersion (Configuration's: bumped by a config change).
        self.stats = BrokerStats(node.now())
        self.boot_ms = node.now_ms()
        self.config_data_version = DataVersion(self.boot_ms, 0)
        self.hold_service = self.hold_service_class(node.now, on_error=node.fail)
        self.client_channels: dict[ClientChannel, None] = {}  # accepted connections open now
        self.ha_service = HAService(store, self.topic_config_manager, self.config.haSendHeartbeatInterval)
        self.ha_client: HAClient | None = None
        self.outer_api: BrokerOuterAPI | None = None
        self._opaques = itertools.count()
        self._topics_changed = trio.Event()
        self._services: trio.Nursery | None = None
        self._stopped = trio.Event()
        self._consumer_list_bodies: dict[tuple, bytes] = {}  # GET_CONSUMER_LIST_BY_GROUP bodies by answer
        self.admin_processor = AdminProcessor(self)  # subscription groups, config, stats, metadata
        self._processors: dict[int, Callable[[RemotingCommand, ClientChannel], RemotingCommand | None]] = {
            **{code: self._send_message for code in SEND_CODES},
            RequestCode.PULL_MESSAGE: self.pull_message,
            RequestCode.QUERY_CONSUMER_OFFSET: self._query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self._update_consumer_offset,
            RequestCode.GET_MAX_OFFSET: self._offset_query(lambda r, t, q: {"offset": self.store.max_offset(t, q)}),
            RequestCode.GET_MIN_OFFSET: self._offset_query(lambda r, t, q: {"offset": self.store.min_offset(t, q)}),
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self._offset_query(
                lambda r, t, q: {"offset": self.store.offset_in_queue_by_time(t, q, r.require_int("timestamp"))}),
            RequestCode.GET_EARLIEST_MSG_STORETIME: self._offset_query(  # getEarliestMessageTime
                lambda r, t, q: {"timestamp": self.store.store_time(t, q, self.store.min_offset(t, q))}),
            RequestCode.HEART_BEAT: self._heart_beat,
            RequestCode.UNREGISTER_CLIENT: self._unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self._get_consumer_list_by_group,
            RequestCode.LOCK_BATCH_MQ: self._lock_batch_mq,
            RequestCode.UNLOCK_BATCH_MQ: lambda req, channel: req.response(ResponseCode.SUCCESS),
            RequestCode.CONSUMER_SEND_MSG_BACK: self._consumer_send_msg_back,
            HA_TRANSFER: self._ha_transfer,
            admin.GET_BROKER_RUNTIME_INFO: self._get_broker_runtime_info,
            **self.admin_processor.processors(),
        }

    @property
    def is_slave(self) -> bool:
        return self.broker_id > 0

    @property
    def identity(self) -> BrokerIdentity:
        # HA runs on the remoting port (lab/broker/ha.py), so the HA address is the broker's own.
        return BrokerIdentity(self.cluster_name, self.address, self.broker_name, self.broker_id, self.address)

    # --- life cycle -------------------------------------------------------------------------------

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        graceful = False
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.node.crash_on_failure)
                channels = self.channel_table_class(self.node, nursery)  # to NameServers and the master
                self.outer_api = BrokerOuterAPI(self.node, channels, self.namesrv_addrs)
                listener, self.address = await self.node.network.listen(self.node.name, self.port)
                listener = self.node.pause.listener(listener)
                try:
                    async with trio.open_nursery() as services:
                        self._services = services
                        services.start_soon(self._accept, listener, services)
                        services.start_soon(self.hold_service.run)
                        self.node.emit("broker.start", address=self.address, broker_name=self.broker_name,
                                       broker_id=self.broker_id, cluster=self.cluster_name,
                                       messages=self.store.message_count())
                        if self.is_slave:
                            self.ha_client = HAClient(self.node, channels, self.store, self.topic_config_manager,
                                                      self.config.haSendHeartbeatInterval, self.master_addr)
                        await self.register_broker_all("start")
                        services.start_soon(self._register_periodically)
                        services.start_soon(self._register_on_topic_change)
                        services.start_soon(self.node.schedule.every, CLIENT_HOUSEKEEPING_INTERVAL,
                                            CLIENT_HOUSEKEEPING_INTERVAL, self._scan_exception_channel)
                        services.start_soon(self._close_idle_channels)
                        if self.ha_client is not None:
                            services.start_soon(self.ha_client.run)
                        task_status.started(self.address)
                finally:
                    await trio.aclose_forcefully(listener)
                # Only shutdown() ends the services without cancelling us.
                await self.outer_api.unregister_broker_all(self.identity)
                graceful = True
                nursery.cancel_scope.cancel()
        finally:
            self._stopped.set()
            self.node.emit("broker.stop", graceful=graceful)

    async def shutdown(self) -> None:
        """Stop serving, unregister from each NameServer in turn, and let run() return."""
        if self._services is not None:
            self._services.cancel_scope.cancel()
            await self._stopped.wait()

    async def _accept(self, listener: trio.abc.Listener, nursery: trio.Nursery) -> None:
        """At the descriptor limit it logs, waits and accepts again, as Netty does (tcp.accept_forever)."""
        try:
            await accept_forever(listener, lambda stream: nursery.start_soon(self._handle_stream, stream),
                                 log, self.node.name, AcceptFailures())
        except trio.ClosedResourceError:
            return  # the network closed the node's listener: its process is gone

    # --- registration -----------------------------------------------------------------------------

    async def register_broker_all(self, trigger: str, table: dict[str, TopicConfig] | None = None) -> None:
        """Register with every NameServer: the whole topic table, or `table` (an increment)."""
        version = self.topic_config_manager.data_version  # every change to the table makes a new one
        result = await self.outer_api.register_broker_all(
            self.identity, table if table is not None else self.topic_config_manager.registered_table(self.broker_permission),
            version, compressed=self.config.compressedRegister,
            timeout=self.config.registerBrokerTimeoutMills, trigger=trigger,
            same_body=(version, self.broker_permission) if table is None else None)
        # A slave follows the master the first answering NameServer names; without one it keeps
        # trying the last it knew.
        if result is not None and result.master_addr and self.ha_client is not None:
            self.ha_client.master_addr = result.master_addr

    async def _register_periodically(self) -> None:
        period = max(10.0, min(self.config.registerNameServerPeriod, 60.0))
        await self.node.schedule.every(FIRST_REGISTER_DELAY, period,
                                       functools.partial(self.register_broker_all, "period"))

    async def _register_on_topic_change(self) -> None:
        while True:
            await self._topics_changed.wait()
            self._topics_changed = trio.Event()
            await self.register_broker_all("topics")

    def _topic_created(self, config: TopicConfig, reason: str) -> None:
        self.node.emit("broker.topic", topic=config.topic_name, queues=config.write_queue_nums,
                       perm=config.perm, reason=reason)
        self._topics_changed.set()

    async def set_permission(self, perm: int) -> None:
        """brokerPermission at run time (UPDATE_BROKER_CONFIG): a new DataVersion, registered at
        once, so every NameServer takes the new permission into its routes."""
        self.broker_permission = perm
        self.topic_config_manager.next_version(self.node.now_ms())
        self.config_data_version = DataVersion(self.node.now_ms(), self.config_data_version.counter + 1)
        self.node.emit("broker.permission", perm=perm)
        await self.register_broker_all("permission")

    def grow_topics(self, count: int, prefix: str = "GrownTopic") -> None:
        """Create `count` topics at once (UPDATE_AND_CREATE_TOPIC in bulk): the next registration
        carries all of them — the seeds' oversized heartbeat."""
        table = self.topic_config_manager.topic_config_table
        for i in range(count):
            name = f"{prefix}{i:06d}"
            table.setdefault(name, TopicConfig(name, 8, 8, PERM_RW))
        self.topic_config_manager.next_version(self.node.now_ms())
        self._topic_created(TopicConfig(f"{prefix}*", 8, 8, PERM_RW), f"grow {count}")

    # --- connections ------------------------------------------------------------------------------

    async def _handle_stream(self, stream: trio.abc.Stream) -> None:
        channel = self.open_channel(stream)
        self.client_channels[channel] = None
        try:
            with channel.scope:
                reason = await channel.connection.serve(functools.partial(self._process, channel))
                if channel.connection.handler_error is not None:
                    self.node.emit("broker.connection_error", remote=channel.remote_addr, error=reason)
        finally:
            # Whatever the connection held dies with it, and its clients leave their groups.
            del self.client_channels[channel]
            self.hold_service.drop(channel)
            self.producer_manager.do_channel_close_event(channel)
            self._closing_all = trio.current_effective_deadline() == -math.inf
            self.consumer_manager.do_channel_close_event(channel)
            self._closing_all = False
            await channel.connection.aclose()

    def open_channel(self, stream: trio.abc.Stream) -> ClientChannel:
        """The channel for a connection just accepted (NettyRemotingServer's channelActive)."""
        return ClientChannel(stream, self.node.now())

    def _process(self, channel: ClientChannel, req: RemotingCommand) -> RemotingCommand | None:
        channel.last_activity = self.node.now()
        if req.is_response:  # to a request forwarded to a client (307), or a notification of ours
            self.admin_processor.on_response(channel, req)
            return None
        processor = self._processors.get(req.code)
        if processor is None:
            # Answered even when oneway, as RocketMQ's remoting layer does on this path.
            return req.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {req.code} not supported")
        try:
            reply = processor(req, channel)
        except Exception as e:
            reply = self.error_reply(req, channel, e)
        return None if req.is_oneway else reply

    def error_reply(self, req: RemotingCommand, channel: ClientChannel, error: Exception) -> RemotingCommand:
        if isinstance(error, ValueError):  # a bad header or body: HeaderError, BodyError, ...
            log.warning("bad request %s from %s: %s", req.code, channel.remote_addr, error)
        else:  # a bug must cost one request, never the broker
            log.exception("processing request %s failed", req.code)
        return req.response(ResponseCode.SYSTEM_ERROR, f"{type(error).__name__}: {error}")

    # --- send -------------------------------------------------------------------------------------

    def _send_message(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        if req.code != RequestCode.SEND_MESSAGE:  # V2's one-letter keys, as V1's (createSendMessageRequestHeaderV1)
            ext = req.ext_fields or {}
            req = RemotingCommand(req.code, req.opaque, req.flag, {SEND_V2_KEYS.get(k, k): ext[k] for k in ext},
                                  req.remark, req.body, req.language, req.version, req.serialize_type)
        refused = self._refuse_write(req)
        if refused is not None:
            return refused
        topic = req.require("topic")
        config = self._topic_for_send(topic, req)
        if config is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"topic[{topic}] not exist, apply first please! {FAQ_URL_NO_ROUTE}")
        queue_id = req.require_int("queueId")
        if queue_id < 0:
            queue_id = self.node.rng.randrange(max(config.write_queue_nums, 1))
        if queue_id >= max(config.write_queue_nums, config.read_queue_nums):
            return req.response(ResponseCode.SYSTEM_ERROR, f"request queueId[{queue_id}] is illegal, "
                                f"{config} Producer: {channel.remote_addr}")
        body = req.body or b""
        # The C++ client sends batches as code 10 with batch "1".
        if req.code == RequestCode.SEND_BATCH_MESSAGE or req.field("batch") in ("true", "1"):
            entries = decode_batch(body)
        else:
            properties = decode_properties(req.field("properties") or "")
            properties["CLUSTER"] = self.cluster_name
            entries = [(req.int_field("flag", 0), body, properties)]
        sys_flag, born_timestamp = req.int_field("sysFlag", 0), req.int_field("bornTimestamp", 0)
        reconsume_times, born_host = req.int_field("reconsumeTimes", 0), channel.remote_addr
        # Mostly positional, in MessageExt's field order: a keyword dataclass __init__ costs twice as much.
        results = [self._put(MessageExt(topic, b, queue_id, flag, props, sys_flag, born_timestamp, born_host,
                                        reconsume_times=reconsume_times))
                   for flag, b, props in entries]
        if not results:
            return req.response(ResponseCode.MESSAGE_ILLEGAL, "the batch holds no message")
        return req.response(ResponseCode.SUCCESS, ext_fields={
            "msgId": ",".join(r.msg_id for r in results), "queueId": queue_id,
            "queueOffset": results[0].queue_offset, "MSG_REGION": REGION_ID, "TRACE_ON": "true"})

    def _refuse_write(self, req: RemotingCommand) -> RemotingCommand | None:
        """Why this broker takes no messages now, as a reply; None when it does. NO_PERMISSION for
        every topic, where 4.9.8 answers it for order topics only: a producer on a stale route sees
        the wipe (the seeds' account of broker maintenance)."""
        if self.is_slave:
            return req.response(ResponseCode.SERVICE_NOT_AVAILABLE,
                                "service not available now, the message store is in slave mode")
        if not self.broker_permission & PERM_WRITE:
            return req.response(ResponseCode.NO_PERMISSION, f"the broker[{self.address}] sending message is forbidden")
        return None

    def _topic_for_send(self, topic: str, req: RemotingCommand) -> TopicConfig | None:
        manager = self.topic_config_manager
        config = manager.select(topic)
        if config is not None:
            return config
        config = manager.create_topic_in_send_message_method(
            topic, req.field("defaultTopic") or "", req.int_field("defaultTopicQueueNums", 4), 0, self.node.now_ms())
        if config is not None:
            self._topic_created(config, "auto_create")
        elif topic.startswith("%RETRY%"):
            config = self._retry_topic(topic)
        return config

    def _retry_topic(self, topic: str, queue_nums: int = 1) -> TopicConfig:
        config, created = self.topic_config_manager.create_topic_in_send_message_back_method(
            topic, queue_nums, PERM_RW, 0, self.node.now_ms())
        if created:
            self._topic_created(config, "retry")
        return config

    def _put(self, msg: MessageExt) -> PutMessageResult:
        now = self.node.now()
        msg.store_host, msg.store_timestamp = self.address, epoch_ms(self.node.epoch_base_ms, now)
        before = self.store.max_physical_offset
        result = self.store.put(msg)  # written (and flushed) before anyone replies
        self.stats.on_put(now, self.store.max_physical_offset - before)
        self.hold_service.notify_message_arriving((msg.topic, msg.queue_id))
        self.hold_service.notify_message_arriving(COMMIT_LOG)
        return result

    def _consumer_send_msg_back(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        """A message the consumer failed on goes to %RETRY%<group>: at once — the lab has no
        delay levels, where RocketMQ would park it in SCHEDULE_TOPIC_XXXX first."""
        refused = self._refuse_write(req)
        if refused is not None:
            return refused
        offset = req.require_int("offset")
        origin = self.store.lookup(offset)
        if origin is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
        topic = self._retry_topic(retry_topic(req.require("group"))).topic_name
        properties = dict(origin.properties)
        properties.setdefault("RETRY_TOPIC", origin.topic)
        properties.setdefault("ORIGIN_MESSAGE_ID", req.field("originMsgId") or offset_msg_id(origin.store_host, offset))
        self._put(MessageExt(topic=topic, body=origin.body, flag=origin.flag, properties=properties,
                             sys_flag=origin.sys_flag, born_timestamp=origin.born_timestamp,
                             born_host=origin.born_host, reconsume_times=origin.reconsume_times + 1))
        return req.response(ResponseCode.SUCCESS)

    # --- pull -------------------------------------------------------------------------------------

    def pull_message(self, req: RemotingCommand, channel: ClientChannel, allow_suspend: bool = True):
        if not self.broker_permission & PERM_READ:
            return req.response(ResponseCode.NO_PERMISSION, f"the broker[{self.address}] pulling message is forbidden")
        group = req.require("consumerGroup")
        subscription_group = self.admin_processor.find_subscription_group(group)
        if subscription_group is None:
            return req.response(admin.SUBSCRIPTION_GROUP_NOT_EXIST,
                                f"subscription group [{group}] does not exist, \nSee {FAQ_URL_NO_ROUTE} for further details.")
        if not subscription_group.consumeEnable:
            return req.response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        topic = req.require("topic")
        queue_id, offset = req.require_ints("queueId", "queueOffset")
        config = self.topic_config_manager.select(topic)
        if config is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"topic[{topic}] not exist, apply first please! {FAQ_URL_NO_ROUTE}")
        if not 0 <= queue_id < config.read_queue_nums:
            return req.response(ResponseCode.SYSTEM_ERROR, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                f"topicConfig.readQueueNums:[{config.read_queue_nums}] consumer:[{channel.remote_addr}]")
        sys_flag = req.int_field("sysFlag", 0)
        if allow_suspend and sys_flag & FLAG_COMMIT_OFFSET and not self.is_slave:
            self.store.commit_offset(group, topic, queue_id, req.require_int("commitOffset"))
        max_offset = self.store.max_offset(topic, queue_id)
        min_offset = self.store.min_offset(topic, queue_id)
        result = decide_pull(
            offset=offset, max_nums=req.int_field("maxMsgNums", 32), min_offset=min_offset, max_offset=max_offset,
            is_slave=self.is_slave, slave_read_enable=self.config.slaveReadEnable,
            slave_available=self.ha_service.slave_available(self.node.now()))
        if result.code == ResponseCode.PULL_NOT_FOUND and allow_suspend and sys_flag & FLAG_SUSPEND:
            self._suspend_pull(req, channel, topic, queue_id, offset)
            return None
        now = self.node.now()
        self.stats.on_pull(now, bool(result.found))
        if result.found:
            self.stats.on_get(now, group, topic, result.found)
        return req.response(result.code, ext_fields={
            "suggestWhichBrokerId": result.suggest_which_broker_id, "nextBeginOffset": result.next_begin_offset,
            "minOffset": min_offset, "maxOffset": max_offset,
        }, body=b"".join(self.store.get(topic, queue_id, offset, result.found)) if result.found else None)

    def _suspend_pull(self, req: RemotingCommand, channel: ClientChannel, topic: str, queue_id: int,
                      offset: int) -> None:
        """Hold the pull until a message comes or the consumer's suspend time is up (long
        polling), or for shortPollingTimeMills."""
        if self.config.longPollingEnable:
            suspend = req.int_field("suspendTimeoutMillis")
            timeout = suspend / 1000 if suspend is not None else self.node.config.consumer.brokerSuspendMaxTimeMillis
            # A master announces every message it stores, so its 5 s re-check could only find what
            # an arrival already answered: skipped, it costs nothing per held request (80,000 on a
            # large cluster). A slave's replicated records are not announced (nor are they by
            # RocketMQ's slave): it re-checks.
            check = math.inf if not self.is_slave else LONG_POLLING_CHECK_INTERVAL
            self.hold_service.hold(self.long_polled_pull(req, channel, topic, queue_id, offset, timeout, check),
                                   timeout)
        else:
            short = self.config.shortPollingTimeMills
            self.hold_service.hold(SuspendedPull(self, req, channel, topic, queue_id, offset, short, short),
                                   short, wake_on_arrival=False)

    def long_polled_pull(self, req: RemotingCommand, channel: ClientChannel, topic: str, queue_id: int,
                         offset: int, timeout: float, check_interval: float) -> SuspendedPull:
        """A long-polled pull to hold (PullRequestHoldService.suspendPullRequest's PullRequest)."""
        return SuspendedPull(self, req, channel, topic, queue_id, offset, timeout, check_interval)

    def _ha_transfer(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand | None:
        return self.ha_service.transfer(req, lambda key, ready, timeout, reply: self.hold_service.hold(
            ReplyWhenReady(self, req, channel, key, LONG_POLLING_CHECK_INTERVAL, ready, reply), timeout))

    # --- offsets ----------------------------------------------------------------------------------

    def _query_consumer_offset(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        group, topic, queue_id = req.require("consumerGroup"), req.require("topic"), req.require_int("queueId")
        offset = consumer_offset_reply(self.store.consumer_offsets.get((group, topic, queue_id)),
                                       self.store.min_offset(topic, queue_id))
        if offset is None:
            return req.response(ResponseCode.QUERY_NOT_FOUND, "Not found, maybe this group consumer boot first")
        return req.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def _update_consumer_offset(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        self.store.commit_offset(req.require("consumerGroup"), req.require("topic"),
                                 *req.require_ints("queueId", "commitOffset"))
        return req.response(ResponseCode.SUCCESS)

    @staticmethod
    def _offset_query(answer: Callable[[RemotingCommand, str, int], dict]):
        """GET_MAX_OFFSET and its kin: topic + queueId in, one number out."""
        def processor(req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
            return req.response(ResponseCode.SUCCESS,
                                ext_fields=answer(req, req.require("topic"), req.require_int("queueId")))
        return processor

    # --- consumers --------------------------------------------------------------------------------

    def _heart_beat(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        heartbeat = parse_heartbeat_body(req.body or b"", req.serialize_type)
        channel.serialize_type = req.serialize_type
        now = trio.current_time()
        for group in heartbeat.producers:
            self.producer_manager.register_producer(group, heartbeat.client_id, channel, now, req.language, req.version)
        for consumer in heartbeat.consumers:
            group = self.admin_processor.find_subscription_group(consumer.group_name)
            if group is not None:
                self._retry_topic(retry_topic(consumer.group_name), group.retryQueueNums)
            self.consumer_manager.register_consumer(consumer, heartbeat.client_id, channel, now, req.language,
                                                    req.version, group is None or group.notifyConsumerIdsChangedEnable)
        # The client takes the reply's version as the broker's: a realistic one (409) lets it
        # subscribe with SQL92 as well as tags.
        return req.response(ResponseCode.SUCCESS)

    def _unregister_client(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        if req.field("producerGroup"):
            self.producer_manager.unregister_producer(req.field("producerGroup"), channel)
        group = req.field("consumerGroup")
        if group:
            config = self.admin_processor.find_subscription_group(group)
            self.consumer_manager.unregister_consumer(group, channel, config is None or config.notifyConsumerIdsChangedEnable)
        return req.response(ResponseCode.SUCCESS)

    def _get_consumer_list_by_group(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        group = req.require("consumerGroup")
        body = self.consumer_list_body(group, req.serialize_type)
        if body is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return req.response(ResponseCode.SUCCESS, body=body)

    def consumer_list_body(self, group: str, serialize_type: int) -> bytes | None:
        """GET_CONSUMER_LIST_BY_GROUP's answer: the group's members; None without any."""
        ids = self.consumer_manager.get_all_client_id(group)
        if not ids:
            return None
        key = (tuple(ids), serialize_type)
        body = self._consumer_list_bodies.get(key)
        if body is None:  # every member asks for every topic every 20 s, and the answer rarely changes
            if len(self._consumer_list_bodies) >= 64:
                self._consumer_list_bodies.clear()
            body = self._consumer_list_bodies[key] = bodies.dump({"consumerIdList": ids}, serialize_type)
        return body

    def _lock_batch_mq(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        """Every queue asked for is granted: one consumer per queue is the clients' own affair here."""
        body = bodies.load(req.body or b"", req.serialize_type)
        mq_set = body.get("mqSet", []) if isinstance(body, dict) else []
        return req.response(ResponseCode.SUCCESS, body=bodies.dump({"lockOKMQSet": mq_set}, req.serialize_type))

    def consumer_ids_change_listener(self) -> ConsumerIdsChangeListener:
        """Who the consumer manager tells what happens to the groups (BrokerController's
        DefaultConsumerIdsChangeListener)."""
        return DefaultConsumerIdsChangeListener(self)

    def consumer_ids_changed(self, group: str, channels: list[ClientChannel], change: str) -> None:
        """Tell every member (oneway NOTIFY_CONSUMER_IDS_CHANGED) so the group rebalances now."""
        if self._closing_all:
            return
        self.node.emit("broker.consumers", group=group, clients=self.consumer_manager.get_all_client_id(group),
                       change=change)
        for channel in channels:
            notify = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group},
                                             oneway=True, serialize_type=channel.serialize_type,
                                             opaque=next(self._opaques))
            channel.connection.send_soon(notify)

    async def _close_idle_channels(self) -> None:
        """NettyRemotingServer's idle close, as the NameServer's (nameserver/connection.py): a
        connection with no whole request read for serverChannelMaxIdleTimeSeconds — a silent one,
        half a frame, a frame fed a byte a second — is closed. Registered producers and consumers
        are left to ClientHousekeepingService, which closes theirs 120 s after their last
        heartbeat: one rule for them, their heartbeats alone, whatever else they send or not. A
        held pull is answered within its suspend time and a slave replicates every few seconds:
        neither is idle."""
        await close_idle_channels(self.client_channels, lambda: self.config.serverChannelMaxIdleTimeSeconds,
                                  self.node.schedule.sleep_until, spared=self._registered_channels)

    def _registered_channels(self) -> set[ClientChannel]:
        registered = {channel for table in self.producer_manager.group_channel_table.values() for channel in table}
        registered.update(channel for info in self.consumer_manager.consumer_table.values()
                          for channel in info.channel_info_table)
        return registered

    async def _scan_exception_channel(self) -> None:
        """ClientHousekeepingService.scanExceptionChannel: clients silent for 120 s are dropped and
        their connections closed."""
        now = trio.current_time()
        for manager in (self.producer_manager, self.consumer_manager):
            for _group, channel in manager.scan_not_active_channel(now):
                channel.close()

    # --- admin (the rest is lab/broker/admin_processor.py's) ------------------------------------------

    def _get_broker_runtime_info(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        """GET_BROKER_RUNTIME_INFO (the other admin codes are lab/broker/admin_processor.py's)."""
        info = admin.runtime_info(stats=self.stats, store=self.store, now=self.node.now(), now_ms=self.node.now_ms(),
                                  boot_ms=self.boot_ms)
        return req.response(ResponseCode.SUCCESS, body=fastjson.encode(info))
