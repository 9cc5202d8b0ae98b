"""The expectations a scenario can state, checked over the event log while the run goes.

Each type is a chaos.checks.Check built from an `[[expect]]` table; docs/scenarios.md is the
reference of types and keys. Parameters are validated before the run; a bad one is reported as
FILE:LINE: [[expect]] #N KEY: what is wrong. An expectation whose subject never happened could
not be judged: the verdict is then unknown, never valid.
"""

from __future__ import annotations

from collections import Counter

from chaos.checks import Check
from chaos.scenario import ExpectSpec, Scenario

from lab.config import LabConfig, parse_duration
from lab.control import app_expectations
from lab.run.nstables import merge_tables
from lab.run.topology import Topology


class ClusterView:
    """What the event stream says about the cluster now; shared by every check of a run."""

    def __init__(self):
        self.address: dict[str, str] = {}  # node -> address
        self.node_at: dict[str, str] = {}  # address -> node
        self.up: dict[str, bool] = {}
        self.role: dict[str, str] = {}
        self.tables: dict[str, dict] = {}  # nameserver -> latest ns.tables
        self.last_register: dict[tuple[str, str], float] = {}  # (nameserver, broker addr) -> t
        self.client_ns: dict[str, str] = {}  # client -> the NameServer address it uses

    def observe(self, r: dict) -> None:
        kind, node = r["kind"], r["node"]
        if kind == "node.start":
            self.up[node], self.role[node] = True, r["role"]
            if r.get("address"):
                self.address[node], self.node_at[r["address"]] = r["address"], node
            if r["role"] == "nameserver":
                self.tables[node] = {}  # a (re)started NameServer starts empty
        elif kind == "node.stop":
            self.up[node] = False
        elif kind == "ns.tables":  # schema 4: the rows that changed (docs/events.md)
            self.tables[node] = merge_tables(self.tables.get(node, {}), r)
        elif kind == "client.ns_switch":
            self.client_ns[node] = r["to"]
        elif kind == "ns.register":
            self.last_register[(node, r["broker_addr"])] = r["t"]

    def live_nameservers(self) -> list[str]:
        return [n for n, role in self.role.items() if role == "nameserver" and self.up.get(n)]

    def holds(self, nameserver: str, broker_addr: str) -> bool:
        return broker_addr in self.tables.get(nameserver, {}).get("brokerLiveTable", {})

    def route(self, nameserver: str, topic: str):
        """What GET_ROUTEINFO_BY_TOPIC would answer, in a canonical order (tables keep insertion
        order, which differs between NameServers that learnt the same things in another order)."""
        tables = self.tables.get(nameserver, {})
        queues = tables.get("topicQueueTable", {}).get(topic)
        if queues is None:
            return None
        broker_addr_table = tables.get("brokerAddrTable", {})
        brokers = tuple((name, tuple(sorted(broker_addr_table.get(name, {}).get("brokerAddrs", {}).items())))
                        for name in sorted(queues))
        return tuple(sorted((name, tuple(q)) for name, q in queues.items())), brokers


class _Expectation(Check):
    def __init__(self, spec: ExpectSpec, view: ClusterView):
        super().__init__(spec.name)
        self.view = view


