"""Exercise 10: the learner's RouteInfoManager in every NameServer of the lab.

The learner writes the state changes (register_broker, unregister_broker, scan_not_active_broker,
on_channel_destroy) over the five tables; `adapt` puts the class where the NameServer's request
processor builds its manager (`nameserver.processor:RouteInfoManager`), behind the lab's own reads
(route answers, cluster info, topic lists, write permissions), which then read the learner's
tables. Checked three ways: unit tests (one rule each), a differential run against the lab's
manager on random request sequences over several seeds, and scenarios in the whole cluster.
"""

from __future__ import annotations

import logging
import random

from nameserver import routes as lab_routes

from .interfaces import DataVersion, QueueData, RegisterBrokerResult, RemovedBroker, TopicConfig
from .override import ContractError
from .warmups import needs

TABLES = ("topic_queue_table", "broker_addr_table", "cluster_addr_table", "broker_live_table",
          "filter_server_table")
MUTATORS = ("register_broker", "unregister_broker", "scan_not_active_broker", "on_channel_destroy")


def _expect(value, kind, method: str):
    if not isinstance(value, kind):
        raise ContractError(f"{method}() returned {value!r}: the NameServer needs a {kind.__name__}")
    return value


def _removals(value, method: str) -> list:
    if not isinstance(value, (list, tuple)):
        raise ContractError(f"{method}() returned {value!r}: the NameServer needs a list of (RemovedBroker, channel)")
    for pair in value:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], RemovedBroker)):
            raise ContractError(f"{method}() returned {pair!r} in its list: (RemovedBroker, channel) pairs")
    return list(value)


def adapt(learner_cls: type, errors=None) -> type:
    """A class the request processor can build: the lab's reads over the learner's tables."""

    class LearnersRouteInfoManager(lab_routes.RouteInfoManager):
        def __init__(self, broker_channel_expired_time: float = lab_routes.BROKER_CHANNEL_EXPIRED_TIME):
            self.learner = learner_cls(broker_channel_expired_time)
            super().__init__(broker_channel_expired_time)
            self._share()

        # UPDATE_NAMESRV_CONFIG sets the expiry on the processor's manager: the learner's must follow.
        @property
        def broker_channel_expired_time(self) -> float:
            return self.learner.broker_channel_expired_time

        @broker_channel_expired_time.setter
        def broker_channel_expired_time(self, value: float) -> None:
            self.learner.broker_channel_expired_time = value

        def _share(self) -> None:
            """The lab's reads see the learner's tables (taken again after each change: a learner
            may rebind a table). A set of broker names is read in sorted order, so a run does not
            depend on Python's string hashing."""
            # The learner's object lives in its own process: the five tables in one round trip.
            tables = self.learner.remote_attrs(TABLES) if hasattr(type(self.learner), "remote_attrs") else \
                {name: getattr(self.learner, name, None) for name in TABLES}
            for name in TABLES:
                table = tables[name]
                if not isinstance(table, dict):
                    raise ContractError(f"self.{name} is {table!r}: a dict")
                setattr(self, name, table)
            self.cluster_addr_table = {c: names if isinstance(names, dict) else dict.fromkeys(sorted(names))
                                       for c, names in self.cluster_addr_table.items()}

        def _changed(self, result):
            self.generation += 1  # every cached route answer is stale
            self._share()
            return result

        def register_broker(self, *args, **kwargs):
            return self._changed(_expect(self.learner.register_broker(*args, **kwargs), RegisterBrokerResult,
                                         "register_broker"))

        def unregister_broker(self, *args, **kwargs):
            return self._changed(_expect(self.learner.unregister_broker(*args, **kwargs), RemovedBroker,
                                         "unregister_broker"))

        def take_changes(self):
            return None  # the learner's changes are not tracked: the event log compares every row

        def scan_not_active_broker(self, now, limit=None):  # the learner's scan takes all at once
            return self._changed(_removals(self.learner.scan_not_active_broker(now), "scan_not_active_broker"))

        def on_channel_destroy(self, channel, remote_addr):
            removed = self.learner.on_channel_destroy(channel, remote_addr)
            return self._changed(removed if removed is None else _expect(removed, RemovedBroker, "on_channel_destroy"))

    if errors is not None:  # a contract broken is the learner's mistake too: reported as theirs
        for name in MUTATORS:
            setattr(LearnersRouteInfoManager, name, errors.wrap_contract(getattr(LearnersRouteInfoManager, name)))
    return LearnersRouteInfoManager


