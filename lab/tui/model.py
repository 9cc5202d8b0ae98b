"""LabModel: what the screen shows, rebuilt from event records alone.

Live mode feeds it the records the cluster emits; replay feeds it a recorded log up to a time. Both
see the same views because the model knows nothing but the records (docs/events.md). Pure: no
clock, no I/O — `now` is the time of the last record, or whatever the caller sets.
"""

from __future__ import annotations

from collections import deque
from itertools import islice
from dataclasses import dataclass, field

from lab.run.nstables import changed_rows, merge_tables

from .story import AppStory, StoryLine, important, removal_reason, story_line

TABLES = ("brokerLiveTable", "brokerAddrTable", "clusterAddrTable", "topicQueueTable", "filterServerTable")
UNORDERED = ("clusterAddrTable", "filterServerTable")  # list values whose order means nothing
# Kinds that come many times a second; the event log hides them unless a filter asks for them.
CHATTY = frozenset({"producer.send", "producer.ack", "consumer.consume", "broker.replicate",
                    "ns.route", "client.route", "ns.routes", "client.route_poll"})
LOG_SIZE = 5000
AVOID_WINDOW = 30.0  # s: a broker a producer's sends failed on, shown as avoided this long
SPARK_SECONDS = 60
TRACE = 15.0  # s of run time a vanished table row stays on screen, dimmed


@dataclass
class NodeView:
    name: str
    role: str
    state: str = "new"  # up | killed | stopped | crashed, from node.start / node.stop
    address: str | None = None
    error: str | None = None  # why it crashed, or could not start
    pid: int | None = None  # its own process, with --processes
    frozen: bool = False
    cut_from: set[str] = field(default_factory=set)  # nodes a partition cuts it from; "*" isolated
    toxics: set[str] = field(default_factory=set)
    uses: set[str] | None = None  # a client's NameServer and brokers; None: any node it is cut from counts

    @property
    def cut_off(self) -> bool:
        """Cut from a node it talks to: a client on a partition's healthy side is not."""
        if "*" in self.cut_from or self.uses is None:
            return bool(self.cut_from)
        return bool(self.cut_from & self.uses)

    @property
    def shown_state(self) -> str:
        if self.state == "up" and self.frozen:
            return "frozen"
        if self.state == "up" and self.cut_off:
            return "cut off"
        return self.state


@dataclass
class NameServerView:
    tables: dict[str, dict] = field(default_factory=lambda: {t: {} for t in TABLES})
    heartbeat: dict[str, float] = field(default_factory=dict)  # broker addr -> last registration t
    wiped: set[str] = field(default_factory=set)  # broker names whose write permission it wiped
    removed: dict[str, tuple[float, str]] = field(default_factory=dict)  # broker addr -> (t, reason)
    gone: dict[tuple[str, str], float] = field(default_factory=dict)  # (table, key) -> when it vanished


@dataclass
class BrokerView:
    broker_name: str = ""
    broker_id: int = 0
    registrations: dict[str, tuple[bool, str, float]] = field(default_factory=dict)  # ns -> (ok, why, t)
    perm: int | None = None  # the broker's own brokerPermission; None: the configured one
    messages: int = 0


@dataclass
class ClientView:
    role: str
    nameserver: str | None = None  # node name (or address, for one the log never named)
    route_t: float | None = None  # last route fetched from a NameServer
    route_source: str | None = None  # of the last fetch: nameserver | cache | None (no route)
    ok: int = 0
    failed: int = 0
    retried: int = 0
    consumed: int = 0
    failing: dict[str, float] = field(default_factory=dict)  # broker name -> last failed attempt
    queues: dict[str, list[str]] = field(default_factory=dict)  # topic -> ["broker-a:0", ...]


@dataclass
class Expectation:
    name: str
    ok: bool | None = None  # None: not decided yet, or could not be judged
    detail: str = ""
    t: float | None = None
    status: str = "pending"  # pending | ok | failed | unjudged


