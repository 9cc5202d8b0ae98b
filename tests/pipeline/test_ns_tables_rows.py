"""The pipeline reads `ns.tables` records of rows (schema 4) as it reads whole tables (schemas 1-3):
the same divergence windows, each record costing its own rows."""

from __future__ import annotations

from conftest import partition_log

from lab.pipeline import read
from lab.pipeline.run_metrics import EMPTY_DIGEST, RouteView
from lab.run.nstables import NESTED, TABLES


def rows_between(old: dict, new: dict) -> dict:
    """The schema 4 record that takes a NameServer from whole tables `old` to `new`."""
    sets, dels = {}, {}
    for table in TABLES:
        before, after = old.get(table, {}), new.get(table, {})
        if table in NESTED:
            pairs = lambda side: {(o, i): (v[i] if isinstance(v, dict) else True) for o, v in side.items() for i in v}  # noqa: E731
            b, a = pairs(before), pairs(after)
            for (o, i), v in a.items():
                if b.get((o, i)) != v:
                    if table == "topicQueueTable":
                        sets.setdefault(table, {}).setdefault(o, {})[i] = v
                    else:
                        sets.setdefault(table, {}).setdefault(o, []).append(i)
            for o, i in b.keys() - a.keys():
                dels.setdefault(table, {}).setdefault(o, []).append(i)
        else:
            for k, v in after.items():
                if before.get(k) != v:
                    sets.setdefault(table, {})[k] = v
            dels.update({table: [k for k in before if k not in after]} if before.keys() - after.keys() else {})
    return {**({"set": sets} if sets else {}), **({"del": dels} if dels else {})}


def as_rows(log):
    """The log as schema 4 writes it: each NameServer's first ns.tables whole, then rows."""
    held: dict[str, dict] = {}
    records = []
    for r in log.records:
        if r["kind"] == "node.start":
            held.pop(r["node"], None)
        if r["kind"] == "ns.tables":
            whole = {t: r[t] for t in TABLES if t in r}
            if r["node"] in held:
                rows = rows_between(held[r["node"]], {**held[r["node"]], **whole})
                r = {"t": r["t"], "node": r["node"], "kind": "ns.tables", **rows}
                if not rows:
                    continue
            held[r["node"]] = {**held.get(r["node"], {}), **whole}
        records.append(r)
    log.records = records
    return log


def divergence(log) -> list:
    [row] = read.decode("r", log.bytes()).to_pylist()
    return row["divergence_rows"]


def test_divergence_from_rows_is_divergence_from_whole_tables():
    whole = divergence(partition_log())
    log = as_rows(partition_log())
    assert any("set" in r or "del" in r for r in log.records)
    assert divergence(log) == whole and whole


def test_a_route_digest_is_the_same_whole_or_row_by_row_and_tells_views_apart():
    a = {"topicQueueTable": {"T": {"broker-a": [4, 4, 6, 0], "broker-b": [4, 4, 6, 0]}},
         "brokerAddrTable": {"broker-a": {"cluster": "c", "brokerAddrs": {"0": "a:1"}},
                             "broker-b": {"cluster": "c", "brokerAddrs": {"0": "b:1"}}}}
    b = {"topicQueueTable": {"T": {"broker-a": [4, 4, 6, 0]}},
         "brokerAddrTable": {"broker-a": {"cluster": "c", "brokerAddrs": {"0": "a:1"}}}}
    whole_a, whole_b, rows = RouteView(), RouteView(), RouteView()
    whole_a.feed(a)
    whole_b.feed(b)
    rows.feed({t: {} for t in TABLES})
    assert rows.digest == EMPTY_DIGEST
    rows.feed(rows_between({}, b))
    assert rows.digest == whole_b.digest != whole_a.digest
    rows.feed(rows_between(b, a))
    assert rows.digest == whole_a.digest
    rows.feed(rows_between(a, b))
    assert rows.digest == whole_b.digest
    assert not rows.feed({"set": {"brokerLiveTable": {"a:1": {}}}}), "a heartbeat's row is not a route"