# --- comparing managers ------------------------------------------------------------------------------

def tables_of(manager) -> dict:
    """The five tables as plain, order-free data (4.9.8's are HashMaps: order is not a rule here)."""
    return {
        "topic_queue_table": {t: {n: tuple(q) for n, q in queues.items()} for t, queues in manager.topic_queue_table.items()},
        "broker_addr_table": {n: (bd.cluster, dict(bd.broker_addrs)) for n, bd in manager.broker_addr_table.items()},
        "cluster_addr_table": {c: sorted(names) for c, names in manager.cluster_addr_table.items()},
        "broker_live_table": {a: (live.last_update_timestamp, tuple(live.data_version), live.channel, live.ha_server_addr)
                              for a, live in manager.broker_live_table.items()},
        "filter_server_table": {a: list(servers) for a, servers in manager.filter_server_table.items()},
    }


def removal_of(removed) -> tuple | None:
    if removed is None:
        return None
    return (removed.broker_addr, removed.reason, removed.broker_name, removed.broker_id, removed.cluster_name,
            removed.broker_name_removed, sorted(removed.removed_topics))


def result_of(method: str, value):
    if method == "register_broker":
        return tuple(value)
    if method == "scan_not_active_broker":
        return sorted((removal_of(r), str(ch)) for r, ch in value)
    return removal_of(value)


def table_difference(theirs: dict, ours: dict) -> str | None:
    """The first table that differs, and the keys where (one message, the first cause)."""
    for name in TABLES:
        a, b = ours[name], theirs[name]
        if a != b:
            keys = sorted({*a, *b}, key=str)
            diffs = [f"{k!r}: lab's {a.get(k, '(absent)')!r}, yours {b.get(k, '(absent)')!r}"
                     for k in keys if a.get(k) != b.get(k)]
            return f"{name} differs — " + "; ".join(diffs[:3]) + (f"; and {len(diffs) - 3} more" if len(diffs) > 3 else "")
    return None


# --- random request sequences ------------------------------------------------------------------------

CLUSTER = "DefaultCluster"
NAMES = ("broker-a", "broker-b", "broker-c")
TOPICS = tuple(f"Topic{i}" for i in range(6))


def _addr(name: str, broker_id: int) -> str:
    return f"10.0.{NAMES.index(name)}.{broker_id}:10911"


def random_requests(seed: int, count: int = 250):
    """(method, args) calls a NameServer's manager receives: registrations with changing topics and
    dataVersions (masters, slaves, a slave that becomes master), unregistrations, expiry scans after
    a while, closed channels. Time only goes forward."""
    rng = random.Random(seed)
    now = 0.0
    versions = {name: 0 for name in NAMES}
    topics = {name: {} for name in NAMES}
    channel_of: dict[str, str] = {}
    connections = 0
    for _ in range(count):
        roll = rng.random()
        now += rng.choice((0.0, 1.0, 5.0, 10.0, 30.0))
        name = rng.choice(NAMES)
        if roll < 0.6:
            broker_id = rng.choice((0, 0, 1))
            addr = _addr(name, broker_id)
            if rng.random() < 0.08:  # the slave's address registering as master (a switch)
                addr = _addr(name, 1)
            if rng.random() < 0.3:  # the broker's topics changed: a new dataVersion
                versions[name] += 1
                topics[name] = {t: TopicConfig(t, rng.choice((4, 8)), rng.choice((4, 8)), rng.choice((2, 4, 6)))
                                for t in rng.sample(TOPICS, rng.randint(1, 4))}
            if addr not in channel_of or rng.random() < 0.1:
                connections += 1
                channel_of[addr] = f"channel-{connections}"
            filters = rng.choice((None, None, [], [f"{addr.split(':')[0]}:9999"]))
            yield "register_broker", (CLUSTER, addr, name, broker_id, f"{addr.split(':')[0]}:10912",
                                      DataVersion(1000 + versions[name], versions[name]), dict(topics[name]),
                                      filters, channel_of[addr], now)
        elif roll < 0.7:
            broker_id = rng.choice((0, 1))
            yield "unregister_broker", (CLUSTER, _addr(name, broker_id), name, broker_id)
        elif roll < 0.88:
            now += rng.choice((0.0, 60.0, 110.0, 125.0))
            yield "scan_not_active_broker", (now,)
        else:
            addr = _addr(name, rng.choice((0, 1)))
            channel = channel_of.get(addr) if rng.random() < 0.8 else "channel-never-seen"
            yield "on_channel_destroy", (channel or "channel-never-seen", addr)


