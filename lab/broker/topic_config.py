"""TopicConfigManager: a broker's topic table and its DataVersion. Pure: `now_ms` is an argument.

The DataVersion counter goes up with every change, so the next registration tells each NameServer
to re-read the table (a NameServer ignores the table of an unchanged version).
"""

from __future__ import annotations

from nameserver.protocol.codes import PERM_INHERIT, PERM_READ, PERM_WRITE
from nameserver.routes import DataVersion, TopicConfig

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
PERM_RW = PERM_READ | PERM_WRITE

# TopicValidator's names, and the queue counts TopicConfigManager gives their topics.
RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
RMQ_SYS_BENCHMARK_TOPIC = "BenchmarkTest"
RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
RMQ_SYS_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"  # MixAll: <cluster>_REPLY_TOPIC carries request-reply replies
SCHEDULE_TOPIC_QUEUE_NUM = 18  # one queue per delay level
BENCHMARK_QUEUE_NUM = 1024
TOPIC_CONFIG_DEFAULT_QUEUE_NUMS = 16  # TopicConfig's defaultReadQueueNums / defaultWriteQueueNums


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def system_topics(cluster_name: str, broker_name: str, *, auto_create_topic_enable: bool,
                  default_topic_queue_nums: int, cluster_topic_enable: bool, broker_topic_enable: bool,
                  trace_topic_enable: bool, msg_trace_topic_name: str) -> dict[str, TopicConfig]:
    """The topics 4.9.8's TopicConfigManager constructor puts in a new broker's table, in its order,
    each with its queues and permission; the broker config's keys decide which and how. The
    cluster-name topic (16 queues, TopicConfig's default) and the broker-name topic (1 queue) are
    inherit-only unless clusterTopicEnable / brokerTopicEnable make them read-write too."""
    topics: dict[str, TopicConfig] = {}

    def put(name: str, queues: int = TOPIC_CONFIG_DEFAULT_QUEUE_NUMS, perm: int = PERM_RW) -> None:
        topics[name] = TopicConfig(name, queues, queues, perm)

    put(RMQ_SYS_SELF_TEST_TOPIC, 1)
    if auto_create_topic_enable:
        put(AUTO_CREATE_TOPIC_KEY_TOPIC, default_topic_queue_nums, PERM_RW | PERM_INHERIT)
    put(RMQ_SYS_BENCHMARK_TOPIC, BENCHMARK_QUEUE_NUM)
    put(cluster_name, perm=PERM_INHERIT | (PERM_RW if cluster_topic_enable else 0))
    put(broker_name, 1, PERM_INHERIT | (PERM_RW if broker_topic_enable else 0))
    put(RMQ_SYS_OFFSET_MOVED_EVENT, 1)
    put(RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM)
    if trace_topic_enable:
        put(msg_trace_topic_name, 1)
    put(f"{cluster_name}_{REPLY_TOPIC_POSTFIX}", 1)
    return topics


class TopicConfigManager:
    def __init__(self, topic_config_table: dict[str, TopicConfig], *, auto_create_topic_enable: bool,
                 default_topic_queue_nums: int, now_ms: int):
        """topic_config_table is changed in place: it stands for topics.json, so whoever keeps it
        across a broker restart keeps the topics created at run time."""
        self.topic_config_table = topic_config_table
        self.auto_create_topic_enable = auto_create_topic_enable
        if auto_create_topic_enable and AUTO_CREATE_TOPIC_KEY_TOPIC not in topic_config_table:
            topic_config_table[AUTO_CREATE_TOPIC_KEY_TOPIC] = TopicConfig(
                AUTO_CREATE_TOPIC_KEY_TOPIC, default_topic_queue_nums, default_topic_queue_nums,
                PERM_RW | PERM_INHERIT)
        self.data_version = DataVersion(now_ms, 0)

    def add_system_topics(self, topics: dict[str, TopicConfig]) -> None:
        """The constructor's system topics (`system_topics`), under the same DataVersion: a topic
        the table already holds keeps its config, as topics.json's, loaded after them, wins."""
        for name, config in topics.items():
            self.topic_config_table.setdefault(name, config)

    def select(self, topic: str) -> TopicConfig | None:
        return self.topic_config_table.get(topic)

    def next_version(self, now_ms: int) -> None:
        self.data_version = DataVersion(now_ms, self.data_version.counter + 1)

    def _put(self, config: TopicConfig, now_ms: int) -> TopicConfig:
        self.topic_config_table[config.topic_name] = config
        self.next_version(now_ms)
        return config

    def update_topic_config(self, config: TopicConfig, now_ms: int) -> TopicConfig | None:
        """UPDATE_AND_CREATE_TOPIC: put `config` (new or replacing) under a new DataVersion; the
        previous config, None if the topic is new."""
        previous = self.topic_config_table.get(config.topic_name)
        self._put(config, now_ms)
        return previous

    def create_topic_in_send_message_method(self, topic: str, default_topic: str, client_queue_nums: int,
                                            topic_sys_flag: int, now_ms: int) -> TopicConfig | None:
        """A send to an unknown topic: a copy of the default topic (TBW102) if that one may be
        inherited, with min(client's, default's) queues; None otherwise."""
        default = self.topic_config_table.get(default_topic)
        if default is None or not default.perm & PERM_INHERIT:
            return None
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.auto_create_topic_enable:
            return None
        queue_nums = max(0, min(client_queue_nums, default.write_queue_nums))
        return self._put(TopicConfig(topic, queue_nums, queue_nums, default.perm & ~PERM_INHERIT,
                                     default.topic_filter_type, topic_sys_flag), now_ms)

    def create_topic_in_send_message_back_method(self, topic: str, queue_nums: int, perm: int,
                                                 topic_sys_flag: int, now_ms: int) -> tuple[TopicConfig, bool]:
        """A retry topic (consumer heartbeat, send-back): (config, whether it was created now)."""
        existing = self.topic_config_table.get(topic)
        if existing is not None:
            return existing, False
        return self._put(TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag), now_ms), True

    def delete_topic_config(self, topic: str, now_ms: int) -> TopicConfig | None:
        """DELETE_TOPIC_IN_BROKER: the topic leaves the table under a new DataVersion, so the next
        registration re-sends the table without it; the removed config, None if there was none."""
        old = self.topic_config_table.pop(topic, None)
        if old is not None:
            self.next_version(now_ms)
        return old

    def replace_all(self, table: dict[str, TopicConfig], data_version: DataVersion) -> None:
        """A slave takes its master's table and version (SlaveSynchronize.syncTopicConfig)."""
        self.topic_config_table.clear()
        self.topic_config_table.update(table)
        self.data_version = data_version

    def registered_table(self, broker_permission: int,
                         table: dict[str, TopicConfig] | None = None) -> dict[str, TopicConfig]:
        """The table a registration carries, the whole one or `table` (registerIncrementBrokerData's):
        a broker that is not read-write gives every topic its own permission (doRegisterBrokerAll)."""
        table = self.topic_config_table if table is None else table
        if broker_permission & PERM_RW == PERM_RW:
            return table
        return {name: TopicConfig(name, tc.read_queue_nums, tc.write_queue_nums, broker_permission)
                for name, tc in table.items()}