class BrokerRemoved(_Expectation):
    """broker: a node name, or "all" for every broker; reason: the one every removal must give."""

    def __init__(self, spec, view, *, brokers, within, after=None, nameservers=None, reason=None):
        super().__init__(spec, view)
        self.brokers, self.within, self.after, self.only = brokers, within, after, nameservers
        self.reason = reason
        self.label = brokers[0] if len(brokers) == 1 else "every broker"
        self.start: float | None = None
        self.pending: set[tuple[str, str]] = set()  # (nameserver, broker address)
        self.holders: list[str] = []  # the NameServers that held it at the start
        self.idle: list[str] = []  # those of the candidates that held none of it
        self.died: set[str] = set()  # holders that went down instead of removing it

    def _begin(self, t: float) -> None:
        self.start = t
        candidates = self.only or self.view.live_nameservers()
        addrs = [self.view.address[b] for b in self.brokers if b in self.view.address]
        self.pending = {(ns, addr) for ns in candidates for addr in addrs if self.view.holds(ns, addr)}
        self.holders = sorted({ns for ns, _ in self.pending})
        self.idle = [ns for ns in candidates if ns not in self.holders]
        if not self.pending:
            self.unjudged(f"no NameServer{' of ' + ', '.join(self.only) if self.only else ''} held "
                          f"{self.label} at t={t:g}s", t)

    def observe(self, r: dict) -> None:
        if self.start is None:
            if self.after is not None:
                if r["t"] >= self.after:  # the first record at `after`: the state as it stood then
                    self._begin(self.after)
            elif r["kind"] == "chaos.fault" and any(b in _fault_targets(r) for b in self.brokers):
                self._begin(r["t"])
            return
        if not self.pending:
            return
        if r["kind"] == "ns.remove" and (r["node"], r["broker_addr"]) in self.pending:
            self.pending.discard((r["node"], r["broker_addr"]))
            if self.reason is not None and r.get("reason") != self.reason:
                why = r.get("reason", "?") + (f": {r['detail']}" if r.get("detail") else "")
                broker = self.view.node_at.get(r["broker_addr"], r["broker_addr"])
                self.fail(f"{r['node']} removed {broker} at t={r['t']:g}s by {why}, not {self.reason}", r["t"])
                return
        elif r["kind"] == "node.stop" and any(ns == r["node"] for ns, _ in self.pending):
            self.died.add(r["node"])  # a NameServer that died holds nothing
            self.pending = {(ns, addr) for ns, addr in self.pending if ns != r["node"]}
        if not self.pending:
            took = r["t"] - self.start
            if took <= self.within:
                self.succeed(f"{self._who()} {self.label}{self._why()} within {took:.1f}s", r["t"])
            else:
                self.fail(f"{self._who()} {self.label}{self._why()} only {took:.1f}s after "
                          f"t={self.start:g}s (within {self.within:g}s)", r["t"])

    def _who(self) -> str:
        """Which NameServers removed it, and what the others did: `ns-0 removed` is not `every`."""
        removers = [ns for ns in self.holders if ns not in self.died]
        words = f"{', '.join(removers) or 'no NameServer'} removed"
        notes = [f"{', '.join(sorted(self.died))} went down holding it"] if self.died else []
        notes += [f"{', '.join(self.idle)} never held it"] if self.idle else []
        return words if not notes else f"{'; '.join(notes)}; {words}"

    def _why(self) -> str:
        return f" ({self.reason})" if self.reason is not None else ""

    def tick(self, now: float) -> None:
        if self.start is None and self.after is not None and now >= self.after:
            self._begin(self.after)
        if self.start is not None and self.pending and now > self.start + self.within:
            held = ", ".join(f"{ns} {self.view.node_at.get(addr, addr)}" for ns, addr in sorted(self.pending))
            self.fail(f"still held {self.within:g}s after t={self.start:g}s: {held}", now)

    def finish(self, now: float) -> None:
        if self.start is None:
            self.unjudged(f"no fault on {self.label} happened" if self.after is None
                          else f"the run ended before t={self.after:g}s", now)
        self.tick(now)
        if self.pending:
            self.fail(f"the run ended with {self.label} still held", now)


def _fault_targets(r: dict) -> list[str]:
    return list(r.get("nodes", [])) + [n for group in r.get("groups", []) for n in group]


class NoStaleBroker(_Expectation):
    def __init__(self, spec, view, *, limit):
        super().__init__(spec, view)
        self.limit = limit
        self.worst: float | None = None

    def tick(self, now: float) -> None:
        for ns in self.view.live_nameservers():
            for addr in self.view.tables.get(ns, {}).get("brokerLiveTable", {}):
                heard = self.view.last_register.get((ns, addr))
                if heard is None:
                    continue
                silent = now - heard
                self.worst = max(self.worst or 0.0, silent)
                if silent > self.limit:  # one decimal: 132.4 s must not read "132s > 132s"
                    self.fail(f"{ns} kept {self.view.node_at.get(addr, addr)} ({addr}) unheard for "
                              f"{silent:.1f}s > {self.limit:g}s", now)

    def finish(self, now: float) -> None:
        self.tick(now)
        if self.worst is None:
            self.unjudged("no NameServer held a registered broker", now)
        self.succeed(f"longest silence kept: {self.worst:.0f}s (limit {self.limit:g}s)", now)


