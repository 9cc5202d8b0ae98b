"""One run's metrics from its event log's records, in plain Python (docs/pipeline.md defines them).

A run is all within one log, so everything per run is computed where the log is decoded (read.py,
on an executor), in a few passes over its records; Spark only combines runs (metrics.py). Order
within a run is `seq`, the record's index in its log, not `t`: a fault and the removal it causes
can share a timestamp. Fields are read as a typed column would hold them: a value of the wrong type
(a hostile or damaged log) is null, and a comparison with null is false, as in SQL.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
from collections import Counter, defaultdict

from lab.run.nstables import merge_tables

# Faults that open a window on each of their targets, and the verbs that close it (heal closes
# every network fault, whatever its targets).
CLOSERS = {"kill": ["restart"], "stop": ["restart"], "freeze": ["unfreeze", "restart"],
           "partition": ["heal"], "isolate": ["heal"], "toxic": ["heal"],
           "ns-down": ["ns-up"], "wipe-perm": ["add-perm"]}
# Faults that make a master unusable to every producer (a partition cuts only some of them off);
# wipe-perm, on a broker group, blinds too.
BLINDING = frozenset({"kill", "stop", "freeze", "isolate"})
CENSOR_MARGIN = 2.0  # s: a producer still choosing the broker this close to the fault's end never stopped
COUNTED = frozenset({"producer.send", "producer.ack", "producer.failed", "consumer.consume"})
# What a timeline lane is drawn from: a NameServer's hold on the faulted broker (register, remove,
# its own start and stop), which node is which broker, and every send attempt's chosen broker group.
TIMELINE_KINDS = frozenset({"node.start", "node.stop", "broker.start", "ns.register", "ns.remove", "producer.send"})
_INT32 = 2 ** 31
_INT64 = 2 ** 63


# --- fields as typed columns hold them ---------------------------------------------------------------

def number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def text(value) -> str | None:
    return value if isinstance(value, str) else None


def integer(value, bound: int = _INT32) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and -bound <= value < bound
    return value if ok else None


def _min(values) -> object:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _max(values) -> object:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def percentile(values: list[float], p: float) -> float | None:
    """Spark's exact percentile: linear interpolation between the closest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    at = p * (len(ordered) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def spread(values: list, name: str) -> dict:
    present = [v for v in values if v is not None]
    return {f"{name}_p50_s": percentile(present, 0.5), f"{name}_p95_s": percentile(present, 0.95),
            f"{name}_max_s": _max(present)}


# --- what each record means ---------------------------------------------------------------------------

ROUTE_TABLES = ("topicQueueTable", "brokerAddrTable")


class RouteView:
    """A NameServer's route tables as its `ns.tables` records left them, and what GET_ROUTEINFO_BY_TOPIC
    would answer for every topic as a digest: NameServers with equal digests agree. brokerLiveTable
    is left out on purpose: heartbeats change it, routes do not show it. The digest is a sum of one
    hash per row (a topic's queue data on one broker, a broker name's addresses), kept as records
    set and delete rows: a record costs its own rows, not the tables (schema 4)."""

    def __init__(self):
        self.tables: dict = {}
        self.digest = EMPTY_DIGEST

    def feed(self, record: dict) -> bool:
        """Merge one record; whether it touched a route table."""
        rows = _route_rows(self.tables, record)
        old = [_row_hash(self.tables, row) for row in rows]
        merge_tables(self.tables, record)
        self.digest = (self.digest + sum(_row_hash(self.tables, row) for row in rows) - sum(old)) % _DIGEST_MOD
        return bool(rows)


def _route_rows(tables: dict, record: dict) -> list[tuple]:
    """The route rows a record may change: every row of a table it carries whole, its rows set or
    deleted."""
    rows: dict = {}
    for name in ROUTE_TABLES:
        whole = record.get(name)
        if isinstance(whole, dict):
            for side in (tables.get(name, {}), whole):
                for key, value in side.items():
                    if name == "brokerAddrTable":
                        rows[(name, key)] = None
                    elif isinstance(value, dict):
                        rows.update(((name, key, broker), None) for broker in value)
        for part in ("set", "del"):
            changes = record.get(part)
            changes = changes.get(name) if isinstance(changes, dict) else None
            if name == "brokerAddrTable" and isinstance(changes, (dict, list)):
                rows.update(((name, key), None) for key in changes if isinstance(key, str))
            elif isinstance(changes, dict):
                for topic, brokers in changes.items():
                    if isinstance(brokers, (dict, list)):
                        rows.update(((name, topic, broker), None) for broker in brokers if isinstance(broker, str))
    return list(rows)


