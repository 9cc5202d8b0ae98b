"""A NameServer's five tables as plain data: what `ns.tables` events carry, and what the TUI, the
checks, the pipeline and the replay rebuild a NameServer's view from. Keys keep RocketMQ's table names.

Since schema 4 an `ns.tables` carries the rows that changed since the NameServer's previous one:
`set` (rows new or changed) and `del` (rows gone), per table. Only the first after a (re)start
carries the five tables whole, as every record of schemas 1-3 did (those of schema 3 only the
tables that changed). A whole table per record made a registration flood write hundreds of MB:
each record grew with the table. Rows are a topic's queue data on one broker (topicQueueTable),
a broker name (brokerAddrTable), a broker name in a cluster (clusterAddrTable), an address
(brokerLiveTable, filterServerTable):

    set: {"topicQueueTable": {topic: {brokerName: [r, w, perm, sysFlag]}},
          "brokerAddrTable": {brokerName: {"cluster": c, "brokerAddrs": {"0": addr}}},
          "clusterAddrTable": {cluster: [brokerName added]},
          "brokerLiveTable": {addr: {"dataVersion": [ts, counter], "haServerAddr": a}},
          "filterServerTable": {addr: [addr]}}
    del: {"topicQueueTable": {topic: [brokerName]}, "clusterAddrTable": {cluster: [brokerName]},
          "brokerAddrTable" / "brokerLiveTable" / "filterServerTable": [key]}

A topic or cluster left without rows goes. A row set again keeps its place; a new one goes last.
Readers keep each NameServer's tables and `merge_tables` each record into them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # readers of a log (the pipeline, the replay) need no NameServer
    from nameserver.routes import RouteInfoManager

TABLES = ("topicQueueTable", "brokerAddrTable", "clusterAddrTable", "brokerLiveTable", "filterServerTable")
NESTED = ("topicQueueTable", "clusterAddrTable")  # rows are (outer key, broker name)
_GONE = object()


def snapshot(routes: RouteInfoManager) -> dict:
    """Everything but heartbeat times, which change every 30 s and travel in `ns.register` events."""
    return {
        "topicQueueTable": {topic: {name: _queue(qd) for name, qd in queue_map.items()}
                            for topic, queue_map in routes.topic_queue_table.items()},
        "brokerAddrTable": {name: _broker(bd) for name, bd in routes.broker_addr_table.items()},
        "clusterAddrTable": {cluster: list(names) for cluster, names in routes.cluster_addr_table.items()},
        "brokerLiveTable": {addr: _live(live) for addr, live in routes.broker_live_table.items()},
        "filterServerTable": {addr: list(servers) for addr, servers in routes.filter_server_table.items()},
    }


def _queue(qd) -> list:
    return [qd.read_queue_nums, qd.write_queue_nums, qd.perm, qd.topic_sys_flag]


def _broker(bd) -> dict:
    return {"cluster": bd.cluster, "brokerAddrs": {str(i): a for i, a in bd.broker_addrs.items()}}


def _live(live) -> dict:
    return {"dataVersion": list(live.data_version), "haServerAddr": live.ha_server_addr}


def _row_now(routes: RouteInfoManager, table: str, key):
    """A row as the NameServer holds it now (_GONE when it has none); clusterAddrTable's is True."""
    if table == "topicQueueTable":
        qd = routes.topic_queue_table.get(key[0], {}).get(key[1])
        return _GONE if qd is None else _queue(qd)
    if table == "clusterAddrTable":
        return True if key[1] in routes.cluster_addr_table.get(key[0], ()) else _GONE
    if table == "brokerAddrTable":
        bd = routes.broker_addr_table.get(key)
        return _GONE if bd is None else _broker(bd)
    if table == "brokerLiveTable":
        live = routes.broker_live_table.get(key)
        return _GONE if live is None else _live(live)
    servers = routes.filter_server_table.get(key)
    return _GONE if servers is None else list(servers)


def _row_held(tables: dict, table: str, key):
    held = tables.get(table, {})
    if table == "topicQueueTable":
        return held.get(key[0], {}).get(key[1], _GONE)
    if table == "clusterAddrTable":
        return True if key[1] in held.get(key[0], ()) else _GONE
    return held.get(key, _GONE)


def _every_row(tables: dict, routes: RouteInfoManager) -> list:
    """Every row either side has, for a manager that does not say what it touched (the workshop's)."""
    keys: dict = {}
    for side in (tables, snapshot(routes)):
        for table in TABLES:
            for outer, value in side.get(table, {}).items():
                if table in NESTED:
                    keys.update(((table, (outer, inner)), None) for inner in value)
                else:
                    keys[(table, outer)] = None
    return list(keys)