def describe_call(method: str, args: tuple) -> str:
    if method == "register_broker":
        cluster, addr, name, broker_id, _, version, topics, filters, channel, now = args
        return (f"register_broker({name} id {broker_id} at {addr}, dataVersion {tuple(version)}, topics "
                f"{sorted(topics)}, filters {filters}, {channel}, now={now:g})")
    if method == "unregister_broker":
        return f"unregister_broker({args[2]} id {args[3]} at {args[1]})"
    if method == "scan_not_active_broker":
        return f"scan_not_active_broker(now={args[0]:g})"
    return f"on_channel_destroy({args[0]}, {args[1]})"


def differential(learner_cls: type, seeds=(1, 2, 3, 4, 5)) -> None:
    """The learner's manager and the lab's receive the same requests; after each, the results and
    the five tables must agree. The first difference fails, with the requests that led to it."""
    logger = logging.getLogger("nameserver.routes")
    level = logger.level
    logger.setLevel(logging.ERROR)  # the lab's manager logs every expiry; the difference is the message
    try:
        for seed in seeds:
            _compare(learner_cls, seed)
    finally:
        logger.setLevel(level)


def _compare(learner_cls: type, seed: int) -> None:
    ours, theirs = lab_routes.RouteInfoManager(), learner_cls(lab_routes.BROKER_CHANNEL_EXPIRED_TIME)
    history: list[str] = []
    for method, args in random_requests(seed):
        history.append(describe_call(method, args))
        expected = result_of(method, getattr(ours, method)(*args))
        got = getattr(theirs, method)(*args)
        try:
            got = result_of(method, got)
        except (TypeError, AttributeError):
            raise AssertionError(f"{history[-1]} returned {got!r}, not what the lab's returns") from None
        before = "\n      ".join(history[-4:-1]) or "(nothing)"
        where = f"seed {seed}, request {len(history)}: {history[-1]}\n    after:\n      {before}"
        if got != expected:
            raise AssertionError(f"{method} returned {got!r}; the lab's returns {expected!r}\n    ({where})")
        differs = table_difference(tables_of(theirs), tables_of(ours))
        if differs:
            raise AssertionError(f"{differs}\n    ({where})")


# --- unit tests: one rule each ----------------------------------------------------------------------

def _register(m, name="broker-a", broker_id=0, *, addr=None, version=1, topics=("TopicA",), filters=None,
              channel="ch-1", now=0.0, cluster=CLUSTER):
    addr = addr or _addr(name, broker_id)
    table = {t: TopicConfig(t, 8, 8, 6) for t in topics}
    return m.register_broker(cluster, addr, name, broker_id, addr.replace("10911", "10912"), DataVersion(version, version),
                             table, filters, channel, now)