class _PhaseCheck(_Expectation):
    def __init__(self, spec, view, *, start, end):
        super().__init__(spec, view)
        self.start, self.end = start, end

    def in_phase(self, t: float) -> bool:
        return self.start <= t <= self.end

    @property
    def during(self) -> str:
        return f"between {self.start:g}s and {self.end:g}s"


class SendSuccessRate(_PhaseCheck):
    def __init__(self, spec, view, *, start, end, minimum, settle, producers=None):
        super().__init__(spec, view, start=start, end=end)
        self.minimum, self.settle, self.producers = minimum, settle, producers
        self.first_sent: dict[str, float] = {}
        self.outcome: dict[str, bool] = {}

    def observe(self, r: dict) -> None:
        kind = r["kind"]
        if kind not in ("producer.send", "producer.ack", "producer.failed") or \
                (self.producers is not None and r["node"] not in self.producers):
            return
        if kind == "producer.send":
            if r["attempt"] == 1:
                self.first_sent.setdefault(r["msg_id"], r["t"])
        else:
            self.first_sent.setdefault(r["msg_id"], r["t"])  # failed before any attempt (no route)
            self.outcome[r["msg_id"]] = kind == "producer.ack"

    def _rate(self):
        ids = [m for m, t in self.first_sent.items() if self.in_phase(t) and m in self.outcome]
        acked = sum(self.outcome[m] for m in ids)
        return acked, len(ids)

    def tick(self, now: float) -> None:
        if now >= self.end + self.settle and not self.decided:
            self._decide(now)

    def _decide(self, now: float) -> None:
        acked, total = self._rate()
        if total == 0:
            self.unjudged(f"no message was sent {self.during}", now)
        elif acked / total >= self.minimum:
            self.succeed(f"{acked}/{total} first sent {self.during} acknowledged "
                         f"({acked / total:.1%} >= {self.minimum:.1%})", now)
        else:
            self.fail(f"{acked}/{total} first sent {self.during} acknowledged "
                      f"({acked / total:.1%} < {self.minimum:.1%})", now)

    def finish(self, now: float) -> None:
        self._decide(now)


class AllAckedConsumed(_Expectation):
    def __init__(self, spec, view):
        super().__init__(spec, view)
        self.acked: dict[str, None] = {}
        self.consumed: set[str] = set()

    def observe(self, r: dict) -> None:
        if r["kind"] == "producer.ack":
            self.acked[r["msg_id"]] = None
        elif r["kind"] == "consumer.consume":
            self.consumed.add(r["msg_id"])

    def finish(self, now: float) -> None:
        lost = [m for m in self.acked if m not in self.consumed]
        if not self.acked:
            self.unjudged("no message was acknowledged", now)
        elif lost:
            self.fail(f"{len(lost)} of {len(self.acked)} acknowledged messages never consumed, e.g. {lost[:3]}", now)
        else:
            # every ack of the run, those after the timeline's end included: more than a phase counts
            self.succeed(f"all {len(self.acked)} messages acknowledged in the whole run consumed", now)


class Duplicates(_PhaseCheck):
    """A message counts as duplicated in the phase when its second consumption falls in it."""

    def __init__(self, spec, view, *, maximum, start, end):
        super().__init__(spec, view, start=start, end=end)
        self.maximum = maximum
        self.seen: Counter = Counter()
        self.consumed = 0  # consumptions in the phase
        self.duplicated = 0

    def observe(self, r: dict) -> None:
        if r["kind"] == "consumer.consume":
            self.seen[r["msg_id"]] += 1
            if not self.in_phase(r["t"]):
                return
            self.consumed += 1
            if self.seen[r["msg_id"]] == 2:
                self.duplicated += 1
                if self.duplicated > self.maximum:
                    self.fail(f"{self.duplicated} messages consumed more than once (max {self.maximum}), "
                              f"e.g. {r['msg_id']} at t={r['t']:g}s", r["t"])

    def tick(self, now: float) -> None:
        if now > self.end:  # decided as soon as its window closes: nothing later counts
            self.finish(now)

    def finish(self, now: float) -> None:
        if not self.consumed:
            self.unjudged(f"no message was consumed {self.during}", now)
        self.succeed(f"{self.duplicated} of {self.consumed} consumptions {self.during} were a message's "
                     f"second (max {self.maximum})", now)


