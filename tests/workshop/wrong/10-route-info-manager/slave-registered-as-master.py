"""Every registration goes under id 0: a slave takes its master's place in brokerAddrTable.
expect-fail: test_a_slave_learns_its_master
"""

from _reference_10 import Reference


class RouteInfoManager(Reference):
    def register_broker(self, cluster_name, broker_addr, broker_name, broker_id, *rest):
        result = super().register_broker(cluster_name, broker_addr, broker_name, 0, *rest)
        return result