def test_registration_fills_every_table(RouteInfoManager):
    m = RouteInfoManager(120.0)
    result = _register(m, filters=["10.0.0.0:9999"], now=3.0)
    assert isinstance(result, RegisterBrokerResult), f"register_broker returns a RegisterBrokerResult (got {result!r})"
    addr = _addr("broker-a", 0)
    assert set(m.cluster_addr_table.get(CLUSTER, ())) == {"broker-a"}, "clusterAddrTable: the cluster lists broker-a"
    bd = m.broker_addr_table.get("broker-a")
    assert bd is not None and dict(bd.broker_addrs) == {0: addr} and bd.cluster == CLUSTER, \
        f"brokerAddrTable: broker-a's id 0 is at {addr} (got {bd!r})"
    assert m.topic_queue_table.get("TopicA") == {"broker-a": QueueData("broker-a", 8, 8, 6, 0)}, \
        f"topicQueueTable: TopicA has broker-a's queues (got {m.topic_queue_table.get('TopicA')!r})"
    live = m.broker_live_table.get(addr)
    assert live is not None and live.last_update_timestamp == 3.0 and live.channel == "ch-1", \
        f"brokerLiveTable: {addr} heard at now=3 on its channel (got {live!r})"
    assert m.filter_server_table.get(addr) == ["10.0.0.0:9999"], "filterServerTable: the broker's filter servers"
    assert result.first, "the first registration of an address says so (first=True)"
    assert not _register(m, now=30.0).first, "a heartbeat of a registered address is not first"


@needs(test_registration_fills_every_table)  # a rule on top of registration
def test_a_slave_learns_its_master(RouteInfoManager):
    m = RouteInfoManager(120.0)
    result = _register(m, broker_id=1, topics=("SlaveOnly",))
    assert (result.master_addr, result.ha_server_addr) == (None, None), "a slave without a live master learns nothing"
    assert "SlaveOnly" not in m.topic_queue_table, "a slave's topics are not routed: only a master's"
    _register(m, broker_id=0)
    result = _register(m, broker_id=1)
    assert result.master_addr == _addr("broker-a", 0) and result.ha_server_addr == "10.0.0.0:10912", \
        f"a slave's registration answers its live master's address and HA address (got {result!r})"


@needs(test_registration_fills_every_table)  # a rule on top of registration
def test_topics_follow_the_data_version(RouteInfoManager):
    m = RouteInfoManager(120.0)
    _register(m, version=1, topics=("TopicA",))
    _register(m, version=1, topics=("TopicA", "TopicB"))
    assert "TopicB" not in m.topic_queue_table, \
        "the same dataVersion means the same topics: the body is not applied again"
    _register(m, version=2, topics=("TopicA", "TopicB"))
    assert "TopicB" in m.topic_queue_table, "a new dataVersion applies the master's topics"


@needs(test_registration_fills_every_table)  # a rule on top of registration
def test_unregister_the_last_address_takes_the_name(RouteInfoManager):
    m = RouteInfoManager(120.0)
    _register(m, "broker-a", 0, topics=("Shared", "OnlyA"))
    _register(m, "broker-a", 1)
    _register(m, "broker-b", 0, topics=("Shared",))
    removed = m.unregister_broker(CLUSTER, _addr("broker-a", 1), "broker-a", 1)
    assert isinstance(removed, RemovedBroker) and removed.reason == "unregistered", \
        f"unregister_broker returns a RemovedBroker, reason 'unregistered' (got {removed!r})"
    assert "broker-a" in m.broker_addr_table and "OnlyA" in m.topic_queue_table, \
        "broker-a keeps its name and topics while its master is registered"
    removed = m.unregister_broker(CLUSTER, _addr("broker-a", 0), "broker-a", 0)
    assert "broker-a" not in m.broker_addr_table, "the last address of a broker name removes the name"
    assert set(m.cluster_addr_table.get(CLUSTER, ())) == {"broker-b"}, "and takes it out of its cluster"
    assert "OnlyA" not in m.topic_queue_table, "a topic left without queues goes"
    assert m.topic_queue_table.get("Shared", {}).keys() == {"broker-b"}, "a shared topic loses only broker-a's queues"
    assert removed.broker_name_removed and sorted(removed.removed_topics) == ["OnlyA"], \
        f"the RemovedBroker says the name went, with the topics it emptied (got {removed!r})"