class NameserversAgree(_Expectation):
    """Converge within `within` of `after`: the last disagreement between `after` and `until` (the
    phase's end, else the run's) ends by then. NameServers that agreed all along had nothing to
    converge: that is not a pass."""

    def __init__(self, spec, view, *, topics, after, within, until):
        super().__init__(spec, view)
        self.topics, self.after, self.within, self.until = topics, after, within, until
        self.disagreed = False
        self.looked = False
        self.agreed_since: float | None = None  # None: they disagree now
        self.differs: str | None = None

    def _disagreement(self) -> str | None:
        live = self.view.live_nameservers()
        # A route is read from topicQueueTable and brokerAddrTable alone: NameServers whose two
        # tables are equal agree on every topic. Checked every second, this spares looking at
        # every topic of a large cluster (2,000 of them) route by route while all is well.
        tables = [self.view.tables.get(ns, {}) for ns in live]
        if all(t.get(name) == tables[0].get(name)
               for t in tables[1:] for name in ("topicQueueTable", "brokerAddrTable")):
            return None
        for topic in self.topics:
            routes = {ns: self.view.route(ns, topic) for ns in live}
            if len({repr(r) for r in routes.values()}) > 1:
                return f"{topic}: " + "; ".join(
                    f"{ns} {'has no route' if r is None else 'routes to ' + ', '.join(f'{n} {dict(a)}' for n, a in r[1])}"
                    for ns, r in routes.items())
        return None

    def _look(self, t: float) -> None:
        if t < self.after or t > self.until or self.decided:
            return
        differs = self._disagreement()
        if differs is not None:
            self.disagreed, self.agreed_since, self.differs = True, None, differs
            if t > self.after + self.within:
                self.fail(f"still disagree {self.within:g}s after t={self.after:g}s: {differs}", t)
        elif self.agreed_since is None:
            self.agreed_since = t

    def observe(self, r: dict) -> None:
        if r["kind"] in ("ns.tables", "node.start", "node.stop") or (not self.looked and r["t"] >= self.after):
            self.looked = True  # the first record at `after`: how things stood then
            self._look(r["t"])

    def tick(self, now: float) -> None:
        self._look(now)
        if now >= self.until:
            self._decide(now)

    def _decide(self, now: float) -> None:
        if self.decided:
            return
        if self.agreed_since is None and not self.disagreed:
            self.unjudged(f"the run ended before t={self.after:g}s", now)
        elif self.agreed_since is None:
            self.fail(f"still disagree at t={min(now, self.until):g}s: {self.differs}", now)
        elif not self.disagreed:
            self.unjudged(f"the NameServers agreed all along from t={self.after:g}s: nothing had to converge", now)
        else:
            self.succeed(f"all live NameServers agree from {self.agreed_since - self.after:.1f}s after "
                         f"t={self.after:g}s", now)

    def finish(self, now: float) -> None:
        self._look(now)
        self._decide(now)


RETRY_PREFIX = "%RETRY%"


