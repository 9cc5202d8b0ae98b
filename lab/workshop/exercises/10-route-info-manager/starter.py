"""Exercise 10: the NameServer's RouteInfoManager — its five tables and the four changes to them.

Every NameServer of the lab builds this class (RouteInfoManager(broker_channel_expired_time)) and
calls the four methods below; the lab's own code answers route queries from your tables. The types
come from lab.workshop.interfaces (read its docstring); the rules are in the brief
(`nslab workshop show 10`).

Check: nslab workshop check 10
"""

from lab.workshop.interfaces import (MASTER_ID, BrokerData, BrokerLiveInfo, QueueData, RegisterBrokerResult,
                                     RemovedBroker)


class RouteInfoManager:
    def __init__(self, broker_channel_expired_time=120.0):
        self.broker_channel_expired_time = broker_channel_expired_time
        self.topic_queue_table = {}    # topic -> {broker_name: QueueData}
        self.broker_addr_table = {}    # broker_name -> BrokerData(cluster, broker_name, {broker_id: addr})
        self.cluster_addr_table = {}   # cluster -> set of broker names
        self.broker_live_table = {}    # broker_addr -> BrokerLiveInfo(last_update_timestamp, data_version, channel, ha_server_addr)
        self.filter_server_table = {}  # broker_addr -> [filter server address]

    def register_broker(self, cluster_name, broker_addr, broker_name, broker_id, ha_server_addr,
                        data_version, topic_config_table, filter_server_list, channel, now):
        # The naive manager: remember the broker is alive and where it is, and nothing else.
        # TODO: the cluster, the broker's topics (a master's, when new or changed), filter servers,
        # a slave's master, and the RegisterBrokerResult.
        self.broker_addr_table.setdefault(broker_name, BrokerData(cluster_name, broker_name)).broker_addrs[broker_id] = broker_addr
        self.broker_live_table[broker_addr] = BrokerLiveInfo(now, data_version, channel, ha_server_addr)
        return RegisterBrokerResult()

    def unregister_broker(self, cluster_name, broker_addr, broker_name, broker_id):
        # TODO: take the broker out of every table it is in.
        self.broker_live_table.pop(broker_addr, None)
        return RemovedBroker(broker_addr, "unregistered", broker_name, broker_id, cluster_name)

    def scan_not_active_broker(self, now):
        # TODO: remove every broker silent for longer than the expiry; return (RemovedBroker, channel) pairs.
        return []

    def on_channel_destroy(self, channel, remote_addr):
        # TODO: remove the broker that registered on this channel; None when there is none.
        return None
