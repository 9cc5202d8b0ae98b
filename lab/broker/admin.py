"""The admin side of a broker — what mqadmin and the RocketMQ Dashboard ask (AdminBrokerProcessor,
4.9.8): plain functions building each reply body from the broker's state and `now`. The trio edge
and the request headers are lab/broker/admin_processor.py's; each code's reply is described in
docs/broker-admin.md.

Maps are written in the order Java's HashMap iterates them (java_maps.hash_order), MessageQueue keys
as JSON objects, as a 4.9.8 broker writes them.
"""

from __future__ import annotations

import math
import re
import shutil
from typing import Callable, Iterable, Mapping

from lab.remoting.java_maps import hash_map, hash_order, message_queue_hash
from nameserver.bodies import data_version_to_wire, topic_config_to_wire
from nameserver.protocol import fastjson
from nameserver.protocol.codes import CURRENT_VERSION
from nameserver.protocol.fastjson import Bean, JMap, java_double
from nameserver.routes import DataVersion, TopicConfig

from .consumer_manager import ClientChannelInfo, ConsumerGroupInfo, ConsumerManager
from .stats import BrokerStats
from .store import MessageStore
from .topic_config import AUTO_CREATE_TOPIC_KEY_TOPIC, REPLY_TOPIC_POSTFIX

# RequestCode (4.9.8) of the admin requests served here.
GET_BROKER_CONFIG = 26
GET_BROKER_RUNTIME_INFO = 28
GET_TOPIC_STATS_INFO = 202
GET_CONSUMER_CONNECTION_LIST = 203
GET_PRODUCER_CONNECTION_LIST = 204
GET_CONSUME_STATS = 208
QUERY_TOPIC_CONSUME_BY_WHO = 300
GET_BROKER_CONSUME_STATS = 317
GET_ALL_TOPIC_CONFIG = 21
UPDATE_BROKER_CONFIG = 25
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
DELETE_SUBSCRIPTIONGROUP = 207
DELETE_TOPIC_IN_BROKER = 215
VIEW_BROKER_STATS_DATA = 315
GET_ALL_PRODUCER_INFO = 328
GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305

CONSUMER_NOT_ONLINE = 206  # ResponseCode
CONSUME_MSG_TIMEOUT = 207  # ResponseCode: a consumer that did not answer a forwarded request
SUBSCRIPTION_GROUP_NOT_EXIST = 26  # ResponseCode

BROKER_VERSION_DESC = "V4_9_8"  # MQVersion.getVersionDesc(CURRENT_VERSION)

# TopicValidator (4.9.8)
VALID_TOPIC = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LENGTH = 127
SYSTEM_TOPIC_ORDER = (  # TopicValidator's static SYSTEM_TOPIC_SET, in the order it is filled
    AUTO_CREATE_TOPIC_KEY_TOPIC, "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT")
SYSTEM_TOPICS = frozenset(SYSTEM_TOPIC_ORDER)
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")

# StoreStatsService.PUT_MESSAGE_ENTIRE_TIME_MAX_DESC: a lab put takes no time, so all land in the first.
PUT_TIME_BUCKETS = ("[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]",
                    "[500ms~1s]", "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]")


# --- UPDATE_AND_CREATE_TOPIC (17) ---------------------------------------------------------------------

def added_system_topics(reserved: Iterable[str]) -> list[str]:
    """The names a 4.9.8 broker adds to TopicValidator's system topics as it starts, in its order:
    `reserved` is its cluster and broker names (then its trace topic's, with traceTopicEnable), and
    TopicConfigManager always adds the cluster's reply topic, `<cluster>_REPLY_TOPIC`, last."""
    names = list(reserved)
    return [*names, f"{names[0]}_{REPLY_TOPIC_POSTFIX}"] if names else names