class NewClient(_Expectation):
    """A client started in `fails_in` gets no route while that phase lasts (4.9.8's start() works
    without a NameServer; its sends fail with "No route info of this topic"); one started in
    `succeeds_in` has its route as it starts (its first fetch, failing over between NameServers)."""

    def __init__(self, spec, view, *, fails, succeeds):
        super().__init__(spec, view)
        self.fails, self.succeeds = fails, succeeds  # (start, end) or None
        self.started: dict[str, tuple[str, tuple[float, float]]] = {}  # node -> (label, window)
        self.routed: dict[str, float] = {}  # node -> first route from a NameServer
        self.first_route: dict[str, dict] = {}  # node -> that client.route
        self.fetched: dict[str, dict[str, bool]] = {}  # node -> topic -> its first fetch got it

    def observe(self, r: dict) -> None:
        kind, node = r["kind"], r["node"]
        if kind == "client.start":
            for label, window in (("fails", self.fails), ("succeeds", self.succeeds)):
                if window and window[0] <= r["t"] <= window[1]:
                    self.started[node] = (label, window)
            if not r["ok"] and node in self.started:
                self.fail(f"{node} could not start at t={r['t']:g}s: {r.get('error', '')}", r["t"])
            elif node in self.started and self.started[node][0] == "fails" and node in self.first_route:
                self._routed_anyway(node, self.first_route[node])  # its fetches as it started got one
            elif node in self.started and self.started[node][0] == "succeeds":
                unrouted = [topic for topic, ok in self.fetched.get(node, {}).items() if not ok]
                if node not in self.routed or unrouted:
                    self.fail(f"{node} started at t={r['t']:g}s without the route of "
                              f"{', '.join(unrouted) or 'any topic'}: its first fetch failed", r["t"])
        elif kind == "client.route" and node not in self.started and not r["topic"].startswith(RETRY_PREFIX):
            # A new client's fetches as it starts tell; not its group's retry topic's: the broker
            # creates that at the group's first heartbeat, so a new group's first fetch of it fails
            # against any NameServer, as 4.9.8's does.
            self.fetched.setdefault(node, {}).setdefault(r["topic"], r["ok"])
        if kind == "client.route" and r["ok"] and node not in self.routed:
            self.routed[node], self.first_route[node] = r["t"], r
            label, window = self.started.get(node, ("", None))
            if label == "fails" and r["t"] <= window[1]:
                self._routed_anyway(node, r)

    def _routed_anyway(self, node: str, r: dict) -> None:
        self.fail(f"{node} got the route of {r['topic']} from {self.view.node_at.get(r['ns'], r['ns'])} "
                  f"at t={r['t']:g}s", r["t"])

    def finish(self, now: float) -> None:
        for label, window in (("fails", self.fails), ("succeeds", self.succeeds)):
            if window and not any(w == window and l == label for l, w in self.started.values()):
                self.unjudged(f"no new client was started between {window[0]:g}s and {window[1]:g}s", now)
        for node, (label, window) in self.started.items():
            if label == "succeeds" and not (node in self.routed and self.routed[node] <= window[1]):
                self.fail(f"{node} got no route before t={window[1]:g}s", now)
        if not self.decided:
            self.succeed("; ".join(
                f"{node} {'had no route while it lasted' if label == 'fails' else 'got a route at t=%gs' % self.routed[node]}"
                for node, (label, _) in self.started.items()), now)


class SendsAvoid(_PhaseCheck):
    """No attempt begun in the phase is acknowledged by the broker group."""

    def __init__(self, spec, view, *, broker, start, end):
        super().__init__(spec, view, start=start, end=end)
        self.broker, self.sent = broker, 0

    def observe(self, r: dict) -> None:
        if r["kind"] != "producer.send":
            return
        begun = r["t"] - r["latency"]
        if not self.in_phase(begun):
            return
        self.sent += 1
        if r["result"] == "ok" and r["broker"] == self.broker:
            self.fail(f"{r['msg_id']} went to {self.broker} at t={begun:g}s and was acknowledged", r["t"])

    def finish(self, now: float) -> None:
        if not self.sent:
            self.unjudged(f"no message was sent {self.during}", now)
        self.succeed(f"none of {self.sent} attempts {self.during} was stored "
                     f"by {self.broker}", now)


class ConsumedFrom(_PhaseCheck):
    def __init__(self, spec, view, *, node, start, end, minimum):
        super().__init__(spec, view, start=start, end=end)
        self.node, self.minimum, self.count = node, minimum, 0

    def observe(self, r: dict) -> None:
        if r["kind"] == "consumer.consume" and self.in_phase(r["t"]) and \
                self.view.node_at.get(r.get("broker_addr", "")) == self.node:
            self.count += 1

    def tick(self, now: float) -> None:
        if now > self.end:  # decided as soon as its window closes: nothing later counts
            self.finish(now)

    def finish(self, now: float) -> None:
        if self.decided:
            return
        if self.count >= self.minimum:
            self.succeed(f"{self.count} messages consumed from {self.node}", now)
        else:
            self.fail(f"{self.count} messages consumed from {self.node} {self.during} "
                      f"(wanted at least {self.minimum})", now)


