"""The expectations a scenario can state, checked over the event log while the run goes.

Each type is a chaos.checks.Check built from an `[[expect]]` table. Parameters are validated
before the run; a bad one is reported as FILE:LINE: [[expect]] #N KEY: what is wrong.

| type | parameters | holds when |
| --- | --- | --- |
| broker_removed | broker, within, after?, nameservers? | every NameServer that held the broker at `after` (default: the last fault on it) and is up has removed it within `within` |
| no_stale_broker | slack?, limit? | no live NameServer keeps a broker unheard for longer than `limit` (default brokerChannelExpiredTime + scanNotActiveBrokerInterval, + slack) |
| send_success_rate | min, phase? | of the messages first sent in the phase, at least `min` (0..1) were acknowledged |
| all_acked_consumed | — | every acknowledged message is consumed by the end |
| duplicates | max? (0) | at most `max` messages are consumed more than once |
| nameservers_agree | within, after? or phase?, topic? | all live NameServers hold the same route for the topic (default: every topic) within `within` of `after` / the phase start |
| new_client | fails_in?, succeeds_in? | every client started by `new-client` in phase `fails_in` failed to start, and every one in `succeeds_in` started |
| sends_avoid | broker, phase | no message is acknowledged by that broker group (e.g. broker-a) during the phase |
| consumed_from | broker, phase, min? (1) | consumers read at least `min` messages from that broker node (e.g. a slave) in the phase |
| broker_kept | broker, phase?, nameservers? | no NameServer (of those listed) removes the broker during the phase |
| nameserver_switch | phase?, away_from? | some client moves to another NameServer during the phase (away from `away_from`, if given) |
"""

from __future__ import annotations

from collections import Counter

from chaos.checks import Check
from chaos.scenario import ExpectSpec, Scenario

from lab.config import LabConfig, parse_duration
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
        self.last_fault_on: dict[str, float] = {}

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
        elif kind == "ns.tables":
            self.tables[node] = r
        elif kind == "ns.register":
            self.last_register[(node, r["broker_addr"])] = r["t"]
        elif kind == "chaos.fault":
            for target in r.get("nodes", []):
                self.last_fault_on[target] = r["t"]
            for group in r.get("groups", []):
                for target in group:
                    self.last_fault_on[target] = r["t"]

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
    def __init__(self, spec, view, *, broker, within, after=None, nameservers=None):
        super().__init__(spec, view)
        self.broker, self.within, self.after, self.only = broker, within, after, nameservers
        self.start: float | None = None
        self.pending: set[str] = set()
        self.addr: str | None = None

    def _begin(self, t: float) -> None:
        self.start = t
        self.addr = self.view.address.get(self.broker)
        candidates = self.only or self.view.live_nameservers()
        self.pending = {ns for ns in candidates if self.addr and self.view.holds(ns, self.addr)}

    def observe(self, r: dict) -> None:
        if self.start is None:
            if self.after is None and r["kind"] == "chaos.fault" and self.broker in self.view.last_fault_on \
                    and self.view.last_fault_on[self.broker] == r["t"]:
                self._begin(r["t"])
            return
        if r["kind"] == "ns.remove" and r["broker_addr"] == self.addr:
            self.pending.discard(r["node"])
        elif r["kind"] == "node.stop" and r["node"] in self.pending:
            self.pending.discard(r["node"])  # a NameServer that died holds nothing
        if not self.pending and r["t"] <= self.start + self.within:
            self.succeed(f"removed from every NameServer within {r['t'] - self.start:.1f}s", r["t"])

    def tick(self, now: float) -> None:
        if self.start is None and self.after is not None and now >= self.after:
            self._begin(self.after)
        if self.start is not None and not self.decided:
            if not self.pending:
                self.succeed("removed from every NameServer that held it", now)
            elif now > self.start + self.within:
                self.fail(f"{', '.join(sorted(self.pending))} still held {self.broker} ({self.addr}) "
                          f"{self.within:g}s after t={self.start:g}s", now)

    def finish(self, now: float) -> None:
        if self.start is None:
            self.fail(f"no fault on {self.broker} happened, so nothing was checked", now)
        self.tick(now)


class NoStaleBroker(_Expectation):
    def __init__(self, spec, view, *, limit):
        super().__init__(spec, view)
        self.limit = limit
        self.worst = 0.0

    def tick(self, now: float) -> None:
        for ns in self.view.live_nameservers():
            for addr in self.view.tables.get(ns, {}).get("brokerLiveTable", {}):
                heard = self.view.last_register.get((ns, addr))
                if heard is None:
                    continue
                silent = now - heard
                self.worst = max(self.worst, silent)
                if silent > self.limit:
                    self.fail(f"{ns} kept {self.view.node_at.get(addr, addr)} ({addr}) unheard for "
                              f"{silent:.0f}s > {self.limit:g}s", now)

    def finish(self, now: float) -> None:
        self.tick(now)
        self.succeed(f"longest silence kept: {self.worst:.0f}s (limit {self.limit:g}s)", now)