def _row_hash(tables: dict, row: tuple) -> int:
    """0 for a row the tables lack, so the empty view's digest is 0."""
    value = tables.get(row[0], {}).get(row[1])
    if len(row) == 3:
        value = value.get(row[2]) if isinstance(value, dict) else None
    if value is None:
        return 0
    text = json.dumps([row, value], sort_keys=True, default=str).encode()
    return int.from_bytes(hashlib.sha1(text).digest()[:8], "big")


_DIGEST_MOD = 1 << 64
EMPTY_DIGEST = 0  # a (re)started NameServer's
DOWN = "down"  # a stopped NameServer's view


def grid_label(grid: dict | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (grid or {}).items())


def fault_targets(record: dict, nameservers: list[str]) -> list[str]:
    """A chaos.fault's nodes (`all` of ns-down/ns-up: every NameServer, as lab/control/actions.py
    does), or every node of its partition groups."""
    nodes = list(record.get("nodes") or [])
    if record.get("verb") in ("ns-down", "ns-up") and nodes == ["all"]:
        nodes = nameservers
    return [str(n) for n in nodes] + [str(n) for group in record.get("groups") or [] for n in group]


# --- messages ---------------------------------------------------------------------------------------

def count_messages(records: list[dict]) -> tuple[list[dict], dict]:
    """A log's messages (a msg_id with a producer.send or a producer.failed; its time the start of
    its first attempt): per second, the messages whose first attempt started in it, acked and
    failed, and the ack and failure records at it; and the log's totals."""
    per_msg: dict = {}  # msg_id -> [first attempt's start, first failure's t, attempts, acks, consumed]
    ack_records, failed_records = Counter(), Counter()
    for r in records:
        kind = r.get("kind")
        if kind not in COUNTED:
            continue
        m = per_msg.setdefault(text(r.get("msg_id")), [None, None, 0, 0, 0])
        t = number(r.get("t"))
        if kind == "producer.send":
            m[2] += 1
            if t is not None:
                start = t - (number(r.get("latency")) or 0.0)
                m[0] = start if m[0] is None else min(m[0], start)
        elif kind == "producer.ack":
            m[3] += 1
            if t is not None:
                ack_records[math.floor(t)] += 1
        elif kind == "producer.failed":
            if t is not None:
                m[1] = t if m[1] is None else min(m[1], t)
                failed_records[math.floor(t)] += 1
        else:
            m[4] += 1
    seconds: dict[int, list[int]] = {}  # second -> [messages, acked, failed]
    totals = dict.fromkeys(("messages", "acked", "failed", "lost", "duplicates", "retries"), 0)
    totals["max_retries"] = None
    for send_t, failed_t, attempts, acks, consumed in per_msg.values():
        if send_t is None and failed_t is None:
            continue  # only consumed (its send not in the log): not a message this run sent
        retries = max(attempts - 1, 0)
        acked, failed = acks > 0, failed_t is not None
        counts = seconds.setdefault(math.floor(send_t if send_t is not None else failed_t), [0, 0, 0])
        counts[0] += 1
        counts[1] += acked
        counts[2] += failed
        totals["messages"] += 1
        totals["acked"] += acked
        totals["failed"] += failed
        totals["lost"] += acked and consumed == 0
        totals["duplicates"] += consumed > 1
        totals["retries"] += retries
        totals["max_retries"] = max(totals["max_retries"] or 0, retries)
    rows = []
    for second in sorted(seconds.keys() | ack_records.keys() | failed_records.keys()):
        messages, acked, failed = seconds.get(second, (0, 0, 0))
        rows.append({"second": second, "messages": messages, "acked": acked, "failed": failed,
                     "ack_records": ack_records[second], "failed_records": failed_records[second]})
    return rows, totals


# --- the run -----------------------------------------------------------------------------------------