class BrokerKept(_PhaseCheck):
    """No NameServer (of those listed) removes the broker during the phase, once it held it. Judged
    only when the broker was there to keep: a phase that starts mid-run needs every such NameServer
    to hold it at its start; one that starts with the run, every NameServer to hold it at some point
    (nothing is registered at t=0). Decided as soon as the phase ends."""

    def __init__(self, spec, view, *, node, start, end, nameservers):
        super().__init__(spec, view, start=start, end=end)
        self.node, self.only = node, nameservers
        self.began = False
        self.held: set[str] = set()  # NameServers that held it in the phase: each must keep it

    def _candidates(self) -> list[str]:
        return self.only or self.view.live_nameservers()

    def _holders(self) -> set[str]:
        addr = self.view.address.get(self.node)
        return {ns for ns in self._candidates() if addr is not None and self.view.holds(ns, addr)}

    def _begin(self, t: float) -> None:
        self.began = True
        self.held = self._holders()
        missing = [ns for ns in self._candidates() if ns not in self.held]
        if self.start <= 0:  # nothing is up or registered yet: each NameServer's first hold counts
            return
        if not self._candidates():
            self.unjudged(f"no NameServer was up when the phase began (t={self.start:g}s)", t)
        elif missing:
            self.unjudged(f"{', '.join(missing)} did not hold {self.node} when the phase began "
                          f"(t={self.start:g}s): nothing to keep", t)

    def observe(self, r: dict) -> None:
        if not self.began and r["t"] >= self.start:
            self._begin(r["t"])  # the first record at the phase start: the tables as they stood
        if not self.began or not self.in_phase(r["t"]):
            return
        if r["kind"] == "ns.remove" and r["broker_addr"] == self.view.address.get(self.node) and r["node"] in self.held:
            self.fail(f"{r['node']} removed {self.node} at t={r['t']:g}s ({r['reason']})", r["t"])
        elif r["kind"] == "ns.tables" and self.start <= 0:
            self.held |= self._holders()

    def tick(self, now: float) -> None:
        if not self.began and now >= self.start:
            self._begin(now)
        if now > self.end:  # decided as soon as its window closes
            self._decide(now)

    def _decide(self, now: float) -> None:
        if not self.began:
            self.unjudged(f"the run ended before t={self.start:g}s", now)
        never = [ns for ns in self._candidates() if ns not in self.held]
        if not self.held:
            self.unjudged(f"no NameServer held {self.node} {self.during}: nothing to keep", now)
        elif never:
            self.unjudged(f"{', '.join(never)} never held {self.node} {self.during}: nothing to keep", now)
        self.succeed(f"{', '.join(sorted(self.held))} kept {self.node} {self.during}", now)

    def finish(self, now: float) -> None:
        self._decide(now)


class NameserverSwitch(_PhaseCheck):
    def __init__(self, spec, view, *, away_from, start, end):
        super().__init__(spec, view, start=start, end=end)
        self.away_from = away_from
        self.on_it: list[str] | None = None  # at the phase start, the live clients using `away_from`

    def observe(self, r: dict) -> None:
        if self.on_it is None and r["t"] >= self.start:
            self.on_it = [c for c, ns in self.view.client_ns.items() if self.view.up.get(c) and
                          (self.away_from is None or self.view.node_at.get(ns) == self.away_from)]
        if r["kind"] == "client.ns_switch" and self.in_phase(r["t"]) and r.get("from") and \
                (self.away_from is None or self.view.node_at.get(r["from"]) == self.away_from):
            self.succeed(f"{r['node']} moved from {self.view.node_at.get(r['from'], r['from'])} to "
                         f"{self.view.node_at.get(r['to'], r['to'])} at t={r['t']:g}s ({r['reason']})", r["t"])

    def finish(self, now: float) -> None:
        if self.decided:
            return
        away = f" away from {self.away_from}" if self.away_from else ""
        if not self.on_it:
            self.unjudged(f"no client was using {self.away_from or 'a NameServer'} at t={self.start:g}s", now)
        self.fail(f"no client moved to another NameServer{away} {self.during}", now)


