"""RouteInfoManager: the NameServer's five tables and every rule that changes them (RocketMQ 4.9.8).

Pure: no I/O and no clock. `now` (seconds, any monotonic origin) is passed to each call that needs it;
a channel is any object identifying the connection a registration arrived on.

Consistency: every method runs to completion without yielding, and the trio server never awaits
inside one, so a route read can never observe half of a registration — the role RocketMQ's
read-write lock plays.

Cost: a removal touches only the removed broker's own rows. Indexes (an address's broker names and
channel, a broker name's clusters and topics, each key's insertion position) stand in for 4.9.8's
walks over every table, so expiring thousands of silent brokers is linear, not quadratic. A scan
can take them a batch at a time (its `limit`): the server answers other connections in between.

Order: the tables are dicts (insertion order; dicts as ordered sets). Where 4.9.8's HashMap order
reaches the wire or decides an outcome (topic lists, cluster info, route lists, which cluster loses a
broker name), the `java_*` methods derive it from the insertion order and each map's capacity
(nameserver/java_order.py). String.hashCode is fixed, so a simulated run stays reproducible.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple

from .java_order import (DEFAULT_CAPACITY, concurrent_hashmap_order, grown_capacity, hashmap_order,
                         hashset_order, long_hash, presized_capacity, string_hash_once)
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
        # The Java HashMaps' table lengths, for their iteration order (java_order.py); a table never
        # shrinks. Top level: 4.9.8's constructor sizes (topicQueueTable 1024, brokerAddrTable 128,
        # clusterAddrTable 32, brokerLiveTable 256). Inner maps start at 16 buckets; only those that
        # grew past it are recorded, under (kind, key): ("queues", topic), ("cluster", name),
        # ("addrs", brokerName); an inner map's entry goes when Java drops the map.
        self._capacity = {"topics": 1024, "brokers": 128, "clusters": 32, "live": 256}
        self._inner_capacity: dict[tuple[str, str], int] = {}
        # Indexes, so that a removal costs the removed broker's rows only. Each is checked against
        # the tables where it is read, so a stale entry only costs a look.
        self._names_at: dict[str, dict[str, None]] = {}  # broker address -> names whose brokerAddrs hold it
        self._clusters_of: dict[str, dict[str, None]] = {}  # broker name -> clusters listing it
        self._topics_of: dict[str, dict[str, None]] = {}  # broker name -> topics with its QueueData
        self._addrs_on: dict[object, dict[str, None]] = {}  # channel -> live addresses registered on it
        # (table, key) -> when the key went in: the insertion order a subset is put in before
        # hashmap_order, without walking the whole table.
        self._position: dict[tuple[str, str], int] = {}
        self._inserted = 0
        # The rows touched since take_changes last ran, (table, key) in the order first touched;
        # None until track_changes (only the lab's event log asks).
        self._changes: dict[tuple[str, object], None] | None = None

    # --- Java HashMap capacities ----------------------------------------------------------------

    def _grew(self, table: str, size: int) -> None:
        capacity = self._capacity[table]
        if size > capacity * 3 // 4:
            self._capacity[table] = grown_capacity(capacity, size)

    def _inner_grew(self, kind: str, key: str, size: int) -> None:
        if size > DEFAULT_CAPACITY * 3 // 4:
            inner = (kind, key)
            self._inner_capacity[inner] = grown_capacity(self._inner_capacity.get(inner, DEFAULT_CAPACITY), size)

    def _inner_cap(self, kind: str, key: str) -> int:
        return self._inner_capacity.get((kind, key), DEFAULT_CAPACITY)

    def _inner_gone(self, kind: str, key: str) -> None:
        self._inner_capacity.pop((kind, key), None)

    def _insert(self, table: str, key: str) -> None:
        self._inserted += 1
        self._position[(table, key)] = self._inserted

    def _java_first(self, table: str, keys) -> str:
        """The first of some keys of a top-level table in its Java order (the subset, put in
        insertion order, keeps its place in the whole: hashmap_order is a stable sort)."""
        keys = sorted(keys, key=lambda k: self._position.get((table, k), 0))
        return hashmap_order(keys, self._capacity[table])[0]

    # --- the rows changed (the lab's event log) ---------------------------------------------------

    def track_changes(self) -> None:
        """Note, from now on, every row a change touches, for take_changes."""
        self._changes = {}

    def take_changes(self) -> list[tuple[str, object]] | None:
        """The rows touched since the last call, as (table, key) in the order first touched, with
        4.9.8's table names; a key of topicQueueTable is (topic, brokerName), of clusterAddrTable
        (cluster, brokerName). A touched row may be unchanged. None when nothing is tracked: the
        caller must compare every row."""
        if self._changes is None:
            return None
        changes, self._changes = list(self._changes), {}
        return changes

    def _touch(self, table: str, key: object) -> None:
        if self._changes is not None:
            self._changes[(table, key)] = None

    # --- Java iteration orders --------------------------------------------------------------------

    def java_topics(self) -> list[str]:
        """topicQueueTable's keys as the Java HashMap iterates them."""
        return hashmap_order(self.topic_queue_table, self._capacity["topics"])

    def java_queue_brokers(self, topic: str) -> list[str]:
        """A topic's broker names (its HashMap<brokerName, QueueData>) in Java order."""
        return hashmap_order(self.topic_queue_table[topic], self._inner_cap("queues", topic))

    def java_broker_names(self) -> list[str]:
        return hashmap_order(self.broker_addr_table, self._capacity["brokers"])

    def java_broker_ids(self, broker_name: str) -> list[int]:
        """A BrokerData's brokerAddrs keys (HashMap<Long, String>) in Java order."""
        return hashmap_order(self.broker_addr_table[broker_name].broker_addrs,
                             self._inner_cap("addrs", broker_name), long_hash)

    def java_clusters(self) -> list[str]:
        return hashmap_order(self.cluster_addr_table, self._capacity["clusters"])

    def java_cluster_names(self, cluster_name: str) -> list[str]:
        """A cluster's broker names (its HashSet) in Java order."""
        return hashmap_order(self.cluster_addr_table.get(cluster_name, {}), self._inner_cap("cluster", cluster_name))

    def java_broker_data(self, broker_name: str) -> BrokerData:
        """A BrokerData with brokerAddrs in its own Java order (as getAllClusterInfo serialises it)."""
        bd = self.broker_addr_table[broker_name]
        return BrokerData(bd.cluster, bd.broker_name,
                          {i: bd.broker_addrs[i] for i in self.java_broker_ids(broker_name)})

    def java_cluster_info(self) -> tuple[dict[str, BrokerData], dict[str, list[str]]]:
        """brokerAddrTable and clusterAddrTable in Java order, for GET_BROKER_CLUSTER_INFO."""
        brokers = {name: self.java_broker_data(name) for name in self.java_broker_names()}
        clusters = {c: self.java_cluster_names(c) for c in self.java_clusters()}
        return brokers, clusters

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
                topic_configs = topic_config_table.items()

        names = self.cluster_addr_table.get(cluster_name)
        if names is None:
            names = self.cluster_addr_table[cluster_name] = {}
            self._insert("clusters", cluster_name)
        if broker_name not in names:
            names[broker_name] = None
            self._clusters_of.setdefault(broker_name, {})[cluster_name] = None
            self._touch("clusterAddrTable", (cluster_name, broker_name))
            self.generation += 1
            self._grew("clusters", len(self.cluster_addr_table))
            self._inner_grew("cluster", cluster_name, len(names))

        if broker_data is None:
            broker_data = self.broker_addr_table[broker_name] = BrokerData(cluster_name, broker_name)
            self._insert("brokers", broker_name)
            self._touch("brokerAddrTable", broker_name)
            self._grew("brokers", len(self.broker_addr_table))
        addrs = broker_data.broker_addrs
        # One ip:port appears under one id only: a slave switched to master drops its old id.
        for other_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
            del addrs[other_id]
            self._touch("brokerAddrTable", broker_name)
            self.generation += 1
        old_addr = addrs.get(broker_id)
        if old_addr != broker_addr:
            if old_addr is not None:
                self._drop_name_at(old_addr, broker_name)
            addrs[broker_id] = broker_addr
            self._names_at.setdefault(broker_addr, {})[broker_name] = None
            self._touch("brokerAddrTable", broker_name)
            self.generation += 1
            self._inner_grew("addrs", broker_name, len(addrs))

        topics_applied = False
        if topic_configs is not None:
            if self._create_and_update_queue_datas(broker_name, topic_configs):
                self.generation += 1
            topics_applied = True

        previous = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(now, data_version, channel, ha_server_addr)
        if previous is None:
            self._insert("live", broker_addr)
            self._grew("live", len(self.broker_live_table))
            log.info("new broker registered, %s HAServer: %s", broker_addr, ha_server_addr)
        if previous is None or previous.channel is not channel:
            if previous is not None:
                self._drop_addr_on(previous.channel, broker_addr)
            self._addrs_on.setdefault(channel, {})[broker_addr] = None
        if previous is None or previous.data_version != data_version or previous.ha_server_addr != ha_server_addr:
            self._touch("brokerLiveTable", broker_addr)

        if filter_server_list is not None:
            if filter_server_list:
                if self.filter_server_table.get(broker_addr) != filter_server_list:
                    self.filter_server_table[broker_addr] = list(filter_server_list)
                    self._touch("filterServerTable", broker_addr)
                    self.generation += 1
            elif self.filter_server_table.pop(broker_addr, None) is not None:
                self._touch("filterServerTable", broker_addr)
                self.generation += 1

        ha_addr = master_addr = None
        if broker_id != MASTER_ID:
            master_live = self.broker_live_table.get(addrs.get(MASTER_ID, ""))
            if master_live is not None:
                ha_addr, master_addr = master_live.ha_server_addr, addrs[MASTER_ID]
        return RegisterBrokerResult(ha_addr, master_addr, previous is None, topics_applied)

    def _create_and_update_queue_datas(self, broker_name: str, topic_configs) -> bool:
        """createAndUpdateQueueData for every topic of a registration: a map's items (a view, so
        iterated twice at most), each config with TopicConfig's attributes (a TopicConfig, or the
        body decoder's row).

        The hot loop of a master with 10,000+ topics (see benchmarks/bench_register.py): a topic
        whose queue data the table already holds is skipped after four comparisons, so a changed
        registration costs what changed. New topics go in afterwards, in the order 4.9.8's
        ConcurrentHashMap of the body iterates (java_order.concurrent_hashmap_order): that order
        is topicQueueTable's insertion order, which decides the topic lists' order within a bucket.
        True when a row changed.
        """
        topic_queue_table = self.topic_queue_table
        get_queues = topic_queue_table.get
        fresh: dict[str, object] = {}
        changed = []
        for name, tc in topic_configs:
            queue_map = get_queues(tc.topic_name or name)
            if queue_map is None:
                fresh[name] = tc
                continue
            held = queue_map.get(broker_name)
            if (held is None or held.read_queue_nums != tc.read_queue_nums
                    or held.write_queue_nums != tc.write_queue_nums or held.perm != tc.perm
                    or held.topic_sys_flag != tc.topic_sys_flag):
                changed.append((name, tc))
        if len(fresh) > 1:
            order = concurrent_hashmap_order((name for name, _ in topic_configs), hash=string_hash_once)
            changed.extend((name, fresh[name]) for name in order if name in fresh)
        else:
            changed.extend(fresh.items())
        if not changed:
            return False

        pool = self._queue_data_pool
        log_new = log.isEnabledFor(logging.INFO)
        by_fields: dict[tuple, QueueData] = {}
        own_topics = self._topics_of.setdefault(broker_name, {})
        touched = [] if self._changes is not None else None
        for name, tc in changed:
            fields = (tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag)
            queue_data = by_fields.get(fields)
            if queue_data is None:
                queue_data = QueueData(broker_name, *fields)
                queue_data = by_fields[fields] = pool.setdefault(queue_data, queue_data)
            # The key object when the name is the same: the table, and the hash memo its order
            # was computed with, then share one string.
            topic = name if tc.topic_name in ("", name) else tc.topic_name
            queue_map = topic_queue_table.get(topic)
            if queue_map is None:
                topic_queue_table[topic] = {broker_name: queue_data}
                self._insert("topics", topic)
                own_topics[topic] = None
                if touched is not None:
                    touched.append(topic)
                if log_new:
                    log.info("new topic registered, %s %s", topic, queue_data)
            elif queue_map.get(broker_name) is not queue_data:  # (pooled: the same fields, the same object)
                queue_map[broker_name] = queue_data
                own_topics[topic] = None
                if touched is not None:
                    touched.append(topic)
                if len(queue_map) > 12:  # past a default HashMap's threshold: note its growth
                    self._inner_grew("queues", topic, len(queue_map))
        for topic in touched or ():
            self._touch("topicQueueTable", (topic, broker_name))
        self._grew("topics", len(topic_queue_table))
        return True

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
        self._drop_live(broker_addr)
        self._drop_filter_servers(broker_addr)
        removed = RemovedBroker(broker_addr, "unregistered", broker_name, broker_id, cluster_name)
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None:
            # 4.9.8 removes by id, whatever address that id holds.
            gone_addr = broker_data.broker_addrs.pop(broker_id, None)
            if gone_addr is not None:
                self._drop_name_at(gone_addr, broker_name)
                self._touch("brokerAddrTable", broker_name)
            if not broker_data.broker_addrs:
                self._drop_broker_name(broker_name)
                removed.broker_name_removed = True
        if removed.broker_name_removed:
            self._remove_from_cluster(cluster_name, broker_name)
            removed.removed_topics = self._remove_topic_by_broker_name(broker_name)
        self.generation += 1
        log.info("unregisterBroker %s %s id=%s", broker_name, broker_addr, broker_id)
        return removed

    def scan_not_active_broker(self, now: float, limit: int | None = None) -> list[tuple[RemovedBroker, object]]:
        """Remove brokers silent for longer than the expiry (at most `limit` of them, the first in
        the table); return them with the channels the caller must close."""
        removed = []
        for addr in expired_brokers(self.broker_live_table, self.broker_channel_expired_time, now)[:limit]:
            live = self._drop_live(addr)
            log.warning("The broker channel expired, %s %.0fms", addr,
                        self.broker_channel_expired_time * 1000)
            removed.append((self._remove_broker_addr(addr, "expired"), live.channel))
        return removed

    def on_channel_destroy(self, channel: object, remote_addr: str) -> RemovedBroker | None:
        """A connection closed, failed or went idle: remove the broker that registered on it."""
        # The first live entry on this channel in Java's order, found from the channel's own entries.
        matches = [addr for addr in self._addrs_on.get(channel, ())
                   if (live := self.broker_live_table.get(addr)) is not None and live.channel is channel]
        # else RocketMQ's fallback: the peer address, which rarely matches anything
        broker_addr = self._java_first("live", matches) if matches else remote_addr
        if broker_addr not in self.broker_live_table and not self._owner_of(broker_addr):
            return None
        self._drop_live(broker_addr)
        log.info("the broker's channel destroyed, %s, clean it's data structure at once", broker_addr)
        return self._remove_broker_addr(broker_addr, "channel_closed")

    def _owner_of(self, broker_addr: str) -> tuple[BrokerData, int] | None:
        """The first BrokerData holding the address, and its id there, in Java's order: 4.9.8's
        onChannelDestroy walks brokerAddrTable, then each brokerAddrs, and stops at the first."""
        holders = [name for name in self._names_at.get(broker_addr, ())
                   if name in self.broker_addr_table
                   and broker_addr in self.broker_addr_table[name].broker_addrs.values()]
        if not holders:
            return None
        # A name holds an address under one id only (register_broker), so the first name decides.
        broker_data = self.broker_addr_table[self._java_first("brokers", holders)]
        return broker_data, next(i for i, a in broker_data.broker_addrs.items() if a == broker_addr)

    def _remove_broker_addr(self, broker_addr: str, reason: str) -> RemovedBroker:
        self._drop_filter_servers(broker_addr)
        removed = RemovedBroker(broker_addr, reason)
        owner = self._owner_of(broker_addr)
        if owner is not None:
            broker_data, broker_id = owner
            name = broker_data.broker_name
            del broker_data.broker_addrs[broker_id]
            self._drop_name_at(broker_addr, name)
            self._touch("brokerAddrTable", name)
            removed.broker_name = name
            removed.broker_id = broker_id
            removed.cluster_name = broker_data.cluster
            if not broker_data.broker_addrs:
                self._drop_broker_name(name)
                removed.broker_name_removed = True
                # The header names no cluster here: 4.9.8 removes the name from the first cluster
                # holding it in clusterAddrTable's HashMap order (a name in two clusters stays in
                # the others).
                cluster_name = self._cluster_holding(name)
                if cluster_name is not None:
                    self._remove_from_cluster(cluster_name, name)
                removed.removed_topics = self._remove_topic_by_broker_name(name)
        self.generation += 1
        return removed

    def _cluster_holding(self, broker_name: str) -> str | None:
        """The first cluster listing the name, in clusterAddrTable's Java order."""
        clusters = [c for c in self._clusters_of.get(broker_name, ())
                    if broker_name in self.cluster_addr_table.get(c, ())]
        return self._java_first("clusters", clusters) if clusters else None

    def _drop_live(self, broker_addr: str) -> BrokerLiveInfo | None:
        live = self.broker_live_table.pop(broker_addr, None)
        if live is not None:
            self._position.pop(("live", broker_addr), None)
            self._drop_addr_on(live.channel, broker_addr)
            self._touch("brokerLiveTable", broker_addr)
        return live

    def _drop_addr_on(self, channel: object, broker_addr: str) -> None:
        addrs = self._addrs_on.get(channel)
        if addrs is not None:
            addrs.pop(broker_addr, None)
            if not addrs:
                del self._addrs_on[channel]

    def _drop_filter_servers(self, broker_addr: str) -> None:
        if self.filter_server_table.pop(broker_addr, None) is not None:
            self._touch("filterServerTable", broker_addr)

    def _drop_name_at(self, broker_addr: str, broker_name: str) -> None:
        names = self._names_at.get(broker_addr)
        if names is not None:
            names.pop(broker_name, None)
            if not names:
                del self._names_at[broker_addr]

    def _drop_broker_name(self, broker_name: str) -> None:
        """brokerAddrTable loses a name whose last address went."""
        del self.broker_addr_table[broker_name]
        self._position.pop(("brokers", broker_name), None)
        self._inner_gone("addrs", broker_name)
        self._touch("brokerAddrTable", broker_name)

    def _remove_from_cluster(self, cluster_name: str, broker_name: str) -> None:
        names = self.cluster_addr_table.get(cluster_name)
        if names is not None and broker_name in names:
            del names[broker_name]
            self._touch("clusterAddrTable", (cluster_name, broker_name))
            clusters = self._clusters_of.get(broker_name)
            if clusters is not None:
                clusters.pop(cluster_name, None)
                if not clusters:
                    del self._clusters_of[broker_name]
            if not names:
                del self.cluster_addr_table[cluster_name]
                self._position.pop(("clusters", cluster_name), None)
                self._inner_gone("cluster", cluster_name)

    def _remove_topic_by_broker_name(self, broker_name: str) -> list[str]:
        """The broker's queues go from its own topics; returns the topics left empty, in the
        table's order."""
        emptied = []
        for topic in self._topics_of.pop(broker_name, ()):
            queue_map = self.topic_queue_table.get(topic)
            if queue_map is not None and queue_map.pop(broker_name, None) is not None:
                self._touch("topicQueueTable", (topic, broker_name))
                if not queue_map:
                    emptied.append(topic)
        emptied.sort(key=lambda t: self._position.get(("topics", t), 0))
        for topic in emptied:
            self._drop_topic(topic)
        return emptied

    def _drop_topic(self, topic: str) -> None:
        del self.topic_queue_table[topic]
        self._position.pop(("topics", topic), None)
        self._inner_gone("queues", topic)

    # --- reads ------------------------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """4.9.8's pickupTopicRouteData, lists in its order: queueDatas as the topic's HashMap
        iterates, brokerDatas as a fresh HashSet of those broker names iterates, each brokerAddrs
        as its HashMap.clone() iterates, filterServerTable as a fresh HashMap."""
        queue_map = self.topic_queue_table.get(topic)
        if queue_map is None:
            return None
        broker_names = self.java_queue_brokers(topic)
        queue_datas = [queue_map[name] for name in broker_names]
        broker_datas = []
        for name in hashset_order(broker_names):
            if name in self.broker_addr_table:
                ids = self.java_broker_ids(name)
                addrs = self.broker_addr_table[name].broker_addrs
                clone_order = hashmap_order(ids, presized_capacity(len(ids)), long_hash)
                broker_datas.append(BrokerData(self.broker_addr_table[name].cluster, name,
                                               {i: addrs[i] for i in clone_order}))
        if not broker_datas:
            return None
        filter_servers: list[tuple[str, list[str]]] = []
        if self.filter_server_table:
            for broker_data in broker_datas:
                for addr in broker_data.broker_addrs.values():
                    servers = self.filter_server_table.get(addr)
                    if servers is not None:
                        filter_servers.append((addr, list(servers)))
        filter_map = dict(filter_servers)
        filter_map = {addr: filter_map[addr] for addr in hashmap_order(filter_map)}
        return TopicRouteData(queue_datas, broker_datas, filter_map)

    # Every topic list goes out as a TopicList, whose Set<String> is a fresh HashSet: the order is
    # hashset_order of the order 4.9.8 adds the topics in.

    def get_all_topic_list(self) -> list[str]:
        return hashset_order(self.java_topics())

    def get_topics_by_cluster(self, cluster_name: str) -> list[str]:
        """For each broker name of the cluster (HashSet order), every topic (HashMap order) with a
        queue on it. An unknown cluster: 4.9.8's NPE is caught and logged, the list is empty."""
        topics = self.java_topics()
        added = []
        for name in self.java_cluster_names(cluster_name):
            added.extend(t for t in topics if name in self.topic_queue_table[t])
        return hashset_order(added)

    def get_system_topic_list(self) -> tuple[list[str], str | None]:
        """Cluster and broker names (RocketMQ treats them as system topics) and the first address
        of the first BrokerData that has one (both in Java order)."""
        added: list[str] = []
        for cluster_name in self.java_clusters():
            added.append(cluster_name)
            added.extend(self.java_cluster_names(cluster_name))
        broker_addr = None
        for name in self.java_broker_names():
            ids = self.java_broker_ids(name)
            if ids:
                broker_addr = self.broker_addr_table[name].broker_addrs[ids[0]]
                break
        return hashset_order(added), broker_addr

    def _topics_where(self, predicate) -> list[str]:
        """Topics whose first QueueData (in the topic map's Java order) passes the predicate."""
        table = self.topic_queue_table
        return hashset_order(
            topic for topic in self.java_topics()
            if table[topic] and predicate(table[topic][self.java_queue_brokers(topic)[0]].topic_sys_flag)
        )

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
        for topic, queue_map in self.topic_queue_table.items():
            queue_data = queue_map.get(broker_name)
            if queue_data is not None:
                queue_map[broker_name] = queue_data._replace(perm=new_perm(queue_data.perm))
                count += 1
                self._touch("topicQueueTable", (topic, broker_name))
        if count:
            self.generation += 1
        return count

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        queue_map = self.topic_queue_table.get(topic)
        if queue_map is not None:
            if cluster_name:  # the cluster's brokers, looked up from the topic's (the fewer)
                names = self.cluster_addr_table.get(cluster_name, {})
                gone = [name for name in queue_map if name in names]
            else:
                gone = list(queue_map)
            for broker_name in gone:
                del queue_map[broker_name]
                self._topics_of.get(broker_name, {}).pop(topic, None)
                self._touch("topicQueueTable", (topic, broker_name))
            if not queue_map:
                self._drop_topic(topic)
        else:
            self._inner_gone("queues", topic)
        self.generation += 1
