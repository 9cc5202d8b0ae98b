"""AdminBrokerProcessor (4.9.8) on a lab broker: the codes mqadmin and the Dashboard send, each
with its header, reply and where the lab differs in docs/broker-admin.md. The bodies are
lab/broker/admin.py's, subscription_group.py's and query_message.py's plain functions; this is
their edge on the broker (lab/broker/server.py dispatches these codes here), bar
GET_BROKER_RUNTIME_INFO, which is Broker._get_broker_runtime_info.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import TYPE_CHECKING, Callable

import trio

from nameserver import bodies
from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode, fastjson
from nameserver.routes import DataVersion
from lab.remoting.epoch import epoch_ms
from lab.remoting.java_maps import hash_order

from . import admin, broker_config_keys, query_message, topic_config
from lab.remoting.message import decode_messages
from nameserver.java_order import string_hash
from nameserver.protocol.fastjson import Bean
from .subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager

if TYPE_CHECKING:
    from .server import Broker, ClientChannel

log = logging.getLogger("lab.broker.admin")

# Broker2Client.callClient waits this long for the consumer (invokeSync, 10 s).
CALL_CLIENT_TIMEOUT = 10.0
# MQVersion.Version.V3_1_8_SNAPSHOT.ordinal(): older clients cannot answer a forwarded request.
V3_1_8_SNAPSHOT = 77


def java_int(h: int) -> int:
    """An unsigned 32-bit hash as Java's signed int."""
    return h - (1 << 32) if h >= 1 << 31 else h


SLAVE_REFUSAL = "Can't modify topic or subscription group from slave broker, please execute it from master broker."

INVOKE_BROKER_TO_RESET_OFFSET = 222
RESET_CONSUMER_CLIENT_OFFSET = 220
CONSUME_MESSAGE_DIRECTLY = 309
QUERY_CONSUME_QUEUE = 321
CLEAN_EXPIRED_CONSUMEQUEUE = 306
CLEAN_UNUSED_TOPIC = 316
DELETE_EXPIRED_COMMITLOG = 329
UPDATE_AND_CREATE_ACL_CONFIG = 50
DELETE_ACL_CONFIG = 51
GET_BROKER_CLUSTER_ACL_INFO = 52
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
# MQVersion.Version.V3_0_7_SNAPSHOT.ordinal(): older clients cannot reset their offsets.
V3_0_7_SNAPSHOT = 28
# With aclEnable=false (4.9.8's default and the lab's) BrokerController.initialAcl loads no
# AccessValidator: AdminBrokerProcessor's ACL handlers get null from accessValidatorMap and answer
# the NullPointerException's message, which a JDK 15+ writes this way (helpful NPE messages; the
# broker's classes carry their local variable names). On a JDK 8 the remark is null.
ACL_NPE = 'Cannot invoke "org.apache.rocketmq.acl.AccessValidator.{}({})" because "accessValidator" is null'
ACL_NPE_REMARKS = {  # code: (its ResponseCode ..._FAILED, the AccessValidator method called, its parameters)
    UPDATE_AND_CREATE_ACL_CONFIG: (209, "updateAccessConfig", "org.apache.rocketmq.common.PlainAccessConfig"),
    DELETE_ACL_CONFIG: (210, "deleteAccessConfig", "String"),
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: (211, "updateGlobalWhiteAddrsConfig", "java.util.List, String"),
}
# Entries per consume-queue file (MessageStoreConfig.mappedFileSizeConsumeQueue / CQ_STORE_UNIT_SIZE):
# getIndexBuffer returns the entries from the index to the end of its mapped file.
CQ_FILE_ENTRIES = 300000

# Lab settings read where they are used, so a change takes effect at once (the others are read at
# start only); their values are Java's milliseconds for the lab's durations in seconds.
LIVE_KEYS = frozenset(("longPollingEnable", "shortPollingTimeMills", "slaveReadEnable", "compressedRegister",
                       "registerBrokerTimeoutMills", "serverChannelMaxIdleTimeSeconds", "autoCreateTopicEnable"))


