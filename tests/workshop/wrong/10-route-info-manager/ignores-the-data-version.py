"""Applies a master's topics at every heartbeat, changed or not.
expect-fail: test_topics_follow_the_data_version
"""

from lab.workshop.interfaces import DataVersion

from _reference_10 import Reference


class RouteInfoManager(Reference):
    def register_broker(self, cluster_name, broker_addr, broker_name, broker_id, ha_server_addr,
                        data_version, *rest):
        live = self.broker_live_table.get(broker_addr)
        if live is not None:  # forget the stored version: every body looks new
            live.data_version = DataVersion(-1, -1)
        return super().register_broker(cluster_name, broker_addr, broker_name, broker_id, ha_server_addr,
                                       data_version, *rest)
