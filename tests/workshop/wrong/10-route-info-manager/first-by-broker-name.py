"""RegisterBrokerResult.first says whether the broker NAME was new, not whether the address was live.
expect-fail: test_tables_follow_4_9_8_on_generated_requests
expect-text: the RegisterBrokerResult's fields: first: want True, got False
"""

from _reference_10 import Reference


class RouteInfoManager(Reference):
    def register_broker(self, cluster_name, broker_addr, broker_name, *rest):
        new_name = broker_name not in self.broker_addr_table
        result = super().register_broker(cluster_name, broker_addr, broker_name, *rest)
        return result._replace(first=new_name)
