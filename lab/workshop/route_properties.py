"""Exercise 10 judged by RocketMQ 4.9.8's rules, not by agreement with the lab's manager.

Hypothesis generates request sequences a real cluster sends a NameServer (masters and slaves of
several broker names in two clusters, a broker moving cluster, a slave taking over as master,
haServerAddr, filter servers, dataVersion and queue-count changes, perms and sysflags, empty topic
tables, unknown brokers, repeats, reconnects, expiry scans around the 120 s boundary) and checks,
after each request, what RouteInfoManager.registerBroker / unregisterBroker / scanNotActiveBroker /
onChannelDestroy of 4.9.8 make true of the five tables and the result. A failure is shrunk to the
shortest sequence that still fails; that sequence is the message.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from . import generated
from .interfaces import MASTER_ID, DataVersion, QueueData, RegisterBrokerResult, RemovedBroker, TopicConfig
from .override import describe

NAMES = ("broker-a", "broker-b", "broker-c")
CLUSTERS = ("DefaultCluster", "ClusterB")
TOPICS = ("TopicA", "TopicB", "TopicC", "%RETRY%group")
EXPIRY = 120.0
UNKNOWN = "10.9.9.9:10911"

_topic = st.tuples(st.sampled_from(TOPICS), st.sampled_from((1, 4, 8, 16)), st.sampled_from((1, 4, 8, 16)),
                   st.sampled_from((2, 4, 6)), st.sampled_from((0, 1)))
_dt = st.sampled_from((0.0, 1.0, 10.0, 30.0, 60.0, 119.0, 120.0, 121.0))
# Few names and ids, most often broker-a's master: requests about the same broker meet often.
_name = st.sampled_from((0, 0, 0, 1, 2))
_id = st.sampled_from((0, 0, 1, 2))
_KINDS = {
    "register": st.tuples(st.just("register"), _name, _id, st.booleans(), st.lists(_topic, max_size=3),
                          st.sampled_from((None, (), ("f",))), st.booleans(), _dt),
    "switch": st.tuples(st.just("switch"), _name, _dt),  # the slave registers as the master
    "move": st.tuples(st.just("move"), _name),  # the broker's next registrations name the other cluster
    # one of the brokers that registered (the k-th), or one no NameServer knows
    "unregister": st.tuples(st.just("unregister"), st.integers(0, 8), st.sampled_from(("known", "known", "unknown"))),
    "scan": st.tuples(st.just("scan"), _dt),
    # a registered broker's current connection; an old one of its (it reconnected), closing from its
    # address; or a connection no broker registered on
    "close": st.tuples(st.just("close"), st.integers(0, 8), st.sampled_from(("current", "current", "old", "unknown"))),
}
# as in a cluster, most requests are registrations (heartbeats)
OPS = st.sampled_from(("register",) * 5 + ("close", "close", "unregister", "scan", "switch", "move")).flatmap(
    _KINDS.__getitem__)


def _addr(name: str, broker_id: int) -> str:
    return f"10.0.{NAMES.index(name)}.{broker_id}:10911"


@dataclass
class _World:
    """What the brokers of the generated cluster know about themselves (not what a NameServer holds)."""

    now: float = 0.0
    connections: int = 0

    def __post_init__(self):
        self.cluster = {n: CLUSTERS[i % 2] for i, n in enumerate(NAMES)}
        self.version = {}  # addr -> its dataVersion counter
        self.topics = {}  # addr -> its topic table
        self.channel = {}  # addr -> its current connection
        self.role = {}  # addr -> the id it registers with now

    def concrete(self, op) -> list[tuple[str, tuple]]:
        """The calls one abstract operation makes (none for a change of the brokers' own state)."""
        kind = op[0]
        if kind == "move":
            name = NAMES[op[1]]
            self.cluster[name] = CLUSTERS[1 - CLUSTERS.index(self.cluster[name])]
            return []
        if kind == "scan":
            self.now += op[1]
            return [("scan_not_active_broker", (self.now,))]
        if kind == "switch":
            name = NAMES[op[1]]
            addr = _addr(name, 1)
            self.role[addr] = MASTER_ID
            self.now += op[2]
            return [self._register(name, addr, False, None, None, False)]
        if kind == "register":
            _, i, broker_id, bump, topics, filters, reconnect, dt = op
            name, addr = NAMES[i], _addr(NAMES[i], broker_id)
            self.role.setdefault(addr, broker_id)
            self.now += dt
            table = {t: TopicConfig(t, r, w, perm, topic_sys_flag=flag) for t, r, w, perm, flag in topics}
            return [self._register(name, addr, bump, table if bump else None, filters, reconnect)]
        if op[2] == "unknown" or not self.channel:
            return [("unregister_broker", (CLUSTERS[0], UNKNOWN, "broker-unknown", 0)) if kind == "unregister"
                    else ("on_channel_destroy", ("channel-never-seen", UNKNOWN))]
        addr = sorted(self.channel)[op[1] % len(self.channel)]
        name = NAMES[int(addr.split(".")[2])]
        if kind == "unregister":
            del self.channel[addr]
            return [("unregister_broker", (self.cluster[name], addr, name, self.role[addr]))]
        if op[2] == "old":
            return [("on_channel_destroy", ("channel-old", addr))]
        return [("on_channel_destroy", (self.channel.pop(addr), addr))]

    def _register(self, name, addr, bump, table, filters, reconnect):
        if bump or addr not in self.version:
            self.version[addr] = self.version.get(addr, 0) + 1
            self.topics[addr] = table if table is not None else self.topics.get(addr, {})
        if reconnect or addr not in self.channel:
            self.connections += 1
            self.channel[addr] = f"channel-{self.connections}"
        host = addr.split(":")[0]
        return ("register_broker", (self.cluster[name], addr, name, self.role[addr], f"{host}:10912",
                                    DataVersion(1000 * self.version[addr], self.version[addr]),
                                    dict(self.topics[addr]), None if filters is None else [f"{host}:{9999}"
                                                                                           for _ in filters],
                                    self.channel[addr], self.now))


def describe_call(method: str, args: tuple) -> str:
    if method == "register_broker":
        cluster, addr, name, broker_id, ha, version, topics, filters, channel, now = args
        queues = ", ".join(f"{t} r{c.read_queue_nums}/w{c.write_queue_nums} perm {c.perm}"
                           + (f" sysflag {c.topic_sys_flag}" if c.topic_sys_flag else "") for t, c in topics.items())
        return (f"register_broker({cluster}, {name} id {broker_id} at {addr}, ha {ha}, dataVersion "
                f"{tuple(version)}, topics {{{queues}}}, filters {filters}, {channel}, now={now:g})")
    if method == "unregister_broker":
        return f"unregister_broker({args[0]}, {args[2]} id {args[3]} at {args[1]})"
    if method == "scan_not_active_broker":
        return f"scan_not_active_broker(now={args[0]:g})"
    return f"on_channel_destroy({args[0]}, {args[1]})"


# --- the rules ---------------------------------------------------------------------------------------

TABLES = ("topic_queue_table", "broker_addr_table", "cluster_addr_table", "broker_live_table",
          "filter_server_table")


def snapshot(manager) -> dict:
    """The five tables as plain data: {topic: {name: QueueData}}, {name: (cluster, {id: addr})},
    {cluster: set(names)}, {addr: (last, version, channel, ha)}, {addr: [filters]}."""
    raw = manager.remote_attrs(TABLES) if hasattr(type(manager), "remote_attrs") else \
        {n: getattr(manager, n, None) for n in TABLES}
    for name, table in raw.items():
        _check(isinstance(table, dict), f"self.{name} is {table!r}: the manager keeps its five tables as dicts")
    return {
        "topic_queue_table": {t: {n: QueueData(*q) for n, q in m.items()} for t, m in raw["topic_queue_table"].items()},
        "broker_addr_table": {n: (bd.cluster, dict(bd.broker_addrs)) for n, bd in raw["broker_addr_table"].items()},
        "cluster_addr_table": {c: set(names) for c, names in raw["cluster_addr_table"].items()},
        "broker_live_table": {a: (live.last_update_timestamp, tuple(live.data_version), live.channel,
                                  live.ha_server_addr) for a, live in raw["broker_live_table"].items()},
        "filter_server_table": {a: list(f) for a, f in raw["filter_server_table"].items()},
    }


def _check(rule: bool, message: str) -> None:
    if not rule:
        raise AssertionError(message)


def _names_of(tables, addr):
    return [n for n, (_, addrs) in tables["broker_addr_table"].items() if addr in addrs.values()]


def check_register(before, after, args, result) -> None:
    cluster, addr, name, broker_id, ha, version, topics, filters, channel, now = args
    _check(isinstance(result, RegisterBrokerResult), f"register_broker returned {result!r}: a RegisterBrokerResult")
    _check(name in after["cluster_addr_table"].get(cluster, ()), f"clusterAddrTable[{cluster}] lists {name}")
    if name not in before["broker_addr_table"]:
        _check(after["broker_addr_table"].get(name, ("",))[0] == cluster,
               f"brokerAddrTable[{name}] is created with its cluster {cluster}")
    addrs = after["broker_addr_table"].get(name, (None, {}))[1]
    _check(addrs.get(broker_id) == addr, f"brokerAddrTable[{name}] has id {broker_id} at {addr} (got {addrs})")
    _check(list(addrs.values()).count(addr) == 1, f"{addr} is under one id of {name} only (got {addrs})")
    _check(after["broker_live_table"].get(addr) == (now, tuple(version), channel, ha),
           f"brokerLiveTable[{addr}] is (now, dataVersion, channel, haServerAddr) = "
           f"{(now, tuple(version), channel, ha)} (got {after['broker_live_table'].get(addr)})")
    filters_now = after["filter_server_table"].get(addr)
    if filters is None:
        _check(filters_now == before["filter_server_table"].get(addr), "no filter server list leaves filterServerTable alone")
    elif not filters:
        _check(filters_now is None, "an empty filter server list removes the broker's entry")
    else:
        _check(filters_now == filters, f"filterServerTable[{addr}] is {filters} (got {filters_now})")
    old_live = before["broker_live_table"].get(addr)
    first = name not in before["broker_addr_table"] or broker_id not in before["broker_addr_table"][name][1]
    applies = broker_id == MASTER_ID and (first or old_live is None or old_live[1] != tuple(version))
    if applies:
        for topic, tc in topics.items():
            want = QueueData(name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag)
            got = after["topic_queue_table"].get(topic, {}).get(name)
            _check(got == want, f"topicQueueTable[{topic}][{name}] is {want} (got {got}): a master's new "
                                f"dataVersion (or first registration) applies its topics")
    else:
        _check(after["topic_queue_table"] == before["topic_queue_table"],
               "topicQueueTable is unchanged: " + ("a slave's topics are not routed" if broker_id != MASTER_ID
                                                   else "the same dataVersion means the same topics"))
    got = {"ha_server_addr": result.ha_server_addr, "master_addr": result.master_addr, "first": result.first}
    master = addrs.get(MASTER_ID)
    live_master = after["broker_live_table"].get(master) if broker_id != MASTER_ID and master else None
    want = {"ha_server_addr": live_master[3] if live_master else None,
            "master_addr": master if live_master else None, "first": old_live is None}
    wrong = [f"{k}: want {want[k]!r}, got {got[k]!r}" for k in want if want[k] != got[k]]
    _check(not wrong, "the RegisterBrokerResult's fields: " + "; ".join(wrong))


def _check_gone(before, after, left: dict, clusters_dropped, results: list, reason: str) -> None:
    """What removing addresses does: `left` is each touched broker name's ids that must remain;
    clusters_dropped(name) checks the name's clusterAddrTable entry when the name goes."""
    for name, keep in left.items():
        if keep:
            _check(after["broker_addr_table"].get(name, (None, {}))[1] == keep,
                   f"brokerAddrTable[{name}] keeps its other addresses {keep}")
            _check(all(after["topic_queue_table"].get(t, {}).get(name) == m[name]
                       for t, m in before["topic_queue_table"].items() if name in m),
                   f"{name} keeps its topics while another of its addresses is registered")
            continue
        _check(name not in after["broker_addr_table"], f"the last address of {name} went: so does the name")
        clusters_dropped(name)
        emptied = sorted(t for t, m in before["topic_queue_table"].items() if set(m) == {name})
        _check(not any(name in m for m in after["topic_queue_table"].values()), f"no topic keeps {name}'s queues")
        _check(all(t not in after["topic_queue_table"] for t in emptied), f"a topic left without queues goes ({emptied})")
        _check(any(isinstance(r, RemovedBroker) and r.reason == reason and r.broker_name_removed
                   and sorted(r.removed_topics) == emptied for r in results),
               f"the RemovedBroker says reason {reason!r}, broker_name_removed, removed_topics {emptied} "
               f"(got {results!r})")


def _by_address(before, after, addrs: set):
    """4.9.8's removal by address (an expiry, a closed channel): the names holding it keep their other
    ids; a name that goes leaves the first cluster listing it (a broker that moved cluster stays
    listed in the other: 4.9.8 stops at the first)."""
    for addr in addrs:
        _check(addr not in after["broker_live_table"], f"{addr} leaves brokerLiveTable")
        _check(addr not in after["filter_server_table"], f"{addr} leaves filterServerTable")
    left = {n: {i: a for i, a in ids.items() if a not in addrs}
            for n, (_, ids) in before["broker_addr_table"].items() if addrs & set(ids.values())}

    def dropped(name):
        listing = [c for c, names in before["cluster_addr_table"].items() if name in names]
        still = [c for c in listing if name in after["cluster_addr_table"].get(c, ())]
        _check(not listing or len(still) < len(listing), f"clusterAddrTable drops {name} (still in {still})")
    return left, dropped


def check_unregister(before, after, args, result) -> None:
    cluster, addr, name, broker_id = args
    _check(isinstance(result, RemovedBroker) and result.reason == "unregistered" and result.broker_addr == addr,
           f"unregister_broker returns a RemovedBroker for {addr}, reason 'unregistered' (got {result!r})")
    _check(addr not in after["broker_live_table"], f"{addr} leaves brokerLiveTable")
    _check(addr not in after["filter_server_table"], f"{addr} leaves filterServerTable")
    if name not in before["broker_addr_table"]:
        _check(after["broker_addr_table"] == before["broker_addr_table"]
               and after["topic_queue_table"] == before["topic_queue_table"],
               f"unregistering {name}, which is not registered, changes no broker or topic")
        return
    # 4.9.8 removes by the request's id, and the name from the request's cluster.
    keep = {i: a for i, a in before["broker_addr_table"][name][1].items() if i != broker_id}
    _check_gone(before, after, {name: keep},
                lambda n: _check(n not in after["cluster_addr_table"].get(cluster, ()),
                                 f"clusterAddrTable[{cluster}] drops {n}"), [result], "unregistered")


def check_scan(before, after, args, result, expiry: float) -> None:
    (now,) = args
    silent = {a: live for a, live in before["broker_live_table"].items() if live[0] + expiry < now}
    _check(isinstance(result, (list, tuple)) and all(isinstance(p, tuple) and len(p) == 2 for p in result),
           f"scan_not_active_broker returns a list of (RemovedBroker, channel) (got {result!r})")
    got = sorted((getattr(r, "broker_addr", r), getattr(r, "reason", None), ch) for r, ch in result)
    want = sorted((a, "expired", live[2]) for a, live in silent.items())
    _check(got == want, f"every broker silent for more than {expiry:g} s goes, once, reason 'expired', with its "
                        f"channel: want {want}, got {got}")
    left, dropped = _by_address(before, after, set(silent))
    _check_gone(before, after, left, dropped, [r for r, _ in result], "expired")


def check_close(before, after, args, result) -> None:
    channel, remote = args
    on_it = [a for a, live in before["broker_live_table"].items() if live[2] == channel]
    addr = on_it[0] if on_it else remote  # 4.9.8: the broker on the channel, else the peer address
    if addr not in before["broker_live_table"] and not _names_of(before, addr):
        _check(result is None and after == before, f"a channel nothing registered on removes nothing (got {result!r})")
        return
    _check(isinstance(result, RemovedBroker) and result.broker_addr == addr and result.reason == "channel_closed",
           f"the broker on the channel ({addr}) goes, reason 'channel_closed' (got {result!r})")
    left, dropped = _by_address(before, after, {addr})
    _check_gone(before, after, left, dropped, [result], "channel_closed")


def check_invariants(after) -> None:
    live = set(after["broker_live_table"])
    listed = {a for _, addrs in after["broker_addr_table"].values() for a in addrs.values()}
    # (not the converse: a slave that took over id 0 leaves the old master live until it expires)
    _check(listed <= live, f"every address in brokerAddrTable is live (not in brokerLiveTable: {sorted(listed - live)})")
    for topic, queues in after["topic_queue_table"].items():
        _check(bool(queues), f"topicQueueTable[{topic}] is empty: a topic without queues goes")
        for name in queues:
            _check(name in after["broker_addr_table"], f"topicQueueTable[{topic}] routes to {name}, which is gone")
    _check(set(after["filter_server_table"]) <= live, "filterServerTable holds live brokers only")
    for name, (cluster, _) in after["broker_addr_table"].items():
        _check(name in after["cluster_addr_table"].get(cluster, ()), f"clusterAddrTable[{cluster}] lists {name}")


def run_sequence(RouteInfoManager, ops, expiry: float = EXPIRY) -> None:
    manager = RouteInfoManager(expiry)
    world = _World()
    history: list[str] = []
    for op in ops:
        for method, args in world.concrete(op):
            history.append(describe_call(method, args))
            try:
                before = snapshot(manager)
                result = getattr(manager, method)(*args)
                after = snapshot(manager)
                {"register_broker": check_register, "unregister_broker": check_unregister,
                 "on_channel_destroy": check_close}.get(method, lambda b, a, x, r: check_scan(b, a, x, r, expiry))(
                    before, after, args, result)
                check_invariants(after)
            except AssertionError as e:
                raise AssertionError(f"{e}\n    {generated.the_case()}:\n      "
                                     + "\n      ".join(history)) from None
            except Exception as e:  # the learner's code raised (its traceback follows) or returned junk
                raise AssertionError(f"{history[-1]} raised {describe(e)}\n    {generated.the_case()}:"
                                     "\n      " + "\n      ".join(history)) from e


def test_tables_follow_4_9_8_on_generated_requests(RouteInfoManager):
    """Hypothesis: 300 generated sequences, then the failing one shrunk."""
    @generated.checks(max_examples=300)
    @given(st.lists(OPS, min_size=2, max_size=40))
    def sequences(ops):
        run_sequence(RouteInfoManager, ops)
    sequences()