class Run:
    """A log's records, indexed once for the metrics below."""

    def __init__(self, records: list[dict]):
        self.records = records
        self.by_kind: dict[str, list[int]] = defaultdict(list)  # kind -> seqs
        for seq, r in enumerate(records):
            self.by_kind[r.get("kind")].append(seq)
        self.start = next((records[s] for s in self.by_kind.get("run.start", [])), None)
        self.end_t = next((number(r["t"]) for r in reversed(records) if "t" in r), None)
        self.roles = self._roles()
        self.nameservers = sorted(n for n, role in self.roles if role == "nameserver")
        self.brokers = self._brokers()

    def of(self, *kinds: str) -> list[tuple[int, dict]]:
        seqs = sorted(s for kind in kinds for s in self.by_kind.get(kind, []))
        return [(s, self.records[s]) for s in seqs]

    def t(self, seq: int) -> float | None:
        return number(self.records[seq].get("t"))

    def _roles(self) -> set[tuple[str | None, str | None]]:
        """Every node with its role: run.start's nodes, and clients started mid-run."""
        roles = set()
        for _, r in self.of("run.start"):
            nodes = r.get("nodes")
            roles.update((str(n), str(role)) for n, role in (nodes.items() if isinstance(nodes, dict) else []))
        for _, r in self.of("node.start"):
            roles.add((text(r.get("node")), text(r.get("role"))))
        return roles

    def _brokers(self) -> dict[str, dict]:
        """Per broker node: its address, broker name and id (the least of each, if it changed)."""
        found: dict[str, list[tuple]] = defaultdict(list)
        for _, r in self.of("broker.start"):
            node = text(r.get("node"))
            if node is not None:
                found[node].append((text(r.get("address")), text(r.get("broker_name")), integer(r.get("broker_id"))))
        return {node: {"address": _min(v[0] for v in values), "broker_name": _min(v[1] for v in values),
                       "broker_id": _min(v[2] for v in values)} for node, values in found.items()}


def run_info(run: Run, problem: str | None) -> dict:
    """What the run is and how it was judged. A log without run.start (random bytes, another file)
    has no scenario and no grid point."""
    start = run.start or {}
    grid = start.get("grid") if isinstance(start.get("grid"), dict) else {}
    grid = {str(k): str(v) for k, v in grid.items()}
    info = {"scenario": text(start.get("scenario")), "seed": integer(start.get("seed"), _INT64),
            "grid": grid if run.start else None, "grid_index": integer(start.get("grid_index")),
            "grid_label": grid_label(grid) if run.start else None,
            "end_t": run.end_t, "complete": bool(run.by_kind.get("run.end")), "events": len(run.records),
            "problem": problem}
    return {**info, **verdict(run, problem)}


def verdict(run: Run, problem: str | None) -> dict:
    """The lab's verdict (chaos.checks.verdict) from the check.result records: each expectation's
    last result counts; one failed is invalid; all held is valid; an unjudged one, a damaged log or
    none decided leaves the run without a verdict."""
    last: dict = {}
    for seq, r in run.of("check.result"):
        last[text(r.get("name"))] = (seq, text(r.get("status")), text(r.get("detail")))
    if not last:
        return {"verdict": None, "failed_checks": []}
    failed = [(seq, name, detail) for name, (seq, status, detail) in last.items() if status == "failed"]
    unjudged = sum(1 for _, status, _ in last.values() if status is not None and status != "ok")
    judged = "invalid" if failed else ("valid" if problem is None and unjudged == 0 else None)
    return {"verdict": judged,
            "failed_checks": [": ".join(p for p in (name, detail) if p is not None) for _, name, detail in sorted(failed)]}


# --- faults ------------------------------------------------------------------------------------------

def fault_windows(run: Run) -> list[dict]:
    """One row per fault and target: from the fault to the verb that undoes it, or the run's end."""
    faults = [(seq, text(r.get("verb")), run.t(seq), fault_targets(r, run.nameservers), number(r.get("for_s")))
              for seq, r in run.of("chaos.fault")]
    windows = []
    for seq, verb, start, targets, lasts in faults:
        if verb not in CLOSERS:
            continue
        for target in dict.fromkeys(targets):
            closed = _min(t for c_seq, c_verb, t, c_targets, _ in faults
                          if c_seq > seq and c_verb in CLOSERS[verb] and (not c_targets or target in c_targets))
            if lasts is not None and start is not None:  # a request fault given a time (`for`)
                closed = _min([closed, start + lasts])
            end = closed if closed is not None else run.end_t
            windows.append({"fault_seq": seq, "target": target, "verb": verb, "start": start, "end": end,
                            "duration_s": None if end is None or start is None else end - start})
    return windows