def row_changes(tables: dict, routes: RouteInfoManager, touched: list | None) -> dict:
    """The `set` and `del` of an `ns.tables` record: the touched rows (all, when None) that differ
    between `tables` (the NameServer's as its records left them) and `routes`. Empty: no change."""
    sets: dict = {}
    dels: dict = {}
    for table, key in _every_row(tables, routes) if touched is None else touched:
        now, held = _row_now(routes, table, key), _row_held(tables, table, key)
        if now == held:
            continue
        if table in NESTED:
            outer, inner = key
            if now is _GONE:
                dels.setdefault(table, {}).setdefault(outer, []).append(inner)
            elif table == "topicQueueTable":
                sets.setdefault(table, {}).setdefault(outer, {})[inner] = now
            else:
                sets.setdefault(table, {}).setdefault(outer, []).append(inner)
        elif now is _GONE:
            dels.setdefault(table, []).append(key)
        else:
            sets.setdefault(table, {})[key] = now
    order = lambda changes: {t: changes[t] for t in TABLES if t in changes}  # noqa: E731
    return {**({"set": order(sets)} if sets else {}), **({"del": order(dels)} if dels else {})}


def merge_tables(tables: dict, record: dict, *, name_sets: bool = False) -> dict:
    """A NameServer's tables after an `ns.tables` record, changed in place and returned: tables a
    record carries whole replace the ones held (schemas 1-3, and a first record after a start);
    then its `del` and `set` rows apply. Nothing of the record is changed, nor shared where a later
    record would change it. A field of the wrong shape (a damaged log) is skipped. name_sets: each
    cluster's names kept as a dict (an ordered set), so that the writer's look at a row costs the
    same whatever the cluster's size; readers get lists, as the records carry them."""
    for name in TABLES:
        whole = record.get(name)
        if isinstance(whole, dict):
            own = dict.fromkeys if name_sets and name == "clusterAddrTable" else _own
            tables[name] = {k: own(v) for k, v in whole.items()}
        else:
            tables.setdefault(name, {})
    for name, gone in _dict(record.get("del")).items():
        table = tables.get(name)
        if table is None:
            continue
        if name in NESTED:
            for outer, keys in _dict(gone).items():
                rows = table.get(outer)
                if isinstance(rows, (dict, list)) and isinstance(keys, list):
                    for key in keys:
                        if isinstance(rows, dict):
                            rows.pop(key, None)
                        elif key in rows:
                            rows.remove(key)
                    if not rows:
                        del table[outer]
        elif isinstance(gone, list):
            for key in gone:
                if isinstance(key, str):
                    table.pop(key, None)
    for name, rows in _dict(record.get("set")).items():
        table = tables.get(name)
        if table is None or not isinstance(rows, dict):
            continue
        if name in NESTED:  # rows join the topic's (cluster's) own, in place
            kind = dict if name == "topicQueueTable" else list
            for outer, inner in rows.items():
                if isinstance(inner, kind):
                    held = table.get(outer)
                    if isinstance(held, dict):  # a topic's queues, or a cluster's names (name_sets)
                        held.update(inner if kind is dict else dict.fromkeys(inner))
                    elif isinstance(held, list) and kind is list:
                        held.extend(inner)
                    else:
                        table[outer] = dict.fromkeys(inner) if name_sets and kind is list else kind(inner)
        else:
            table.update(rows)
    return tables


def _own(value):
    """A copy of a table's value that merges can change (a topic's queues, a cluster's names)."""
    return dict(value) if isinstance(value, dict) else list(value) if isinstance(value, list) else value


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def changed_rows(tables: dict, record: dict) -> list[tuple[str, str]]:
    """The (table, key) rows an `ns.tables` record changes in `tables` (before it is merged), by
    each table's top-level key: what the TUI's divergence monitor looks at again."""
    changed: dict = {}
    for name in TABLES:
        if isinstance(record.get(name), dict):
            old, new = tables.get(name, {}), record[name]
            changed.update(((name, k), None) for k in {**old, **new} if old.get(k) != new.get(k))
    for part in ("del", "set"):
        for name, rows in _dict(record.get(part)).items():
            if name in TABLES and isinstance(rows, (dict, list)):
                changed.update(((name, k), None) for k in rows if isinstance(k, str))
    return list(changed)