class QueuesBalanced(_PhaseCheck):
    """Each producer spreads each topic's messages over every queue of each broker that stored
    them: judged from the acks of the phase, per (producer, topic, broker) that acknowledged at
    least `per_queue` messages a queue, on the topic's write queues of the topology. A broker that
    took none of a topic's messages (down, write-less) is not judged; decided when the phase ends."""

    def __init__(self, spec, view, *, queues, max_ratio, per_queue, start, end):
        super().__init__(spec, view, start=start, end=end)
        self.queues, self.max_ratio, self.per_queue = queues, max_ratio, per_queue  # topic -> count
        self.acked: dict[tuple[str, str, str], Counter] = {}  # (producer, topic, broker) -> per queue

    def observe(self, r: dict) -> None:
        if r["kind"] == "producer.ack" and self.in_phase(r["t"]) and r["topic"] in self.queues:
            self.acked.setdefault((r["node"], r["topic"], r["broker"]), Counter())[r["queue"]] += 1

    def tick(self, now: float) -> None:
        if now > self.end:  # decided as soon as its window closes: nothing later counts
            self.finish(now)

    def finish(self, now: float) -> None:
        if self.decided:
            return
        judged, worst, spread = 0, 0.0, ""
        for (producer, topic, broker), counts in sorted(self.acked.items()):
            per_queue = [counts[q] for q in range(self.queues[topic])]
            if sum(per_queue) < self.per_queue * len(per_queue):
                continue  # too few to tell a spread from chance
            judged += 1
            ratio = max(per_queue) / min(per_queue) if min(per_queue) else float("inf")
            if not spread or ratio > worst:
                worst, spread = ratio, f"{producer}'s {topic} on {broker}: {'/'.join(map(str, per_queue))}"
        if not judged:
            self.unjudged(f"no producer had {self.per_queue:g} messages a queue of a topic acknowledged by "
                          f"one broker {self.during}", now)
        elif worst > self.max_ratio:
            self.fail(f"messages per queue, {spread} (max/min {worst:.1f} > {self.max_ratio:g})", now)
        else:
            self.succeed(f"{judged} producer/topic/broker spreads, the least even {spread} "
                         f"(max/min {worst:.2f} <= {self.max_ratio:g})", now)


def build(scenario: Scenario, config: LabConfig, topology: Topology, view: ClusterView) -> list[Check]:
    """Every expectation of the scenario as a Check; a bad parameter is a ScenarioError."""
    return [_build_one(scenario, spec, config, topology, view) for spec in scenario.expectations]