def _within(t: float | None, start: float | None, end: float | None) -> bool:
    return t is not None and start is not None and end is not None and start <= t <= end


def detection(run: Run, windows: list[dict]) -> list[dict]:
    """Per fault on a broker node and NameServer that held the broker when it struck: when that
    NameServer removed it (null: it kept the broker until the fault ended)."""
    holdings = defaultdict(list)  # ns -> [(seq, broker address or None (started, stopped), holds)]
    removed = defaultdict(list)  # (ns, address) -> [(seq, t, reason)]
    nameservers = set(run.nameservers)
    for seq, r in run.of("ns.register", "ns.remove", "node.start", "node.stop"):
        ns = text(r.get("node"))
        if ns in nameservers:
            addr = text(r.get("broker_addr"))
            holdings[ns].append((seq, addr, r.get("kind") == "ns.register"))
            if r.get("kind") == "ns.remove" and addr is not None:
                removed[ns, addr].append((seq, run.t(seq), text(r.get("reason"))))
    rows = []
    for w in windows:
        broker = run.brokers.get(w["target"])
        if broker is None:
            continue
        address = broker["address"]
        for ns in run.nameservers:
            held = [holds for seq, addr, holds in holdings[ns]
                    if seq < w["fault_seq"] and (addr is None or addr == address)]
            if not held or not held[-1]:
                continue
            after = [(seq, t, reason) for seq, t, reason in removed.get((ns, address), [])
                     if seq > w["fault_seq"] and t is not None and w["end"] is not None and t <= w["end"]]
            removed_t = _min(t for _, t, _ in after)
            rows.append({"fault_seq": w["fault_seq"], "verb": w["verb"], "broker": w["target"], "ns": ns,
                         "start": w["start"], "removed_t": removed_t,
                         "detection_s": None if removed_t is None or w["start"] is None else removed_t - w["start"],
                         "reason": after[0][2] if after else None, "detected": removed_t is not None})
    return rows


def blind_windows(run: Run, windows: list[dict]) -> list[dict]:
    """Per blinding fault on a master (or wipe-perm on a group) and producer: how long after the
    fault the producer last chose that broker group for a send attempt."""
    masters = {node: b["broker_name"] for node, b in run.brokers.items() if b["broker_id"] == 0}
    struck = [{**w, "broker_name": masters[w["target"]]} for w in windows
              if w["verb"] in BLINDING and w["target"] in masters]
    struck += [{**w, "broker_name": w["target"]} for w in windows if w["verb"] == "wipe-perm"]
    if not struck:
        return []
    producer_last: dict = {}  # producer -> its last choice of any broker
    chosen = defaultdict(list)  # (producer, broker group) -> [(chosen_t, failed)], by time below
    for seq in run.by_kind.get("producer.send", []):
        r = run.records[seq]
        t, producer = number(r.get("t")), text(r.get("node"))
        chosen_t = None if t is None else t - (number(r.get("latency")) or 0.0)
        producer_last[producer] = _max([producer_last.get(producer), chosen_t])
        broker = text(r.get("broker"))
        if chosen_t is not None and producer is not None and broker is not None:
            result = text(r.get("result"))
            chosen[producer, broker].append((chosen_t, result is not None and result != "ok"))
    for attempts in chosen.values():
        attempts.sort()
    rows = []
    for w in struck:
        for producer, last_t in producer_last.items():
            attempts = chosen.get((producer, w["broker_name"]), [])
            if w["start"] is None or w["end"] is None:
                hits = []
            else:
                low = bisect.bisect_left(attempts, (w["start"], False))
                high = bisect.bisect_right(attempts, (w["end"], True))
                hits = attempts[low:high]
            last_chosen = hits[-1][0] if hits else None
            # Still choosing it when the fault (or the producer) ended: the window is only a lower bound.
            bound = _min([w["end"], last_t])
            rows.append({"fault_seq": w["fault_seq"], "verb": w["verb"], "target": w["target"],
                         "broker_name": w["broker_name"], "producer": producer, "start": w["start"], "end": w["end"],
                         "last_chosen_t": last_chosen,
                         "blind_s": last_chosen - w["start"] if last_chosen is not None else 0.0,
                         "attempts": len(hits), "failed_attempts": sum(failed for _, failed in hits),
                         "censored": last_chosen is not None and bound is not None
                         and last_chosen >= bound - CENSOR_MARGIN})
    return rows


