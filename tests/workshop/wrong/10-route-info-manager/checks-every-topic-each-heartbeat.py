"""Applies the dataVersion rule right, but first walks every topic of every heartbeat to see whether
its queue data changed (rebuilding a QueueData per topic to compare): the tables are 4.9.8's, the
cost is 10,000 objects per broker every 30 s.
expect-fail: test_an_unchanged_heartbeat_of_10000_topics_is_cheap
expect-text: in the lab's (budget: 5x the lab's
expect-not: test_topics_follow_the_data_version
"""

from lab.workshop.interfaces import QueueData

from _reference_10 import Reference


class RouteInfoManager(Reference):
    def register_broker(self, cluster_name, broker_addr, broker_name, broker_id, ha_server_addr,
                        data_version, topic_config_table, *rest):
        if topic_config_table:
            self.changed_topics = sorted(
                tc.topic_name for tc in topic_config_table.values()
                if self.topic_queue_table.get(tc.topic_name, {}).get(broker_name) != QueueData(
                    broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag))
        return super().register_broker(cluster_name, broker_addr, broker_name, broker_id, ha_server_addr,
                                       data_version, topic_config_table, *rest)
