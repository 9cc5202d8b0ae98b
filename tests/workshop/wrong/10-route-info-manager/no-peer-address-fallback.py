"""A closed channel no broker registered on removes nothing — 4.9.8 falls back to the peer's address.
expect-fail: test_tables_follow_4_9_8_on_generated_requests
expect-not: test_closed_channel_removes_its_broker
"""

from _reference_10 import Reference


class RouteInfoManager(Reference):
    def on_channel_destroy(self, channel, remote_addr):
        if not any(live.channel is channel for live in self.broker_live_table.values()):
            return None
        return super().on_channel_destroy(channel, remote_addr)