def removals(run: Run, windows: list[dict]) -> list[dict]:
    """Every removal; a false one took a broker away, not by unregistering, while no fault was on
    that broker or on the NameServer that removed it."""
    by_address = defaultdict(list)
    for node, b in sorted(run.brokers.items()):
        if b["address"] is not None:
            by_address[b["address"]].append(node)
    rows = []
    for seq, r in run.of("ns.remove"):
        t, ns, address, reason = run.t(seq), text(r.get("node")), text(r.get("broker_addr")), text(r.get("reason"))
        brokers = by_address.get(address) or [None]
        during = any(_within(t, w["start"], w["end"]) and w["target"] in (broker, ns)
                     for broker in brokers for w in windows)
        false = None if reason is None and not during else (reason != "unregistered" and not during)
        rows += [{"t": t, "ns": ns, "broker": broker, "address": address, "reason": reason, "during_fault": during,
                  "false_removal": false} for broker in brokers]
    return rows


# --- the NameServers ---------------------------------------------------------------------------------

def divergence(run: Run) -> list[dict]:
    """Windows during which the live NameServers would answer route queries differently."""
    nameservers = set(run.nameservers)
    views: dict[str, int | str] = {}
    routes: dict[str, RouteView] = {}
    steps = []  # at every change of a NameServer's view: (t, how many distinct routes the live ones answer)
    for seq, r in run.of("ns.tables", "node.start", "node.stop"):
        ns = text(r.get("node"))
        if ns not in nameservers:
            continue
        kind = r.get("kind")
        if kind == "ns.tables":
            # Since schema 4 a record carries the rows that changed (docs/events.md).
            view = routes.setdefault(ns, RouteView())
            if view.feed(r) or ns not in views or views[ns] == DOWN:
                views[ns] = view.digest
        else:
            routes[ns] = RouteView()
            views[ns] = EMPTY_DIGEST if kind == "node.start" else DOWN
        steps.append((run.t(seq), len({v for v in views.values() if v != DOWN})))
    rows, episode = [], None
    for i, (t, count) in enumerate(steps):
        until = steps[i + 1][0] if i + 1 < len(steps) else run.end_t
        if count > 1:
            if episode is None:
                episode = {"start": [], "end": [], "views": []}
                rows.append(episode)
            episode["start"].append(t)
            episode["end"].append(until)
            episode["views"].append(count)
        else:
            episode = None
    out = []
    for e in rows:
        start, end = _min(e["start"]), _max(e["end"])
        duration = None if start is None or end is None else end - start
        if duration is not None and duration > 0:
            out.append({"start": start, "end": end, "views": max(e["views"]), "duration_s": duration})
    return out


def recovery(run: Run) -> list[dict]:
    """Every time all NameServers were down and one came back: how long until a broker registered
    again and until a client got a route from a NameServer."""
    nameservers = set(run.nameservers)
    live, edges = 0, []  # edges: (seq, t, live after it) when the count of live NameServers left or reached 0
    before = None
    for seq, r in run.of("node.start", "node.stop"):
        if text(r.get("node")) not in nameservers:
            continue
        live += 1 if r.get("kind") == "node.start" else -1
        if before is not None and ((live == 0 and before > 0) or (live > 0 and before == 0)):
            edges.append((seq, run.t(seq), live))
        before = live
    rows = []
    for (_, down_t, after), (up_seq, up_t, _) in zip(edges, edges[1:]):
        if after != 0 or up_t is None:
            continue
        registered_t = _min(run.t(s) for s in run.by_kind.get("ns.register", []) if s > up_seq)
        routed_t = _min(run.t(s) for s in run.by_kind.get("client.route", []) if s > up_seq
                        and run.records[s].get("ok") is True and run.records[s].get("source") == "nameserver")
        rows.append({"down_t": down_t, "up_t": up_t,
                     "outage_s": None if down_t is None else up_t - down_t,
                     "registered_s": None if registered_t is None else registered_t - up_t,
                     "recovery_s": None if routed_t is None else routed_t - up_t})
    return rows