def _build_one(scenario: Scenario, spec: ExpectSpec, config: LabConfig, topology: Topology,
               view: ClusterView) -> Check:
    p = dict(spec.params)
    p.pop("name", None)
    roles = topology.roles()
    brokers = {b.broker_name for b in topology.brokers}

    def error(message: str, key: str | None = None):
        return scenario.error(message, "expect", spec.index, key)

    def take(key: str, default=...):
        if key in p:
            return p.pop(key)
        if default is ...:
            raise error(f"{spec.type} needs {key}", "type")
        return default

    def duration(key: str, default=...):
        value = take(key, default)
        if value is None:
            return None
        try:
            return parse_duration(value)
        except ValueError as e:
            raise error(str(e), key) from None

    def node(key: str, role: str | None = None) -> str:
        name = take(key)
        if name not in roles or (role and roles[name] != role):
            known = sorted(n for n, r in roles.items() if role is None or r == role)
            raise error(f"no {role or 'node'} named {name!r} (there are: {', '.join(known)})", key)
        return name

    def window() -> tuple[float, float]:
        phase_name = take("phase", None)
        if phase_name is None:
            return 0.0, scenario.duration
        phase = scenario.phase(phase_name)
        return phase.start, phase.end

    def nameservers() -> list[str] | None:
        only = take("nameservers", None)
        if only is not None and (not isinstance(only, list) or any(roles.get(ns) != "nameserver" for ns in only)):
            raise error(f"a list of nameserver names, not {only!r}", "nameservers")
        return only

    def number(key: str, default, low: float, high: float):
        value = take(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise error(f"must be a number from {low:g} to {high:g}, not {value!r}", key)
        return value

    kind = spec.type
    if kind == "broker_removed":
        if p.get("broker") == "all":
            p.pop("broker")
            brokers = [b.name for b in topology.brokers]
        else:
            brokers = [node("broker", "broker")]
        within = duration("within")
        after = duration("after", None)
        reason = take("reason", None)
        if reason not in (None, "expired", "channel_closed", "unregistered"):
            raise error(f"expired, channel_closed or unregistered, not {reason!r}", "reason")
        check = BrokerRemoved(spec, view, brokers=brokers, within=within, after=after, nameservers=nameservers(),
                              reason=reason)
    elif kind == "no_stale_broker":
        n = config.nameserver
        limit = duration("limit", n.brokerChannelExpiredTime + n.scanNotActiveBrokerInterval)
        check = NoStaleBroker(spec, view, limit=limit + duration("slack", 0))
    elif kind == "send_success_rate":
        start, end = window()
        producers = take("producers", None)
        if producers is not None and (not isinstance(producers, list) or any(roles.get(n) != "producer" for n in producers)):
            known = sorted(n for n, r in roles.items() if r == "producer")
            raise error(f"a list of producer names ({', '.join(known)}), not {producers!r}", "producers")
        check = SendSuccessRate(spec, view, start=start, end=end, minimum=number("min", ..., 0, 1),
                                settle=config.producer.sendMsgTimeout * (config.producer.retryTimesWhenSendFailed + 1),
                                producers=producers)
    elif kind == "all_acked_consumed":
        check = AllAckedConsumed(spec, view)
    elif kind == "duplicates":
        start, end = window()
        check = Duplicates(spec, view, maximum=int(number("max", 0, 0, 10**9)), start=start, end=end)
    elif kind == "nameservers_agree":
        topic = take("topic", None)
        if topic is not None and topic not in topology.topics:
            raise error(f"no topic named {topic!r} (topics: {', '.join(topology.topics)})", "topic")
        after = duration("after", None)
        start, until = window()
        if after is None:
            after = start
        elif not start <= after <= until:
            raise error(f"{after:g}s is outside its phase ({start:g}s to {until:g}s)", "after")
        check = NameserversAgree(spec, view, topics=[topic] if topic else list(topology.topics),
                                 after=after, within=duration("within"), until=until)
    elif kind == "new_client":
        def phase_window(key):
            name = take(key, None)
            if name is None:
                return None
            phase = scenario.phase(name)
            if phase is None:
                raise error(f"no phase named {name!r}", key)
            return phase.start, phase.end
        fails, succeeds = phase_window("fails_in"), phase_window("succeeds_in")
        if not fails and not succeeds:
            raise error("new_client needs fails_in or succeeds_in (a phase name)", "type")
        check = NewClient(spec, view, fails=fails, succeeds=succeeds)
    elif kind == "sends_avoid":
        broker = take("broker")
        if broker not in brokers:
            raise error(f"no broker group named {broker!r} (there are: {', '.join(sorted(brokers))})", "broker")
        start, end = window()
        check = SendsAvoid(spec, view, broker=broker, start=start, end=end)
    elif kind == "consumed_from":
        name = node("broker", "broker")
        start, end = window()
        check = ConsumedFrom(spec, view, node=name, start=start, end=end, minimum=int(number("min", 1, 0, 10**9)))
    elif kind == "broker_kept":
        name = node("broker", "broker")
        start, end = window()
        check = BrokerKept(spec, view, node=name, start=start, end=end, nameservers=nameservers())
    elif kind == "nameserver_switch":
        away = node("away_from", "nameserver") if "away_from" in p else None
        start, end = window()
        check = NameserverSwitch(spec, view, away_from=away, start=start, end=end)
    elif kind in app_expectations.TYPES:  # a real application's app.* records (issue 39, docs/apps.md)
        check = app_expectations.build_one(kind, spec.name, take=take, duration=duration, number=number,
                                           window=window, error=error, topology=topology, phased="phase" in p,
                                           timeline_end=scenario.duration)
    elif kind == "queues_balanced":
        start, end = window()
        check = QueuesBalanced(spec, view, queues={t: c.write_queue_nums for t, c in topology.topics.items()},
                               max_ratio=number("max_ratio", 2, 1, 10**9),
                               per_queue=number("per_queue", 4, 1, 10**9), start=start, end=end)
    else:
        raise error(f"unknown expectation type {kind!r} (types: {', '.join(TYPES + app_expectations.TYPES)})", "type")
    if p:
        key = next(iter(p))
        raise error(f"unknown parameter for {kind}", key)
    return check


TYPES = ("broker_removed", "no_stale_broker", "send_success_rate", "all_acked_consumed", "duplicates",
         "nameservers_agree", "new_client", "sends_avoid", "consumed_from", "broker_kept", "nameserver_switch",
         "queues_balanced")  # simulated; a real application's (app_*) are app_expectations.TYPES