def check_topic(topic: str | None, reserved: Iterable[str]) -> str | None:
    """TopicValidator.validateTopic + isSystemTopic: the SYSTEM_ERROR remark, or None if `topic`
    may be created. `reserved`: as for added_system_topics."""
    if topic is None or not topic.strip():
        return "The specified topic is blank."
    if not VALID_TOPIC.match(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    if topic in SYSTEM_TOPICS or topic in added_system_topics(reserved) or topic.startswith(SYSTEM_TOPIC_PREFIX):
        return f"The topic[{topic}] is conflict with system topic."
    return None


def topic_config_from_header(fields: Mapping[str, str]) -> TopicConfig:
    """CreateTopicRequestHeader -> TopicConfig, as updateAndCreateTopic builds it: readQueueNums,
    writeQueueNums, perm and topicFilterType are required (ValueError otherwise, a SYSTEM_ERROR as
    Java's NPE is); topicSysFlag defaults to 0; `order` is not taken (only the KV order config sets it)."""
    def required_int(name: str) -> int:
        value = fields.get(name)
        if value is None:
            raise ValueError(f"the custom field <{name}> is null")
        return int(value)

    filter_type = fields.get("topicFilterType")
    if filter_type not in TOPIC_FILTER_TYPES:
        raise ValueError(f"No enum constant TopicFilterType.{filter_type}")
    sys_flag = fields.get("topicSysFlag")
    return TopicConfig(fields["topic"], required_int("readQueueNums"), required_int("writeQueueNums"),
                       required_int("perm"), filter_type, int(sys_flag) if sys_flag is not None else 0)


# --- GET_BROKER_CONFIG (26) ---------------------------------------------------------------------------

def properties_text(properties: Mapping[str, object]) -> str:
    """MixAll.properties2String: `key=value\\n` each, booleans as Java prints them. Java walks a
    Properties (Hashtable) in its hash order; the lab writes keys sorted — tools read it as a
    Properties, where order does not matter."""
    def text(v: object) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    return "".join(f"{k}={text(properties[k])}\n" for k in sorted(properties) if properties[k] is not None)


def data_version_json(version: DataVersion) -> str:
    """Configuration.getDataVersionJson: DataVersion as plain fastjson writes it."""
    return fastjson.dumps(data_version_to_wire(version), standard=False)


# --- GET_BROKER_RUNTIME_INFO (28) ---------------------------------------------------------------------

def tps_text(figures: Iterable[float]) -> str:
    """StoreStatsService.getPutTps() and kin: the 10 s, 60 s and 600 s rates, space-separated,
    each as Java's String.valueOf(double)."""
    return " ".join(java_double(f) for f in figures)


def human_readable_byte_count(n: int) -> str:
    """MixAll.humanReadableByteCount(bytes, si=false)."""
    if n < 1024:
        return f"{n} B"
    exp = int(math.log(n) / math.log(1024))
    return f"{n / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def format_runtime(millis: int) -> str:
    """StoreStatsService.getFormatRuntime."""
    day, hour, minute = 86_400_000, 3_600_000, 60_000
    return (f"[ {millis // day} days, {millis % day // hour} hours, {millis % hour // minute} minutes, "
            f"{millis % minute // 1000} seconds ]")


def disk_used_ratio(path) -> float:
    """UtilAll.getDiskPartitionSpaceUsedPercent; -1 for a path that does not exist. Not against the
    total: the blocks only root may use would count as used (0.70 where 4.9.8 says 0.25)."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1.0
    entire = usage.used + usage.free
    if usage.total <= 0 or entire <= 0:
        return -1.0
    return -(-usage.used * 100 // entire) / 100.0


def runtime_info(*, stats: BrokerStats, store: MessageStore, now: float, now_ms: int, boot_ms: int) -> Bean:
    """The KVTable of GET_BROKER_RUNTIME_INFO: StoreStatsService.getRuntimeInfo, then
    DefaultMessageStore.getRuntimeInfo, then AdminBrokerProcessor.prepareRuntimeInfo, put into one
    HashMap(64) in that order. No scheduleMessageOffset_* (no delay levels)."""
    puts = stats.puts.total
    times_total = puts or 1  # StoreStatsService divides by at least 1
    found, miss = stats.windows(stats.pulls_found, now), stats.windows(stats.pulls_miss, now)
    table: list[tuple[str, str]] = [
        ("bootTimestamp", str(boot_ms)),
        ("runtime", format_runtime(max(0, now_ms - boot_ms))),
        ("putMessageEntireTimeMax", "0"),
        ("putMessageTimesTotal", str(times_total)),
        ("putMessageFailedTimes", "0"),  # a lab put does not fail (a refused send never reaches the store)
        ("putMessageSizeTotal", str(stats.put_size_total)),
        ("putMessageDistributeTime", "".join(f"{d}:{puts if i == 0 else 0} " for i, d in enumerate(PUT_TIME_BUCKETS))),
        ("putMessageAverageSize", java_double(stats.put_size_total / times_total)),
        ("dispatchMaxBuffer", "0"),
        ("getMessageEntireTimeMax", "0"),
        ("putTps", tps_text(stats.windows(stats.puts, now))),
        ("getFoundTps", tps_text(found)),
        ("getMissTps", tps_text(miss)),
        ("getTotalTps", tps_text(f + m for f, m in zip(found, miss))),
        ("getTransferedTps", tps_text(stats.windows(stats.gets, now))),
        # findPutMessageEntireTimePX(0.99 / 0.999) as "%.2f": every lab put lands in the first bucket
        ("putLatency99", "0.00"),
        ("putLatency999", "0.00"),
    ]
    if store.path is not None:  # the commit log's directory; a simulated store has none
        ratio = disk_used_ratio(store.path.parent)
        table += [(f"commitLogDiskRatio_{store.path.parent}", java_double(ratio)),
                  ("commitLogDiskRatio", java_double(ratio)), ("consumeQueueDiskRatio", java_double(ratio))]
    else:
        table += [("commitLogDiskRatio", java_double(-1.0)), ("consumeQueueDiskRatio", java_double(-1.0))]
    table += [
        ("commitLogMinOffset", "0"),
        ("commitLogMaxOffset", str(store.max_physical_offset)),
        ("brokerVersionDesc", BROKER_VERSION_DESC),
        ("brokerVersion", str(CURRENT_VERSION)),
        ("msgPutTotalYesterdayMorning", "0"),
        ("msgPutTotalTodayMorning", "0"),
        ("msgPutTotalTodayNow", str(puts)),
        ("msgGetTotalYesterdayMorning", "0"),
        ("msgGetTotalTodayMorning", "0"),
        ("msgGetTotalTodayNow", str(stats.gets.total)),
        ("sendThreadPoolQueueSize", "0"),
        ("sendThreadPoolQueueCapacity", "10000"),
        ("pullThreadPoolQueueSize", "0"),
        ("pullThreadPoolQueueCapacity", "100000"),
        ("queryThreadPoolQueueSize", "0"),
        ("queryThreadPoolQueueCapacity", "20000"),
        ("EndTransactionQueueSize", "0"),
        ("EndTransactionThreadPoolQueueCapacity", "100000"),
        ("dispatchBehindBytes", "0"),
        ("pageCacheLockTimeMills", "0"),
        ("sendThreadPoolQueueHeadWaitTimeMills", "0"),
        ("pullThreadPoolQueueHeadWaitTimeMills", "0"),
        ("queryThreadPoolQueueHeadWaitTimeMills", "0"),
        ("earliestMessageTimeStamp", str(store.earliest_message_time())),
        ("startAcceptSendRequestTimeStamp", "0"),
        ("remainTransientStoreBufferNumbs", str(2**31 - 1)),  # Integer.MAX_VALUE: no transient pool
        ("remainHowManyDataToFlush", human_readable_byte_count(0)),  # flushed before each reply
    ]
    if store.path is not None:
        try:
            usage = shutil.disk_usage(store.path.parent)
            table.append(("commitLogDirCapacity", f"Total : {human_readable_byte_count(usage.total)}, "
                                                  f"Free : {human_readable_byte_count(usage.free)}."))
        except OSError:
            pass
    return Bean(table=hash_map(table, initial_capacity=64))


# --- MessageQueue-keyed tables ------------------------------------------------------------------------

def by_message_queue(entries: list[tuple[tuple[str, int], Bean]], broker_name: str) -> JMap:
    """A HashMap<MessageQueue, V> of ((topic, queueId), value) puts, in its iteration order."""
    values = dict(entries)
    order = hash_order(values, lambda k: message_queue_hash(k[0], broker_name, k[1]))
    return JMap((Bean(brokerName=broker_name, queueId=q, topic=t), values[(t, q)]) for t, q in order)


def topic_stats_table(config: TopicConfig, broker_name: str, store: MessageStore) -> Bean:
    """getTopicStatsInfo's TopicStatsTable, over the topic's write queues."""
    entries = []
    for queue_id in range(config.write_queue_nums):
        min_offset = max(0, store.min_offset(config.topic_name, queue_id))
        max_offset = max(0, store.max_offset(config.topic_name, queue_id))
        last = store.store_time(config.topic_name, queue_id, max_offset - 1) if max_offset > 0 else 0
        entries.append(((config.topic_name, queue_id),
                        Bean(lastUpdateTimestamp=last, maxOffset=max_offset, minOffset=min_offset)))
    return Bean(offsetTable=by_message_queue(entries, broker_name))


# --- consume stats (208, 317) -------------------------------------------------------------------------

def topics_by_consumer(store: MessageStore, group: str) -> list[str]:
    """ConsumerOffsetManager.whichTopicByConsumer: topics `group` has committed offsets on."""
    return list(dict.fromkeys(t for g, t, _ in store.consumer_offsets if g == group))


def groups_by_topic(store: MessageStore, topic: str) -> list[str]:
    """ConsumerOffsetManager.whichGroupByTopic."""
    return list(dict.fromkeys(g for g, t, _ in store.consumer_offsets if t == topic))


def _queue_offsets(store: MessageStore, group: str, topic: str, queue_id: int) -> Bean:
    """OffsetWrapper: brokerOffset, consumerOffset, lastTimestamp (0 where there is none)."""
    broker_offset = max(0, store.max_offset(topic, queue_id))
    consumer_offset = max(0, store.consumer_offsets.get((group, topic, queue_id), -1))
    last = store.store_time(topic, queue_id, consumer_offset - 1) if consumer_offset > 0 else -1
    return Bean(brokerOffset=broker_offset, consumerOffset=consumer_offset, lastTimestamp=last if last > 0 else 0)


def consume_stats(group: str, topics: Iterable[str], *, select: Callable[[str], TopicConfig | None],
                  consumers: ConsumerManager, store: MessageStore, stats: BrokerStats, broker_name: str,
                  now: float, queues: str = "read", order_only: bool = False) -> tuple[Bean, int]:
    """ConsumeStats of `group` over `topics` (skipping unknown topics, and topics the group's online
    members do not subscribe to when they subscribe to any), and its total diff. getConsumeStats (208)
    walks each topic's read queues, fetchAllConsumeStatsInBroker (317) its write queues."""
    info = consumers.consumer_table.get(group)
    entries, tps = [], 0.0
    for topic in topics:
        config = select(topic)
        if config is None or (order_only and not config.order):
            continue
        if info is not None and info.subscription_table and topic not in info.subscription_table:
            continue
        nums = config.read_queue_nums if queues == "read" else config.write_queue_nums
        entries += [((topic, q), _queue_offsets(store, group, topic, q)) for q in range(nums)]
        tps += stats.group_get_tps(now, group, topic)
    total_diff = sum(v["brokerOffset"] - v["consumerOffset"] for _, v in entries)
    return Bean(consumeTps=float(tps), offsetTable=by_message_queue(entries, broker_name)), total_diff


def consume_stats_list(groups: Iterable[str], *, broker_addr: str, order_only: bool, **kwargs) -> Bean:
    """fetchAllConsumeStatsInBroker's ConsumeStatsList (317): for each of `groups` (the subscription
    group table's), [ConsumeStats per topic it has offsets on]."""
    stats_list, total_diff = [], 0
    for group in groups:
        per_topic = []
        for topic in topics_by_consumer(kwargs["store"], group):
            stats, diff = consume_stats(group, [topic], queues="write", order_only=order_only, **kwargs)
            if stats["offsetTable"]:  # empty: the topic was skipped
                per_topic.append(stats)
                total_diff += diff
        stats_list.append(JMap([(group, per_topic)]))
    return Bean(brokerAddr=broker_addr, consumeStatsList=stats_list, totalDiff=total_diff)


# --- connections (203, 204) and GroupList (300) -------------------------------------------------------

def connection_set(channels: Mapping[object, ClientChannelInfo]) -> list[Bean]:
    """Each channel's Connection, as its heartbeat told it; the channels are ClientChannels."""
    return [Bean(clientAddr=ch.remote_addr, clientId=info.client_id, language=info.language, version=info.version)
            for ch, info in channels.items()]


def consumer_connection(info: ConsumerGroupInfo) -> Bean:
    """ConsumerConnection; its connectionSet in arrival order, as Java's HashSet order (enum identity
    hashes) is not reproducible."""
    subscriptions = hash_map((topic, subscription_bean(sub)) for topic, sub in info.subscription_table.items())
    return Bean(connectionSet=connection_set(info.channel_info_table), consumeFromWhere=info.consume_from_where,
                consumeType=info.consume_type, messageModel=info.message_model, subscriptionTable=subscriptions)


def subscription_bean(sub: Mapping[str, object]) -> Bean:
    """SubscriptionData: tagsSet and codeSet are HashSets."""
    return Bean({**sub, "tagsSet": hash_order(sub["tagsSet"]),
                 "codeSet": hash_order(sub["codeSet"], lambda code: code)})


# --- GET_ALL_TOPIC_CONFIG (21) --------------------------------------------------------------------------

# TopicConfigManager's table is a ConcurrentHashMap(1024): 2048 buckets.
TOPIC_TABLE_CAPACITY = 2048


def all_topic_config(table: Mapping[str, TopicConfig], version: DataVersion) -> Bean:
    """TopicConfigManager.encode(): what exportMetadata reads as a TopicConfigSerializeWrapper."""
    configs = hash_map(((name, Bean(topic_config_to_wire(config))) for name, config in table.items()),
                       initial_capacity=TOPIC_TABLE_CAPACITY)
    return Bean(dataVersion=Bean(data_version_to_wire(version)), topicConfigTable=configs)


def system_topic_list(reserved: Iterable[str]) -> Bean:
    """GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305): TopicList of TopicValidator's system topic set (a
    HashSet), which a broker extends at start (added_system_topics)."""
    return Bean(topicList=hash_order([*SYSTEM_TOPIC_ORDER, *added_system_topics(reserved)]))


# --- UPDATE_BROKER_CONFIG (25) --------------------------------------------------------------------------

# AdminBrokerProcessor.initConfigBlackList, with BrokerConfig.configBlackList's default.
CONFIG_BLACK_LIST = frozenset(("brokerConfigPath", "rocketmqHome", "configBlackList"))
PROPERTIES_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")  # Properties.load: \uXXXX, or \ and one character
PROPERTIES_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}  # any other escaped character is itself