# --- over time ---------------------------------------------------------------------------------------

def latency_buckets(run: Run) -> list[dict]:
    """Send attempts in tenth-of-a-decade latency buckets (log10 of seconds)."""
    buckets: dict[float, list[int]] = {}
    for seq in run.by_kind.get("producer.send", []):
        r = run.records[seq]
        latency = number(r.get("latency"))
        if latency is not None and latency > 0:
            counts = buckets.setdefault(math.floor(math.log10(latency) * 10) / 10, [0, 0])
            counts[0] += 1
            result = text(r.get("result"))
            counts[1] += result is not None and result != "ok"
    return [{"log10_s": b, "sends": n, "failed": f} for b, (n, f) in sorted(buckets.items())]


def traffic(seconds: list[dict], end_t: float | None) -> list[dict]:
    """Every second of the run, quiet ones as 0: its ack and failure records."""
    counted = {s["second"]: s for s in seconds}
    last = math.floor(end_t or 0.0)
    return [{"second": second, "acked": counted[second]["ack_records"] if second in counted else 0,
             "failed": counted[second]["failed_records"] if second in counted else 0}
            for second in range(0, last + 1)]


def timeline(run: Run) -> list[dict]:
    """The events a per-node timeline draws, each with its node's role."""
    roles: dict[str, str] = {}
    for node, role in run.roles:
        if node is not None and role is not None:
            roles[node] = min(roles.get(node, role), role)
    rows = []
    for seq, r in run.of(*TIMELINE_KINDS):
        node = text(r.get("node"))
        rows.append({"seq": seq, "t": number(r.get("t")), "node": node, "node_role": roles.get(node),
                     "kind": r.get("kind"), "broker_addr": text(r.get("broker_addr")),
                     "address": text(r.get("address")), "broker_name": text(r.get("broker_name")),
                     "broker_id": integer(r.get("broker_id")), "broker": text(r.get("broker")),
                     "result": text(r.get("result")), "latency": number(r.get("latency"))})
    return rows


# --- everything ----------------------------------------------------------------------------------------

def analyse(records: list[dict], problem: str | None) -> tuple[dict, dict[str, list[dict]]]:
    """The run's row of the runs table, and its rows of every per-run table (by table name)."""
    run = Run(records)
    seconds, totals = count_messages(records)
    windows = fault_windows(run)
    tables = {
        "faults": windows,
        "availability": [{"second": s["second"], "messages": s["messages"], "acked": s["acked"], "failed": s["failed"],
                          "availability": s["acked"] / s["messages"]} for s in seconds if s["messages"] > 0],
        "detection": detection(run, windows),
        "blind": blind_windows(run, windows),
        "removals": removals(run, windows),
        "divergence": divergence(run),
        "recovery": recovery(run),
        "traffic": traffic(seconds, run.end_t),
        "latency_buckets": latency_buckets(run),
        "timeline": timeline(run),
    }
    tables["apps"], tables["app_recovery"] = apps(run)
    faulted = len(run.by_kind.get("chaos.request", []))  # requests a request fault acted on
    return {**run_info(run, problem), **totals, **summary(tables, totals, faulted),
            **app_summary(tables["apps"], tables["app_recovery"])}, tables


def summary(tables: dict[str, list[dict]], totals: dict, faulted_requests: int) -> dict:
    """The run's figures over its own tables."""
    detection, blind = tables["detection"], tables["blind"]
    messages = totals["messages"]
    return {
        "worst_second": _min(s["availability"] for s in tables["availability"]),
        **spread([d["detection_s"] for d in detection], "detection"),
        "undetected": sum(not d["detected"] for d in detection) if detection else None,
        **spread([b["blind_s"] for b in blind], "blind"),
        "blind_censored": sum(b["censored"] for b in blind) if blind else None,
        "divergence_s": sum((d["duration_s"] for d in tables["divergence"]), 0.0),
        "longest_divergence_s": _max(d["duration_s"] for d in tables["divergence"]),
        "recovery_s": _max(r["recovery_s"] for r in tables["recovery"]),
        "false_removals": sum(r["false_removal"] is True for r in tables["removals"]),
        "faulted_requests": faulted_requests,
        "availability": totals["acked"] / messages if messages else None,
        "retries_per_message": totals["retries"] / messages if messages else None,
    }


