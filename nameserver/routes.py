"""RouteInfoManager: the NameServer's five tables and every rule that changes them (RocketMQ 4.9.8).

Pure: no I/O and no clock. `now` (seconds, any monotonic origin) is passed to each call that needs it;
a channel is any object identifying the connection a registration arrived on.

Consistency: every method runs to completion without yielding, and the trio server never awaits
inside one, so a route read can never observe half of a registration — the role RocketMQ's
read-write lock plays. Tables iterate in insertion order (dicts as ordered sets), never hash order,
so a simulated run is reproducible.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple

from .protocol.codes import FLAG_UNIT, FLAG_UNIT_SUB, PERM_READ, PERM_WRITE

log = logging.getLogger("nameserver.routes")

MASTER_ID = 0
BROKER_CHANNEL_EXPIRED_TIME = 120.0  # seconds


class DataVersion(NamedTuple):
    timestamp: int = 0  # ms
    counter: int = 0


class TopicConfig(NamedTuple):
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False


class QueueData(NamedTuple):
    """Immutable and interned: 200,000 queue entries of a large cluster share a handful of objects."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def copy(self) -> BrokerData:
        return BrokerData(self.cluster, self.broker_name, dict(self.broker_addrs))


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_timestamp: float
    data_version: DataVersion
    channel: object
    ha_server_addr: str


@dataclass(slots=True)
class TopicRouteData:
    queue_datas: list[QueueData]
    broker_datas: list[BrokerData]
    filter_server_table: dict[str, list[str]]
    order_topic_conf: str | None = None


class RegisterBrokerResult(NamedTuple):
    ha_server_addr: str | None = None  # for a slave: its live master's HA address
    master_addr: str | None = None
    first: bool = False  # the address was not in brokerLiveTable
    topics_applied: bool = False  # the body's topic table was applied (master, new or changed)


@dataclass(slots=True)
class RemovedBroker:
    """What one removal took away, for logs and the event stream."""

    broker_addr: str
    reason: str  # expired | channel_closed | unregistered
    broker_name: str | None = None
    broker_id: int | None = None
    cluster_name: str | None = None
    broker_name_removed: bool = False  # the last address of the broker name went
    removed_topics: list[str] = field(default_factory=list)


def expired_brokers(broker_live_table: Mapping[str, BrokerLiveInfo], expired_time: float, now: float) -> list[str]:
    """The addresses scanNotActiveBroker removes: silent for longer than the expiry. A plain
    function so the workshop (lab/workshop, exercise 5) can swap in a learner's version."""
    return [addr for addr, live in broker_live_table.items() if live.last_update_timestamp + expired_time < now]