class _PhaseCheck(_Expectation):
    def __init__(self, spec, view, *, start, end):
        super().__init__(spec, view)
        self.start, self.end = start, end

    def in_phase(self, t: float) -> bool:
        return self.start <= t <= self.end


class SendSuccessRate(_PhaseCheck):
    def __init__(self, spec, view, *, start, end, minimum, settle):
        super().__init__(spec, view, start=start, end=end)
        self.minimum, self.settle = minimum, settle
        self.first_sent: dict[str, float] = {}
        self.outcome: dict[str, bool] = {}

    def observe(self, r: dict) -> None:
        kind = r["kind"]
        if kind == "producer.send" and r["attempt"] == 1:
            self.first_sent.setdefault(r["msg_id"], r["t"])
        elif kind in ("producer.ack", "producer.failed"):
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
            self.fail(f"no message was sent between {self.start:g}s and {self.end:g}s", now)
        elif acked / total >= self.minimum:
            self.succeed(f"{acked}/{total} acknowledged ({acked / total:.1%} >= {self.minimum:.1%})", now)
        else:
            self.fail(f"{acked}/{total} acknowledged ({acked / total:.1%} < {self.minimum:.1%})", now)

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
        if lost:
            self.fail(f"{len(lost)} of {len(self.acked)} acknowledged messages never consumed, e.g. {lost[:3]}", now)
        else:
            self.succeed(f"all {len(self.acked)} acknowledged messages consumed", now)


class Duplicates(_Expectation):
    def __init__(self, spec, view, *, maximum):
        super().__init__(spec, view)
        self.maximum = maximum
        self.seen: Counter = Counter()
        self.duplicated = 0

    def observe(self, r: dict) -> None:
        if r["kind"] == "consumer.consume":
            self.seen[r["msg_id"]] += 1
            if self.seen[r["msg_id"]] == 2:
                self.duplicated += 1
                if self.duplicated > self.maximum:
                    self.fail(f"{self.duplicated} messages consumed more than once (max {self.maximum}), "
                              f"e.g. {r['msg_id']} at t={r['t']:g}s", r["t"])

    def finish(self, now: float) -> None:
        self.succeed(f"{self.duplicated} messages consumed more than once (max {self.maximum})", now)


class NameserversAgree(_Expectation):
    def __init__(self, spec, view, *, topics, after, within):
        super().__init__(spec, view)
        self.topics, self.after, self.within = topics, after, within

    def _disagreement(self) -> str | None:
        live = self.view.live_nameservers()
        for topic in self.topics:
            routes = {ns: self.view.route(ns, topic) for ns in live}
            if len({repr(r) for r in routes.values()}) > 1:
                return f"{topic}: " + "; ".join(
                    f"{ns} {'has no route' if r is None else 'routes to ' + ', '.join(f'{n} {dict(a)}' for n, a in r[1])}"
                    for ns, r in routes.items())
        return None

    def tick(self, now: float) -> None:
        if now < self.after or self.decided:
            return
        differs = self._disagreement()
        if differs is None:
            self.succeed(f"all live NameServers agree {now - self.after:.0f}s after t={self.after:g}s", now)
        elif now > self.after + self.within:
            self.fail(f"still disagree {self.within:g}s after t={self.after:g}s: {differs}", now)

    def finish(self, now: float) -> None:
        self.tick(now)
        if not self.decided:
            self.fail(f"the run ended before t={self.after:g}s", now)


class NewClient(_Expectation):
    def __init__(self, spec, view, *, fails, succeeds):
        super().__init__(spec, view)
        self.fails, self.succeeds = fails, succeeds  # (start, end) or None
        self.seen = {"fails": 0, "succeeds": 0}

    def observe(self, r: dict) -> None:
        if r["kind"] != "client.start":
            return
        for label, window, wanted in (("fails", self.fails, False), ("succeeds", self.succeeds, True)):
            if window and window[0] <= r["t"] <= window[1]:
                self.seen[label] += 1
                if r["ok"] != wanted:
                    self.fail(f"{r['node']} {'started' if r['ok'] else 'failed to start: ' + r.get('error', '')} "
                              f"at t={r['t']:g}s", r["t"])

    def finish(self, now: float) -> None:
        for label, window in (("fails", self.fails), ("succeeds", self.succeeds)):
            if window and not self.seen[label]:
                self.fail(f"no new client was started between {window[0]:g}s and {window[1]:g}s", now)
        self.succeed(", ".join(f"{n} new client(s) {'failed' if k == 'fails' else 'started'} as expected"
                               for k, n in self.seen.items() if n), now)


