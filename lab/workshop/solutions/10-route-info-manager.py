"""Reference solution for exercise 10: RocketMQ 4.9.8's RouteInfoManager, its four changes."""

from lab.workshop.interfaces import (MASTER_ID, BrokerData, BrokerLiveInfo, QueueData, RegisterBrokerResult,
                                     RemovedBroker)


class RouteInfoManager:
    def __init__(self, broker_channel_expired_time=120.0):
        self.broker_channel_expired_time = broker_channel_expired_time
        self.topic_queue_table = {}    # topic -> {broker_name: QueueData}
        self.broker_addr_table = {}    # broker_name -> BrokerData
        self.cluster_addr_table = {}   # cluster -> set of broker names
        self.broker_live_table = {}    # broker_addr -> BrokerLiveInfo
        self.filter_server_table = {}  # broker_addr -> [filter server]

    def register_broker(self, cluster_name, broker_addr, broker_name, broker_id, ha_server_addr,
                        data_version, topic_config_table, filter_server_list, channel, now):
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)
        broker_data = self.broker_addr_table.setdefault(broker_name, BrokerData(cluster_name, broker_name))
        addrs = broker_data.broker_addrs
        # A slave switched to master: its ip:port leaves its old id first.
        for other_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
            del addrs[other_id]
        register_first = addrs.get(broker_id) is None
        addrs[broker_id] = broker_addr

        topics_applied = False
        if topic_config_table is not None and broker_id == MASTER_ID:
            live = self.broker_live_table.get(broker_addr)
            if register_first or live is None or live.data_version != data_version:
                for tc in topic_config_table.values():
                    self.topic_queue_table.setdefault(tc.topic_name, {})[broker_name] = QueueData(
                        broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag)
                topics_applied = True

        previous = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(now, data_version, channel, ha_server_addr)

        if filter_server_list is not None:
            if filter_server_list:
                self.filter_server_table[broker_addr] = list(filter_server_list)
            else:
                self.filter_server_table.pop(broker_addr, None)

        ha_addr = master_addr = None
        if broker_id != MASTER_ID:
            master_live = self.broker_live_table.get(addrs.get(MASTER_ID, ""))
            if master_live is not None:
                ha_addr, master_addr = master_live.ha_server_addr, addrs[MASTER_ID]
        return RegisterBrokerResult(ha_addr, master_addr, previous is None, topics_applied)

    def unregister_broker(self, cluster_name, broker_addr, broker_name, broker_id):
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        removed = RemovedBroker(broker_addr, "unregistered", broker_name, broker_id, cluster_name)
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None:
            broker_data.broker_addrs.pop(broker_id, None)  # by id, whatever address it holds
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_name]
                removed.broker_name_removed = True
                self._remove_from_cluster(cluster_name, broker_name)
                removed.removed_topics = self._remove_topics_of(broker_name)
        return removed

    def scan_not_active_broker(self, now):
        # Decide first, then change: the table is not changed while it is iterated.
        expired = [addr for addr, live in self.broker_live_table.items()
                   if live.last_update_timestamp + self.broker_channel_expired_time < now]
        removed = []
        for addr in expired:
            live = self.broker_live_table.pop(addr)
            removed.append((self._remove_broker_addr(addr, "expired"), live.channel))
        return removed

    def on_channel_destroy(self, channel, remote_addr):
        broker_addr = next((addr for addr, live in self.broker_live_table.items() if live.channel is channel),
                           remote_addr)  # 4.9.8's fallback: the peer's address
        known = broker_addr in self.broker_live_table or any(
            broker_addr in bd.broker_addrs.values() for bd in self.broker_addr_table.values())
        if not known:
            return None
        self.broker_live_table.pop(broker_addr, None)
        return self._remove_broker_addr(broker_addr, "channel_closed")

    def _remove_broker_addr(self, broker_addr, reason):
        self.filter_server_table.pop(broker_addr, None)
        removed = RemovedBroker(broker_addr, reason)
        for broker_data in self.broker_addr_table.values():
            broker_id = next((i for i, a in broker_data.broker_addrs.items() if a == broker_addr), None)
            if broker_id is None:
                continue
            del broker_data.broker_addrs[broker_id]
            removed.broker_name, removed.broker_id = broker_data.broker_name, broker_id
            removed.cluster_name = broker_data.cluster
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_data.broker_name]
                removed.broker_name_removed = True
                for cluster_name, names in list(self.cluster_addr_table.items()):
                    if broker_data.broker_name in names:
                        self._remove_from_cluster(cluster_name, broker_data.broker_name)
                        break
                removed.removed_topics = self._remove_topics_of(broker_data.broker_name)
            break
        return removed

    def _remove_from_cluster(self, cluster_name, broker_name):
        names = self.cluster_addr_table.get(cluster_name)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self.cluster_addr_table[cluster_name]

    def _remove_topics_of(self, broker_name):
        emptied = []
        for topic, queues in self.topic_queue_table.items():
            if queues.pop(broker_name, None) is not None and not queues:
                emptied.append(topic)
        for topic in emptied:
            del self.topic_queue_table[topic]
        return emptied
