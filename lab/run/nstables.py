"""A NameServer's five tables as plain data: what `ns.tables` events carry, and what the TUI and the
replay rebuild a NameServer's view from. Keys keep RocketMQ's table names.

Since schema 3 an `ns.tables` carries only the tables that changed since the NameServer's previous
one (its first after a start, all five): a broker's new dataVersion changes brokerLiveTable alone,
and repeating a topicQueueTable of 2,000 topics with it made most of a large cluster's log.
Readers keep each NameServer's tables and `merge_tables` each record into them."""

from __future__ import annotations

from nameserver.routes import RouteInfoManager

TABLES = ("topicQueueTable", "brokerAddrTable", "clusterAddrTable", "brokerLiveTable", "filterServerTable")


def snapshot(routes: RouteInfoManager, topic_queue_table: dict | None = None) -> dict:
    """Everything but heartbeat times, which change every 30 s and travel in `ns.register` events.
    topic_queue_table: the table's snapshot as it stands, when the caller knows it has not changed
    (RouteInfoManager.topic_queue_generation) — shared, never changed."""
    if topic_queue_table is None:
        topic_queue_table = {
            topic: {name: [qd.read_queue_nums, qd.write_queue_nums, qd.perm, qd.topic_sys_flag]
                    for name, qd in queue_map.items()}
            for topic, queue_map in routes.topic_queue_table.items()
        }
    return {
        "topicQueueTable": topic_queue_table,
        "brokerAddrTable": {
            name: {"cluster": bd.cluster, "brokerAddrs": {str(i): a for i, a in bd.broker_addrs.items()}}
            for name, bd in routes.broker_addr_table.items()
        },
        "clusterAddrTable": {cluster: list(names) for cluster, names in routes.cluster_addr_table.items()},
        "brokerLiveTable": {
            addr: {"dataVersion": list(live.data_version), "haServerAddr": live.ha_server_addr}
            for addr, live in routes.broker_live_table.items()
        },
        "filterServerTable": {addr: list(servers) for addr, servers in routes.filter_server_table.items()},
    }


def changed_tables(previous: dict | None, tables: dict) -> dict:
    """What an `ns.tables` record carries: the tables unlike `previous` (the NameServer's tables as
    its last record left them; None before its first, when all five go)."""
    if previous is None:
        return tables
    return {name: table for name, table in tables.items()
            if previous.get(name) is not table and previous.get(name) != table}


def merge_tables(tables: dict, record: dict) -> dict:
    """A NameServer's tables after an `ns.tables` record: those it carries replace the ones held
    (a version 1 or 2 record carries all five). `tables` is not changed."""
    return {name: record[name] if name in record else tables.get(name, {}) for name in TABLES}