class SendsAvoid(_PhaseCheck):
    def __init__(self, spec, view, *, broker, start, end):
        super().__init__(spec, view, start=start, end=end)
        self.broker, self.count = broker, 0

    def observe(self, r: dict) -> None:
        if r["kind"] == "producer.ack" and r["broker"] == self.broker and self.in_phase(r["t"]):
            self.count += 1
            self.fail(f"{r['msg_id']} acknowledged by {self.broker} at t={r['t']:g}s", r["t"])

    def finish(self, now: float) -> None:
        self.succeed(f"no message went to {self.broker} between {self.start:g}s and {self.end:g}s", now)


class ConsumedFrom(_PhaseCheck):
    def __init__(self, spec, view, *, node, start, end, minimum):
        super().__init__(spec, view, start=start, end=end)
        self.node, self.minimum, self.count = node, minimum, 0

    def observe(self, r: dict) -> None:
        if r["kind"] == "consumer.consume" and self.in_phase(r["t"]) and \
                self.view.node_at.get(r.get("broker_addr", "")) == self.node:
            self.count += 1

    def finish(self, now: float) -> None:
        if self.count >= self.minimum:
            self.succeed(f"{self.count} messages consumed from {self.node}", now)
        else:
            self.fail(f"{self.count} messages consumed from {self.node} between {self.start:g}s and "
                      f"{self.end:g}s (wanted at least {self.minimum})", now)


class BrokerKept(_PhaseCheck):
    def __init__(self, spec, view, *, node, start, end, nameservers):
        super().__init__(spec, view, start=start, end=end)
        self.node, self.only = node, nameservers

    def observe(self, r: dict) -> None:
        if r["kind"] == "ns.remove" and self.in_phase(r["t"]) and r["broker_addr"] == self.view.address.get(self.node) \
                and (self.only is None or r["node"] in self.only):
            self.fail(f"{r['node']} removed {self.node} at t={r['t']:g}s ({r['reason']})", r["t"])

    def finish(self, now: float) -> None:
        self.succeed(f"every NameServer kept {self.node} between {self.start:g}s and {self.end:g}s", now)


class NameserverSwitch(_PhaseCheck):
    def __init__(self, spec, view, *, away_from, start, end):
        super().__init__(spec, view, start=start, end=end)
        self.away_from = away_from

    def observe(self, r: dict) -> None:
        if r["kind"] == "client.ns_switch" and self.in_phase(r["t"]) and r.get("from") and \
                (self.away_from is None or self.view.node_at.get(r["from"]) == self.away_from):
            self.succeed(f"{r['node']} moved from {self.view.node_at.get(r['from'], r['from'])} to "
                         f"{self.view.node_at.get(r['to'], r['to'])} at t={r['t']:g}s ({r['reason']})", r["t"])

    def finish(self, now: float) -> None:
        if self.decided:
            return
        away = f" away from {self.away_from}" if self.away_from else ""
        self.fail(f"no client moved to another NameServer{away} between {self.start:g}s and {self.end:g}s", now)


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
        broker = node("broker", "broker")
        within = duration("within")
        after = duration("after", None)
        check = BrokerRemoved(spec, view, broker=broker, within=within, after=after, nameservers=nameservers())
    elif kind == "no_stale_broker":
        n = config.nameserver
        limit = duration("limit", n.brokerChannelExpiredTime + n.scanNotActiveBrokerInterval)
        check = NoStaleBroker(spec, view, limit=limit + duration("slack", 0))
    elif kind == "send_success_rate":
        start, end = window()
        check = SendSuccessRate(spec, view, start=start, end=end, minimum=number("min", ..., 0, 1),
                                settle=config.producer.sendMsgTimeout * (config.producer.retryTimesWhenSendFailed + 1))
    elif kind == "all_acked_consumed":
        check = AllAckedConsumed(spec, view)
    elif kind == "duplicates":
        check = Duplicates(spec, view, maximum=int(number("max", 0, 0, 10**9)))
    elif kind == "nameservers_agree":
        topic = take("topic", None)
        if topic is not None and topic not in topology.topics:
            raise error(f"no topic named {topic!r} (topics: {', '.join(topology.topics)})", "topic")
        after = duration("after", None)
        if after is None:
            after = window()[0]
        check = NameserversAgree(spec, view, topics=[topic] if topic else list(topology.topics),
                                 after=after, within=duration("within"))
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
    else:
        raise error(f"unknown expectation type {kind!r} (types: {', '.join(TYPES)})", "type")
    if p:
        key = next(iter(p))
        raise error(f"unknown parameter for {kind}", key)
    return check


TYPES = ("broker_removed", "no_stale_broker", "send_success_rate", "all_acked_consumed", "duplicates",
         "nameservers_agree", "new_client", "sends_avoid", "consumed_from", "broker_kept", "nameserver_switch")