class LabModel:
    def __init__(self) -> None:
        self.run: dict = {}
        self.now = 0.0
        self.ended = False
        self.nodes: dict[str, NodeView] = {}
        self.nameservers: dict[str, NameServerView] = {}
        self.brokers: dict[str, BrokerView] = {}
        self.clients: dict[str, ClientView] = {}
        self.diverged: dict[tuple[str, str], float] = {}  # (table, key) -> since when
        self.expectations: dict[str, Expectation] = {}
        self.log: deque[dict] = deque(maxlen=LOG_SIZE)
        self.notable: deque[tuple[int, dict]] = deque(maxlen=LOG_SIZE)  # (version, record)
        self.kept: list[tuple[int, dict]] = []  # every important record, (version, record): never dropped
        self.story: list[StoryLine] = []  # one line per turn of the story, never dropped
        self.app_story = AppStory()  # what the story needs of an app's sends (lab/apps)
        self.drained = False  # the timeline ended (run.drain): a scenario's duration passed
        self.version = 0  # bumps with every record: widgets redraw only when it moved
        self.tables_version = 0  # bumps when any NameServer's tables or the divergence change
        self._at_address: dict[str, str] = {}
        self._sends: dict[int, list[int]] = {}  # second -> [messages acknowledged, messages failed]
        self._acked_next: dict[tuple, int] = {}  # (topic, broker, queue) -> next offset to be acked
        self._consumed_next: dict[tuple, int] = {}  # ... -> next offset the group will consume
        self._handlers = {
            "run.start": self._run_start, "run.end": self._run_end, "run.drain": self._run_drain,
            "client.start": self._client_start,
            "node.start": self._node_start, "node.stop": self._node_stop,
            "ns.tables": self._ns_tables, "ns.register": self._ns_register, "ns.remove": self._ns_remove,
            "ns.perm": self._ns_perm,
            "broker.start": self._broker_start, "broker.register": self._broker_register,
            "broker.permission": self._broker_permission, "broker.replicate": self._broker_replicate,
            "producer.send": self._producer_send, "producer.ack": self._producer_ack,
            "producer.failed": self._producer_failed,
            "consumer.consume": self._consumer_consume, "consumer.rebalance": self._consumer_rebalance,
            "client.route": self._client_route, "client.route_poll": self._client_route_poll,
            "client.ns_switch": self._client_ns_switch,
            "chaos.fault": self._chaos_fault, "check.result": self._check_result,
            # an application under test (lab/apps): a client row, from what its links showed
            "app.conn": self._app_conn, "app.route": self._app_route, "app.send": self._app_send,
            "app.deliver": self._app_deliver,
        }

    def feed(self, record: dict) -> None:
        self.now = max(self.now, record["t"])
        self.version += 1
        logged = self._logged(record)
        self.log.append(logged)
        kind = record["kind"]
        if kind not in CHATTY:
            self.notable.append((self.version, logged))
        if important(logged):
            self.kept.append((self.version, logged))
        line = story_line(self, record)  # before the handler: it compares with what was
        if line is not None:
            self.story.append(line)
        handler = self._handlers.get(kind)
        if handler is not None:
            handler(record)

    def expect(self, names: list[str]) -> None:
        """Expectations a scenario will decide, shown as pending until their check.result."""
        for name in names:
            self.expectations.setdefault(name, Expectation(name))

    # --- answers for the widgets ------------------------------------------------------------------

    @property
    def expiry(self) -> float:
        return self.run.get("config", {}).get("nameserver", {}).get("brokerChannelExpiredTime", 120.0)

    @property
    def configured_perm(self) -> int:
        return self.run.get("config", {}).get("broker", {}).get("brokerPermission", 6)

    def names(self, role: str) -> list[str]:
        return [n for n, v in self.nodes.items() if v.role == role]

    def live_nameservers(self) -> list[str]:
        return [n for n in self.nameservers if self.nodes[n].state == "up"]

    def namesrv_addr(self) -> str:
        return ";".join(a for a in (self.nodes[n].address for n in self.nameservers) if a)

    def node_at(self, address: str | None) -> str | None:
        return self._at_address.get(address, address)

    def heartbeat_age(self, nameserver: str, broker_addr: str) -> float | None:
        t = self.nameservers[nameserver].heartbeat.get(broker_addr)
        return None if t is None else max(0.0, self.now - t)

    def avoided(self, client: str) -> list[str]:
        return sorted(b for b, t in self.clients[client].failing.items() if self.now - t < AVOID_WINDOW)

    def lag(self, client: str) -> int:
        """Messages acknowledged on the consumer's queues that its group has not consumed yet."""
        lag = 0
        for topic, queues in self.clients[client].queues.items():
            for q in queues:
                key = _queue_key(topic, q)
                lag += max(0, self._acked_next.get(key, 0) - self._consumed_next.get(key, 0))
        return lag

    def send_rates(self, seconds: int = SPARK_SECONDS) -> tuple[list[int], list[int]]:
        """Messages per second over the last `seconds` whole seconds, the one under way left out
        (it would always read low): (acknowledged, failed after every attempt)."""
        end = int(self.now) - 1
        window = [self._sends.get(s, (0, 0)) for s in range(end - seconds + 1, end + 1)]
        return [w[0] for w in window], [w[1] for w in window]

    def events(self, text: str = "") -> list[dict]:
        """The notable records, or every record whose node, kind or fields contain `text` — the
        important ones the log's window has lost included, in order."""
        if not text:
            first = self.notable[0][0] if self.notable else self.version + 1
            return [r for v, r in self.kept if v < first] + [r for _, r in self.notable]
        first = self.version - len(self.log) + 1
        return matching((r for v, r in self.kept if v < first), text) + matching(self.log, text)

    def removal(self, nameserver: str, broker_addr: str | None) -> tuple[float, str] | None:
        return self.nameservers[nameserver].removed.get(broker_addr) if broker_addr else None

    def traces(self, nameserver: str) -> dict[tuple[str, str], float]:
        """Rows that vanished from this NameServer's tables less than TRACE seconds ago."""
        gone = self.nameservers[nameserver].gone
        return {k: t for k, t in gone.items() if self.now - t < TRACE} if gone else {}

    def _logged(self, record: dict) -> dict:
        """What the event log keeps of a record. An `ns.tables` keeps its sizes only: its tables are in
        `nameservers` while current, and thousands of rows kept per record in the log would be scanned
        by every full garbage collection and stringified by every filter keystroke (a record of rows:
        how many it sets and deletes). A record naming a broker by address gets its node's name too:
        filtering `broker-b-0` finds its removal."""
        kind = record["kind"]
        if kind == "ns.tables":
            sizes = {"topics": "topicQueueTable", "brokers": "brokerLiveTable"}  # of those it carries whole
            counts = {part: sum(len(rows) for rows in record[part].values() if isinstance(rows, (dict, list)))
                      for part in ("set", "del") if isinstance(record.get(part), dict)}
            return {**{k: v for k, v in record.items() if k not in TABLES and k not in ("set", "del")},
                    **{size: len(record[t]) for size, t in sizes.items() if isinstance(record.get(t), dict)},
                    **counts}
        if kind in ("ns.remove", "ns.register") and record.get("broker_addr") in self._at_address:
            # first among the fields: a line shows as many as fit
            return {"t": record["t"], "node": record["node"], "kind": kind,
                    "broker": self._at_address[record["broker_addr"]], **record}
        return record

    def newest(self, count: int) -> list[dict]:
        """The last `count` records fed (as many as the log still holds), oldest first."""
        return list(islice(self.log, max(0, len(self.log) - count), None))

    # --- the run and its nodes ----------------------------------------------------------------------

    def _run_start(self, r: dict) -> None:
        self.run = r
        for name, role in r.get("nodes", {}).items():
            self._node(name, role)

    def _run_end(self, r: dict) -> None:
        self.ended = True

    def _run_drain(self, r: dict) -> None:
        self.drained = True

    def _node(self, name: str, role: str) -> NodeView:
        view = self.nodes.get(name)
        if view is None:
            view = self.nodes[name] = NodeView(name, role)
            if role == "nameserver":
                self.nameservers[name] = NameServerView()
            elif role == "broker":  # named <brokerName>-<brokerId> (lab/run/topology.py)
                broker_name, _, broker_id = name.rpartition("-")
                self.brokers[name] = BrokerView(broker_name, int(broker_id) if broker_id.isdigit() else 0)
            elif role in ("producer", "consumer", "app"):
                self.clients[name] = ClientView(role)
        return view

    def _node_start(self, r: dict) -> None:
        view = self._node(r["node"], r["role"])
        view.state, view.frozen, view.pid = "up", False, r.get("pid")
        if r.get("address"):
            view.address = r["address"]
            self._at_address[r["address"]] = r["node"]
        if view.role == "nameserver":  # a (re)started NameServer starts with empty tables
            self.nameservers[r["node"]] = NameServerView()
            self._recheck_all(r["t"])

    def _node_stop(self, r: dict) -> None:
        view = self.nodes.get(r["node"])
        role = r["node"].rpartition("-")[0]
        if view is None and role in ("producer", "consumer"):  # a new client that died starting
            view = self._node(r["node"], role)
        if view is None:
            return
        view.state = r["state"]
        if r.get("error"):
            view.error = r["error"]
        if view.role == "nameserver":  # a dead NameServer leaves the comparison
            self._recheck_all(r["t"])

    # --- NameServers and the divergence monitor -------------------------------------------------------

    def _ns_tables(self, r: dict) -> None:
        ns = self.nameservers.get(r["node"])
        if ns is None:
            return
        # Schema 4: rows set and deleted (whole tables in a first record, and in older logs).
        changed = changed_rows(ns.tables, r)
        merge_tables(ns.tables, r)
        for t, k in changed:
            if k in ns.tables[t]:
                ns.gone.pop((t, k), None)
            else:
                ns.gone[(t, k)] = r["t"]
        self._recheck(changed, r["t"])

    def _recheck_all(self, t: float) -> None:
        keys = set(self.diverged)
        for name in self.live_nameservers():
            for table, rows in self.nameservers[name].tables.items():
                keys.update((table, k) for k in rows)
        self._recheck(keys, t)

    def _recheck(self, keys, t: float) -> None:
        """A row diverges while the live NameServers do not all hold the same value (or all lack it)."""
        live = [self.nameservers[n].tables for n in self.live_nameservers()]
        for table, key in keys:
            values = [_canonical(table, tables[table].get(key)) for tables in live]
            if any(v != values[0] for v in values[1:]):
                self.diverged.setdefault((table, key), t)
            else:
                self.diverged.pop((table, key), None)
        self.tables_version += 1

    def _ns_register(self, r: dict) -> None:
        if r["node"] in self.nameservers:
            ns = self.nameservers[r["node"]]
            ns.heartbeat[r["broker_addr"]] = r["t"]
            ns.removed.pop(r["broker_addr"], None)

    def _ns_remove(self, r: dict) -> None:
        if r["node"] in self.nameservers:
            ns = self.nameservers[r["node"]]
            ns.heartbeat.pop(r["broker_addr"], None)
            ns.removed[r["broker_addr"]] = (r["t"], removal_reason(r))

    def _ns_perm(self, r: dict) -> None:
        wiped = self.nameservers[r["node"]].wiped
        (wiped.add if r["op"] == "wipe" else wiped.discard)(r["broker_name"])

    # --- brokers -------------------------------------------------------------------------------------------

    def _broker_start(self, r: dict) -> None:
        view = self.brokers.setdefault(r["node"], BrokerView())
        view.broker_name, view.broker_id = r["broker_name"], r["broker_id"]
        view.messages, view.perm = r.get("messages", 0), None

    def _broker_register(self, r: dict) -> None:
        why = "ok" if r.get("ok") else str(r.get("error") or f"code {r.get('code')}")
        self.brokers[r["node"]].registrations[self.node_at(r["ns"])] = (bool(r.get("ok")), why, r["t"])

    def _broker_permission(self, r: dict) -> None:
        self.brokers[r["node"]].perm = r["perm"]

    def _broker_replicate(self, r: dict) -> None:
        if r.get("ok"):
            self.brokers[r["node"]].messages += r.get("messages", 0)

    # --- clients -------------------------------------------------------------------------------------------

    def _client(self, r: dict) -> ClientView:
        if r["node"] not in self.clients:  # a new client speaks before its node.start
            self._node(r["node"], r["node"].rpartition("-")[0])
        return self.clients[r["node"]]

    def _count_message(self, t: float, ok: bool) -> None:
        second = int(t)
        if second not in self._sends:  # a new second: forget those the sparkline no longer shows
            for old in [s for s in self._sends if s < second - SPARK_SECONDS - 1]:
                del self._sends[old]
            self._sends[second] = [0, 0]
        self._sends[second][0 if ok else 1] += 1

    def _producer_send(self, r: dict) -> None:
        client = self._client(r)
        ok = r["result"] == "ok"
        if r.get("attempt", 1) > 1:
            client.retried += 1
        if ok:
            client.failing.pop(r["broker"], None)
        else:
            client.failing[r["broker"]] = r["t"]

    def _producer_ack(self, r: dict) -> None:
        self._client(r).ok += 1
        self._count_message(r["t"], True)
        for view in self.brokers.values():  # the group's master stored it
            if view.broker_name == r["broker"] and view.broker_id == 0:
                view.messages += 1
        key = (r["topic"], r["broker"], r["queue"])
        self._acked_next[key] = max(self._acked_next.get(key, 0), r["queue_offset"] + 1)

    def _producer_failed(self, r: dict) -> None:
        self._client(r).failed += 1
        self._count_message(r["t"], False)

    def _consumer_consume(self, r: dict) -> None:
        self._client(r).consumed += 1
        key = (r["topic"], r["broker"], r["queue"])
        self._consumed_next[key] = max(self._consumed_next.get(key, 0), r["offset"] + 1)

    def _consumer_rebalance(self, r: dict) -> None:
        self._client(r).queues[r["topic"]] = list(r["queues"])
        self._note_uses(r["node"])
        for q in r["queues"]:  # consuming from the last offset: what was acked before is no lag
            key = _queue_key(r["topic"], q)
            self._consumed_next.setdefault(key, self._acked_next.get(key, 0))

    def _client_start(self, r: dict) -> None:
        client_node = self._node(r["node"], r["node"].rpartition("-")[0])
        if not r.get("ok", True):
            client_node.state = "crashed"
            client_node.error = client_node.error or r.get("error")  # node.stop's cause is the better one

    def _client_route(self, r: dict) -> None:
        client = self._client(r)
        client.route_source = r.get("source")
        if r.get("source") == "nameserver" and r.get("ok"):
            client.route_t = r["t"]

    def _client_route_poll(self, r: dict) -> None:
        """A poll round's unremarkable fetches (schema 3) were good fetches from a NameServer: the
        route is that fresh. Its source stays what the last `client.route` said: a failure in the
        round has its own record, and the good fetches around it do not say which came last."""
        if r.get("unchanged"):
            self._client(r).route_t = r["t"]

    def _app(self, r: dict) -> ClientView:
        if r["node"] not in self.clients:  # a log whose run.start did not name it
            self._node(r["node"], "app")
        return self.clients[r["node"]]

    def _app_conn(self, r: dict) -> None:
        peer = self.nodes.get(r.get("peer"))
        if r.get("state") == "open" and peer is not None and peer.role == "nameserver":
            self._app(r).nameserver = r["peer"]  # the NameServer it last dialled

    def _app_route(self, r: dict) -> None:
        client = self._app(r)
        client.route_source = "nameserver" if r.get("result") == 0 else client.route_source
        if r.get("result") == 0:
            client.route_t = r["t"]

    def _app_send(self, r: dict) -> None:
        """Each send attempt the app made: acknowledged (result 0) or not (another code, or none)."""
        client, ok = self._app(r), r.get("result") == 0
        if ok:
            client.ok += 1
        else:
            client.failed += 1
        self._count_message(r["t"], ok)

    def _app_deliver(self, r: dict) -> None:
        self._app(r).consumed += len(r.get("messages") or ())

    def _client_ns_switch(self, r: dict) -> None:
        self._client(r).nameserver = self.node_at(r.get("to"))
        self._note_uses(r["node"])

    def _note_uses(self, name: str) -> None:
        """The nodes a client talks to: its NameServer, and the brokers of the groups it consumes
        from (a producer: every group, its route names them all)."""
        client = self.clients[name]
        groups = {q.rpartition(":")[0] for queues in client.queues.values() for q in queues} \
            if client.role == "consumer" else None
        self.nodes[name].uses = {client.nameserver} | {
            node for node, b in self.brokers.items() if groups is None or b.broker_name in groups}

    # --- chaos and checks ----------------------------------------------------------------------------------

    def _chaos_fault(self, r: dict) -> None:
        verb, targets = r["verb"], [self.nodes[n] for n in r.get("nodes", []) if n in self.nodes]
        if verb in ("freeze", "unfreeze", "kill", "restart"):
            for view in targets:
                view.frozen = verb == "freeze"
        elif verb == "isolate":
            for view in targets:
                view.cut_from.add("*")
        elif verb == "partition":
            groups = r.get("groups", [])
            for i, group in enumerate(groups):
                others = {n for j, g in enumerate(groups) if j != i for n in g}
                for name in group:
                    if name in self.nodes:
                        self.nodes[name].cut_from |= others
            for name in self.clients:
                self._note_uses(name)
        elif verb == "heal":
            for view in self.nodes.values():
                view.cut_from.clear()
                view.toxics.clear()
        elif verb == "toxic":
            for view in targets:
                view.toxics.add(r.get("toxic", "toxic"))

    def _check_result(self, r: dict) -> None:
        status = r.get("status") or ("ok" if r["ok"] else "failed")  # logs before schema 2 have no status
        self.expectations[r["name"]] = Expectation(r["name"], r["ok"], r.get("detail", ""), r["t"], status)


def _canonical(table: str, value):
    return sorted(value) if table in UNORDERED and isinstance(value, list) else value


def _queue_key(topic: str, queue: str) -> tuple:
    broker, _, queue_id = queue.rpartition(":")
    return topic, broker, int(queue_id)


def matching(records, text: str) -> list[dict]:
    """What the event log shows of `records`: notable ones, or those containing `text`."""
    if not text:
        return [r for r in records if r["kind"] not in CHATTY]
    text = text.lower()
    return [r for r in records if text in _searchable(r)]


def _searchable(record: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in record.items() if k != "t").lower()