# The broker's config files on its disk (MessageStore.config_files): the subscription groups
# (store/config/subscriptionGroup.json) and what UPDATE_BROKER_CONFIG set, which 4.9.8's
# Configuration.persist writes into the broker's properties file (-c), read again at the next start.
SUBSCRIPTION_GROUP_FILE = "subscriptionGroup.json"
BROKER_PROPERTIES_FILE = "broker.properties"


class Refused(Exception):
    """A request answered with `code` and `remark` instead of the body it asked for."""

    def __init__(self, code: int, remark: str):
        super().__init__(remark)
        self.code, self.remark = code, remark


class AdminProcessor:
    def __init__(self, broker: Broker):
        """Reads what the broker's disk holds from before a restart: its subscription groups and
        the config UPDATE_BROKER_CONFIG changed (brokerPermission too), applied as at boot."""
        self.broker = broker
        self.subscription_group_manager = SubscriptionGroupManager(broker.node.now_ms())
        self.config_updates: dict[str, object] = {}  # keys set by UPDATE_BROKER_CONFIG the lab keeps as given
        self._waiting: dict[tuple[object, int], trio.MemorySendChannel] = {}  # forwarded calls' replies
        files = broker.store.config_files
        self.subscription_group_manager.load(files.get(SUBSCRIPTION_GROUP_FILE))
        saved = files.get(BROKER_PROPERTIES_FILE)
        if isinstance(saved, dict):
            self.apply_config(saved)
            if isinstance(saved.get("brokerPermission"), int):
                broker.broker_permission = saved["brokerPermission"]
        self.reserved_topics = self._add_system_topics()

    def _add_system_topics(self) -> tuple[str, ...]:
        """TopicConfigManager's constructor (4.9.8): the system topics, from the config read at start
        (broker.properties included); the names it adds to TopicValidator's (see check_topic)."""
        broker = self.broker
        config = self.broker_config()
        trace = bool(config["traceTopicEnable"])
        trace_topic = str(config["msgTraceTopicName"])
        broker.topic_config_manager.add_system_topics(topic_config.system_topics(
            broker.cluster_name, broker.broker_name,
            auto_create_topic_enable=broker.topic_config_manager.auto_create_topic_enable,
            default_topic_queue_nums=int(config["defaultTopicQueueNums"]),
            cluster_topic_enable=bool(config["clusterTopicEnable"]),
            broker_topic_enable=bool(config["brokerTopicEnable"]),
            trace_topic_enable=trace, msg_trace_topic_name=trace_topic))
        return (broker.cluster_name, broker.broker_name, *((trace_topic,) if trace else ()))

    def _save_groups(self) -> None:
        self.broker.store.save_config(SUBSCRIPTION_GROUP_FILE, self.subscription_group_manager.file_content())

    def processors(self) -> dict[int, Callable[[RemotingCommand, ClientChannel], RemotingCommand | None]]:
        broker = self.broker
        topics = broker.topic_config_manager
        with_body = {  # a SUCCESS reply whose body the request's state builds, or a Refused
            admin.GET_ALL_TOPIC_CONFIG: lambda req: admin.all_topic_config(topics.topic_config_table,
                                                                            topics.data_version),
            admin.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: lambda req: self.subscription_group_manager.bean(),
            admin.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: lambda req: admin.system_topic_list(self.reserved_topics),
            admin.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            admin.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            admin.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connection_list,
            admin.GET_CONSUME_STATS: self.get_consume_stats,
            admin.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
            admin.GET_BROKER_CONSUME_STATS: self.get_broker_consume_stats,
            admin.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
            admin.GET_ALL_PRODUCER_INFO: lambda req: admin.producer_table_info(
                broker.producer_manager.group_channel_table, lambda t: epoch_ms(broker.node.epoch_base_ms, t)),
        }
        # DefaultMessageStore.cleanExpiredConsumerQueue / cleanUnusedTopic / executeDeleteFilesManually,
        # then SUCCESS: the lab's store keeps every message of the run (nothing is ever expired or
        # unused), so there is nothing for them to delete.
        nothing_to_clean = (CLEAN_EXPIRED_CONSUMEQUEUE, CLEAN_UNUSED_TOPIC, DELETE_EXPIRED_COMMITLOG)
        return {
            **{code: functools.partial(self._with_body, build) for code, build in with_body.items()},
            **{code: lambda req, channel: req.response(ResponseCode.SUCCESS) for code in nothing_to_clean},
            **{code: functools.partial(self._acl_refusal, failed, method, params)
               for code, (failed, method, params) in ACL_NPE_REMARKS.items()},
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            admin.UPDATE_BROKER_CONFIG: self.update_broker_config,
            admin.GET_BROKER_CONFIG: self.get_broker_config,
            **{code: functools.partial(self._validate_slave, handler) for code, handler in (
                (admin.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, self.update_and_create_subscription_group),
                (admin.DELETE_SUBSCRIPTIONGROUP, self.delete_subscription_group),
                (admin.DELETE_TOPIC_IN_BROKER, self.delete_topic))},
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            query_message.QUERY_MESSAGE: lambda req, channel: query_message.query_message(req, broker.store),
            query_message.VIEW_MESSAGE_BY_ID: lambda req, channel: query_message.view_message_by_id(req, broker.store),
            INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
            QUERY_CONSUME_QUEUE: self.query_consume_queue,
            # getBrokerAclConfigVersion logs the NullPointerException and returns null: never answered.
            GET_BROKER_CLUSTER_ACL_INFO: lambda req, channel: None,
        }

    @staticmethod
    def _with_body(build: Callable[[RemotingCommand], object], req: RemotingCommand,
                   channel: ClientChannel) -> RemotingCommand:
        """SUCCESS with the fastjson body `build` makes: what mqadmin and the Dashboard parse,
        whatever the request's serialize type (the lab's own nodes never ask these codes)."""
        try:
            bean = build(req)
        except Refused as refused:
            return req.response(refused.code, refused.remark)
        return req.response(ResponseCode.SUCCESS, body=fastjson.encode(bean))

    @staticmethod
    def _acl_refusal(failed: int, method: str, params: str, req: RemotingCommand,
                     channel: ClientChannel) -> RemotingCommand:
        return req.response(failed, ACL_NPE.format(method, params))

    def _validate_slave(self, handler: Callable[[RemotingCommand, ClientChannel], RemotingCommand],
                        req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        """AdminBrokerProcessor.validateSlave: a slave changes no topic or subscription group."""
        if self.broker.is_slave:
            return req.response(ResponseCode.SYSTEM_ERROR, SLAVE_REFUSAL)
        return handler(req, channel)

    # --- topics (17, 215) ---------------------------------------------------------------------------

    def update_and_create_topic(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand | None:
        """updateAndCreateTopic: the topic under a new DataVersion, then registerIncrementBrokerData."""
        broker = self.broker
        topic = req.field("topic")
        remark = admin.check_topic(topic, (broker.cluster_name, broker.broker_name))
        if remark is not None:
            return req.response(ResponseCode.SYSTEM_ERROR, remark)
        config = admin.topic_config_from_header(req.ext_fields or {})
        previous = broker.topic_config_manager.update_topic_config(config, broker.node.now_ms())
        broker.node.emit("broker.topic", topic=topic, queues=config.write_queue_nums, perm=config.perm,
                         reason="update" if previous is not None else "create")
        table = broker.topic_config_manager.registered_table(broker.broker_permission, {topic: config})
        broker._services.start_soon(self._answer_after, req, channel, broker.register_broker_all, "update_topic", table)
        return None

    @staticmethod
    async def _answer_after(req: RemotingCommand, channel: ClientChannel, register: Callable, *args) -> None:
        """SUCCESS once `register(*args)` has registered with every NameServer, as 4.9.8 answers
        after registerBrokerAll, whatever the NameServers said."""
        await register(*args)
        if not req.is_oneway:
            channel.connection.send_soon(req.response(ResponseCode.SUCCESS))

    def delete_topic(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        topic = req.require("topic")
        broker = self.broker
        remark = admin.check_topic(topic, self.reserved_topics)
        if remark is not None:
            return req.response(ResponseCode.SYSTEM_ERROR, remark)
        if broker.topic_config_manager.delete_topic_config(topic, broker.node.now_ms()) is not None:
            broker.node.emit("broker.topic", topic=topic, queues=0, perm=0, reason="delete")
        return req.response(ResponseCode.SUCCESS)

    # --- topic stats (202), connections (203, 204), consume stats (208, 317), GroupList (300) ---------

    def get_topic_stats_info(self, req: RemotingCommand) -> Bean:
        topic = req.require("topic")
        config = self.broker.topic_config_manager.select(topic)
        if config is None:
            raise Refused(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        return admin.topic_stats_table(config, self.broker.broker_name, self.broker.store)

    def get_consumer_connection_list(self, req: RemotingCommand) -> Bean:
        group = req.require("consumerGroup")
        info = self.broker.consumer_manager.consumer_table.get(group)
        if info is None:
            raise Refused(admin.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        return admin.consumer_connection(info)

    def get_producer_connection_list(self, req: RemotingCommand) -> Bean:
        group = req.require("producerGroup")
        channels = self.broker.producer_manager.group_channel_table.get(group)
        if channels is None:
            raise Refused(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        return Bean(connectionSet=admin.connection_set(channels))

    def _consume_stats_args(self) -> dict:
        broker = self.broker
        return dict(select=broker.topic_config_manager.select, consumers=broker.consumer_manager, store=broker.store,
                    stats=broker.stats, broker_name=broker.broker_name, now=broker.node.now())

    def get_consume_stats(self, req: RemotingCommand) -> Bean:
        group, topic = req.require("consumerGroup"), req.field("topic")
        topics = [topic] if topic and topic.strip() else admin.topics_by_consumer(self.broker.store, group)
        return admin.consume_stats(group, topics, **self._consume_stats_args())[0]

    def query_topic_consume_by_who(self, req: RemotingCommand) -> Bean:
        topic = req.require("topic")
        broker = self.broker
        groups = broker.consumer_manager.query_topic_consume_by_who(topic) + admin.groups_by_topic(broker.store, topic)
        return Bean(groupList=hash_order(groups))  # GroupList: a HashSet<String>

    def get_broker_consume_stats(self, req: RemotingCommand) -> Bean:
        return admin.consume_stats_list(self.subscription_group_manager.group_names(), broker_addr=self.broker.address,
                                        order_only=req.field("isOrder") == "true", **self._consume_stats_args())

    # --- config (25, 26) ----------------------------------------------------------------------------

    def broker_config(self) -> dict[str, object]:
        """Every 4.9.8 key: the lab's [broker] settings (durations in ms, *Seconds in s) and the
        broker's identity, then what UPDATE_BROKER_CONFIG set, over 4.9.8's defaults."""
        broker, config = self.broker, self.broker.config
        values = {f.name: int(round(getattr(config, f.name) * (1 if f.name.endswith("Seconds") else 1000)))
                  if f.metadata.get("duration") else getattr(config, f.name) for f in dataclasses.fields(config)}
        host, _, port = (broker.address or ":").rpartition(":")
        values.update(brokerClusterName=broker.cluster_name, brokerName=broker.broker_name, brokerId=broker.broker_id,
                      brokerIP1=host, listenPort=port, haListenPort=port,  # HA runs on the remoting port
                      namesrvAddr=";".join(broker.namesrv_addrs), brokerPermission=broker.broker_permission,
                      brokerRole="SLAVE" if broker.is_slave else "ASYNC_MASTER", forceRegister=True)
        store_path = broker.store.path
        if store_path is not None:
            values.setdefault("storePathRootDir", str(store_path.parent))
            values.setdefault("storePathCommitLog", str(store_path))
        values.setdefault("brokerIP2", values.get("brokerIP1"))
        if broker.is_slave:  # BrokerStartup lowers it by 10 on a slave
            values.setdefault("accessMessageInMemoryMaxRatio", 30)
        values["autoCreateSubscriptionGroup"] = self.subscription_group_manager.auto_create
        values.update(self.config_updates)
        return broker_config_keys.all_configs(values)

    def get_broker_config(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        version = admin.data_version_json(self.broker.config_data_version)
        return req.response(ResponseCode.SUCCESS, ext_fields={"version": version},
                            body=admin.properties_text(self.broker_config()).encode())

    def update_broker_config(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand | None:
        """updateBrokerConfig (Configuration.update): an unknown key or a value of the wrong type is
        refused with a remark naming it, where 4.9.8 drops it without a word."""
        if not req.body:
            return req.response(ResponseCode.SUCCESS)
        props = admin.parse_properties(req.body.decode("utf-8", errors="replace"))
        if admin.CONFIG_BLACK_LIST & props.keys():
            return req.response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        unknown = sorted(k for k in props if k not in broker_config_keys.DEFAULTS)
        if unknown:
            return req.response(ResponseCode.SYSTEM_ERROR, f"no such broker config key: {', '.join(unknown)}")
        values = {k: broker_config_keys.parse_value(k, v) for k, v in props.items()}  # ValueError: SYSTEM_ERROR
        for key, value in values.items():  # what the lab acts on: a value it can act on
            if key == "brokerPermission" and not 0 <= value <= 15:
                raise ValueError(f"brokerPermission={value} is not a PermName combination (0-15)")
            if key in LIVE_KEYS and not isinstance(value, bool) and not 0 <= value < 2**31:
                raise ValueError(f"{key}={value} must be between 0 and {2**31 - 1}")
        self.apply_config(values)
        broker = self.broker
        saved = broker.store.config_files.get(BROKER_PROPERTIES_FILE)
        broker.store.save_config(BROKER_PROPERTIES_FILE, {**(saved if isinstance(saved, dict) else {}), **values})
        broker.node.emit("broker.config", keys=sorted(values))
        if "brokerPermission" in values:
            broker._services.start_soon(self._answer_after, req, channel, broker.set_permission,
                                        values["brokerPermission"])
            return None
        broker.config_data_version = DataVersion(broker.node.now_ms(), broker.config_data_version.counter + 1)
        return req.response(ResponseCode.SUCCESS)

    def apply_config(self, values: dict[str, object]) -> None:
        """LIVE_KEYS and autoCreateSubscriptionGroup change what this broker does (LIVE_KEYS on a copy
        of the config, which the lab's brokers share); brokerPermission is the caller's; every key is kept."""
        broker = self.broker
        lab = {f.name: f for f in dataclasses.fields(broker.config)}
        changes = {}
        for key, value in values.items():
            if key in LIVE_KEYS and key in lab:
                seconds = lab[key].metadata.get("duration") and not key.endswith("Seconds")
                changes[key] = value / 1000 if seconds else value
            elif key == "autoCreateSubscriptionGroup":
                self.subscription_group_manager.auto_create = value
            elif key != "brokerPermission":
                self.config_updates[key] = value
        if changes:
            broker.config = dataclasses.replace(broker.config, **changes)
        if "autoCreateTopicEnable" in changes:
            broker.topic_config_manager.auto_create_topic_enable = changes["autoCreateTopicEnable"]

    # --- subscription groups (200, 201, 207) ----------------------------------------------------------

    def update_and_create_subscription_group(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        if not req.body:
            return req.response(ResponseCode.SYSTEM_ERROR, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP without a body")
        config = SubscriptionGroupConfig.from_body(bodies.load(req.body, req.serialize_type))
        self.subscription_group_manager.update_subscription_group_config(config, self.broker.node.now_ms())
        self._save_groups()
        self.broker.node.emit("broker.subscription_group", group=config.groupName, change="update",
                              consume_enable=config.consumeEnable)
        return req.response(ResponseCode.SUCCESS)

    def delete_subscription_group(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        group = req.require("groupName")
        if req.field("removeOffset") == "true":
            return req.response(ResponseCode.SYSTEM_ERROR,
                                "removeOffset=true is not supported: the lab's store keeps a group's offsets")
        if self.subscription_group_manager.delete_subscription_group_config(group, self.broker.node.now_ms()):
            self._save_groups()
            self.broker.node.emit("broker.subscription_group", group=group, change="delete")
        return req.response(ResponseCode.SUCCESS)

    def find_subscription_group(self, group: str):
        """findSubscriptionGroupConfig, for heartbeats and pulls: created if the broker may."""
        config = self.subscription_group_manager.subscription_group_table.get(group)  # every pull: no clock read
        if config is not None:
            return config
        config = self.subscription_group_manager.find_subscription_group_config(group, self.broker.node.now_ms())
        if config is not None:
            self._save_groups()  # auto-created (4.9.8 persists then too)
        return config

    # --- GET_CONSUMER_RUNNING_INFO (307): Broker2Client.callClient ----------------------------------------

    def get_consumer_running_info(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand | None:
        return self._call_consumer(req, channel, req.require("consumerGroup"), req.require("clientId"))

    def consume_message_directly(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand | None:
        """consumeMessageDirectly: the record at the msgId's commit-log offset, forwarded as 307 is."""
        group, client_id, msg_id = req.require("consumerGroup"), req.require("clientId"), req.require("msgId")
        try:
            offset = int.from_bytes(bytes.fromhex(msg_id)[8:16], "big", signed=True)
        except ValueError:
            offset = -1
        data = self.broker.store.record_at(offset) if len(msg_id) == 32 else None
        if data is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        fields = {**(req.ext_fields or {}), "brokerName": self.broker.broker_name}
        return self._call_consumer(req, channel, group, client_id, fields, data)

    def _call_consumer(self, req: RemotingCommand, channel: ClientChannel, group: str, client_id: str,
                       fields: dict | None = None, body: bytes | None = None) -> RemotingCommand | None:
        """AdminBrokerProcessor.callConsumer: the member's connection, its version, then callClient."""
        found = self.broker.consumer_manager.find_channel(group, client_id)
        if found is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        target, info = found
        if info.version < V3_1_8_SNAPSHOT:
            return req.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{client_id}> Version <{info.version}> "
                                "too low to finish, please upgrade it to V3_1_8_SNAPSHOT")
        self.broker._services.start_soon(self._call_client, req, channel, target, group, client_id, fields, body)
        return None

    async def _call_client(self, req: RemotingCommand, channel: ClientChannel, target: ClientChannel,
                           group: str, client_id: str, fields: dict | None = None, body: bytes | None = None) -> None:
        """Send the request (with `fields` and `body` if given) on the consumer's own connection
        and answer `req` with its reply: code, remark, extFields and body as the consumer sent them."""
        forward = RemotingCommand.request(req.code, req.ext_fields if fields is None else fields,
                                          req.body if body is None else body, serialize_type=target.serialize_type,
                                          opaque=next(self.broker._opaques))
        key = (target, forward.opaque)
        self._waiting[key], replies = trio.open_memory_channel(1)
        reply = None
        try:
            target.connection.send_soon(forward)
            with trio.move_on_after(CALL_CLIENT_TIMEOUT):
                reply = await replies.receive()
        finally:
            self._waiting.pop(key, None)
        if reply is not None:
            answer = req.response(reply.code, reply.remark, ext_fields=reply.ext_fields, body=reply.body)
        else:
            answer = req.response(admin.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: "
                                  f"no answer within {CALL_CLIENT_TIMEOUT:g} s")
        channel.connection.send_soon(answer)

    def on_response(self, channel: ClientChannel, reply: RemotingCommand) -> None:
        """A response on a client's connection: to a forwarded call if one waits for it (late or
        unknown ones are dropped, as Netty's response table drops them)."""
        waiting = self._waiting.pop((channel, reply.opaque), None)
        if waiting is not None:
            waiting.send_nowait(reply)

    # --- VIEW_BROKER_STATS_DATA (315) ---------------------------------------------------------------

    def view_broker_stats_data(self, req: RemotingCommand) -> Bean:
        name, key = req.require("statsName"), req.require("statsKey")
        broker = self.broker
        now = broker.node.now()
        uptime = broker.stats.uptime(now)
        counts = None
        if name == admin.TOPIC_PUT_NUMS:
            config = broker.topic_config_manager.select(key)
            if config is not None:
                counts = admin.topic_put_counts(broker.store, config, broker.node.now_ms(), broker.boot_ms)
        elif name == admin.GROUP_GET_NUMS and "@" in key:
            topic, _, group = key.partition("@")
            counts = self._counts(broker.stats.group_gets.get((topic, group)), now, uptime)
        elif name in (admin.BROKER_PUT_NUMS, admin.BROKER_GET_NUMS) and key == broker.cluster_name:
            counts = self._counts(broker.stats.puts if name == admin.BROKER_PUT_NUMS else broker.stats.gets, now, uptime)
        if counts is None:
            raise Refused(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        return admin.broker_stats_data(counts, uptime)

    @staticmethod
    def _counts(rate, now: float, uptime: float) -> dict[str, int] | None:
        """A BrokerStats rate as the three windows: it keeps the last minute or more by the second,
        and its total since boot stands for the hour and the day. None if nothing was counted."""
        if rate is None or not rate.total:
            return None
        minute = round(rate.tps(now, 60, uptime) * max(1.0, min(60.0, uptime)))
        return {"statsMinute": minute, "statsHour": rate.total, "statsDay": rate.total}

    # --- INVOKE_BROKER_TO_RESET_OFFSET (222): Broker2Client.resetOffset ------------------------------

    def reset_offset(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        """resetOffset: each write queue's offset for the time, sent oneway to every member of the
        group, which moves and commits it (the broker writes no offset, as 4.9.8's does not)."""
        broker = self.broker
        topic, group = req.require("topic"), req.require("group")
        timestamp = req.require_int("timestamp")
        force = req.field("isForce") == "true"
        config = broker.topic_config_manager.select(topic)
        if config is None:
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}")
        store = broker.store
        entries = []
        for queue_id in range(config.write_queue_nums):
            consumer_offset = store.consumer_offsets.get((group, topic, queue_id), -1)
            if consumer_offset == -1:
                return req.response(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
            if timestamp == -1:
                offset = store.max_offset(topic, queue_id)
            else:
                offset = store.offset_in_queue_by_time(topic, queue_id, timestamp)
            offset = max(offset, 0)
            entries.append(((topic, queue_id), offset if force or offset < consumer_offset else consumer_offset))
        table = admin.by_message_queue(entries, broker.broker_name)
        info = broker.consumer_manager.consumer_table.get(group)
        if info is None or not info.channel_info_table:
            return req.response(admin.CONSUMER_NOT_ONLINE, "Consumer not online, so can not reset offset, "
                                f"Group: {group} Topic: {topic} Timestamp: {timestamp}")
        body = fastjson.encode(Bean(offsetTable=table))
        for target, client in list(info.channel_info_table.items()):
            if client.version < V3_0_7_SNAPSHOT:
                return req.response(ResponseCode.SYSTEM_ERROR,
                                    f"the client does not support this feature. version={client.version}")
            target.connection.send_soon(RemotingCommand.request(
                RESET_CONSUMER_CLIENT_OFFSET, {"topic": topic, "group": group, "timestamp": timestamp,
                                               "isForce": "false"},
                body, oneway=True, serialize_type=target.serialize_type, opaque=next(broker._opaques)))
        return req.response(ResponseCode.SUCCESS, body=body)

    # --- QUERY_CONSUME_QUEUE (321) -------------------------------------------------------------------

    def query_consume_queue(self, req: RemotingCommand, channel: ClientChannel) -> RemotingCommand:
        """queryConsumeQueue: `filterData` is `null` for a TAG subscription, which has no ConsumerFilterData."""
        topic = req.require("topic")
        queue_id, index, count = req.require_ints("queueId", "index", "count")
        group = req.field("consumerGroup")
        queue = self.broker.store.consume_queue(topic, queue_id)
        if queue is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        fields: dict[str, object] = {"maxQueueIndex": len(queue), "minQueueIndex": 0}
        if group is not None:
            info = self.broker.consumer_manager.consumer_table.get(group)
            sub = info.subscription_table.get(topic) if info is not None else None
            if sub is None:
                fields["filterData"] = f"{group}@{topic} is not online!"
            else:
                fields["subscriptionData"] = admin.subscription_bean(sub)
                fields["filterData"] = "null"
        if not 0 <= index < len(queue):
            return req.response(ResponseCode.SUCCESS, f"Index {index} of {queue_id}@{topic} is not exist!")
        end = min(len(queue), (index // CQ_FILE_ENTRIES + 1) * CQ_FILE_ENTRIES, index + max(count, 0))
        entries = []
        for record in queue[index:end]:
            tags = decode_messages(record.data)[0].properties.get("TAGS")
            entries.append(Bean(eval=False, physicOffset=record.commit_log_offset, physicSize=len(record.data),
                                tagsCode=java_int(string_hash(tags)) if tags else 0))
        fields["queueData"] = entries
        return req.response(ResponseCode.SUCCESS, body=fastjson.encode(Bean(fields)))