class RouteInfoManager:
    def __init__(self, broker_channel_expired_time: float = BROKER_CHANNEL_EXPIRED_TIME):
        self.broker_channel_expired_time = broker_channel_expired_time
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, dict[str, None]] = {}  # cluster -> ordered set of names
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}
        # Bumped on every change a route or cluster read could see; lets readers cache encodings.
        self.generation = 0
        self._queue_data_pool: dict[QueueData, QueueData] = {}

    # --- registration -------------------------------------------------------------------------

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        data_version: DataVersion,
        topic_config_table: Mapping[str, TopicConfig] | None,
        filter_server_list: list[str] | None,
        channel: object,
        now: float,
    ) -> RegisterBrokerResult:
        """Apply one REGISTER_BROKER. `topic_config_table` may be lazy: it is only read when the
        broker is a master whose dataVersion changed (or that registered for the first time)."""
        broker_data = self.broker_addr_table.get(broker_name)
        register_first = broker_data is None or broker_data.broker_addrs.get(broker_id) is None
        topic_configs = None
        if topic_config_table is not None and broker_id == MASTER_ID:
            if register_first or self.is_broker_topic_config_changed(broker_addr, data_version):
                # Read (for a lazy body: parse) the table before changing anything, so a body that
                # fails to decode leaves the tables untouched, as RocketMQ decodes before registering.
                topic_configs = list(topic_config_table.values())

        names = self.cluster_addr_table.setdefault(cluster_name, {})
        if broker_name not in names:
            names[broker_name] = None
            self.generation += 1

        if broker_data is None:
            broker_data = self.broker_addr_table[broker_name] = BrokerData(cluster_name, broker_name)
        addrs = broker_data.broker_addrs
        # One ip:port appears under one id only: a slave switched to master drops its old id.
        for other_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
            del addrs[other_id]
            self.generation += 1
        if addrs.get(broker_id) != broker_addr:
            addrs[broker_id] = broker_addr
            self.generation += 1

        topics_applied = False
        if topic_configs is not None:
            self._create_and_update_queue_datas(broker_name, topic_configs)
            self.generation += 1
            topics_applied = True

        previous = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(now, data_version, channel, ha_server_addr)
        if previous is None:
            log.info("new broker registered, %s HAServer: %s", broker_addr, ha_server_addr)

        if filter_server_list is not None:
            if filter_server_list:
                if self.filter_server_table.get(broker_addr) != filter_server_list:
                    self.filter_server_table[broker_addr] = list(filter_server_list)
                    self.generation += 1
            elif self.filter_server_table.pop(broker_addr, None) is not None:
                self.generation += 1

        ha_addr = master_addr = None
        if broker_id != MASTER_ID:
            master_live = self.broker_live_table.get(addrs.get(MASTER_ID, ""))
            if master_live is not None:
                ha_addr, master_addr = master_live.ha_server_addr, addrs[MASTER_ID]
        return RegisterBrokerResult(ha_addr, master_addr, previous is None, topics_applied)

    def _create_and_update_queue_datas(self, broker_name: str, topic_configs: list[TopicConfig]) -> None:
        """createAndUpdateQueueData for every topic of a registration.

        The hot loop of a master with 10,000+ topics (see benchmarks/bench_register.py), hence the
        locals: the pooled QueueData is looked up once per distinct (read, write, perm, sysFlag)
        instead of being built and hashed per topic, and the logger's level is checked once.
        """
        pool = self._queue_data_pool
        topic_queue_table = self.topic_queue_table
        log_new = log.isEnabledFor(logging.INFO)
        by_fields: dict[tuple, QueueData] = {}
        for topic_config in topic_configs:
            # TopicConfig is (topic_name, read_queue_nums, write_queue_nums, perm, topic_filter_type,
            # topic_sys_flag, order): QueueData takes fields 1-3 and 5.
            fields = topic_config[1:4] + topic_config[5:6]
            queue_data = by_fields.get(fields)
            if queue_data is None:
                queue_data = QueueData(broker_name, *fields)
                queue_data = by_fields[fields] = pool.setdefault(queue_data, queue_data)
            topic = topic_config.topic_name
            queue_map = topic_queue_table.get(topic)
            if queue_map is None:
                topic_queue_table[topic] = {broker_name: queue_data}
                if log_new:
                    log.info("new topic registered, %s %s", topic, queue_data)
            else:
                queue_map[broker_name] = queue_data

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        live = self.broker_live_table.get(broker_addr)
        return live is None or live.data_version != data_version

    def query_broker_topic_config(self, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(broker_addr)
        return live.data_version if live is not None else None

    def update_broker_info_update_timestamp(self, broker_addr: str, now: float) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_timestamp = now

    # --- removal --------------------------------------------------------------------------------

    def unregister_broker(
        self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> RemovedBroker:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        removed = RemovedBroker(broker_addr, "unregistered", broker_name, broker_id, cluster_name)
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None:
            # 4.9.8 removes by id, whatever address that id holds.
            broker_data.broker_addrs.pop(broker_id, None)
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_name]
                removed.broker_name_removed = True
        if removed.broker_name_removed:
            self._remove_from_cluster(cluster_name, broker_name)
            removed.removed_topics = self._remove_topic_by_broker_name(broker_name)
        self.generation += 1
        log.info("unregisterBroker %s %s id=%s", broker_name, broker_addr, broker_id)
        return removed

    def scan_not_active_broker(self, now: float) -> list[tuple[RemovedBroker, object]]:
        """Remove brokers silent for longer than the expiry; return them with the channels the
        caller must close."""
        removed = []
        for addr in expired_brokers(self.broker_live_table, self.broker_channel_expired_time, now):
            live = self.broker_live_table.pop(addr)
            log.warning("The broker channel expired, %s %.0fms", addr,
                        self.broker_channel_expired_time * 1000)
            removed.append((self._remove_broker_addr(addr, "expired"), live.channel))
        return removed

    def on_channel_destroy(self, channel: object, remote_addr: str) -> RemovedBroker | None:
        """A connection closed, failed or went idle: remove the broker that registered on it."""
        broker_addr = next(
            (addr for addr, live in self.broker_live_table.items() if live.channel is channel),
            remote_addr,  # RocketMQ's fallback: the peer address, which rarely matches anything
        )
        if broker_addr not in self.broker_live_table and not self._owner_of(broker_addr):
            return None
        self.broker_live_table.pop(broker_addr, None)
        log.info("the broker's channel destroyed, %s, clean it's data structure at once", broker_addr)
        return self._remove_broker_addr(broker_addr, "channel_closed")

    def _owner_of(self, broker_addr: str) -> tuple[BrokerData, int] | None:
        for broker_data in self.broker_addr_table.values():
            for broker_id, addr in broker_data.broker_addrs.items():
                if addr == broker_addr:
                    return broker_data, broker_id
        return None

    def _remove_broker_addr(self, broker_addr: str, reason: str) -> RemovedBroker:
        self.filter_server_table.pop(broker_addr, None)
        removed = RemovedBroker(broker_addr, reason)
        owner = self._owner_of(broker_addr)
        if owner is not None:
            broker_data, broker_id = owner
            del broker_data.broker_addrs[broker_id]
            removed.broker_name = broker_data.broker_name
            removed.broker_id = broker_id
            removed.cluster_name = broker_data.cluster
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_data.broker_name]
                removed.broker_name_removed = True
                for cluster_name, names in list(self.cluster_addr_table.items()):
                    if broker_data.broker_name in names:
                        self._remove_from_cluster(cluster_name, broker_data.broker_name)
                        break
                removed.removed_topics = self._remove_topic_by_broker_name(broker_data.broker_name)
        self.generation += 1
        return removed

    def _remove_from_cluster(self, cluster_name: str, broker_name: str) -> None:
        names = self.cluster_addr_table.get(cluster_name)
        if names is not None:
            names.pop(broker_name, None)
            if not names:
                del self.cluster_addr_table[cluster_name]

    def _remove_topic_by_broker_name(self, broker_name: str) -> list[str]:
        emptied = []
        for topic, queue_map in self.topic_queue_table.items():
            if queue_map.pop(broker_name, None) is not None and not queue_map:
                emptied.append(topic)
        for topic in emptied:
            del self.topic_queue_table[topic]
        return emptied

    # --- reads ------------------------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        queue_map = self.topic_queue_table.get(topic)
        if queue_map is None:
            return None
        queue_datas = sorted(queue_map.values())
        broker_datas = [
            self.broker_addr_table[qd.broker_name].copy()
            for qd in queue_datas if qd.broker_name in self.broker_addr_table
        ]
        if not broker_datas:
            return None
        filter_servers: dict[str, list[str]] = {}
        if self.filter_server_table:
            for broker_data in broker_datas:
                for addr in broker_data.broker_addrs.values():
                    servers = self.filter_server_table.get(addr)
                    if servers is not None:
                        filter_servers[addr] = list(servers)
        return TopicRouteData(queue_datas, broker_datas, filter_servers)

    def get_all_topic_list(self) -> list[str]:
        return list(self.topic_queue_table)

    def get_topics_by_cluster(self, cluster_name: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster_name, {})
        return [t for t, queue_map in self.topic_queue_table.items() if any(n in queue_map for n in names)]

    def get_system_topic_list(self) -> tuple[list[str], str | None]:
        """Cluster and broker names (RocketMQ treats them as system topics) and one broker address."""
        topics: list[str] = []
        for cluster_name, names in self.cluster_addr_table.items():
            topics.append(cluster_name)
            topics.extend(names)
        broker_addr = None
        for broker_data in self.broker_addr_table.values():
            if broker_data.broker_addrs:
                broker_addr = next(iter(broker_data.broker_addrs.values()))
            break
        return topics, broker_addr

    def _topics_where(self, predicate) -> list[str]:
        return [
            topic for topic, queue_map in self.topic_queue_table.items()
            if queue_map and predicate(next(iter(queue_map.values())).topic_sys_flag)
        ]

    def get_unit_topics(self) -> list[str]:
        return self._topics_where(lambda f: f & FLAG_UNIT)

    def get_has_unit_sub_topic_list(self) -> list[str]:
        return self._topics_where(lambda f: f & FLAG_UNIT_SUB)

    def get_has_unit_sub_un_unit_topic_list(self) -> list[str]:
        return self._topics_where(lambda f: f & FLAG_UNIT_SUB and not f & FLAG_UNIT)

    # --- operations -------------------------------------------------------------------------------

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        return self._operate_write_perm(broker_name, lambda perm: perm & ~PERM_WRITE)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        return self._operate_write_perm(broker_name, lambda perm: PERM_READ | PERM_WRITE)

    def _operate_write_perm(self, broker_name: str, new_perm) -> int:
        count = 0
        for queue_map in self.topic_queue_table.values():
            queue_data = queue_map.get(broker_name)
            if queue_data is not None:
                queue_map[broker_name] = queue_data._replace(perm=new_perm(queue_data.perm))
                count += 1
        if count:
            self.generation += 1
        return count

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        if cluster_name:
            queue_map = self.topic_queue_table.get(topic)
            if queue_map is not None:
                for broker_name in self.cluster_addr_table.get(cluster_name, {}):
                    queue_map.pop(broker_name, None)
                if not queue_map:
                    del self.topic_queue_table[topic]
        else:
            self.topic_queue_table.pop(topic, None)
        self.generation += 1