@needs(test_registration_fills_every_table)  # a rule on top of registration
def test_scan_expires_the_silent_only(RouteInfoManager):
    m = RouteInfoManager(120.0)
    _register(m, "broker-a", 0, channel="ch-a", now=0.0)
    _register(m, "broker-b", 0, channel="ch-b", now=0.0, topics=("TopicB",))
    _register(m, "broker-c", 0, channel="ch-c", now=50.0, topics=("TopicC",))
    assert list(m.scan_not_active_broker(120.0)) == [], "a broker heard exactly 120 s ago is not expired yet"
    pairs = list(m.scan_not_active_broker(125.0))
    gone = sorted((r.broker_addr, r.reason, ch) for r, ch in pairs)
    assert gone == [(_addr("broker-a", 0), "expired", "ch-a"), (_addr("broker-b", 0), "expired", "ch-b")], \
        f"every broker silent past the expiry goes in one scan, reason 'expired', with its channel (got {gone})"
    assert set(m.broker_live_table) == {_addr("broker-c", 0)} and set(m.broker_addr_table) == {"broker-c"}, \
        "the expired brokers leave brokerLiveTable and brokerAddrTable"
    assert set(m.topic_queue_table) == {"TopicC"}, "and their topics' queues"


@needs(test_registration_fills_every_table, test_scan_expires_the_silent_only)
def test_scan_expiry_is_the_managers(RouteInfoManager):
    m = RouteInfoManager(30.0)
    _register(m, now=0.0)
    gone = [r.broker_addr for r, _ in m.scan_not_active_broker(31.0)]
    assert gone == [_addr("broker-a", 0)], f"the expiry is the constructor's broker_channel_expired_time, 30 s here (got {gone})"


@needs(test_registration_fills_every_table)  # a rule on top of registration
def test_closed_channel_removes_its_broker(RouteInfoManager):
    m = RouteInfoManager(120.0)
    _register(m, "broker-a", 0, channel="ch-a")
    _register(m, "broker-b", 0, channel="ch-b", topics=("TopicB",))
    assert m.on_channel_destroy("ch-unknown", "10.9.9.9:1234") is None, "a channel no broker registered on removes nothing"
    removed = m.on_channel_destroy("ch-b", "10.0.1.0:50000")
    assert isinstance(removed, RemovedBroker) and removed.broker_addr == _addr("broker-b", 0) \
        and removed.reason == "channel_closed", \
        f"the broker registered on the channel goes, reason 'channel_closed' (got {removed!r})"
    assert set(m.broker_addr_table) == {"broker-a"} and "TopicB" not in m.topic_queue_table, \
        "with its name and its topics"


@needs(test_registration_fills_every_table)  # a rule on top of registration
def test_an_address_moves_to_its_new_id(RouteInfoManager):
    m = RouteInfoManager(120.0)
    slave = _addr("broker-a", 1)
    _register(m, "broker-a", 1, addr=slave)
    _register(m, "broker-a", 0, addr=slave)  # the slave switched to master
    addrs = dict(m.broker_addr_table["broker-a"].broker_addrs)
    assert addrs == {0: slave}, f"one ip:port under one id only: the old id goes (got {addrs})"


RULES = [test_registration_fills_every_table, test_a_slave_learns_its_master, test_topics_follow_the_data_version,
         test_unregister_the_last_address_takes_the_name, test_scan_expires_the_silent_only,
         test_scan_expiry_is_the_managers, test_closed_channel_removes_its_broker,
         test_an_address_moves_to_its_new_id]


@needs(*RULES)  # what the differential finds beyond the rules: a broken rule is already said
def test_same_as_the_lab_on_random_requests(RouteInfoManager):
    differential(RouteInfoManager)


TESTS = [*RULES, test_same_as_the_lab_on_random_requests]
