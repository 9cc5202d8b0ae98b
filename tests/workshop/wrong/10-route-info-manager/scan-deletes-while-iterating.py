"""The scan deletes from brokerLiveTable while iterating it.
expect-fail: test_scan_expires_the_silent_only
expect-text: dictionary changed size during iteration
expect-text: scan-deletes-while-iterating.py
expect-not-text: ExceptionGroup
"""

from _reference_10 import Reference


class RouteInfoManager(Reference):
    def scan_not_active_broker(self, now):
        removed = []
        for addr, live in self.broker_live_table.items():
            if live.last_update_timestamp + self.broker_channel_expired_time < now:
                del self.broker_live_table[addr]
                removed.append((self._remove_broker_addr(addr, "expired"), live.channel))
        return removed