# --- an application under test (issue 39: lab/apps, its app.* records) ---------------------------------
# The same fault windows and the same recovery rule as the app expectations (lab/control/
# app_expectations.py: FaultWindows, AppRecovers), so a verdict and the report read a run alike.

APP_KINDS = ("app.send", "app.deliver", "app.heartbeat", "app.exit")


def _broker_group(run: Run, peer: str) -> str:
    """A broker node's group (broker-a-1 -> broker-a), as the app expectations key a message: a
    slave serves its master's offsets."""
    broker = run.brokers.get(peer)
    if broker is not None and broker["broker_name"] is not None:
        return broker["broker_name"]
    name, _, index = peer.rpartition("-")
    return name if name and index.isdigit() else peer


def _app_fault_ends(run: Run) -> tuple[list[float], dict[float, str], float | None]:
    """When the run came out of every fault (app_expectations.FaultWindows: the ends app_recovers
    judges), what ended the faults at each, and when the first fault began."""
    from lab.control.app_expectations import FaultWindows

    faults = FaultWindows(run.nameservers)
    for _, r in run.of("chaos.fault"):
        t = number(r.get("t"))
        if t is None:
            continue
        try:
            faults.observe({**r, "t": t, "nodes": [str(n) for n in r.get("nodes") or []]})
        except (TypeError, ValueError, KeyError, AttributeError):
            continue  # a damaged fault record opens no window
    if run.end_t is not None:
        faults.advance(run.end_t)
    first = faults.union[0][0] if faults.union else None
    return faults.ends(), {end: faults.ended_by(end) for end in faults.ends()}, first


def app_baseline(acks: list[float], first_fault: float | None) -> int | None:
    """The app's pre-fault rate: the median of its acknowledged sends per whole second [k, k+1)
    from its first acknowledged send to the first fault (every such second of the run when it had
    no fault), rounded down, at least 1; None when no whole second lies there."""
    if not acks:
        return None
    begin, stop = math.ceil(min(acks)), math.floor(first_fault if first_fault is not None else max(acks))
    seconds = range(begin, stop)
    if not seconds:
        return None
    counts = Counter(math.floor(t) for t in acks)
    return max(1, math.floor(percentile([counts[k] for k in seconds], 0.5)))


def app_recovery_time(acks: list[float], end: float, minimum: float, until: float) -> float | None:
    """AppRecovers' rule with `within` running to `until` (the run's end): seconds from the fault's
    end to the first acknowledged send that closes a second (from the end on) holding `minimum`."""
    from lab.control.app_expectations import AppRecovers

    check = AppRecovers("report", minimum=minimum, within=max(0.0, until - end))
    check.acks = acks
    took = check._recovered(end)
    return None if took is None else took - end


def _lost(app: dict) -> int | None:
    """The app's acknowledged messages delivered to none of its consumer groups (by key, or by
    UNIQ_KEY); None when it has no consumer group: nothing it could have consumed."""
    if not app["groups"]:
        return None

    def delivered(key: tuple, uniq_key: str | None, group: str) -> bool:
        by_uniq_key = bool(uniq_key) and uniq_key in app["delivered_uniq"].get(group, ())
        return key in app["delivered"].get(group, ()) or by_uniq_key

    return sum(1 for key, uniq_key in app["acked"].items()
               if not any(delivered(key, uniq_key, group) for group in app["groups"]))


