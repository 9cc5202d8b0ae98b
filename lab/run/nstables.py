"""A NameServer's five tables as plain data: what `ns.tables` events carry, and what the TUI and the
replay rebuild a NameServer's view from. Keys keep RocketMQ's table names."""

from __future__ import annotations

from nameserver.routes import RouteInfoManager


def snapshot(routes: RouteInfoManager) -> dict:
    """Everything but heartbeat times, which change every 30 s and travel in `ns.register` events."""
    return {
        "topicQueueTable": {
            topic: {name: [qd.read_queue_nums, qd.write_queue_nums, qd.perm, qd.topic_sys_flag]
                    for name, qd in queue_map.items()}
            for topic, queue_map in routes.topic_queue_table.items()
        },
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