def parse_properties(text: str) -> dict[str, str]:
    """MixAll.string2Properties for the text mqadmin sends (Properties.store's lines): `key=value`
    or `key:value`, `#` and `!` comments, blank lines; backslash escapes as Properties.load reads
    them (\\t, \\n, \\uXXXX, an escaped separator). Line continuations are not supported (a
    ValueError names the line), nor does mqadmin write them."""
    def unescape(part: str) -> str:
        return PROPERTIES_ESCAPE.sub(lambda m: chr(int(m[1][1:], 16)) if len(m[1]) == 5
                                     else PROPERTIES_ESCAPES.get(m[1], m[1]), part)

    props: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.lstrip(" \t\f")
        if not line or line[0] in "#!":
            continue
        if (len(line) - len(line.rstrip("\\"))) % 2 == 1:  # an odd run of backslashes ends it
            raise ValueError(f"line {number} of the properties continues on the next line, which is not supported")
        match = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:]?\s*(.*)$", line)
        props[unescape(match.group(1))] = unescape(match.group(2))
    return props


# --- VIEW_BROKER_STATS_DATA (315) -----------------------------------------------------------------------

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"  # keyed by the cluster name, as BrokerStatsManager keeps them
BROKER_GET_NUMS = "BROKER_GET_NUMS"
STATS_WINDOWS = (("statsMinute", 60), ("statsHour", 3600), ("statsDay", 86400))  # seconds