def apps(run: Run) -> tuple[list[dict], list[dict]]:
    """Per app (node) of the run: its sends, failures, losses and duplicates (the `apps` table), and
    its recovery after each fault end (`app_recovery`). Nothing for a run without app records."""
    seen: dict[str, dict] = {}

    def app(name: str) -> dict:
        return seen.setdefault(name, {"acks": [], "acked_sends": 0, "failed": 0, "acked": {}, "groups": set(),
                                      "delivered": {}, "delivered_uniq": {}, "deliveries": 0, "extra": 0,
                                      "exit": None})

    for _, r in run.of(*APP_KINDS):
        name = text(r.get("node"))
        if name is None:
            continue
        a, kind = app(name), r.get("kind")
        if kind == "app.exit":
            a["exit"] = r
        elif kind == "app.heartbeat":
            a["groups"].update(g for g in r.get("consumer_groups") or [] if isinstance(g, str))
        elif kind == "app.send":
            t, peer, topic = number(r.get("t")), text(r.get("peer")), text(r.get("topic"))
            if integer(r.get("result")) == 0:  # acknowledged; another code or none (null) failed
                offset, queue = integer(r.get("offset"), _INT64), integer(r.get("queue"))
                batch = r.get("uniq_keys")  # a batch: its messages at offset, offset + 1, ...
                uniq_keys = [text(u) for u in batch] if isinstance(batch, list) and batch \
                    else [text(r.get("uniq_key"))]
                for i, uniq_key in enumerate(uniq_keys):
                    key = (_broker_group(run, peer or "?"), topic, queue, offset + i) \
                        if offset is not None else ("?", topic, None, uniq_key)
                    a["acked"].setdefault(key, uniq_key)
                a["acked_sends"] += 1
                if t is not None:
                    a["acks"].append(t)
            else:
                a["failed"] += 1
        elif kind == "app.deliver":
            group, peer = text(r.get("group")), text(r.get("peer")) or "?"
            if group is None:
                continue
            a["groups"].add(group)
            keys = a["delivered"].setdefault(group, Counter())
            uniq = a["delivered_uniq"].setdefault(group, set())
            for message in r.get("messages") or []:
                if not isinstance(message, (list, tuple)) or len(message) != 2:
                    continue
                offset, uniq_key = integer(message[0], _INT64), text(message[1])
                key = (_broker_group(run, peer), text(r.get("topic")), integer(r.get("queue")), offset)
                keys[key] += 1
                a["deliveries"] += 1
                a["extra"] += keys[key] > 1
                if uniq_key:
                    uniq.add(uniq_key)
    ends, enders, first_fault = _app_fault_ends(run)
    rows, recovery_rows = [], []
    for name, a in sorted(seen.items()):
        acks = sorted(a["acks"])
        exit_record = a["exit"] or {}
        stopped = exit_record.get("stopped_by_lab")
        rows.append({"app": name, "sends": a["acked_sends"] + a["failed"],
                     "acked": a["acked_sends"], "failed": a["failed"], "lost": _lost(a), "duplicates": a["extra"],
                     "deliveries": a["deliveries"], "exit_code": integer(exit_record.get("code")),
                     "exit_signal": text(exit_record.get("signal")),
                     "stopped_by_lab": stopped if isinstance(stopped, bool) else None,
                     "died": bool(a["exit"]) and stopped is False})
        baseline = app_baseline(acks, first_fault)
        for end in ends:
            if not acks or end < acks[0]:
                continue  # the app acknowledged nothing before this fault ended: nothing to recover to
            took = None if baseline is None or run.end_t is None else app_recovery_time(acks, end, baseline, run.end_t)
            recovery_rows.append({"app": name, "fault_end": end, "ended_by": enders.get(end), "baseline": baseline,
                                  "recovery_s": took, "recovered": took is not None if baseline is not None else None})
    return rows, recovery_rows


def app_summary(rows: list[dict], recovery_rows: list[dict]) -> dict:
    """The run's app figures, over every app of it; all null for a run without an app."""
    if not rows:
        return dict.fromkeys(APP_FIGURES)
    losses = [r["lost"] for r in rows if r["lost"] is not None]
    return {"app_sends": sum(r["sends"] for r in rows), "app_acked": sum(r["acked"] for r in rows),
            "app_failed": sum(r["failed"] for r in rows), "app_lost": sum(losses) if losses else None,
            "app_duplicates": sum(r["duplicates"] for r in rows),
            "app_recovery_s": _max(r["recovery_s"] for r in recovery_rows),
            "app_unrecovered": sum(r["recovered"] is False for r in recovery_rows),
            "app_died": sum(r["died"] for r in rows)}


APP_FIGURES = ("app_sends", "app_acked", "app_failed", "app_lost", "app_duplicates", "app_recovery_s",
               "app_unrecovered", "app_died")
