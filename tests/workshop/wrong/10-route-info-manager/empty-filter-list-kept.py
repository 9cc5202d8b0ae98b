"""An empty filter server list leaves the old one in filterServerTable (4.9.8 removes the entry).
expect-fail: test_tables_follow_4_9_8_on_generated_requests
expect-text: an empty filter server list removes the broker's entry
"""

from _reference_10 import Reference


class RouteInfoManager(Reference):
    def register_broker(self, cluster_name, broker_addr, broker_name, broker_id, ha, version, topics, filters,
                        channel, now):
        kept = self.filter_server_table.get(broker_addr)
        result = super().register_broker(cluster_name, broker_addr, broker_name, broker_id, ha, version, topics,
                                         filters, channel, now)
        if filters == [] and kept is not None:
            self.filter_server_table[broker_addr] = kept
        return result