def broker_stats_data(counts: Mapping[str, int], uptime: float) -> Bean:
    """BrokerStatsData: `counts` maps each of statsMinute / statsHour / statsDay to what was counted
    in its window. Each BrokerStatsItem has that count, its rate per second (over the uptime while
    the broker is younger, at least 1 s, as the lab's other rates) and avgpt, the count per call
    (each lab put or pull call is one)."""
    return Bean({name: Bean(avgpt=1.0 if counts[name] else 0.0, sum=counts[name],
                            tps=float(counts[name] / max(1.0, min(float(window), uptime))))
                 for name, window in STATS_WINDOWS})


def topic_put_counts(store: MessageStore, config: TopicConfig, now_ms: int, boot_ms: int) -> dict[str, int] | None:
    """TOPIC_PUT_NUMS of a topic, from the store: the messages put in each window since this
    broker's boot (BrokerStatsManager's counters start at boot); None if none was."""
    queues = range(max(config.write_queue_nums, config.read_queue_nums))

    def since(ms: int) -> int:
        return sum(max(0, store.max_offset(config.topic_name, q)) - max(0, store.search_offset(config.topic_name, q, ms))
                   for q in queues)

    if since(boot_ms) == 0:
        return None
    return {name: since(max(boot_ms, now_ms - window * 1000)) for name, window in STATS_WINDOWS}


# --- GET_ALL_PRODUCER_INFO (328) ------------------------------------------------------------------------

def producer_table_info(groups: Mapping[str, Mapping[object, ClientChannelInfo]],
                        epoch_ms_of: Callable[[float], int]) -> Bean:
    """ProducerTableInfo: a HashMap by group; remoteIP is Netty's remoteAddress().toString()."""
    data = hash_map((group, [Bean(clientId=info.client_id, language=info.language,
                                  lastUpdateTimestamp=epoch_ms_of(info.last_update_timestamp),
                                  remoteIP="/" + channel.remote_addr, version=info.version)
                             for channel, info in channels.items()])
                    for group, channels in groups.items() if channels)
    return Bean(data=data)
