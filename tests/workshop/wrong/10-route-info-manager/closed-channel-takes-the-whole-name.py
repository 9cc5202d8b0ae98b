"""A closed channel removes every address of the broker name, the slave's with the master's.
expect-fail: test_tables_follow_4_9_8_on_generated_requests
expect-not: test_closed_channel_removes_its_broker
"""

from _reference_10 import Reference


class RouteInfoManager(Reference):
    def on_channel_destroy(self, channel, remote_addr):
        removed = super().on_channel_destroy(channel, remote_addr)
        if removed is not None and removed.broker_name in self.broker_addr_table:
            for addr in list(self.broker_addr_table[removed.broker_name].broker_addrs.values()):
                self.broker_live_table.pop(addr, None)
                self._remove_broker_addr(addr, "channel_closed")
        return removed
