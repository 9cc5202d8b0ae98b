"""Applies every registration's topics, a slave's too.
expect-fail: test_a_slave_learns_its_master
"""

from lab.workshop.interfaces import QueueData, RegisterBrokerResult

from _reference_10 import Reference


class RouteInfoManager(Reference):
    def register_broker(self, cluster_name, broker_addr, broker_name, broker_id, ha_server_addr,
                        data_version, topic_config_table, filter_server_list, channel, now):
        result = super().register_broker(cluster_name, broker_addr, broker_name, broker_id, ha_server_addr,
                                         data_version, topic_config_table, filter_server_list, channel, now)
        for tc in (topic_config_table or {}).values():
            self.topic_queue_table.setdefault(tc.topic_name, {})[broker_name] = QueueData(
                broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag)
        return RegisterBrokerResult(result.ha_server_addr, result.master_addr, result.first, True)
